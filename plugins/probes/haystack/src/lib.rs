//! The `haystack` probe set (world `probe-set-sized-plugin`: it also sizes its
//! answers, so a report shows how many readings a read found): the reads a Haystack
//! server's users make, as standard Haystack HTTP ops. The host runs, times
//! and budgets them (budgets.json); `check` rejects HTTP errors and Haystack
//! error grids (meta `err`), which servers send with HTTP 200.
//!
//! - `read-point`: read filter `point` (every point record).
//! - `read-equip`: read filter `equip`.
//! - `his-read-today`: the points of one equip (as `readAll(equip->points)`
//!   would give them) read with one batch hisRead, range `today`.
//! - `his-read-1000`: batch hisRead of the run's first 1,000 points for the
//!   last hour (server time from /about).
//! - `about`: GET about.
//!
//! The SCRAM client and Zinc helpers are the haxall adapter's own source
//! files, included by path so both plugins speak the same protocol.

pub mod params;
pub mod probes;
#[path = "../../../targets/haxall/src/scram.rs"]
pub mod scram;
#[path = "../../../targets/haxall/src/zinc.rs"]
pub mod zinc;

#[cfg(target_arch = "wasm32")]
mod component;
