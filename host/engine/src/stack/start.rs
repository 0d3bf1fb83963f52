//! Choosing and starting the stack of a run from a [`StackRequest`] and
//! the target's plan: the one place that knows every driver. The request
//! is the command line's choice in the engine's own words (the binary fills
//! it from `run`'s flags; `plugins check` fills one of its own), so nothing
//! here parses a command line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use local_stack::{LocalStack, StackOptions};
use plugin_runtime::adapter_types::{Plan, TransportPlan};

use crate::error::usage;
#[cfg(feature = "docker")]
use crate::stack::docker::{DockerOptions, DockerStack};
use crate::stack::external::External;
use crate::stack::watch::WatchSpec;
use crate::stack::{Endpoint, ServiceKind, StackDriver};
use crate::throwaway_ca::ThrowawayPki;

/// Which driver runs the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// mosquitto, PostgreSQL and the reference historian (or nats-server,
    /// or the Haystack test server) as child processes.
    Local,
    /// A stack someone else runs: its URLs and what watches its health.
    External,
    /// The built-in compose file through the Docker engine.
    Docker,
}

/// The reference historian's calibration faults (what the honesty tests
/// inject), and the settings of its database session.
#[derive(Debug, Clone, Default)]
pub struct HistorianFaults {
    pub drop_one_in: Option<u64>,
    pub delay_ms: Option<u64>,
    pub ack_before_commit: bool,
    /// `NAME=VALUE`, each set on the historian's session.
    pub session_settings: Vec<String>,
    pub leak_mb_per_s: Option<u64>,
}

/// An external stack's services, as URLs, and what watches its health.
#[derive(Debug, Clone, Default)]
pub struct ExternalServices {
    pub mqtt_url: Option<String>,
    pub pg_url: Option<String>,
    pub nats_url: Option<String>,
    /// `NAME=URL`: an HTTP service.
    pub service: Vec<String>,
    pub watch: Vec<WatchSpec>,
}

/// The stack a run asks for.
#[derive(Debug, Clone)]
pub struct StackRequest {
    pub kind: Kind,
    /// The first port to try for the stack's services (2xxxx).
    pub base_port: u16,
    /// Where the stack keeps its files (None: a temporary directory).
    pub run_dir: Option<PathBuf>,
    /// NATS servers in the cluster.
    pub nodes: u32,
    pub nats_sync_interval: Option<String>,
    pub historian: HistorianFaults,
    pub mosquitto_acl: Option<PathBuf>,
    /// Docker: a compose file of one's own, and caps `SERVICE=CPUS,MEMORY`.
    pub compose: Option<PathBuf>,
    pub caps: Vec<String>,
    pub cpuset: Option<String>,
    pub external: ExternalServices,
    /// The target's params: an HTTP target's `user` logs in to the local
    /// Haystack server with the password of `credentials_file`.
    pub target_params: String,
    pub credentials_file: Option<PathBuf>,
}

/// Where the built-in compose files are: $SCALEBENCH_COMPOSE_DIR, ./compose,
/// or the checkout this binary was built from.
pub fn compose_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SCALEBENCH_COMPOSE_DIR") {
        return d.into();
    }
    let here = Path::new("compose");
    if here.join("historian.yml").is_file() {
        return here.into();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../compose")
}

/// The built-in compose file for a plan.
pub fn compose_file_for(plan: &Plan, nodes: u32) -> PathBuf {
    let name = match plan.transport {
        TransportPlan::NatsJetstream(_) | TransportPlan::NatsCore if nodes >= 3 => "nats-3.yml",
        TransportPlan::NatsJetstream(_) | TransportPlan::NatsCore => "nats.yml",
        TransportPlan::Http => "haystack.yml",
        _ => "historian.yml",
    };
    compose_dir().join(name)
}

/// A free 127.0.0.1 port in 2xxxx, starting the search at `from`, claimed
/// so no other scalebench process picks it too ([`local_stack::guard::claim`]).
pub fn free_port(from: u16) -> anyhow::Result<u16> {
    (from.max(20000)..=29999)
        .find(|p| local_stack::guard::claim_free(*p))
        .ok_or_else(|| anyhow::anyhow!("no free port in {from}-29999\nhint: pass --base-port with another 2xxxx port"))
}

