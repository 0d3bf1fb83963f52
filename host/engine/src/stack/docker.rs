//! The Docker driver (`--stack docker`): a compose file from `compose/` run
//! as its own project through the Docker Engine API (bollard), with compose
//! labels so `docker compose ls/ps` sees it. Before up, run, crash and down
//! the effective configuration passes the isolation guard
//! ([`super::compose::check`]).
//!
//! Every container gets a CPU and memory cap and capped logs; every sample
//! reads CPU (100 = one core), memory against its cap and block I/O from the
//! stats API; restarts, exits and OOM kills come from inspect (a container
//! that exited is brought back, like a restart policy, and its exit code and
//! `OOMKilled` are recorded). SIGSTOP/SIGCONT are pause/unpause (the cgroup
//! freezer: the whole container, not only its PID 1).
//!
//! A service tells the driver what it is by labels in the compose file:
//! `scale.service` (the name a target's plan uses: broker, postgres, nats)
//! and `scale.kind` (mqtt, postgres, nats, http).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, HostConfigLogConfig, NetworkCreateRequest, NetworkingConfig,
    PortBinding, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, KillContainerOptions, ListContainersOptions, LogsOptions,
    RemoveContainerOptions, RemoveVolumeOptions, StartContainerOptions, StatsOptions,
};
use bollard::Docker;
use futures::StreamExt;

use super::compose::{self, Project};
use super::{Endpoint, ProcSample, ServiceKind, StackDriver};
use crate::future::BoxFuture;
use crate::results::ServiceHealth;

pub const PROJECT_LABEL: &str = "com.docker.compose.project";
pub const SERVICE_LABEL: &str = "com.docker.compose.service";

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("cannot reach the Docker engine: {detail}\nhint: start it (e.g. `dockerd --storage-driver vfs --iptables=false &`), or use --stack local")]
    Engine { detail: String },
    #[error("Docker: {what}: {detail}\nhint: {hint}")]
    Api { what: String, detail: String, hint: String },
    #[error(transparent)]
    Compose(#[from] compose::ComposeError),
    #[error("{problem}\nhint: {hint}")]
    Refused { problem: String, hint: String },
}

fn api(what: impl Into<String>, e: bollard::errors::Error, hint: &str) -> DockerError {
    DockerError::Api { what: what.into(), detail: e.to_string(), hint: hint.into() }
}

/// What to bring up.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    pub compose_file: PathBuf,
    /// Project name (default: the file's `name`).
    pub project: Option<String>,
    /// Where the env file and logs go.
    pub run_dir: PathBuf,
    /// Values for the compose file (ports, caps, historian args …).
    pub env: BTreeMap<String, String>,
    /// Per-service (cpus, memory bytes) overrides.
    pub caps: BTreeMap<String, (Option<f64>, Option<i64>)>,
    pub cpuset: Option<String>,
    /// The directory scalebench runs in (never a project name).
    pub checkout_dir: PathBuf,
    pub ready_timeout: Duration,
    /// JetStream's sync_interval for the nats services (`always` or a
    /// duration), which they take as `SCALE_NATS_SYNC` (the nats image's
    /// entrypoint writes it into a config file); None: the server's default.
    pub nats_sync_interval: Option<String>,
    /// `--tls`: the run's throwaway CA, which makes every service TLS-only
    /// ([`super::docker_tls`]).
    pub tls: Option<crate::throwaway_ca::ThrowawayPki>,
}

struct Container {
    service: String,
    id: String,
}

pub struct DockerStack {
    docker: Docker,
    project: Project,
    containers: Vec<Container>,
    network: String,
    /// Docker volume names created for the file's volumes.
    volumes: Vec<String>,
    health: BTreeMap<String, ServiceHealth>,
    started_at: BTreeMap<String, String>,
    restart_counts: BTreeMap<String, i64>,
    last_check: Instant,
    paused: Vec<String>,
    root_dir: Option<PathBuf>,
    /// Remove volumes on stop (a run's own stack); `stack up` keeps them for `down`.
    remove_on_stop: bool,
    /// What the nats services run with, for the result: `nats.server_version`
    /// (`nats-server --version` in their image) and `nats.sync_interval`.
    /// Empty for a stack without nats services.
    nats_settings: BTreeMap<String, String>,
    /// `--tls`: what each container is given before it starts.
    tls: Option<super::docker_tls::DockerTls>,
}

/// The project's nats services (label `scale.kind=nats`).
fn nats_services(project: &Project) -> Vec<&compose::ServiceSpec> {
    project.services.iter().filter(|s| s.labels.get("scale.kind").map(String::as_str) == Some("nats")).collect()
}

