//! Fuzz target: endpoint URLs given on the command line (`--service`,
//! `--mqtt-url`, `--nats-url`, `--pg-url`) as the isolation guard reads
//! them. None panics or hangs; an error is in user words; and the guard
//! never lets through a URL whose port, as a client would connect to it,
//! is a live system's default port.

use proptest::prelude::*;
use scalebench::guard::{check_endpoint, check_nats_urls, check_pg};
use scalebench::stack::{parse_mqtt_url, parse_service, url_host_port};

use crate::harness::{assert_user_words, config, corpus, mutated, within};

const DICT: &[&str] = &[
    ":",
    "/",
    "?",
    "#",
    "@",
    "[::1]",
    "8080",
    "5432",
    "4222",
    "1883",
    ",",
    "http://",
    "nats://",
    "mqtt://",
    "port=",
    "host=",
    "dbname=baler",
    " ",
    "%",
    "=",
];

fn check(s: &str) {
    let none: Vec<String> = vec![];
    let s = s.to_string();
    within("url parsers", s.clone(), move |s| {
        for r in [parse_mqtt_url(s).map(|_| ()), parse_service(&format!("api={s}")).map(|_| ())] {
            if let Err(e) = r {
                assert_user_words(&e, s);
            }
        }
        if let Ok((h, p)) = url_host_port(s) {
            if let Err(e) = check_endpoint("HTTP service", &h, p, &[]) {
                assert_user_words(&e.to_string(), s);
            }
        } else if let Err(e) = url_host_port(s) {
            assert_user_words(&e, s);
        }
        for r in [check_nats_urls(s, &none), check_pg(s, &none)] {
            if let Err(e) = r {
                assert_user_words(&e.to_string(), s);
            }
        }
    });
}

#[test]
fn corpus_urls_pass_the_guard() {
    for (name, s) in corpus("urls") {
        check(&s);
        let ok = match name.as_str() {
            "bad-query-hides-port" => !url_host_port(&s).is_ok_and(|(h, p)| check_endpoint("x", &h, p, &[]).is_ok()),
            "http" | "http-path" => url_host_port(&s).is_ok_and(|(h, p)| check_endpoint("x", &h, p, &[]).is_ok()),
            "nats" => check_nats_urls(&s, &[]).is_ok(),
            "mqtt" => parse_mqtt_url(&s).is_ok(),
            _ => check_pg(&s, &[]).is_ok(),
        };
        assert!(ok, "seed {name}: {s:?}");
    }
}

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn mutated_urls_parse_or_say_why(s in mutated(corpus("urls").into_iter().map(|(_, s)| s).collect(), DICT)) {
        check(&s);
    }

    /// The port a client connects to is the port the guard checks: a query,
    /// a fragment or a user name after `http://` does not hide a live port.
    #[test]
    fn http_guard_sees_the_port_a_client_uses(
        user in proptest::option::of("[a-z]{1,4}(:[a-z]{1,4})?@"),
        port in prop::sample::select(vec![8080u16, 8888, 5432, 1883, 28080]),
        tail in prop::sample::select(vec!["", "/", "/api", "?x=1", "#top", "/a?b#c"]),
    ) {
        let url = format!("http://{}127.0.0.1:{port}{tail}", user.unwrap_or_default());
        let (host, got) = url_host_port(&url).unwrap();
        prop_assert_eq!(got, port, "{}", url);
        prop_assert_eq!(host.as_str(), "127.0.0.1", "{}", url);
        prop_assert_eq!(check_endpoint("HTTP service", &host, got, &[]).is_ok(), port == 28080, "{}", url);
    }
}
