//! `run --workers N --engine swarm`: the workers as a Docker Swarm service
//! on this engine (replicas N, each capped in CPU and memory, on the host
//! network; worker k listens on the first port + k − 1 and takes its index
//! from the task's slot), and the service removed after the run, also on
//! Ctrl-C or an error. Only a service this run created is ever removed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::models::{
    Limit, NetworkAttachmentConfig, ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec,
    TaskSpecContainerSpec, TaskSpecResources, TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum, TaskState,
};
use bollard::Docker;

/// The label every service of ours carries, with the run's id.
pub const RUN_LABEL: &str = "scalebench.run";

/// How to start the workers.
#[derive(Debug, Clone)]
pub struct SwarmWorkers {
    pub workers: u32,
    pub image: String,
    pub cpus: f64,
    pub memory_bytes: i64,
    pub first_port: u16,
    pub run_id: String,
    /// The run's control-API token ([`super::token`]), in each worker's environment.
    pub token: String,
}

/// A running worker service: its name and the workers' control URLs.
pub struct Service {
    docker: Docker,
    pub name: String,
    pub urls: Vec<String>,
}

fn engine_error(what: &str, e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("Docker Swarm: {what}: {e}")
}

impl SwarmWorkers {
    fn spec(&self, name: &str) -> ServiceSpec {
        let labels = HashMap::from([(RUN_LABEL.to_string(), self.run_id.clone())]);
        ServiceSpec {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            mode: Some(ServiceSpecMode {
                replicated: Some(ServiceSpecModeReplicated { replicas: Some(self.workers as i64) }),
                ..Default::default()
            }),
            task_template: Some(TaskSpec {
                container_spec: Some(TaskSpecContainerSpec {
                    image: Some(self.image.clone()),
                    labels: Some(labels),
                    command: Some(vec!["scalebench".into()]),
                    args: Some(vec![
                        "worker".into(),
                        "--listen".into(),
                        format!("0.0.0.0:{}", self.first_port),
                        "--port-per-index".into(),
                    ]),
                    env: Some(vec![
                        "SCALEBENCH_WORKER_SLOT={{.Task.Slot}}".into(),
                        format!("{}={}", super::token::ENV, self.token),
                    ]),
                    ..Default::default()
                }),
                resources: Some(TaskSpecResources {
                    limits: Some(Limit {
                        nano_cpus: Some((self.cpus * 1e9) as i64),
                        memory_bytes: Some(self.memory_bytes),
                        pids: None,
                    }),
                    ..Default::default()
                }),
                // A worker that dies stays dead: the step names it lost,
                // a restarted worker would offer nothing it was told to.
                restart_policy: Some(TaskSpecRestartPolicy {
                    condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                    ..Default::default()
                }),
                networks: Some(vec![NetworkAttachmentConfig { target: Some("host".into()), ..Default::default() }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Create the service and wait (up to `wait`) until every task runs;
    /// the workers' URLs in slot order.
    ///
    /// Boxed at the crate's edge: see `crate::future`.
    pub fn start(&self, wait: Duration) -> crate::future::LocalBoxFuture<'_, anyhow::Result<Service>> {
        Box::pin(self.start_here(wait))
    }

    async fn start_here(&self, wait: Duration) -> anyhow::Result<Service> {
        let docker = Docker::connect_with_socket_defaults().map_err(|e| engine_error("no engine", e))?;
        let info = docker.info().await.map_err(|e| engine_error("the engine does not answer", e))?;
        let state = info.swarm.as_ref().and_then(|s| s.local_node_state);
        if state != Some(bollard::models::LocalNodeState::ACTIVE) {
            anyhow::bail!(crate::error::UsageError(
                "this Docker engine is not part of a swarm: `--engine swarm` starts the workers as a Swarm service\nhint: `docker swarm init --advertise-addr 127.0.0.1` makes a single-node swarm (docs/scale-out.md)".into()
            ));
        }
        if docker.inspect_image(&self.image).await.is_err() {
            anyhow::bail!(crate::error::UsageError(format!(
                "the worker image {} is not on this engine\nhint: build it with scripts/docker-images.sh (it carries this scalebench binary)",
                self.image
            )));
        }
        let name = format!("scalebench-workers-{}", self.run_id);
        docker
            .create_service(self.spec(&name), None)
            .await
            .map_err(|e| engine_error("cannot create the service", e))?;
        let service = Service { docker, name, urls: Vec::new() };
        match service.wait_running(self, wait).await {
            Ok(urls) => Ok(Service { urls, ..service }),
            Err(e) => {
                service.remove().await;
                Err(e)
            }
        }
    }
}

impl Service {
    async fn wait_running(&self, w: &SwarmWorkers, wait: Duration) -> anyhow::Result<Vec<String>> {
        let deadline = Instant::now() + wait;
        loop {
            let filters = HashMap::from([("service".to_string(), vec![self.name.clone()])]);
            let tasks = self
                .docker
                .list_tasks(Some(bollard::query_parameters::ListTasksOptions { filters: Some(filters) }))
                .await
                .map_err(|e| engine_error("cannot list the service's tasks", e))?;
            let mut running = Vec::new();
            let mut problems = Vec::new();
            for t in &tasks {
                let status = t.status.as_ref();
                match status.and_then(|s| s.state) {
                    Some(TaskState::RUNNING) => {
                        running.push((t.slot.unwrap_or(0), t.node_id.clone().unwrap_or_default()))
                    }
                    Some(TaskState::FAILED | TaskState::REJECTED) => problems.push(format!(
                        "slot {}: {}",
                        t.slot.unwrap_or(0),
                        status.and_then(|s| s.err.clone().or(s.message.clone())).unwrap_or_default()
                    )),
                    _ => {}
                }
            }
            if !problems.is_empty() {
                anyhow::bail!("Docker Swarm: workers did not start: {}", problems.join("; "));
            }
            if running.len() as u32 >= w.workers {
                running.sort();
                let mut urls = Vec::new();
                for (slot, node) in running.into_iter().take(w.workers as usize) {
                    let addr = self
                        .docker
                        .inspect_node(&node)
                        .await
                        .ok()
                        .and_then(|n| n.status.and_then(|s| s.addr))
                        .filter(|a| !a.is_empty() && a != "0.0.0.0")
                        .unwrap_or_else(|| "127.0.0.1".into());
                    let url = format!("http://{addr}:{}", w.first_port as i64 + slot - 1);
                    urls.push(super::token::url_with(&url, &w.token));
                }
                return Ok(urls);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "Docker Swarm: {} of {} workers running after {} s",
                    tasks
                        .iter()
                        .filter(|t| t.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING))
                        .count(),
                    w.workers,
                    wait.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Remove the service and wait (up to 30 s) until its containers are
    /// gone, so their ports are free again.
    pub fn remove(&self) -> crate::future::LocalBoxFuture<'_, ()> {
        Box::pin(self.remove_here())
    }

    async fn remove_here(&self) {
        if let Err(e) = self.docker.delete_service(&self.name).await {
            tracing::info!(
                "workers: could not remove the Swarm service {}: {e} (remove it with `docker service rm {}`)",
                self.name,
                self.name
            );
            return;
        }
        let filters =
            HashMap::from([("label".to_string(), vec![format!("com.docker.swarm.service.name={}", self.name)])]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let left = self
                .docker
                .list_containers(Some(bollard::query_parameters::ListContainersOptions {
                    all: true,
                    filters: Some(filters.clone()),
                    ..Default::default()
                }))
                .await
                .map(|c| c.len())
                .unwrap_or(0);
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tracing::info!("workers: removed the Swarm service {}", self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_spec_caps_each_worker_and_takes_the_index_from_the_slot() {
        let w = SwarmWorkers {
            workers: 3,
            image: "scale-worker:bookworm".into(),
            cpus: 0.3,
            memory_bytes: 512 << 20,
            first_port: 27100,
            run_id: "r1".into(),
            token: "0123456789abcdef0123456789abcdef".into(),
        };
        let s = w.spec("scalebench-workers-r1");
        assert_eq!(s.mode.unwrap().replicated.unwrap().replicas, Some(3));
        let t = s.task_template.unwrap();
        let limits = t.resources.unwrap().limits.unwrap();
        assert_eq!((limits.nano_cpus, limits.memory_bytes), (Some(300_000_000), Some(512 << 20)));
        let c = t.container_spec.unwrap();
        assert_eq!(
            c.env.unwrap(),
            vec![
                "SCALEBENCH_WORKER_SLOT={{.Task.Slot}}".to_string(),
                "SCALEBENCH_WORKER_TOKEN=0123456789abcdef0123456789abcdef".to_string()
            ]
        );
        assert!(c.args.unwrap().contains(&"--port-per-index".to_string()));
        assert_eq!(t.restart_policy.unwrap().condition, Some(TaskSpecRestartPolicyConditionEnum::NONE));
        assert_eq!(s.labels.unwrap().get(RUN_LABEL).map(String::as_str), Some("r1"));
    }
}
