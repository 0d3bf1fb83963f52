//! Calibration faults of a step (`--kill`, `--freeze`): due at a time of
//! load. Freezes go in and thaw on time even while the step's loop waits on
//! a slow sample (a database under load can take seconds to answer a
//! count); kills go in at the loop's next turn, right after it supervised
//! the stack (so the last cycle's victim is back). All are recorded with the time they actually happened, so a verdict can
//! be checked against what was done rather than what was asked.

use std::future::Future;
use std::time::{Duration, Instant};

use super::FaultKind;
use crate::ladder::Fault;
use crate::results::InjectedFault;
use crate::stack::StackDriver;

/// How often a slow wait looks at the clock for a fault that is due.
const TICK: Duration = Duration::from_millis(50);

pub(super) struct FaultClock {
    /// The schedule's first second: what `--kill SERVICE:AFTER` counts from.
    load_started: Instant,
    pending: Vec<(Instant, String, FaultKind)>,
    thaw: Vec<(Instant, String)>,
    pub(super) injected: Vec<InjectedFault>,
    pub(super) unmeasured: Vec<String>,
}

impl FaultClock {
    pub(super) fn new(faults: &[Fault], load_started: Instant) -> Self {
        FaultClock {
            load_started,
            pending: faults.iter().map(|f| (load_started + f.after, f.service.clone(), f.kind)).collect(),
            thaw: Vec::new(),
            injected: Vec::new(),
            unmeasured: Vec::new(),
        }
    }

    fn idle(&self) -> bool {
        self.pending.is_empty() && self.thaw.is_empty()
    }

    fn record(&mut self, service: &str, action: &str, ok: Result<(), String>) {
        let at_load_s = Instant::now().saturating_duration_since(self.load_started).as_secs_f64();
        match ok {
            Ok(()) => {
                self.injected.push(InjectedFault { service: service.to_string(), action: action.into(), at_load_s })
            }
            Err(e) => {
                tracing::info!("  fault: {e}");
                self.unmeasured.push(format!("fault {action} {service}: {e}"));
            }
        }
    }

    /// Inject the faults that are due; thaw frozen services on time. A
    /// pattern (`nats-*`) signals every service it matches at the same
    /// instant: a whole cluster crashes at once.
    pub(super) fn tick(&mut self, stack: &mut dyn StackDriver) {
        self.tick_some(stack, true)
    }

    /// `kills`: kills are injected too. Only the step's loop injects them,
    /// right after it supervised the stack: a service killed by the last
    /// cycle is back before the next kill (a kill of a service still down,
    /// or still starting, is no crash at all).
    fn tick_some(&mut self, stack: &mut dyn StackDriver, kills: bool) {
        let now = Instant::now();
        // Kill cycles that fell due together (the loop was held up) go in
        // one per turn: the second would find the service still down.
        let mut killed: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let (at, pattern, kind) = &self.pending[i];
            let is_kill = matches!(kind, FaultKind::Kill);
            if now < *at || (is_kill && (!kills || killed.contains(pattern))) {
                i += 1;
                continue;
            }
            if is_kill {
                killed.push(pattern.clone());
            }
            let (_, pattern, kind) = self.pending.remove(i);
            let services = match matching(&pattern, &stack.signal_names()) {
                Ok(s) => s,
                Err(e) => {
                    self.record(&pattern, kind.verb(), Err(e));
                    continue;
                }
            };
            let (sig, label) = match kind {
                FaultKind::Kill => (libc::SIGKILL, "SIGKILL"),
                FaultKind::Freeze(_) => (libc::SIGSTOP, "SIGSTOP"),
            };
            // Signal first, print after: the services go down together.
            let results: Vec<(String, Result<(), String>)> =
                services.into_iter().map(|s| (s.clone(), stack.signal(&s, sig))).collect();
            for (service, r) in results {
                match kind {
                    FaultKind::Kill => {
                        tracing::info!("  fault: {label} {service} (the stack's supervisor brings it back)");
                        self.record(&service, "kill", r);
                    }
                    FaultKind::Freeze(d) => {
                        tracing::info!("  fault: {label} {service} for {:.0} s", d.as_secs_f64());
                        if r.is_ok() {
                            self.thaw.push((now + d, service.clone()));
                        }
                        self.record(&service, "freeze", r);
                    }
                }
            }
        }
        let due: Vec<String> = self.thaw.iter().filter(|(at, _)| now >= *at).map(|(_, s)| s.clone()).collect();
        self.thaw.retain(|(at, _)| now < *at);
        for service in due {
            tracing::info!("  fault: SIGCONT {service}");
            let r = stack.signal(&service, libc::SIGCONT);
            self.record(&service, "thaw", r);
        }
    }

    /// Await `fut` while keeping freezes and thaws on time (kills wait for
    /// the loop: see `tick_some`).
    pub(super) async fn during<F: Future>(&mut self, stack: &mut dyn StackDriver, fut: F) -> F::Output {
        tokio::pin!(fut);
        loop {
            if self.idle() {
                return fut.await;
            }
            tokio::select! {
                out = &mut fut => return out,
                _ = tokio::time::sleep(TICK) => self.tick_some(stack, false),
            }
        }
    }

    /// The load is over: faults never injected are unmeasured; services still
    /// frozen stay frozen through the drain (a broker that never comes back
    /// must end the step by the drain's deadlines) and are returned to be
    /// thawed when the step ends.
    pub(super) fn finish(mut self) -> (Vec<InjectedFault>, Vec<String>, Vec<String>) {
        let ended = self.load_started.elapsed().as_secs_f64();
        for (at, service, kind) in std::mem::take(&mut self.pending) {
            self.unmeasured.push(format!(
                "fault {} {service} at {} of load: never injected (the load ended after {})",
                kind.verb(),
                crate::format::seconds(at.saturating_duration_since(self.load_started).as_secs_f64()),
                crate::format::seconds(ended)
            ));
        }
        let frozen = self.thaw.into_iter().map(|(_, s)| s).collect();
        (self.injected, self.unmeasured, frozen)
    }
}

/// The services `pattern` names: itself when it holds no `*`, else every
/// service of the stack it matches (`*` is any run of characters).
fn matching(pattern: &str, names: &[String]) -> Result<Vec<String>, String> {
    if !pattern.contains('*') {
        return Ok(vec![pattern.to_string()]);
    }
    let found: Vec<String> = names.iter().filter(|n| glob(pattern, n)).cloned().collect();
    if found.is_empty() {
        return Err(format!("no service matches `{pattern}` (the stack has {})", names.join(", ")));
    }
    Ok(found)
}

fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len())
                    .filter(|k| name.is_char_boundary(head.len() + k))
                    .any(|k| glob(tail, &name[head.len() + k..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_names_every_service_it_matches_and_a_name_itself() {
        let names: Vec<String> = ["nats-0", "nats-1", "nats-2", "postgres"].map(String::from).to_vec();
        assert_eq!(matching("nats-*", &names).unwrap(), ["nats-0", "nats-1", "nats-2"]);
        assert_eq!(matching("*", &names).unwrap().len(), 4);
        assert_eq!(matching("*-1", &names).unwrap(), ["nats-1"]);
        assert_eq!(matching("postgres", &names).unwrap(), ["postgres"]);
        let e = matching("mosq*", &names).unwrap_err();
        assert!(e.contains("no service matches `mosq*`") && e.contains("nats-0, nats-1"), "{e}");
    }
}
