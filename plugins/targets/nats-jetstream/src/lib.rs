//! The `nats-jetstream` target adapter (world `target-adapter-plugin`): one
//! message per reading, published with JetStream acknowledgement on a subject
//! per point, `<subject_prefix>.s<site>.e<equip>.<label>`, captured by one
//! stream. See docs/wire-contract-nats.md.
//!
//! # Who counts what was stored
//!
//! The plan's storage is `jetstream(<stream>)`: the **host** counts the
//! stream itself, so `stored` and `canaries-stored` return an error saying so
//! and `preflight` has nothing to check. To count per second of payload time
//! and to find canaries, the host reads the stored messages and parses their
//! payloads. The envelope written for [`wire`] by the shared `reading-envelope`
//! crate (`plugins/targets/envelope`, the same as `baler`'s) is therefore the
//! contract the host relies on, exactly as the Baler historian relies on it:
//!
//! ```json
//! {"point":"s1/e2/temp1","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}
//! {"point":"canary/lag","value":17,"ts":"2026-11-30T14:00:02.000Z"}
//! ```
//!
//! - `point`: `s<site>/e<equip>/<label>` (the label as the value model gave
//!   it, JSON-escaped, not subject-sanitised), or `canary/lag` for canaries;
//! - `value`: a JSON number (shortest round-trip form; `null` for NaN/±inf);
//!   a canary's value is its sequence number;
//! - `ts`: payload time, ISO-8601 UTC with milliseconds and a `Z`.
//!
//! Readings are exactly the messages on subjects `<subject_prefix>.*.*.*`
//! (three tokens after the prefix); the tags messages sent by `topology` have
//! four (`….equip.tags`, `….<label>.tags`) and carry no `ts`; canaries are on
//! `canary_subject`, which may not lie under the prefix.
//!
//! The logic lives in plain modules that build and test natively; the
//! component glue is compiled for wasm32 only.

pub mod params;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod component;
