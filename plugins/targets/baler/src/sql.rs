//! What the adapter asks the historian's Postgres, through the host's
//! sql-client: preflight, stored counts, canaries, stats. The statements and
//! the parsing of their rows are here; `Db` is the host import (faked in tests).
//!
//! Every placeholder carries an explicit cast (`$1::bigint`, `$1::text`), so the
//! statements work whether the host binds sql-value ints as int8 with inferred
//! types or sends every parameter as text.

use crate::params::Params;
use crate::wire::CANARY_POINT;

/// WIT `sql-value`, natively.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

/// WIT `sql-rows`, natively.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// The host's sql-client, bound to one database service.
pub trait Db {
    fn query(&self, statement: &str, params: Vec<Value>) -> Result<Rows, String>;
}

/// A stat: WIT `stat`, natively.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    pub name: String,
    pub number: Option<f64>,
    pub text: Option<String>,
}

impl Value {
    /// An integer however the host decoded it (int, integral float, text).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(*f as i64),
            Value::Text(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Text(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Null => None,
            Value::Bool(b) => Some(if *b { "on" } else { "off" }.into()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Text(s) => Some(s.clone()),
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(i) => Some(*i != 0),
            Value::Text(s) => match s.trim() {
                "t" | "true" | "on" | "1" => Some(true),
                "f" | "false" | "off" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }
}

fn ask(p: &Params, db: &dyn Db, what: &str, statement: &str, params: Vec<Value>) -> Result<Rows, String> {
    db.query(statement, params).map_err(|e| {
        format!(
            "baler: {what} failed on database service `{}` (is the stack's Postgres up and reachable?): {e}",
            p.database
        )
    })
}

fn cell<'a>(rows: &'a Rows, r: usize, c: usize, what: &str) -> Result<&'a Value, String> {
    rows.rows
        .get(r)
        .and_then(|row| row.get(c))
        .ok_or_else(|| format!("baler: {what}: expected at least {} rows of {} columns, got {:?}", r + 1, c + 1, rows))
}

pub fn exists_statement() -> &'static str {
    "SELECT to_regclass($1::text)::text"
}

pub fn columns_statement() -> &'static str {
    "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
     WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
}

pub fn canary_leftovers_statement(table: &str) -> String {
    format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE point = $1::text)")
}

pub fn create_hint(table: &str) -> String {
    format!(
        "CREATE TABLE {table} (point text NOT NULL, ts timestamptz NOT NULL, value double precision NOT NULL, \
         stored_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (point, ts))"
    )
}

/// The table exists with the columns the contract needs, and holds no
/// canaries of an earlier run (they would be counted as this run's). Ok
/// carries notes for the log.
pub fn preflight(p: &Params, db: &dyn Db) -> Result<Vec<String>, String> {
    let t = &p.table;
    let rows = ask(p, db, "checking the table exists", exists_statement(), vec![Value::Text(t.clone())])?;
    if cell(&rows, 0, 0, "to_regclass")?.as_text().is_none() {
        return Err(format!(
            "baler: table `{t}` does not exist in database service `{}`. The historian creates it when it starts: \
             start the historian (or the Baler ingester) against this database before the run, or create it yourself: {}",
            p.database,
            create_hint(t)
        ));
    }
    let cols = ask(p, db, "reading the table's columns", columns_statement(), vec![Value::Text(t.clone())])?;
    let have: Vec<(String, String)> =
        cols.rows.iter().filter_map(|r| Some((r.first()?.as_text()?, r.get(1)?.as_text()?))).collect();
    let mut wrong = Vec::new();
    for (name, ty) in [("point", "text"), ("ts", "timestamp with time zone"), ("value", "double precision")] {
        match have.iter().find(|(n, _)| n == name) {
            None => wrong.push(format!("column `{name}` ({ty}) is missing")),
            Some((_, got)) if got != ty => wrong.push(format!("column `{name}` is {got}, expected {ty}")),
            _ => {}
        }
    }
    if !wrong.is_empty() {
        return Err(format!(
            "baler: table `{t}` does not have the Baler schema: {}. Recreate it as: {}",
            wrong.join("; "),
            create_hint(t)
        ));
    }
    let left = ask(
        p,
        db,
        "looking for canaries of an earlier run",
        &canary_leftovers_statement(t),
        vec![Value::Text(CANARY_POINT.into())],
    )?;
    if cell(&left, 0, 0, "canary check")?.as_bool() == Some(true) {
        return Err(format!(
            "baler: table `{t}` already holds `{CANARY_POINT}` rows from an earlier run; their sequence numbers would \
             be taken for this run's canaries and hide lag and loss. Empty it (TRUNCATE {t}) or start a fresh stack."
        ));
    }
    let mut notes = Vec::new();
    let est = ask(p, db, "estimating the table's rows", &stats_statement(), vec![Value::Text(t.clone())])?;
    if let Some(n) = cell(&est, 0, 2, "row estimate")?.as_f64() {
        if n > 0.0 {
            notes.push(format!(
                "table `{t}` already holds about {n:.0} rows; only rows whose payload ts falls in a step's window are counted"
            ));
        }
    }
    Ok(notes)
}