/// `--nats-sync-interval` reaches a server only through `SCALE_NATS_SYNC`
/// in its environment (the nats image's entrypoint writes it into the
/// config): a compose file whose nats services do not pass it would run
/// them at their own setting while the result said otherwise.
fn sync_reaches_every_nats_service(project: &Project, sync: &str) -> Result<(), DockerError> {
    let services = nats_services(project);
    let want = format!("SCALE_NATS_SYNC={sync}");
    let missing: Vec<&str> =
        services.iter().filter(|s| !s.environment.contains(&want)).map(|s| s.name.as_str()).collect();
    let problem = if services.is_empty() {
        "there is no nats service (label scale.kind=nats)".to_string()
    } else if !missing.is_empty() {
        format!("service(s) {} do not take it", missing.join(", "))
    } else {
        return Ok(());
    };
    Err(DockerError::Refused {
        problem: format!(
            "--nats-sync-interval {sync}: {problem} in {} (a nats service takes it as the environment variable SCALE_NATS_SYNC, which the scale-nats image writes into its config)",
            project.file.display()
        ),
        hint: "give each nats service `environment: {SCALE_NATS_SYNC: \"${SCALE_NATS_SYNC:-}\"}` as compose/nats-3.yml does, or leave the sync interval at the server's default".into(),
    })
}

/// What the project's nats services run with: the version of the
/// nats-server in their image (asked of the image itself, `nats-server
/// --version` in a throwaway container) and the sync interval; a sync
/// interval the server does not know (before 2.10) is refused here, before
/// anything of the project exists.
async fn nats_settings(
    docker: &Docker,
    project: &Project,
    sync: Option<&str>,
) -> Result<BTreeMap<String, String>, DockerError> {
    let mut images: Vec<&str> = nats_services(project).iter().map(|s| s.image.as_str()).collect();
    images.sort();
    images.dedup();
    let mut out = BTreeMap::new();
    if images.is_empty() {
        return Ok(out);
    }
    let mut versions = Vec::new();
    for image in &images {
        // Only a sync interval needs the version; without one, an image
        // that cannot say is a server of unknown version (and a missing
        // image is refused by name when its container is created).
        match image_nats_version(docker, project, image).await {
            Ok(v) => versions.push(v),
            Err(e) if sync.is_some() => return Err(e),
            Err(_) => versions.push(None),
        }
    }
    if let Some(sync) = sync {
        for (image, version) in images.iter().zip(&versions) {
            if !local_stack::nats::knows_sync_interval(version.as_deref()) {
                return Err(DockerError::Refused {
                    problem: format!(
                        "--nats-sync-interval {sync}: the nats-server in image {image} ({}) does not know sync_interval (JetStream's disk sync setting came in 2.10)",
                        version.as_deref().unwrap_or("of unknown version")
                    ),
                    hint: "put a newer nats-server into the image: scripts/setup.sh installs 2.15 under /var/tmp/scalebench-py/bin, then scripts/docker-images.sh builds it in; or leave the sync interval at the server's default".into(),
                });
            }
        }
    }
    let version = match versions.as_slice() {
        [one] => one.clone().unwrap_or_else(|| "unknown".into()),
        _ => images
            .iter()
            .zip(&versions)
            .map(|(i, v)| format!("{} ({i})", v.as_deref().unwrap_or("unknown")))
            .collect::<Vec<_>>()
            .join(", "),
    };
    out.insert("nats.server_version".to_string(), version);
    out.insert("nats.sync_interval".to_string(), sync.unwrap_or(local_stack::nats::DEFAULT_SYNC_INTERVAL).to_string());
    Ok(out)
}

