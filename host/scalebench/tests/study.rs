//! `scalebench study nats --quick` against real nats-servers it starts on
//! free 2xxxx loopback ports: a single node and a 3-node cluster. Checks
//! study.json (every row, positive rates, skips only where they must be),
//! report.md (H1–H5, linked charts) and every chart (well-formed SVG).
//! One study at a time (the machine has 2 cores).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use scalebench::study::nats::{StudyNatsArgs, StudyResult};

static ONE_STUDY_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_quick(nodes: usize) -> (tempfile::TempDir, PathBuf, StudyResult, f64) {
    let _l = ONE_STUDY_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let results = tempfile::tempdir().expect("tempdir");
    let mut args = StudyNatsArgs::new(results.path());
    args.quick = true;
    args.nodes = nodes;
    let t0 = Instant::now();
    let dir =
        scalebench::study::run_study(args).unwrap_or_else(|e| panic!("study --quick --nodes {nodes} failed: {e:#}"));
    let wall = t0.elapsed().as_secs_f64();
    eprintln!("study --quick --nodes {nodes}: {wall:.1} s, {}", dir.display());
    assert_eq!(dir.parent(), Some(results.path()));
    let text = std::fs::read_to_string(dir.join("study.json")).expect("study.json");
    let study: StudyResult = serde_json::from_str(&text).expect("study.json parses");
    (results, dir, study, wall)
}

fn check_study(dir: &Path, study: &StudyResult, nodes: usize) {
    assert_eq!(study.schema, "scalebench.study.nats/1");
    assert_eq!(study.ended_because, "completed");
    assert!(study.plan.quick);
    assert_eq!(study.target.kind, "local");
    assert_eq!(study.target.nodes, Some(nodes));
    assert_eq!(study.target.client_urls.len(), nodes);
    for u in study.target.client_urls.iter().chain(study.target.monitor_urls.iter()) {
        let port: u16 = u.rsplit(':').next().unwrap().parse().unwrap();
        assert!(u.contains("127.0.0.1:") && (20000..=29999).contains(&port), "{u}");
    }
    assert!(study.hardware.nproc > 0);
    assert_eq!(study.servers.len(), nodes);
    assert!(study.servers.iter().all(|s| !s.version.is_empty() && s.jetstream), "{:?}", study.servers);
    assert_eq!(study.varz_before.len(), nodes);
    assert_eq!(study.varz_after.len(), nodes);
    assert!(
        study.varz_before.iter().chain(study.varz_after.iter()).all(|v| v.error.is_none()),
        "{:?}",
        study.varz_after
    );
    let in_before: u64 = study.varz_before.iter().map(|v| v.in_msgs).sum();
    let in_after: u64 = study.varz_after.iter().map(|v| v.in_msgs).sum();
    assert!(in_after > in_before + 20_000, "varz in_msgs {in_before} -> {in_after}");
    assert!(!study.host_before.loadavg.is_empty() && !study.host_after.loadavg.is_empty());
    assert_eq!(study.server_processes.len(), nodes);

    // Every planned row is there.
    let names: Vec<&str> = study.throughput.iter().map(|r| r.name.as_str()).collect();
    for spec in &study.plan.core {
        assert!(names.contains(&spec.name.as_str()), "missing {}", spec.name);
    }
    for spec in &study.plan.jetstream {
        assert!(names.contains(&spec.name.as_str()), "missing {}", spec.name);
    }
    assert_eq!(study.throughput.len(), study.plan.core.len() + study.plan.jetstream.len());
    for r in &study.throughput {
        if let Some(why) = &r.skipped {
            assert!(nodes < 3 && r.replicas == Some(3), "{} skipped unexpectedly: {why}", r.name);
            assert!(why.contains("replicas=3"), "{why}");
            continue;
        }
        assert!(r.first_error.is_none() && r.errors == 0, "{}: {:?}", r.name, r.first_error);
        assert!(!r.capped, "{} hit the time cap", r.name);
        assert!(r.published == r.planned, "{}: published {} of {}", r.name, r.published, r.planned);
        assert!(r.pub_msgs_per_s > 0.0 && r.pub_mib_per_s > 0.0, "{}: {r:?}", r.name);
        match r.kind.as_str() {
            "core" => {
                assert!(r.sub_msgs_per_s.unwrap_or(0.0) > 0.0 && r.aggregate_msgs_per_s.unwrap_or(0.0) > 0.0, "{r:?}");
                assert_eq!(r.expected_deliveries, r.published * r.subscribers as u64);
                assert!(r.delivered > 0 && r.delivered <= r.expected_deliveries, "{r:?}");
            }
            "jetstream" => {
                assert_eq!(r.stored, Some(r.published), "{}: acked writes must all be in the stream", r.name);
                assert!(
                    r.sub_msgs_per_s.is_none() && r.aggregate_msgs_per_s.is_none(),
                    "JetStream rows carry no fan-out columns"
                );
            }
            k => panic!("unknown kind {k}"),
        }
    }
    let skipped = study.throughput.iter().filter(|r| r.skipped.is_some()).count();
    if nodes >= 3 {
        assert_eq!(skipped, 0);
    } else {
        assert_eq!(skipped, study.plan.jetstream.iter().filter(|j| j.replicas == 3).count());
    }
    assert!(study.throughput.iter().any(|r| r.publish.starts_with("sync") && r.skipped.is_none()) || nodes < 3);
    assert!(study
        .throughput
        .iter()
        .any(|r| r.kind == "jetstream" && r.publish.starts_with("async") && r.skipped.is_none()));

    // Delay rows.
    assert_eq!(study.delay.len(), 1 + study.plan.floods.len());
    for d in &study.delay {
        assert!(d.error.is_none(), "{}: {:?}", d.name, d.error);
        assert_eq!(d.received, d.count, "{}: {d:?}", d.name);
        assert!(
            d.min_ms > 0.0
                && d.min_ms <= d.p50_ms
                && d.p50_ms <= d.p90_ms
                && d.p90_ms <= d.p99_ms
                && d.p99_ms <= d.max_ms,
            "{d:?}"
        );
    }
    let ping = study.delay.iter().find(|d| d.kind == "ping").expect("ping row");
    assert_eq!(ping.count, study.plan.ping_count);

    // Hypotheses.
    let ids: Vec<&str> = study.hypotheses.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["H1", "H2", "H3", "H4", "H5"]);
    for h in &study.hypotheses {
        assert!(["supported", "not supported", "not tested"].contains(&h.verdict.as_str()), "{h:?}");
        assert!(!h.evidence.is_empty());
    }
    if nodes >= 3 {
        assert!(study.hypotheses.iter().all(|h| h.verdict != "not tested"), "{:?}", study.hypotheses);
    } else {
        assert_eq!(study.hypotheses.iter().find(|h| h.id == "H4").unwrap().verdict, "not tested");
    }

    // report.md: H1..H5, threats, links to every chart.
    let report = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    for id in ["H1", "H2", "H3", "H4", "H5"] {
        assert!(report.contains(&format!("| {id} |")), "report.md lacks {id}");
    }
    assert!(
        report.contains("Threats to validity")
            && report.contains("Executive summary")
            && report.contains("Where it ran")
    );
    assert!(report.contains("fan-out"));
    assert!(study.charts.len() >= 3, "{:?}", study.charts);
    for c in &study.charts {
        assert!(report.contains(&format!("]({})", c.file)), "report.md does not link {}", c.file);
    }
    // Every SVG: well-formed XML, <svg> root, text in it.
    let mut svgs = 0;
    for e in std::fs::read_dir(dir.join("charts")).expect("charts dir") {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "svg") {
            let text = std::fs::read_to_string(&p).unwrap();
            let doc = roxmltree::Document::parse(&text)
                .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", p.display()));
            assert_eq!(doc.root_element().tag_name().name(), "svg", "{}", p.display());
            let texts = doc.descendants().filter(|n| n.has_tag_name("text")).count();
            assert!(texts >= 1, "{} has no <text>", p.display());
            svgs += 1;
        }
    }
    assert_eq!(svgs, study.charts.len());
    // The local nodes are gone, and their logs were kept.
    for p in &study.server_processes {
        assert!(
            !Path::new(&format!("/proc/{}", p.pid)).exists()
                || std::fs::read_to_string(format!("/proc/{}/stat", p.pid)).map(|s| s.contains(") Z")).unwrap_or(true),
            "nats-server pid {} still alive",
            p.pid
        );
    }
    assert!(dir.join("logs/nats-n0.log").is_file());
}

