//! Run plans end to end: `run --plan FILE.toml` records its resolved plan,
//! `run --again RESULT` runs the same plan (the same points, values and
//! seed: the same topology on the wire), `plan show` prints it without
//! running, and a changed plugin is refused by name.

use std::process::Command;

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

    run(&["run", "--plan", "ladder.toml"]);
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

    run(&["run", "--again", &rel]);
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