/// Every image the project names is on the engine, or the run is refused
/// before anything is created, naming all that are missing (scalebench
/// pulls nothing: it builds its own images, or takes yours under
/// `SCALE_IMAGE_PREFIX`).
async fn images_present(docker: &Docker, project: &Project) -> Result<(), DockerError> {
    let mut missing: Vec<&str> = Vec::new();
    for s in &project.services {
        if !missing.contains(&s.image.as_str()) && docker.inspect_image(&s.image).await.is_err() {
            missing.push(&s.image);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(DockerError::Refused {
        problem: format!("image(s) not on this Docker engine: {}", missing.join(", ")),
        hint: "build scalebench's own with scripts/docker-images.sh; with SCALE_IMAGE_PREFIX set, pull or tag yours under that prefix first".into(),
    })
}

/// The version of the nats-server in `image` ("v2.15.1"): its entrypoint
/// (nats-server, or the scale-nats wrapper of it) given `--version`, in a
/// container of its own (no network, labelled with the project, so a `down`
/// would remove it too) that is removed again; None when its output names
/// no version.
async fn image_nats_version(docker: &Docker, project: &Project, image: &str) -> Result<Option<String>, DockerError> {
    let name = format!("{}-nats-version", project.name);
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(vec!["--version".into()]),
        labels: Some(labels(project, None)),
        host_config: Some(HostConfig { network_mode: Some("none".into()), ..Default::default() }),
        ..Default::default()
    };
    let what = format!("asking image {image} for its nats-server's version");
    // One left by a run that died here would hold the name.
    let _ = docker.remove_container(&name, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
    let id = docker
        .create_container(Some(CreateContainerOptions { name: Some(name), platform: String::new() }), body)
        .await
        .map_err(|e| api(what.clone(), e, "build the images first: scripts/docker-images.sh"))?
        .id;
    let run = async {
        docker.start_container(&id, None::<StartContainerOptions>).await?;
        let opts = LogsOptions { follow: true, stdout: true, stderr: true, ..Default::default() };
        let mut logs = docker.logs(&id, Some(opts));
        let mut text = String::new();
        while let Some(chunk) = logs.next().await {
            text.push_str(&chunk?.to_string());
        }
        Ok::<_, bollard::errors::Error>(text)
    };
    let text = tokio::time::timeout(Duration::from_secs(30), run).await;
    let _ = docker.remove_container(&id, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
    match text {
        Ok(Ok(text)) => Ok(local_stack::nats::version_in(&text)),
        Ok(Err(e)) => Err(api(what, e, "see `docker logs` of a nats container")),
        Err(_) => Err(DockerError::Api {
            what,
            detail: "no answer within 30 s".into(),
            hint: "check the Docker engine (docker info)".into(),
        }),
    }
}

/// Connect to the local engine and agree on an API version it speaks.
///
/// This module's public futures are boxed at the crate's edge: see
/// `crate::future`.
pub fn connect() -> crate::future::LocalBoxFuture<'static, Result<Docker, DockerError>> {
    Box::pin(connect_here())
}

async fn connect_here() -> Result<Docker, DockerError> {
    let d = Docker::connect_with_socket_defaults().map_err(|e| DockerError::Engine { detail: e.to_string() })?;
    let d = d.negotiate_version().await.map_err(|e| DockerError::Engine { detail: e.to_string() })?;
    d.ping().await.map_err(|e| DockerError::Engine { detail: e.to_string() })?;
    Ok(d)
}

fn volume_name(project: &str, key: &str) -> String {
    // scale_<key>_<project>: starts with scale_, unique per project.
    format!("{key}_{project}")
}

fn container_name(project: &str, service: &str) -> String {
    format!("{project}-{service}-1")
}

fn labels(project: &Project, service: Option<&str>) -> HashMap<String, String> {
    let mut l = HashMap::from([
        (PROJECT_LABEL.to_string(), project.name.clone()),
        ("com.docker.compose.project.config_files".to_string(), project.file.display().to_string()),
        (
            "com.docker.compose.project.working_dir".to_string(),
            project.file.parent().map(|p| p.display().to_string()).unwrap_or_default(),
        ),
        ("com.docker.compose.version".to_string(), "2.20.0".to_string()),
        ("scale.created-by".to_string(), "scalebench".to_string()),
    ]);
    if let Some(s) = service {
        l.insert(SERVICE_LABEL.into(), s.into());
        l.insert("com.docker.compose.container-number".into(), "1".into());
        l.insert("com.docker.compose.oneoff".into(), "False".into());
    }
    l
}

/// Services in dependency order.
fn ordered(project: &Project) -> Vec<&compose::ServiceSpec> {
    let mut out: Vec<&compose::ServiceSpec> = Vec::new();
    let mut left: Vec<&compose::ServiceSpec> = project.services.iter().collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|s| {
            if s.depends_on.iter().all(|d| out.iter().any(|o| &o.name == d)) {
                out.push(s);
                false
            } else {
                true
            }
        });
        if left.len() == before {
            out.append(&mut left);
        }
    }
    out
}

