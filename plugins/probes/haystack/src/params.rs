//! Params of the probe set.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct Params {
    pub service: String,
    pub api_path: String,
    /// Accepted for older command lines; unused: the probes find the points
    /// through the server (`read point and his`), whatever their ids.
    pub id_prefix: String,
    /// Points read by the `his-read-<n>` probe.
    pub his_read_points: u32,
    pub user: String,
    pub password: String,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            service: "api".into(),
            api_path: "/api".into(),
            id_prefix: "sb".into(),
            his_read_points: 1000,
            user: String::new(),
            password: String::new(),
        }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "service": {"type": "string", "default": "api", "description": "stack service of the Haystack HTTP API; scalebench sets it to the target's own service when not given"},
    "api-path": {"type": "string", "default": "/api", "description": "path of the Haystack API under the service's base URL (Haxall: /api)"},
    "id-prefix": {"type": "string", "default": "sb", "description": "unused (the probes find the points through the server's read op); accepted for older command lines"},
    "his-read-points": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1000, "description": "points in the his-read-<n> probe"},
    "user": {"type": "string", "default": "", "description": "SCRAM-SHA-256 user; empty without auth"},
    "password": {"type": "string", "default": "", "description": "password of user, added by the host from --credentials-file or SCALEBENCH_TARGET_PASSWORD; never give it on the command line"}
  }
}"#;

pub const DEFAULT_JSON: &str =
    r#"{"service":"api","api-path":"/api","id-prefix":"sb","his-read-points":1000,"user":"","password":""}"#;

impl Params {
    pub fn from_json(json: &str) -> Result<Params, String> {
        let json = json.trim();
        let p: Params = if json.is_empty() {
            Params::default()
        } else {
            serde_json::from_str(json).map_err(|e| format!("haystack probes params: {e}"))?
        };
        if p.service.trim().is_empty() {
            return Err("haystack probes params: `service` is empty".into());
        }
        if !p.user.is_empty() && p.password.is_empty() {
            return Err("haystack probes params: `user` is set but no password was given (pass --credentials-file PATH or set SCALEBENCH_TARGET_PASSWORD)".into());
        }
        if p.his_read_points == 0 {
            return Err("haystack probes params: `his-read-points` must be at least 1".into());
        }
        Ok(p)
    }
}
