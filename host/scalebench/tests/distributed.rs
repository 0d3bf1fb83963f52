//! Distributed runs, for real: `scalebench worker` processes started by
//! hand, and workers as a Docker Swarm service on a single-node swarm this
//! module sets up on the test engine (and leaves as it found it). One
//! ladder, one verdict: the same steps pass as in one process, a worker
//! lost mid-soak or with a wrong clock makes the step inconclusive and is
//! named, and Ctrl-C leaves no service behind.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::ladder::{ladder_args, run_ladder, step0, ONE_STACK_AT_A_TIME};

fn reasons(s: &serde_json::Value) -> String {
    s["reasons"].to_string()
}

/// A worker started by hand on a port of its own; killed when dropped.
pub struct HandWorker {
    child: Child,
    /// The URL it printed, with its token: what `--workers` takes.
    pub url: String,
    /// The same without the token: how the coordinator names it.
    pub base: String,
}

impl Drop for HandWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn hand_worker(index: u32, extra: &[&str]) -> HandWorker {
    let mut child = Command::new(bin())
        .args(["worker", "--listen", "127.0.0.1:0", "--index", &index.to_string()])
        .args(extra)
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("worker listening on ").unwrap_or_else(|| panic!("worker said: {line:?}"));
    let base = url.split_once("/?token=").unwrap_or_else(|| panic!("no token in the worker's URL: {url}")).0;
    HandWorker { url: url.to_string(), base: base.to_string(), child }
}

impl HandWorker {
    /// Send the worker's process a signal (`KILL`, `STOP`, `CONT`).
    fn signal(&self, sig: &str) {
        let k = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).output().unwrap();
        assert!(k.status.success(), "kill -{sig}: {}", stderr(&k));
    }
}

pub fn urls(ws: &[HandWorker]) -> String {
    ws.iter().map(|w| w.url.clone()).collect::<Vec<_>>().join(",")
}

#[test]
fn a_worker_whose_clock_is_two_seconds_off_is_refused_at_the_barrier_and_named() {
    let ws = [hand_worker(0, &[]), hand_worker(1, &["--test-clock-offset-ms", "2000"])];
    let run = run_ladder(&["--steps", "200", "--soak", "4s", "--workers", &urls(&ws)]);
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "inconclusive", "{}\n{}", reasons(s), stderr(&run.out));
    let first = s["reasons"][0].as_str().unwrap();
    assert!(
        first.contains("worker 2 of 2") && first.contains(&ws[1].base) && first.contains("refused at the barrier"),
        "{first}"
    );
    assert!(first.contains("2.00 s ahead of"), "{first}");
    let w = &s["workers"];
    assert_eq!(w.as_array().unwrap().len(), 2, "{w}");
    let offset = w[1]["clock_offset_ms"].as_i64().unwrap();
    assert!((1900..=2100).contains(&offset), "measured offset {offset} ms");
    assert!(w[0]["clock_offset_ms"].as_i64().unwrap().abs() < 50, "{w}");
    assert!(
        w[0]["problem"].is_null() && w[0]["acked"].as_u64().unwrap() > 0,
        "the good worker's figures are kept: {w}"
    );
}

#[test]
fn a_worker_running_another_binary_is_refused_before_step_1_naming_both() {
    let ws = [hand_worker(0, &[]), hand_worker(1, &["--test-build-id", "0123456789abcdef"])];
    let run = run_ladder(&["--steps", "200", "--soak", "2s", "--workers", &urls(&ws)]);
    let e = stderr(&run.out);
    assert_eq!(run.out.status.code(), Some(2), "refused as bad input: {e}");
    assert!(e.contains("workers that run another scalebench than this coordinator (scalebench "), "{e}");
    assert!(
        e.contains(&format!("worker 2 of 2 ({}) runs scalebench ", ws[1].base)) && e.contains("build 0123456789abcdef"),
        "the odd worker and its build are named: {e}"
    );
    assert!(!e.contains(&format!("worker 1 of 2 ({})", ws[0].base)), "the matching worker is not: {e}");
    assert!(e.contains("hint: start the workers from this binary"), "{e}");
    assert!(!e.contains("step 1/1"), "nothing was measured: {e}");
}

