//! Phase 1: tags for the new points, acknowledged before any load.

use super::*;

pub(super) async fn send_topology(
    env: &Env<'_>,
    session: &mut Session,
    transport: &dyn Transport,
    points: u64,
) -> anyhow::Result<Topology> {
    let have = session.tags.len() as u64;
    let mut topology = Topology::default();
    if points <= have {
        return Ok(topology);
    }
    let t = Instant::now();
    let senders = transport.senders();
    // QoS 0 has no acks to wait for.
    let acks_expected = session.carrier.acks_expected();
    // Slice by slice: the model's tags, the adapter's addresses and topology,
    // sent and (when acknowledged) acked before the next slice, so a million
    // new points never sit in memory as records or messages at once.
    let mut at = have;
    while at < points && !env.stop.load(Ordering::Relaxed) {
        let n = (points - at).min(plugin_runtime::POINTS_PER_CALL as u64);
        let model = session.model.as_mut().expect("model is home between steps");
        let encoder = session.encoder.as_mut().expect("encoder is home between steps");
        let new_tags = model.tags(env.cfg.seed, at as u32, n as u32)?;
        let addrs = encoder.addresses(&new_tags)?;
        session.addresses.extend(addrs.into_iter().map(|a| Arc::<str>::from(a.as_str())));
        let messages = loadgen::topology_messages(&mut **encoder, &new_tags)?;
        session.tags.extend(&new_tags);
        // The counting adapter learns the run's points too: stored counts are
        // limited to them, so another writer's rows never hide a loss.
        let q = session.counter.clone();
        tokio::task::spawn_blocking(move || q.lock().unwrap().addresses(&new_tags)).await??;
        topology.new_points += n;
        topology.messages += messages.len() as u64;
        for chunk in messages.chunks(1000) {
            senders[0].send(chunk.to_vec()).await.map_err(|_| anyhow::anyhow!("transport closed"))?;
        }
        drop(messages);
        // At the broker's pace: wait for this slice's answers (a refusal is
        // one: it will never become an ack), giving up after a minute
        // without progress.
        // One look at the counts per poll: each merges every connection's.
        let mut last = (transport.counts().topology_settled, Instant::now());
        while acks_expected && last.0 < topology.messages && !env.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = transport.counts().topology_settled;
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        at += n;
    }
    topology.publish_s = t.elapsed().as_secs_f64();
    if acks_expected {
        topology.not_acknowledged = topology.messages.saturating_sub(transport.counts().topology_acked);
        if topology.not_acknowledged > 0 {
            env.progress.println(&format!(
                "  topology: {} of {} tag messages not acknowledged (refused or unanswered); see the transport errors",
                crate::format::thousands(topology.not_acknowledged),
                crate::format::thousands(topology.messages)
            ));
        }
    }
    Ok(topology)
}
