//! `run`'s flags as the engine's [`StackRequest`] (the drivers and their
//! start are `scalebench_engine::stack::start`), and the `--tls` checks,
//! which read the command line.

use anyhow::Context as _;
use plugin_runtime::adapter_types::Plan;

use crate::cli::{RunArgs, StackKind};
use crate::error::usage;
use crate::stack::start::{ExternalServices, HistorianFaults, Kind, StackRequest};
use crate::stack::StackDriver;
use crate::throwaway_ca::ThrowawayPki;

pub use crate::stack::start::{compose_env, compose_file_for, free_port, parse_cap, run_dir, temporary_run_dir};

/// The stack `run`'s flags ask for.
pub fn request(args: &RunArgs) -> StackRequest {
    let cal = &args.calibration;
    StackRequest {
        kind: match args.stack.kind {
            StackKind::Local => Kind::Local,
            StackKind::External => Kind::External,
            StackKind::Docker => Kind::Docker,
        },
        base_port: args.stack.base_port,
        run_dir: args.stack.run_dir.clone(),
        nodes: args.stack.nodes,
        nats_sync_interval: args.stack.nats_sync_interval.clone(),
        historian: HistorianFaults {
            drop_one_in: cal.historian_drop_one_in,
            delay_ms: cal.historian_delay_ms,
            ack_before_commit: cal.historian_ack_before_commit,
            session_settings: cal.historian_session_setting.clone(),
            leak_mb_per_s: cal.historian_leak_mb_per_s,
        },
        mosquitto_acl: cal.mosquitto_acl.clone(),
        compose: args.docker.compose.clone(),
        caps: args.docker.cap.clone(),
        cpuset: args.docker.cpuset.clone(),
        external: ExternalServices {
            mqtt_url: args.external.mqtt_url.clone(),
            pg_url: args.external.pg_url.clone(),
            nats_url: args.external.nats_url.clone(),
            service: args.external.service.clone(),
            watch: args.external.watch.clone(),
        },
        target_params: args.plugins.target_params.clone(),
        credentials_file: args.plugins.credentials_file.clone(),
    }
}

/// Start (or, for external, describe) the stack `run`'s flags ask for.
pub async fn start(
    args: &RunArgs,
    plan: &Plan,
    target: &str,
    run_id: &str,
    tls: Option<&ThrowawayPki>,
) -> anyhow::Result<Box<dyn StackDriver>> {
    crate::stack::start::start(&request(args), plan, target, run_id, tls).await
}

/// `--tls` is for the stacks scalebench starts (local and Docker): refused
/// on an external one, and beside the flags that describe a TLS set-up of
/// one's own.
pub fn check_built_in_tls(args: &RunArgs) -> anyhow::Result<()> {
    if !args.stack.tls {
        return Ok(());
    }
    if args.stack.kind == StackKind::External {
        return Err(usage(
            "--tls runs the stack scalebench starts (--stack local or docker) TLS-only with a CA of its own; for a stack you run, give its URLs with TLS (mqtts://, tls://, https://, sslmode=require) and --tls-ca for its CA".into(),
        ));
    }
    let a = &args.access;
    if a.tls_ca.is_some() || a.tls_cert.is_some() || a.tls_key.is_some() || a.tls_server_name.is_some() {
        return Err(usage(
            "--tls makes the stack's CA and certificates itself; --tls-ca, --tls-cert, --tls-key and --tls-server-name are for a stack you run (--stack external)\nhint: drop those flags, or drop --tls".into(),
        ));
    }
    if args.workers.workers.is_some() {
        return Err(usage(
            "--tls with workers is not built yet: the workers would need the run's throwaway CA\nhint: run the TLS ladder without workers".into(),
        ));
    }
    Ok(())
}

/// `--tls`: the run's throwaway CA and certificates (in the run
/// directory's `tls/`), installed as what every client of this run trusts.
pub fn built_in_tls(args: &RunArgs, run_id: &str) -> anyhow::Result<Option<ThrowawayPki>> {
    if !args.stack.tls {
        return Ok(None);
    }
    let dir = run_dir(&request(args), run_id).join("tls");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let pki = crate::throwaway_ca::make(&dir)?;
    let trust = crate::tls::TlsSettings { ca: Some(pki.ca.clone()), ..Default::default() };
    super::install_access_with(&args.access, &trust)?;
    Ok(Some(pki))
}
