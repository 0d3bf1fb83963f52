//! The study's plan: the core, JetStream and flood rows, their names, and
//! the bounds every row runs under (`--quick` or the full ladder).

use serde::{Deserialize, Serialize};

use super::ACK_WINDOW;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreSpec {
    pub name: String,
    pub publishers: u32,
    pub subscribers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsSpec {
    pub name: String,
    /// "file" or "memory".
    pub storage: String,
    pub replicas: u32,
    pub publishers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
    /// Wait for each ack before the next publish (else a window of [`ACK_WINDOW`]).
    pub sync: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FloodSpec {
    pub name: String,
    pub publishers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
}

/// Every row the study runs, with its sizes and bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub quick: bool,
    pub core: Vec<CoreSpec>,
    pub jetstream: Vec<JsSpec>,
    pub ping_count: u64,
    pub ping_payload_bytes: usize,
    pub floods: Vec<FloodSpec>,
    pub ack_window: usize,
    /// No row publishes longer than this.
    pub row_time_cap_s: f64,
    /// A subscriber that hears nothing for this long after the publishers
    /// finished is done.
    pub idle_timeout_s: f64,
}

pub fn human(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        crate::format::compact(n as f64)
    } else if n >= 1_000 && n.is_multiple_of(100) {
        let k = n as f64 / 1000.0;
        format!("{}k", if k.fract() == 0.0 { format!("{k:.0}") } else { format!("{k}") })
    } else {
        n.to_string()
    }
}

pub fn size_name(b: usize) -> String {
    if b >= 1024 && b.is_multiple_of(1024) {
        format!("{}k", b / 1024)
    } else {
        b.to_string()
    }
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        let core = |p: u32, s: u32, m: u64, b: usize| CoreSpec {
            name: format!("core-{p}p{s}s-{}-{}", human(m), size_name(b)),
            publishers: p,
            subscribers: s,
            messages: m,
            payload_bytes: b,
        };
        let js = |storage: &str, r: u32, p: u32, m: u64, b: usize, sync: bool| JsSpec {
            name: format!(
                "js-{}-r{r}-{p}p-{}-{}{}",
                if storage == "memory" { "mem" } else { "file" },
                human(m),
                size_name(b),
                if sync { "-sync" } else { "" }
            ),
            storage: storage.into(),
            replicas: r,
            publishers: p,
            messages: m,
            payload_bytes: b,
            sync,
        };
        let flood = |p: u32, m: u64, b: usize| FloodSpec {
            name: format!("flood-{p}p-{}-{}", human(m), size_name(b)),
            publishers: p,
            messages: m,
            payload_bytes: b,
        };
        let (c, c_big, j, j4, j_sync) =
            if quick { (20_000, 20_000, 5_000, 5_000, 1_000) } else { (100_000, 200_000, 20_000, 50_000, 2_000) };
        Plan {
            quick,
            core: vec![core(1, 1, c, 128), core(4, 4, c_big, 128), core(8, 8, c_big, 128), core(4, 4, c, 1024)],
            jetstream: vec![
                js("file", 3, 1, j_sync, 128, true),
                js("file", 3, 1, j, 128, false),
                js("file", 3, 4, j4, 128, false),
                js("file", 3, 1, j, 1024, false),
                js("file", 3, 4, j, 1024, false),
                js("file", 1, 1, j, 128, false),
                js("file", 1, 4, j4, 128, false),
                js("memory", 1, 1, j, 128, false),
                js("memory", 1, 4, j4, 128, false),
                js("memory", 3, 1, j, 128, false),
                js("memory", 3, 4, j4, 128, false),
            ],
            ping_count: if quick { 300 } else { 1_000 },
            ping_payload_bytes: 128,
            floods: if quick {
                vec![flood(1, 5_000, 128), flood(4, 5_000, 1024)]
            } else {
                vec![flood(1, 5_000, 128), flood(4, 10_000, 128), flood(4, 5_000, 1024)]
            },
            ack_window: ACK_WINDOW,
            row_time_cap_s: if quick { 20.0 } else { 60.0 },
            idle_timeout_s: 2.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        assert_eq!(human(20_000), "20k");
        assert_eq!(human(1_500), "1.5k");
        assert_eq!(human(300), "300");
        assert_eq!(size_name(1024), "1k");
        assert_eq!(size_name(128), "128");
        let q = Plan::new(true);
        assert_eq!(q.core[0].name, "core-1p1s-20k-128");
        assert_eq!(q.jetstream[0].name, "js-file-r3-1p-1k-128-sync");
        assert!(q.jetstream.iter().any(|j| j.name == "js-mem-r1-4p-5k-128"));
    }
}
