//! Live-safety, as the original Baler scale-test plan has it: while a step's
//! load runs, a live install sharing this host must not suffer. Before the
//! run we take a baseline: the latency of a cheap, read-only GET of
//! `--live-url` (median of 3) and the host's load per CPU. Every sample
//! compares against it; a sample is bad when
//! - the live URL took more than `latency_factor` × its baseline and at
//!   least 0.5 s more than it (or did not answer), or
//! - load per CPU is above `load_factor` × its baseline and at least 2.
//!
//! Three bad samples in a row stop the step as inconclusive (live-safety):
//! never a ceiling of the system under test.

use std::time::{Duration, Instant};

use crate::error::Error;

pub const BAD_IN_A_ROW: u32 = 3;

#[derive(Debug, Clone)]
pub struct Config {
    pub url: Option<String>,
    pub latency_factor: f64,
    pub load_factor: f64,
}

pub use crate::results::LiveSample;

#[derive(Debug, Clone, Copy)]
pub struct Baseline {
    pub latency_s: Option<f64>,
    pub load_per_cpu: Option<f64>,
}

/// Is this sample bad, and why? Pure: the rule itself.
pub fn judge(
    cfg: &Config,
    base: &Baseline,
    latency: Result<Option<f64>, String>,
    load_per_cpu: Option<f64>,
) -> Option<String> {
    match latency {
        Err(e) => return Some(format!("the live URL did not answer ({e})")),
        Ok(Some(l)) => {
            if let Some(b) = base.latency_s {
                if l > cfg.latency_factor * b && l >= b + 0.5 {
                    return Some(format!(
                        "live URL took {l:.2} s, baseline {b:.2} s (limit {:.1}x and +0.5 s)",
                        cfg.latency_factor
                    ));
                }
            }
        }
        Ok(None) => {}
    }
    if let (Some(l), Some(b)) = (load_per_cpu, base.load_per_cpu) {
        if l > cfg.load_factor * b && l >= 2.0 {
            return Some(format!(
                "host load per CPU {l:.2}, baseline {b:.2} (limit {:.1}x and at least 2)",
                cfg.load_factor
            ));
        }
    }
    None
}

/// Host load (1 min) per CPU.
pub fn load_per_cpu() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let l1: f64 = text.split_whitespace().next()?.parse().ok()?;
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    Some(l1 / n as f64)
}

pub struct Watch {
    cfg: Config,
    base: Baseline,
    agent: ureq::Agent,
    streak: u32,
}

impl Watch {
    /// Take the baseline before the run; a live URL that does not answer now is an error.
    pub fn start(cfg: Config) -> Result<Watch, Error> {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(10))
            .redirects(0)
            .user_agent("scalebench-live-safety")
            .build();
        let latency_s = match &cfg.url {
            None => None,
            Some(url) => {
                let mut v = Vec::new();
                for _ in 0..3 {
                    v.push(get(&agent, url).map_err(|e| Error::LiveSafety {
                        problem: format!("--live-url {url} did not answer before the run ({e}); live-safety needs a baseline"),
                        hint: "give the URL of a cheap, read-only, unauthenticated page of the live install, or leave --live-url out".into(),
                    })?);
                }
                v.sort_by(|a, b| a.total_cmp(b));
                Some(v[1])
            }
        };
        Ok(Watch { base: Baseline { latency_s, load_per_cpu: load_per_cpu() }, cfg, agent, streak: 0 })
    }

    pub fn baseline(&self) -> Baseline {
        self.base
    }

    /// Start of a step: bad samples are counted in a row within a step.
    pub fn reset(&mut self) {
        self.streak = 0;
    }

    /// Take one sample; returns it and, after three bad ones in a row, why the step must stop.
    pub fn sample(&mut self, elapsed_s: f64) -> (LiveSample, Option<String>) {
        let latency = match &self.cfg.url {
            None => Ok(None),
            Some(u) => get(&self.agent, u).map(Some),
        };
        let load = load_per_cpu();
        let lat_value = latency.as_ref().ok().copied().flatten();
        let bad = judge(&self.cfg, &self.base, latency, load);
        self.streak = if bad.is_some() { self.streak + 1 } else { 0 };
        let trip = (self.streak >= BAD_IN_A_ROW)
            .then(|| format!("{BAD_IN_A_ROW} bad samples in a row, the last: {}", bad.clone().unwrap_or_default()));
        (LiveSample { elapsed_s, load_per_cpu: load, live_latency_s: lat_value, bad }, trip)
    }
}

fn get(agent: &ureq::Agent, url: &str) -> Result<f64, String> {
    let t = Instant::now();
    let resp = agent.get(url).call().map_err(|e| e.to_string())?;
    let _ = resp.into_string();
    Ok(t.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_samples_follow_the_rule() {
        let cfg = Config { url: Some("x".into()), latency_factor: 3.0, load_factor: 1.5 };
        let base = Baseline { latency_s: Some(0.1), load_per_cpu: Some(1.0) };
        assert!(judge(&cfg, &base, Ok(Some(0.2)), Some(1.0)).is_none());
        // 3x but not +0.5 s: fine.
        assert!(judge(&cfg, &base, Ok(Some(0.4)), Some(1.0)).is_none());
        assert!(judge(&cfg, &base, Ok(Some(0.7)), Some(1.0)).unwrap().contains("live URL took 0.70 s"));
        assert!(judge(&cfg, &base, Err("refused".into()), Some(1.0)).unwrap().contains("did not answer"));
        // 1.5x but under 2: fine; over both: bad.
        assert!(judge(&cfg, &base, Ok(Some(0.1)), Some(1.8)).is_none());
        assert!(judge(&cfg, &base, Ok(Some(0.1)), Some(2.1)).unwrap().contains("load per CPU 2.10"));
    }
}
