//! Params of the adapter, read from JSON and validated, and the plan they give.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// JetStream stream that captures readings, tags messages and canaries.
    pub stream: String,
    /// Readings go to `{subject_prefix}.s{site}.e{equip}.{label}`.
    pub subject_prefix: String,
    /// "file" or "memory".
    pub storage: String,
    /// Stream replicas, 1..=5 (more than 1 needs a clustered server).
    pub replicas: i64,
    /// Stream message limit; 0 means unlimited.
    pub max_msgs: i64,
    /// Subject of the lag canary; must not lie under `subject_prefix`.
    pub canary_subject: String,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            stream: "SCALE".into(),
            subject_prefix: "scale.readings".into(),
            storage: "file".into(),
            replicas: 1,
            max_msgs: 0,
            canary_subject: "scale.canary.lag".into(),
        }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "stream": {"type": "string", "default": "SCALE", "pattern": "^[^.*>/\\\\\\s]{1,255}$", "description": "JetStream stream that captures readings, tags and canaries"},
    "subject_prefix": {"type": "string", "default": "scale.readings", "description": "subject prefix of readings and tags: <prefix>.s<site>.e<equip>.<label>"},
    "storage": {"enum": ["file", "memory"], "default": "file", "description": "the stream's storage"},
    "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1, "description": "the stream's replicas (more than 1 needs a NATS cluster)"},
    "max_msgs": {"type": "integer", "minimum": 0, "default": 0, "description": "the stream's message limit, 0 = unlimited"},
    "canary_subject": {"type": "string", "default": "scale.canary.lag", "description": "subject of the lag canary, outside subject_prefix"}
  }
}"#;

pub const DEFAULT_JSON: &str = r#"{"stream":"SCALE","subject_prefix":"scale.readings","storage":"file","replicas":1,"max_msgs":0,"canary_subject":"scale.canary.lag"}"#;

const ERR: &str = "nats-jetstream params:";

/// Why `s` is not a literal NATS subject (no wildcards), if it is not.
fn subject_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("is empty".into());
    }
    if s.split('.').any(str::is_empty) {
        return Some("has an empty token (leading, trailing or double '.')".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("contains {c:?}; subjects allow no whitespace or control characters"));
    }
    if let Some(c) = s.chars().find(|c| matches!(c, '*' | '>')) {
        return Some(format!("contains {c:?}; give a literal subject, the adapter adds the wildcards itself"));
    }
    if s.starts_with('$') {
        return Some("starts with '$', which NATS reserves for its own subjects ($JS, $SYS)".into());
    }
    None
}

impl Params {
    /// Parse and validate. Empty input means the defaults.
    pub fn from_json(json: &str) -> Result<Params, String> {
        let json = json.trim();
        let p: Params = if json.is_empty() {
            Params::default()
        } else {
            serde_json::from_str(json).map_err(|e| format!("{ERR} {e}"))?
        };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        let st = &self.stream;
        if st.is_empty() {
            return Err(format!("{ERR} `stream` is empty; give a stream name such as \"SCALE\""));
        }
        if st.len() > 255 {
            return Err(format!("{ERR} `stream` is {} bytes long; at most 255", st.len()));
        }
        if let Some(c) =
            st.chars().find(|c| matches!(c, '.' | '*' | '>' | '/' | '\\') || c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "{ERR} `stream` {st:?} contains {c:?}; stream names allow no '.', '*', '>', '/', '\\', whitespace or control characters"
            ));
        }
        if let Some(why) = subject_problem(&self.subject_prefix) {
            return Err(format!("{ERR} `subject_prefix` {:?} {why}", self.subject_prefix));
        }
        if let Some(why) = subject_problem(&self.canary_subject) {
            return Err(format!("{ERR} `canary_subject` {:?} {why}", self.canary_subject));
        }
        if self.canary_subject.starts_with(&format!("{}.", self.subject_prefix)) {
            return Err(format!(
                "{ERR} `canary_subject` {:?} lies under `subject_prefix` {:?}: the stream's subjects would overlap and canaries could not be told from readings by subject; use a subject outside the prefix",
                self.canary_subject, self.subject_prefix
            ));
        }
        if !matches!(self.storage.as_str(), "file" | "memory") {
            return Err(format!("{ERR} `storage` {:?} is not \"file\" or \"memory\"", self.storage));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(format!("{ERR} `replicas` {} is outside 1..=5", self.replicas));
        }
        if self.max_msgs < 0 {
            return Err(format!(
                "{ERR} `max_msgs` {} is negative; give 0 for unlimited or a positive limit",
                self.max_msgs
            ));
        }
        Ok(())
    }

    /// The subjects the stream captures: every subject under the prefix
    /// (readings and tags), and the canary subject.
    pub fn stream_subjects(&self) -> Vec<String> {
        vec![format!("{}.>", self.subject_prefix), self.canary_subject.clone()]
    }

    /// Subject filter that matches readings only (not tags, not canaries).
    pub fn readings_filter(&self) -> String {
        format!("{}.*.*.*", self.subject_prefix)
    }

    pub fn plan(&self) -> Plan {
        Plan {
            jetstream: JetStreamPlan {
                stream_name: self.stream.clone(),
                subjects: self.stream_subjects(),
                storage: self.storage.clone(),
                replicas: self.replicas as u8,
                max_msgs: self.max_msgs,
            },
            storage_stream: self.stream.clone(),
            services: vec![SERVICE.into()],
        }
    }

    /// What `stats` reports: the stream as configured (the host reads the
    /// live state of the stream itself).
    pub fn stats(&self) -> Vec<Stat> {
        vec![
            Stat::text("jetstream.stream", &self.stream),
            Stat::text("jetstream.storage", &self.storage),
            Stat::number("jetstream.replicas", self.replicas as f64),
            Stat::number("jetstream.max_msgs", self.max_msgs as f64),
        ]
    }
}

