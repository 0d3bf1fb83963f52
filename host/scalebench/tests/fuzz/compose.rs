//! Fuzz target: compose files as `--stack docker` reads them
//! (`stack/compose.rs`: interpolation, parsing, the effective
//! configuration) and the isolation guard on what they give. Any file is
//! read or refused with an error in user words and a `hint:`; nothing
//! panics or hangs (YAML aliases included); and a file the guard passes
//! publishes only on 127.0.0.1, off the live ports, with scale_* volumes.

use std::collections::BTreeMap;

use local_stack::guard::LIVE_DEFAULT_PORTS;
use proptest::prelude::*;
use scalebench::stack::compose::{check, interpolate, load, parse_bytes};

use crate::harness::{assert_user_words, config, corpus, mutated, within};

const DICT: &[&str] = &[
    "\n",
    "  ",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"",
    "${",
    "}",
    ":-",
    "&a ",
    "*a",
    "<<: ",
    "!!binary ",
    "0.0.0.0:",
    "127.0.0.1:",
    ":8080",
    "network_mode: host",
    "privileged: true",
    "/etc:/etc",
    "cpus: ",
    "memory: ",
    "1e999",
    "-1",
    "ports: ",
    "volumes: ",
    "name: ",
    "services: ",
];

/// Load `text` as a compose file, then check it as `stack up` does.
fn check_file(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("compose.yml");
    std::fs::write(&file, text).unwrap();
    let env_file = scalebench::stack::compose::write_env_file(&dir.path().join("run"), &BTreeMap::new()).unwrap();
    let checkout = dir.path().to_path_buf();
    let shown = text.to_string();
    within("compose", text.to_string(), move |_| {
        let project = match load(&file, &BTreeMap::new(), &env_file, None, &BTreeMap::new(), None, 2) {
            Ok(p) => p,
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("hint:"), "{e}");
                return assert_user_words(&e, &shown);
            }
        };
        match check(&project, &checkout, false) {
            Err(e) => assert_user_words(&e.to_string(), &shown),
            Ok(()) => {
                assert!(project.volumes.iter().all(|v| v.starts_with("scale_")), "{project:?}");
                for s in &project.services {
                    assert!(s.cpus.is_finite() && s.cpus > 0.0 && s.cpus <= 2.0, "{s:?}");
                    assert!(s.memory_bytes > 0, "{s:?}");
                    assert!(!s.privileged && s.network_mode.as_deref() != Some("host"), "{s:?}");
                    for p in &s.ports {
                        assert!(p.host_ip == "127.0.0.1" && !LIVE_DEFAULT_PORTS.contains(&p.host_port), "{s:?}");
                    }
                    assert!(s.volumes.iter().all(|(v, _)| v.starts_with("scale_")), "{s:?}");
                }
            }
        }
    });
}

#[test]
fn corpus_is_read_and_passes_the_guard() {
    for (name, text) in corpus("compose") {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(&name);
        std::fs::write(&file, &text).unwrap();
        let env_file = scalebench::stack::compose::write_env_file(&dir.path().join("run"), &BTreeMap::new()).unwrap();
        let p = load(&file, &BTreeMap::new(), &env_file, None, &BTreeMap::new(), None, 2).unwrap();
        check(&p, dir.path(), false).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        check_file(&text);
    }
}

proptest! {
    #![proptest_config(config(8))]

    #[test]
    fn mutated_files_are_read_or_refused_in_user_words(text in mutated(corpus("compose").into_iter().map(|(_, s)| s).collect(), DICT)) {
        check_file(&text);
    }

    /// Text without `${` comes out as it went in; `${VAR:-default}` takes
    /// the env's value, or the default when the env has none.
    #[test]
    fn interpolation_replaces_only_variables(plain in "[^$]{0,40}", var in "[A-Z_]{1,8}", value in "[a-z0-9]{0,6}", default in "[a-z0-9]{0,6}") {
        let none = BTreeMap::new();
        prop_assert_eq!(interpolate(&plain, &none), plain.clone());
        let text = format!("{plain}${{{var}:-{default}}}{plain}");
        prop_assert_eq!(interpolate(&text, &none), format!("{plain}{default}{plain}"));
        let env = BTreeMap::from([(var.clone(), value.clone())]);
        let want = if value.is_empty() { default } else { value };
        prop_assert_eq!(interpolate(&text, &env), format!("{plain}{want}{plain}"));
    }

    #[test]
    fn memory_sizes_are_positive_and_in_range(s in "[0-9.e+-]{0,12}[kmgKMG]?[bB]?|\\PC{0,8}") {
        let s2 = s.clone();
        if let Some(b) = within("parse_bytes", s.clone(), move |_| parse_bytes(&s2)) {
            prop_assert!(b > 0 && b < i64::MAX, "{:?} → {}", s, b);
        }
    }
}

#[test]
fn sizes_as_written_in_compose_files() {
    assert_eq!(parse_bytes("2g"), Some(2 << 30));
    assert_eq!(parse_bytes("512m"), Some(512 << 20));
    assert_eq!(parse_bytes("1073741824"), Some(1 << 30));
    assert_eq!(parse_bytes("0"), None);
}
