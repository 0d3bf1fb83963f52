//! Fuzz target: ladder result files as `report`, `compare` and `table`
//! read them (`results.rs`, `report/`, `compare.rs`). Text mutations test
//! the reading (an error names the file in user words); mutations of the
//! JSON values (numbers at their extremes, fields left out, lists emptied
//! or repeated) give results that read, and every view of them renders
//! without a panic. A result written and read back is the same result.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use scalebench::compare::Comparison;
use scalebench::report::{html, markdown, table, Report};
use scalebench::results::RunResult;
use serde_json::{json, Value};

use crate::harness::{assert_user_words, config, corpus, mutated, within};

const DICT: &[&str] = &["{", "}", "[", "]", ",", ":", "\"", "null", "-1", "0", "1e308", "18446744073709551616", "\"\""];

fn seeds() -> Vec<String> {
    corpus("results").into_iter().map(|(_, s)| s).collect()
}

/// Read `text` as a result file; when it reads, render every view of it.
fn check(text: &str) {
    within("results", text.to_string(), |t| match RunResult::parse(t, Path::new("r-ladder.json")) {
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("r-ladder.json"), "{e}");
            assert_user_words(&e, t);
        }
        Ok(r) => render(r),
    });
}

fn render(r: RunResult) {
    let base = RunResult::parse(&seeds()[0], Path::new("seed")).unwrap();
    let runs = [r.clone(), base];
    let _ = table::render(&runs[..1]);
    let _ = table::render(&runs);
    let report = Report::build(&runs[..1]);
    let _ = (html::render(&report), markdown::render(&report));
    let report = Report::build(&runs);
    let _ = (html::render(&report), markdown::render(&report));
    if let Ok(c) = Comparison::new(&runs, None, true) {
        let _ = (c.markdown(), c.charts());
    }
    // Written and read back: the same result.
    let text = serde_json::to_string_pretty(&r).unwrap();
    let back = RunResult::parse(&text, Path::new("back")).unwrap();
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}

/// Every place in `v`, as JSON pointers.
fn places(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            m.iter().for_each(|(k, x)| places(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out))
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| places(x, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn odd_value(i: usize) -> Value {
    let odd = [
        json!(0),
        json!(-1),
        json!(1),
        json!(0.5),
        json!(1e300),
        json!(-1e300),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("x\u{301}\u{0}"),
        Value::Null,
        json!(true),
        json!([]),
        json!({}),
    ];
    odd[i % odd.len()].clone()
}

/// `seed` with up to six edits of its values: one replaced by an odd value
/// (same kind first: a number by a number), removed, or repeated in its list.
fn edited(seed: &str, edits: &[(u8, Index, usize)]) -> String {
    let mut v: Value = serde_json::from_str(seed).unwrap();
    for (op, at, k) in edits {
        let mut all = Vec::new();
        places(&v, String::new(), &mut all);
        let p = all[at.index(all.len())].clone();
        let (parent, key) = p.rsplit_once('/').unwrap_or(("", ""));
        match op % 3 {
            0 => {
                let new = match v.pointer(&p) {
                    Some(Value::Number(_)) if k % 2 == 0 => odd_value(k % 8),
                    _ => odd_value(*k),
                };
                if let Some(x) = v.pointer_mut(&p) {
                    *x = new;
                }
            }
            1 => match v.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Some(i) = key.parse::<usize>().ok().filter(|i| *i < a.len()) {
                        a.remove(i);
                    }
                }
                _ => {}
            },
            _ => {
                if let Some(Value::Array(a)) = v.pointer_mut(parent) {
                    if let Some(i) = key.parse::<usize>().ok().filter(|i| *i < a.len()) {
                        let x = a[i].clone();
                        a.insert(i, x);
                    }
                }
            }
        }
    }
    v.to_string()
}

#[test]
fn corpus_reads_and_renders() {
    for (name, text) in corpus("results") {
        RunResult::parse(&text, Path::new(&name)).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        check(&text);
    }
}

proptest! {
    #![proptest_config(config(16))]

    #[test]
    fn mutated_text_is_read_or_refused_in_user_words(text in mutated(seeds(), DICT)) {
        check(&text);
    }

    #[test]
    fn odd_values_read_and_render(i in any::<Index>(), edits in proptest::collection::vec(any::<(u8, Index, usize)>(), 1..6)) {
        let s = seeds();
        check(&edited(&s[i.index(s.len())], &edits));
    }
}
