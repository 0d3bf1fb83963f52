//! Who counts what the SUT stored, as the adapter's plan says (`storage`):
//! the adapter itself through the host's SQL or HTTP (`sql`, `http`), or
//! the host from a JetStream stream by the headers it set when publishing
//! (`jetstream`). The host never decodes an adapter's payload.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
#[cfg(feature = "nats")]
use std::time::Duration;

use plugin_runtime::adapter_types::StoragePlan;
use plugin_runtime::types::Window;
use plugin_runtime::TargetAdapter;

use crate::future::BoxFuture;
use crate::services::StackServices;
#[cfg(feature = "nats")]
use crate::transport::nats as nats_transport;

/// Stored readings per second of payload ts, the storage's own write
/// counter, and the SUT failures storage itself reveals.
pub trait StoredCount: Send + Sync {
    /// Readings of this run stored per second (Unix s) of payload ts in `window`.
    fn stored(&self, window: Window) -> BoxFuture<'_, anyhow::Result<BTreeMap<i64, u64>>>;
    /// Rows the storage has written so far by its own counter, and where that comes from.
    fn rows_written(&self) -> BoxFuture<'_, Option<(f64, String)>>;
    /// A failure storage shows by itself (a stream at its limits).
    fn failure(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async { None })
    }
    /// True when stored counts settle over time (an ingester commits in
    /// batches) and the drain must wait for them to hold still.
    fn settles(&self) -> bool;
    /// The store's cheapest answer, for its round trip: `SELECT 1` on the
    /// database, a `GET /` on the HTTP service (any status is an answer),
    /// the stream's info. Err when it answered with an error.
    fn ping(&self) -> BoxFuture<'_, Result<(), String>>;
    /// The store in the user's words ("PostgreSQL (service `postgres`)").
    fn store_name(&self) -> String;
}

/// Counting through the adapter (plans `sql` and `http`).
pub struct AdapterCount {
    pub adapter: Arc<Mutex<TargetAdapter>>,
    /// The stack's services, for the store's round trip.
    pub services: Arc<StackServices>,
    /// Which kind of store the plan names, and its service.
    pub store: Store,
}

/// The store an adapter counts in, by the plan's service.
#[derive(Debug, Clone)]
pub enum Store {
    Sql(String),
    Http(String),
}

