//! A target adapter against its contract, without a service: it configures
//! with its own defaults into a plan this host drives, gives an address for
//! every point, a topology, a canary, and encoded batches whose parts agree
//! (every reading carried once, every message addressed), within the
//! host's limits (with figures). With a service: `judge` refuses the answer
//! to a malformed request (see [`judge_refusal`]); the round trip (encode,
//! commit, count) is a short run, wired in `commands/plugins_check.rs`.

use std::sync::Arc;
use std::time::Instant;

use plugin_runtime::adapter_types::{EncodedBatch, Plan, StoragePlan, TransportPlan};
use plugin_runtime::types::{HttpRequest, Readings, TagInfo};
use plugin_runtime::{HostServices, NoServices, Plugin, Runtime, TargetAdapter};

use super::{mib, ms, Report};

/// The plan in words, for the report.
pub fn describe(plan: &Plan) -> String {
    let transport = match &plan.transport {
        TransportPlan::Mqtt(m) => format!("MQTT (QoS {}, retain {})", m.qos, m.retain),
        TransportPlan::NatsCore => "NATS core".into(),
        TransportPlan::NatsJetstream(j) => format!("NATS JetStream (stream {})", j.stream_name),
        TransportPlan::Http => "HTTP".into(),
    };
    let storage = match &plan.storage {
        StoragePlan::Sql(db) => format!("counted with SQL on `{db}`"),
        StoragePlan::Http(s) => format!("counted over HTTP on `{s}`"),
        StoragePlan::Jetstream(s) => format!("counted by the host in stream {s}"),
    };
    format!("{transport}, {storage}; services: {}", plan.services.join(", "))
}

/// The offline findings; returns the plan when `configure` gave one.
pub fn check(rt: &Runtime, plugin: &Plugin, params: &str, points: &[TagInfo], report: &mut Report) -> Option<Plan> {
    match run(rt, plugin, params, points, report) {
        Ok(plan) => plan,
        Err(e) => {
            report.fail(
                format!("calls: {e}"),
                "a call trapped or was refused: fix the plugin so every call of its world returns",
            );
            None
        }
    }
}

fn run(
    rt: &Runtime,
    plugin: &Plugin,
    params: &str,
    points: &[TagInfo],
    report: &mut Report,
) -> Result<Option<Plan>, plugin_runtime::PluginError> {
    let mut a = TargetAdapter::instantiate(rt, plugin, Arc::new(NoServices))?;
    report.pass(format!("loads as a target adapter named `{}`", a.info.name));
    let plan = match a.configure(params) {
        Ok(p) => p,
        Err(e) => {
            report.fail(
                format!("configure accepts its params ({params}): {e}"),
                "configure must accept the default-params info() gives",
            );
            return Ok(None);
        }
    };
    report.pass(format!("configure gives a plan: {}", describe(&plan)));
    if matches!(plan.transport, TransportPlan::Http) {
        report.expect(
            a.has_http_ingest(),
            "an HTTP adapter exports http-ingest (headers and judge)",
            crate::transport::http::NO_HTTP_INGEST,
        );
    }
    let addresses = a.addresses(points)?;
    let bad = addresses.iter().enumerate().find(|(_, addr)| !address_fits(&plan, addr));
    report.expect(
        addresses.len() == points.len() && bad.is_none(),
        format!("addresses gives one usable address per point ({} points)", points.len()),
        match bad {
            Some((i, addr)) => format!("point {i} has address {addr:?}: {}", address_rule(&plan)),
            None => format!("return exactly one address per point (got {} for {})", addresses.len(), points.len()),
        },
    );
    let topology = a.topology(points)?;
    report.pass(format!("topology gives {} message(s) for {} points", topology.len(), points.len()));
    let canary = a.canary(0, 1_786_400_000_000)?;
    report.expect(
        !canary.address.is_empty() && !canary.payload.is_empty(),
        format!("canary 0 goes to {:?} ({} bytes)", canary.address, canary.payload.len()),
        "canary(seq, ts) returns a message with an address and a payload that carries seq",
    );

    let readings = readings(points.len() as u32, 1_786_400_000_000);
    let batch = a.encode(&readings)?;
    let problem = batch_problem(&batch, readings.points.len(), addresses.len());
    report.expect(
        problem.is_none(),
        format!("encode carries each of {} readings once, in addressed messages", readings.points.len()),
        problem.unwrap_or_default(),
    );
    measure(&mut a, rt, points.len() as u32, report)?;
    Ok(Some(plan))
}