/// Free 2xxxx ports for a compose file's published ports, from `base`:
/// SCALE_MQTT_PORT, SCALE_PG_PORT, SCALE_NATS_PORT_0..2, SCALE_HAYSTACK_PORT.
pub fn port_env(base: u16) -> anyhow::Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    let mqtt = free_port(base)?;
    let pg = free_port(mqtt + 1)?;
    env.insert("SCALE_MQTT_PORT".to_string(), mqtt.to_string());
    env.insert("SCALE_PG_PORT".to_string(), pg.to_string());
    let mut next = pg + 1;
    for i in 0..3 {
        let p = free_port(next)?;
        env.insert(format!("SCALE_NATS_PORT_{i}"), p.to_string());
        next = p + 1;
    }
    env.insert("SCALE_HAYSTACK_PORT".to_string(), free_port(next)?.to_string());
    Ok(env)
}

/// The values a compose file is read with: free ports (see [`port_env`]),
/// the image prefix of `SCALE_IMAGE_PREFIX` in scalebench's environment
/// (images of your own registry: the compose files name
/// `${SCALE_IMAGE_PREFIX:-scale-}mosquitto:bookworm` and so on), and a NATS
/// stack's sync interval as `SCALE_NATS_SYNC`, which the nats image's
/// entrypoint writes into the servers' config.
pub fn compose_env(base_port: u16, nats_sync_interval: Option<&str>) -> anyhow::Result<BTreeMap<String, String>> {
    let mut env = port_env(base_port)?;
    if let Some(prefix) = std::env::var("SCALE_IMAGE_PREFIX").ok().filter(|p| !p.is_empty()) {
        env.insert("SCALE_IMAGE_PREFIX".into(), prefix);
    }
    if let Some(sync) = nats_sync_interval {
        local_stack::nats::check_sync_value(sync).map_err(|e| usage(e.to_string()))?;
        env.insert("SCALE_NATS_SYNC".into(), sync.to_string());
    }
    Ok(env)
}

/// `SERVICE=CPUS,MEMORY` → (service, (cpus, memory bytes)).
pub fn parse_cap(s: &str) -> Result<(String, (Option<f64>, Option<i64>)), String> {
    let (svc, rest) =
        s.split_once('=').ok_or_else(|| format!("--cap {s}: give SERVICE=CPUS,MEMORY, e.g. postgres=2,6g"))?;
    let mut parts = rest.split(',');
    let cpus = parts
        .next()
        .filter(|c| !c.is_empty())
        .map(|c| match c.parse::<f64>() {
            Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
            _ => Err(format!("--cap {s}: `{c}` is not a CPU count (a number above 0, e.g. 2 or 0.5)")),
        })
        .transpose()?;
    let mem = parts
        .next()
        .filter(|m| !m.is_empty())
        .map(|m| {
            crate::stack::compose::parse_bytes(m)
                .ok_or_else(|| format!("--cap {s}: `{m}` is not a memory size (e.g. 512m, 6g)"))
        })
        .transpose()?;
    Ok((svc.trim().to_string(), (cpus, mem)))
}

/// Arguments for the historian inside a compose stack, as a JSON-list tail.
#[cfg(feature = "docker")]
fn historian_args(h: &HistorianFaults) -> String {
    let mut v: Vec<String> = Vec::new();
    if let Some(n) = h.drop_one_in {
        v.extend(["--drop-one-in".into(), n.to_string()]);
    }
    if let Some(d) = h.delay_ms {
        v.extend(["--delay-ms".into(), d.to_string()]);
    }
    if h.ack_before_commit {
        v.push("--ack-before-commit".into());
    }
    if let Some(mb) = h.leak_mb_per_s {
        v.extend(["--leak-mb-per-s".into(), mb.to_string()]);
    }
    for kv in &h.session_settings {
        v.extend(["--session-setting".into(), kv.clone()]);
    }
    v.iter().map(|a| format!(", {}", serde_json::to_string(a).unwrap_or_default())).collect()
}

/// The docker options of a run (or of `scalebench stack up`).
#[cfg(feature = "docker")]
pub fn docker_options(
    req: &StackRequest,
    plan: &Plan,
    project: Option<String>,
    run_dir: PathBuf,
) -> anyhow::Result<DockerOptions> {
    let file = req.compose.clone().unwrap_or_else(|| compose_file_for(plan, req.nodes));
    let mut env = compose_env(req.base_port, req.nats_sync_interval.as_deref())?;
    env.insert("SCALE_HISTORIAN_ARGS".into(), historian_args(&req.historian));
    let mut caps = BTreeMap::new();
    for c in &req.caps {
        let (svc, cap) = parse_cap(c).map_err(usage)?;
        caps.insert(svc, cap);
    }
    Ok(DockerOptions {
        compose_file: file,
        project,
        run_dir,
        env,
        caps,
        cpuset: req.cpuset.clone(),
        checkout_dir: std::env::current_dir().unwrap_or_else(|_| ".".into()),
        ready_timeout: Duration::from_secs(90),
        nats_sync_interval: req.nats_sync_interval.clone(),
        tls: None,
    })
}

