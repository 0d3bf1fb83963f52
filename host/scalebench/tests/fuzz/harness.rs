//! The fuzz harness shared by the targets: how many cases a run tries
//! (`SCALEBENCH_FUZZ_CASES`; small for `make test`, larger for `make fuzz`),
//! the corpus of seed inputs kept in the repository (`fuzz/corpus/<target>/`,
//! including every input that once found a bug), inputs made by mutating
//! those seeds, a deadline per input (a parser that hangs fails instead of
//! stalling CI), and the check that an error reads as user words. Every
//! fuzz target includes this file (`#[path]`), whichever workspace it is in.
//!
//! proptest generates and shrinks the inputs: cargo-fuzz needs a nightly
//! toolchain and libFuzzer, which CI does not install.

// Each target uses the part it needs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// Cases per target: `SCALEBENCH_FUZZ_CASES`, or 64 (a fraction of a second).
pub fn cases() -> u32 {
    std::env::var("SCALEBENCH_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

/// proptest's configuration for a target whose inputs cost `weight` times a
/// cheap one (a whole report per input is slower than one duration).
pub fn config(weight: u32) -> Config {
    Config { cases: (cases() / weight.max(1)).max(1), failure_persistence: None, ..Config::default() }
}

/// The seed inputs of `target`: every file in `fuzz/corpus/<target>/`, by name.
pub fn corpus(target: &str) -> Vec<(String, String)> {
    // The repository's root is the crate's nearest ancestor holding fuzz/corpus.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("fuzz/corpus").is_dir())
        .expect("fuzz/corpus above the crate")
        .to_path_buf();
    let dir = root.join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<_> = files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    assert!(!seeds.is_empty(), "corpus {} is empty", dir.display());
    seeds
}

/// One edit of a mutation: what to do, where, and with what.
type Edit = (u8, Index, Index, char, Index);

/// Inputs made from `seeds` by up to eight edits each: a character
/// replaced, inserted or deleted, a stretch deleted or repeated, the text
/// cut short, or a token of `dict` (the format's own punctuation and
/// keywords) put in.
pub fn mutated(seeds: Vec<String>, dict: &'static [&'static str]) -> impl Strategy<Value = String> {
    let n = seeds.len();
    (0..n, proptest::collection::vec(any::<Edit>(), 0..8)).prop_map(move |(i, edits)| mutate(&seeds[i], &edits, dict))
}

fn mutate(seed: &str, edits: &[Edit], dict: &[&str]) -> String {
    let mut t: Vec<char> = seed.chars().collect();
    for (op, a, b, c, d) in edits {
        let len = t.len();
        let at = if len == 0 { 0 } else { a.index(len + 1) };
        let end = (at + b.index(16) + 1).min(len);
        match op % 7 {
            0 if at < len => t[at] = *c,
            1 => t.insert(at, *c),
            2 if at < end => {
                t.drain(at..end);
            }
            3 if at < end => {
                let s: Vec<char> = t[at..end].to_vec();
                t.splice(at..at, s);
            }
            4 => t.truncate(at),
            _ if !dict.is_empty() => {
                let w = dict[d.index(dict.len())];
                t.splice(at..at, w.chars());
            }
            _ => {}
        }
    }
    t.into_iter().collect()
}

/// Run `f(input)` with a deadline: a parser that takes longer has hung.
pub fn within<T: Send + 'static>(what: &str, input: String, f: impl FnOnce(&str) -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let shown: String = input.chars().take(200).collect();
    std::thread::spawn(move || {
        let _ = tx.send(f(&input));
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} hung (over 5 s) on {shown:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked on {shown:?}"),
    }
}

/// Words a message for a user must not hold: Rust's type names and the
/// text of a panic.
const NOT_USER_WORDS: &[&str] = &[
    "ParseIntError",
    "ParseFloatError",
    "Utf8Error",
    "unwrap()",
    "Option::",
    "Result::",
    "panicked",
    "expected f64",
    "expected f32",
    "expected u8",
    "expected u16",
    "expected u32",
    "expected u64",
    "expected usize",
    "expected i32",
    "expected i64",
    "expected struct",
    "expected enum",
    "variant identifier",
    "Error {",
    "Some(",
];

/// Panics unless `msg` is a message a user can read: not empty, and none of
/// [`NOT_USER_WORDS`].
pub fn assert_user_words(msg: &str, input: &str) {
    assert!(!msg.trim().is_empty(), "empty error for {input:?}");
    for w in NOT_USER_WORDS {
        assert!(!msg.contains(w), "error shows `{w}`: {msg}\ninput: {input:?}");
    }
}
