//! The NATS JetStream wire contract's addresses: subjects with
//! '.'-separated tokens under `subject_prefix`, and the canary subject.
//!
//! Envelopes and tags are the Baler contract's, written by the shared
//! [`reading_envelope`] (see docs/wire-contract-baler.md); only the addresses
//! differ: NATS subjects instead of MQTT topics.

use std::borrow::Cow;

use reading_envelope::Addressing;
pub use reading_envelope::{Encoded, Msg, Tag};

use crate::params::Params;

/// What the adapter knows of the run: params and every point registered so far.
pub type Wire = reading_envelope::Wire<Params>;

/// A label as one NATS subject token: '.', '*', '>', whitespace and control
/// characters become '_' (an empty label becomes "_"). Labels are promised
/// token-safe, so this nearly always borrows.
pub fn token(label: &str) -> Cow<'_, str> {
    let bad = |c: char| matches!(c, '.' | '*' | '>') || c.is_whitespace() || c.is_control();
    if label.is_empty() {
        Cow::Borrowed("_")
    } else if label.chars().any(bad) {
        Cow::Owned(label.chars().map(|c| if bad(c) { '_' } else { c }).collect())
    } else {
        Cow::Borrowed(label)
    }
}

impl Addressing for Params {
    /// `<subject_prefix>.s<site>.e<equip>.<label token>`.
    fn reading_address(&self, t: &Tag) -> String {
        format!("{}.s{}.e{}.{}", self.subject_prefix, t.site, t.equip, token(&t.label))
    }

    /// `<subject_prefix>.s<site>.e<equip>.equip.tags`.
    fn equip_tags_address(&self, site: u32, equip: u32) -> String {
        format!("{}.s{}.e{}.equip.tags", self.subject_prefix, site, equip)
    }

    /// The point's subject with `.tags` appended.
    fn point_tags_address(&self, t: &Tag) -> String {
        format!("{}.tags", self.reading_address(t))
    }

    /// `canary_subject`, as configured.
    fn canary_address(&self) -> String {
        self.canary_subject.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reading_envelope::fixtures::{json, plant, tag};

    /// A literal NATS subject: non-empty tokens, no wildcards, no whitespace.
    fn is_literal_subject(s: &str) -> bool {
        s.split('.')
            .all(|t| !t.is_empty() && !t.chars().any(|c| matches!(c, '*' | '>') || c.is_whitespace() || c.is_control()))
    }

    /// NATS subject matching of a literal subject against a filter.
    fn matches(filter: &str, subject: &str) -> bool {
        let f: Vec<&str> = filter.split('.').collect();
        let s: Vec<&str> = subject.split('.').collect();
        for (i, ft) in f.iter().enumerate() {
            if *ft == ">" {
                return s.len() > i;
            }
            match s.get(i) {
                Some(st) if *ft == "*" || ft == st => {}
                _ => return false,
            }
        }
        f.len() == s.len()
    }

    #[test]
    fn subjects() {
        let mut w = Wire::new(Params::default());
        let a = w.addresses(&[tag(0, 1, 2, "temp1"), tag(1, 1, 2, "flow1")]);
        assert_eq!(a, ["scale.readings.s1.e2.temp1", "scale.readings.s1.e2.flow1"]);
        assert_eq!(w.canary(17, 0).address, "scale.canary.lag");
        let mut w = Wire::new(Params::from_json(r#"{"subject_prefix":"x","canary_subject":"y"}"#).unwrap());
        assert_eq!(w.addresses(&[tag(0, 0, 0, "a")]), ["x.s0.e0.a"]);
        assert_eq!(w.canary(1, 0).address, "y");
    }

    #[test]
    fn token_sanitising() {
        assert!(matches!(token("temp1"), Cow::Borrowed("temp1")));
        assert_eq!(token("a.b"), "a_b");
        assert_eq!(token("*"), "_");
        assert_eq!(token(">"), "_");
        assert_eq!(token("a b\tc\nd"), "a_b_c_d");
        assert_eq!(token("x\u{a0}y\u{0}z"), "x_y_z");
        assert_eq!(token(""), "_");
        assert_eq!(token("°C-flow_1"), "°C-flow_1");
        let mut w = Wire::new(Params::default());
        let tags = [tag(0, 3, 4, "a.b>c*d e"), tag(1, 3, 4, "")];
        let a = w.addresses(&tags);
        assert_eq!(a, ["scale.readings.s3.e4.a_b_c_d_e", "scale.readings.s3.e4._"]);
        // The envelope keeps the label as given.
        let e = w.encode(&[0], &[1.0], &[0]).unwrap();
        assert_eq!(json(&e.payload)["point"], "s3/e4/a.b>c*d e");
        for m in w.topology(&tags) {
            assert!(is_literal_subject(&m.address), "{}", m.address);
        }
        for s in a {
            assert!(is_literal_subject(&s), "{s}");
        }
    }

    #[test]
    fn stream_captures_everything_and_filters_separate_it() {
        let p = Params::default();
        let mut w = Wire::new(p.clone());
        let tags = plant(25);
        let readings = w.addresses(&tags);
        let topo = w.topology(&tags);
        let canary = w.canary(0, 0).address;
        let captured = |s: &str| p.stream_subjects().iter().any(|f| matches(f, s));
        let filter = p.readings_filter();
        for s in &readings {
            assert!(captured(s) && matches(&filter, s), "{s}");
            assert!(!matches(&p.canary_subject, s));
        }
        for m in &topo {
            assert!(captured(&m.address) && !matches(&filter, &m.address), "{}", m.address);
        }
        assert!(captured(&canary) && !matches(&filter, &canary));
        assert!(!matches(&format!("{}.>", p.subject_prefix), &canary));
    }

    /// Every tags message goes to the subject named after its own `id`.
    #[test]
    fn topology_subjects() {
        let mut w = Wire::new(Params::default());
        let msgs = w.topology(&plant(25));
        assert_eq!(msgs.len(), 3 + 25);
        for m in &msgs {
            let v = json(&m.payload);
            let (id, suffix) = if m.address.ends_with(".equip.tags") {
                (json(v["tags"].as_str().unwrap().as_bytes())["id"].clone(), "equip.tags")
            } else {
                (v["id"].clone(), "tags")
            };
            let id = id.as_str().unwrap().strip_prefix("r:").unwrap().replace('/', ".");
            assert_eq!(m.address, format!("scale.readings.{id}.{suffix}"));
        }
        assert_eq!(msgs[0].address, "scale.readings.s0.e0.equip.tags");
        assert_eq!(msgs[1].address, "scale.readings.s0.e0.temp1.tags");
        let all = plant(40);
        let msgs = w.topology(&all[25..]);
        let equips: Vec<&str> =
            msgs.iter().filter(|m| m.address.ends_with(".equip.tags")).map(|m| m.address.as_str()).collect();
        assert_eq!(equips, ["scale.readings.s0.e2.equip.tags", "scale.readings.s0.e3.equip.tags"]);
    }

    #[test]
    fn point_tags_subject_uses_the_token() {
        let mut w = Wire::new(Params::default());
        let msgs = w.topology(&[tag(0, 0, 0, "a.b")]);
        assert_eq!(msgs[1].address, "scale.readings.s0.e0.a_b.tags");
        assert_eq!(json(&msgs[1].payload)["id"], "r:s0/e0/a.b");
    }
}
