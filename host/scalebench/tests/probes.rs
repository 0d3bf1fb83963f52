//! The host's services (SQL and HTTP against the run's own stack) and the
//! probe runner, against a real PostgreSQL started for the test, a tiny
//! local HTTP server, and the built-in `historian-sql` probe set.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use plugin_runtime::types::{HttpRequest, SqlValue, TagInfo};
use plugin_runtime::{HostServices, ProbeSet};
use scalebench::budgets::Budgets;
use scalebench::probes::run_probes;
use scalebench::services::StackServices;

use crate::common::pg::TestPg;
use crate::common::{builtin, runtime};

/// SqlValue has no PartialEq (bindgen): compare its Debug form.
fn dbg<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

fn services(pg: &TestPg) -> StackServices {
    StackServices::new([("postgres".to_string(), pg.conn_string())].into(), BTreeMap::new())
        .unwrap()
        .with_timeout(Duration::from_secs(20))
}

#[test]
fn sql_types_params_errors_and_reconnect() {
    let pg = TestPg::start();
    let s = services(&pg);

    let q = "SELECT 1::int2 AS a, 2::int4 AS b, 3::int8 AS c, 1.5::float4 AS d, 2.25::float8 AS e, 12.345::numeric AS f, \
             true AS g, 'x'::text AS h, 'y'::varchar AS i, 'n'::name AS j, '{\"a\": 1}'::json AS k, '{\"a\": 1}'::jsonb AS l, \
             '2026-01-02 03:04:05.5+00'::timestamptz AS m, NULL::int AS n, '2026-01-02'::date AS o, \
             'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS p, '\\x0102'::bytea AS q2, (-0.001)::numeric AS r";
    let (rows, d) = s.timed_sql("t", "postgres", q, &[]);
    let rows = rows.unwrap();
    assert!(d.unwrap() > Duration::ZERO);
    assert_eq!(rows.columns[0], "a");
    use SqlValue::*;
    assert_eq!(
        dbg(&rows.rows),
        dbg(&vec![vec![
            Int(1),
            Int(2),
            Int(3),
            Float(1.5),
            Float(2.25),
            Float(12.345),
            Boolean(true),
            Text("x".into()),
            Text("y".into()),
            Text("n".into()),
            Text("{\"a\": 1}".into()),
            Text("{\"a\": 1}".into()),
            Text("2026-01-02T03:04:05.5Z".into()),
            Null,
            Text("2026-01-02".into()),
            Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
            Text("\\x0102".into()),
            Float(-0.001),
        ]])
    );

    // Parameters bind by the placeholder's type.
    let (rows, _) = s.timed_sql(
        "t",
        "postgres",
        "SELECT $1::int4 + 1 AS a, $2::float8 * 2 AS b, $3::text || '!' AS c, NOT $4::bool AS d, $5::int8 IS NULL AS e, \
         $6::numeric + 1 AS f, extract(epoch FROM $7::timestamptz)::bigint AS g, $8::int8 AS h, cardinality($9::text[]) AS i",
        &[
            Int(41),
            Float(1.25),
            Text("hi".into()),
            Boolean(false),
            Null,
            Float(0.5),
            Text("2026-11-08T00:33:11Z".into()),
            Int(i64::MAX),
            Text("{\"a\",\"b,c\"}".into()),
        ],
    );
    assert_eq!(
        dbg(&rows.unwrap().rows[0]),
        dbg(&vec![
            Int(42),
            Float(2.5),
            Text("hi!".into()),
            Boolean(true),
            Boolean(true),
            Float(1.5),
            Int(1_794_097_991),
            Int(i64::MAX),
            Int(2)
        ])
    );
    let e = s.timed_sql("t", "postgres", "SELECT $1::int4", &[Int(1 << 40)]).0.unwrap_err();
    assert!(e.contains("out of range"), "{e}");

    // Empty answers still name their columns.
    let rows = s.timed_sql("t", "postgres", "SELECT 1 AS one, 'x' AS two WHERE false", &[]).0.unwrap();
    assert_eq!(rows.columns, ["one", "two"]);
    assert!(rows.rows.is_empty());

    // Types the host does not convert say so, and how to fix it.
    let e = s.timed_sql("t", "postgres", "SELECT interval '1 hour' AS span", &[]).0.unwrap_err();
    assert!(e.contains("column `span` has type interval") && e.contains("span::text"), "{e}");
    let rows = s.timed_sql("t", "postgres", "SELECT (interval '1 hour')::text AS span", &[]).0.unwrap();
    assert_eq!(dbg(&rows.rows[0][0]), dbg(&Text("01:00:00".into())));

    // Server errors carry the server's message.
    let e = s.timed_sql("t", "postgres", "SELECT * FROM no_such_table", &[]).0.unwrap_err();
    assert!(e.contains("relation \"no_such_table\" does not exist") && e.contains("SQLSTATE 42P01"), "{e}");

    // Only the run's own databases.
    let e = s.sql("t", "mysql", "SELECT 1", &[]).unwrap_err();
    assert!(e.contains("unknown database service `mysql`") && e.contains("`postgres`"), "{e}");

    // A broken connection is reopened once, transparently.
    let pid = match &s.timed_sql("t", "postgres", "SELECT pg_backend_pid()", &[]).0.as_ref().unwrap().rows[0][0] {
        Int(p) => *p,
        other => panic!("{other:?}"),
    };
    let mut admin = pg.client();
    admin.execute("SELECT pg_terminate_backend($1::int4)", &[&(pid as i32)]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let rows = s.timed_sql("t", "postgres", "SELECT pg_backend_pid()", &[]).0.unwrap();
    assert_ne!(dbg(&rows.rows[0][0]), dbg(&Int(pid)));

    // statement_timeout is set on the host's connections.
    let st = s.timed_sql("t", "postgres", "SHOW statement_timeout", &[]).0.unwrap();
    assert_eq!(dbg(&st.rows[0][0]), dbg(&Text("20s".into())));

    let rt = s.pg_roundtrip("postgres").unwrap();
    assert!(rt > Duration::ZERO && rt < Duration::from_secs(5), "{rt:?}");
    assert!(s.pg_roundtrip("nope").unwrap_err().to_string().contains("unknown database service"));

    let log = s.timings("t");
    assert!(log.len() >= 8, "{log:?}");
    assert!(log.iter().all(|t| t.kind == "sql" && t.service == "postgres"));
    assert!(log.iter().any(|t| !t.ok));
    assert_eq!(s.take_timings("t").len(), log.len());
    assert!(s.timings("t").is_empty());
}

/// Serve `n` connections with canned answers by path, then stop.
fn tiny_http(n: usize) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut c, _)) = l.accept() else { return };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut first = String::new();
            r.read_line(&mut first).unwrap();
            let mut token = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.strip_prefix("x-token: ") {
                    token = v.trim().to_string();
                }
            }
            let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, extra, body) = match path.as_str() {
                "/api/hello" => ("200 OK", String::new(), format!("hello {token}")),
                "/api/moved" => ("302 Found", "Location: http://127.0.0.1:1/elsewhere\r\n".to_string(), String::new()),
                _ => ("404 Not Found", String::new(), "no such thing".to_string()),
            };
            let _ = write!(
                c,
                "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (base, h)
}

