//! Params of the adapter, read from JSON and validated.

use serde::Deserialize;

use crate::zinc::{self, Tz};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct Params {
    /// Stack service of the Haystack HTTP API.
    pub service: String,
    /// Path of the Haystack API under the service's base URL ("/api" for Haxall).
    pub api_path: String,
    /// Readings per hisWrite request.
    pub his_write_batch: u32,
    /// Point ids per hisRead request when counting (1 = single-point hisRead).
    pub his_read_batch: u32,
    /// SCRAM user; empty = the server runs without auth.
    pub user: String,
    /// Password of `user`: the host adds it from `--credentials-file` or
    /// `SCALEBENCH_TARGET_PASSWORD` (docs/plugin-contract.md, "Credentials").
    pub password: String,
    /// Time zone of the point records and of written timestamps.
    pub tz: String,
    /// First segment of every record id this adapter creates.
    pub id_prefix: String,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            service: "api".into(),
            api_path: "/api".into(),
            his_write_batch: 250,
            his_read_batch: 500,
            user: String::new(),
            password: String::new(),
            tz: "UTC".into(),
            id_prefix: "sb".into(),
        }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "service": {"type": "string", "default": "api", "description": "stack service of the Haystack HTTP API"},
    "api-path": {"type": "string", "default": "/api", "description": "path of the Haystack API under the service's base URL (Haxall: /api)"},
    "his-write-batch": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 250, "description": "readings per hisWrite request (one point: a plain hisWrite grid; several: the batch form, one v<n> column per point)"},
    "his-read-batch": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 500, "description": "point ids per hisRead request when counting stored readings (1 = one hisRead per point)"},
    "user": {"type": "string", "default": "", "description": "SCRAM-SHA-256 user; empty when the server runs without auth"},
    "password": {"type": "string", "default": "", "description": "password of user, added by the host from --credentials-file or SCALEBENCH_TARGET_PASSWORD; never give it on the command line"},
    "tz": {"type": "string", "default": "UTC", "description": "time zone of point records and timestamps: UTC or a fixed-offset zone GMT+n/GMT-n"},
    "id-prefix": {"type": "string", "default": "sb", "description": "first segment of the ids of the site, equip and point records created (Ref characters only)"}
  }
}"#;

pub const DEFAULT_JSON: &str = r#"{"service":"api","api-path":"/api","his-write-batch":250,"his-read-batch":500,"user":"","password":"","tz":"UTC","id-prefix":"sb"}"#;

impl Params {
    pub fn from_json(json: &str) -> Result<Params, String> {
        let json = json.trim();
        let p: Params = if json.is_empty() {
            Params::default()
        } else {
            serde_json::from_str(json).map_err(|e| format!("haxall params: {e}"))?
        };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        if self.service.trim().is_empty() || self.service.contains(' ') {
            return Err("haxall params: `service` must be a stack service name without spaces, e.g. \"api\"".into());
        }
        if !(self.api_path.is_empty() || (self.api_path.starts_with('/') && !self.api_path.ends_with('/'))) {
            return Err(format!(
                "haxall params: `api-path` {:?} must start with '/' and not end with one (or be empty)",
                self.api_path
            ));
        }
        if self.his_write_batch == 0 || self.his_write_batch > 100_000 {
            return Err("haxall params: `his-write-batch` must be 1..=100000 readings".into());
        }
        if self.his_read_batch == 0 || self.his_read_batch > 10_000 {
            return Err("haxall params: `his-read-batch` must be 1..=10000 ids".into());
        }
        if !self.user.is_empty() && self.password.is_empty() {
            return Err("haxall params: `user` is set but no password was given (pass --credentials-file PATH or set SCALEBENCH_TARGET_PASSWORD)".into());
        }
        Tz::parse(&self.tz).map_err(|e| format!("haxall params: `tz`: {e}"))?;
        if self.id_prefix.is_empty() || !self.id_prefix.chars().all(zinc::is_ref_char) {
            return Err(format!(
                "haxall params: `id-prefix` {:?} must be non-empty Ref characters (a-z A-Z 0-9 _ : - . ~)",
                self.id_prefix
            ));
        }
        Ok(())
    }

    pub fn tz(&self) -> Tz {
        Tz::parse(&self.tz).expect("validated")
    }

    /// "<service> <api-path>/<op>": a message address.
    pub fn address(&self, op: &str) -> String {
        format!("{} {}/{}", self.service, self.api_path, op)
    }

    /// "<api-path>/<op>": a request path.
    pub fn path(&self, op: &str) -> String {
        format!("{}/{}", self.api_path, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Params::from_json("").unwrap(), Params::default());
        assert_eq!(Params::from_json(DEFAULT_JSON).unwrap(), Params::default());
        let _: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        let p = Params::from_json(r#"{"his-write-batch":10,"tz":"GMT-2","user":"su","password":"x"}"#).unwrap();
        assert_eq!(p.his_write_batch, 10);
        assert_eq!(p.address("hisWrite"), "api /api/hisWrite");
    }

    #[test]
    fn errors_name_the_field() {
        for (j, field) in [
            (r#"{"his-write-batch":0}"#, "his-write-batch"),
            (r#"{"tz":"New_York"}"#, "tz"),
            (r#"{"user":"su"}"#, "password"),
            (r#"{"id-prefix":"a b"}"#, "id-prefix"),
            (r#"{"api-path":"api/"}"#, "api-path"),
            (r#"{"servce":"x"}"#, "servce"),
        ] {
            let e = Params::from_json(j).unwrap_err();
            assert!(e.contains(field), "{j}: {e}");
        }
    }
}