/// `n` readings, one per point 0..n, all at `ts_ms`.
fn readings(n: u32, ts_ms: i64) -> Readings {
    Readings {
        points: (0..n).collect(),
        values: (0..n).map(|i| i as f64 * 0.5).collect(),
        ts_ms: vec![ts_ms; n as usize],
    }
}

fn address_rule(plan: &Plan) -> String {
    match plan.transport {
        TransportPlan::Mqtt(_) => "an MQTT topic, not empty, with no + or # (those are for subscribing)".into(),
        TransportPlan::NatsCore | TransportPlan::NatsJetstream(_) => {
            "a NATS subject: not empty, no spaces, no * or > (those are for subscribing)".into()
        }
        TransportPlan::Http => {
            format!(
                "\"<service> <path>\", with a service the plan names ({}) and a path starting with /",
                plan.services.join(", ")
            )
        }
    }
}

fn address_fits(plan: &Plan, addr: &str) -> bool {
    match plan.transport {
        TransportPlan::Mqtt(_) => !addr.is_empty() && !addr.contains(['+', '#']),
        TransportPlan::NatsCore | TransportPlan::NatsJetstream(_) => {
            !addr.is_empty()
                && !addr.contains(char::is_whitespace)
                && !addr.split('.').any(|t| t.is_empty() || t == "*" || t == ">")
        }
        TransportPlan::Http => addr
            .split_once(' ')
            .is_some_and(|(svc, path)| plan.services.iter().any(|s| s == svc) && path.starts_with('/')),
    }
}

/// What is wrong with an encoded batch of `readings` for a table of `table` addresses.
fn batch_problem(b: &EncodedBatch, readings: usize, table: usize) -> Option<String> {
    let n = b.ends.len();
    if b.address_of.len() != n || b.carries.len() != n {
        return Some(format!(
            "address-of ({}), ends ({}) and carries ({}) must have one entry per message",
            b.address_of.len(),
            n,
            b.carries.len()
        ));
    }
    if b.ends.windows(2).any(|w| w[1] < w[0]) || b.ends.last().is_some_and(|&e| e as usize != b.payload.len()) {
        return Some(format!("ends must grow and the last must be the payload's length ({})", b.payload.len()));
    }
    if let Some(i) = b.address_of.iter().position(|&a| a as usize >= table) {
        return Some(format!("message {i} points at address {} of a table of {table}", b.address_of[i]));
    }
    let carried: u64 = b.carries.iter().map(|&c| c as u64).sum();
    if carried != readings as u64 {
        return Some(format!(
            "the messages carry {carried} readings in all, but the batch had {readings}: each reading is carried exactly once (its message's `carries` counts it)"
        ));
    }
    None
}