impl StoredCount for AdapterCount {
    fn stored(&self, window: Window) -> BoxFuture<'_, anyhow::Result<BTreeMap<i64, u64>>> {
        let q = self.adapter.clone();
        Box::pin(async move {
            let rows = tokio::task::spawn_blocking(move || q.lock().unwrap().stored(window)).await??;
            Ok(rows.iter().map(|p| (p.second_ms.div_euclid(1000), p.count)).collect())
        })
    }
    fn rows_written(&self) -> BoxFuture<'_, Option<(f64, String)>> {
        let q = self.adapter.clone();
        Box::pin(async move {
            let stats = tokio::task::spawn_blocking(move || q.lock().unwrap().stats()).await.ok()?.ok()?;
            stats.iter().find(|s| s.name == "ingest.rows_written_total").and_then(|s| {
                s.number.map(|n| (n, s.text.clone().unwrap_or_else(|| "the target's own write counter".into())))
            })
        })
    }
    fn settles(&self) -> bool {
        true
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
        let (services, store) = (self.services.clone(), self.store.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || match store {
                Store::Sql(service) => services.pg_roundtrip(&service).map(|_| ()).map_err(|e| format!("{e:#}")),
                Store::Http(service) => {
                    let req = plugin_runtime::types::HttpRequest {
                        method: "GET".into(),
                        service,
                        path: "/".into(),
                        headers: Vec::new(),
                        body: Vec::new(),
                    };
                    services.timed_http(STORE_WATCH, &req).0.map(|_| ())
                }
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }
    fn store_name(&self) -> String {
        match &self.store {
            Store::Sql(s) => format!("PostgreSQL (service `{s}`)"),
            Store::Http(s) => format!("the HTTP service `{s}`"),
        }
    }
}

/// Who the store watch's requests are logged for.
const STORE_WATCH: &str = "store watch";

/// How long a JetStream count is tried before the step says it could not count.
#[cfg(feature = "nats")]
const COUNT_DEADLINE: Duration = Duration::from_secs(45);

/// Counting a JetStream stream from the host (plan `jetstream`).
#[cfg(feature = "nats")]
pub struct StreamCount {
    pub client: async_nats::Client,
    pub stream: String,
    pub max_msgs: i64,
}

#[cfg(feature = "nats")]
impl StoredCount for StreamCount {
    fn stored(&self, window: Window) -> BoxFuture<'_, anyhow::Result<BTreeMap<i64, u64>>> {
        Box::pin(async move {
            // A node that just died or restarted can leave the stream
            // without a leader for seconds (longer on a loaded host): the
            // count is tried again until it succeeds and has read every
            // message the stream holds, or COUNT_DEADLINE passes. A read
            // cut short is never taken as the count (it would be loss).
            let deadline = std::time::Instant::now() + COUNT_DEADLINE;
            loop {
                let attempt = nats_transport::stored_per_second(
                    &self.client,
                    &self.stream,
                    (window.start_ms, window.end_ms),
                    Duration::from_secs(3),
                )
                .await;
                let problem = match attempt {
                    Ok((per_second, read)) => match nats_transport::stream_state(&self.client, &self.stream).await {
                        Some((held, _)) if read >= held => return Ok(per_second),
                        Some((held, _)) => {
                            format!("the read ended after {read} of the {held} messages the stream holds")
                        }
                        None => "the stream's state could not be read".to_string(),
                    },
                    Err(e) => e,
                };
                if std::time::Instant::now() >= deadline {
                    return Err(anyhow::anyhow!(
                        "counting stored messages in JetStream stream {} (tried for {} s): {problem}",
                        self.stream,
                        COUNT_DEADLINE.as_secs()
                    ));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
    fn rows_written(&self) -> BoxFuture<'_, Option<(f64, String)>> {
        Box::pin(async move {
            nats_transport::stream_state(&self.client, &self.stream)
                .await
                .map(|(m, _)| (m as f64, format!("JetStream stream {}: messages", self.stream)))
        })
    }
    fn failure(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            if self.max_msgs <= 0 {
                return None;
            }
            let (messages, limit) = nats_transport::stream_state(&self.client, &self.stream).await?;
            (limit > 0 && messages as i64 >= limit).then(|| {
                format!(
                    "JetStream stream {} reached its limit max_msgs={limit} (holds {messages}): it discarded messages it had acknowledged",
                    self.stream
                )
            })
        })
    }
    fn settles(&self) -> bool {
        false
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            nats_transport::stream_state(&self.client, &self.stream)
                .await
                .map(|_| ())
                .ok_or_else(|| format!("the info of JetStream stream {} could not be read", self.stream))
        })
    }
    fn store_name(&self) -> String {
        format!("JetStream stream {}", self.stream)
    }
}

/// The counter the adapter's storage plan asks for.
pub async fn count_for(
    target: &str,
    plan: &StoragePlan,
    counter: &Arc<Mutex<TargetAdapter>>,
    stack: &dyn crate::stack::StackDriver,
    services: &Arc<StackServices>,
    jetstream: Option<(&str, i64)>,
) -> anyhow::Result<Arc<dyn StoredCount>> {
    Ok(match plan {
        StoragePlan::Sql(service) => Arc::new(AdapterCount {
            adapter: counter.clone(),
            services: services.clone(),
            store: Store::Sql(service.clone()),
        }),
        StoragePlan::Http(service) => Arc::new(AdapterCount {
            adapter: counter.clone(),
            services: services.clone(),
            store: Store::Http(service.clone()),
        }),
        StoragePlan::Jetstream(stream) => {
            let ep = stack.service_of_kind(crate::stack::ServiceKind::Nats).ok_or_else(|| {
                crate::error::Error::MissingService {
                    target: target.into(),
                    what: "a NATS server (its storage plan counts a JetStream stream)".into(),
                    stack: stack.kind().into(),
                    has: stack.describe_services(),
                }
            })?;
            #[cfg(not(feature = "nats"))]
            {
                let _ = (ep, jetstream, stream);
                return Err(crate::error::left_out("Counting a NATS JetStream stream"));
            }
            #[cfg(feature = "nats")]
            {
                let client = nats_transport::connect(&ep.address).await?;
                let max_msgs = jetstream.filter(|(s, _)| s == stream).map(|(_, m)| m).unwrap_or(0);
                Arc::new(StreamCount { client, stream: stream.clone(), max_msgs })
            }
        }
    })
}
