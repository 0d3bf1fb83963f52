//! Fuzz target: the Haystack test server's request decoding (Zinc and
//! Haystack JSON grids posted to commit, read, hisWrite and hisRead; the
//! SCRAM client-first message of a login). Any request gets an answer (an
//! error grid or an HTTP 4xx for a bad one) within seconds, and no handler
//! panics. Corpora: `fuzz/corpus/haystack-requests/` and
//! `fuzz/corpus/scram-client-first/`; `SCALEBENCH_FUZZ_CASES` sets the cases.

#[path = "../../scalebench/tests/fuzz/harness.rs"]
mod harness;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use haystack_testserver::{app, Config};
use proptest::prelude::*;
use tower::ServiceExt;

use harness::{config, corpus, mutated};

const DICT: &[&str] = &[
    "\n",
    ",",
    " ",
    "\"",
    "\\",
    "@",
    "^",
    "M",
    "N",
    "ver:\"3.0\" ",
    "id:@p1",
    "commit:\"add\"",
    "commit:\"remove\"",
    "range:",
    "ts",
    "val",
    "2024-05-01T12:00:00Z UTC",
    "T",
    "Z",
    "°C",
    "[",
    "]",
    "{",
    "}",
    "<<",
    ">>",
    "1e999",
    "-INF",
    "today",
    "\"_kind\":",
    "(",
    ")",
    " and ",
    " or ",
    "->",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Send one request; its status and body, or a failure if it takes over 5 s.
async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Vec<u8>, Option<String>) {
    let what = format!("{} {}", req.method(), req.uri());
    let resp = tokio::time::timeout(Duration::from_secs(5), router.clone().oneshot(req))
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
        .unwrap();
    let status = resp.status();
    let www = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = axum::body::to_bytes(resp.into_body(), 1 << 24).await.unwrap().to_vec();
    (status, body, www)
}

fn post(op: &str, content_type: &str, body: String) -> Request<Body> {
    Request::post(format!("/api/{op}")).header("content-type", content_type).body(Body::from(body)).unwrap()
}

/// `body` to every op as Zinc and as JSON: each answers 200 (a grid, an
/// error grid for a bad request) or 4xx, never 5xx, never a panic.
fn check_ops(rt: &tokio::runtime::Runtime, router: &Router, body: &str) {
    rt.block_on(async {
        for op in ["commit", "read", "hisWrite", "hisRead"] {
            for ct in ["text/zinc", "application/json"] {
                let (status, _, _) = send(router, post(op, ct, body.to_string())).await;
                assert!(status.as_u16() < 500, "{op} ({ct}) answered {status} to {body:?}");
            }
        }
    });
}

#[test]
fn corpus_requests_are_answered() {
    let (rt, router) = (runtime(), app(&Config::default()));
    let seeds = corpus("haystack-requests");
    // Each seed is a request its op takes (commits sort first: the points
    // exist), or, named bad-*, one that once broke the server: refused with
    // an error grid.
    for (name, body) in &seeds {
        if name.starts_with("bad-") {
            let (status, answer, _) = rt.block_on(send(&router, post("hisWrite", "text/zinc", body.clone())));
            assert!(status == StatusCode::OK && String::from_utf8_lossy(&answer).contains("err"), "seed {name}");
            continue;
        }
        let op = name.split(['.', '-']).next().unwrap();
        let ct = if name.ends_with(".json") { "application/json" } else { "text/zinc" };
        let (status, answer, _) = rt.block_on(send(&router, post(op, ct, body.clone())));
        let answer = String::from_utf8_lossy(&answer);
        assert!(status == StatusCode::OK && !answer.contains("err"), "seed {name}: {status} {answer}");
    }
    for (_, body) in &seeds {
        check_ops(&rt, &router, body);
    }
}

/// HELLO, then SCRAM with `client_first` as the client-first message.
fn check_scram(rt: &tokio::runtime::Runtime, router: &Router, client_first: &str) {
    rt.block_on(async {
        let hello = format!("HELLO username={}", URL_SAFE_NO_PAD.encode("user"));
        let req = Request::get("/api/about").header("authorization", hello).body(Body::empty()).unwrap();
        let (_, _, www) = send(router, req).await;
        let www = www.expect("HELLO answers with a handshake token");
        let token = www.split("handshakeToken=").nth(1).unwrap().split(',').next().unwrap();
        let scram = format!("SCRAM handshakeToken={token}, data={}", URL_SAFE_NO_PAD.encode(client_first));
        let req = Request::get("/api/about").header("authorization", scram).body(Body::empty()).unwrap();
        let (status, _, _) = send(router, req).await;
        assert!(status.as_u16() < 500, "SCRAM answered {status} to {client_first:?}");
    });
}

fn auth_app() -> Router {
    app(&Config { auth: Some(("user".into(), "pencil".into())), scram_iterations: 16, ..Config::default() })
}

#[test]
fn corpus_logins_are_answered() {
    let (rt, router) = (runtime(), auth_app());
    for (_, first) in corpus("scram-client-first") {
        check_scram(&rt, &router, &first);
    }
}

proptest! {
    #![proptest_config(config(8))]

    #[test]
    fn mutated_requests_are_answered(body in mutated(corpus("haystack-requests").into_iter().map(|(_, s)| s).collect(), DICT)) {
        thread_local!(static SERVER: (tokio::runtime::Runtime, Router) = (runtime(), app(&Config::default())));
        SERVER.with(|(rt, router)| check_ops(rt, router, &body));
    }

    #[test]
    fn mutated_logins_are_answered(first in mutated(corpus("scram-client-first").into_iter().map(|(_, s)| s).collect(), &[",", "n=", "r=", ",r=", "n=user", "=2C", "=3D", "é", "n,,"])) {
        thread_local!(static SERVER: (tokio::runtime::Runtime, Router) = (runtime(), auth_app()));
        SERVER.with(|(rt, router)| check_scram(rt, router, &first));
    }
}
