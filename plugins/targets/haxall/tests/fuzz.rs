//! Fuzz target: what the haxall adapter reads from a Haystack server
//! (`zinc.rs`, `wire.rs`): Zinc error grids and their `dis`, the answers to
//! hisWrite and commit, hisRead answers as Haystack JSON, and Zinc/ISO
//! date-times. Nothing panics or hangs on any answer; a date-time written is
//! read back as the same instant; a date-time with a field out of range
//! (month 13, 25 o'clock) is refused, never read as another instant; and an
//! error grid's `dis` as the writer escapes it is read back as written.
//! Corpus: `fuzz/corpus/zinc/`; `SCALEBENCH_FUZZ_CASES` sets the cases.

#[path = "../../../../host/scalebench/tests/fuzz/harness.rs"]
mod harness;

use haxall::wire::{his_read_answer, ingest_answer};
use haxall::zinc::{error_grid, parse_datetime, write_datetime, write_str, Tz};
use proptest::prelude::*;

use harness::{config, corpus, mutated, within};

const DICT: &[&str] = &[
    "\"",
    "\\",
    "\\u",
    "\\$",
    " ",
    "\n",
    ",",
    ":",
    "err",
    "dis:",
    "ver:\"3.0\" ",
    "{",
    "}",
    "[",
    "]",
    "t:",
    "n:",
    "\"ts\":",
    "\"val\":",
    "null",
    "-",
    "+",
    "T",
    "Z",
    "99",
    "é",
];

/// Every reader on `text`: no panic, no hang.
fn check(text: &str) {
    within("zinc readers", text.to_string(), |t| {
        let _ = error_grid(t);
        let _ = ingest_answer(t.as_bytes());
        let _ = his_read_answer(t.as_bytes(), |_, _| ());
        let _ = parse_datetime(t);
        let _ = Tz::parse(t);
    });
}

#[test]
fn corpus_is_read() {
    for (name, text) in corpus("zinc") {
        check(&text);
        let read = match name.rsplit_once('.').map(|(_, ext)| ext) {
            // bad-*: a date-time once read as another instant; now refused.
            Some("txt") => parse_datetime(&text).is_some() != name.starts_with("bad-"),
            Some("zinc") | Some("json") if name.starts_with("err-") => ingest_answer(text.as_bytes()).is_err(),
            Some("zinc") => ingest_answer(text.as_bytes()).is_ok(),
            _ => his_read_answer(text.as_bytes(), |_, _| ()).is_ok(),
        };
        assert!(read, "seed {name}");
    }
}

fn days_in(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

proptest! {
    #![proptest_config(config(2))]

    #[test]
    fn mutated_answers_are_read_without_a_panic(text in mutated(corpus("zinc").into_iter().map(|(_, s)| s).collect(), DICT)) {
        check(&text);
    }

    #[test]
    fn any_text_is_read_without_a_panic(text in "\\PC{0,60}") {
        check(&text);
    }

    #[test]
    fn datetimes_round_trip(ms in -62_135_596_800_000i64..253_402_300_799_000, hours in -12i32..=14) {
        let tz = if hours == 0 { Tz::utc() } else { Tz::parse(&format!("GMT{}{}", if hours < 0 { '+' } else { '-' }, hours.abs())).unwrap() };
        let mut s = String::new();
        write_datetime(&mut s, ms, &tz);
        prop_assert_eq!(parse_datetime(&s), Some(ms), "{}", s);
    }

    #[test]
    fn datetimes_out_of_range_are_refused(
        y in 1i64..=9999, mo in 0i64..=14, d in 0i64..=33, h in 0i64..=26, mi in 0i64..=61, s in 0i64..=61,
        oh in 0i64..=16, om in 0i64..=61, sign in prop::sample::select(vec!['+', '-']),
    ) {
        let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{oh:02}:{om:02}");
        let valid = (1..=12).contains(&mo) && d >= 1 && d <= days_in(y, mo) && h <= 23 && mi <= 59 && s <= 59 && oh <= 14 && om <= 59;
        prop_assert_eq!(parse_datetime(&text).is_some(), valid, "{}", text);
    }

    /// An error grid's `dis`, written as the adapter's writer escapes
    /// strings, reads back as it was (it is the message a user sees).
    #[test]
    fn error_dis_reads_back_as_written(dis in "\\PC{0,30}|[\\t\\r\\n\\x01\"\\\\$a]{0,8}") {
        let mut meta = String::from("ver:\"3.0\" err dis:");
        write_str(&mut meta, &dis);
        meta.push_str(" errTrace:\"x\"\nempty\n");
        prop_assert_eq!(error_grid(&meta), Some(dis.clone()), "{}", meta);
        prop_assert_eq!(ingest_answer(meta.as_bytes()), Err(format!("error grid: {dis}")), "{}", meta);
    }
}
