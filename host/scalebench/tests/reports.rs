//! Reports, compare and progress, end to end: reports of real short ladders
//! (one passing, one losing data on purpose) opened in headless Chromium —
//! every chart present and drawn, no console error, nothing fetched, a
//! screenshot; insta snapshots of the table, report.md and compare output
//! on fixed result files (tests/fixtures: real runs, kept); compare of real
//! runs across targets and value models; the progress display off a
//! terminal and on a pseudo-terminal.
//! (Over 700 lines: everything a reader of results sees, tested together
//! because the same fixtures and the one Chromium helper serve all of it.)

use std::path::{Path, PathBuf};
use std::process::Command;

use scalebench::report::figures::STEP_CHARTS;
use scalebench::results::RunResult;

use crate::common::*;
use crate::ladder::{run_ladder, Run};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn load(name: &str) -> RunResult {
    RunResult::load(&fixture(name)).unwrap()
}

fn result_file(run: &Run) -> PathBuf {
    std::fs::read_dir(run.dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .unwrap_or_else(|| panic!("no result file; stderr:\n{}", stderr(&run.out)))
}

// ---- headless Chromium --------------------------------------------------------

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("which").arg(name).output() {
            if out.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            }
        }
    }
    panic!(
        "headless Chromium is needed for the report tests\nhint: run scripts/setup.sh (it installs Debian's chromium)"
    );
}

/// Chromium, headless, with a fresh profile; returns (stdout, stderr).
fn headless(args: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("start chromium");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// What the browser saw of one chart.
#[derive(Debug, serde::Deserialize)]
struct SeenChart {
    id: String,
    svg: bool,
    w: f64,
    h: f64,
    /// Data marks (lines, points, bars, crosses) with a non-empty box, as laid out.
    drawn: u32,
    /// The values the chart drew, as its figure carries them (`data-series`).
    data: Option<serde_json::Value>,
}

#[derive(Debug, serde::Deserialize)]
struct Seen {
    charts: Vec<SeenChart>,
    /// Every resource the page fetched (must be none: self-contained).
    resources: Vec<String>,
    errors: Vec<String>,
}

/// Open `html` in Chromium with a checking script added to a copy, and read
/// back what it measured in the laid-out page.
fn inspect(html: &Path) -> Seen {
    let text = std::fs::read_to_string(html).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  const out = {charts: [], resources: performance.getEntriesByType('resource').map(e => e.name), errors: window.__errors};
  for (const f of document.querySelectorAll('figure[data-chart]')) {
    const svg = f.querySelector('svg');
    const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    let drawn = 0;
    if (svg) for (const el of svg.querySelectorAll('g.data polyline, g.data circle, g.data rect, g.data path, g.data line')) {
      const b = el.getBBox();
      if (b.width > 0 || b.height > 0) drawn++;
    }
    const data = f.dataset.series ? JSON.parse(f.dataset.series) : null;
    out.charts.push({id: f.dataset.chart, svg: !!svg, w: r.width, h: r.height, drawn, data});
  }
  const pre = document.createElement('pre'); pre.id = 'check'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;
    let head = "<script>window.__errors=[];window.addEventListener('error',e=>window.__errors.push(String(e.message)));</script>";
    let checked =
        text.replacen("<head>", &format!("<head>{head}"), 1).replacen("</body>", &format!("{probe}</body>"), 1);
    let copy = html.with_file_name("check.html");
    std::fs::write(&copy, checked).unwrap();
    let (dom, err) =
        headless(&["--virtual-time-budget=5000".into(), "--dump-dom".into(), format!("file://{}", copy.display())]);
    let start = dom
        .find("<pre id=\"check\">")
        .unwrap_or_else(|| panic!("the checking script did not run\nstdout:\n{dom}\nstderr:\n{err}"))
        + 16;
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end].replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Console messages Chromium logged while loading `html` as it is.
fn console_messages(html: &Path) -> Vec<String> {
    let (_, err) =
        headless(&["--virtual-time-budget=3000".into(), "--dump-dom".into(), format!("file://{}", html.display())]);
    err.lines().filter(|l| l.contains("CONSOLE")).map(str::to_string).collect()
}

/// Every chart a report of `r` must hold drawn, by id (the ack latency per
/// second only where the step recorded per-second series).
fn expected_charts(r: &RunResult) -> Vec<String> {
    let mut ids = vec!["ladder".to_string()];
    for (n, s) in r.steps.iter().enumerate() {
        let per_second = scalebench::report::series::has_series(s);
        ids.extend(STEP_CHARTS.iter().filter(|k| per_second || **k != "latency").map(|k| format!("step{}-{k}", n + 1)));
    }
    ids
}

/// Where the chart's values come from, as its data says.
fn source(seen: &Seen, id: &str) -> String {
    let c = seen.charts.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no chart {id}"));
    let data = c.data.as_ref().unwrap_or_else(|| panic!("{id} carries no data"));
    data["source"].as_str().unwrap_or_default().to_string()
}

/// Problems with a report as the browser showed it; empty when every
/// expected chart is present and drawn.
fn chart_problems(seen: &Seen, expected: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for id in expected {
        match seen.charts.iter().find(|c| &c.id == id) {
            None => problems.push(format!("{id}: missing")),
            Some(c) if !c.svg => problems.push(format!("{id}: no chart drawn (placeholder)")),
            Some(c) if c.w < 200.0 || c.h < 100.0 => problems.push(format!("{id}: laid out at {}x{}", c.w, c.h)),
            Some(c) if c.drawn == 0 => problems.push(format!("{id}: empty (no data drawn)")),
            Some(_) => {}
        }
    }
    if !seen.resources.is_empty() {
        problems.push(format!("fetched {:?}", seen.resources));
    }
    if !seen.errors.is_empty() {
        problems.push(format!("script errors {:?}", seen.errors));
    }
    problems
}

/// The whole check of one report: charts, console, self-containment, screenshot.
fn check_report_in_browser(dir: &Path, r: &RunResult) {
    let html = dir.join("report.html");
    let text = std::fs::read_to_string(&html).unwrap();
    for banned in ["<script", "<link", "@import", "url(", "<img", "https://", "<iframe"] {
        assert!(!text.contains(banned), "report.html is not self-contained: it has {banned}");
    }
    assert_eq!(
        text.matches("http://").count(),
        text.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "only the SVG namespace may name a URL"
    );

    let seen = inspect(&html);
    let problems = chart_problems(&seen, &expected_charts(r));
    assert!(problems.is_empty(), "{problems:#?}\nseen: {seen:#?}");
    let console = console_messages(&html);
    assert!(console.is_empty(), "console messages: {console:#?}");

    let shot = dir.join("screenshot.png");
    headless(&[
        "--window-size=1280,2400".into(),
        format!("--screenshot={}", shot.display()),
        format!("file://{}", html.display()),
    ]);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000, "screenshot of {} bytes", png.len());

    // The markdown links every chart written, and each is a drawn SVG.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for id in expected_charts(r) {
        let file = format!("charts/{}-{id}.svg", r.run_id);
        assert!(md.contains(&format!("]({file})")), "report.md does not link {file}");
        let svg = std::fs::read_to_string(dir.join(&file)).unwrap();
        assert!(svg.contains("<g class=\"data\"") && !svg.contains("data-marks=\"0\""), "{file} is empty");
    }
}