impl DockerStack {
    /// Load, guard, and bring up the project; on any error whatever was
    /// created is removed again.
    pub fn up(
        opts: &DockerOptions,
        remove_on_stop: bool,
    ) -> crate::future::LocalBoxFuture<'_, Result<DockerStack, DockerError>> {
        Box::pin(Self::up_here(opts, remove_on_stop))
    }

    async fn up_here(opts: &DockerOptions, remove_on_stop: bool) -> Result<DockerStack, DockerError> {
        let env_file = compose::write_env_file(&opts.run_dir, &opts.env).map_err(|e| DockerError::Api {
            what: "writing the env file".into(),
            detail: e.to_string(),
            hint: "choose a writable run directory".into(),
        })?;
        let nproc = crate::hardware::nproc();
        let mut project = compose::load(
            &opts.compose_file,
            &opts.env,
            &env_file,
            opts.project.as_deref(),
            &opts.caps,
            opts.cpuset.as_deref(),
            nproc,
        )?;
        compose::check(&project, &opts.checkout_dir, true)?;
        let tls = opts
            .tls
            .as_ref()
            .map(|pki| super::docker_tls::DockerTls::apply(pki, &mut project))
            .transpose()
            .map_err(|r| DockerError::Refused { problem: r.problem, hint: r.hint })?;
        if let Some(sync) = &opts.nats_sync_interval {
            sync_reaches_every_nats_service(&project, sync)?;
        }
        let docker = connect().await?;
        images_present(&docker, &project).await?;
        let nats_settings = nats_settings(&docker, &project, opts.nats_sync_interval.as_deref()).await?;
        // Only now, with every refusal behind it, is anything started.
        tracing::info!("starting the docker stack {} from {}", project.name, opts.compose_file.display());
        let root_dir = docker.info().await.ok().and_then(|i| i.docker_root_dir).map(PathBuf::from);
        let mut stack = DockerStack {
            network: format!("{}_default", project.name),
            docker,
            project,
            containers: Vec::new(),
            volumes: Vec::new(),
            health: BTreeMap::new(),
            started_at: BTreeMap::new(),
            restart_counts: BTreeMap::new(),
            last_check: Instant::now(),
            paused: Vec::new(),
            root_dir,
            remove_on_stop,
            nats_settings,
            tls,
        };
        match stack.create_all(opts.ready_timeout).await {
            Ok(()) => Ok(stack),
            Err(e) => {
                stack.down().await;
                Err(e)
            }
        }
    }

    async fn create_all(&mut self, ready_timeout: Duration) -> Result<(), DockerError> {
        let p = self.project.clone();
        self.docker
            .create_network(NetworkCreateRequest {
                name: self.network.clone(),
                driver: Some("bridge".into()),
                labels: Some(labels(&p, None)),
                ..Default::default()
            })
            .await
            .map_err(|e| {
                api(
                    format!("creating network {}", self.network),
                    e,
                    "remove a leftover with `scalebench stack down --stack docker`",
                )
            })?;
        for key in &p.volumes {
            let name = volume_name(&p.name, key);
            let mut l = labels(&p, None);
            l.insert("com.docker.compose.volume".into(), key.clone());
            self.docker
                .create_volume(VolumeCreateRequest { name: Some(name.clone()), labels: Some(l), ..Default::default() })
                .await
                .map_err(|e| api(format!("creating volume {name}"), e, "check the Docker engine"))?;
            self.volumes.push(name);
        }
        // Creating a container on the vfs storage driver copies its image's
        // layers (seconds each), so every container is created at once; they
        // are still started one by one, in dependency order, each once the
        // one before is ready.
        let services = ordered(&p);
        let created = futures::future::join_all(services.iter().map(|s| self.create_with_certificate(s))).await;
        let ids = created.into_iter().collect::<Result<Vec<_>, _>>()?;
        for (s, id) in services.into_iter().zip(ids) {
            self.docker
                .start_container(&id, None::<StartContainerOptions>)
                .await
                .map_err(|e| api(format!("starting {}", s.name), e, "see `docker logs` of the container"))?;
            self.containers.push(Container { service: s.name.clone(), id });
            self.health.insert(
                s.name.clone(),
                ServiceHealth { state: "running".into(), oom_measured: true, ..Default::default() },
            );
            self.wait_ready(s, ready_timeout).await?;
            let info = self.inspect(&s.name).await;
            if let Some((started, restarts)) = info.as_ref().map(|i| (i.0.clone(), i.1)) {
                self.started_at.insert(s.name.clone(), started);
                self.restart_counts.insert(s.name.clone(), restarts);
            }
        }
        Ok(())
    }

    /// Creates the service's container and, in a TLS stack, gives it its
    /// certificate before it starts.
    async fn create_with_certificate(&self, s: &compose::ServiceSpec) -> Result<String, DockerError> {
        let id = self.create_container(s).await?;
        if let Some(tls) = &self.tls {
            let options = bollard::query_parameters::UploadToContainerOptionsBuilder::new().path("/").build();
            self.docker
                .upload_to_container(&id, Some(options), bollard::body_full(tls.archive(s).into()))
                .await
                .map_err(|e| api(format!("giving {} its TLS certificate", s.name), e, "check the Docker engine"))?;
        }
        Ok(id)
    }

    async fn create_container(&self, s: &compose::ServiceSpec) -> Result<String, DockerError> {
        let p = &self.project;
        let mut port_bindings = HashMap::new();
        let mut exposed = Vec::new();
        for port in &s.ports {
            let key = format!("{}/tcp", port.container_port);
            port_bindings.insert(
                key.clone(),
                Some(vec![PortBinding {
                    host_ip: Some(port.host_ip.clone()),
                    host_port: Some(port.host_port.to_string()),
                }]),
            );
            exposed.push(key);
        }
        let binds: Vec<String> =
            s.volumes.iter().map(|(src, dst)| format!("{}:{dst}", volume_name(&p.name, src))).collect();
        let host = HostConfig {
            nano_cpus: Some((s.cpus * 1e9) as i64),
            memory: Some(s.memory_bytes),
            memory_swap: Some(s.memory_bytes),
            cpuset_cpus: s.cpuset.clone(),
            port_bindings: Some(port_bindings),
            binds: Some(binds),
            log_config: Some(HostConfigLogConfig {
                typ: Some("json-file".into()),
                config: Some(HashMap::from([
                    ("max-size".into(), s.log_max_size.clone()),
                    ("max-file".into(), s.log_max_file.clone()),
                ])),
            }),
            network_mode: Some(self.network.clone()),
            privileged: Some(false),
            ..Default::default()
        };
        let mut l = labels(p, Some(&s.name));
        l.extend(s.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        let healthcheck = s.healthcheck.clone().map(|test| bollard::models::HealthConfig {
            test: Some(test),
            interval: Some(500_000_000),
            timeout: Some(5_000_000_000),
            retries: Some(240),
            ..Default::default()
        });
        let body = ContainerCreateBody {
            healthcheck,
            image: Some(s.image.clone()),
            cmd: s.command.clone(),
            env: Some(s.environment.clone()),
            labels: Some(l),
            exposed_ports: Some(exposed),
            host_config: Some(host),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    self.network.clone(),
                    EndpointSettings { aliases: Some(vec![s.name.clone()]), ..Default::default() },
                )])),
            }),
            ..Default::default()
        };
        let name = container_name(&p.name, &s.name);
        let r = self
            .docker
            .create_container(Some(CreateContainerOptions { name: Some(name.clone()), platform: String::new() }), body)
            .await
            .map_err(|e| {
                api(
                    format!("creating container {name} from image {}", s.image),
                    e,
                    "build the images first: scripts/docker-images.sh",
                )
            })?;
        Ok(r.id)
    }

    /// Ready: each published port accepts a connection (and the container runs).
    async fn wait_ready(&self, s: &compose::ServiceSpec, timeout: Duration) -> Result<(), DockerError> {
        let deadline = Instant::now() + timeout;
        loop {
            let running = self.inspect(&s.name).await.is_some_and(|i| i.2);
            let mut open = running && (s.healthcheck.is_none() || self.healthy(&s.name).await == Some(true));
            for p in &s.ports {
                open &= tokio::net::TcpStream::connect(("127.0.0.1", p.host_port)).await.is_ok();
            }
            if open {
                // A published port accepts TCP (the engine's proxy) before
                // the server behind it listens: ask the server itself.
                let port = s.ports.first().map(|p| p.host_port);
                match (s.labels.get("scale.kind").map(String::as_str), port) {
                    // PostgreSQL accepts TCP before it accepts queries.
                    (Some("postgres"), Some(port)) => {
                        let conn = format!("{} connect_timeout=2", self.postgres_address(port));
                        if tokio_postgres_ready(&conn).await {
                            return Ok(());
                        }
                    }
                    // nats-server speaks first, in the clear (TLS or not).
                    (Some("nats"), Some(port)) => {
                        if nats_greets(port).await {
                            return Ok(());
                        }
                    }
                    _ => return Ok(()),
                }
            }
            if Instant::now() > deadline {
                return Err(DockerError::Api {
                    what: format!("waiting for {}", s.name),
                    detail: format!("not ready within {:?}", timeout),
                    hint: format!("see `docker logs {}`", container_name(&self.project.name, &s.name)),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The connection string of the project's PostgreSQL on `port`: over
    /// TLS on a `--tls` stack (verified against the run's CA, which the
    /// process trusts).
    fn postgres_address(&self, port: u16) -> String {
        let ssl = if self.tls.is_some() { " sslmode=require" } else { "" };
        format!("host=127.0.0.1 port={port} user=postgres dbname=scalebench{ssl}")
    }

    /// Is the container's healthcheck passing? None: it has none.
    async fn healthy(&self, service: &str) -> Option<bool> {
        let c = self.containers.iter().find(|c| c.service == service)?;
        let i = self.docker.inspect_container(&c.id, None::<InspectContainerOptions>).await.ok()?;
        let status = i.state?.health?.status?;
        Some(status == bollard::models::HealthStatusEnum::HEALTHY)
    }

    /// (started_at, restart_count, running, exit_code, oom_killed) of a service's container.
    async fn inspect(&self, service: &str) -> Option<(String, i64, bool, i64, bool)> {
        let c = self.containers.iter().find(|c| c.service == service)?;
        let i = self.docker.inspect_container(&c.id, None::<InspectContainerOptions>).await.ok()?;
        let st = i.state?;
        Some((
            st.started_at.unwrap_or_default(),
            i.restart_count.unwrap_or(0),
            st.running.unwrap_or(false),
            st.exit_code.unwrap_or(0),
            st.oom_killed.unwrap_or(false),
        ))
    }

    fn container_id(&self, service: &str) -> Result<String, String> {
        // The names the local stack uses work here too.
        let service = match service {
            "reference-historian" => "historian",
            "broker" => "mosquitto",
            "postgresql" => "postgres",
            s => s,
        };
        self.containers.iter().find(|c| c.service == service).map(|c| c.id.clone()).ok_or_else(|| {
            format!(
                "the docker stack has no service `{service}` (it has {})",
                self.containers.iter().map(|c| c.service.as_str()).collect::<Vec<_>>().join(", ")
            )
        })
    }

    async fn supervise_all(&mut self) -> Vec<String> {
        // Inspect is an API round trip per container: once a second is plenty.
        if self.last_check.elapsed() < Duration::from_secs(1) {
            return Vec::new();
        }
        self.last_check = Instant::now();
        let mut events = Vec::new();
        let services: Vec<String> = self.containers.iter().map(|c| c.service.clone()).collect();
        for svc in services {
            let Some((started, restarts, running, exit, oom)) = self.inspect(&svc).await else { continue };
            let h = self.health.entry(svc.clone()).or_default();
            // The engine restarted it by itself (a restart policy).
            let engine_restarts = restarts - self.restart_counts.get(&svc).copied().unwrap_or(0);
            if engine_restarts > 0 {
                h.restarts += engine_restarts as u32;
                h.exits.push(describe_exit(exit, oom));
                if oom {
                    h.oom_kills += 1;
                }
                self.restart_counts.insert(svc.clone(), restarts);
                events.push(format!("{svc}: restarted by the engine ({})", describe_exit(exit, oom)));
            }
            if !running && !self.paused.contains(&svc) {
                h.exits.push(describe_exit(exit, oom));
                if oom {
                    h.oom_kills += 1;
                }
                let id = self.containers.iter().find(|c| c.service == svc).map(|c| c.id.clone()).unwrap_or_default();
                match self.docker.start_container(&id, None::<StartContainerOptions>).await {
                    Ok(()) => {
                        h.restarts += 1;
                        h.state = "running".into();
                        events.push(format!("{svc}: {}; restarted", describe_exit(exit, oom)));
                    }
                    Err(e) => {
                        h.state = "exited".into();
                        events.push(format!("{svc}: {}; restart failed: {e}", describe_exit(exit, oom)));
                    }
                }
                if let Some(i) = self.inspect(&svc).await {
                    self.started_at.insert(svc.clone(), i.0);
                }
            } else if self.started_at.get(&svc).is_some_and(|s| *s != started) && engine_restarts == 0 && running {
                // Started again behind our back (docker restart from outside).
                h.restarts += 1;
                h.exits.push(describe_exit(exit, oom));
                events.push(format!("{svc}: restarted from outside"));
                self.started_at.insert(svc.clone(), started);
            }
        }
        events
    }

    async fn stats(&self) -> Vec<ProcSample> {
        let mut out = Vec::new();
        for c in &self.containers {
            out.extend(container_sample(&self.docker, &c.id, &c.service).await);
        }
        out
    }

    /// Remove the project's containers, network and its scale_* volumes
    /// (only what carries the project's label: never anything else).
    pub async fn down(&mut self) {
        let _ = remove_project(&self.docker, &self.project.name, true).await;
    }

    pub fn project(&self) -> &Project {
        &self.project
    }
}

/// Remove every container, the network and the scale_* volumes labelled
/// with `project` (and only those). Returns what was removed.
pub fn remove_project<'a>(
    docker: &'a Docker,
    project: &'a str,
    volumes: bool,
) -> crate::future::LocalBoxFuture<'a, Result<Vec<String>, DockerError>> {
    Box::pin(remove_project_here(docker, project, volumes))
}

async fn remove_project_here(docker: &Docker, project: &str, volumes: bool) -> Result<Vec<String>, DockerError> {
    if !project.starts_with("scale-") {
        return Err(DockerError::Compose(compose::ComposeError::Guard {
            rule: "project name",
            detail: format!("refusing to take down `{project}`: not a scale-* project"),
            hint: "scalebench only removes what it created".into(),
        }));
    }
    let mut removed = Vec::new();
    let filters = HashMap::from([("label".to_string(), vec![format!("{PROJECT_LABEL}={project}")])]);
    let list = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters.clone()),
            ..Default::default()
        }))
        .await
        .map_err(|e| api("listing containers", e, "check the Docker engine"))?;
    // Removing a container on vfs deletes its copied layers (seconds each):
    // all at once.
    let removals = list.into_iter().filter_map(|c| c.id.map(|id| (id, c.names))).map(|(id, names)| async move {
        let _ = docker.unpause_container(&id).await;
        docker
            .remove_container(&id, Some(RemoveContainerOptions { force: true, v: false, link: false }))
            .await
            .is_ok()
            .then(|| names.and_then(|n| n.first().cloned()).unwrap_or(id))
    });
    removed.extend(futures::future::join_all(removals).await.into_iter().flatten());
    let net = format!("{project}_default");
    if docker.remove_network(&net).await.is_ok() {
        removed.push(format!("network {net}"));
    }
    if volumes {
        let vols = docker
            .list_volumes(Some(bollard::query_parameters::ListVolumesOptions { filters: Some(filters) }))
            .await
            .map_err(|e| api("listing volumes", e, "check the Docker engine"))?;
        for v in vols.volumes.unwrap_or_default() {
            if v.name.starts_with("scale_")
                && docker.remove_volume(&v.name, Some(RemoveVolumeOptions { force: true })).await.is_ok()
            {
                removed.push(format!("volume {}", v.name));
            }
        }
    }
    Ok(removed)
}

