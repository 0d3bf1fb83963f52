//! `--watch SERVICE=docker:CONTAINER`: a container on a reachable Docker
//! engine, watched for restarts, exits and OOM kills, and sampled for CPU
//! and memory (see `watch`). Only in builds with the Docker API.

use bollard::query_parameters::InspectContainerOptions;
use bollard::Docker;

use super::ProcSample;
use crate::results::ServiceHealth;

/// A watched container and what was last seen of it.
pub struct WatchedContainer {
    docker: Docker,
    name: String,
    started_at: String,
    restart_count: i64,
    down: bool,
}

impl WatchedContainer {
    /// The running container `name`, or why it cannot be watched.
    pub async fn open(name: &str) -> Result<Self, String> {
        let docker = super::docker::connect().await.map_err(|e| e.to_string())?;
        let i = docker.inspect_container(name, None::<InspectContainerOptions>).await.map_err(|e| {
            format!("no container `{name}` on the Docker engine ({e}); give its name or id as `docker ps` shows it")
        })?;
        let st = i.state.unwrap_or_default();
        if !st.running.unwrap_or(false) {
            return Err(format!("container `{name}` is not running"));
        }
        Ok(WatchedContainer {
            docker,
            name: name.to_string(),
            started_at: st.started_at.unwrap_or_default(),
            restart_count: i.restart_count.unwrap_or(0),
            down: false,
        })
    }

    /// Look again: restarts, exits and OOM kills since the last look go
    /// into `h` and `events`.
    pub async fn poll(&mut self, service: &str, h: &mut ServiceHealth, events: &mut Vec<String>) {
        let name = &self.name;
        let Ok(i) = self.docker.inspect_container(name, None::<InspectContainerOptions>).await else {
            if !self.down {
                self.down = true;
                h.exits.push(format!("container {name} was removed"));
                h.state = "removed".into();
                events.push(format!("{service}: container {name} was removed"));
            }
            return;
        };
        let st = i.state.unwrap_or_default();
        let (running, exit, oom) =
            (st.running.unwrap_or(false), st.exit_code.unwrap_or(0), st.oom_killed.unwrap_or(false));
        let restarts = i.restart_count.unwrap_or(0);
        let started = st.started_at.unwrap_or_default();
        let how = super::docker::describe_exit(exit, oom);
        if restarts > self.restart_count || (running && started != self.started_at && !self.down) {
            h.restarts += (restarts - self.restart_count).max(1) as u32;
            h.exits.push(how.clone());
            h.oom_kills += oom as u32;
            events.push(format!("{service}: container {name} restarted ({how})"));
        } else if !running && !self.down {
            h.exits.push(how.clone());
            h.oom_kills += oom as u32;
            events.push(format!("{service}: container {name} {how}"));
        } else if running && self.down {
            h.restarts += 1;
            events.push(format!("{service}: container {name} is running again"));
        }
        self.restart_count = restarts;
        self.started_at = started;
        self.down = !running;
        h.state = if running { "running".into() } else { "exited".into() };
    }

    /// CPU and memory of the container now.
    pub async fn sample(&self, service: &str) -> Vec<ProcSample> {
        super::docker::container_sample(&self.docker, &self.name, service).await.into_iter().collect()
    }
}
