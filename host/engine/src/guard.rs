//! Isolation guard for every stack a run drives, external ones included:
//! scalebench never drives a live install by accident. An endpoint on a live
//! system's default port, or a database with a live system's name, is
//! refused unless the user names that host with `--live-host HOST`.
//! (The local stacks get the same port rules from `local_stack::guard`.)

use local_stack::guard::LIVE_DEFAULT_PORTS;

use crate::error::Error;

/// Database names that belong to live installs, never to a scale stack.
pub const LIVE_DATABASE_NAMES: &[&str] =
    &["baler", "baler-deploy", "baler_deploy", "timberdoodle", "windrow", "haxall"];

fn acknowledged(host: &str, live_hosts: &[String]) -> bool {
    live_hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
}

/// Refuse `host:port` on a live default port unless `host` was named.
pub fn check_endpoint(what: &str, host: &str, port: u16, live_hosts: &[String]) -> Result<(), Error> {
    if LIVE_DEFAULT_PORTS.contains(&port) && !acknowledged(host, live_hosts) {
        return Err(Error::LivePort { what: what.into(), host: host.into(), port });
    }
    Ok(())
}

/// Refuse a PostgreSQL connection string that points at a live default port
/// or a live database name (host/port/dbname as `postgres` parses them).
pub fn check_pg(conn: &str, live_hosts: &[String]) -> Result<(), Error> {
    let cfg = crate::pg_connect::parse(conn)
        .map_err(|e| Error::ReadingCheck {
            detail: format!("the PostgreSQL connection string is not valid: {}", e.lines().next().unwrap_or_default()),
            hint: "give --pg-url as host=127.0.0.1 port=25432 user=postgres dbname=scalebench, or postgresql://user@host:port/db".into(),
        })?
        .config;
    let hosts: Vec<String> = cfg
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(t) => t.clone(),
            #[allow(unreachable_patterns)]
            other => format!("{other:?}"),
        })
        .collect();
    let host = hosts.first().cloned().unwrap_or_else(|| "localhost".into());
    let ports = cfg.get_ports();
    let port = ports.first().copied().unwrap_or(5432);
    check_endpoint("PostgreSQL", &host, port, live_hosts)?;
    if let Some(db) = cfg.get_dbname() {
        if LIVE_DATABASE_NAMES.contains(&db) && !acknowledged(&host, live_hosts) {
            return Err(Error::LiveName { what: "database".into(), name: db.into(), host });
        }
    }
    Ok(())
}

/// Refuse any `nats://host:port` of a comma-separated list on a live default port.
pub fn check_nats_urls(urls: &str, live_hosts: &[String]) -> Result<(), Error> {
    for u in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let rest = u.strip_prefix("nats://").unwrap_or(u);
        let rest = rest.rsplit_once('@').map(|(_, h)| h).unwrap_or(rest);
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) => (h, p.trim_end_matches('/').parse::<u16>().unwrap_or(4222)),
            None => (rest, 4222),
        };
        check_endpoint("NATS", host, port, live_hosts)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_ports_and_names_are_refused_unless_the_host_is_named() {
        let none: Vec<String> = vec![];
        let e = check_endpoint("MQTT broker", "127.0.0.1", 1883, &none).unwrap_err().to_string();
        assert!(e.contains("live system's default port") && e.contains("--live-host 127.0.0.1"), "{e}");
        assert!(check_endpoint("MQTT broker", "127.0.0.1", 21883, &none).is_ok());
        assert!(check_endpoint("MQTT broker", "10.0.0.5", 1883, &["10.0.0.5".into()]).is_ok());
        let e = check_pg("host=127.0.0.1 port=5432 user=postgres dbname=scalebench", &none).unwrap_err().to_string();
        assert!(e.contains("5432"), "{e}");
        let e = check_pg("host=127.0.0.1 port=25432 user=postgres dbname=baler", &none).unwrap_err().to_string();
        assert!(e.contains("database `baler`"), "{e}");
        assert!(check_pg("host=127.0.0.1 port=25432 user=postgres dbname=scalebench", &none).is_ok());
        assert!(check_nats_urls("nats://127.0.0.1:24222,nats://127.0.0.1:4222", &none).is_err());
        assert!(check_nats_urls("nats://127.0.0.1:24222", &none).is_ok());
    }
}
