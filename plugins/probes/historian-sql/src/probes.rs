//! The probes (SQL the host runs and times) and the checks of their answers.
//!
//! Every probe returns time as `ts_ms` (bigint epoch milliseconds) rather than
//! a timestamptz: sql-value has no timestamp variant, so this keeps the answer
//! independent of how the host would decode one. The conversion costs nothing
//! next to the read itself.

use std::collections::BTreeSet;

use crate::params::Params;

/// The canary's point id (baler adapter), not a user's point.
pub const CANARY_POINT: &str = "canary/lag";

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

/// A point offered by the run: the fields of WIT `tag-info` the probes use.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub index: u32,
    pub site: u32,
    pub equip: u32,
    pub label: String,
}

impl Point {
    /// `s<site>/e<equip>/<label>`, as the Baler envelope and `point_history.point` have it.
    pub fn id(&self) -> String {
        format!("s{}/e{}/{}", self.site, self.equip, self.label)
    }
}

/// One probe: WIT `probe` with an sql request.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub name: String,
    pub description: String,
    pub database: String,
    pub statement: String,
    pub params: Vec<Value>,
}

/// What `setup` learnt that `check` needs.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub offered: usize,
    pub hour_name: String,
    pub hour_ids: BTreeSet<String>,
    pub day_point: Option<String>,
}

pub const LATEST_ALL: &str = "latest-all";
pub const DAY_1: &str = "day-1";
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
/// Rows may carry payload ts a little ahead of the database's clock.
const SLACK_MS: i64 = 60_000;

/// A Postgres array literal of text elements, every element quoted.
pub fn text_array_literal<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut s = String::from("{");
    for (i, it) in items.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('"');
        for c in it.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
    }
    s.push('}');
    s
}

/// Build the probes for the run's points.
pub fn setup(p: &Params, points: &[Point]) -> (Vec<Probe>, Plan, Vec<String>) {
    let t = &p.table;
    let mut notes = Vec::new();
    let mut plan = Plan { offered: points.len(), ..Plan::default() };
    let mut probes = vec![Probe {
        name: LATEST_ALL.into(),
        description: "an operator opens the overview: the latest value of every point".into(),
        database: p.database.clone(),
        statement: format!(
            "SELECT DISTINCT ON (point) point, (extract(epoch FROM ts) * 1000)::bigint AS ts_ms, value \
             FROM {t} WHERE point <> '{CANARY_POINT}' ORDER BY point, ts DESC"
        ),
        params: vec![],
    }];
    let mut by_index: Vec<&Point> = points.iter().collect();
    by_index.sort_by_key(|x| x.index);
    if by_index.is_empty() {
        notes.push("no points offered: only latest-all is probed".into());
        return (probes, plan, notes);
    }
    let n = p.hour_points as usize;
    let first: Vec<String> = by_index.iter().take(n).map(|x| x.id()).collect();
    if first.len() < n {
        notes.push(format!(
            "the run offers {} points, fewer than hour_points = {n}: the hour probe reads all of them",
            first.len()
        ));
    }
    plan.hour_name = format!("hour-{n}");
    probes.push(Probe {
        name: plan.hour_name.clone(),
        description: format!(
            "an engineer charts the last hour of {} points (the run's first) to compare them",
            first.len()
        ),
        database: p.database.clone(),
        statement: format!(
            // A join on the unnested ids, not `point = ANY($1)`: with the
            // array built from a parameter, PostgreSQL compares every row
            // with every id (measured: 1.2 s for 1,000 ids over 16k rows,
            // against 7 ms for this join, which walks the (point, ts) key).
            "SELECT point, (extract(epoch FROM h.ts) * 1000)::bigint AS ts_ms, h.value \
             FROM unnest($1::text::text[]) AS q(point) JOIN {t} h USING (point) \
             WHERE h.ts >= now() - interval '1 hour' ORDER BY point, h.ts"
        ),
        params: vec![Value::Text(text_array_literal(first.iter().map(String::as_str)))],
    });
    plan.hour_ids = first.into_iter().collect();
    let day = by_index[0].id();
    probes.push(Probe {
        name: DAY_1.into(),
        description: format!("an engineer looks at one day of one point's trend ({day})"),
        database: p.database.clone(),
        statement: format!(
            "SELECT (extract(epoch FROM ts) * 1000)::bigint AS ts_ms, value FROM {t} \
             WHERE point = $1::text AND ts >= now() - interval '1 day' ORDER BY ts"
        ),
        params: vec![Value::Text(day.clone())],
    });
    plan.day_point = Some(day);
    (probes, plan, notes)
}

