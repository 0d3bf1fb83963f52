//! Compose files for Docker stacks: `${VAR:-default}` interpolation from the
//! env file scalebench generates, parsing with `docker-compose-types`, the
//! effective configuration as scalebench will create it, and the isolation
//! guard checked on that effective configuration before up, run, crash and
//! down (after the original Baler scale-test plan):
//!
//! - the project is named `scale-*`, never a live name nor the checkout's
//!   directory name;
//! - every volume is `scale_*`;
//! - every published port is on 127.0.0.1, off the live defaults, and free;
//! - no service uses the host network or privileged mode;
//! - the env file is the one scalebench generated (mode 600), never the
//!   checkout's `.env`;
//! - every service gets a CPU and a memory cap (the compose file's, a
//!   `--cap` override, or a default), CPU clamped to the host's CPU count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use docker_compose_types as dc;

use crate::guard::LIVE_DATABASE_NAMES;
use local_stack::guard::LIVE_DEFAULT_PORTS;

/// Names of live installs a scale project must never take.
pub const LIVE_PROJECT_NAMES: &[&str] = &["baler", "baler-deploy", "timberdoodle", "windrow", "haxall"];
/// Caps a service gets when its compose file and the flags give none.
pub const DEFAULT_CPUS: f64 = 1.0;
pub const DEFAULT_MEMORY_BYTES: i64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    #[error("compose file {path}: {problem}\nhint: {hint}")]
    Invalid { path: PathBuf, problem: String, hint: String },
    #[error("isolation guard: {rule}: {detail}\nhint: {hint}")]
    Guard { rule: &'static str, detail: String, hint: String },
}

fn guard(rule: &'static str, detail: String, hint: &str) -> ComposeError {
    ComposeError::Guard { rule, detail, hint: hint.into() }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    pub host_ip: String,
    pub host_port: u16,
    pub container_port: u16,
}

/// One service as scalebench will create it.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    pub name: String,
    pub image: String,
    pub command: Option<Vec<String>>,
    pub environment: Vec<String>,
    pub ports: Vec<PortSpec>,
    /// (volume name in the file, mount point).
    pub volumes: Vec<(String, String)>,
    pub cpus: f64,
    pub memory_bytes: i64,
    pub cpuset: Option<String>,
    pub network_mode: Option<String>,
    pub privileged: bool,
    pub depends_on: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// The readiness check a container runs (`healthcheck.test`), if any.
    pub healthcheck: Option<Vec<String>>,
    pub log_max_size: String,
    pub log_max_file: String,
}

/// The effective configuration of a compose project.
#[derive(Debug, Clone)]
pub struct Project {
    pub name: String,
    pub file: PathBuf,
    pub services: Vec<ServiceSpec>,
    pub volumes: Vec<String>,
    /// The env file the values came from.
    pub env_file: PathBuf,
}

