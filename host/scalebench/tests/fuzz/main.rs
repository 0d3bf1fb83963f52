//! Fuzz targets of scalebench's parsers that read outside input: point
//! counts and durations on the command line, service URLs and the guard's
//! endpoint checks, budgets.json, compose files, and ladder result files as
//! report, compare and table read them. Each target runs its corpus
//! (`fuzz/corpus/<target>/`) as regression cases, then generated and
//! mutated inputs; `SCALEBENCH_FUZZ_CASES` sets how many (`make fuzz`).

mod budgets;
mod compose;
mod harness;
mod results;
mod units;
mod urls;