#[test]
fn http_path_only_to_the_stack() {
    let (base, server) = tiny_http(3);
    let s = StackServices::new(BTreeMap::new(), [("api".to_string(), format!("{base}/api/"))].into()).unwrap();
    let req = |path: &str| HttpRequest {
        method: "GET".into(),
        service: "api".into(),
        path: path.into(),
        headers: vec![("x-token".into(), "abc".into())],
        body: vec![],
    };
    let (r, d) = s.timed_http("p", &req("/hello"));
    let r = r.unwrap();
    assert_eq!((r.status, String::from_utf8(r.body).unwrap()), (200, "hello abc".to_string()));
    assert!(d.unwrap() > Duration::ZERO);
    // Non-2xx comes back as a response; redirects are not followed.
    assert_eq!(s.http("p", req("/missing")).unwrap().status, 404);
    assert_eq!(s.http("p", req("/moved")).unwrap().status, 302);
    server.join().unwrap();
    let e = s.http("p", HttpRequest { service: "gateway".into(), ..req("/") }).unwrap_err();
    assert!(e.contains("unknown HTTP service `gateway`") && e.contains("`api`"), "{e}");
    let e = s.http("p", req("//127.0.0.1:1/x")).unwrap_err();
    assert!(e.contains("single `/`"), "{e}");
    let log = s.timings("p");
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log.iter().all(|t| t.kind == "http" && t.ok));
    assert_eq!(log[0].what, "GET /hello");
}

