//! The value of one tag at one sample: per-tag constants drawn once from
//! hashes of (seed, tag), then a closed-form function of the sample's time.

use crate::layout::{Kind, Layout};
use crate::params::Params;

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;
/// Knots of the temperature drift are this far apart.
const DRIFT_KNOT_MS: u64 = 2 * HOUR_MS;
/// One asset in this many has a creeping vibration fault.
pub const CREEP_ONE_IN: u64 = 23;

/// SplitMix64's finaliser: a strong 64-bit mix.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline(always)]
pub fn hash2(a: u64, b: u64) -> u64 {
    mix64(a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x632B_E59B_D9B4_E019))
}

/// Uniform in [0, 1) from 53 bits.
#[inline(always)]
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// sin(2πp) for p in [0, 1), polynomial, no libm: identical bits on every target.
#[inline(always)]
fn sin_turns(p: f64) -> f64 {
    const PI: f64 = core::f64::consts::PI;
    let mut x = 2.0 * PI * (p - 0.5); // in [-π, π); sin(2πp) = -sin(x)
    if x > PI / 2.0 {
        x = PI - x;
    } else if x < -PI / 2.0 {
        x = -PI - x;
    }
    let x2 = x * x;
    let s = x * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362_880.0)))));
    -s
}

/// Quantise like a sensor with resolution 1/q (keeps neighbouring samples equal,
/// as real historians see).
#[inline(always)]
fn quantise(v: f64, q: f64) -> f64 {
    (v * q).round_ties_even() / q
}

/// The constants of one tag, drawn once.
#[derive(Debug, Clone, Copy)]
pub struct TagShape {
    pub kind: Kind,
    /// hash of (seed, tag)
    h: u64,
    /// hash of (seed, equip)
    eh: u64,
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    /// a period in ms (drift / pump segment / counter step / state hold)
    period_ms: u64,
    n: u64,
    /// vibration creep: onset (ms) or u64::MAX when this asset does not creep
    onset_ms: u64,
}

/// Pump schedule of an equip, shared by its flow and pressure points.
#[inline(always)]
fn pump_on(eh: u64, t_ms: u64) -> bool {
    let seg_ms = (20 * 60_000) + (eh % 12) * (20 * 60_000); // 20 min .. 4 h
    let duty = 0.3 + 0.5 * unit(mix64(eh ^ 0xD00D));
    unit(hash2(eh ^ 0x9C3B, t_ms / seg_ms)) < duty
}

#[derive(Debug, Clone)]
pub struct Model {
    pub params: Params,
    pub layout: Layout,
}

impl Model {
    pub fn new(params: Params) -> Model {
        let layout = Layout::new(&params);
        Model { params, layout }
    }

    /// Does this equip carry the creeping vibration fault?
    pub fn equip_creeps(seed: u64, equip: u32) -> bool {
        hash2(seed ^ 0xC4EE_9000, equip as u64).is_multiple_of(CREEP_ONE_IN)
    }

    pub fn shape(&self, seed: u64, tag: u32) -> TagShape {
        let kind = self.layout.kind(tag);
        let equip = self.layout.equip(tag);
        let h = hash2(seed, tag as u64);
        let eh = hash2(seed ^ 0x5E_EDE0_0199, equip as u64);
        let r = |i: u64| unit(hash2(h, 0xA000 + i));
        let mut s = TagShape { kind, h, eh, a: 0.0, b: 0.0, c: 0.0, d: 0.0, period_ms: 1, n: 1, onset_ms: u64::MAX };
        match kind {
            Kind::Temperature => {
                s.a = 12.0 + 50.0 * r(0); // base
                s.b = 0.5 + 2.5 * r(1); // drift amplitude
                s.c = 0.5 + 4.0 * r(2); // daily amplitude
                s.d = 0.3 + 1.5 * r(3); // shift step amplitude
                s.n = (r(4) * 1_000_000.0) as u64; // daily phase, millionths of a day
            }
            Kind::Flow => {
                s.a = quantise(5.0 + 95.0 * r(0), 10.0); // rate when the pump runs
            }
            Kind::Pressure => {
                s.a = 1.0 + 2.0 * r(0); // static head
                s.b = 1.5 + 3.0 * r(1); // rise when the pump runs
            }
            Kind::Vibration => {
                s.a = 0.5 + 1.5 * r(0); // quiet level
                s.b = 4.0 + 4.0 * r(1); // spike factor
                if Self::equip_creeps(seed, equip) {
                    s.c = 0.2 + 0.8 * r(2); // creep, mm/s per day
                    s.onset_ms = (r(3) * 3.0 * DAY_MS as f64) as u64;
                }
            }
            Kind::Counter => {
                s.a = (r(0) * 1_000_000.0).round_ties_even(); // reading at sample 0
                s.period_ms = 1_000 * (1 + (h % 60)); // one step every 1..60 s
                s.b = (1 + (h >> 8) % 10) as f64; // step size
            }
            Kind::State => {
                s.period_ms = HOUR_MS * (2 + (h % 11)); // holds 2..12 h
                s.n = 2 + (h >> 8) % 3; // 2..4 states
            }
        }
        s
    }

