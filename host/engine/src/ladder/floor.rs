//! The floor, before step 1: the carrier's bare round trip, on a transport
//! of its own. One message at a time (a canary, the size of one reading),
//! each sent when the last was answered, [`FLOOR_ROUND_TRIPS`] times: MQTT
//! PUBLISH → PUBACK, JetStream publish → ack, one-reading HTTP request →
//! answer. It is timed by the same transport code and the same clock as a
//! step's acknowledgements (sent when the bytes are handed to the socket,
//! answered when the acknowledgement is read), so the two compare: no
//! step's ack latency is honestly below it, and a difference between two
//! runs inside its spread is no measurable change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use crate::latency::{Quantiles, RESOLUTION_S};
use crate::results::Floor;
use crate::transport::{Batch, Carries, Message};

/// Round trips timed for the floor.
pub const FLOOR_ROUND_TRIPS: u64 = 200;
/// Longest one round trip may take before the floor gives up (it is not a
/// verdict: a slow carrier shows in the steps).
const ONE_WAIT: Duration = Duration::from_secs(5);

/// Time the carrier's bare round trip. Never fails the run: a floor that
/// could not be measured says why and the figures beside it go without.
pub(super) async fn measure_floor(session: &mut Session, stop: &AtomicBool) -> Floor {
    let carrier = format!("{}, one message at a time", session.carrier.describe());
    let mut floor = Floor { carrier, resolution_s: RESOLUTION_S, ..Default::default() };
    let seq = session.next_canary_seq;
    session.next_canary_seq += 1;
    let q = session.canary.clone();
    let ts = crate::clock::now_ms();
    let m = match tokio::task::spawn_blocking(move || q.lock().unwrap().canary(seq, ts)).await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            floor.problem = Some(format!("the target could not encode the message: {e}"));
            return floor;
        }
        Err(e) => {
            floor.problem = Some(e.to_string());
            return floor;
        }
    };
    let transport = match session.carrier.open().await {
        Ok(t) => t,
        Err(e) => {
            floor.problem = Some(format!("cannot open the transport: {e:#}"));
            return floor;
        }
    };
    let address: Arc<str> = Arc::from(m.address.as_str());
    let payload = bytes::Bytes::from(m.payload);
    let tx = transport.senders()[0].clone();
    for k in 0..FLOOR_ROUND_TRIPS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // Timed like a reading (one reading's worth), so the transport's
        // own recorder takes it; sent now, so it waited for nothing of ours.
        let batch: Batch = vec![Message {
            address: address.clone(),
            payload: payload.clone(),
            carries: Carries::Readings { n: 1, ts_s: ts.div_euclid(1000) },
            intended_ns: crate::clock::now_ns(),
        }];
        floor.asked += 1;
        if tx.send(batch).await.is_err() {
            break;
        }
        let deadline = Instant::now() + ONE_WAIT;
        while transport.counts().settled_msgs <= k {
            if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
                floor.problem = Some(format!(
                    "round trip {} of {FLOOR_ROUND_TRIPS} had no answer within {} s",
                    k + 1,
                    ONE_WAIT.as_secs()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if floor.problem.is_some() {
            break;
        }
    }
    drop(tx);
    let counts = transport.finish(Duration::from_secs(1)).await;
    floor.round_trip = Quantiles::of(&counts.latency.service_us);
    if floor.round_trip.count == 0 && floor.problem.is_none() {
        floor.problem = Some(format!(
            "no round trip was acknowledged{}",
            counts.error_samples.first().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
    }
    floor
}
