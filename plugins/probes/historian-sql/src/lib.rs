//! The `historian-sql` probe set (world `probe-set-plugin`): the reads a
//! historian's users make, as SQL against the Baler table `point_history`.
//! The host runs, times and budgets them (budgets.json); `check` judges the
//! answers.
//!
//! - `latest-all`: the latest value of every point (an overview screen).
//! - `hour-<n>` (`hour-1000` by default): one hour of the run's first n points.
//! - `day-1`: one day of one point.
//!
//! Pure modules build and test natively; the component glue is wasm32 only.

pub mod params;
pub mod probes;

#[cfg(target_arch = "wasm32")]
mod component;
