//! docs/architecture.md names files by path: every one exists, so the map
//! cannot drift from the tree unnoticed.

use std::path::Path;

#[test]
fn every_path_the_architecture_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut named = Vec::new();
    for span in doc.split('`').skip(1).step_by(2) {
        let looks_like_a_path =
            ["host/", "wit/", "plugins/", "scripts/", "compose/", "docs/"].iter().any(|p| span.starts_with(p))
                || span == "budgets.json";
        if looks_like_a_path && !span.contains(' ') && !span.contains('*') && !span.contains('<') {
            named.push(span.trim_end_matches('/').to_string());
        }
    }
    assert!(named.len() >= 15, "{named:?}");
    for n in [
        "host/engine/src/loadgen.rs",
        "host/engine/src/verdict.rs",
        "host/results/src/results.rs",
        "host/report/src/chart.rs",
        "host/engine/src/stack/docker.rs",
        "host/engine/src/distributed/wire.rs",
        "host/engine/src/tls.rs",
    ] {
        assert!(named.iter().any(|x| x == n), "the page names {n}");
    }
    let missing: Vec<_> = named.iter().filter(|n| !root.join(n).exists()).collect();
    assert!(missing.is_empty(), "docs/architecture.md names paths that do not exist: {missing:?}");
}