/// The stack service the adapter's messages go to.
pub const SERVICE: &str = "nats";

/// What `stored`, `canaries-stored` answer: the host counts.
pub const HOST_COUNTS: &str = "counted by the host from the JetStream stream";

/// WIT `jetstream-plan`, natively.
#[derive(Debug, Clone, PartialEq)]
pub struct JetStreamPlan {
    pub stream_name: String,
    pub subjects: Vec<String>,
    pub storage: String,
    pub replicas: u8,
    pub max_msgs: i64,
}

/// WIT `plan` for transport `nats-jetstream` and storage `jetstream`, natively.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub jetstream: JetStreamPlan,
    /// The stream named by storage-plan `jetstream(...)`.
    pub storage_stream: String,
    pub services: Vec<String>,
}

/// WIT `stat`, natively.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    pub name: String,
    pub number: Option<f64>,
    pub text: Option<String>,
}

impl Stat {
    fn text(name: &str, v: &str) -> Stat {
        Stat { name: name.into(), number: None, text: Some(v.into()) }
    }
    fn number(name: &str, v: f64) -> Stat {
        Stat { name: name.into(), number: Some(v), text: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(Params::from_json("").unwrap(), Params::default());
        assert_eq!(Params::from_json(" {} ").unwrap(), Params::default());
        assert_eq!(Params::from_json(DEFAULT_JSON).unwrap(), Params::default());
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        // The schema's defaults are the defaults.
        let d: serde_json::Value = serde_json::from_str(DEFAULT_JSON).unwrap();
        for (k, v) in d.as_object().unwrap() {
            assert_eq!(&schema["properties"][k]["default"], v, "{k}");
        }
        assert_eq!(schema["properties"].as_object().unwrap().len(), d.as_object().unwrap().len());
    }

    #[test]
    fn overrides() {
        let p = Params::from_json(
            r#"{"stream":"S2","subject_prefix":"a.b","storage":"memory","replicas":3,"max_msgs":1000,"canary_subject":"c.lag"}"#,
        )
        .unwrap();
        assert_eq!(p.stream, "S2");
        assert_eq!(p.subject_prefix, "a.b");
        assert_eq!(p.storage, "memory");
        assert_eq!(p.replicas, 3);
        assert_eq!(p.max_msgs, 1000);
        assert_eq!(p.canary_subject, "c.lag");
    }

    #[test]
    fn plan_fields() {
        let plan = Params::default().plan();
        assert_eq!(
            plan,
            Plan {
                jetstream: JetStreamPlan {
                    stream_name: "SCALE".into(),
                    subjects: vec!["scale.readings.>".into(), "scale.canary.lag".into()],
                    storage: "file".into(),
                    replicas: 1,
                    max_msgs: 0,
                },
                storage_stream: "SCALE".into(),
                services: vec!["nats".into()],
            }
        );
        let p = Params::from_json(r#"{"stream":"X","storage":"memory","replicas":5,"max_msgs":10}"#).unwrap();
        let plan = p.plan();
        assert_eq!(plan.jetstream.stream_name, "X");
        assert_eq!(plan.storage_stream, "X");
        assert_eq!(plan.jetstream.storage, "memory");
        assert_eq!(plan.jetstream.replicas, 5);
        assert_eq!(plan.jetstream.max_msgs, 10);
        assert_eq!(p.readings_filter(), "scale.readings.*.*.*");
    }

    #[test]
    fn stats_name_the_configuration() {
        let p = Params::from_json(r#"{"storage":"memory","replicas":3}"#).unwrap();
        let s = p.stats();
        let get = |n: &str| s.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("{n}"));
        assert_eq!(get("jetstream.storage").text.as_deref(), Some("memory"));
        assert_eq!(get("jetstream.replicas").number, Some(3.0));
        assert_eq!(get("jetstream.stream").text.as_deref(), Some("SCALE"));
        assert_eq!(get("jetstream.max_msgs").number, Some(0.0));
    }

    fn err(json: &str) -> String {
        let e = Params::from_json(json).unwrap_err();
        assert!(e.starts_with("nats-jetstream params:"), "{e}");
        e
    }

    #[test]
    fn errors_name_the_problem() {
        let e = err(r#"{"subject_prefx":"a"}"#);
        assert!(e.contains("unknown field `subject_prefx`"), "{e}");
        assert!(e.contains("`subject_prefix`"), "lists the known fields: {e}");
        let e = err(r#"{"stream":""}"#);
        assert!(e.contains("`stream` is empty"), "{e}");
        let e = err(r#"{"stream":"a.b"}"#);
        assert!(e.contains("`stream`") && e.contains("'.'"), "{e}");
        let e = err(r#"{"stream":"a b"}"#);
        assert!(e.contains("`stream`"), "{e}");
        let e = err(&format!(r#"{{"stream":"{}"}}"#, "S".repeat(256)));
        assert!(e.contains("at most 255"), "{e}");
        let e = err(r#"{"subject_prefix":"a..b"}"#);
        assert!(e.contains("`subject_prefix`") && e.contains("empty token"), "{e}");
        let e = err(r#"{"subject_prefix":"a.>"}"#);
        assert!(e.contains("`subject_prefix`") && e.contains("literal"), "{e}");
        let e = err(r#"{"subject_prefix":"a.*.b"}"#);
        assert!(e.contains("`subject_prefix`"), "{e}");
        let e = err(r#"{"subject_prefix":"a b"}"#);
        assert!(e.contains("whitespace"), "{e}");
        let e = err(r#"{"subject_prefix":"$JS.x"}"#);
        assert!(e.contains("reserves"), "{e}");
        let e = err(r#"{"subject_prefix":""}"#);
        assert!(e.contains("`subject_prefix`") && e.contains("empty"), "{e}");
        let e = err(r#"{"canary_subject":"lag."}"#);
        assert!(e.contains("`canary_subject`"), "{e}");
        let e = err(r#"{"canary_subject":"scale.readings.canary"}"#);
        assert!(e.contains("`canary_subject`") && e.contains("under `subject_prefix`"), "{e}");
        // A sibling that merely shares a textual prefix is fine.
        assert!(Params::from_json(r#"{"canary_subject":"scale.readingsX.lag"}"#).is_ok());
        let e = err(r#"{"storage":"disk"}"#);
        assert!(e.contains("`storage`") && e.contains("\"disk\""), "{e}");
        let e = err(r#"{"replicas":0}"#);
        assert!(e.contains("`replicas` 0 is outside 1..=5"), "{e}");
        let e = err(r#"{"replicas":6}"#);
        assert!(e.contains("`replicas`"), "{e}");
        let e = err(r#"{"replicas":1.5}"#);
        assert!(e.contains("invalid type"), "{e}");
        let e = err(r#"{"max_msgs":-1}"#);
        assert!(e.contains("`max_msgs`"), "{e}");
        let e = err(r#"{"stream":3}"#);
        assert!(e.contains("invalid type"), "{e}");
        err("[");
    }
}