fn points(n: u32) -> Vec<TagInfo> {
    (0..n)
        .map(|i| TagInfo {
            index: i,
            kind: "temperature".into(),
            unit: "°C".into(),
            site: 0,
            equip: i / 10,
            label: format!("temp{}", i % 10 + 1),
            markers: vec!["point".into(), "temp".into()],
        })
        .collect()
}

fn budgets(json: &str) -> Budgets {
    Budgets::parse(json, Path::new("test-budgets.json")).unwrap()
}

const SCHEMA: &str =
    "CREATE TABLE point_history (point text NOT NULL, ts timestamptz NOT NULL, value double precision NOT NULL, \
    stored_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (point, ts)); \
    CREATE INDEX point_history_ts ON point_history (ts);";

/// The historian's schema with 20 points, a reading every 10 s over the
/// last 30 minutes, plus canaries; the admin connection that wrote them.
fn half_an_hour_of_20_points(pg: &TestPg) -> postgres::Client {
    let mut admin = pg.client();
    admin.batch_execute(SCHEMA).unwrap();
    admin
        .batch_execute(
            "INSERT INTO point_history (point, ts, value) \
             SELECT 's0/e' || (i / 10) || '/temp' || (i % 10 + 1), now() - k * interval '10 s', 20 + i + k / 100.0 \
             FROM generate_series(0, 19) i, generate_series(0, 179) k; \
             INSERT INTO point_history (point, ts, value) SELECT 'canary/lag', now() - k * interval '2 s', k FROM generate_series(0, 9) k; \
             ANALYZE point_history;",
        )
        .unwrap();
    admin
}

