//! Isolation guards: the local stack only ever binds loopback ports of its
//! own (20000-29999), never a live system's default port, and never a port
//! something else already holds.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Service, StackError};

/// Default ports of live systems (MQTT, Baler's services, PostgreSQL,
/// Jaeger/OTLP, HTTP, BACnet, NATS). The stack refuses to use any of them.
pub const LIVE_DEFAULT_PORTS: &[u16] =
    &[1883, 8883, 7878, 5432, 5433, 16686, 4318, 3033, 8080, 8888, 8011, 47808, 47900, 4222, 8222, 6222];

/// The port range kept for scalebench's own stacks.
pub const OWN_PORT_RANGE: std::ops::RangeInclusive<u16> = 20000..=29999;

pub fn is_live_default(port: u16) -> bool {
    LIVE_DEFAULT_PORTS.contains(&port)
}

/// Refuse a live default port, a port outside 2xxxx and a port that is taken.
pub fn check_port(service: Service, port: u16) -> Result<(), StackError> {
    if is_live_default(port) {
        return Err(StackError::LiveDefaultPort { service, port });
    }
    if !OWN_PORT_RANGE.contains(&port) {
        return Err(StackError::PortOutOfRange { service, port });
    }
    port_free(port).map_err(|detail| StackError::PortTaken { service, port, detail })
}

/// Check every (service, port) pair, and that no two services share a port.
pub fn check_ports(ports: &[(Service, u16)]) -> Result<(), StackError> {
    for (i, (service, port)) in ports.iter().enumerate() {
        if let Some((other, _)) = ports[..i].iter().find(|(_, p)| p == port) {
            return Err(StackError::InvalidOptions {
                problem: format!("{service} and {other} were both given port {port}"),
                hint: "give each service its own 2xxxx port".into(),
            });
        }
        check_port(*service, *port)?;
    }
    Ok(())
}

/// Is 127.0.0.1:port free? Tries to bind it (and checks nothing answers on it).
pub fn port_free(port: u16) -> Result<(), String> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    if std::net::TcpStream::connect_timeout(&addr.into(), std::time::Duration::from_millis(200)).is_ok() {
        return Err("something accepts connections on it".into());
    }
    match TcpListener::bind(addr) {
        Ok(l) => {
            drop(l);
            Ok(())
        }
        Err(e) => Err(format!("cannot bind it: {e}")),
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Pick `n` distinct free ports in 20000-29999 (for tests and `--base-port
/// auto`). Free at the time of the check only; the start-up guard checks again.
pub fn pick_free_ports(n: usize) -> Result<Vec<u16>, StackError> {
    let span = (*OWN_PORT_RANGE.end() - *OWN_PORT_RANGE.start()) as u32 + 1;
    let seed = std::process::id().wrapping_mul(7919).wrapping_add(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0),
    );
    let mut out = Vec::with_capacity(n);
    for _ in 0..2000 {
        if out.len() == n {
            break;
        }
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = *OWN_PORT_RANGE.start() + ((seed.wrapping_add(k.wrapping_mul(101))) % span) as u16;
        if is_live_default(port) || out.contains(&port) {
            continue;
        }
        if port_free(port).is_ok() {
            out.push(port);
        }
    }
    if out.len() < n {
        return Err(StackError::InvalidOptions {
            problem: format!("found only {} free ports in 20000-29999, needed {n}", out.len()),
            hint: "stop other stacks, or pass explicit ports".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_live_defaults_and_foreign_ranges() {
        for &p in LIVE_DEFAULT_PORTS {
            let e = check_port(Service::Mosquitto, p).unwrap_err();
            assert!(matches!(e, StackError::LiveDefaultPort { .. }), "{e}");
            assert!(e.to_string().contains("hint: pass --base-port"));
        }
        assert!(matches!(check_port(Service::Postgres, 30000), Err(StackError::PortOutOfRange { .. })));
    }

    #[test]
    fn refuses_taken_port() {
        let ports = pick_free_ports(1).unwrap();
        let _l = TcpListener::bind((Ipv4Addr::LOCALHOST, ports[0])).unwrap();
        let e = check_port(Service::Postgres, ports[0]).unwrap_err();
        assert!(matches!(e, StackError::PortTaken { .. }), "{e}");
    }
}
