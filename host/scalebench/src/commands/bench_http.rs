//! `scalebench bench http`: scalebench's HTTP publish rate beside a plain
//! hyper client, in one run, against one local Haystack test server (a
//! child process). Both arms post the same hisWrite bodies (the haxall
//! adapter's, built once) with the same concurrency: connections ×
//! requests in flight. scalebench's arm goes through the HTTP transport
//! (channels, per-second accounting, the adapter's `judge` on an instance of
//! its own); the baseline posts and reads each answer, nothing more. It
//! prints figures and asserts nothing.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::cli::{HttpBenchArgs, PluginOptions};
use crate::services::StackServices;
use crate::throwaway_ca::ThrowawayPki;
use crate::transport::http::{AdapterRules, HttpConfig, HttpTransport};
use crate::transport::Transport as _;
use crate::transport::{Carries, Message};

/// The adapter's service name for the server (its `service` param's default).
const SERVICE: &str = "api";

/// The test server as a child of this process, killed on drop.
struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test server, HTTPS-only with `tls`'s server certificate.
fn start_server(tls: Option<&ThrowawayPki>) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let ready = dir.path().join("ready");
    let port = crate::commands::stack_start::free_port(28_100)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["haystack-testserver", "--bind", "127.0.0.1", "--port", &port.to_string(), "--ready-file"]).arg(&ready);
    if let Some(p) = tls {
        cmd.arg("--tls-cert").arg(&p.server_cert).arg("--tls-key").arg(&p.server_key);
    }
    let child =
        cmd.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().context("cannot start the Haystack test server")?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut server = Server { child, url: format!("{scheme}://127.0.0.1:{port}"), _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        if let Some(status) = server.child.try_wait()? {
            bail!("the Haystack test server exited while starting ({status})");
        }
        if Instant::now() > deadline {
            bail!("the Haystack test server was not ready within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(server)
}

/// The bodies: topology (commit grids) and `messages` hisWrite grids, built
/// by the haxall adapter for `points` plant-shaped points.
struct Bodies {
    topology: Vec<(String, Bytes)>,
    writes: Vec<(Arc<str>, Bytes, u32)>,
}

/// The adapter's `topology` asks the server which records it already holds,
/// so the adapter gets the server as its `api` service, as a run's would.
fn bodies(
    opts: &PluginOptions,
    args: &HttpBenchArgs,
    points: u32,
    server_url: &str,
) -> anyhow::Result<(Bodies, plugin_runtime::TargetAdapter)> {
    let rt = crate::catalog::runtime(&opts.limits())?;
    let mut model = plugin_runtime::ValueModel::instantiate(&rt, &crate::catalog::load(&rt, "plant-shaped")?)?;
    model.configure("{}").map_err(crate::catalog::user_error)?;
    let params = format!(r#"{{"his-write-batch":{}}}"#, args.batch.max(1));
    let haxall = crate::catalog::load(&rt, "haxall")?;
    let services =
        Arc::new(StackServices::new(BTreeMap::new(), [(SERVICE.to_string(), server_url.to_string())].into())?);
    let mut adapter = plugin_runtime::TargetAdapter::instantiate(&rt, &haxall, services.clone())?;
    adapter.configure(&params).map_err(crate::catalog::user_error)?;
    let mut judge = plugin_runtime::TargetAdapter::instantiate(&rt, &haxall, services)?;
    judge.configure(&params).map_err(crate::catalog::user_error)?;
    let tags = model.tags(1, 0, points)?;
    let addresses = adapter.addresses(&tags)?;
    let topology: Vec<(String, Bytes)> =
        adapter.topology(&tags)?.into_iter().map(|m| (m.address, Bytes::from(m.payload))).collect();
    let mut writes = Vec::with_capacity(args.messages);
    let start_ms = crate::clock::now_ms() - 3_600_000;
    let mut sample = 0i64;
    while writes.len() < args.messages {
        let values = model.sample(1, 0, points, sample as u64)?;
        let ts: Vec<i64> = (0..points as i64).map(|i| start_ms + sample * 5_000 + i * 5_000 / points as i64).collect();
        let enc =
            adapter.encode(&plugin_runtime::types::Readings { points: (0..points).collect(), values, ts_ms: ts })?;
        let payload = Bytes::from(enc.payload);
        let mut begin = 0usize;
        for (i, end) in enc.ends.iter().enumerate() {
            let address: Arc<str> = Arc::from(addresses[enc.address_of[i] as usize].as_str());
            writes.push((address, payload.slice(begin..*end as usize), enc.carries[i]));
            begin = *end as usize;
        }
        sample += 1;
    }
    writes.truncate(args.messages);
    Ok((Bodies { topology, writes }, judge))
}

/// The baseline client: hyper over the connector the transport uses
/// (plain TCP for http://, rustls with the process's configuration for https://).
type Plain = Client<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, Full<Bytes>>;

fn plain_client(url: &str, idle: usize) -> Plain {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(idle)
        .build(crate::tls::https_connector(url.starts_with("https://")))
}

async fn post(client: &Plain, url: &str, body: Bytes) -> anyhow::Result<u16> {
    let req = hyper::Request::post(url).header("Content-Type", "text/zinc; charset=utf-8").body(Full::new(body))?;
    let resp = client.request(req).await?;
    let status = resp.status().as_u16();
    resp.into_body().collect().await?;
    Ok(status)
}

/// The baseline: `conns × window` tasks, each posting its share in turn.
async fn plain_arm(url: &str, writes: &[(Arc<str>, Bytes, u32)], tasks: usize) -> anyhow::Result<(f64, u64)> {
    let client = plain_client(url, tasks);
    let next = Arc::new(Mutex::new(0usize));
    let items: Arc<Vec<(String, Bytes)>> = Arc::new(
        writes
            .iter()
            .map(|(a, b, _)| (format!("{url}{}", a.split_once(' ').map(|x| x.1).unwrap_or("/")), b.clone()))
            .collect(),
    );
    let t = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (client, next, items) = (client.clone(), next.clone(), items.clone());
        handles.push(tokio::spawn(async move {
            let mut ok = 0u64;
            loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some((u, b)) = items.get(i) else { break };
                if post(&client, u, b.clone()).await.ok() == Some(200) {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut ok = 0;
    for h in handles {
        ok += h.await?;
    }
    Ok((t.elapsed().as_secs_f64(), ok))
}

/// scalebench's arm: the HTTP transport, fed as the producer feeds it.
async fn scalebench_arm(
    url: &str,
    writes: &[(Arc<str>, Bytes, u32)],
    args: &HttpBenchArgs,
    rules: Arc<dyn crate::transport::http::IngestRules>,
) -> anyhow::Result<(f64, crate::transport::AckCounts)> {
    let cfg = HttpConfig {
        bases: [(SERVICE.to_string(), url.to_string())].into(),
        connections: args.connections.max(1),
        window: args.window.max(1) as usize,
        request_timeout: Duration::from_secs(30),
        channel_batches: 4,
        rules,
    };
    let transport = HttpTransport::start(&cfg);
    let senders = transport.senders();
    let t = Instant::now();
    for (i, chunk) in writes.chunks(16).enumerate() {
        let batch = chunk
            .iter()
            .map(|(a, b, n)| Message {
                address: a.clone(),
                payload: b.clone(),
                carries: Carries::Readings { n: *n, ts_s: 0 },
                intended_ns: crate::clock::now_ns(),
            })
            .collect();
        senders[i % senders.len()].send(batch).await.map_err(|_| anyhow::anyhow!("the transport closed"))?;
    }
    drop(senders);
    let counts = transport.finish(Duration::from_secs(120)).await;
    Ok((t.elapsed().as_secs_f64(), counts))
}

pub fn run(opts: &PluginOptions, args: HttpBenchArgs) -> anyhow::Result<()> {
    // --tls: a second pass with the server HTTPS-only and both arms over TLS.
    let pki_dir = tempfile::tempdir()?;
    let pki = if args.tls {
        let pki = crate::throwaway_ca::make(pki_dir.path())?;
        let trust = crate::tls::TlsSettings { ca: Some(pki.ca.clone()), ..Default::default() };
        crate::tls::install(&trust)?;
        Some(pki)
    } else {
        None
    };
    let mut figures = measure(opts, &args, None)?;
    if let Some(p) = &pki {
        figures.extend(measure(opts, &args, Some(p))?);
    }
    crate::bench_record::write(&args.record.record, "bench http", figures)?;
    Ok(())
}

/// Both arms against one server, plain or over TLS: the figure of this pass.
fn measure(
    opts: &PluginOptions,
    args: &HttpBenchArgs,
    tls: Option<&ThrowawayPki>,
) -> anyhow::Result<Vec<crate::bench_record::Figure>> {
    let points = args.points as u32;
    let server = start_server(tls)?;
    let over = if tls.is_some() { " over TLS" } else { "" };
    let (b, judge) = bodies(opts, args, points, &server.url)?;
    let tasks = (args.connections.max(1) * args.window.max(1)) as usize;
    let bytes: usize = b.writes.iter().map(|w| w.1.len()).sum();
    let readings: u64 = b.writes.iter().map(|w| w.2 as u64).sum();
    println!(
        "bench http{over}: {} hisWrite requests of {} readings ({} bytes on average), {} points, {} connections × {} in flight, Haystack test server at {}, nproc {}",
        b.writes.len(),
        args.batch,
        bytes / b.writes.len().max(1),
        points,
        args.connections,
        args.window,
        server.url,
        crate::hardware::nproc()
    );
    let rt = crate::async_runtime::two_threads()?;
    rt.block_on(async {
        let client = plain_client(&server.url, 1);
        for (addr, body) in &b.topology {
            let path = addr.split_once(' ').map(|x| x.1).unwrap_or("/");
            let status = post(&client, &format!("{}{path}", server.url), body.clone()).await?;
            if status != 200 {
                bail!("committing the topology: HTTP {status}");
            }
        }
        // One unmeasured pass first (the server's history maps fill up: the
        // arms then replace samples, the same work for each), then the
        // arms alternate, `repeats` times each; medians are compared.
        plain_arm(&server.url, &b.writes, tasks).await?;
        let rules: Arc<dyn crate::transport::http::IngestRules> = Arc::new(AdapterRules(Arc::new(Mutex::new(judge))));
        let n = b.writes.len() as f64;
        let (mut plain, mut ours) = (Vec::new(), Vec::new());
        let (mut plain_ok, mut ours_acked, mut ours_errors) = (u64::MAX, u64::MAX, 0u64);
        // Which arm goes first turns with each repeat (plain, ours; ours,
        // plain; …): the server slows a little as its heap ages, and an
        // arm that always ran second would pay for that drift.
        for repeat in 0..args.repeats.max(1) {
            let cpu = crate::hardware::self_cpu_seconds;
            let ((p, ok, pc), (s, counts, sc)) = if repeat % 2 == 0 {
                let c0 = cpu();
                let (p, ok) = plain_arm(&server.url, &b.writes, tasks).await?;
                let c1 = cpu();
                let (s, counts) = scalebench_arm(&server.url, &b.writes, args, rules.clone()).await?;
                ((p, ok, c1 - c0), (s, counts, cpu() - c1))
            } else {
                let c0 = cpu();
                let (s, counts) = scalebench_arm(&server.url, &b.writes, args, rules.clone()).await?;
                let c1 = cpu();
                let (p, ok) = plain_arm(&server.url, &b.writes, tasks).await?;
                ((p, ok, cpu() - c1), (s, counts, c1 - c0))
            };
            tracing::info!(
                "  repeat {}: plain {:.0} requests/s ({:.0} us of this process's CPU each), scalebench {:.0} ({:.0} us)",
                repeat + 1,
                n / p,
                pc * 1e6 / n,
                n / s,
                sc * 1e6 / n
            );
            plain.push(n / p);
            ours.push(n / s);
            plain_ok = plain_ok.min(ok);
            ours_acked = ours_acked.min(counts.acked_msgs);
            ours_errors += counts.errors;
        }
        let ratios: Vec<String> = plain.iter().zip(&ours).map(|(p, o)| format!("{:.2}", o / p)).collect();
        let (p, s) = (crate::bench_record::median(plain), crate::bench_record::median(ours));
        let per_request = readings as f64 / n;
        println!("| arm | requests/s | readings/s | acked (fewest of any repeat) | errors |");
        println!("|---|---|---|---|---|");
        println!("| plain hyper{over} | {p:.0} | {:.0} | {plain_ok} of {n} | - |", p * per_request);
        println!(
            "| scalebench HTTP transport + judge{over} | {s:.0} | {:.0} | {ours_acked} of {n} | {ours_errors} |",
            s * per_request
        );
        println!("per-repeat ratios (alternating): {}", ratios.join(", "));
        println!("scalebench / plain (medians of {} alternating repeats): {:.2}", args.repeats.max(1), s / p);
        let figure = crate::bench_record::Figure::new(format!("HTTP transport + judge{over}"), s, "requests/s")
            .vs(format!("plain hyper{over}, same bodies and concurrency (median of alternating repeats)"), p)
            .ratio_goal(0.9);
        Ok(vec![figure])
    })
}
