//! Params of the adapter, read from JSON and validated.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Topic prefix: readings go to `{prefix}/s{site}/e{equip}/{label}`.
    pub prefix: String,
    /// The historian's table of readings.
    pub table: String,
    /// Name of the stack's database service, passed to the host's sql-client.
    pub database: String,
}

impl Default for Params {
    fn default() -> Self {
        Params { prefix: "fbf/scale".into(), table: "point_history".into(), database: "postgres".into() }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "prefix": {"type": "string", "default": "fbf/scale", "description": "MQTT topic prefix of readings, tags and the canary"},
    "table": {"type": "string", "default": "point_history", "description": "the historian's table of readings, optionally schema-qualified", "pattern": "^([A-Za-z_][A-Za-z0-9_]*\\.)?[A-Za-z_][A-Za-z0-9_]*$"},
    "database": {"type": "string", "default": "postgres", "description": "database service of the stack that holds the table"}
  }
}"#;

pub const DEFAULT_JSON: &str = r#"{"prefix":"fbf/scale","table":"point_history","database":"postgres"}"#;

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && s.len() <= 63
}

impl Params {
    /// Parse and validate. Empty input means the defaults.
    pub fn from_json(json: &str) -> Result<Params, String> {
        let json = json.trim();
        let p: Params = if json.is_empty() {
            Params::default()
        } else {
            serde_json::from_str(json).map_err(|e| format!("baler params: {e}"))?
        };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        let pre = &self.prefix;
        if pre.is_empty() {
            return Err("baler params: `prefix` is empty; give a topic prefix such as \"fbf/scale\"".into());
        }
        if pre.starts_with('/') || pre.ends_with('/') || pre.contains("//") {
            return Err(format!(
                "baler params: `prefix` {pre:?} has an empty topic level (leading, trailing or double '/')"
            ));
        }
        if let Some(c) = pre.chars().find(|c| matches!(c, '+' | '#' | '\0')) {
            return Err(format!("baler params: `prefix` {pre:?} contains {c:?}, which MQTT forbids in a topic name"));
        }
        let parts: Vec<&str> = self.table.split('.').collect();
        if parts.len() > 2 || !parts.iter().all(|p| is_ident(p)) {
            return Err(format!(
                "baler params: `table` {:?} is not a plain SQL identifier (letters, digits, '_', optionally `schema.table`)",
                self.table
            ));
        }
        if self.database.trim().is_empty() {
            return Err(
                "baler params: `database` is empty; give the stack's database service name, e.g. \"postgres\"".into()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(Params::from_json("").unwrap(), Params::default());
        assert_eq!(Params::from_json("{}").unwrap(), Params::default());
        assert_eq!(Params::from_json(DEFAULT_JSON).unwrap(), Params::default());
        let _: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
    }

    #[test]
    fn overrides() {
        let p = Params::from_json(r#"{"prefix":"a/b","table":"hist.points","database":"pg2"}"#).unwrap();
        assert_eq!(p.prefix, "a/b");
        assert_eq!(p.table, "hist.points");
        assert_eq!(p.database, "pg2");
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Params::from_json(r#"{"prefx":"a"}"#).unwrap_err();
        assert!(e.contains("unknown field `prefx`"), "{e}");
        let e = Params::from_json(r#"{"table":"x; drop table y"}"#).unwrap_err();
        assert!(e.contains("`table`"), "{e}");
        let e = Params::from_json(r#"{"prefix":"a/+/b"}"#).unwrap_err();
        assert!(e.contains("`prefix`"), "{e}");
        let e = Params::from_json(r#"{"prefix":"a/"}"#).unwrap_err();
        assert!(e.contains("empty topic level"), "{e}");
        let e = Params::from_json(r#"{"database":""}"#).unwrap_err();
        assert!(e.contains("`database`"), "{e}");
        let e = Params::from_json(r#"{"table":3}"#).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let e = Params::from_json("[").unwrap_err();
        assert!(e.starts_with("baler params:"), "{e}");
    }
}