#[test]
fn the_report_of_a_real_ladder_shows_every_chart_drawn_in_chromium() {
    let run = run_ladder(&["--soak", "6s"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let file = result_file(&run);
    let out = run.dir.path().join("report");
    let o = scalebench(&["report", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), out.join("report.html").display().to_string());
    let r = RunResult::load(&file).unwrap();
    assert_eq!(r.steps[0].status, scalebench::results::Status::Pass);
    check_report_in_browser(&out, &r);
    let seen = inspect(&out.join("report.html"));
    assert_eq!(source(&seen, "step1-rates"), "per second");
    assert_eq!(source(&seen, "step1-latency"), "per second");
    assert_eq!(source(&seen, "step1-lag"), "per canary");
    assert_eq!(source(&seen, "step1-cpu"), "samples");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Every step passed.") && md.contains("Highest passing step: 200 points."), "{md}");
}

#[test]
fn the_report_of_a_step_losing_data_names_the_loss_and_the_progress_shows_every_phase() {
    // --report writes the report at the end of the run.
    let run = run_ladder(&["--soak", "6s", "--historian-drop-one-in", "50", "--report"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let file = result_file(&run);
    let r = RunResult::load(&file).unwrap();
    assert_eq!(r.steps[0].status, scalebench::results::Status::Fail);
    let dir = run.dir.path().join("results").join(format!("{}-report", r.run_id));
    check_report_in_browser(&dir, &r);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let missing = r.steps[0].ingest.missing_acked;
    assert!(missing > 0);
    assert!(md.contains("First step that did not pass: 200 points: fail — data loss"), "{md}");
    assert!(md.contains(&format!("LOSS: {missing} acknowledged readings not stored")), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<tr class=\"fail\">") && html.contains("badge fail"), "the failing row and badge");

    // Progress, off a terminal: plain lines, one per phase and per sample.
    let e = stderr(&run.out);
    for phase in ["topology", "warm-up", "soak", "probes", "drain", "count"] {
        assert!(e.contains(&format!("[200 pts] phase: {phase} (")), "no {phase} phase line:\n{e}");
    }
    let samples: Vec<&str> =
        e.lines().filter(|l| l.contains("[200 pts]") && l.contains(" left  target 200/s")).collect();
    assert!(samples.len() >= 3, "sample lines:\n{e}");
    for want in ["offered ", "acked ", "stored ", "lag ", "behind "] {
        assert!(samples.iter().all(|l| l.contains(want)), "{want} missing in {samples:#?}");
    }
    assert!(e.contains("step 200 points: fail - data loss"), "{e}");
    assert!(!e.contains('\u{1b}'), "escape codes in a non-terminal log");
}

#[test]
fn the_browser_check_fails_on_a_missing_or_empty_chart_and_on_a_console_error() {
    // A report of fixed results, then spoiled three ways.
    let r = load("baler-drop-one-in-50-ladder.json");
    let dir = tempfile::tempdir().unwrap();
    scalebench::report::write(std::slice::from_ref(&r), dir.path()).unwrap();
    let html = dir.path().join("report.html");
    let good = std::fs::read_to_string(&html).unwrap();
    let seen = inspect(&html);
    assert!(chart_problems(&seen, &expected_charts(&r)).is_empty(), "{seen:#?}");

    // Empty the lag chart's data group and drop the CPU chart.
    let lag = good.find("data-chart=\"step1-lag\"").unwrap();
    let g = lag + good[lag..].find("<g class=\"data\"").unwrap();
    let g_end = g + good[g..].find("</g>").unwrap();
    let open_end = g + good[g..].find(">\n").unwrap() + 2;
    let mut spoiled = format!("{}{}", &good[..open_end], &good[g_end..]);
    let cpu = spoiled.find("<figure class=\"chart\" data-chart=\"step1-cpu\"").unwrap();
    let cpu_end = cpu + spoiled[cpu..].find("</figure>").unwrap() + "</figure>".len();
    spoiled.replace_range(cpu..cpu_end, "");
    std::fs::write(&html, &spoiled).unwrap();
    let problems = chart_problems(&inspect(&html), &expected_charts(&r));
    assert!(problems.contains(&"step1-lag: empty (no data drawn)".to_string()), "{problems:?}");
    assert!(problems.contains(&"step1-cpu: missing".to_string()), "{problems:?}");

    // A console error is seen.
    std::fs::write(&html, good.replacen("</body>", "<script>console.error('spoiled report')</script></body>", 1))
        .unwrap();
    let console = console_messages(&html);
    assert!(console.iter().any(|l| l.contains("spoiled report")), "{console:?}");
}

// ---- per-second charts, read from the DOM ----------------------------------------

/// A stalled step, from a fixture: 70 s of load at 200/s in which the SUT
/// acknowledged nothing from second 30 to 50 and then everything at once;
/// canaries sent in the hole arrive ~20 s late, one is lost, one unknown.
/// Its 15 s samples look as a sampler saw them: one zero, lag of the latest
/// canary small. Only per-second and per-canary charts show the hole.
fn stalled_result() -> RunResult {
    use scalebench::results::{CanaryRecord, Sample, Series, Status};
    let mut r = load("baler-plant-shaped-ladder.json");
    (r.run_id, r.warmup_s, r.soak_s) = ("20261202T000000Z".into(), 10.0, 60.0);
    let s = &mut r.steps[0];
    let (rate, load_s, drain_s) = (200u64, 70usize, 3usize);
    let hole = 30..50;
    let acked: Vec<u64> = (0..load_s + drain_s)
        .map(|k| match k {
            k if hole.contains(&k) => 0,
            50 => rate * 21,
            k if k < load_s => rate,
            _ => 0,
        })
        .collect();
    let latency: Vec<Option<f64>> =
        acked.iter().enumerate().map(|(k, n)| (*n > 0).then_some(if k == 50 { 20.0 } else { 0.01 })).collect();
    s.series = Series {
        start_unix_s: 1_796_169_600,
        soak_from_s: 10.0,
        load_end_s: load_s as f64,
        offered: [vec![rate; load_s], vec![0; drain_s]].concat(),
        acked,
        refused: vec![0; load_s + drain_s],
        stored_by_payload: [vec![rate; load_s], vec![0; drain_s]].concat(),
        ack_latency_p99_s: latency,
        ..Default::default()
    };
    s.canaries = (0..35u64)
        .map(|k| {
            let sent = k as f64 * 2.0;
            let outcome = match sent as u64 {
                40 => "lost",
                44 => "unknown",
                _ => "ok",
            };
            let stored = (outcome == "ok").then(|| if hole.contains(&(sent as usize)) { 50.3 } else { sent + 0.1 });
            CanaryRecord {
                seq: k,
                sent_s: sent,
                acked_s: (outcome != "unknown").then_some(stored.unwrap_or(50.2)),
                stored_s: stored,
                lag_s: stored.map(|t| t - sent),
                outcome: outcome.into(),
            }
        })
        .collect();
    let sample = |t: f64, acked_rps: f64, lag: f64| Sample {
        elapsed_s: t,
        acked_rps,
        stored_rps: Some(acked_rps),
        lag_s: Some(lag),
        ..s.samples[1].clone()
    };
    s.samples =
        vec![sample(15.0, 200.0, 0.1), sample(30.0, 200.0, 0.1), sample(45.0, 0.0, 0.1), sample(60.0, 347.0, 0.3)];
    s.status = Status::Fail;
    s.reasons = vec!["stall: the SUT acknowledged nothing for 20.0 s, from 20.0 s to 40.0 s of the soak".into()];
    s.lag.canaries_sent = 35;
    (s.lag.lost, s.lag.unknown, s.lag.p95_s, s.lag.max_s) = (1, 1, Some(20.2), Some(20.2));
    s.ack_latency.intended = scalebench::latency::Quantiles {
        count: 14_000,
        p50_s: Some(0.01),
        p90_s: Some(0.02),
        p99_s: Some(20.0),
        p999_s: Some(20.0),
        max_s: Some(20.1),
        min_s: Some(0.0001),
    };
    s.ack_latency.service = s.ack_latency.intended.clone();
    (s.ack_latency.longest_silence_s, s.ack_latency.silence_total) = (Some(20.0), true);
    (s.ack_latency.silence_from_soak_s, s.ack_latency.silence_to_soak_s) = (Some(20.0), Some(40.0));
    (s.outcomes.ok, s.outcomes.lost) = (Some(13_990), Some(0));
    s.outcomes.unknown = 10;
    r
}

/// The points of the line whose name starts with `name` in a chart's data.
fn line_points(data: &serde_json::Value, name: &str) -> Vec<(f64, Option<f64>)> {
    let line = data["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no line {name} in {data}"));
    line["points"].as_array().unwrap().iter().map(|p| (p[0].as_f64().unwrap(), p[1].as_f64())).collect()
}

/// The longest run of points one second apart that are all zero.
fn longest_zero_run(points: &[(f64, Option<f64>)]) -> usize {
    let (mut best, mut run, mut last_x) = (0, 0, f64::NAN);
    for (x, y) in points {
        run = match y {
            Some(v) if *v == 0.0 && (run == 0 || (x - last_x - 1.0).abs() < 1e-9) => run + 1,
            Some(v) if *v == 0.0 => 1,
            _ => 0,
        };
        last_x = *x;
        best = best.max(run);
    }
    best
}

#[test]
fn the_report_of_a_stall_shows_the_hole_in_the_acks_and_the_late_canaries_in_the_charts_data() {
    let dir = tempfile::tempdir().unwrap();
    let r = stalled_result();
    let file = dir.path().join(format!("{}-ladder.json", r.run_id));
    r.save(&file).unwrap();
    let out = dir.path().join("report");
    let o = scalebench(&["report", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let seen = inspect(&out.join("report.html"));
    let problems = chart_problems(&seen, &expected_charts(&r));
    assert!(problems.is_empty(), "{problems:#?}");
    let data = |id: &str| seen.charts.iter().find(|c| c.id == id).and_then(|c| c.data.clone()).unwrap();

    let rates = data("step1-rates");
    let acked = line_points(&rates, "acked/s");
    assert!(longest_zero_run(&acked) >= 17, "no hole of 17 s in acked/s: {acked:?}");
    assert_eq!(line_points(&rates, "offered/s").len(), 70, "offered per second over the load");

    let lag = data("step1-lag");
    let lags = line_points(&lag, "canary lag");
    assert!(lags.iter().any(|(_, y)| y.is_some_and(|v| v > 15.0)), "no canary lag over 15 s: {lags:?}");
    let events = lag["events"].as_array().unwrap();
    let at = |kind: &str| -> Vec<f64> {
        let e = events.iter().find(|e| e["name"].as_str().unwrap().starts_with(kind)).unwrap();
        e["x"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
    };
    assert_eq!((at("lost"), at("unknown")), (vec![40.0], vec![44.0]), "{lag}");

    let p99 = line_points(&data("step1-latency"), "p99");
    assert!(p99.iter().filter(|(x, _)| (30.0..50.0).contains(x)).all(|(_, y)| y.is_none()), "a hole, not 0");
    assert!(p99.iter().any(|(_, y)| y.is_some_and(|v| v >= 15.0)), "{p99:?}");

    // The text: quantiles, silence and outcomes, in both formats.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "| Ack latency | Acks | p50 | p90 | p99 | p99.9 | max |",
        "| from intended send time (what a client waited) | 14,000 | 10.0 ms | 20.0 ms | 20.0 s | 20.0 s | 20.1 s |",
        "Longest silence: 20.0 s, from 20.0 s to 40.0 s into the soak (no connection had any answer).",
        "Readings: 13,990 ok (acknowledged and stored) · 0 lost (acknowledged, never stored) · 10 unknown",
        "Canaries: 35 sent · 1 lost (acknowledged, never stored) · unknown (never acknowledged): 1.",
        "Longest gap: no acknowledgement for 20.0 s (from 30.0 s after the load started).",
    ] {
        assert!(md.contains(want), "report.md lacks {want:?}:\n{md}");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<table class=\"latency\">") && html.contains("13,990 ok"), "the HTML has the text too");
}

#[test]
fn a_pass_above_a_failed_step_is_no_ceiling_in_the_table_the_report_and_compare() {
    // --continue-on-fail: step 1 failed, step 2 passed.
    let mut r = load("baler-drop-one-in-50-ladder.json");
    let mut second = load("baler-plant-shaped-ladder.json").steps.remove(0);
    (second.points, second.target_rps) = (400, 400.0);
    r.steps.push(second);
    r.command_line.push("--continue-on-fail".into());
    r.ended_because = "completed".into();
    // A writer that took the highest pass anywhere: the views must not believe it.
    r.max_passing_points = Some(400);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{}-ladder.json", r.run_id));
    r.save(&file).unwrap();
    let none = "Highest passing step: none (a pass above a failed step is not a ceiling).";

    let o = scalebench(&["table", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains(none) && !t.contains("400 points"), "{t}");

    let out = dir.path().join("report");
    let o = scalebench(&["report", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&format!("**{none}**")) && !md.contains("step: 400"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(&format!("<p class=\"verdict\">{none}</p>")), "the HTML verdict");
    let ladder = std::fs::read_to_string(out.join(format!("charts/{}-ladder.svg", r.run_id))).unwrap();
    assert!(ladder.contains(none), "the ladder chart's note: {ladder}");
    assert!(!ladder.contains("400 points."), "{ladder}");

    let other = fixture("baler-plant-shaped-ladder.json");
    let o = scalebench(&[
        "compare",
        file.to_str().unwrap(),
        other.to_str().unwrap(),
        "--out",
        dir.path().join("cmp").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    let line = t.lines().find(|l| l.starts_with(&format!("- {}:", r.run_id))).unwrap_or_else(|| panic!("{t}"));
    assert!(line.ends_with("highest passing step: none"), "{line}");
    assert!(t.contains("highest passing step: 200 points"), "the other run keeps its ceiling: {t}");
}

// ---- snapshots of fixed results -------------------------------------------------

#[test]
fn snapshots_of_the_table_report_md_and_compare_on_fixed_results() {
    let pass = load("baler-plant-shaped-ladder.json");
    let fail = load("baler-drop-one-in-50-ladder.json");
    let nats = load("nats-jetstream-ladder.json");
    let noise = load("baler-noise-ladder.json");
    insta::assert_snapshot!("table", scalebench::report::table::render(&[pass.clone(), fail.clone()]));
    let runs = [fail.clone()];
    let report = scalebench::report::Report::build(&runs);
    insta::assert_snapshot!("report_md_failing_step", scalebench::report::markdown::render(&report));
    let by_target = [pass.clone(), nats];
    let c = scalebench::compare::Comparison::new(&by_target, None, false).unwrap();
    insta::assert_snapshot!("compare_baler_vs_nats_jetstream", c.markdown());
    let by_model = [pass, noise];
    let c = scalebench::compare::Comparison::new(&by_model, None, false).unwrap();
    insta::assert_snapshot!("compare_plant_shaped_vs_noise", c.markdown());
    // Rendering twice gives the same bytes (nothing of the render time leaks in).
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    scalebench::report::write(&runs, a.path()).unwrap();
    scalebench::report::write(&runs, b.path()).unwrap();
    for f in ["report.html", "report.md"] {
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap(),
            "{f} differs between renders"
        );
    }
}

#[test]
fn compare_refuses_different_hosts_unless_told_and_then_says_so() {
    let a = fixture("baler-plant-shaped-ladder.json");
    let mut other = load("baler-noise-ladder.json");
    other.hardware.nproc = 8;
    other.steps[0].durability.ingest_synchronous_commit = Some("off".into());
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("other-ladder.json");
    other.save(&b).unwrap();
    let out = dir.path().join("cmp");
    let o = scalebench(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("not comparable")
            && e.contains("2 CPUs, noise on 8")
            && e.contains("synchronous_commit was on for plant-shaped, off for noise"),
        "{e}"
    );
    assert!(e.contains("hint:") && e.contains("--allow-different-hosts") && !e.contains("NotComparable"), "{e}");
    assert!(!out.exists(), "nothing written when refused");
    let o = scalebench(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--allow-different-hosts",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("**Not like for like** (compared anyway"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

// ---- compare of real runs ---------------------------------------------------------

fn charts_drawn(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .map(|p| {
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(svg.contains("<g class=\"data\"") && !svg.contains("data-marks=\"0\""), "{} is empty", p.display());
            p.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    files.sort();
    files
}

#[test]
fn compare_of_real_runs_across_targets_and_value_models_prints_tables_and_writes_charts() {
    let baler = run_ladder(&["--soak", "6s"]);
    let nats = run_ladder(&["--soak", "6s", "--target", "nats-jetstream"]);
    let noise = run_ladder(&["--soak", "6s", "--model", "noise"]);
    for r in [&baler, &nats, &noise] {
        assert!(r.out.status.success(), "{}", stderr(&r.out));
    }
    let (b, n, z) = (result_file(&baler), result_file(&nats), result_file(&noise));
    let dir = tempfile::tempdir().unwrap();

    let out = dir.path().join("targets");
    let o = scalebench(&[
        "compare",
        b.to_str().unwrap(),
        n.to_str().unwrap(),
        "--by",
        "target",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("## Comparison by target: baler vs nats-jetstream"), "{t}");
    assert!(t.contains("| Points | baler | nats-jetstream | Δ nats-jetstream vs baler |"), "{t}");
    assert!(t.contains("nats-jetstream: durability settings not read"), "{t}");
    for table in [
        "### Stored readings/s",
        "### p95 lag",
        "### Ack latency p99 (from the intended send time)",
        "### Probe latest-all: warm median",
        "### Stack memory",
        "### Storage size",
    ] {
        assert!(t.contains(table), "no {table} table: {t}");
    }
    let charts = charts_drawn(&out);
    assert_eq!(
        charts,
        [
            "compare-200pts-acked.svg",
            "compare-200pts-lag.svg",
            "compare-200pts-latency.svg",
            "compare-lag.svg",
            "compare-memory.svg",
            "compare-probes.svg",
            "compare-stored.svg"
        ],
        "{charts:?}"
    );
    assert!(std::fs::read_to_string(out.join("compare.md"))
        .unwrap()
        .contains("![compare-stored.svg](compare-stored.svg)"));

    let out = dir.path().join("models");
    let o = scalebench(&["compare", b.to_str().unwrap(), z.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("## Comparison by value model: plant-shaped vs noise") && t.contains("Same hardware:"), "{t}");
    assert!(t.contains("| Points | plant-shaped | noise | Δ noise vs plant-shaped |"), "{t}");
    assert_eq!(charts_drawn(&out).len(), 7);

    // By run: the run ids name the columns.
    let o = scalebench(&[
        "compare",
        b.to_str().unwrap(),
        z.to_str().unwrap(),
        "--by",
        "run",
        "--out",
        dir.path().join("runs").to_str().unwrap(),
    ]);
    let ids: Vec<String> = [&b, &z].iter().map(|f| RunResult::load(f).unwrap().run_id).collect();
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("## Comparison by run: {} vs {}", ids[0], ids[1])));
}

// ---- progress on a terminal ----------------------------------------------------------

#[test]
fn on_a_pseudo_terminal_progress_is_a_bar_redrawn_in_place() {
    let _one = crate::ladder::ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args = crate::ladder::ladder_args(dir.path(), &["--soak", "6s", "--probes", "none"]);
    let cmd = std::iter::once(bin().display().to_string())
        .chain(args)
        .map(|a| scalebench::report::table::shell_word(&a))
        .collect::<Vec<_>>()
        .join(" ");
    // util-linux script(1) runs the command on a new pseudo-terminal.
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &format!("{cmd} >/dev/null"), "/dev/null"])
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .env("TERM", "xterm")
        .output()
        .expect("script(1) from util-linux");
    crate::ladder::assert_no_stack_processes(&dir.path().join("stack"));
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(tty.contains("step 1/1 [200 pts]"), "the bar's prefix: {tty:?}");
    assert!(tty.contains('\u{1b}') && tty.contains('\r'), "a bar redraws in place with escape codes: {tty:?}");
    assert!(tty.contains("soak") && tty.contains("acked") && tty.contains("behind"), "{tty:?}");
    assert!(!tty.contains("phase: soak ("), "plain lines on a terminal: {tty:?}");
    assert!(tty.contains("step 200 points: pass"), "{tty:?}");
}

#[test]
fn report_bench_prints_the_render_time_beside_its_baseline() {
    let record = tempfile::tempdir().unwrap();
    let o = scalebench(&["report", "--bench", "--record", record.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(record.path().join("report-bench.json")).unwrap()).unwrap();
    assert_eq!(r["benchmark"], "report --bench");
    assert!(r["figures"][0]["value"].as_f64().unwrap() > 0.0 && r["machine"]["nproc"].as_u64().unwrap() >= 1, "{r}");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("synthetic 7-step ladder, 15-minute soaks (64 samples a step"), "{t}");
    assert!(t.contains("(baseline)") && t.contains("50 SVG charts") && t.contains("goal < 1 s:"), "{t}");
}

// ---- compare: latency beside the floor ----------------------------------------

/// Two runs of one 1,000-point step, service time p50 `a` and `b`,
/// floors with a p50→p90 spread of 40 µs.
fn latency_runs(a: f64, b: f64) -> Vec<scalebench::results::RunResult> {
    [(a, "20260101T000000Z"), (b, "20260102T000000Z")]
        .into_iter()
        .map(|(p50, id)| {
            let mut r = scalebench::commands::report_bench::synthetic_ladder(&[1000], 60.0);
            r.run_id = id.into();
            let floor = scalebench::latency::Quantiles {
                count: 200,
                p50_s: Some(100e-6),
                p90_s: Some(140e-6),
                ..Default::default()
            };
            r.floor = Some(scalebench::results::Floor { round_trip: floor, resolution_s: 1e-6, ..Default::default() });
            r.steps[0].ack_latency.resolution_s = Some(1e-6);
            r.steps[0].ack_latency.service.p50_s = Some(p50);
            r
        })
        .collect()
}

#[test]
fn a_latency_change_inside_the_floors_spread_is_no_measurable_change() {
    let r = latency_runs(250e-6, 270e-6);
    let md = scalebench::compare::Comparison::new(&r, Some(scalebench::compare::By::Run), false).unwrap().markdown();
    assert!(md.contains("| 1,000 | 250 µs | 270 µs | no measurable change (within 40 µs) |"), "{md}");
    assert!(md.contains("| floor p50 | 100 µs | 100 µs |"), "{md}");
    let r = latency_runs(250e-6, 5.25e-3);
    let md = scalebench::compare::Comparison::new(&r, Some(scalebench::compare::By::Run), false).unwrap().markdown();
    assert!(md.contains("| 1,000 | 250 µs | 5.25 ms | +5.00 ms |"), "{md}");
}