/// Readings per second of payload ts in [start, end) of this run's points
/// only (`$3`, a text[] of point ids): rows another writer puts in the same
/// table never count, so they cannot hide a loss. Canaries are not points.
pub fn stored_statement(table: &str) -> String {
    format!(
        "SELECT (floor(extract(epoch FROM h.ts)) * 1000)::bigint AS second_ms, count(*)::bigint AS readings \
         FROM {table} h JOIN unnest($3::text[]) AS run(point) ON h.point = run.point \
         WHERE h.ts >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond' \
           AND h.ts < timestamptz 'epoch' + $2::bigint * interval '1 millisecond' \
           AND h.point <> '{CANARY_POINT}' \
         GROUP BY 1 ORDER BY 1"
    )
}

/// A PostgreSQL array literal of text: `{"a","b\"c"}`.
pub fn text_array(items: &[String]) -> String {
    let mut out = String::with_capacity(items.iter().map(|s| s.len() + 3).sum::<usize>() + 2);
    out.push('{');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in s.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

pub fn stored(
    p: &Params,
    db: &dyn Db,
    start_ms: i64,
    end_ms: i64,
    points: &[String],
) -> Result<Vec<(i64, u64)>, String> {
    if end_ms <= start_ms || points.is_empty() {
        return Ok(Vec::new());
    }
    let rows = ask(
        p,
        db,
        "counting stored readings",
        &stored_statement(&p.table),
        vec![Value::Int(start_ms), Value::Int(end_ms), Value::Text(text_array(points))],
    )?;
    rows.rows
        .iter()
        .map(|r| match (r.first().and_then(Value::as_i64), r.get(1).and_then(Value::as_i64)) {
            (Some(s), Some(n)) if n >= 0 => Ok((s, n as u64)),
            _ => Err(format!("baler: stored: expected rows of (second_ms bigint, readings bigint), got {r:?}")),
        })
        .collect()
}

pub fn canaries_statement(table: &str) -> String {
    format!(
        "SELECT DISTINCT value::bigint FROM {table} WHERE point = '{CANARY_POINT}' AND value >= $1::bigint ORDER BY 1"
    )
}

pub fn canaries_stored(p: &Params, db: &dyn Db, from_seq: u64) -> Result<Vec<u64>, String> {
    let from = i64::try_from(from_seq).unwrap_or(i64::MAX);
    let rows = ask(p, db, "reading stored canaries", &canaries_statement(&p.table), vec![Value::Int(from)])?;
    rows.rows
        .iter()
        .map(|r| match r.first().and_then(Value::as_i64) {
            Some(s) if s >= 0 => Ok(s as u64),
            _ => Err(format!("baler: canaries: expected one bigint sequence number per row, got {r:?}")),
        })
        .collect()
}

pub const SETTINGS_STATEMENT: &str =
    "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')";

pub fn stats_statement() -> String {
    "SELECT pg_total_relation_size(to_regclass($1::text))::bigint, pg_database_size(current_database())::bigint, \
     (SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass($1::text)), \
     pg_table_size(to_regclass($1::text))::bigint, pg_indexes_size(to_regclass($1::text))::bigint"
        .into()
}

/// Durability settings read live, and sizes. `db.rows_estimate` is
/// pg_class.reltuples (as of the last VACUUM/ANALYZE; absent if never), not a count.
pub fn stats(p: &Params, db: &dyn Db) -> Result<Vec<Stat>, String> {
    let s = ask(p, db, "reading durability settings", SETTINGS_STATEMENT, vec![])?;
    let mut out = Vec::new();
    for (i, name) in
        ["durability.fsync", "durability.synchronous_commit", "durability.full_page_writes"].into_iter().enumerate()
    {
        out.push(Stat { name: name.into(), number: None, text: cell(&s, 0, i, "settings")?.as_text() });
    }
    let z = ask(p, db, "reading table and database sizes", &stats_statement(), vec![Value::Text(p.table.clone())])?;
    let num = |i: usize| -> Result<Option<f64>, String> { Ok(cell(&z, 0, i, "sizes")?.as_f64()) };
    out.push(Stat { name: "db.table_bytes".into(), number: num(0)?, text: None });
    out.push(Stat { name: "db.database_bytes".into(), number: num(1)?, text: None });
    // Heap (with TOAST) and indexes apart: what the rows cost and what their keys cost.
    if z.rows.first().is_some_and(|r| r.len() >= 5) {
        out.push(Stat { name: "db.heap_bytes".into(), number: num(3)?, text: None });
        out.push(Stat { name: "db.index_bytes".into(), number: num(4)?, text: None });
    }
    // reltuples is -1 for a table never vacuumed or analyzed (PostgreSQL 14+).
    let est = num(2)?.filter(|n| *n >= 0.0);
    out.push(Stat {
        name: "db.rows_estimate".into(),
        number: est,
        text: if est.is_none() { Some("unknown: table not analyzed yet".into()) } else { None },
    });
    // The storage's own write counter (independent of row timestamps).
    let w = ask(p, db, "reading the table's write counter", WRITES_STATEMENT, vec![Value::Text(p.table.clone())])?;
    out.push(Stat {
        name: "ingest.rows_written_total".into(),
        number: cell(&w, 0, 0, "write counter")?.as_f64(),
        text: Some(format!("pg_stat_user_tables inserts+updates on {}", p.table)),
    });
    // Durability as the ingest path's own session sees it, where the
    // ingester records it (the reference historian does).
    let e = ask(
        p,
        db,
        "looking for the ingest session's settings",
        "SELECT to_regclass('ingest_session') IS NOT NULL",
        vec![],
    )?;
    if cell(&e, 0, 0, "ingest_session")?.as_bool() == Some(true) {
        let s = ask(p, db, "reading the ingest session's settings", INGEST_SETTINGS_STATEMENT, vec![])?;
        if !s.rows.is_empty() {
            for (i, name) in [
                "durability.ingest.fsync",
                "durability.ingest.synchronous_commit",
                "durability.ingest.full_page_writes",
            ]
            .into_iter()
            .enumerate()
            {
                out.push(Stat { name: name.into(), number: None, text: cell(&s, 0, i, "ingest settings")?.as_text() });
            }
        }
    }
    Ok(out)
}

/// Inserts + updates the server counted on the table and its partitions.
pub const WRITES_STATEMENT: &str = "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::float8 FROM pg_stat_user_tables \
     WHERE relid = to_regclass($1::text) OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1::text))";

/// The newest ingest session's settings (any session off makes the path non-durable: the least durable is reported).
pub const INGEST_SETTINGS_STATEMENT: &str =
    "SELECT min(fsync), min(synchronous_commit), min(full_page_writes) FROM ingest_session";

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Answers each statement by a substring it contains; records what was asked.
    struct Fake {
        answers: Vec<(&'static str, Result<Rows, String>)>,
        asked: RefCell<Vec<(String, Vec<Value>)>>,
    }
    impl Db for Fake {
        fn query(&self, statement: &str, params: Vec<Value>) -> Result<Rows, String> {
            self.asked.borrow_mut().push((statement.to_string(), params));
            self.answers
                .iter()
                .find(|(k, _)| statement.contains(k))
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| panic!("unexpected statement {statement}"))
        }
    }
    fn rows(r: Vec<Vec<Value>>) -> Result<Rows, String> {
        Ok(Rows { columns: vec![], rows: r })
    }
    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }
    fn good_columns() -> Result<Rows, String> {
        rows(vec![
            vec![t("point"), t("text")],
            vec![t("ts"), t("timestamp with time zone")],
            vec![t("value"), t("double precision")],
            vec![t("stored_at"), t("timestamp with time zone")],
        ])
    }
    fn fake(answers: Vec<(&'static str, Result<Rows, String>)>) -> Fake {
        Fake { answers, asked: RefCell::new(vec![]) }
    }

    #[test]
    fn preflight_ok_and_notes() {
        let p = Params::default();
        let db = fake(vec![
            ("to_regclass($1::text)::text", rows(vec![vec![t("point_history")]])),
            ("pg_attribute", good_columns()),
            ("EXISTS", rows(vec![vec![Value::Bool(false)]])),
            ("reltuples", rows(vec![vec![Value::Int(8192), Value::Int(1 << 20), Value::Float(1234.0)]])),
        ]);
        let notes = preflight(&p, &db).unwrap();
        assert!(notes[0].contains("about 1234 rows"), "{notes:?}");
        let asked = db.asked.borrow();
        assert_eq!(asked[0].1, vec![t("point_history")]);
        assert!(asked[2].0.contains("FROM point_history WHERE point = $1::text"));
        assert_eq!(asked[2].1, vec![t("canary/lag")]);
    }

    #[test]
    fn preflight_errors_say_what_to_do() {
        let p = Params::default();
        let db = fake(vec![("to_regclass", rows(vec![vec![Value::Null]]))]);
        let e = preflight(&p, &db).unwrap_err();
        assert!(e.contains("does not exist") && e.contains("CREATE TABLE point_history"), "{e}");

        let db = fake(vec![("to_regclass", Err("connection refused".into()))]);
        let e = preflight(&p, &db).unwrap_err();
        assert!(e.contains("connection refused") && e.contains("`postgres`"), "{e}");

        let db = fake(vec![
            ("to_regclass($1::text)::text", rows(vec![vec![t("point_history")]])),
            ("pg_attribute", rows(vec![vec![t("point"), t("text")], vec![t("ts"), t("timestamp without time zone")]])),
        ]);
        let e = preflight(&p, &db).unwrap_err();
        assert!(
            e.contains("`ts` is timestamp without time zone") && e.contains("`value` (double precision) is missing"),
            "{e}"
        );

        let db = fake(vec![
            ("to_regclass($1::text)::text", rows(vec![vec![t("point_history")]])),
            ("pg_attribute", good_columns()),
            ("EXISTS", rows(vec![vec![t("t")]])),
        ]);
        let e = preflight(&p, &db).unwrap_err();
        assert!(e.contains("TRUNCATE point_history"), "{e}");
    }

    #[test]
    fn stored_binds_ints_and_parses_leniently() {
        let p = Params::default();
        let db = fake(vec![(
            "GROUP BY",
            rows(vec![
                vec![Value::Int(1_796_047_200_000), Value::Int(2000)],
                vec![t("1796047201000"), Value::Float(1999.0)],
            ]),
        )]);
        let pts = vec!["s0/e0/a".to_string(), "s0/e0/\"b".to_string()];
        let s = stored(&p, &db, 1_796_047_200_000, 1_796_047_202_000, &pts).unwrap();
        assert_eq!(s, vec![(1_796_047_200_000, 2000), (1_796_047_201_000, 1999)]);
        let asked = db.asked.borrow();
        assert_eq!(
            asked[0].1,
            vec![
                Value::Int(1_796_047_200_000),
                Value::Int(1_796_047_202_000),
                Value::Text(r#"{"s0/e0/a","s0/e0/\"b"}"#.into())
            ]
        );
        assert!(
            asked[0].0.contains("$1::bigint")
                && asked[0].0.contains("$2::bigint")
                && asked[0].0.contains("unnest($3::text[])")
        );
        assert!(asked[0].0.contains("point <> 'canary/lag'"));
        assert!(stored(&p, &db, 5, 5, &pts).unwrap().is_empty());
        // No points of this run: nothing of it can be stored.
        assert!(stored(&p, &db, 0, 5, &[]).unwrap().is_empty());

        let bad = fake(vec![("GROUP BY", rows(vec![vec![Value::Null, Value::Int(1)]]))]);
        assert!(stored(&p, &bad, 0, 1, &pts).unwrap_err().contains("second_ms"));
    }

    #[test]
    fn canaries() {
        let p = Params::default();
        let db = fake(vec![("DISTINCT", rows(vec![vec![Value::Int(3)], vec![Value::Int(4)]]))]);
        assert_eq!(canaries_stored(&p, &db, 3).unwrap(), vec![3, 4]);
        assert_eq!(db.asked.borrow()[0].1, vec![Value::Int(3)]);
        canaries_stored(&p, &db, u64::MAX).unwrap();
        assert_eq!(db.asked.borrow()[1].1, vec![Value::Int(i64::MAX)]);
    }

    #[test]
    fn stats_names() {
        let p = Params::default();
        let db = fake(vec![
            ("current_setting", rows(vec![vec![t("on"), t("off"), t("on")]])),
            ("pg_total_relation_size", rows(vec![vec![Value::Int(8192), Value::Int(1 << 20), Value::Float(-1.0)]])),
            ("n_tup_ins", rows(vec![vec![Value::Float(1234.0)]])),
            ("to_regclass('ingest_session')", rows(vec![vec![Value::Bool(true)]])),
            ("FROM ingest_session", rows(vec![vec![t("on"), t("off"), t("on")]])),
        ]);
        let s = stats(&p, &db).unwrap();
        let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "durability.fsync",
                "durability.synchronous_commit",
                "durability.full_page_writes",
                "db.table_bytes",
                "db.database_bytes",
                "db.rows_estimate",
                "ingest.rows_written_total",
                "durability.ingest.fsync",
                "durability.ingest.synchronous_commit",
                "durability.ingest.full_page_writes"
            ]
        );
        assert_eq!(s[6].number, Some(1234.0));
        assert_eq!(s[8].text.as_deref(), Some("off"));
        assert_eq!(s[1].text.as_deref(), Some("off"));
        assert_eq!(s[3].number, Some(8192.0));
        assert_eq!(s[5].number, None);
    }
}
