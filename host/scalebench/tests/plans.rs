//! Run plans end to end: `run --plan FILE.toml` records its resolved plan,
//! `run --again RESULT` runs the same plan (the same points, values and
//! seed: byte-identical readings on the wire, read by a test subscriber
//! with both runs on the same fixed clock), `plan show` prints it without
//! running, and a changed plugin is refused by name.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::ladder::{free_base_port, ONE_STACK_AT_A_TIME};

fn results_in(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .collect();
    files.sort();
    files.iter().map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap()).collect()
}

/// A subscriber to every reading of the stack's broker at `port`: it
/// connects as soon as the broker is up (before the ladder's first step).
struct Subscriber {
    file: std::path::PathBuf,
    connector: std::thread::JoinHandle<std::process::Child>,
}

impl Subscriber {
    fn start(port: u16, file: std::path::PathBuf) -> Subscriber {
        let f = file.clone();
        // mosquitto_sub exits at once when nothing accepts on the port, but
        // "at once" can take longer than any fixed wait on a loaded host (a
        // run beside seven other tests took its still-starting subscriber
        // for a connected one and heard nothing): it starts only once the
        // broker accepts TCP, and counts as connected once it has lived 2 s.
        let connector = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            loop {
                assert!(Instant::now() < until, "the broker never came up on {port}");
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                let mut c = Command::new("stdbuf")
                    .args(["-oL", "mosquitto_sub", "-h", "127.0.0.1", "-p", &port.to_string(), "-t", "#", "-v"])
                    .stdout(std::fs::File::create(&f).unwrap())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("mosquitto_sub");
                let alive_from = Instant::now();
                while c.try_wait().unwrap().is_none() {
                    if alive_from.elapsed() >= Duration::from_secs(2) {
                        return c;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        });
        Subscriber { file, connector }
    }

    /// Every reading received, by (topic, payload ts): its payload.
    fn readings(self) -> BTreeMap<(String, String), String> {
        let mut c = self.connector.join().unwrap();
        let _ = c.kill();
        let _ = c.wait();
        let text = std::fs::read_to_string(&self.file).unwrap();
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let Some((topic, payload)) = line.split_once(' ') else { continue };
            if topic.ends_with("/tags") || topic.contains("canary") || topic.contains("_stack") {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(payload).unwrap_or_else(|e| panic!("{e}: {line}"));
            out.insert((topic.to_string(), v["ts"].to_string()), payload.to_string());
        }
        out
    }
}

#[test]
fn a_plan_runs_is_recorded_and_runs_again_from_its_result_relative_to_where_it_was_started() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let port = free_base_port();
    // Relative paths, read from the directory the command starts in.
    std::fs::write(
        dir.path().join("ladder.toml"),
        format!(
            "target = \"baler\"\nmodel = \"plant-shaped\"\nsteps = \"200\"\ninterval = \"1s\"\nwarmup = \"1s\"\nsoak = \"4s\"\nseed = 7\nbase-port = {port}\nresults-dir = \"out\"\nprobes = \"none\"\n"
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin())
            .args(args)
            .current_dir(dir.path())
            .env("SCALEBENCH_CACHE_DIR", cache_dir())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    };
    let shown = run(&["plan", "show", "--plan", "ladder.toml"]);
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(shown.contains("seed = \"7\"") && shown.contains("steps = \"200\""), "{shown}");
    assert!(!dir.path().join("out").exists(), "plan show runs nothing");

    // Both runs on one fixed clock (libfaketime): the same seed must put
    // the same bytes on the wire for every reading both offered.
    let on_fixed_clock = |args: &[&str]| {
        let out = Command::new("faketime")
            .args(["-f", "@2027-01-01 00:00:00"])
            .arg(bin())
            .args(args)
            .current_dir(dir.path())
            .env("SCALEBENCH_CACHE_DIR", cache_dir())
            .output()
            .expect("faketime (./scripts/setup.sh installs it)");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    let sub = Subscriber::start(port, dir.path().join("wire-1.txt"));
    on_fixed_clock(&["run", "--plan", "ladder.toml"]);
    let wire_1 = sub.readings();
    let first = results_in(&dir.path().join("out"));
    assert_eq!(first.len(), 1);
    let path = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .unwrap();
    let rel = format!("out/{}", path.file_name().unwrap().to_string_lossy());
    assert_eq!(first[0]["plan"]["seed"], "7");
    assert_eq!(first[0]["plan"]["soak"], "4s");
    // `plan show --again` gives the plan the result recorded.
    let again_shown = run(&["plan", "show", "--again", &rel]);
    assert_eq!(String::from_utf8_lossy(&again_shown.stdout), shown);

    let sub = Subscriber::start(port, dir.path().join("wire-2.txt"));
    on_fixed_clock(&["run", "--again", &rel]);
    let wire_2 = sub.readings();
    // 200 points for 5 s: 1,000 readings each; the runs may start a
    // second apart on the fixed clock (the stack's start time varies).
    assert!(wire_1.len() >= 1000 && wire_2.len() >= 1000, "{} and {} readings", wire_1.len(), wire_2.len());
    let mut common = 0;
    for (key, payload) in &wire_1 {
        if let Some(other) = wire_2.get(key) {
            assert_eq!(payload, other, "the reading of {key:?} differs between the run and its replay");
            common += 1;
        }
    }
    assert!(common >= 600, "only {common} readings at the same instants in both runs");
    let both = results_in(&dir.path().join("out"));
    assert_eq!(both.len(), 2);
    assert_eq!(both[0]["plan"], both[1]["plan"], "the same resolved plan");
    for r in &both {
        assert_eq!(r["steps"][0]["status"], "pass", "{}", r["steps"][0]["reasons"]);
    }
    assert_eq!(both[0]["plugins"], both[1]["plugins"], "the same plugins, by content");
    assert_eq!(
        both[0]["steps"][0]["topology"]["messages"], both[1]["steps"][0]["topology"]["messages"],
        "the same points"
    );

    // A plugin given by path that changed since is refused by name.
    let wasm = dir.path().join("model.wasm");
    std::fs::write(&wasm, builtin("noise")).unwrap();
    let r = first[0].clone();
    let mut changed: serde_json::Value = r;
    changed["plugins"] = serde_json::json!({ format!("model:{}", wasm.display()): "0000000000000000" });
    changed["plan"]["model"] = wasm.display().to_string().into();
    let f = dir.path().join("changed-ladder.json");
    std::fs::write(&f, serde_json::to_string(&changed).unwrap()).unwrap();
    let out = scalebench(&["run", "--again", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("the model plugin {} changed since run", wasm.display())),
        "{}",
        stderr(&out)
    );
}
