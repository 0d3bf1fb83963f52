//! The one-reading check: one reading published with QoS 1 must reach
//! `point_history` before the stack counts as started.

use std::time::{Duration, Instant};

use crate::postgres::pg_err;
use crate::{log_tail, LocalStack, Service, StackError, HOST};

impl LocalStack {
    /// Publish one reading (QoS 1) and wait until it is in `point_history`;
    /// then delete it. Re-publishes every 2 s (the historian may still be
    /// subscribing; a QoS 1 publish with no subscriber is acked and dropped).
    pub async fn reading_check(&mut self) -> Result<(), StackError> {
        let nonce = format!("{}-{}", std::process::id(), chrono_ms());
        let point = format!("_stack/ready/{nonce}");
        let topic = "fbf/scale/_stack/ready";
        let hist_log = self.paths.log(Service::Historian);
        let fail =
            |detail: String| StackError::ReadingCheck { detail, tail: log_tail(&hist_log, 20), log: hist_log.clone() };

        let pg = self.connect_pg().await?;
        let mut mqtt_opts = rumqttc::MqttOptions::new(format!("scalebench-check-{nonce}"), HOST, self.opts.mqtt_port);
        mqtt_opts.set_clean_session(true).set_keep_alive(Duration::from_secs(10));
        mqtt_opts.set_transport(reference_historian::tls::mqtt_transport(self.client_tls()?.as_ref()));
        let (client, mut eventloop) = rumqttc::AsyncClient::new(mqtt_opts, 16);
        let acks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let acks2 = acks.clone();
        let driver = tokio::spawn(async move {
            for _ in 0..100_000 {
                match eventloop.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::PubAck(_))) => {
                        acks2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });

        let delay = Duration::from_millis(self.opts.historian.delay_ms.unwrap_or(0));
        let timeout = self.opts.check_timeout + delay;
        let republish_every = Duration::from_secs(2) + delay;
        // One (point, ts) for every re-publication: copies are duplicates, never extra rows.
        let ts = chrono_ms();
        let payload = serde_json::json!({"point": point, "value": 1.0, "ts": ts}).to_string();
        let deadline = Instant::now() + timeout;
        let mut next_publish = Instant::now();
        let mut published = 0u64;
        let result = loop {
            if let Some(e) = self.historian.as_mut().and_then(|h| h.exited_error("running the one-reading check")) {
                break Err(e);
            }
            if Instant::now() >= next_publish {
                if client.try_publish(topic, rumqttc::QoS::AtLeastOnce, false, payload.clone()).is_ok() {
                    published += 1;
                }
                next_publish = Instant::now() + republish_every;
            }
            match pg.query_one("SELECT count(*) FROM point_history WHERE point = $1", &[&point]).await {
                Ok(row) if row.get::<_, i64>(0) > 0 => break Ok(()),
                Ok(_) => {}
                // The historian creates the table: it may not exist yet.
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {}
                Err(e) => break Err(pg_err("poll point_history", e)),
            }
            if Instant::now() > deadline {
                let acked = acks.load(std::sync::atomic::Ordering::Relaxed);
                break Err(fail(format!(
                    "published {published} reading(s) to {topic} (broker acked {acked}), none reached point_history within {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let _ = client.try_disconnect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        driver.abort();
        result?;
        if published > 1 {
            // Let re-published copies land before deleting, so none re-creates the row.
            tokio::time::sleep(Duration::from_millis(1000) + delay).await;
        }
        pg.execute("DELETE FROM point_history WHERE point = $1", &[&point])
            .await
            .map_err(|e| pg_err("delete the check row", e))?;
        // Let the stats file (rewritten every second) show the check reading,
        // so that counters read right after start() are a settled baseline.
        let settle = Instant::now() + Duration::from_secs(3);
        while Instant::now() < settle {
            if self.historian_stats().is_ok_and(|s| s.stored + s.duplicates + s.dropped >= 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

fn chrono_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