#[test]
fn a_workers_control_api_refuses_calls_without_its_token_and_the_run_refuses_a_wrong_one() {
    let w = hand_worker(0, &[]);
    let token = w.url.split_once("?token=").unwrap().1.to_string();
    // Health is open (readiness probes); every other call takes the token.
    assert_eq!(ureq::get(&format!("{}/v1/health", w.base)).call().unwrap().status(), 200);
    for (method, path) in [("GET", "/v1/status"), ("GET", "/v1/build"), ("POST", "/v1/stop"), ("POST", "/v1/init")] {
        let url = format!("{}{path}", w.base);
        let good = format!("Bearer {token}");
        for auth in [None, Some("Bearer wrong-token-0123456789".to_string()), Some(token.clone()), Some(good.clone())] {
            let mut req = ureq::request(method, &url);
            if let Some(a) = &auth {
                req = req.set("authorization", a);
            }
            let code = match req.send_string("{}") {
                Ok(r) => r.status(),
                Err(ureq::Error::Status(code, r)) => {
                    let text = r.into_string().unwrap();
                    if code == 401 {
                        assert!(text.contains("?token="), "the 401 says what to do: {text}");
                    }
                    code
                }
                Err(e) => panic!("{method} {path}: {e}"),
            };
            if auth.as_deref() != Some(good.as_str()) {
                assert_eq!(code, 401, "{method} {path} with {auth:?}");
            } else {
                assert_ne!(code, 401, "{method} {path} with its own token");
            }
        }
    }
    assert_eq!(
        ureq::get(&format!("{}/v1/status", w.base))
            .set("authorization", &format!("Bearer {token}"))
            .call()
            .unwrap()
            .status(),
        200
    );

    // A coordinator with another token, or none, is refused before step 1,
    // the worker named by its URL and the token never printed.
    let wrong = format!("{}/?token=0123456789abcdef0123", w.base);
    let run = run_ladder(&["--steps", "200", "--soak", "2s", "--workers", &wrong]);
    let e = stderr(&run.out);
    assert_eq!(run.out.status.code(), Some(2), "refused as bad input: {e}");
    assert!(e.contains(&format!("workers that refused this coordinator's token: worker 1 of 1 ({})", w.base)), "{e}");
    assert!(!e.contains("0123456789abcdef0123") && !e.contains(&token), "no token printed: {e}");
    assert!(!e.contains("step 1/1"), "nothing was measured: {e}");
    let run = run_ladder(&["--steps", "200", "--soak", "2s", "--workers", &w.base]);
    let e = stderr(&run.out);
    assert_eq!(run.out.status.code(), Some(2), "refused as bad input: {e}");
    assert!(e.contains(&format!("worker 1 of 1 ({}) has no token", w.base)), "{e}");
    assert!(e.contains("SCALEBENCH_WORKER_TOKEN"), "{e}");
}

/// The same ladder, in one process and on hand-started workers, for a
/// target of each transport: both pass with stored == acked and the same
/// readings acknowledged.
fn same_as_one_process(extra: &[&str], workers: usize) {
    let ws: Vec<HandWorker> = (0..workers as u32).map(|i| hand_worker(i, &[])).collect();
    let one = run_ladder(extra);
    let mut with = extra.to_vec();
    let list = urls(&ws);
    with.extend(["--workers", &list, "--report"]);
    let dist = run_ladder(&with);
    // The report shows each worker's figures beside the total.
    let reports = dist.dir.path().join("results");
    let md = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path().join("report.md"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no report in {}: {}", reports.display(), stderr(&dist.out)));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| Worker | Scheduled | Offered | Acked |"), "{md}");
    assert!(md.contains(&format!("| 2 ({}) |", ws[1].base)) && md.contains("| total |"), "{md}");
    let (a, b) = (one.result(), dist.result());
    for (run, r) in [(&one, &a), (&dist, &b)] {
        for s in r["steps"].as_array().unwrap() {
            assert_eq!(s["status"], "pass", "{}\n{}", reasons(s), stderr(&run.out));
            assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"], "{}", s["ingest"]);
        }
    }
    for (x, y) in a["steps"].as_array().unwrap().iter().zip(b["steps"].as_array().unwrap()) {
        assert_eq!(x["generator"]["scheduled"], y["generator"]["scheduled"]);
        same_acked(x, y);
        let ws = y["workers"].as_array().unwrap();
        assert_eq!(ws.len(), workers);
        let sum: u64 = ws.iter().map(|w| w["acked"].as_u64().unwrap()).sum();
        assert_eq!(sum, y["generator"]["acked"].as_u64().unwrap(), "the total is the workers' sum: {ws:?}");
        assert!(ws.iter().all(|w| w["acked"].as_u64().unwrap() > 0), "every worker offered its share: {ws:?}");
    }
}

