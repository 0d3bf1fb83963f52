//! What a run's session is opened from: the seam between the climb and
//! the parts only a real run has. [`Plugins`] instantiates the model's and
//! the target's WebAssembly components, checks the target's plan against
//! the stack's services, opens the carrier and the storage counter, and
//! connects a distributed run's workers; the fast tier's opener hands the
//! same `ladder::run` in-memory fakes instead (`climb_tests.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use plugin_runtime::adapter_types::TransportPlan;
use plugin_runtime::{ProbeSet, Runtime, TargetAdapter, ValueModel};

use super::{LadderConfig, Session};
use crate::error::Error;
use crate::live_safety;
use crate::load_source::{LoadSource, Local};
use crate::services::{Scoped, StackServices};
use crate::stack::StackDriver;
use crate::transport::{BrokerCounters, CarrierOptions};

pub use crate::future::LocalBoxFuture;

/// What `ladder::run` opens its session with.
pub trait SessionParts {
    /// The plugins (the target's plan checked against the stack's
    /// services), the carrier and the storage counter: everything but
    /// where the load comes from (this process, until `workers`).
    fn open<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        stack: &'a dyn StackDriver,
        services: &'a Arc<StackServices>,
        watch: live_safety::Watch,
    ) -> LocalBoxFuture<'a, anyhow::Result<Opened>>;

    /// A distributed run's workers (`cfg.workers`), connected and ready,
    /// as the run's load source.
    fn workers<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        stack: &'a dyn StackDriver,
    ) -> LocalBoxFuture<'a, anyhow::Result<Arc<dyn LoadSource>>>;
}

/// A session as opened, with the plugins used (by their sha256) and the
/// broker's own counters where it has them.
pub struct Opened {
    pub(crate) session: Session,
    pub(crate) plugins_used: BTreeMap<String, String>,
    pub(crate) sys: Option<Box<dyn BrokerCounters>>,
}

/// A real run's parts: the plugins from the catalog, instantiated in `0`.
pub struct Plugins<'r>(pub &'r Runtime);