/// A full batch encoded, timed, beside the limits.
fn measure(
    a: &mut TargetAdapter,
    rt: &Runtime,
    points: u32,
    report: &mut Report,
) -> Result<(), plugin_runtime::PluginError> {
    let mut best = std::time::Duration::MAX;
    let mut bytes = 0;
    for i in 0..5 {
        let r = readings(points, 1_786_400_000_000 + i * 1000);
        let t0 = Instant::now();
        let b = a.encode(&r)?;
        best = best.min(t0.elapsed());
        bytes = b.payload.len();
    }
    report.figure(format!(
        "encode of {points} readings: {} ({:.0} ns and {:.0} bytes a reading); memory {} of the {} limit",
        ms(best),
        best.as_secs_f64() * 1e9 / points as f64,
        bytes as f64 / points as f64,
        mib(a.memory_bytes()),
        mib(rt.limits().memory_bytes)
    ));
    report.expect(
        best < rt.limits().call_timeout / 10,
        format!("encode stays under a tenth of the call limit ({})", ms(rt.limits().call_timeout / 10)),
        "make encode cheaper per reading: the host asks for thousands a call",
    );
    Ok(())
}

/// The body sent as a malformed message: what no ingest endpoint takes.
pub const MALFORMED: &[u8] = b"scalebench plugins check: this is not a message \x00\xff";

/// `judge` against a real refusal: the adapter's own headers and address,
/// a malformed body; an answer with a 2xx status must be judged not an ack.
pub fn judge_refusal(
    rt: &Runtime,
    plugin: &Plugin,
    params: &str,
    points: &[TagInfo],
    services: Arc<dyn HostServices>,
    report: &mut Report,
) -> Result<(), plugin_runtime::PluginError> {
    let mut a = TargetAdapter::instantiate(rt, plugin, services.clone())?;
    a.configure(params)?;
    let one = &points[..1];
    let address = a.addresses(one)?.remove(0);
    let Some((service, path)) = address.split_once(' ') else {
        report.fail(format!("judge: address {address:?} is not \"<service> <path>\""), "see addresses above");
        return Ok(());
    };
    let headers = a.http_headers(&address)?;
    let request = HttpRequest {
        method: "POST".into(),
        service: service.into(),
        path: path.into(),
        headers: headers.clone(),
        body: MALFORMED.to_vec(),
    };
    let response = match services.http(&a.info.name, request) {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                format!("judge: the malformed request to {address} got no answer: {e}"),
                "check the service is up and the address is right",
            );
            return Ok(());
        }
    };
    let body = String::from_utf8_lossy(&response.body).chars().take(120).collect::<String>();
    if !(200..300).contains(&response.status) {
        report.pass(format!(
            "judge: the server refused a malformed request itself (HTTP {}); judge is asked only about 2xx answers",
            response.status
        ));
        return Ok(());
    }
    match a.judge(&address, &response)? {
        Err(reason) => report.pass(format!("judge refuses the answer to a malformed request (HTTP {}): {reason}", response.status)),
        Ok(()) => report.fail(
            format!("judge accepted the answer to a malformed request as an acknowledgement: HTTP {}: {body}", response.status),
            "read the answer's body in judge and return Err when the server reports an error in it (a Haystack server answers an error grid with HTTP 200): otherwise readings the server refused count as acknowledged",
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(address_of: Vec<u32>, ends: Vec<u32>, payload: usize, carries: Vec<u32>) -> EncodedBatch {
        EncodedBatch { address_of, ends, payload: vec![b'x'; payload], carries }
    }

    #[test]
    fn a_batch_that_carries_a_reading_twice_or_points_past_the_table_is_named() {
        assert_eq!(batch_problem(&batch(vec![0, 1], vec![3, 6], 6, vec![1, 1]), 2, 2), None);
        let twice = batch_problem(&batch(vec![0, 1], vec![3, 6], 6, vec![2, 1]), 2, 2).unwrap();
        assert!(twice.contains("carry 3 readings in all, but the batch had 2"), "{twice}");
        let past = batch_problem(&batch(vec![0, 5], vec![3, 6], 6, vec![1, 1]), 2, 2).unwrap();
        assert!(past.contains("message 1 points at address 5 of a table of 2"), "{past}");
        let short = batch_problem(&batch(vec![0, 1], vec![3, 5], 6, vec![1, 1]), 2, 2).unwrap();
        assert!(short.contains("payload's length (6)"), "{short}");
    }
}
