//! How history is written into the historian's table (prefill): the host
//! streams binary COPY rows of (point, ts, value) into `point_history`, the
//! same table and the same point keys live readings land in, keyed by
//! (point, ts) so a rerun adds nothing twice.

use crate::params::Params;
use crate::wire::Tag;

/// The SQL table and row encoding, natively (WIT `sql-copy-plan`).
#[derive(Debug, Clone, PartialEq)]
pub struct CopyPlan {
    pub database: String,
    pub table: String,
    pub point_column: String,
    pub ts_column: String,
    pub value_column: String,
    pub key_columns: Vec<String>,
}

pub fn copy_plan(p: &Params) -> CopyPlan {
    CopyPlan {
        database: p.database.clone(),
        table: p.table.clone(),
        point_column: "point".into(),
        ts_column: "ts".into(),
        value_column: "value".into(),
        key_columns: vec!["point".into(), "ts".into()],
    }
}

/// The stored key of a point: the `point` of its live reading envelopes.
pub fn point_key(t: &Tag) -> String {
    t.point_id()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reading_envelope::fixtures::tag;

    #[test]
    fn keys_match_the_live_envelope() {
        let t = tag(0, 1, 2, "temp1");
        assert_eq!(point_key(&t), "s1/e2/temp1");
        let plan = copy_plan(&Params::default());
        assert_eq!(plan.table, "point_history");
        assert_eq!(plan.key_columns, ["point", "ts"]);
    }
}
