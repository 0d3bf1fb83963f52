//! Params of the probe set, read from JSON and validated.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Database service of the stack holding the table.
    pub database: String,
    /// The historian's table of readings (`point`, `ts`, `value`).
    pub table: String,
    /// How many of the run's first points the hour read asks for.
    pub hour_points: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { database: "postgres".into(), table: "point_history".into(), hour_points: 1000 }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "database": {"type": "string", "default": "postgres", "description": "database service of the stack that holds the table"},
    "table": {"type": "string", "default": "point_history", "description": "the historian's table of readings, optionally schema-qualified", "pattern": "^([A-Za-z_][A-Za-z0-9_]*\\.)?[A-Za-z_][A-Za-z0-9_]*$"},
    "hour_points": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1000, "description": "points read by the hour probe (the first of the run); the probe is named hour-<n>"}
  }
}"#;

pub const DEFAULT_JSON: &str = r#"{"database":"postgres","table":"point_history","hour_points":1000}"#;

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && s.len() <= 63
}

impl Params {
    pub fn from_json(json: &str) -> Result<Params, String> {
        let json = json.trim();
        let p: Params = if json.is_empty() {
            Params::default()
        } else {
            serde_json::from_str(json).map_err(|e| format!("historian-sql params: {e}"))?
        };
        let parts: Vec<&str> = p.table.split('.').collect();
        if parts.len() > 2 || !parts.iter().all(|x| is_ident(x)) {
            return Err(format!(
                "historian-sql params: `table` {:?} is not a plain SQL identifier (letters, digits, '_', optionally `schema.table`)",
                p.table
            ));
        }
        if p.database.trim().is_empty() {
            return Err(
                "historian-sql params: `database` is empty; give the stack's database service name, e.g. \"postgres\""
                    .into(),
            );
        }
        if !(1..=100_000).contains(&p.hour_points) {
            return Err(format!("historian-sql params: `hour_points` is {}; give 1 to 100000", p.hour_points));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_errors() {
        assert_eq!(Params::from_json("").unwrap(), Params::default());
        assert_eq!(Params::from_json(DEFAULT_JSON).unwrap(), Params::default());
        let _: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        assert_eq!(Params::from_json(r#"{"hour_points":5}"#).unwrap().hour_points, 5);
        let e = Params::from_json(r#"{"hours":5}"#).unwrap_err();
        assert!(e.contains("unknown field `hours`"), "{e}");
        assert!(Params::from_json(r#"{"hour_points":0}"#).unwrap_err().contains("`hour_points`"));
        assert!(Params::from_json(r#"{"hour_points":-1}"#).unwrap_err().contains("invalid value"));
        assert!(Params::from_json(r#"{"table":"a b"}"#).unwrap_err().contains("`table`"));
        assert!(Params::from_json(r#"{"database":" "}"#).unwrap_err().contains("`database`"));
    }
}
