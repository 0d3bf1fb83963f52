//! Isolation guards: the local stack only ever binds loopback ports of its
//! own (20000-29999), never a live system's default port, and never a port
//! something else already holds.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

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

/// Ports this process has claimed, each held by a listening abstract Unix
/// socket named `scalebench-port-<port>` until the process ends.
///
/// A free port is only free when checked: between the check and the server's
/// own bind, another process picking at the same moment could find it free
/// too (a fresh-clone test run once lost a PostgreSQL start that way, eight
/// tests each picking ports). Every picker in scalebench claims before it
/// checks, so two of them never hand out the same port; the kernel drops a
/// claim when its process exits, however it exits, and leaves no file behind.
static CLAIMS: Mutex<BTreeMap<u16, std::os::unix::net::UnixListener>> = Mutex::new(BTreeMap::new());

/// Claim `port` for this process: false when another scalebench process (or
/// this one) already has. A claim is advice between scalebench's own pickers;
/// it does not bind the TCP port, so a server started later can.
pub fn claim(port: u16) -> bool {
    use std::os::linux::net::SocketAddrExt as _;
    let mut claims = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    if claims.contains_key(&port) {
        return false;
    }
    let Ok(name) = std::os::unix::net::SocketAddr::from_abstract_name(format!("scalebench-port-{port}")) else {
        return false;
    };
    match std::os::unix::net::UnixListener::bind_addr(&name) {
        Ok(l) => {
            claims.insert(port, l);
            true
        }
        Err(_) => false,
    }
}

/// Give a claim back (a picked port found taken, so others may try it later).
pub fn release(port: u16) {
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner()).remove(&port);
}

/// Claim `port` and check it is free, in that order; a port found taken is
/// released again. What every picker of a free port calls.
pub fn claim_free(port: u16) -> bool {
    if is_live_default(port) || !claim(port) {
        return false;
    }
    if port_free(port).is_ok() {
        return true;
    }
    release(port);
    false
}

/// Claim the `n` consecutive free ports from `base` on (as [`claim_free`]
/// does each): true when all are now this process's; otherwise the ones it
/// did claim are released and it is false. For a stack or worker set that
/// numbers its ports from one base.
pub fn claim_run(base: u16, n: u16) -> bool {
    let claimed: Vec<u16> = (base..base.saturating_add(n)).take_while(|p| claim_free(*p)).collect();
    if claimed.len() == usize::from(n) {
        return true;
    }
    claimed.into_iter().for_each(release);
    false
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Pick `n` distinct free ports in 20000-29999 (for tests and `--base-port
/// auto`), each claimed (see [`claim`]) so no other scalebench process picks
/// it; the start-up guard checks again.
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
        if !out.contains(&port) && claim_free(port) {
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
    fn a_run_of_ports_is_claimed_whole_or_given_back() {
        let base = (24_000u16..29_000)
            .step_by(10)
            .find(|b| {
                if !claim_run(*b, 2) {
                    return false;
                }
                if claim_run(*b + 2, 2) {
                    return true;
                }
                (*b..*b + 2).for_each(release);
                false
            })
            .expect("four free ports in 24000-29000");
        // base and base+1 free again, base+2 and base+3 still ours.
        (base..base + 2).for_each(release);
        assert!(!claim_run(base, 4), "a run overlapping this process's own claims must not be claimed");
        assert!(claim(base) && claim(base + 1), "the part of a failed run that was claimed must be given back");
        (base..base + 4).for_each(release);
    }

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

    #[test]
    fn a_port_claimed_elsewhere_is_never_picked_and_a_picked_port_is_claimed() {
        let picked = pick_free_ports(3).unwrap();
        for &p in &picked {
            assert!(!claim(p), "port {p} was handed out unclaimed");
        }
        // Another process's claim is the same abstract socket, held by it.
        let port = (20000..=29999).find(|&p| !picked.contains(&p) && port_free(p).is_ok()).unwrap();
        use std::os::linux::net::SocketAddrExt as _;
        let name = std::os::unix::net::SocketAddr::from_abstract_name(format!("scalebench-port-{port}")).unwrap();
        let elsewhere = std::os::unix::net::UnixListener::bind_addr(&name).unwrap();
        assert!(!claim_free(port), "a port another process claimed was claimed again");
        drop(elsewhere);
        assert!(claim_free(port), "the claim did not end with its holder");
        release(port);
        assert!(claim(port), "a released claim could not be made again");
    }
}
