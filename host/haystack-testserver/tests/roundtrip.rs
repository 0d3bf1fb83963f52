//! commit → hisWrite → hisRead round trips against the test server, with and
//! without SCRAM, using the haxall adapter's own grids and SCRAM client over a
//! plain HTTP/1.1 socket client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use haxall::params::Params;
use haxall::wire::{his_read_answer, his_read_request, Encoded, Tag, Wire};
use haystack_testserver::{spawn, Config};

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    Resp { status, headers, body: raw[split + 4..].to_vec() }
}

fn start(auth: Option<(&str, &str)>) -> SocketAddr {
    let cfg =
        Config { auth: auth.map(|(u, p)| (u.to_string(), p.to_string())), scram_iterations: 4096, ..Config::default() };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let (addr, h) = spawn(cfg).await.unwrap();
            tx.send(addr).unwrap();
            let _ = h.await;
        });
    });
    rx.recv().unwrap()
}

fn tags(n: u32) -> Vec<Tag> {
    (0..n)
        .map(|i| Tag {
            index: i,
            kind: "temperature".into(),
            unit: if i % 2 == 0 { "°C".into() } else { "count".into() },
            site: i / 1000,
            equip: i / 10,
            label: format!("temp-{}", i % 10),
            markers: vec!["point".into(), "sensor".into(), "temp".into()],
        })
        .collect()
}

/// The whole path: topology, readings in both hisWrite forms, the canary,
/// reads by filter, and counting through plain and batch hisRead.
fn round_trip(addr: SocketAddr, token: Option<String>, batch: u32) {
    let bearer = token.map(|t| format!("BEARER authToken={t}"));
    let mut hdrs: Vec<(&str, &str)> = vec![("Content-Type", "text/zinc; charset=utf-8")];
    if let Some(b) = &bearer {
        hdrs.push(("Authorization", b.as_str()));
    }
    let post = |path: &str, body: &[u8], accept: &str| {
        let mut h = hdrs.clone();
        h.push(("Accept", accept));
        http(addr, "POST", path, &h, body)
    };
    let mut w = Wire::new(Params { his_write_batch: batch, ..Params::default() });
    let tags = tags(40);
    w.addresses(&tags);
    for m in w.topology(&tags) {
        let (_, path) = m.address.split_once(' ').unwrap();
        let r = post(path, &m.payload, "text/zinc");
        let body = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{body}");
        assert!(haxall::zinc::error_grid(&body).is_none(), "commit failed: {body}");
    }
    // read by filter
    let r = post("/api/read", b"ver:\"3.0\"\nfilter\n\"point and his and equipRef==@sb.s0.e0\"\n", "text/zinc");
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(body.lines().count(), 2 + 10, "{body}");
    let r = post("/api/read", b"ver:\"3.0\"\nfilter\n\"equip\"\n", "application/json");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 4);

    // 3 intervals of readings for every point, spread over each second.
    let t0 = 1_714_564_800_000i64;
    let (mut pts, mut vals, mut ts) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..3i64 {
        for t in &tags {
            pts.push(t.index);
            vals.push(t.index as f64 + k as f64 / 10.0);
            ts.push(t0 + k * 1000 + t.index as i64 * 7);
        }
    }
    let mut e = Encoded::default();
    w.encode_into(&pts, &vals, &ts, &mut e).unwrap();
    let mut from = 0usize;
    for &end in &e.ends {
        let r = post("/api/hisWrite", &e.payload[from..end as usize], "text/zinc");
        let body = String::from_utf8_lossy(&r.body);
        assert!(r.status == 200 && haxall::zinc::error_grid(&body).is_none(), "hisWrite: {body}");
        from = end as usize;
    }
    let m = w.canary(7, t0 + 500);
    assert_eq!(post("/api/hisWrite", &m.payload, "text/zinc").status, 200);

    // count: batch hisRead of all points, and plain hisRead of one
    let ids = w.point_ids();
    let range = w.range(t0, t0 + 3000);
    let r = post("/api/hisRead", his_read_request(&ids, &range).as_bytes(), "application/json");
    let mut per_sec = std::collections::BTreeMap::new();
    let n = his_read_answer(&r.body, |t, _| *per_sec.entry(t / 1000).or_insert(0) += 1).unwrap();
    assert_eq!(n, 120);
    assert_eq!(per_sec.values().copied().collect::<Vec<_>>(), vec![40, 40, 40]);
    let r = post("/api/hisRead", his_read_request(&ids[3..4], &range).as_bytes(), "application/json");
    let mut got = Vec::new();
    his_read_answer(&r.body, |t, v| got.push((t, v))).unwrap();
    assert_eq!(got, vec![(t0 + 21, Some(3.0)), (t0 + 1021, Some(3.1)), (t0 + 2021, Some(3.2))]);
    // Zinc answer too
    let r = post("/api/hisRead", his_read_request(&ids[3..4], &range).as_bytes(), "text/zinc");
    let body = String::from_utf8_lossy(&r.body);
    assert!(body.starts_with("ver:\"3.0\" ") && body.contains("id:@sb.s0.e0.temp-3"), "{body}");
    // canary from its first ts onwards
    let r = post("/api/hisRead", his_read_request(&[w.canary_id()], &w.range_from(t0)).as_bytes(), "application/json");
    let mut c = Vec::new();
    his_read_answer(&r.body, |_, v| c.push(v)).unwrap();
    assert_eq!(c, vec![Some(7.0)]);
    // errors come back as error grids
    let r = post("/api/hisRead", b"ver:\"3.0\"\nid,range\n@nope,\"today\"\n", "text/zinc");
    assert_eq!(r.status, 200);
    assert!(haxall::zinc::error_grid(&String::from_utf8_lossy(&r.body)).unwrap().contains("unknown rec"));
    let r =
        post("/api/hisWrite", b"ver:\"3.0\" id:@sb.s0.e0.temp-0\nts,val\n2024-05-01T12:00:00Z UTC,1kW\n", "text/zinc");
    assert!(haxall::zinc::error_grid(&String::from_utf8_lossy(&r.body)).unwrap().contains("unit"));
}

