//! The Windrow-style reading envelope and topology messages, shared by the
//! target adapters whose system under test speaks it (`baler` over MQTT,
//! `nats-jetstream` over JetStream; see docs/wire-contract-baler.md and
//! docs/wire-contract-nats.md):
//!
//! ```json
//! {"point":"s1/e2/temp1","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}
//! {"point":"canary/lag","value":17,"ts":"2026-11-30T14:00:02.000Z"}
//! ```
//!
//! one envelope per reading (and per lag canary), and Haystack-style tags
//! messages that describe each equip and point before its readings arrive.
//! What differs between those systems is only where each message goes: an
//! adapter says that by implementing [`Addressing`] for its params, and
//! [`Wire`] does the rest.
//!
//! Pure and plain: no WIT types, no sdk, nothing that imports WASI beyond
//! std's shims (no `std::collections::HashMap`: its default hasher imports
//! `wasi:random`, which the host refuses), so it builds and tests natively
//! and links into any adapter component.

pub mod iso;
pub mod wire;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;

pub use wire::{point_tags, write_value, Addressing, EncodeError, Encoded, Msg, Tag, Wire, CANARY_POINT};