/// Containers of a project: (service, state, status).
pub fn project_status<'a>(
    docker: &'a Docker,
    project: &'a str,
) -> crate::future::LocalBoxFuture<'a, Result<Vec<(String, String, String)>, DockerError>> {
    Box::pin(project_status_here(docker, project))
}

async fn project_status_here(docker: &Docker, project: &str) -> Result<Vec<(String, String, String)>, DockerError> {
    let filters = HashMap::from([("label".to_string(), vec![format!("{PROJECT_LABEL}={project}")])]);
    let list = docker
        .list_containers(Some(ListContainersOptions { all: true, filters: Some(filters), ..Default::default() }))
        .await
        .map_err(|e| api("listing containers", e, "check the Docker engine"))?;
    Ok(list
        .into_iter()
        .map(|c| {
            let svc = c.labels.as_ref().and_then(|l| l.get(SERVICE_LABEL).cloned()).unwrap_or_default();
            (svc, c.state.map(|s| format!("{s:?}").to_lowercase()).unwrap_or_default(), c.status.unwrap_or_default())
        })
        .collect())
}

/// A NATS server on 127.0.0.1:`port` sends its INFO line within a second.
async fn nats_greets(port: u16) -> bool {
    use tokio::io::AsyncBufReadExt as _;
    let greet = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let mut line = String::new();
        tokio::io::BufReader::new(tcp).read_line(&mut line).await.ok()?;
        Some(line.starts_with("INFO "))
    };
    tokio::time::timeout(Duration::from_secs(1), greet).await.ok().flatten().unwrap_or(false)
}