#[test]
fn without_auth() {
    let addr = start(None);
    let r = http(addr, "GET", "/api/about", &[], b"");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("haystackVersion"));
    round_trip(addr, None, 250);
    // single-point grids only
    let addr = start(None);
    round_trip(addr, None, 1);
}

#[test]
fn with_scram() {
    let addr = start(Some(("su", "s3cret pw")));
    // refused without a token
    assert_eq!(http(addr, "GET", "/api/about", &[], b"").status, 401);
    assert_eq!(http(addr, "POST", "/api/read", &[], b"ver:\"3.0\"\nfilter\n\"point\"\n").status, 401);
    let login = |pw: &str| {
        let mut send = |auth: &str| {
            let r = http(addr, "GET", "/api/about", &[("Authorization", auth)], b"");
            Ok((r.status, r.headers))
        };
        haxall::scram::login("su", pw, "fyko+d2lbbFgONRv9qkxdawL", &mut send)
    };
    assert!(login("wrong").unwrap_err().contains("403"));
    let token = login("s3cret pw").unwrap();
    let r = http(addr, "GET", "/api/about", &[("Authorization", &format!("BEARER authToken={token}"))], b"");
    assert_eq!(r.status, 200);
    assert_eq!(http(addr, "POST", "/api/read", &[("Authorization", "BEARER authToken=forged")], b"").status, 403);
    round_trip(addr, Some(token), 250);
}

/// How long counting takes for many points: `cargo test --release -- --ignored --nocapture his_read_scale`.
/// HAYSTACK_POINTS (default 100000) points, one reading each.
#[test]
#[ignore]
fn his_read_scale() {
    let n: u32 = std::env::var("HAYSTACK_POINTS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let addr = start(None);
    let mut w = Wire::new(Params { his_write_batch: 250, ..Params::default() });
    let tags = tags(n);
    w.addresses(&tags);
    let post = |path: &str, body: &[u8], accept: &str| {
        http(addr, "POST", path, &[("Content-Type", "text/zinc"), ("Accept", accept)], body)
    };
    let t = Instant::now();
    for m in w.topology(&tags) {
        assert_eq!(post("/api/commit", &m.payload, "text/zinc").status, 200);
    }
    eprintln!("commit {n} points: {:?}", t.elapsed());
    let t0 = 1_714_564_800_000i64;
    let pts: Vec<u32> = (0..n).collect();
    let vals: Vec<f64> = pts.iter().map(|&i| i as f64).collect();
    let ts: Vec<i64> = pts.iter().map(|&i| t0 + (i as i64 * 5000) / n as i64).collect();
    let mut e = Encoded::default();
    let t = Instant::now();
    w.encode_into(&pts, &vals, &ts, &mut e).unwrap();
    eprintln!("encode {n} readings: {:?}, {} messages, {} bytes", t.elapsed(), e.ends.len(), e.payload.len());
    let t = Instant::now();
    let mut from = 0usize;
    for &end in &e.ends {
        let r = post("/api/hisWrite", &e.payload[from..end as usize], "text/zinc");
        assert_eq!(r.status, 200);
        from = end as usize;
    }
    eprintln!("hisWrite {n} readings: {:?}", t.elapsed());
    let ids = w.point_ids();
    let range = w.range(t0, t0 + 5000);
    for batch in [1usize, 100, 500, 2000] {
        if batch == 1 && n > 20_000 {
            // one request per point: time 10,000 and scale
            let t = Instant::now();
            for id in &ids[..10_000] {
                let r = post(
                    "/api/hisRead",
                    his_read_request(std::slice::from_ref(id), &range).as_bytes(),
                    "application/json",
                );
                his_read_answer(&r.body, |_, _| ()).unwrap();
            }
            eprintln!("hisRead batch=1: 10000 points in {:?} (x{} for all)", t.elapsed(), n / 10_000);
            continue;
        }
        let t = Instant::now();
        let mut total = 0;
        for chunk in ids.chunks(batch) {
            let r = post("/api/hisRead", his_read_request(chunk, &range).as_bytes(), "application/json");
            total += his_read_answer(&r.body, |_, _| ()).unwrap();
        }
        assert_eq!(total, n as usize);
        eprintln!("hisRead batch={batch}: {n} points in {:?}", t.elapsed());
    }
}
