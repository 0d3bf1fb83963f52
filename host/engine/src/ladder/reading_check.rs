//! The one-reading check before step 1: one canary through the real
//! transport must be acknowledged *and* reach storage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use crate::error::Error;
use crate::transport::{Batch, Carries, Message};

/// How long the one-reading check waits for the ack, then for storage.
const CHECK_ACK_WAIT: Duration = Duration::from_secs(15);
const CHECK_STORE_WAIT: Duration = Duration::from_secs(20);

/// Publish one canary through the real transport and see it acknowledged
/// and stored. A broker that acknowledges what never reaches storage (an
/// ACL that denies scalebench's account, a SUT not subscribed) is refused
/// here, before it can read as a SUT losing data.
pub(super) async fn reading_check(session: &mut Session, stop: &AtomicBool) -> Result<(), Error> {
    let seq = session.next_canary_seq;
    session.next_canary_seq += 1;
    let ts = crate::clock::now_ms();
    let q = session.canary.clone();
    let m = tokio::task::spawn_blocking(move || q.lock().unwrap().canary(seq, ts))
        .await
        .map_err(|e| Error::ReadingCheck { detail: e.to_string(), hint: "report this".into() })?
        .map_err(|e| Error::ReadingCheck {
            detail: format!("the target could not encode a canary: {e}"),
            hint: "fix the target adapter".into(),
        })?;
    let address = m.address.clone();
    let transport = session.carrier.open().await.map_err(|e| Error::ReadingCheck {
        detail: format!("cannot open the transport: {e:#}"),
        hint: "check the stack is running and reachable".into(),
    })?;
    let batch: Batch = vec![Message {
        address: Arc::from(m.address.as_str()),
        payload: bytes::Bytes::from(m.payload),
        carries: Carries::Canary { seq },
        intended_ns: crate::clock::now_ns(),
    }];
    let sent = transport.senders()[0].send(batch).await.is_ok();
    let deadline = Instant::now() + CHECK_ACK_WAIT;
    // Until it is settled: acknowledged, refused, or failed without an answer.
    while sent && transport.counts().settled_msgs < 1 && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = transport.finish(Duration::from_secs(1)).await;
    if counts.canaries_acked < 1 && counts.refused_msgs > 0 {
        let why = counts.error_samples.first().cloned().unwrap_or_else(|| "no reason given".into());
        return Err(Error::ReadingCheck {
            detail: format!("{} refused the one reading (canary {seq} to {address}): {why}", session.carrier.acknowledger()),
            hint: "check the adapter's address (service and path) against what the server serves, and that scalebench's account may write there".into(),
        });
    }
    if counts.canaries_acked < 1 {
        return Err(Error::ReadingCheck {
            detail: format!(
                "the transport did not acknowledge one reading (to {address}) within {} s{}",
                CHECK_ACK_WAIT.as_secs(),
                counts.error_samples.first().map(|e| format!(" ({e})")).unwrap_or_default()
            ),
            hint: format!("check that {} is up and accepts scalebench's account", session.carrier.acknowledger()),
        });
    }
    if session.carrier.ack_means_stored() {
        // JetStream acknowledges only what the stream stored.
        return Ok(());
    }
    let deadline = Instant::now() + CHECK_STORE_WAIT;
    let mut last_error = None;
    loop {
        let q = session.canary.clone();
        match tokio::task::spawn_blocking(move || q.lock().unwrap().canaries_stored(seq)).await {
            Ok(Ok(seqs)) if seqs.contains(&seq) => return Ok(()),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => last_error = Some(e.to_string()),
            Err(e) => last_error = Some(e.to_string()),
        }
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return Err(Error::ReadingCheck {
                detail: format!(
                    "{} acknowledged a reading (canary {seq} to {address}) that never reached storage within {} s{}",
                    session.carrier.acknowledger(),
                    CHECK_STORE_WAIT.as_secs(),
                    last_error.map(|e| format!("; counting it failed: {e}")).unwrap_or_default()
                ),
                hint: session.carrier.unstored_hint(&counts),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
