//! The Baler wire contract's addresses: MQTT topics under `prefix`. The
//! envelopes, tags messages and canary are the shared reading envelope's
//! ([`reading_envelope`]); this module only says where each goes.

use reading_envelope::Addressing;
pub use reading_envelope::{Encoded, Msg, Tag, CANARY_POINT};

use crate::params::Params;

/// What the adapter knows of the run: params and every point registered so far.
pub type Wire = reading_envelope::Wire<Params>;

impl Addressing for Params {
    /// `<prefix>/s<site>/e<equip>/<label>`.
    fn reading_address(&self, t: &Tag) -> String {
        format!("{}/s{}/e{}/{}", self.prefix, t.site, t.equip, t.label)
    }

    /// `<prefix>/s<site>/e<equip>/equip/tags`.
    fn equip_tags_address(&self, site: u32, equip: u32) -> String {
        format!("{}/s{site}/e{equip}/equip/tags", self.prefix)
    }

    /// The point's topic with `/tags` appended.
    fn point_tags_address(&self, t: &Tag) -> String {
        format!("{}/tags", self.reading_address(t))
    }

    /// `<prefix>/canary/lag`.
    fn canary_address(&self) -> String {
        format!("{}/canary/lag", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reading_envelope::fixtures::{json, tag};

    #[test]
    fn topics() {
        let mut w = Wire::new(Params::default());
        let a = w.addresses(&[tag(0, 1, 2, "temp1"), tag(1, 1, 2, "flow1")]);
        assert_eq!(a, ["fbf/scale/s1/e2/temp1", "fbf/scale/s1/e2/flow1"]);
        assert_eq!(w.canary(17, 0).address, "fbf/scale/canary/lag");
        let mut w = Wire::new(Params { prefix: "x".into(), ..Params::default() });
        assert_eq!(w.addresses(&[tag(0, 0, 0, "a")]), ["x/s0/e0/a"]);
    }

    /// Each equip's tags message, then its points', on the topics below theirs.
    #[test]
    fn topology_topics() {
        let mut w = Wire::new(Params::default());
        let msgs = w.topology(&[tag(0, 1, 2, "temp1"), tag(1, 1, 2, "flow1")]);
        let topics: Vec<&str> = msgs.iter().map(|m| m.address.as_str()).collect();
        assert_eq!(topics, ["fbf/scale/s1/e2/equip/tags", "fbf/scale/s1/e2/temp1/tags", "fbf/scale/s1/e2/flow1/tags"]);
        assert_eq!(json(&msgs[0].payload)["points"][1], "s1/e2/flow1");
        assert_eq!(json(&msgs[2].payload)["id"], "r:s1/e2/flow1");
    }
}