/// Where a stack scalebench starts keeps its files.
pub fn run_dir(req: &StackRequest, run_id: &str) -> PathBuf {
    req.run_dir.clone().unwrap_or_else(|| temporary_run_dir(run_id))
}

/// The run dir this process makes when none is given: the run id and this
/// process's id, so two runs started in the same second (different results
/// directories, one machine) never share a stack's files, nor remove each
/// other's.
pub fn temporary_run_dir(run_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("scalebench-run-{run_id}-{}", std::process::id()))
}

fn stack_tls(pki: Option<&ThrowawayPki>) -> Option<local_stack::StackTls> {
    pki.map(|p| local_stack::StackTls { ca: p.ca.clone(), cert: p.server_cert.clone(), key: p.server_key.clone() })
}

/// Start (or, for external, describe) the stack a run drives.
pub fn start<'a>(
    req: &'a StackRequest,
    plan: &'a Plan,
    target: &'a str,
    run_id: &'a str,
    tls: Option<&'a ThrowawayPki>,
) -> crate::future::LocalBoxFuture<'a, anyhow::Result<Box<dyn StackDriver>>> {
    // Boxed at the crate's edge: see `crate::future`.
    Box::pin(start_here(req, plan, target, run_id, tls))
}

async fn start_here(
    req: &StackRequest,
    plan: &Plan,
    target: &str,
    run_id: &str,
    tls: Option<&ThrowawayPki>,
) -> anyhow::Result<Box<dyn StackDriver>> {
    let wants_nats = matches!(plan.transport, TransportPlan::NatsJetstream(_) | TransportPlan::NatsCore);
    // What this build left out is said before anything starts.
    crate::transport::check_built_in(&plan.transport)?;
    if matches!(req.kind, Kind::Local)
        && matches!(plan.transport, TransportPlan::Http)
        && !cfg!(feature = "haystack-server")
    {
        return Err(crate::error::left_out("The Haystack test server (the local stack of an HTTP target)"));
    }
    let run_dir = run_dir(req, run_id);
    let with_tls = if tls.is_some() { " TLS-only" } else { "" };
    let cal = &req.historian;
    if req.nats_sync_interval.is_some() && !(matches!(req.kind, Kind::Local | Kind::Docker) && wants_nats) {
        return Err(usage(
            "--nats-sync-interval sets the servers of a NATS stack scalebench starts (a NATS target on --stack local or --stack docker): an external server's settings are its own".into(),
        ));
    }
    Ok(match req.kind {
        Kind::Local if wants_nats => {
            let mut opts = local_stack::nats::NatsOptions::new(&run_dir, req.nodes as usize);
            opts.sync_interval = req.nats_sync_interval.clone();
            opts.tls = stack_tls(tls);
            tracing::info!(
                "starting a{with_tls} local NATS JetStream stack of {} node(s) in {}",
                req.nodes,
                run_dir.display()
            );
            Box::new(
                tokio::task::block_in_place(|| local_stack::nats::NatsCluster::start(opts))
                    .context("cannot start the local NATS stack")?,
            )
        }
        Kind::Local if matches!(plan.transport, TransportPlan::Http) => {
            Box::new(start_haystack(req, plan, target, &run_dir, tls)?)
        }
        Kind::Local => {
            let mut so = StackOptions::new(&run_dir).with_base_port(req.base_port);
            so.historian.bin = Some(std::env::current_exe()?);
            so.historian.leading_args = vec!["reference-historian".into()];
            so.historian.drop_one_in = cal.drop_one_in;
            so.historian.delay_ms = cal.delay_ms;
            so.historian.ack_before_commit = cal.ack_before_commit;
            if let Some(mb) = cal.leak_mb_per_s {
                so.historian.extra_args.extend(["--leak-mb-per-s".into(), mb.to_string()]);
            }
            for kv in &cal.session_settings {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    usage(format!("--historian-session-setting {kv}: give NAME=VALUE, e.g. synchronous_commit=off"))
                })?;
                so.historian.session_settings.push((k.trim().to_string(), v.trim().to_string()));
            }
            so.mosquitto_acl_file = req.mosquitto_acl.clone();
            so.tls = stack_tls(tls);
            tracing::info!(
                "starting the{with_tls} local stack in {} (mqtt {}, postgres {})",
                run_dir.display(),
                so.mqtt_port,
                so.pg_port
            );
            Box::new(LocalStack::start(so).await.context("cannot start the local stack")?)
        }
        #[cfg(not(feature = "docker"))]
        Kind::Docker => return Err(crate::error::left_out("`--stack docker`")),
        #[cfg(feature = "docker")]
        Kind::Docker => {
            let stem = compose_file_for(plan, req.nodes)
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| "stack".into());
            let project = format!("scale-{stem}-{}", run_id.to_ascii_lowercase());
            let mut opts = docker_options(req, plan, Some(project.clone()), run_dir.clone())?;
            opts.tls = tls.cloned();
            Box::new(DockerStack::up(&opts, true).await?)
        }
        Kind::External => {
            let ext = &req.external;
            let mut endpoints = Vec::new();
            if let Some(u) = &ext.mqtt_url {
                crate::stack::parse_mqtt_url(u).map_err(usage)?;
                endpoints.push(Endpoint { name: "broker".into(), kind: ServiceKind::Mqtt, address: u.clone() });
            }
            if let Some(pg) = &ext.pg_url {
                endpoints.push(Endpoint { name: "postgres".into(), kind: ServiceKind::Postgres, address: pg.clone() });
            }
            if let Some(n) = &ext.nats_url {
                endpoints.push(Endpoint { name: "nats".into(), kind: ServiceKind::Nats, address: n.clone() });
            }
            for s in &ext.service {
                let (name, url) = crate::stack::parse_service(s).map_err(usage)?;
                endpoints.push(Endpoint { name, kind: ServiceKind::Http, address: url });
            }
            let watchers = crate::stack::watch::Watchers::start(&ext.watch).await.map_err(usage)?;
            let ext = External { endpoints, watchers };
            // Ask only for what the target's plan names.
            let missing: Vec<String> =
                plan.services.iter().filter(|n| !ext.services().iter().any(|e| &e.name == *n)).cloned().collect();
            if !missing.is_empty() {
                return Err(usage(format!(
                    "--stack external: target {target} needs service(s) {} (give --mqtt-url for `broker`, --pg-url for `postgres`, --nats-url for `nats`, --service NAME=URL for an HTTP service)",
                    missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
                )));
            }
            Box::new(ext)
        }
    })
}

