//! `run --metrics-listen` scraped by a real Prometheus server (Debian's
//! `prometheus`, on loopback ports of its own, scraping every second): the
//! acknowledged rate PromQL computes mid-soak is the step's target rate,
//! the latency histogram's p99 lands in the result's p99 bucket (or the
//! next), and every metric the Grafana dashboard queries exists.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::ladder::{free_base_port, ladder_args, ONE_STACK_AT_A_TIME};

/// The endpoint's bucket bounds (s), as docs/reports.md gives them.
const BOUNDS_S: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

fn bucket_of(v: f64) -> usize {
    BOUNDS_S.iter().position(|b| v <= *b).unwrap_or(BOUNDS_S.len())
}

/// Stopped and removed with its data when dropped.
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `scalebench` with `args` in the background, its stderr into `log`.
fn spawn_run(args: &[String], log: &std::path::Path) -> Killed {
    Killed(
        Command::new(bin())
            .args(args)
            .env("SCALEBENCH_CACHE_DIR", cache_dir())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

fn free_port() -> u16 {
    loop {
        let p = free_base_port();
        if p >= 20_000 {
            return p;
        }
    }
}

fn get(url: &str) -> Option<String> {
    ureq::get(url).timeout(Duration::from_secs(2)).call().ok()?.into_string().ok()
}

/// One PromQL instant query: the first series' value, if any.
fn query(prom: &str, q: &str) -> Option<f64> {
    query_url(&format!("{prom}/api/v1/query?query={}", urlencode(q)))
}

/// The same query evaluated at `at_unix_s`. Once the run has ended,
/// Prometheus's next failed scrape marks its series stale and a query at
/// "now" finds none: a figure of the run is read at a time it served it.
fn query_at(prom: &str, q: &str, at_unix_s: f64) -> Option<f64> {
    query_url(&format!("{prom}/api/v1/query?query={}&time={at_unix_s:.3}", urlencode(q)))
}

fn query_url(url: &str) -> Option<f64> {
    let body: serde_json::Value = serde_json::from_str(&get(url)?).ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_scrapes_the_live_rate_and_latency_the_result_reports_and_the_dashboard_finds_its_metrics() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (metrics_port, prom_port) = (free_port(), free_port());
    assert_ne!(metrics_port, prom_port);
    let endpoint = format!("http://127.0.0.1:{metrics_port}/metrics");
    let prom = format!("http://127.0.0.1:{prom_port}");

    // Prometheus first: it scrapes every second from the run's start.
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: scalebench\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's package; ./scripts/setup.sh installs it)"),
    );
    wait_for("Prometheus to be ready", Duration::from_secs(60), || get(&format!("{prom}/-/ready")).is_some());

    // Two steps of 1,000 points every second: 1,000 readings/s to acknowledge.
    let mut args =
        ladder_args(dir.path(), &["--steps", "1000,1100", "--warmup", "2s", "--soak", "20s", "--sample-every", "2s"]);
    args.extend(["--metrics-listen".into(), format!("127.0.0.1:{metrics_port}")]);
    let log = dir.path().join("run.log");
    let mut run = spawn_run(&args, &log);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // Mid-soak of the first step: the soak began, then 11 s more.
    wait_for("the first step's soak", Duration::from_secs(180), || {
        get(&endpoint).is_some_and(|t| t.contains("step_points=\"1000\",phase=\"soak\"} 1"))
            || run.0.try_wait().unwrap().is_some()
    });
    assert!(run.0.try_wait().unwrap().is_none(), "the run ended early:\n{}", log_text());
    std::thread::sleep(Duration::from_secs(11));
    let mid_soak_scrape = get(&endpoint).expect("the endpoint answers mid-soak");
    let rate = query(&prom, "rate(scalebench_readings_acknowledged_total{step_points=\"1000\"}[10s])")
        .unwrap_or_else(|| panic!("no acknowledged rate in Prometheus\n{mid_soak_scrape}"));
    assert!((rate - 1000.0).abs() <= 100.0, "PromQL's acknowledged rate {rate}/s, target 1,000/s");
    let offered = query(&prom, "rate(scalebench_readings_offered_total{step_points=\"1000\"}[10s])").unwrap();
    assert!((offered - 1000.0).abs() <= 100.0, "offered {offered}/s");

    // The second step runs: the first one's verdict is on the endpoint.
    let mut names = std::collections::BTreeSet::new();
    let mut during_second = String::new();
    wait_for("the second step", Duration::from_secs(120), || {
        if let Some(t) = get(&endpoint) {
            during_second = t;
        }
        during_second.contains("step_points=\"1100\",phase=\"soak\"} 1") || run.0.try_wait().unwrap().is_some()
    });
    // The first step's figures, frozen at its verdict, are served now (and
    // were scraped in the second before).
    let second_step_seen_at = unix_now_s();
    assert!(
        during_second.contains("scalebench_step_verdict{target=\"baler\",step_points=\"1000\",verdict=\"pass\"} 1"),
        "{during_second}\n{}",
        log_text()
    );
    for text in [&mid_soak_scrape, &during_second] {
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            names.insert(line.split(['{', ' ']).next().unwrap().to_string());
        }
    }
    let status = {
        let until = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some(s) = run.0.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < until, "the run did not end:\n{}", log_text());
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    assert!(status.success(), "{}", log_text());

    // The histogram's p99 as PromQL computes it, from the last scrape of
    // the first step (frozen at its verdict), against the result's.
    let result_file = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .unwrap();
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(result_file).unwrap()).unwrap();
    let p99 = result["steps"][0]["ack_latency"]["intended"]["p99_s"].as_f64().expect("the result's p99");
    let promql_p99 = query_at(
        &prom,
        "histogram_quantile(0.99, scalebench_ack_latency_intended_seconds_bucket{step_points=\"1000\"})",
        second_step_seen_at,
    )
    .expect("a p99 from Prometheus");
    let (a, b) = (bucket_of(p99), bucket_of(promql_p99));
    eprintln!("acknowledged {rate:.0}/s, offered {offered:.0}/s; p99 {promql_p99} s (PromQL) vs {p99} s (result)");
    assert!(
        a.abs_diff(b) <= 1,
        "PromQL p99 {promql_p99} s (bucket {b}) vs the result's {p99} s (bucket {a}): more than one bucket apart"
    );

    // The dashboard: JSON, and every metric its queries name was served.
    let dashboard = std::fs::read_to_string(repo_root().join("compose/grafana/scalebench.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    let mut queried = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("scalebench_") {
                let name: String = rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &rest[i + name.len()..];
                queried.push(name);
            }
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    // Metrics that depend on the stack: the broker's drops (mosquitto's $SYS),
    // lag and stored (the store's counters) — all measured on this stack.
    for name in &queried {
        assert!(names.contains(name), "the dashboard queries {name}, which the endpoint never served: {names:?}");
    }
}

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The value of the first series of `metric` whose labels contain `labels`.
fn value(text: &str, metric: &str, labels: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{metric}{{")) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_distributed_runs_coordinator_serves_the_merged_figures_and_each_worker_its_own() {
    use crate::distributed::{hand_worker, urls};
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ports = [free_port(), free_port(), free_port()];
    let ws = [
        hand_worker(0, &["--metrics-listen", &format!("127.0.0.1:{}", ports[0])]),
        hand_worker(1, &["--metrics-listen", &format!("127.0.0.1:{}", ports[1])]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut args = ladder_args(dir.path(), &["--steps", "400", "--warmup", "1s", "--soak", "12s"]);
    args.extend(["--workers".into(), urls(&ws), "--metrics-listen".into(), format!("127.0.0.1:{}", ports[2])]);
    let log = dir.path().join("run.log");
    let mut run = spawn_run(&args, &log);
    let endpoint = |p: u16| format!("http://127.0.0.1:{p}/metrics");
    wait_for("the soak", Duration::from_secs(180), || {
        get(&endpoint(ports[2])).is_some_and(|t| t.contains("phase=\"soak\"} 1")) || run.0.try_wait().unwrap().is_some()
    });
    std::thread::sleep(Duration::from_secs(5));
    let [w0, w1, c] = ports.map(|p| get(&endpoint(p)).unwrap_or_default());
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let step = "step_points=\"400\"";
    let acked = |t: &str| value(t, "scalebench_readings_acknowledged_total", step).unwrap_or(0.0);
    let count = |t: &str| value(t, "scalebench_ack_latency_intended_seconds_count", step).unwrap_or(0.0);
    // Each worker serves its own share, under the run's target.
    for w in [&w0, &w1] {
        assert!(acked(w) > 0.0 && count(w) > 0.0, "a worker's own figures:\n{w}\n{log_text}");
        assert!(w.contains("target=\"baler\""), "{w}");
    }
    // The coordinator's connections carry only canaries: its acknowledged
    // readings and latency come from the workers' heartbeats, merged (up
    // to a heartbeat apart from the workers' own scrapes).
    let sum = acked(&w0) + acked(&w1);
    assert!(acked(&c) > 0.5 * sum && acked(&c) <= 1.2 * sum, "coordinator {} vs workers {sum}", acked(&c));
    let (cc, wc) = (count(&c), count(&w0) + count(&w1));
    assert!(cc > 0.5 * wc && cc <= 1.2 * wc, "latency count: coordinator {cc} vs workers {wc}\n{c}");
    let status = loop {
        if let Some(s) = run.0.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    // A finished step stays on a worker's endpoint, frozen.
    let after = get(&endpoint(ports[0])).unwrap();
    assert!(!after.contains("scalebench_step_points{"), "no step runs on the worker: {after}");
    assert!(acked(&after) >= acked(&w0), "{after}");
}