async fn tokio_postgres_ready(conn: &str) -> bool {
    let conn = conn.to_string();
    tokio::task::spawn_blocking(move || {
        crate::pg_connect::connect(&conn).is_ok_and(|mut c| c.simple_query("SELECT 1").is_ok())
    })
    .await
    .unwrap_or(false)
}

/// CPU (cumulative), memory against its cap and block I/O of one container
/// now, from the stats API; None if the engine gives none.
pub(super) async fn container_sample(docker: &Docker, id: &str, name: &str) -> Option<ProcSample> {
    let mut s = docker.stats(id, Some(StatsOptions { stream: false, one_shot: true }));
    let Some(Ok(st)) = s.next().await else { return None };
    let cpu_ns = st.cpu_stats.as_ref().and_then(|c| c.cpu_usage.as_ref()).and_then(|u| u.total_usage).unwrap_or(0);
    let mem = st.memory_stats.as_ref();
    let cache = mem
        .and_then(|m| m.stats.as_ref())
        .and_then(|s| s.get("cache").or_else(|| s.get("inactive_file")).copied())
        .unwrap_or(0);
    let usage = mem.and_then(|m| m.usage).unwrap_or(0).saturating_sub(cache);
    let limit = mem.and_then(|m| m.limit);
    let (mut rd, mut wr) = (None, None);
    if let Some(entries) = st.blkio_stats.as_ref().and_then(|b| b.io_service_bytes_recursive.as_ref()) {
        let sum = |op: &str| {
            entries
                .iter()
                .filter(|e| e.op.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(op)))
                .filter_map(|e| e.value)
                .sum::<u64>()
        };
        rd = Some(sum("read"));
        wr = Some(sum("write"));
    } else {
        rd = rd.or(Some(0));
        wr = wr.or(Some(0));
    }
    let mut p = ProcSample::new(name.to_string(), cpu_ns as f64 / 1e9, usage, Instant::now());
    p.mem_limit_bytes = limit;
    p.blkio_read_bytes = rd;
    p.blkio_write_bytes = wr;
    Some(p)
}