/// A 150 s distributed step (2 s warm-up, 148 s soak), five MQTT
/// keep-alive periods (30 s): the coordinator's own connections carry nothing while the workers
/// publish, and still ping, so the broker drops none of them and the step
/// records no transport error (it did: mosquitto closed each idle one
/// after 1.5 x keep-alive, which read as a SUT fault).
#[test]
fn a_distributed_step_longer_than_three_keep_alives_has_no_transport_error() {
    a_long_distributed_step_has_no_transport_error(&[], "148s");
}

/// The same over NATS JetStream (the client answers the server's pings)
/// and HTTP (the coordinator's canaries and a server's idle connections),
/// for 100 s: past the HTTP client's 90 s idle-connection timeout (the
/// 150 s of the MQTT test are its five keep-alives; neither of these has
/// one that short).
#[test]
fn a_long_distributed_jetstream_step_has_no_transport_error() {
    a_long_distributed_step_has_no_transport_error(&["--target", "nats-jetstream"], "98s");
}

#[test]
fn a_long_distributed_http_step_has_no_transport_error() {
    a_long_distributed_step_has_no_transport_error(&["--target", "haxall"], "98s");
}

fn a_long_distributed_step_has_no_transport_error(target: &[&str], soak: &str) {
    let ws: Vec<HandWorker> = (0..2).map(|i| hand_worker(i, &[])).collect();
    let list = urls(&ws);
    let mut args = target.to_vec();
    args.extend(["--steps", "1k", "--soak", soak, "--probes", "none", "--workers", &list]);
    let run = run_ladder(&args);
    let e = stderr(&run.out);
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}\n{e}", reasons(s));
    assert_eq!(s["generator"]["publish_errors"].as_u64(), Some(0), "{}\n{e}", s["generator"]);
    assert!(!e.contains("connection closed by the broker"), "{e}");
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"], "{}", s["ingest"]);
}

#[test]
fn jetstream_runs_distributed_as_in_one_process() {
    same_as_one_process(
        &["--target", "nats-jetstream", "--steps", "1k", "--interval", "5s", "--soak", "6s", "--probes", "none"],
        2,
    );
}

#[test]
fn http_runs_distributed_as_in_one_process() {
    same_as_one_process(&["--target", "haxall", "--steps", "1k", "--interval", "5s", "--soak", "6s"], 2);
}

/// A single-node swarm on the test engine: made if the engine is in none,
/// left (with everything in it) when done; an engine already in a swarm is
/// left as it was.
struct Swarm {
    made: bool,
}

impl Swarm {
    fn join() -> Swarm {
        let state = Command::new("docker").args(["info", "--format", "{{.Swarm.LocalNodeState}}"]).output().unwrap();
        let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
        if state == "active" {
            return Swarm { made: false };
        }
        let out = Command::new("docker").args(["swarm", "init", "--advertise-addr", "127.0.0.1"]).output().unwrap();
        assert!(out.status.success(), "docker swarm init: {}", stderr(&out));
        Swarm { made: true }
    }
}

impl Drop for Swarm {
    fn drop(&mut self) {
        if self.made {
            let _ = Command::new("docker").args(["swarm", "leave", "--force"]).output();
        }
    }
}