#[test]
fn historian_sql_probes_within_and_over_budget() {
    let pg = TestPg::start();
    let mut admin = half_an_hour_of_20_points(&pg);

    let services = Arc::new(services(&pg));
    let rt = runtime();
    let plugin = rt.load_bytes("historian-sql", builtin("historian-sql")).unwrap();
    let mut set = ProbeSet::instantiate(&rt, &plugin, services.clone()).unwrap();
    let probes = set.setup("", &points(20)).unwrap();
    let names: Vec<&str> = probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["latest-all", "hour-1000", "day-1"]);

    // Generous budgets: everything passes, five warm runs each.
    let generous = budgets(
        r#"{"probes": {"latest-all": {"budget_s": 10}, "hour-1000": {"budget_s": 10, "source": "test"}, "day-1": {"budget_s": 10}}}"#,
    );
    let res = run_probes(&mut set, &probes, &services, &generous, 5);
    assert_eq!(res.len(), 3);
    for r in &res {
        assert!(r.ok, "{r:?}");
        assert_eq!(r.error, None);
        assert_eq!(r.warm_runs_s.len(), 5, "{r:?}");
        assert!(r.cold_s.unwrap() > 0.0 && r.warm_median_s.unwrap() > 0.0 && r.warm_median_s.unwrap() < 10.0, "{r:?}");
        assert_eq!(r.budget_s, Some(10.0));
        assert!(!r.description.is_empty());
    }
    assert_eq!(res[1].budget_source.as_deref(), Some("test"));
    assert_eq!(res[0].budget_source.as_deref(), Some("provisional"));
    // Every run went through the timed SQL path, under the plugin's name.
    let log = services.take_timings("historian-sql");
    assert_eq!(log.iter().filter(|t| t.kind == "sql" && t.ok).count(), 18, "{log:?}");

    // A tiny budget: over budget, and by how much.
    let tiny = budgets(
        r#"{"probes": {"latest-all": {"budget_s": 1e-9}, "hour-1000": {"budget_s": 1e-9}, "day-1": {"budget_s": 1e-9}}}"#,
    );
    let res = run_probes(&mut set, &probes, &services, &tiny, 5);
    for r in &res {
        assert!(!r.ok, "{r:?}");
        let e = r.error.as_deref().unwrap();
        assert!(
            e.starts_with("over budget: warm median ") && e.contains(" s > 0.000 s budget (provisional) by "),
            "{e}"
        );
        assert_eq!(r.warm_runs_s.len(), 5);
    }

    // A probe without a budget is measured, reported, and not judged.
    let partial = budgets(r#"{"probes": {"latest-all": {"budget_s": 10}}}"#);
    let res = run_probes(&mut set, &probes, &services, &partial, 2);
    assert!(res.iter().all(|r| r.ok), "{res:?}");
    assert_eq!(res[0].note, None);
    assert_eq!(res[2].budget_s, None);
    assert_eq!(res[2].warm_runs_s.len(), 2);
    assert!(res[2].note.as_deref().unwrap().contains("no budget for `day-1` in test-budgets.json"), "{res:?}");

    // Answers the plugin rejects fail the probe even within budget.
    admin.batch_execute("TRUNCATE point_history").unwrap();
    let res = run_probes(&mut set, &probes, &services, &generous, 5);
    for r in &res {
        assert!(!r.ok);
        let e = r.error.as_deref().unwrap();
        assert!(
            e.starts_with("check failed on 6 of 6 runs (first: cold run): ") && e.contains("no rows while 20 points"),
            "{e}"
        );
        assert_eq!(r.warm_runs_s.len(), 5, "timings are kept when the answer is rejected");
    }

    // A probe naming a database the run does not have: an error, no timings.
    let mut other = ProbeSet::instantiate(&rt, &plugin, services.clone()).unwrap();
    let probes = other.setup(r#"{"database": "timescale"}"#, &points(20)).unwrap();
    let res = run_probes(&mut other, &probes, &services, &generous, 5);
    for r in &res {
        assert!(!r.ok);
        let e = r.error.as_deref().unwrap();
        assert!(
            e.starts_with("error on the cold run: SQL on `timescale`: unknown database service `timescale`"),
            "{e}"
        );
        assert!(e.contains("`postgres`"), "{e}");
        assert_eq!((r.cold_s, r.warm_median_s), (None, None));
    }

    // The database goes away mid-run: errors, not a hang or a panic.
    drop(admin);
    drop(pg);
    let probes = set.setup("", &points(20)).unwrap();
    let res = run_probes(&mut set, &probes, &services, &generous, 5);
    assert!(
        res.iter()
            .all(|r| !r.ok && r.error.as_deref().unwrap().starts_with("error on the cold run: SQL on `postgres`")),
        "{res:?}"
    );
}

/// Judging an hour of 1,000 points' rows grows a probe set's WebAssembly
/// memory, which never shrinks; `renew` swaps in a fresh instance, so the
/// run does not carry that memory to its end (an hour-long soak kept 38 MB
/// of it). The renewed set still sets up and judges. At the default call
/// limit (30 s): judging 300,000 rows took over the suite's 500 ms in a
/// loaded fresh-clone run, and time is not what this test is about.
#[test]
fn a_renewed_probe_set_gives_back_the_memory_a_large_answer_grew() {
    use plugin_runtime::probe_types::{ProbeResponse, SqlRows};
    let rt = crate::common::runtime_with_call_limit(plugin_runtime::Limits::default().call_timeout);
    let plugin = rt.load_bytes("historian-sql", builtin("historian-sql")).unwrap();
    let mut set = ProbeSet::instantiate(&rt, &plugin, Arc::new(plugin_runtime::NoServices)).unwrap();
    let probes = set.setup("", &points(1000)).unwrap();
    let fresh = set.memory_bytes();
    let rows: Vec<Vec<SqlValue>> = (0..300_000)
        .map(|k| {
            vec![
                SqlValue::Text(format!("s0/e{}/temp{}", k % 100, k % 10 + 1)),
                SqlValue::Int(1_700_000_000_000 + k),
                SqlValue::Float(k as f64 / 7.0),
            ]
        })
        .collect();
    let answer = ProbeResponse::Sql(SqlRows { columns: vec!["point".into(), "ts".into(), "value".into()], rows });
    let _ = set.check(&probes[1].name, &answer).unwrap();
    let grown = set.memory_bytes();
    assert!(grown > fresh + (10 << 20), "judging 300,000 rows grew the memory only from {fresh} to {grown} bytes");

    set.renew().unwrap();
    assert!(
        set.memory_bytes() <= fresh + (1 << 20),
        "a renewed probe set holds {} bytes, a fresh one {fresh}",
        set.memory_bytes()
    );
    let again = set.setup("", &points(1000)).unwrap();
    assert_eq!(again.len(), probes.len());
    let empty = ProbeResponse::Sql(SqlRows { columns: vec![], rows: vec![] });
    assert!(set.check(&again[0].name, &empty).unwrap().is_err(), "the renewed set judges: no rows is no answer");
}

/// The server's backend that ran the probes keeps what their reads made it
/// allocate for as long as its connection lives (an hour-long soak saw
/// PostgreSQL hold 80 MB more from the probes to the end): the probes close
/// their connections when they are done, the setup's reads' included, and
/// the next probes open new ones.
#[test]
fn the_probes_close_their_connections_when_done() {
    use scalebench::services::{Scoped, PROBES_ROLE};
    let pg = TestPg::start();
    let mut admin = half_an_hour_of_20_points(&pg);
    // Open backends of the services, and sessions ever opened on the database.
    let mut backends = || -> (i64, i64) {
        let r = admin
            .query_one(
                "SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'scalebench'), \
                 (SELECT sessions FROM pg_stat_database WHERE datname = current_database())",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let services = Arc::new(services(&pg));
    let rt = runtime();
    let plugin = rt.load_bytes("historian-sql", builtin("historian-sql")).unwrap();
    let mut set = ProbeSet::instantiate(&rt, &plugin, Scoped::shared(&services, PROBES_ROLE)).unwrap();
    let generous = budgets(
        r#"{"probes": {"latest-all": {"budget_s": 10}, "hour-1000": {"budget_s": 10}, "day-1": {"budget_s": 10}}}"#,
    );
    for round in 1..=2 {
        let (_, sessions) = backends();
        let probes = set.setup("", &points(20)).unwrap();
        let res = run_probes(&mut set, &probes, &services, &generous, 2);
        assert!(res.iter().all(|r| r.ok), "round {round}: {res:?}");
        // The server takes the backend away a moment after the client's goodbye.
        let closed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            backends().0 == 0
        });
        let (open, after) = backends();
        assert!(closed, "round {round}: {open} backend(s) of the probes still open after them");
        // One connection for the probes' runs (the admin's own session counts
        // when it ends, so it does not move this figure), opened anew each round.
        assert_eq!(after - sessions, 1, "round {round}: sessions opened by the probes");
    }
}