/// Replace `${VAR}` and `${VAR:-default}` with values from `env`.
pub fn interpolate(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let expr = &after[..end];
        let (var, default) = match expr.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (expr, None),
        };
        match env.get(var).filter(|v| !v.is_empty()) {
            Some(v) => out.push_str(v),
            None => out.push_str(default.unwrap_or("")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `2g`, `512m`, `1073741824` → bytes.
pub fn parse_bytes(s: &str) -> Option<i64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches('b');
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1i64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let bytes = num.parse::<f64>().ok()? * mult as f64;
    // `as i64` would saturate: 1e20 bytes or `inf` is no size, not i64::MAX.
    (bytes >= 1.0 && bytes < i64::MAX as f64).then_some(bytes as i64)
}

fn single(v: &dc::SingleValue) -> String {
    match v {
        dc::SingleValue::String(s) => s.clone(),
        dc::SingleValue::Bool(b) => b.to_string(),
        dc::SingleValue::Unsigned(u) => u.to_string(),
        dc::SingleValue::Signed(i) => i.to_string(),
        dc::SingleValue::Float(f) => f.to_string(),
    }
}

/// `127.0.0.1:21883:1883` (or `21883:1883`: no host ip = every interface).
fn parse_short_port(s: &str) -> Option<PortSpec> {
    let parts: Vec<&str> = s.split(':').collect();
    let (ip, host, cont) = match parts.as_slice() {
        [ip, h, c] => (ip.to_string(), *h, *c),
        [h, c] => ("0.0.0.0".to_string(), *h, *c),
        _ => return None,
    };
    Some(PortSpec { host_ip: ip, host_port: host.parse().ok()?, container_port: cont.split('/').next()?.parse().ok()? })
}

/// Read `file`, interpolate it with `env`, and make the effective
/// configuration: project `project` (or the file's `name`), caps from the
/// file, `caps` overrides, defaults, clamped to `nproc`.
///
/// Long on purpose: the compose file's sections read in the order the effective configuration depends on them.
pub fn load(
    file: &Path,
    env: &BTreeMap<String, String>,
    env_file: &Path,
    project: Option<&str>,
    caps: &BTreeMap<String, (Option<f64>, Option<i64>)>,
    cpuset: Option<&str>,
    nproc: u32,
) -> Result<Project, ComposeError> {
    let invalid = |problem: String, hint: &str| ComposeError::Invalid { path: file.into(), problem, hint: hint.into() };
    let text = std::fs::read_to_string(file)
        .map_err(|e| invalid(format!("cannot read it: {e}"), "give the path of a compose file (see compose/)"))?;
    let text = interpolate(&text, env);
    let parsed: dc::Compose = serde_yaml::from_str(&text).map_err(|e| {
        invalid(
            format!("not a compose file scalebench understands: {}", crate::serde_words::user_words(&e.to_string())),
            "check its YAML against the files in compose/",
        )
    })?;
    let name = project
        .map(str::to_string)
        .or(parsed.name.clone())
        .ok_or_else(|| invalid("no project name".into(), "add `name: scale-...` to the file"))?;
    let mut services = Vec::new();
    for (sname, svc) in parsed.services.0.iter() {
        let Some(svc) = svc else { continue };
        let image = svc.image.clone().ok_or_else(|| {
            invalid(
                format!("service {sname} has no image"),
                "every service needs `image:` (build the images with scripts/docker-images.sh)",
            )
        })?;
        let command = match &svc.command {
            Some(dc::Command::Args(a)) => Some(a.clone()),
            Some(dc::Command::Simple(s)) => Some(s.split_whitespace().map(str::to_string).collect()),
            None => None,
        };
        let environment = match &svc.environment {
            dc::Environment::List(l) => l.clone(),
            dc::Environment::KvPair(m) => {
                m.iter().map(|(k, v)| format!("{k}={}", v.as_ref().map(single).unwrap_or_default())).collect()
            }
        };
        let mut ports = Vec::new();
        match &svc.ports {
            dc::Ports::Short(list) => {
                for p in list {
                    ports.push(parse_short_port(p).ok_or_else(|| {
                        invalid(
                            format!("service {sname}: port {p:?} is not host_ip:host_port:container_port"),
                            "publish as \"127.0.0.1:2xxxx:PORT\"",
                        )
                    })?);
                }
            }
            dc::Ports::Long(list) => {
                for p in list {
                    let host_port = match &p.published {
                        Some(dc::PublishedPort::Single(n)) => *n,
                        Some(dc::PublishedPort::Range(r)) => r.parse().map_err(|_| {
                            invalid(format!("service {sname}: port range {r}"), "publish one port per entry")
                        })?,
                        None => 0,
                    };
                    ports.push(PortSpec {
                        host_ip: p.host_ip.clone().unwrap_or_else(|| "0.0.0.0".into()),
                        host_port,
                        container_port: p.target,
                    });
                }
            }
        }
        let mut volumes = Vec::new();
        for v in &svc.volumes {
            match v {
                dc::Volumes::Simple(s) => {
                    let (src, dst) = s.split_once(':').ok_or_else(|| {
                        invalid(format!("service {sname}: volume {s:?}"), "mount a named volume as scale_name:/path")
                    })?;
                    volumes.push((src.to_string(), dst.split(':').next().unwrap_or(dst).to_string()));
                }
                dc::Volumes::Advanced(a) => volumes.push((a.source.clone().unwrap_or_default(), a.target.clone())),
            }
        }
        let limits = svc.deploy.as_ref().and_then(|d| d.resources.as_ref()).and_then(|r| r.limits.as_ref());
        let (over_cpu, over_mem) = caps.get(sname.as_str()).cloned().unwrap_or((None, None));
        let cpus = over_cpu
            .or_else(|| limits.and_then(|l| l.cpus.as_deref()).and_then(|c| c.trim().parse::<f64>().ok()))
            .unwrap_or(DEFAULT_CPUS)
            .min(nproc.max(1) as f64)
            .max(0.01);
        let memory_bytes = over_mem
            .or_else(|| limits.and_then(|l| l.memory.as_deref()).and_then(parse_bytes))
            .or_else(|| svc.mem_limit.as_deref().and_then(parse_bytes))
            .unwrap_or(DEFAULT_MEMORY_BYTES);
        let labels = match &svc.labels {
            dc::Labels::List(l) => {
                l.iter().filter_map(|x| x.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
            }
            dc::Labels::Map(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let depends_on = match &svc.depends_on {
            dc::DependsOnOptions::Simple(v) => v.clone(),
            dc::DependsOnOptions::Conditional(m) => m.keys().cloned().collect(),
        };
        let opts = svc.logging.as_ref().and_then(|l| l.options.clone()).unwrap_or_default();
        services.push(ServiceSpec {
            name: sname.clone(),
            image,
            command,
            environment,
            ports,
            volumes,
            cpus,
            memory_bytes,
            cpuset: cpuset.map(str::to_string),
            network_mode: svc.network_mode.clone(),
            privileged: svc.privileged,
            depends_on,
            labels,
            healthcheck: svc.healthcheck.as_ref().and_then(|h| h.test.as_ref()).map(|t| match t {
                dc::HealthcheckTest::Single(s) => vec!["CMD-SHELL".to_string(), s.clone()],
                dc::HealthcheckTest::Multiple(v) => v.clone(),
            }),
            // Logs are capped whatever the file says: 3 × 50 MB at most.
            log_max_size: opts
                .get("max-size")
                .map(single)
                .filter(|s| parse_bytes(s).is_some_and(|b| b <= 50 << 20))
                .unwrap_or_else(|| "50m".into()),
            log_max_file: opts
                .get("max-file")
                .map(single)
                .filter(|s| s.parse::<u32>().is_ok_and(|n| n <= 3))
                .unwrap_or_else(|| "3".into()),
        });
    }
    let volumes = parsed.volumes.0.keys().cloned().collect();
    Ok(Project { name, file: file.into(), services, volumes, env_file: env_file.into() })
}

/// The isolation guard on the effective configuration; see the module docs.
/// `checkout_dir` is the directory scalebench runs in (its name is never a
/// project name); `check_free` also checks that no published port is held.
pub fn check(project: &Project, checkout_dir: &Path, check_free: bool) -> Result<(), ComposeError> {
    let name = &project.name;
    let checkout_name = checkout_dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    if !name.starts_with("scale-") {
        return Err(guard(
            "project name",
            format!("project `{name}` is not named scale-*"),
            "name scale projects scale-<something> (e.g. `name: scale-historian`)",
        ));
    }
    if LIVE_PROJECT_NAMES.contains(&name.as_str())
        || *name == checkout_name
        || LIVE_DATABASE_NAMES.contains(&name.as_str())
    {
        return Err(guard(
            "project name",
            format!("project `{name}` is a live install's name or this checkout's directory name"),
            "choose another scale-* name",
        ));
    }
    for v in &project.volumes {
        if !v.starts_with("scale_") {
            return Err(guard(
                "volumes",
                format!("volume `{v}` is not named scale_*"),
                "name every volume scale_<something>: `down` removes only scale_* volumes",
            ));
        }
    }
    for s in &project.services {
        for (src, _) in &s.volumes {
            if !src.starts_with("scale_") {
                return Err(guard(
                    "volumes",
                    format!(
                        "service {} mounts `{src}`, which is not a scale_* volume (a host path or a foreign volume)",
                        s.name
                    ),
                    "mount only scale_* named volumes",
                ));
            }
        }
        if s.network_mode.as_deref().is_some_and(|m| m == "host" || m.starts_with("container:")) {
            return Err(guard(
                "host network",
                format!("service {} uses network_mode {}", s.name, s.network_mode.clone().unwrap_or_default()),
                "remove network_mode: scale stacks run on their own network",
            ));
        }
        if s.privileged {
            return Err(guard("privileged", format!("service {} is privileged", s.name), "remove `privileged: true`"));
        }
        for p in &s.ports {
            if p.host_ip != "127.0.0.1" {
                return Err(guard(
                    "loopback ports",
                    format!("service {} publishes port {} on {}", s.name, p.host_port, p.host_ip),
                    "publish every port as \"127.0.0.1:2xxxx:PORT\"",
                ));
            }
            if LIVE_DEFAULT_PORTS.contains(&p.host_port) {
                return Err(guard(
                    "live ports",
                    format!("service {} publishes live default port {}", s.name, p.host_port),
                    "use a 2xxxx port (the SCALE_*_PORT values)",
                ));
            }
            if check_free {
                if let Err(detail) = local_stack::guard::port_free(p.host_port) {
                    return Err(guard(
                        "ports in use",
                        format!(
                            "service {} needs port 127.0.0.1:{}, which is already held ({detail})",
                            s.name, p.host_port
                        ),
                        "stop the other stack (scalebench stack down), or pick other ports",
                    ));
                }
            }
        }
    }
    let env = &project.env_file;
    if env.file_name().is_some_and(|n| n == ".env") || env.parent().is_some_and(|p| p == checkout_dir) {
        return Err(guard(
            "env file",
            format!("{} is the checkout's env file", env.display()),
            "scalebench writes its own env file into the run directory",
        ));
    }
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(env) {
        Ok(m) if m.permissions().mode() & 0o077 == 0 => {}
        Ok(m) => {
            return Err(guard(
                "env file",
                format!("{} has mode {:o}, readable by others", env.display(), m.permissions().mode() & 0o777),
                "the env file must be mode 600",
            ))
        }
        Err(e) => {
            return Err(guard(
                "env file",
                format!("{} cannot be read: {e}", env.display()),
                "let scalebench generate it",
            ))
        }
    }
    Ok(())
}

/// Write `env` as the project's env file, mode 600, in `run_dir`.
pub fn write_env_file(run_dir: &Path, env: &BTreeMap<String, String>) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(run_dir)?;
    let path = run_dir.join("scale.env");
    let tmp = run_dir.join(".scale.env.tmp");
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    writeln!(f, "# written by scalebench for this stack; never the checkout's .env")?;
    for (k, v) in env {
        writeln!(f, "{k}={v}")?;
    }
    drop(f);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}
