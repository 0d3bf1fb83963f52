//! Fuzz target: point counts, step lists and durations (`units.rs`) and the
//! command-line flags built on them (`--steps`, `--kill`, `--freeze`,
//! `--watch`, `--cap`), read as clap reads them. None panics or hangs; an
//! error is in user words; what is written back parses to the same value.

use std::time::Duration;

use clap::Parser;
use proptest::prelude::*;
use scalebench::cli::Cli;
use scalebench::units::{duration_text, parse_duration, parse_point_list, parse_points, parse_steps, points_text};

use crate::harness::{assert_user_words, config, corpus, mutated, within};

const DICT: &[&str] = &[
    "k",
    "M",
    "m",
    "ms",
    "s",
    "h",
    "min",
    ",",
    ".",
    "e",
    "-",
    "+",
    "1e309",
    "1e20",
    "99999999999999999999",
    "nan",
    "inf",
    ":",
    " ",
    "0",
];

/// Every unit parser on `s`: Ok within its bounds, or an error in user words.
fn check_units(s: &str) {
    let s = s.to_string();
    let points = within("parse_points", s.clone(), parse_points);
    match points {
        Ok(n) => assert!((1..=50_000_000).contains(&n), "{s:?} → {n}"),
        Err(e) => assert_user_words(&e, &s),
    }
    for r in [within("parse_steps", s.clone(), parse_steps), within("parse_point_list", s.clone(), parse_point_list)] {
        if let Err(e) = r {
            assert_user_words(&e, &s);
        }
    }
    if let Ok(steps) = parse_steps(&s) {
        assert!(!steps.is_empty() && steps.windows(2).all(|w| w[0] < w[1]), "{s:?} → {steps:?}");
    }
    if let Err(e) = within("parse_duration", s.clone(), parse_duration) {
        assert_user_words(&e, &s);
    }
}

/// `scalebench run` with `flag_and_value` (e.g. `--kill mosquitto:15s`).
fn check_cli(flag_and_value: &str) {
    let Some((flag, value)) = flag_and_value.split_once(' ') else { return };
    let args = ["scalebench", "run", "--target", "baler", flag, value].map(String::from);
    if let Some(e) = within("the command line", flag_and_value.into(), move |_| {
        Cli::try_parse_from(&args).err().map(|e| e.to_string())
    }) {
        assert_user_words(&e, flag_and_value);
    }
    if flag == "--cap" {
        if let Err(e) = scalebench::commands::stack_start::parse_cap(value) {
            assert_user_words(&e, value);
        } else if let Ok((_, (cpus, mem))) = scalebench::commands::stack_start::parse_cap(value) {
            assert!(cpus.is_none_or(|c| c.is_finite() && c > 0.0), "--cap {value}: {cpus:?} CPUs");
            assert!(mem.is_none_or(|m| m > 0 && m < i64::MAX), "--cap {value}: {mem:?} bytes");
        }
    }
}

#[test]
fn corpus_parses_or_says_why() {
    // `bad-*` seeds are inputs that once broke a parser: each must be refused.
    for (name, s) in corpus("units") {
        check_units(&s);
        let read = parse_points(&s).is_ok() || parse_steps(&s).is_ok() || parse_duration(&s).is_ok();
        assert_eq!(read, !name.starts_with("bad-"), "seed {name}: {s:?}");
    }
    for (name, s) in corpus("cli") {
        check_cli(&s);
        let (flag, value) = s.split_once(' ').unwrap();
        let read = Cli::try_parse_from(["scalebench", "run", "--target", "baler", flag, value]).is_ok()
            && (flag != "--cap" || scalebench::commands::stack_start::parse_cap(value).is_ok());
        assert_eq!(read, !name.starts_with("bad-"), "seed {name}: {s:?}");
    }
}

fn seeds(target: &str) -> Vec<String> {
    corpus(target).into_iter().map(|(_, s)| s).collect()
}

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn mutated_units_parse_or_say_why(s in mutated(seeds("units"), DICT)) {
        check_units(&s);
    }

    #[test]
    fn any_text_parses_or_says_why(s in "\\PC{0,24}") {
        check_units(&s);
    }

    #[test]
    fn mutated_flags_parse_or_say_why(s in mutated(seeds("cli"), DICT)) {
        check_cli(&s);
    }

    #[test]
    fn points_round_trip(n in 1u64..=50_000_000) {
        prop_assert_eq!(parse_points(&points_text(n)), Ok(n));
    }

    #[test]
    fn durations_round_trip(ms in 0u64..=400 * 3_600_000) {
        let d = Duration::from_millis(ms);
        prop_assert_eq!(parse_duration(&duration_text(d)), Ok(d), "{}", duration_text(d));
    }
}