impl SessionParts for Plugins<'_> {
    fn open<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        stack: &'a dyn StackDriver,
        services: &'a Arc<StackServices>,
        watch: live_safety::Watch,
    ) -> LocalBoxFuture<'a, anyhow::Result<Opened>> {
        let rt = self.0;
        Box::pin(async move {
            // Plugins.
            let model_plugin = crate::catalog::load(rt, &cfg.model)?;
            let target_plugin = crate::catalog::load(rt, &cfg.target)?;
            let mut model = ValueModel::instantiate(rt, &model_plugin)?;
            model.configure(&cfg.model_params).map_err(crate::catalog::user_error)?;
            let period_ms = model.sample_period_ms()?;
            let adapter = |role: &'static str| -> anyhow::Result<(TargetAdapter, plugin_runtime::adapter_types::Plan)> {
                let mut a = TargetAdapter::instantiate(rt, &target_plugin, Scoped::shared(services, role))?;
                let plan = a
                    .configure(&crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref()))
                    .map_err(crate::catalog::user_error)?;
                Ok((a, plan))
            };
            let (encoder, plan) = adapter("encoder")?;
            // The plan names the services it needs; the stack must have every one.
            let provided = stack.services();
            for name in &plan.services {
                if !provided.iter().any(|e| &e.name == name) {
                    return Err(Error::MissingService {
                        target: cfg.target.clone(),
                        what: format!("a service named `{name}`"),
                        stack: stack.kind().into(),
                        has: stack.describe_services(),
                    }
                    .into());
                }
            }
            // HTTP: headers and judging on an adapter instance of their own.
            let http_rules: Option<Arc<dyn crate::transport::http::IngestRules>> = match plan.transport {
                TransportPlan::Http => {
                    let rules = crate::transport::http::AdapterRules(Arc::new(Mutex::new(adapter("ingest")?.0)));
                    if !crate::transport::http::IngestRules::judged_by_adapter(&rules) {
                        tracing::warn!("{}", crate::transport::http::NO_HTTP_INGEST);
                    }
                    Some(Arc::new(rules))
                }
                _ => None,
            };
            let carrier_opts = CarrierOptions {
                connections: cfg.connections,
                inflight: cfg.inflight,
                mqtt_user: cfg.mqtt_user.clone(),
                mqtt_password: cfg.mqtt_password.clone(),
                mqtt_version: cfg.mqtt_version,
                http_window: cfg.http_window,
                http_rules,
                client_id_prefix: None,
                worker: false,
            };
            let carrier = crate::transport::carrier_for(&cfg.target, &plan.transport, stack, &carrier_opts).await?;
            let counter = Arc::new(Mutex::new(adapter("counter")?.0));
            let canary = Arc::new(Mutex::new(adapter("canary")?.0));
            let mut plugins_used = BTreeMap::new();
            plugins_used.insert(format!("model:{}", cfg.model), model_plugin.sha256.clone());
            plugins_used.insert(format!("target:{}", cfg.target), target_plugin.sha256.clone());
            let probe_set = match &cfg.probes {
                Some(spec) => {
                    let p = crate::catalog::load(rt, spec)?;
                    plugins_used.insert(format!("probes:{spec}"), p.sha256.clone());
                    Some(ProbeSet::instantiate(rt, &p, Scoped::shared(services, crate::services::PROBES_ROLE))?)
                }
                None => None,
            };

            let jetstream = match &plan.transport {
                TransportPlan::NatsJetstream(jp) => Some((jp.stream_name.as_str(), jp.max_msgs)),
                _ => None,
            };
            let mut durability_settings = stack.settings();
            if let TransportPlan::NatsJetstream(jp) = &plan.transport {
                durability_settings.insert("jetstream.storage".into(), jp.storage.clone());
                durability_settings.insert("jetstream.replicas".into(), jp.replicas.to_string());
            }
            let count =
                crate::storage::count_for(&cfg.target, &plan.storage, &counter, stack, services, jetstream).await?;
            {
                let q = counter.clone();
                tokio::task::spawn_blocking(move || q.lock().unwrap().preflight())
                    .await?
                    .context("the target is not ready for a ladder")?;
            }
            let sys = carrier.broker_counters();

            let session = Session {
                model: Some(Box::new(model)),
                encoder: Some(Box::new(encoder)),
                counter,
                canary,
                probe_set,
                addresses: Vec::new(),
                tags: Default::default(),
                period_ms,
                carrier,
                count,
                next_canary_seq: 0,
                watch,
                // Chosen by `ladder::run` once the rest is open.
                load: Arc::new(Local),
                durability_settings,
            };

            Ok(Opened { session, plugins_used, sys })
        })
    }

    /// The same plugin bytes and params, the stack's services (the ones
    /// the isolation guard checked), this run's connection options.
    fn workers<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        stack: &'a dyn StackDriver,
    ) -> LocalBoxFuture<'a, anyhow::Result<Arc<dyn LoadSource>>> {
        Box::pin(async move {
            use crate::distributed::{coordinator, wire, worker};
            let template = coordinator::InitTemplate {
                run_id: cfg.run_id.clone(),
                model: (cfg.model.clone(), crate::catalog::bytes(&cfg.model)?),
                model_params: cfg.model_params.clone(),
                target: (cfg.target.clone(), crate::catalog::bytes(&cfg.target)?),
                target_params: crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref()),
                seed: cfg.seed,
                services: stack
                    .services()
                    .into_iter()
                    .map(|e| wire::Service { name: e.name, kind: worker::kind_name(e.kind).into(), address: e.address })
                    .collect(),
                connections: cfg.connections,
                inflight: cfg.inflight,
                http_window: cfg.http_window,
                mqtt_user: cfg.mqtt_user.clone(),
                mqtt_password: cfg.mqtt_password.clone(),
                mqtt_version: cfg.mqtt_version,
            };
            let urls = cfg.workers.clone();
            let w = tokio::task::spawn_blocking(move || {
                let w = coordinator::Workers::connect(&urls, std::time::Duration::from_secs(60))?;
                w.init(&template)?;
                let named: Vec<&str> = w.list.iter().map(|w| w.url.as_str()).collect();
                tracing::info!("workers: {} ready ({})", w.len(), named.join(", "));
                Ok::<_, anyhow::Error>(w)
            })
            .await??;
            Ok(Arc::new(w) as Arc<dyn LoadSource>)
        })
    }
}