pub(super) fn describe_exit(code: i64, oom: bool) -> String {
    if oom {
        format!("OOM-killed (exit code {code})")
    } else if code > 128 {
        let sig = (code - 128) as i32;
        match local_stack::health::signal_name(sig) {
            Some(n) => format!("killed by signal {sig} ({n})"),
            None => format!("killed by signal {sig}"),
        }
    } else {
        format!("exited with status {code}")
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

impl StackDriver for DockerStack {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn services(&self) -> Vec<Endpoint> {
        let tls = |with: &'static str, without: &'static str| if self.tls.is_some() { with } else { without };
        let mut out: Vec<Endpoint> = Vec::new();
        for s in &self.project.services {
            let (Some(name), Some(kind)) = (s.labels.get("scale.service"), s.labels.get("scale.kind")) else {
                continue;
            };
            let Some(port) = s.ports.first() else { continue };
            let (kind, address) = match kind.as_str() {
                "mqtt" => (ServiceKind::Mqtt, format!("{}://127.0.0.1:{}", tls("mqtts", "mqtt"), port.host_port)),
                "postgres" => (ServiceKind::Postgres, self.postgres_address(port.host_port)),
                "nats" => (ServiceKind::Nats, format!("{}://127.0.0.1:{}", tls("tls", "nats"), port.host_port)),
                "http" => (ServiceKind::Http, format!("{}://127.0.0.1:{}", tls("https", "http"), port.host_port)),
                _ => continue,
            };
            // Several nodes of one service: one endpoint, every URL.
            if let Some(e) = out.iter_mut().find(|e| &e.name == name) {
                e.address.push(',');
                e.address.push_str(&address);
            } else {
                out.push(Endpoint { name: name.clone(), kind, address });
            }
        }
        out
    }

    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.supervise_all())
    }

    fn supervise_now(&mut self) -> BoxFuture<'_, Vec<String>> {
        self.last_check = Instant::now() - Duration::from_secs(2);
        Box::pin(self.supervise_all())
    }

    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        Some(self.health.clone())
    }

    fn sample_processes(&mut self) -> Vec<ProcSample> {
        block_on(self.stats())
    }

    fn signal_names(&self) -> Vec<String> {
        self.containers.iter().map(|c| c.service.clone()).collect()
    }
    fn settings(&self) -> BTreeMap<String, String> {
        self.nats_settings.clone()
    }
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        let id = self.container_id(service)?;
        let service = self.containers.iter().find(|c| c.id == id).map(|c| c.service.clone()).unwrap_or_default();
        let service = service.as_str();
        let docker = self.docker.clone();
        match signal {
            libc::SIGSTOP => {
                block_on(docker.pause_container(&id)).map_err(|e| e.to_string())?;
                self.paused.push(service.to_string());
            }
            libc::SIGCONT => {
                block_on(docker.unpause_container(&id)).map_err(|e| e.to_string())?;
                self.paused.retain(|s| s != service);
            }
            sig => {
                let name = local_stack::health::signal_name(sig).unwrap_or("SIGKILL").to_string();
                block_on(docker.kill_container(&id, Some(KillContainerOptions { signal: name })))
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    fn data_dir(&self) -> Option<PathBuf> {
        self.root_dir.clone().filter(|p| Path::new(p).exists())
    }

    fn caps(&self) -> BTreeMap<String, String> {
        self.project
            .services
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    format!(
                        "cpus {} mem {} MiB{}",
                        s.cpus,
                        s.memory_bytes >> 20,
                        s.cpuset.as_ref().map(|c| format!(" cpuset {c}")).unwrap_or_default()
                    ),
                )
            })
            .collect()
    }

    fn stop(mut self: Box<Self>) {
        if self.remove_on_stop {
            tracing::info!("removing the docker stack {}", self.project.name);
            block_on(self.down());
        }
    }
}