    /// The value of a tag with shape `s` at sample `sample`.
    #[inline(always)]
    pub fn value(&self, s: &TagShape, sample: u64) -> f64 {
        let t_ms = sample.wrapping_mul(self.params.sample_period_ms);
        match s.kind {
            Kind::Temperature => {
                let k = t_ms / DRIFT_KNOT_MS;
                let f = (t_ms % DRIFT_KNOT_MS) as f64 * (1.0 / DRIFT_KNOT_MS as f64);
                let f = f * f * (3.0 - 2.0 * f);
                let k0 = unit(hash2(s.h, k));
                let k1 = unit(hash2(s.h, k + 1));
                let drift = (k0 + (k1 - k0) * f - 0.5) * 2.0 * s.b;
                let day_ppm = ((t_ms % DAY_MS) * 1_000_000 / DAY_MS + s.n) % 1_000_000;
                let daily = s.c * sin_turns(day_ppm as f64 * 1e-6);
                // Shifts change at 06:00, 14:00 and 22:00.
                let shift = (t_ms + 2 * HOUR_MS) / (8 * HOUR_MS);
                let step = (unit(hash2(s.h ^ 0x5817, shift)) - 0.5) * 2.0 * s.d;
                quantise(s.a + drift + daily + step, 10.0)
            }
            Kind::Flow => {
                if pump_on(s.eh, t_ms) {
                    s.a
                } else {
                    0.0
                }
            }
            Kind::Pressure => {
                let noise = (unit(hash2(s.h, sample)) - 0.5) * 0.04;
                let head = if pump_on(s.eh, t_ms) { s.a + s.b } else { s.a };
                quantise(head + noise, 100.0)
            }
            Kind::Vibration => {
                let u = hash2(s.h, sample);
                let mut v = s.a * (0.9 + 0.2 * unit(u));
                if (u & 0x3FF) == 0 {
                    v *= s.b; // about one sample in 1024 spikes
                }
                if t_ms > s.onset_ms {
                    v += s.c * ((t_ms - s.onset_ms) as f64 * (1.0 / DAY_MS as f64));
                }
                quantise(v, 100.0)
            }
            Kind::Counter => s.a + s.b * (t_ms / s.period_ms) as f64,
            Kind::State => (hash2(s.h ^ 0x57A7, t_ms / s.period_ms) % s.n) as f64,
        }
    }

    /// Many tags at one instant.
    pub fn sample_into(&self, shapes: &[TagShape], sample: u64, out: &mut Vec<f64>) {
        out.reserve(shapes.len());
        out.extend(shapes.iter().map(|s| self.value(s, sample)));
    }

    pub fn shapes(&self, seed: u64, first: u32, count: u32) -> Vec<TagShape> {
        (first..first.saturating_add(count)).map(|t| self.shape(seed, t)).collect()
    }

    /// Many tags at one instant (computes the shapes; use `sample_into` with
    /// cached shapes in loops).
    pub fn sample(&self, seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        let shapes = self.shapes(seed, first, count);
        let mut out = Vec::with_capacity(shapes.len());
        self.sample_into(&shapes, sample, &mut out);
        out
    }

    /// One tag over many instants.
    pub fn series(&self, seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        let s = self.shape(seed, tag);
        (start..start + count as u64).map(|i| self.value(&s, i)).collect()
    }
}