/// Worker services of ours still on the engine.
fn our_services() -> Vec<String> {
    let o = Command::new("docker")
        .args(["service", "ls", "--filter", "label=scalebench.run", "--format", "{{.Name}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// Three consecutive free ports for the workers, below the range the
/// tests' stacks take theirs from.
fn worker_ports() -> u16 {
    let seed = std::process::id() as u16 % 200;
    for k in 0..200u16 {
        let p = 20_100 + ((seed + k * 7) % 200) * 4;
        if local_stack::guard::claim_run(p, 3) {
            return p;
        }
    }
    panic!("no three free ports in 20100-20900");
}

/// A ladder run whose stderr is watched as it goes: `on` is called with
/// the child and each line.
fn run_watched(args: &[String], mut on: impl FnMut(&Child, &str)) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(bin())
        .args(args)
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(String::new()));
    let err = child.stderr.take().unwrap();
    for line in BufReader::new(err).lines() {
        let line = line.unwrap();
        lines.lock().unwrap().push_str(&format!("{line}\n"));
        on(&child, &line);
    }
    let status = child.wait().unwrap();
    let all = lines.lock().unwrap().clone();
    (status, all)
}

// Three tests of their own, one at a time in the Docker group (a stack's
// containers and the workers' starting side by side copy root filesystems
// at once): each joins a single-node swarm if the engine is in none, and
// leaves it as it found it.

/// The Swarm tests' ladder.
const SWARM_BASE: [&str; 8] = ["--steps", "1k,2.5k", "--interval", "5s", "--soak", "8s", "--probes", "none"];

/// What each Swarm test starts from: the images built, the one-stack
/// lock, a swarm, and three free ports for the workers.
fn on_a_swarm() -> (std::sync::MutexGuard<'static, ()>, Swarm, String) {
    crate::docker::images();
    let one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (one, Swarm::join(), worker_ports().to_string())
}

/// Three Swarm workers climb the ladder as one process does: every step
/// passes with stored == acked, the workers' figures add up to the step's,
/// and acknowledgements per second keep the target rate second by second
/// (the hand-started workers' tests compare a distributed run with a
/// one-process run reading for reading).
#[test]
fn three_workers_on_a_docker_swarm_pass_as_one_process_does() {
    let (_one, _swarm, port) = on_a_swarm();
    let base = SWARM_BASE;
    let dir = tempfile::tempdir().unwrap();
    let mut with = base.to_vec();
    with.extend([
        "--workers",
        "3",
        "--engine",
        "swarm",
        "--worker-cpus",
        "0.5",
        "--worker-memory",
        "512m",
        "--worker-port",
        &port,
    ]);
    let out = Command::new(bin())
        .args(ladder_args(dir.path(), &with))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(our_services().is_empty(), "the service is removed after the run: {:?}", our_services());
    let dist = crate::ladder::Run { out, dir };
    let b = dist.result();
    let err = stderr(&dist.out);
    assert!(err.contains("workers: 3 ready"), "{err}");
    let steps = b["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{err}");
    for y in steps {
        assert_eq!(y["status"], "pass", "{}\n{err}", reasons(y));
        assert_eq!(y["ingest"]["stored"], y["ingest"]["acked"], "{}", y["ingest"]);
        assert_eq!(y["workers"].as_array().unwrap().len(), 3, "the result names 3 workers: {}", y["workers"]);
        adds_up(y, &err);
        // Acked per wall-clock second of the soak: the target rate second
        // by second. Running totals, not single seconds: a hiccup at a
        // second's edge moves acks into the next second (more so on a busy
        // machine), but a worker's share missing or counted twice grows by
        // a third of the target every second and is past half of it within two.
        let from = y["series"]["soak_from_s"].as_f64().unwrap().ceil() as usize;
        let to = y["series"]["load_end_s"].as_f64().unwrap().floor() as usize;
        let py: Vec<u64> =
            y["series"]["acked"].as_array().unwrap()[from..to].iter().map(|v| v.as_u64().unwrap()).collect();
        let target = y["target_rps"].as_f64().unwrap();
        let mut sq = 0.0;
        for (k, q) in py.iter().enumerate() {
            sq += *q as f64;
            assert!((sq - (k + 1) as f64 * target).abs() <= target * 0.5 + 5.0, "3 workers {py:?} vs target {target}");
        }
    }
}

#[test]
fn a_swarm_worker_killed_mid_soak_makes_the_step_inconclusive_and_is_named() {
    let (_one, _swarm, port) = on_a_swarm();
    let base = SWARM_BASE;
    // A worker killed mid-soak: the step is inconclusive and names it.
    let dir = tempfile::tempdir().unwrap();
    let mut with = base.to_vec();
    with.extend(["--steps", "1k", "--soak", "16s", "--workers", "3", "--worker-cpus", "0.5", "--worker-port", &port]);
    let mut service = String::new();
    let mut killed = false;
    let (_, err) = run_watched(&ladder_args(dir.path(), &with), |_, line| {
        if let Some(rest) = line.strip_prefix("workers: Swarm service ") {
            service = rest.split_whitespace().next().unwrap().to_string();
        }
        if !killed && line.contains("phase: soak") {
            let o = Command::new("docker")
                .args([
                    "ps",
                    "--filter",
                    &format!("label=com.docker.swarm.service.name={service}"),
                    "--format",
                    "{{.ID}} {{.Label \"com.docker.swarm.task.name\"}}",
                ])
                .output()
                .unwrap();
            let list = String::from_utf8_lossy(&o.stdout).to_string();
            let id = list
                .lines()
                .find(|l| l.contains(&format!("{service}.2.")))
                .unwrap_or_else(|| panic!("no task 2 in {list}"))
                .split_whitespace()
                .next()
                .unwrap()
                .to_string();
            let k = Command::new("docker").args(["kill", &id]).output().unwrap();
            assert!(k.status.success(), "docker kill: {}", stderr(&k));
            killed = true;
        }
    });
    assert!(killed, "{err}");
    let r = crate::ladder::Run { out: Command::new("true").output().unwrap(), dir }.result();
    let s = step0(&r);
    assert_eq!(s["status"], "inconclusive", "{}\n{err}", reasons(s));
    let first = s["reasons"][0].as_str().unwrap();
    assert!(first.contains("worker 2 of 3") && first.contains("lost mid-step"), "{first}");
    let w = s["workers"].as_array().unwrap();
    assert!(w[1]["problem"].as_str().unwrap().contains("lost"), "{w:?}");
    assert!(w[0]["problem"].is_null() && w[2]["problem"].is_null(), "{w:?}");
    assert!(
        w[0]["acked"].as_u64().unwrap() > 0 && w[2]["acked"].as_u64().unwrap() > 0,
        "the others' figures kept: {w:?}"
    );
    // And the lost worker's, up to its last heartbeat.
    assert!(w[1]["offered"].as_u64().unwrap() > 0 && w[1]["missing_from_ms"].is_i64(), "{w:?}");
    adds_up(s, &err);
    assert!(our_services().is_empty(), "{:?}", our_services());
}

#[test]
fn ctrl_c_mid_soak_of_a_swarm_run_keeps_what_it_measured_and_leaves_no_service() {
    let (_one, _swarm, port) = on_a_swarm();
    let base = SWARM_BASE;
    // Ctrl-C mid-soak: the run ends, keeps what it measured, and leaves no service.
    let dir = tempfile::tempdir().unwrap();
    let mut with = base.to_vec();
    with.extend(["--steps", "1k", "--soak", "60s", "--workers", "2", "--worker-cpus", "0.5", "--worker-port", &port]);
    let t = Instant::now();
    let mut sent = false;
    let (_, err) = run_watched(&ladder_args(dir.path(), &with), |child, line| {
        if !sent && line.contains("phase: soak") {
            std::thread::sleep(Duration::from_secs(2));
            let k = Command::new("kill").args(["-INT", &child.id().to_string()]).output().unwrap();
            assert!(k.status.success());
            sent = true;
        }
    });
    assert!(sent, "{err}");
    assert!(t.elapsed() < Duration::from_secs(60), "Ctrl-C ends the run early: {err}");
    assert!(err.contains("removed the Swarm service"), "{err}");
    assert!(our_services().is_empty(), "Ctrl-C leaves no service behind: {:?}", our_services());
    let r = crate::ladder::Run { out: Command::new("true").output().unwrap(), dir }.result();
    assert_eq!(step0(&r)["status"], "interrupted", "{err}");
}

/// Two passing steps acknowledged the same readings, but for those a pass
/// allows not offered by the wall-clock end (up to 1%: a worker a slot
/// behind at the end), which depend on the machine, not on the split.
fn same_acked(x: &serde_json::Value, y: &serde_json::Value) {
    let n = |s: &serde_json::Value, k: &str| s["generator"][k].as_u64().unwrap() as i64;
    let slack = n(x, "not_offered") + n(y, "not_offered");
    assert!(
        (n(x, "acked") - n(y, "acked")).abs() <= slack,
        "acked {} vs {} with {slack} not offered between them",
        n(x, "acked"),
        n(y, "acked")
    );
}

/// A step of three hand-started workers, `on_soak` called once its soak
/// starts; the step's result, the run's log and its report.
fn three_workers_and(soak: &str, on_soak: impl FnOnce(&[HandWorker])) -> (serde_json::Value, String, String) {
    let ws: Vec<HandWorker> = (0..3).map(|i| hand_worker(i, &[])).collect();
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let list = urls(&ws);
    let args =
        ["--steps", "1k", "--interval", "5s", "--soak", soak, "--probes", "none", "--workers", &list, "--report"];
    let mut on_soak = Some(on_soak);
    let (_, err) = run_watched(&ladder_args(dir.path(), &args), |_, line| {
        if line.contains("phase: soak") {
            if let Some(f) = on_soak.take() {
                f(&ws)
            }
        }
    });
    assert!(on_soak.is_none(), "the soak never started: {err}");
    let reports = dir.path().join("results");
    let md = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path().join("report.md"))
        .find(|p| p.exists())
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_else(|| panic!("no report in {}: {err}", reports.display()));
    let r = crate::ladder::Run { out: Command::new("true").output().unwrap(), dir }.result();
    (step0(&r).clone(), err, md)
}

