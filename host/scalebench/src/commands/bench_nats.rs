//! `scalebench bench nats`: scalebench's JetStream publishing against plain
//! async-nats sending the same messages to one local nats-server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plugin_runtime::{NoServices, TargetAdapter, ValueModel};

use crate::bench_record::{self, Figure};
use crate::cli::PluginOptions;
use crate::commands::bench::{bench_spec, wait_for_first_reading};
use crate::commands::gen_bench::group;
use crate::hardware;
use crate::loadgen::{self, Plugins, ProducerLive};
use crate::transport::Transport as _;

/// Plain async-nats: pre-built payloads, no pacing, to the subjects
/// scalebench publishes to (the adapter's address of every point, in the
/// schedule's order: the server's cost grows with the subjects it sees, so
/// a baseline cycling over a few would not send the same messages). JetStream with up to
/// `window` acks outstanding (the same window scalebench uses). With
/// `header`, each message also carries the one header scalebench sets (the
/// same messages as scalebench's): the gap between the two plain arms is
/// what that header costs the server, the gap to scalebench what the
/// generator and transport cost.
async fn plain_nats(
    url: &str,
    jetstream: bool,
    seconds: f64,
    subjects: &[Arc<str>],
    payload: bytes::Bytes,
    window: usize,
    header: bool,
) -> anyhow::Result<(u64, f64)> {
    use futures::StreamExt;
    let client = crate::transport::nats::connect(url).await?;
    let js = async_nats::jetstream::new(client.clone());
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(seconds);
    let (mut n, mut sent) = (0u64, 0usize);
    let mut outstanding = futures::stream::FuturesUnordered::new();
    let ts_s = crate::clock::now_ms().div_euclid(1000);
    while Instant::now() < end {
        for _ in 0..256 {
            let subject = subjects[sent % subjects.len()].to_string();
            sent += 1;
            if jetstream {
                while outstanding.len() >= window {
                    if let Some(r) = outstanding.next().await {
                        r?;
                        n += 1;
                    }
                }
                let ack = if header {
                    js.publish_with_headers(subject, crate::transport::nats::reading_header(ts_s, 1), payload.clone())
                        .await?
                } else {
                    js.publish(subject, payload.clone()).await?
                };
                outstanding
                    .push(async move { ack.await.map(|_| ()).map_err(|e| anyhow::anyhow!("JetStream ack: {e}")) });
            } else {
                if header {
                    let h = crate::transport::nats::reading_header(ts_s, 1);
                    client.publish_with_headers(subject, h, payload.clone()).await?;
                } else {
                    client.publish(subject, payload.clone()).await?;
                }
                n += 1;
            }
        }
    }
    while let Some(r) = outstanding.next().await {
        r?;
        n += 1;
    }
    client.flush().await?;
    Ok((n, t0.elapsed().as_secs_f64()))
}

