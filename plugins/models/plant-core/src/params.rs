//! Parameters of the model, read from JSON and validated.

use serde::Deserialize;

/// Weights of each kind of point in an equip's template.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    #[serde(default)]
    pub temperature: f64,
    #[serde(default)]
    pub flow: f64,
    #[serde(default)]
    pub pressure: f64,
    #[serde(default)]
    pub vibration: f64,
    #[serde(default)]
    pub counter: f64,
    #[serde(default)]
    pub state: f64,
}

impl Default for Mix {
    fn default() -> Self {
        // Slow analogue values dominate, as on a real site.
        Mix { temperature: 0.5, flow: 0.1, pressure: 0.1, vibration: 0.1, counter: 0.1, state: 0.1 }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Relative weights of the kinds; need not sum to 1.
    pub mix: Mix,
    /// Time between two samples of one tag, in milliseconds.
    pub sample_period_ms: u64,
    /// Points of one piece of equipment.
    pub points_per_equip: u32,
    /// Equips of one site.
    pub equips_per_site: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { mix: Mix::default(), sample_period_ms: 1000, points_per_equip: 10, equips_per_site: 100 }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "mix": {
      "type": "object",
      "additionalProperties": false,
      "description": "relative weights of the kinds of point in each equip",
      "properties": {
        "temperature": {"type": "number", "minimum": 0},
        "flow": {"type": "number", "minimum": 0},
        "pressure": {"type": "number", "minimum": 0},
        "vibration": {"type": "number", "minimum": 0},
        "counter": {"type": "number", "minimum": 0},
        "state": {"type": "number", "minimum": 0}
      }
    },
    "sample_period_ms": {"type": "integer", "minimum": 1, "maximum": 86400000},
    "points_per_equip": {"type": "integer", "minimum": 1, "maximum": 1000},
    "equips_per_site": {"type": "integer", "minimum": 1, "maximum": 1000000}
  }
}"#;

pub const DEFAULT_JSON: &str = r#"{"mix":{"temperature":0.5,"flow":0.1,"pressure":0.1,"vibration":0.1,"counter":0.1,"state":0.1},"sample_period_ms":1000,"points_per_equip":10,"equips_per_site":100}"#;

impl Params {
    /// Parse and validate; the error names the field and what is allowed.
    pub fn from_json(json: &str) -> Result<Params, String> {
        let text = if json.trim().is_empty() { "{}" } else { json };
        let p: Params = serde_json::from_str(text).map_err(|e| format!("plant-shaped params: {e}"))?;
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<(), String> {
        let m = &self.mix;
        let weights = [m.temperature, m.flow, m.pressure, m.vibration, m.counter, m.state];
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err("plant-shaped params: mix weights must be finite numbers >= 0".into());
        }
        if weights.iter().sum::<f64>() <= 0.0 {
            return Err("plant-shaped params: mix has no positive weight; give at least one kind a weight > 0".into());
        }
        if self.sample_period_ms == 0 || self.sample_period_ms > 86_400_000 {
            return Err(format!(
                "plant-shaped params: sample_period_ms is {}, must be between 1 and 86400000",
                self.sample_period_ms
            ));
        }
        if self.points_per_equip == 0 || self.points_per_equip > 1000 {
            return Err(format!(
                "plant-shaped params: points_per_equip is {}, must be between 1 and 1000",
                self.points_per_equip
            ));
        }
        if self.equips_per_site == 0 || self.equips_per_site > 1_000_000 {
            return Err(format!(
                "plant-shaped params: equips_per_site is {}, must be between 1 and 1000000",
                self.equips_per_site
            ));
        }
        Ok(())
    }
}
