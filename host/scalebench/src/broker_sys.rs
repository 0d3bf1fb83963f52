//! The broker's own counters: mosquitto publishes them under `$SYS/#` every
//! `sys_interval` seconds. We keep the latest numeric value of each topic
//! and take snapshots at the start and end of a step (publish/messages/dropped
//! is the one a pass rule reads: deliveries dropped because a subscriber's
//! queue was full).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use crate::results::BrokerCounter;

pub const DROPPED: &str = "$SYS/broker/publish/messages/dropped";

pub struct BrokerSys {
    latest: Arc<Mutex<BTreeMap<String, f64>>>,
    task: tokio::task::JoinHandle<()>,
    client: AsyncClient,
}

impl BrokerSys {
    /// Subscribe to `$SYS/#` with the generator's own account.
    pub fn start(cfg: &crate::transport::mqtt::MqttConfig) -> BrokerSys {
        let mut o = MqttOptions::new(format!("scalebench-sys-{}", std::process::id()), cfg.host.clone(), cfg.port);
        o.set_keep_alive(Duration::from_secs(30));
        if let Some(u) = &cfg.username {
            o.set_credentials(u.clone(), cfg.password.clone().unwrap_or_default());
        }
        let (client, mut ev) = AsyncClient::new(o, 64);
        let latest = Arc::new(Mutex::new(BTreeMap::new()));
        let l = latest.clone();
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
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        });
        BrokerSys { latest, task, client }
    }

    pub fn snapshot(&self) -> BTreeMap<String, f64> {
        self.latest.lock().unwrap().clone()
    }

    pub fn stop(self) {
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