/// Long on purpose: a benchmark's script: the publish modes in the order they run against one nats-server, each printed beside the bare client's figure.
pub fn run(opts: &PluginOptions, args: crate::cli::NatsBenchArgs) -> anyhow::Result<()> {
    use crate::transport::nats::{NatsConfig, NatsTransport};
    let (points, interval) = (args.points, args.interval);
    let seconds = args.seconds.max(1.0);
    let dir = tempfile::tempdir()?;
    // --tls: a second pass against a nats-server that takes only TLS.
    let pki = if args.tls {
        let pki = crate::throwaway_ca::make(dir.path())?;
        crate::tls::install(&crate::tls::TlsSettings { ca: Some(pki.ca.clone()), ..Default::default() })?;
        Some(pki)
    } else {
        None
    };

    let rt = crate::catalog::runtime(&opts.limits())?;
    let mut model = ValueModel::instantiate(&rt, &crate::catalog::load(&rt, &args.model)?)?;
    model.configure("{}")?;
    let period = model.sample_period_ms()?;
    let mut adapter =
        TargetAdapter::instantiate(&rt, &crate::catalog::load(&rt, "nats-jetstream")?, Arc::new(NoServices))?;
    let plan = adapter.configure("{}")?;
    let jp = match plan.transport {
        plugin_runtime::adapter_types::TransportPlan::NatsJetstream(jp) => jp,
        _ => anyhow::bail!("nats-jetstream adapter did not plan JetStream"),
    };
    let tags = model.tags(1, 0, points as u32)?;
    let addresses: Vec<Arc<str>> = adapter.addresses(&tags)?.into_iter().map(|a| Arc::from(a.as_str())).collect();
    let payload = {
        let r = plugin_runtime::types::Readings {
            points: vec![0],
            values: vec![21.5],
            ts_ms: vec![crate::clock::now_ms()],
        };
        bytes::Bytes::from(adapter.encode(&r)?.payload)
    };
    let mut plugins = Some(Plugins { model: Box::new(model), adapter: Box::new(adapter) });

    let tokio_rt = crate::async_runtime::two_threads()?;
    let mut figures = Vec::new();
    for tls in std::iter::once(None).chain(pki.as_ref().map(Some)) {
        let over = if tls.is_some() { " over TLS" } else { "" };
        let mut nopts =
            local_stack::nats::NatsOptions::new(dir.path().join(if tls.is_some() { "tls" } else { "plain" }), 1);
        nopts.tls = tls.map(|p| local_stack::StackTls {
            ca: p.ca.clone(),
            cert: p.server_cert.clone(),
            key: p.server_key.clone(),
        });
        let cluster = local_stack::nats::NatsCluster::start(nopts)?;
        let url = cluster.client_urls().join(",");
        tracing::info!("bench nats: one local nats-server ({url}), file storage r=1, {seconds} s per arm");
        let mut rows = Vec::new();
        // Arms alternate, `repeats` times each; medians are reported, because
        // one run on a 2-core box shared with the server varies by ~10 %.
        for jetstream in [false, true] {
            let label = if jetstream { "JetStream (file, r=1, acked)" } else { "core NATS (no acks)" };
            let label = format!("{label}{over}");
            let mut bare_rates = Vec::new();
            let mut plain_rates = Vec::new();
            let mut our_rates = Vec::new();
            for _ in 0..args.repeats.max(1) {
                let plain = |header: bool| {
                    tokio_rt.block_on(async {
                        let client = crate::transport::nats::connect(&url).await?;
                        crate::transport::nats::ensure_stream(
                            &client,
                            &jp.stream_name,
                            jp.subjects.clone(),
                            &jp.storage,
                            1,
                            0,
                        )
                        .await?;
                        let r = plain_nats(&url, jetstream, seconds, &addresses, payload.clone(), 256, header).await;
                        crate::transport::nats::delete_created_stream(&client, &jp.stream_name).await;
                        r.map(|(n, wall)| n as f64 / wall)
                    })
                };
                bare_rates.push(plain(false)?);
                let plain_rate = plain(true)?;

                let (acked, wall) = tokio_rt.block_on(async {
                    let client = crate::transport::nats::connect(&url).await?;
                    crate::transport::nats::ensure_stream(
                        &client,
                        &jp.stream_name,
                        jp.subjects.clone(),
                        &jp.storage,
                        1,
                        0,
                    )
                    .await?;
                    let cfg = NatsConfig {
                        urls: url.clone(),
                        connections: args.connections,
                        jetstream_window: if jetstream { Some(256) } else { None },
                        channel_batches: 4,
                    };
                    let transport = NatsTransport::start(&cfg).await?;
                    let senders = transport.senders();
                    let live = Arc::new(ProducerLive::default());
                    let stop = Arc::new(AtomicBool::new(false));
                    let spec = bench_spec(points, interval, seconds, period);
                    let mut p = plugins.take().unwrap();
                    let addrs = addresses.clone();
                    let (live2, stop2) = (live.clone(), stop.clone());
                    let producer = std::thread::spawn(move || {
                        let r = loadgen::produce(&mut p, &spec, &addrs, &senders, &live2, &stop2);
                        (p, r)
                    });
                    // Measure a window that starts with the first reading (the
                    // producer starts on a whole second) and lasts `seconds`, while
                    // the producer still runs.
                    wait_for_first_reading(&live).await;
                    let (t0, acked0) = (Instant::now(), transport.live().readings_acked.load(Ordering::Relaxed));
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                    let acked = transport.live().readings_acked.load(Ordering::Relaxed) - acked0;
                    let wall = t0.elapsed().as_secs_f64();
                    stop.store(true, Ordering::Relaxed);
                    while !producer.is_finished() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let (p, _) = producer.join().map_err(|_| anyhow::anyhow!("producer panicked"))?;
                    plugins = Some(p);
                    let _ = transport.finish(Duration::from_secs(5)).await;
                    crate::transport::nats::delete_created_stream(&client, &jp.stream_name).await;
                    anyhow::Ok((acked, wall))
                })?;
                plain_rates.push(plain_rate);
                our_rates.push(acked as f64 / wall);
            }
            let ratios: Vec<String> =
                plain_rates.iter().zip(&our_rates).map(|(p, o)| format!("{:.2}", o / p.max(1.0))).collect();
            tracing::info!("  {label}: per-repeat ratios {}", ratios.join(", "));
            rows.push((
                label,
                bench_record::median(bare_rates),
                bench_record::median(plain_rates),
                bench_record::median(our_rates),
            ));
        }
        println!("NATS publish rates (medians of {} alternating repeats), one local nats-server, {seconds} s per arm, nproc {}, scalebench: {} points every {:?} over {} connection(s)", args.repeats.max(1), hardware::nproc(), group(points), interval, args.connections);
        println!(
            "{:<30} {:>14} {:>18} {:>12} {:>18} {:>7}",
            "", "plain, no hdr/s", "plain, our hdr/s", "hdr cost", "scalebench paced/s", "ratio"
        );
        for (label, bare, plain, ours) in &rows {
            println!(
                "{:<30} {:>14} {:>18} {:>11.0}% {:>18} {:>7.2}",
                label,
                group(*bare as u64),
                group(*plain as u64),
                (1.0 - plain / bare.max(1.0)) * 100.0,
                group(*ours as u64),
                ours / plain.max(1.0)
            );
        }
        println!("ratio = scalebench / the plain publisher sending the same messages (scalebench's one header included); hdr cost = what that header costs the server's rate.");
        println!(
        "Goal: scalebench's JetStream rate >= 0.9 of the plain publisher's. Unique writes only: no fan-out is counted."
    );
        cluster.stop();
        for (label, bare, plain, ours) in &rows {
            figures.push(
                Figure::new(label.to_string(), *ours, "msgs/s")
                    .vs("plain async-nats, the same messages (scalebench's header included)", *plain)
                    .ratio_goal(0.9),
            );
            figures.push(
                Figure::new(format!("{label}: plain, with scalebench's header"), *plain, "msgs/s")
                    .vs("plain async-nats, no header", *bare),
            );
        }
    }
    bench_record::write(&args.record.record, "bench nats", figures)?;
    Ok(())
}