/// What every distributed step's figures must satisfy, lost workers or
/// not: the step's totals are its workers' sums, offered + not offered is
/// scheduled (per worker and in total), and the per-second series add up
/// to the totals.
fn adds_up(s: &serde_json::Value, err: &str) {
    let g = &s["generator"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {v} in {g}\n{err}"));
    let ws = s["workers"].as_array().unwrap();
    for k in ["scheduled", "offered", "acked"] {
        let sum: u64 = ws.iter().map(|w| n(&w[k])).sum();
        assert_eq!(sum, n(&g[k]), "{k}: the step's total is its workers' sum: {ws:?}\n{g}");
    }
    assert_eq!(n(&g["offered"]) + n(&g["not_offered"]), n(&g["scheduled"]), "{g}");
    assert!(ws.iter().all(|w| n(&w["offered"]) <= n(&w["scheduled"])), "{ws:?}");
    let sum = |k: &str| -> u64 { s["series"][k].as_array().unwrap().iter().map(n).sum() };
    assert_eq!(sum("offered"), n(&g["offered"]), "offered per second adds up to the total: {}", s["series"]["offered"]);
    assert_eq!(sum("acked"), n(&g["acked"]), "acked per second adds up to the total: {}", s["series"]["acked"]);
    // The workers keep their seconds' histograms for the coordinator to
    // merge: a second acked has its p99.
    let p99 = s["series"]["ack_latency_p99_s"].as_array().unwrap();
    for (k, a) in s["series"]["acked"].as_array().unwrap().iter().enumerate() {
        assert!(n(a) == 0 || p99[k].as_f64().is_some(), "second {k}: {a} acked, no p99: {p99:?}");
    }
}

/// A hand-started worker killed (SIGKILL) four seconds into the soak: the
/// step is inconclusive and names it, and its seconds up to its last
/// heartbeat stay in the step's figures: the offered series keeps the
/// whole rate until then (it showed two thirds of it from the start), the
/// totals hold what it offered and had acknowledged, and only what it
/// offered after its last heartbeat (a second or two of its share) is
/// stored without a known ack.
#[test]
fn a_killed_worker_still_counts_up_to_its_last_heartbeat_and_says_from_when_it_is_missing() {
    let (s, err, report) = three_workers_and("14s", |ws| {
        std::thread::sleep(Duration::from_secs(4));
        ws[1].signal("KILL");
    });
    assert_eq!(s["status"], "inconclusive", "{}\n{err}", reasons(&s));
    assert!(reasons(&s).contains("worker 2 of 3") && reasons(&s).contains("lost mid-step"), "{}", reasons(&s));
    adds_up(&s, &err);
    let w = &s["workers"][1];
    assert!(w["offered"].as_u64().unwrap() > 0 && w["acked"].as_u64().unwrap() > 0, "{w}");
    let missing_ms = w["missing_from_ms"].as_i64().unwrap_or_else(|| panic!("no missing-from time: {w}"));
    // Offered per wall-clock second, running total from the soak's start
    // to the second before the worker went missing: the whole target rate
    // (a lost worker's seconds dropped fall a third behind each second).
    let series = &s["series"];
    let start = series["start_unix_s"].as_i64().unwrap();
    let from = series["soak_from_s"].as_f64().unwrap().ceil() as usize;
    let to = (missing_ms / 1000 - start) as usize;
    assert!(to >= from + 3, "at least three whole seconds before the kill: {from}..{to}");
    let target = s["target_rps"].as_f64().unwrap();
    let offered: Vec<u64> = series["offered"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let mut sum = 0.0;
    for (k, o) in offered[from..to].iter().enumerate() {
        sum += *o as f64;
        assert!(
            (sum - (k + 1) as f64 * target).abs() <= target * 0.5 + 5.0,
            "offered per second {offered:?} vs {target}/s up to second {to}"
        );
    }
    // What it offered after its last heartbeat is stored with no ack
    // known: no more than three seconds of its share.
    let beyond = s["ingest"]["stored_beyond_acked"].as_u64().unwrap();
    assert!(beyond as f64 <= 3.0 * target / 3.0, "{beyond} stored beyond acked: {}", s["ingest"]);
    assert!(report.contains("its seconds after that are missing"), "{report}");
}

/// A hand-started worker frozen (SIGSTOP) for six seconds mid-soak, then
/// thawed: counted lost at three seconds of silence, it stops its own
/// load on waking (it sent its whole share in a burst, which was stored
/// while the step called it not offered), and its result, fetched after
/// the load, counts what it offered after it was lost: every stored
/// reading was offered and acknowledged.
#[test]
fn a_frozen_then_thawed_worker_stops_itself_and_what_it_offered_late_is_counted() {
    let (s, err, report) = three_workers_and("14s", |ws| {
        std::thread::sleep(Duration::from_secs(2));
        ws[1].signal("STOP");
        let pid = ws[1].child.id();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(6));
            let _ = Command::new("kill").args(["-CONT", &pid.to_string()]).output();
        });
    });
    assert_eq!(s["status"], "inconclusive", "{}\n{err}", reasons(&s));
    assert!(reasons(&s).contains("worker 2 of 3") && reasons(&s).contains("came back"), "{}", reasons(&s));
    adds_up(&s, &err);
    let w = &s["workers"][1];
    assert!(w["offered_late"].is_u64(), "what it offered after it was lost: {w}");
    assert!(w["missing_from_ms"].is_null(), "it came back with its figures: {w}");
    // It stopped: about eight of its fourteen seconds (and the warm-up's)
    // are not offered, not sent in a burst on waking.
    let (sch, off) = (w["scheduled"].as_u64().unwrap(), w["offered"].as_u64().unwrap());
    assert!(off < sch * 3 / 4, "the frozen worker stopped its load: {off} of {sch} offered: {w}");
    let i = &s["ingest"];
    assert_eq!(i["stored_beyond_acked"].as_u64(), Some(0), "every stored reading was offered and acked: {i}");
    assert_eq!(i["stored"], i["acked"], "{i}");
    assert!(report.contains("readings offered after it was lost, counted"), "{report}");
}