fn col(rows: &Rows, name: &str, probe: &str) -> Result<usize, String> {
    rows.columns
        .iter()
        .position(|c| c == name)
        .ok_or_else(|| format!("{probe}: column `{name}` missing from the answer (columns: {:?})", rows.columns))
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Float(f) if f.fract() == 0.0 => Some(*f as i64),
        Value::Text(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn num(v: &Value) -> bool {
    match v {
        Value::Int(_) => true,
        Value::Float(f) => f.is_finite(),
        Value::Text(s) => s.trim().parse::<f64>().is_ok_and(|f| f.is_finite()),
        _ => false,
    }
}

/// Judge the answer of probe `name`.
pub fn check(plan: &Plan, name: &str, rows: &Rows) -> Result<(), String> {
    let (has_point, window) = if name == LATEST_ALL {
        (true, None)
    } else if name == DAY_1 && plan.day_point.is_some() {
        (false, Some(DAY_MS))
    } else if !plan.hour_name.is_empty() && name == plan.hour_name {
        (true, Some(HOUR_MS))
    } else {
        return Err(format!("{name}: not a probe of this set (set up: {LATEST_ALL}, {}, {DAY_1})", plan.hour_name));
    };
    let pc = if has_point { Some(col(rows, "point", name)?) } else { None };
    let tc = col(rows, "ts_ms", name)?;
    let vc = col(rows, "value", name)?;
    if rows.rows.is_empty() && plan.offered > 0 {
        return Err(format!(
            "{name}: no rows while {} points were offered: readings are not reaching the table, or the read ran before the first ones landed",
            plan.offered
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    let mut last_ts = i64::MIN;
    for (i, r) in rows.rows.iter().enumerate() {
        if r.len() != rows.columns.len() {
            return Err(format!("{name}: row {i} has {} values for {} columns", r.len(), rows.columns.len()));
        }
        let ts = int(&r[tc]).ok_or_else(|| format!("{name}: row {i}: ts_ms is {:?}, not an integer", r[tc]))?;
        if !num(&r[vc]) {
            return Err(format!("{name}: row {i}: value is {:?}, not a finite number", r[vc]));
        }
        lo = lo.min(ts);
        hi = hi.max(ts);
        if let Some(pc) = pc {
            let Value::Text(p) = &r[pc] else {
                return Err(format!("{name}: row {i}: point is {:?}, not text", r[pc]));
            };
            if name == LATEST_ALL {
                if p == CANARY_POINT {
                    return Err(format!("{name}: the canary is listed among the points"));
                }
                seen.push(p);
            } else if !plan.hour_ids.contains(p) {
                return Err(format!("{name}: row {i} is for point {p:?}, which the probe did not ask for"));
            }
        } else {
            if ts < last_ts {
                return Err(format!("{name}: rows are not in time order (row {i})"));
            }
            last_ts = ts;
        }
    }
    if name == LATEST_ALL {
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("{name}: point {:?} appears more than once; expected one latest row per point", w[0]));
        }
    }
    if let Some(w) = window {
        if !rows.rows.is_empty() && hi - lo > w + SLACK_MS {
            return Err(format!(
                "{name}: rows span {:.1} h, more than the {:.0} h asked for",
                (hi - lo) as f64 / HOUR_MS as f64,
                w as f64 / HOUR_MS as f64
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(n: u32) -> Vec<Point> {
        // given out of order, as nothing promises the host sorts them
        (0..n)
            .rev()
            .map(|i| Point { index: i, site: i / 1000, equip: i / 10, label: format!("temp{}", i % 10 + 1) })
            .collect()
    }
    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }
    fn rows(cols: &[&str], r: Vec<Vec<Value>>) -> Rows {
        Rows { columns: cols.iter().map(|c| c.to_string()).collect(), rows: r }
    }

    #[test]
    fn builds_three_probes() {
        let p = Params::default();
        let (probes, plan, notes) = setup(&p, &points(5000));
        assert!(notes.is_empty());
        let names: Vec<&str> = probes.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["latest-all", "hour-1000", "day-1"]);
        assert!(probes
            .iter()
            .all(|x| x.database == "postgres" && !x.description.is_empty() && !x.description.contains('\n')));
        assert!(
            probes[0].statement.contains("DISTINCT ON (point)")
                && probes[0].statement.contains("ORDER BY point, ts DESC")
        );
        assert!(probes[1].statement.contains("$1::text::text[]"));
        let Value::Text(arr) = &probes[1].params[0] else { panic!() };
        assert!(arr.starts_with("{\"s0/e0/temp1\",\"s0/e0/temp2\","), "{arr}");
        assert_eq!(arr.matches(',').count(), 999);
        assert!(arr.ends_with("\"s0/e99/temp10\"}"));
        assert_eq!(plan.hour_ids.len(), 1000);
        assert_eq!(probes[2].params, vec![t("s0/e0/temp1")]);
    }

    #[test]
    fn few_or_no_points() {
        let p = Params::default();
        let (probes, plan, notes) = setup(&p, &points(12));
        assert_eq!(probes[1].name, "hour-1000");
        assert_eq!(plan.hour_ids.len(), 12);
        assert!(notes[0].contains("fewer than"));
        let (probes, _, notes) = setup(&p, &[]);
        assert_eq!(probes.len(), 1);
        assert_eq!(notes.len(), 1);
        let (probes, _, _) = setup(&Params { hour_points: 10, ..p }, &points(100));
        assert_eq!(probes[1].name, "hour-10");
    }

    #[test]
    fn array_literal_quotes() {
        assert_eq!(text_array_literal(["a", "b\"c", "d\\e", "f,g"]), r#"{"a","b\"c","d\\e","f,g"}"#);
        assert_eq!(text_array_literal(Vec::<&str>::new()), "{}");
    }

    #[test]
    fn checks() {
        let (_, plan, _) = setup(&Params::default(), &points(20));
        let base = 1_796_047_200_000i64;
        let ok = rows(
            &["point", "ts_ms", "value"],
            vec![
                vec![t("s0/e0/temp1"), Value::Int(base), Value::Float(1.5)],
                vec![t("s0/e0/temp2"), Value::Int(base), Value::Int(3)],
            ],
        );
        check(&plan, "latest-all", &ok).unwrap();
        check(&plan, "hour-1000", &ok).unwrap();

        let e = check(&plan, "latest-all", &rows(&["point", "ts_ms", "value"], vec![])).unwrap_err();
        assert!(e.contains("no rows while 20 points"), "{e}");
        let e = check(&plan, "latest-all", &rows(&["point", "value"], vec![])).unwrap_err();
        assert!(e.contains("column `ts_ms` missing"), "{e}");
        let mut dup = ok.clone();
        dup.rows.push(dup.rows[0].clone());
        assert!(check(&plan, "latest-all", &dup).unwrap_err().contains("more than once"));
        let mut other = ok.clone();
        other.rows[1][0] = t("s9/e9/x");
        assert!(check(&plan, "hour-1000", &other).unwrap_err().contains("did not ask for"));
        let mut wide = ok.clone();
        wide.rows[1][1] = Value::Int(base - 2 * HOUR_MS);
        assert!(check(&plan, "hour-1000", &wide).unwrap_err().contains("span"));
        let mut nul = ok.clone();
        nul.rows[0][2] = Value::Null;
        assert!(check(&plan, "latest-all", &nul).unwrap_err().contains("not a finite number"));
        let mut short = ok.clone();
        short.rows[0].pop();
        assert!(check(&plan, "latest-all", &short).unwrap_err().contains("2 values for 3 columns"));

        let day = rows(
            &["ts_ms", "value"],
            vec![vec![Value::Int(base), Value::Float(1.0)], vec![t("1796047201000"), Value::Float(2.0)]],
        );
        check(&plan, "day-1", &day).unwrap();
        let mut back = day.clone();
        back.rows.swap(0, 1);
        assert!(check(&plan, "day-1", &back).unwrap_err().contains("time order"));
        assert!(check(&plan, "nope", &day).unwrap_err().contains("not a probe"));
    }
}
