//! The `plant-shaped` value model: values that look like a plant's.
//!
//! Six kinds of point, mixed so that slow analogue values dominate:
//! temperature (slow drift, a daily cycle, a step at shift change), flow (zero,
//! then flat at rate while the equip's pump runs), pressure (follows the same
//! pump, with its own small noise), vibration (quiet, rare spikes, a slow
//! creep on about 1 asset in 23), counter (steps up by a constant, never
//! down) and state (discrete, holds for hours).
//!
//! Every value is a pure function of (seed, tag index, sample index) written
//! with integer hashing and IEEE arithmetic only (no libm), so the WebAssembly
//! build and the native build give the same bits. `sample` (many tags, one
//! instant) and `series` (one tag, many instants) call the same `value`.

pub mod layout;
pub mod params;
pub mod shape;

pub use layout::{Kind, Layout, TagMeta};
pub use params::Params;
pub use shape::{Model, TagShape};
