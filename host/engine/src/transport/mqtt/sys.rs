//! The broker's own counters: mosquitto publishes them under `$SYS/#` every
//! `sys_interval` seconds. We keep the latest numeric value of each topic
//! and take snapshots at the start and end of a step (publish/messages/dropped
//! is the one a pass rule reads: deliveries dropped because a subscriber's
//! queue was full).
//!
//! mosquitto republishes a `$SYS` value only when it changes, and keeps the
//! retained copy for about a minute: on a broker up for longer, a counter
//! that has not moved is never delivered to a new subscriber. Since the
//! subscription is made before step 1, a counter that was not published
//! between the step's start and a `$SYS` heartbeat (`uptime`, which changes
//! every interval) after its end did not change in the step: its delta is 0,
//! measured ([`BrokerSys::unchanged_since_subscribed`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use crate::future::BoxFuture;
use crate::results::BrokerCounter;
use crate::transport::{BrokerCounters, StepCounters};

pub const DROPPED: &str = "$SYS/broker/publish/messages/dropped";
/// Changes every `sys_interval`, so it is republished every interval.
pub const UPTIME: &str = "$SYS/broker/uptime";

pub struct BrokerSys {
    latest: Arc<Mutex<BTreeMap<String, f64>>>,
    /// When the last `uptime` heartbeat arrived.
    heartbeat: Arc<Mutex<Option<std::time::Instant>>>,
    task: tokio::task::JoinHandle<()>,
    client: AsyncClient,
}

impl BrokerSys {
    /// Subscribe to `$SYS/#` of the broker at `host:port` with the
    /// generator's own account `login` (user, password), over TLS when `tls`.
    pub fn start(host: &str, port: u16, login: Option<(&str, &str)>, tls: bool) -> BrokerSys {
        let mut o = MqttOptions::new(format!("scalebench-sys-{}", std::process::id()), host.to_string(), port);
        o.set_keep_alive(Duration::from_secs(30));
        if tls {
            // The same configuration as every connection; a failure here was
            // already reported by the generator's connection check.
            if let Ok(c) = crate::tls::client() {
                o.set_transport(rumqttc::Transport::tls_with_config(rumqttc::TlsConfiguration::Rustls(
                    c.config.clone(),
                )));
            }
        }
        if let Some((user, password)) = login {
            o.set_credentials(user.to_string(), password.to_string());
        }
        let (client, mut ev) = AsyncClient::new(o, 64);
        let latest = Arc::new(Mutex::new(BTreeMap::new()));
        let heartbeat = Arc::new(Mutex::new(None));
        let (l, hb) = (latest.clone(), heartbeat.clone());
        let c = client.clone();
        let task = tokio::spawn(async move {
            loop {
                match ev.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        let _ = c.subscribe("$SYS/#", QoS::AtMostOnce).await;
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        if let Some(v) = std::str::from_utf8(&p.payload)
                            .ok()
                            .and_then(|t| t.split_whitespace().next())
                            .and_then(|t| t.parse::<f64>().ok())
                        {
                            l.lock().unwrap().insert(p.topic.clone(), v);
                            if p.topic == UPTIME {
                                *hb.lock().unwrap() = Some(std::time::Instant::now());
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        });
        BrokerSys { latest, heartbeat, task, client }
    }

    /// Whether a heartbeat arrived after `t`, waiting up to `wait` for one.
    pub async fn heartbeat_after(&self, t: std::time::Instant, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.heartbeat.lock().unwrap().is_some_and(|h| h > t) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `topic` was never published while subscribed from before a step
    /// (whose start snapshot is `before`) until a heartbeat after its end:
    /// it did not change.
    pub fn unchanged_since_subscribed(
        before: &BTreeMap<String, f64>,
        after: &BTreeMap<String, f64>,
        topic: &str,
        heartbeat_after_end: bool,
    ) -> bool {
        before.contains_key(UPTIME) && heartbeat_after_end && !before.contains_key(topic) && !after.contains_key(topic)
    }
}

impl BrokerCounters for BrokerSys {
    fn snapshot(&self) -> BTreeMap<String, f64> {
        self.latest.lock().unwrap().clone()
    }

    fn step(&self, before: &BTreeMap<String, f64>, load_ended: std::time::Instant) -> BoxFuture<'_, StepCounters> {
        let before = before.clone();
        Box::pin(async move {
            let heartbeat = self.heartbeat_after(load_ended, Duration::from_secs(12)).await;
            let after = self.snapshot();
            let mut counters = compare(&before, &after);
            let dropped = if after.contains_key(DROPPED) {
                counters.get("publish/messages/dropped").and_then(|c| c.delta)
            } else if BrokerSys::unchanged_since_subscribed(&before, &after, DROPPED, heartbeat) {
                // Not republished because it did not change (a broker up for long).
                counters.insert(
                    "publish/messages/dropped".into(),
                    BrokerCounter { before: None, after: None, delta: Some(0.0) },
                );
                Some(0.0)
            } else {
                None
            };
            StepCounters { counters, dropped }
        })
    }

    fn drops_unreadable(&self) -> String {
        format!("{DROPPED} was not readable (is $SYS denied to scalebench's account?)")
    }

    fn stop(self: Box<Self>) {
        let _ = self.client.try_disconnect();
        self.task.abort();
    }
}

/// Before/after/delta of every counter seen in either snapshot, keyed
/// without the `$SYS/broker/` prefix.
pub fn compare(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, BrokerCounter> {
    let mut out = BTreeMap::new();
    for key in before.keys().chain(after.keys()) {
        let b = before.get(key).copied();
        let a = after.get(key).copied();
        let delta = match (b, a) {
            (Some(b), Some(a)) => Some(a - b),
            (None, Some(a)) if key == DROPPED => Some(a),
            _ => None,
        };
        let name = key.trim_start_matches("$SYS/broker/").to_string();
        out.insert(name, BrokerCounter { before: b, after: a, delta });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_not_republished_on_a_long_running_broker_is_unchanged_only_with_heartbeats() {
        let before: BTreeMap<String, f64> = [(UPTIME.to_string(), 400.0)].into_iter().collect();
        let after: BTreeMap<String, f64> = [(UPTIME.to_string(), 470.0)].into_iter().collect();
        assert!(BrokerSys::unchanged_since_subscribed(&before, &after, DROPPED, true));
        // No heartbeat after the step: cannot tell.
        assert!(!BrokerSys::unchanged_since_subscribed(&before, &after, DROPPED, false));
        // $SYS hidden altogether (no uptime either): not measured.
        assert!(!BrokerSys::unchanged_since_subscribed(&BTreeMap::new(), &BTreeMap::new(), DROPPED, true));
        // Published during the step: the delta says so, not this.
        let mut moved = after.clone();
        moved.insert(DROPPED.into(), 3.0);
        assert!(!BrokerSys::unchanged_since_subscribed(&before, &moved, DROPPED, true));
    }
}
