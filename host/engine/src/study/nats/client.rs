//! What every row's clients share: connections spread over the nodes,
//! numbered payloads, the warm-up that proves every subscriber hears every
//! publisher, and rate arithmetic.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use bytes::Bytes;
use futures_util::StreamExt;

pub(super) async fn connect(url: &str, name: &str, sub_capacity: usize) -> anyhow::Result<async_nats::Client> {
    crate::transport::nats_access::options(url)
        .await
        .map_err(|e| anyhow!("cannot connect to {url}: {e}"))?
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(10)))
        .max_reconnects(3)
        .ignore_discovered_servers()
        .subscription_capacity(sub_capacity)
        .connect(url)
        .await
        .with_context(|| format!("cannot connect to {url}"))
}

/// Payload: byte 0 'M', bytes 1..9 sequence (LE), 9..13 publisher, the
/// rest 'x' (at least 13 bytes). A warm-up message starts with '~' and is
/// never counted.
pub(super) fn payload(size: usize, publisher: u32, seq: u64) -> Bytes {
    let mut v = vec![b'x'; size.max(13)];
    v[0] = b'M';
    v[1..9].copy_from_slice(&seq.to_le_bytes());
    v[9..13].copy_from_slice(&publisher.to_le_bytes());
    Bytes::from(v)
}

pub(super) fn warmup_payload(publisher: u32) -> Bytes {
    Bytes::from(format!("~warmup {publisher}"))
}

pub(super) fn is_warmup(p: &[u8]) -> bool {
    p.first() == Some(&b'~')
}

pub(super) fn parse_seq(p: &[u8]) -> Option<(u32, u64)> {
    if p.len() < 13 || p[0] != b'M' {
        return None;
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&p[1..9]);
    let mut pb = [0u8; 4];
    pb.copy_from_slice(&p[9..13]);
    Some((u32::from_le_bytes(pb), u64::from_le_bytes(seq)))
}

/// Until every subscriber heard a warm-up from every publisher (interest
/// has reached every node); bounded to 10 s.
pub(super) async fn warm_up(
    pubs: &[async_nats::Client],
    subs: &mut [async_nats::Subscriber],
    subject: &async_nats::Subject,
) -> anyhow::Result<()> {
    let mut seen = vec![vec![false; pubs.len()]; subs.len()];
    let deadline = Instant::now() + Duration::from_secs(10);
    for _round in 0..200 {
        for (k, p) in pubs.iter().enumerate() {
            p.publish(subject.clone(), warmup_payload(k as u32)).await?;
            p.flush().await?;
        }
        for (si, s) in subs.iter_mut().enumerate() {
            while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(30), s.next()).await {
                if let Some(k) = std::str::from_utf8(&m.payload)
                    .ok()
                    .and_then(|t| t.strip_prefix("~warmup "))
                    .and_then(|k| k.parse::<usize>().ok())
                {
                    if k < pubs.len() {
                        seen[si][k] = true;
                    }
                }
            }
        }
        if seen.iter().all(|r| r.iter().all(|&b| b)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            break;
        }
    }
    let missing: usize = seen.iter().map(|r| r.iter().filter(|b| !**b).count()).sum();
    Err(anyhow!("warm-up: {missing} publisher→subscriber pair(s) never heard each other within 10 s (interest did not propagate)"))
}

pub(super) fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

pub(super) fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

pub(super) fn node_of(urls: &[String], k: usize) -> &str {
    &urls[k % urls.len()]
}

/// "pubs on n0,n1; subs on n1,n2" from the connections' INFO.
pub(super) fn landed_on(pubs: &[async_nats::Client], subs: &[async_nats::Client]) -> String {
    let names =
        |cs: &[async_nats::Client]| cs.iter().map(|c| c.server_info().server_name).collect::<Vec<_>>().join(",");
    if subs.is_empty() {
        format!("publishers on {}", names(pubs))
    } else {
        format!("publishers on {}; subscribers on {}", names(pubs), names(subs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_is_never_a_warmup() {
        for seq in [0u64, 126, b'~' as u64, 1 << 40] {
            let p = payload(128, 3, seq);
            assert_eq!(p.len(), 128);
            assert!(!is_warmup(&p));
            assert_eq!(parse_seq(&p), Some((3, seq)));
        }
        assert!(is_warmup(&warmup_payload(2)));
        assert_eq!(parse_seq(&warmup_payload(2)), None);
    }
}