/// The local stack of an HTTP target: the Haystack test server as the
/// plan's HTTP service, with SCRAM when the target's params name a `user`
/// (its password from --credentials-file or the environment).
fn start_haystack(
    req: &StackRequest,
    plan: &Plan,
    target: &str,
    run_dir: &Path,
    tls: Option<&ThrowawayPki>,
) -> anyhow::Result<crate::stack::local::LocalHaystack> {
    let service = match &plan.storage {
        plugin_runtime::adapter_types::StoragePlan::Http(s) => s.clone(),
        _ => plan.services.first().cloned().unwrap_or_else(|| "api".into()),
    };
    let params: serde_json::Value = serde_json::from_str(&req.target_params).unwrap_or_default();
    let user = params.get("user").and_then(|u| u.as_str()).filter(|u| !u.is_empty());
    std::fs::create_dir_all(run_dir).with_context(|| format!("cannot create {}", run_dir.display()))?;
    let auth = match user {
        None => None,
        Some(u) => {
            let pw = crate::credentials::load(req.credentials_file.as_deref())?.ok_or_else(|| {
                usage(format!("target {target} logs in as `{u}`, but no password was given\nhint: pass --credentials-file PATH or set {}", crate::credentials::ENV))
            })?;
            let file = run_dir.join("haystack-password");
            write_private(&file, pw.expose())?;
            Some((u.to_string(), file))
        }
    };
    let opts = local_stack::haystack::HaystackOptions {
        run_dir: run_dir.to_path_buf(),
        program: std::env::current_exe()?,
        leading_args: vec!["haystack-testserver".into()],
        base_port: req.base_port,
        auth,
        extra_args: Vec::new(),
        ready_timeout: Duration::from_secs(30),
        tls: stack_tls(tls),
    };
    tracing::info!(
        "starting the local Haystack test server (not Haxall; docs/haystack-test-server.md) in {}",
        run_dir.display()
    );
    let server = tokio::task::block_in_place(|| local_stack::haystack::HaystackServer::start(opts))
        .context("cannot start the local Haystack server")?;
    Ok(crate::stack::local::LocalHaystack { server, service })
}

/// Write a secret to a file only its owner can read.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}