#[test]
fn quick_study_on_a_single_node() {
    let (_keep, dir, study, wall) = run_quick(1);
    check_study(&dir, &study, 1);
    assert!(wall < 180.0, "--quick took {wall:.0} s");
}

#[test]
fn quick_study_on_a_three_node_cluster() {
    let (_keep, dir, study, wall) = run_quick(3);
    check_study(&dir, &study, 3);
    assert!(wall < 180.0, "--quick took {wall:.0} s");
}

#[test]
fn study_refuses_bad_arguments() {
    let results = tempfile::tempdir().unwrap();
    let mut args = StudyNatsArgs::new(results.path());
    args.nodes = 0;
    let e = scalebench::study::run_study(args).unwrap_err();
    assert!(e.downcast_ref::<scalebench::cli::UsageError>().is_some(), "{e:#}");
    let mut args = StudyNatsArgs::new(results.path());
    args.url = Some("127.0.0.1:24222".into());
    let e = scalebench::study::run_study(args).unwrap_err();
    assert!(format!("{e}").contains("nats://"), "{e:#}");
    assert_eq!(std::fs::read_dir(results.path()).unwrap().count(), 0, "a refused study writes nothing");
}

/// The full study (not --quick), by hand: results under $STUDY_RESULTS_DIR
/// (default: a temporary directory, printed). `STUDY_QUICK=1` runs --quick,
/// `STUDY_NODES=1` a single node, `STUDY_URL` / `STUDY_MONITOR_URL` an
/// external cluster (`--url` / `--monitor-url`).
/// `cargo test --release -p scalebench --test tests study::full_study -- --ignored --nocapture`
#[test]
#[ignore]
fn full_study() {
    let _l = ONE_STUDY_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let keep;
    let dir = match std::env::var_os("STUDY_RESULTS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            keep = tempfile::Builder::new().prefix("scalebench-study-").tempdir_in("/var/tmp").unwrap().keep();
            keep
        }
    };
    let mut args = StudyNatsArgs::new(&dir);
    args.quick = std::env::var("STUDY_QUICK").is_ok_and(|v| v == "1");
    args.nodes = std::env::var("STUDY_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    args.url = std::env::var("STUDY_URL").ok();
    args.monitor_url = std::env::var("STUDY_MONITOR_URL").ok();
    let out = scalebench::study::run_study(args).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("full study written to {}", out.display());
}
