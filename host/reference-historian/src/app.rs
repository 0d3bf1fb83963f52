//! The historian program (its `main`, also reachable as `scalebench
//! reference-historian ...` so one binary carries the whole local stack).
//!
//! `reference-historian`: MQTT (`fbf/#`, QoS 1, persistent session, manual
//! acks) → PostgreSQL (`point_history`, `entity_tags`), batched and durable.
//!
//! Pipeline: MQTT event loop → bounded queue → (optional delay stage) →
//! writer. The writer collects up to `--batch-max` messages or
//! `--batch-wait-ms`, writes them in one transaction (binary COPY into a temp
//! staging table, `INSERT … ON CONFLICT DO NOTHING`, tags upsert, COMMIT) and
//! only then acknowledges every message of the batch. A SIGKILL therefore
//! loses nothing that was acknowledged; unacknowledged messages are
//! redelivered by the broker when the persistent session resumes, and the
//! primary key (point, ts) makes the redelivery idempotent.
//!
//! `--ack-before-commit` is a deliberately unsafe control mode: every message
//! is acknowledged as it arrives and each batch gets one write attempt, so a
//! crash of the historian (pending batches) or of PostgreSQL (batches that
//! meet it down) loses acknowledged readings. It exists to show that a
//! harness notices.
//!
//! Every (re)connect to PostgreSQL applies `--session-setting`s, then
//! records `SHOW fsync`, `synchronous_commit` and `full_page_writes` of that
//! very connection in table `ingest_session` (see [`crate::INGEST_SESSION_SQL`]).
//!
//! Flow control: acks travel to the broker through rumqttc's request channel,
//! which only the event loop drains. Its capacity is `--max-unacked`; it must
//! be at least the broker's per-client in-flight limit
//! (`max_inflight_messages`), otherwise a full request channel and a full
//! queue could wait on each other. local-stack configures both.
//!
//! (Over 700 lines on purpose: one program whose durability argument — ack
//! only after commit — reads top to bottom in one file; ~50 lines are tests.)

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{classify, Message, Reading, Stats, INGEST_SESSION_SQL, SCHEMA_SQL, SUBSCRIPTION};
use anyhow::Context as _;
use clap::Parser;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, Publish, QoS};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use tokio_postgres::Client;

macro_rules! log {
    ($level:literal, $($arg:tt)*) => {
        eprintln!("{} reference-historian {}: {}",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"), $level, format_args!($($arg)*))
    };
}

#[derive(Parser, Debug, Clone)]
#[command(version, about = "MQTT → PostgreSQL reference ingester (the default scalebench system under test)")]
struct Args {
    /// MQTT broker host.
    #[arg(long, default_value = "127.0.0.1")]
    mqtt_host: String,
    /// MQTT broker port.
    #[arg(long, default_value_t = 21883)]
    mqtt_port: u16,
    /// MQTT client id of the persistent session.
    #[arg(long, default_value = "reference-historian")]
    client_id: String,
    /// MQTT user name, for a broker with logins and ACLs (it must let this
    /// user read fbf/#). The password comes from the SCALEBENCH_MQTT_PASSWORD
    /// environment variable, never a flag.
    #[arg(long, value_name = "NAME")]
    mqtt_user: Option<String>,
    /// PostgreSQL connection string (key=value pairs or a postgresql:// URL).
    #[arg(long, default_value = "host=127.0.0.1 port=25432 user=postgres dbname=scalebench")]
    pg: String,
    /// Most messages written in one transaction.
    #[arg(long, default_value_t = 2000)]
    batch_max: usize,
    /// Longest wait (ms) for a batch to fill once its first message arrived.
    #[arg(long, default_value_t = 50)]
    batch_wait_ms: u64,
    /// Drop (acknowledge without storing) every Nth reading; never tags nor the canary. 0 = off.
    #[arg(long, default_value_t = 0)]
    drop_one_in: u64,
    /// Every reading reaches storage no earlier than this many ms after it arrived. 0 = off.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Calibration: allocate and keep this many MB every second (a leak), so
    /// that under a memory cap the historian is OOM-killed. 0 = off.
    #[arg(long, default_value_t = 0)]
    leak_mb_per_s: u64,
    /// Write this file once connected to PostgreSQL with the schema in
    /// place (a readiness signal for containers).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Capacity (messages) of the queue between the MQTT event loop and the
    /// writer; with --delay-ms it must hold delay × rate messages.
    #[arg(long, default_value_t = 100_000)]
    queue: usize,
    /// Capacity of the PUBACK channel to the broker; keep it ≥ the broker's
    /// max_inflight_messages for this client.
    #[arg(long, default_value_t = 250_000)]
    max_unacked: usize,
    /// Write counters here as JSON every second and on SIGTERM (tmp + rename).
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// UNSAFE control mode: acknowledge (PUBACK) every message as soon as it
    /// arrives, before the transaction holding it committed, and give each
    /// batch a single write attempt (a batch that fails is lost, not retried).
    /// A crash of the historian or of PostgreSQL then loses acknowledged
    /// readings: use it only to prove that a harness detects such loss.
    #[arg(long)]
    ack_before_commit: bool,
    /// `NAME=VALUE`: run `SET NAME = 'VALUE'` on the ingest connection after
    /// every connect (e.g. `synchronous_commit=off` makes the ingest path
    /// non-durable while the server stays durable). Repeatable.
    #[arg(long = "session-setting", value_name = "NAME=VALUE", value_parser = parse_session_setting)]
    session_settings: Vec<(String, String)>,
    /// Connect to the broker and to PostgreSQL over TLS, verifying their
    /// certificates against this CA (PEM). Give the PostgreSQL connection
    /// string `sslmode=require` too.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

/// `NAME=VALUE` with NAME a plain PostgreSQL parameter name (letters, digits,
/// `_`, and `.` for extension parameters).
fn parse_session_setting(s: &str) -> Result<(String, String), String> {
    let (name, value) =
        s.split_once('=').ok_or_else(|| format!("{s:?} is not NAME=VALUE (e.g. synchronous_commit=off)"))?;
    let name = name.trim();
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !ok {
        return Err(format!("{name:?} is not a PostgreSQL parameter name (letters, digits, _ and . only)"));
    }
    if value.contains('\0') {
        return Err("the value contains a NUL byte".into());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    stored: AtomicU64,
    dropped: AtomicU64,
    malformed: AtomicU64,
    duplicates: AtomicU64,
    batches: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        Stats {
            received: self.received.load(Ordering::Relaxed),
            stored: self.stored.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }
}

/// What the writer does with a message.
enum Kind {
    Reading(Reading),
    Tags {
        topic: String,
        payload: String,
    },
    /// Acknowledge only (dropped on purpose or malformed).
    AckOnly,
}

struct Item {
    publish: Publish,
    /// MQTT connection generation the message arrived on; an ack is only
    /// sent on that same connection (otherwise the broker redelivers it).
    gen: u64,
    arrived: Instant,
    kind: Kind,
    /// Already acknowledged on arrival (`--ack-before-commit`).
    acked: bool,
}

/// Parse `args` (the first item is the program name) and run until
/// terminated. Returns the process exit status.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::parse_from(args);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            log!("error", "cannot start the async runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => 0,
        Err(e) => {
            log!("error", "{e:#}");
            1
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.batch_max > 0, "--batch-max must be at least 1");
    anyhow::ensure!(args.queue > 0, "--queue must be at least 1");
    let counters = Arc::new(Counters::default());
    let gen = Arc::new(AtomicU64::new(0));
    log!(
        "info",
        "starting: mqtt {}:{} client id {:?}, batch ≤{} / {} ms, drop one in {}, delay {} ms{}{}",
        args.mqtt_host,
        args.mqtt_port,
        args.client_id,
        args.batch_max,
        args.batch_wait_ms,
        args.drop_one_in,
        args.delay_ms,
        if args.ack_before_commit { ", UNSAFE: acks before commit (--ack-before-commit)" } else { "" },
        args.session_settings.iter().map(|(k, v)| format!(", SET {k} = {v:?}")).collect::<String>()
    );

    if args.leak_mb_per_s > 0 {
        let mb = args.leak_mb_per_s as usize;
        log!("warn", "calibration: leaking {mb} MB every second (--leak-mb-per-s)");
        tokio::spawn(async move {
            let mut kept: Vec<Vec<u8>> = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                // Touched, so the pages are really resident.
                kept.push(vec![1u8; mb << 20]);
            }
        });
    }

    // Stats file and SIGTERM/SIGINT.
    if let Some(path) = args.stats_file.clone() {
        write_stats(&path, &counters.snapshot()).await;
        let c = counters.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                write_stats(&path, &c.snapshot()).await;
            }
        });
    }
    {
        let c = counters.clone();
        let path = args.stats_file.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            let s = c.snapshot();
            if let Some(p) = &path {
                write_stats(p, &s).await;
            }
            log!("info", "signal received, exiting; final {}", serde_json::to_string(&s).unwrap_or_default());
            std::process::exit(0);
        });
    }
    {
        let c = counters.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            tick.tick().await;
            loop {
                tick.tick().await;
                log!("info", "stats {}", serde_json::to_string(&c.snapshot()).unwrap_or_default());
            }
        });
    }

    let mut opts = MqttOptions::new(args.client_id.clone(), args.mqtt_host.clone(), args.mqtt_port);
    let password = std::env::var(PASSWORD_ENV).ok();
    match (&args.mqtt_user, password) {
        (Some(user), Some(password)) => {
            log!("info", "mqtt: logging in as {user:?} (password from {PASSWORD_ENV})");
            opts.set_credentials(user.clone(), password);
        }
        (Some(user), None) => {
            log!("warn", "mqtt: logging in as {user:?} without a password ({PASSWORD_ENV} is not set)");
            opts.set_credentials(user.clone(), String::new());
        }
        (None, Some(_)) => {
            log!("warn", "mqtt: {PASSWORD_ENV} is set but --mqtt-user is not: connecting without a login")
        }
        (None, None) => {}
    }
    opts.set_clean_session(false)
        .set_manual_acks(true)
        .set_keep_alive(Duration::from_secs(30))
        .set_max_packet_size(16 * 1024 * 1024, 64 * 1024);
    let tls = args.tls_ca.as_deref().map(crate::tls::client_config).transpose().map_err(anyhow::Error::msg)?;
    opts.set_transport(crate::tls::mqtt_transport(tls.as_ref()));
    let (client, eventloop) = AsyncClient::new(opts, args.max_unacked.max(args.batch_max * 2));

    let (tx, rx) = mpsc::channel::<Item>(args.queue);
    let writer_rx = if args.delay_ms > 0 {
        let (dtx, drx) = mpsc::channel::<Item>(args.batch_max * 2);
        tokio::spawn(delay_stage(rx, dtx, Duration::from_millis(args.delay_ms)));
        drx
    } else {
        rx
    };
    let writer = tokio::spawn(writer(args.clone(), writer_rx, client.clone(), counters.clone(), gen.clone()));
    let mqtt = tokio::spawn(mqtt_loop(args.clone(), eventloop, client, tx, counters, gen));

    tokio::select! {
        r = writer => r.context("writer task")?,
        r = mqtt => r.context("mqtt task")?,
    }
}

/// Holds each message until `arrived + delay`. Arrivals are in order, so only
/// the head ever waits: a fixed added delay without a throughput cost.
async fn delay_stage(mut rx: mpsc::Receiver<Item>, tx: mpsc::Sender<Item>, delay: Duration) {
    while let Some(item) = rx.recv().await {
        tokio::time::sleep_until(item.arrived + delay).await;
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

async fn mqtt_loop(
    args: Args,
    mut eventloop: rumqttc::EventLoop,
    client: AsyncClient,
    tx: mpsc::Sender<Item>,
    counters: Arc<Counters>,
    gen: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let min_backoff = Duration::from_millis(250);
    let max_backoff = Duration::from_secs(5);
    let mut backoff = min_backoff;
    let mut failures: u64 = 0;
    let mut readings_seen: u64 = 0;
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                log!(
                    "info",
                    "mqtt: connected to {}:{} (session present: {})",
                    args.mqtt_host,
                    args.mqtt_port,
                    ack.session_present
                );
                backoff = min_backoff;
                failures = 0;
                // Resubscribing on a resumed session would replay every
                // retained message; the session already holds the subscription.
                if !ack.session_present {
                    if let Err(e) = client.try_subscribe(SUBSCRIPTION, QoS::AtLeastOnce) {
                        let c = client.clone();
                        log!("warn", "mqtt: subscribe queued behind acks ({e})");
                        tokio::spawn(async move { c.subscribe(SUBSCRIPTION, QoS::AtLeastOnce).await });
                    }
                }
            }
            Ok(Event::Incoming(Packet::SubAck(s))) => {
                if s.return_codes.iter().any(|c| matches!(c, rumqttc::SubscribeReasonCode::Failure)) {
                    anyhow::bail!(
                        "mqtt: the broker refused the subscription to {SUBSCRIPTION} at QoS 1 for {}: \
                         let it read {SUBSCRIPTION} (e.g. `topic read {SUBSCRIPTION}` in the broker's ACL)",
                        who(&args)
                    );
                }
                log!("info", "mqtt: subscribed to {SUBSCRIPTION} at QoS 1");
            }
            Ok(Event::Incoming(Packet::Publish(publish))) => {
                let arrived = Instant::now();
                let kind = match classify(&publish.topic, &publish.payload) {
                    Message::Reading { reading, canary } => {
                        counters.received.fetch_add(1, Ordering::Relaxed);
                        let drop = if !canary && args.drop_one_in > 0 {
                            readings_seen += 1;
                            readings_seen.is_multiple_of(args.drop_one_in)
                        } else {
                            false
                        };
                        if drop {
                            counters.dropped.fetch_add(1, Ordering::Relaxed);
                            Kind::AckOnly
                        } else {
                            Kind::Reading(reading)
                        }
                    }
                    Message::Tags { topic, payload } => Kind::Tags { topic, payload },
                    Message::Malformed(why) => {
                        let n = counters.malformed.fetch_add(1, Ordering::Relaxed) + 1;
                        if n <= 20 || n.is_power_of_two() {
                            log!("warn", "malformed message #{n}: {why}");
                        }
                        Kind::AckOnly
                    }
                };
                // Control mode: acknowledge now, before anything is stored.
                let acked = args.ack_before_commit;
                if acked {
                    if let Err(e) = client.try_ack(&publish) {
                        let c = client.clone();
                        let p = publish.clone();
                        log!("warn", "mqtt: early ack queued ({e})");
                        tokio::spawn(async move { c.ack(&p).await });
                    }
                }
                let item = Item { publish, gen: gen.load(Ordering::SeqCst), arrived, kind, acked };
                if tx.send(item).await.is_err() {
                    anyhow::bail!("writer stopped");
                }
            }
            Ok(_) => {}
            Err(rumqttc::ConnectionError::ConnectionRefused(code)) => {
                // A refused login does not get better by retrying.
                anyhow::bail!("{}", refusal(&args, code));
            }
            Err(e) => {
                // Acks for messages of the lost connection must not reach the
                // next one: the broker redelivers those messages instead.
                gen.fetch_add(1, Ordering::SeqCst);
                failures += 1;
                if failures == 1 || failures.is_multiple_of(10) {
                    log!(
                        "warn",
                        "mqtt: broker {}:{} unreachable or connection lost ({e}); retrying every ≤{:?} (attempt {failures})",
                        args.mqtt_host, args.mqtt_port, max_backoff
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(max_backoff);
            }
        }
    }
}

/// Where the MQTT password comes from (the same variable `scalebench run` reads).
pub const PASSWORD_ENV: &str = "SCALEBENCH_MQTT_PASSWORD";

/// Who this historian is to the broker, for messages.
fn who(args: &Args) -> String {
    match &args.mqtt_user {
        Some(u) => format!("user {u:?}"),
        None => "an anonymous client (no --mqtt-user)".into(),
    }
}

/// A CONNACK refusal in the user's words, with what to do.
fn refusal(args: &Args, code: rumqttc::ConnectReturnCode) -> String {
    use rumqttc::ConnectReturnCode as C;
    let broker = format!("the broker at {}:{}", args.mqtt_host, args.mqtt_port);
    match (code, &args.mqtt_user) {
        // mosquitto answers a wrong password with "not authorised", not
        // "bad user name or password".
        (C::BadUserNamePassword | C::NotAuthorized, Some(u)) => format!(
            "mqtt: {broker} refused the login as {u:?}: wrong user name or password, or a user it does not \
             let connect; check --mqtt-user, the password in {PASSWORD_ENV} and the broker's password file"
        ),
        (C::NotAuthorized | C::BadUserNamePassword, None) => format!(
            "mqtt: {broker} refused an anonymous connection: it wants a login; \
             give --mqtt-user NAME and the password in {PASSWORD_ENV}"
        ),
        (C::BadClientId, _) => {
            format!("mqtt: {broker} refused the client id {:?}; choose another with --client-id", args.client_id)
        }
        (C::RefusedProtocolVersion, _) => {
            format!("mqtt: {broker} refused MQTT 3.1.1; the historian needs a broker that speaks it")
        }
        (C::ServiceUnavailable, _) => format!("mqtt: {broker} says it is unavailable; try again when it is up"),
        (C::Success, _) => format!("mqtt: {broker} refused the connection"),
    }
}

async fn writer(
    args: Args,
    mut rx: mpsc::Receiver<Item>,
    client: AsyncClient,
    counters: Arc<Counters>,
    gen: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let mut db = Db {
        conn: args.pg.clone(),
        client: None,
        client_id: args.client_id.clone(),
        settings: args.session_settings.clone(),
        tls: args.tls_ca.as_deref().map(crate::tls::client_config).transpose().map_err(anyhow::Error::msg)?,
    };
    db.ensure().await?;
    if let Some(path) = &args.ready_file {
        let _ = tokio::fs::write(path, b"ready\n").await;
    }
    let mut lost_batches = 0u64;
    let wait = Duration::from_millis(args.batch_wait_ms);
    let mut batch: Vec<Item> = Vec::with_capacity(args.batch_max);
    loop {
        batch.clear();
        if rx.recv_many(&mut batch, args.batch_max).await == 0 {
            anyhow::bail!("MQTT side stopped");
        }
        let deadline = Instant::now() + wait;
        while batch.len() < args.batch_max {
            let room = args.batch_max - batch.len();
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut batch, room)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }

        let outcome = if args.ack_before_commit {
            match db.write_once(&batch).await? {
                Ok(o) => o,
                Err(why) => {
                    lost_batches += 1;
                    let readings = batch.iter().filter(|i| matches!(i.kind, Kind::Reading(_))).count();
                    if lost_batches <= 20 || lost_batches.is_power_of_two() {
                        log!(
                            "warn",
                            "lost a batch of {readings} acknowledged readings ({why}); --ack-before-commit does not retry (lost batches: {lost_batches})"
                        );
                    }
                    Outcome::default()
                }
            }
        } else {
            db.write(&batch).await?
        };
        counters.stored.fetch_add(outcome.inserted, Ordering::Relaxed);
        counters.duplicates.fetch_add(outcome.duplicates, Ordering::Relaxed);
        counters.malformed.fetch_add(outcome.rejected, Ordering::Relaxed);
        counters.batches.fetch_add(outcome.transactions, Ordering::Relaxed);

        let current = gen.load(Ordering::SeqCst);
        let mut stale = 0usize;
        for item in &batch {
            if item.acked {
                continue;
            }
            if item.gen != current {
                stale += 1;
                continue;
            }
            if let Err(e) = client.ack(&item.publish).await {
                anyhow::bail!("mqtt client closed while acking: {e}");
            }
        }
        if stale > 0 {
            log!(
                "info",
                "{stale} messages arrived on an earlier connection: stored, not acked (the broker redelivers them)"
            );
        }
    }
}

#[derive(Default)]
struct Outcome {
    inserted: u64,
    duplicates: u64,
    /// Messages PostgreSQL refused as data (counted as malformed).
    rejected: u64,
    transactions: u64,
}

struct Db {
    conn: String,
    client: Option<Client>,
    /// MQTT client id: the key of this historian's `ingest_session` row.
    client_id: String,
    /// `--session-setting` pairs, applied after every connect.
    settings: Vec<(String, String)>,
    /// `--tls-ca`: PostgreSQL over TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// Why a connect did not give a usable ingest connection.
enum ConnectError {
    /// PostgreSQL refused a `--session-setting`: retrying cannot help.
    Setting(String),
    /// Unreachable, starting up, or the connection broke: retry.
    Transient(anyhow::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Setting(s) => f.write_str(s),
            ConnectError::Transient(e) => write!(f, "{e:#}"),
        }
    }
}

/// Bound on one connection attempt (TCP, startup, settings, schema).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Db {
    /// Connect (retrying with backoff until it works) and create the schema.
    /// Fails only when PostgreSQL refuses a `--session-setting`.
    async fn ensure(&mut self) -> anyhow::Result<&Client> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        let mut backoff = Duration::from_millis(250);
        let mut attempt: u64 = 0;
        while self.client.is_none() {
            attempt += 1;
            match self.connect().await {
                Ok(c) => self.client = Some(c),
                Err(ConnectError::Setting(s)) => anyhow::bail!("{s}"),
                Err(e) => {
                    if attempt == 1 || attempt.is_multiple_of(10) {
                        log!(
                            "warn",
                            "postgres: unreachable or not ready ({e}); retrying every ≤5s (attempt {attempt})"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        Ok(self.client.as_ref().expect("connected"))
    }

    async fn connect(&self) -> Result<Client, ConnectError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, self.connect_inner()).await {
            Ok(r) => r,
            Err(_) => Err(ConnectError::Transient(anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))),
        }
    }

    /// Connect, apply the session settings, create the schema and the
    /// staging table, then record what this very connection does for
    /// durability in `ingest_session`.
    async fn connect_inner(&self) -> Result<Client, ConnectError> {
        let transient = ConnectError::Transient;
        let client = crate::tls::pg_connect(&self.conn, self.tls.as_ref(), |e| {
            log!("warn", "postgres: connection ended: {}", pg_error(&e));
        })
        .await
        .with_context(|| format!("connect with {:?}", redact(&self.conn)))
        .map_err(transient)?;
        for (name, value) in &self.settings {
            let sql = format!("SET {name} = {}", quote_literal(value));
            if let Err(e) = client.batch_execute(&sql).await {
                return Err(if e.as_db_error().is_some() {
                    ConnectError::Setting(format!(
                        "--session-setting {name}={value}: PostgreSQL refused it ({}); fix or remove the setting",
                        pg_error(&e)
                    ))
                } else {
                    ConnectError::Transient(anyhow::anyhow!("{sql}: {}", pg_error(&e)))
                });
            }
        }
        let step = |what: &'static str| {
            move |e: tokio_postgres::Error| ConnectError::Transient(anyhow::anyhow!("{what}: {}", pg_error(&e)))
        };
        client.batch_execute(SCHEMA_SQL).await.map_err(step("create schema"))?;
        client.batch_execute(INGEST_SESSION_SQL).await.map_err(step("create ingest_session"))?;
        client
            .batch_execute(
                "CREATE TEMP TABLE IF NOT EXISTS staging_points \
                 (point text NOT NULL, ts timestamptz NOT NULL, value double precision NOT NULL) \
                 ON COMMIT DELETE ROWS",
            )
            .await
            .map_err(step("create staging table"))?;
        let mut shown = Vec::with_capacity(3);
        for name in ["fsync", "synchronous_commit", "full_page_writes"] {
            let row = client.query_one(&format!("SHOW {name}"), &[]).await.map_err(step("read durability settings"))?;
            shown.push(row.get::<_, String>(0));
        }
        client
            .execute(
                "INSERT INTO ingest_session (client, fsync, synchronous_commit, full_page_writes, pid, at) \
                 VALUES ($1, $2, $3, $4, pg_backend_pid(), now()) \
                 ON CONFLICT (client) DO UPDATE SET fsync = EXCLUDED.fsync, \
                 synchronous_commit = EXCLUDED.synchronous_commit, full_page_writes = EXCLUDED.full_page_writes, \
                 pid = EXCLUDED.pid, at = EXCLUDED.at",
                &[&self.client_id, &shown[0], &shown[1], &shown[2]],
            )
            .await
            .map_err(step("record ingest_session"))?;
        log!(
            "info",
            "postgres: connected, schema ready; ingest connection: fsync {}, synchronous_commit {}, full_page_writes {}",
            shown[0], shown[1], shown[2]
        );
        Ok(client)
    }

    /// `--ack-before-commit`: one attempt (connecting first if needed). The
    /// outer error is fatal (a refused session setting); the inner one means
    /// the batch was not written.
    async fn write_once(&mut self, batch: &[Item]) -> anyhow::Result<Result<Outcome, String>> {
        let refs: Vec<&Item> = batch.iter().collect();
        if refs.iter().all(|i| matches!(i.kind, Kind::AckOnly)) {
            return Ok(Ok(Outcome::default()));
        }
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            match self.connect().await {
                Ok(c) => self.client = Some(c),
                Err(ConnectError::Setting(s)) => anyhow::bail!("{s}"),
                Err(e) => return Ok(Err(format!("postgres unreachable: {e}"))),
            }
        }
        let client = self.client.as_ref().expect("connected");
        match write_tx(client, &refs).await {
            Ok((inserted, readings)) => {
                Ok(Ok(Outcome { inserted, duplicates: readings - inserted, rejected: 0, transactions: 1 }))
            }
            Err(e) if is_data_error(&e) => Ok(Ok(self.write_one_by_one(&refs).await?)),
            Err(e) => {
                self.client = None;
                Ok(Err(format!("write failed: {}", pg_error(&e))))
            }
        }
    }

    /// Write one batch; retries (reconnecting) until PostgreSQL took it. A
    /// batch refused as data is written message by message instead, so one
    /// bad message cannot block the pipeline.
    async fn write(&mut self, batch: &[Item]) -> anyhow::Result<Outcome> {
        let refs: Vec<&Item> = batch.iter().collect();
        if refs.iter().all(|i| matches!(i.kind, Kind::AckOnly)) {
            return Ok(Outcome::default());
        }
        let mut backoff = Duration::from_millis(250);
        let mut attempt = 0u64;
        loop {
            attempt += 1;
            let client = self.ensure().await?;
            match write_tx(client, &refs).await {
                Ok((inserted, readings)) => {
                    return Ok(Outcome { inserted, duplicates: readings - inserted, rejected: 0, transactions: 1 })
                }
                Err(e) if is_data_error(&e) => {
                    log!(
                        "warn",
                        "postgres refused a batch of {} as data ({}); writing its messages one by one",
                        batch.len(),
                        pg_error(&e)
                    );
                    return self.write_one_by_one(&refs).await;
                }
                Err(e) => {
                    log!(
                        "warn",
                        "postgres: batch write failed ({}); reconnecting and retrying (attempt {attempt})",
                        pg_error(&e)
                    );
                    if self.client.as_ref().is_some_and(|c| c.is_closed()) || attempt > 1 {
                        self.client = None;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn write_one_by_one(&mut self, items: &[&Item]) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        for item in items {
            if matches!(item.kind, Kind::AckOnly) {
                continue;
            }
            loop {
                let client = self.ensure().await?;
                match write_tx(client, std::slice::from_ref(item)).await {
                    Ok((inserted, readings)) => {
                        out.inserted += inserted;
                        out.duplicates += readings - inserted;
                        out.transactions += 1;
                        break;
                    }
                    Err(e) if is_data_error(&e) => {
                        log!(
                            "warn",
                            "postgres refused the message on {} ({}); counted as malformed",
                            item.publish.topic,
                            pg_error(&e)
                        );
                        out.rejected += 1;
                        break;
                    }
                    Err(e) => {
                        log!("warn", "postgres: write failed ({}); reconnecting and retrying", pg_error(&e));
                        self.client = None;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
        Ok(out)
    }
}

/// One transaction: COPY readings into the staging table, move them into
/// point_history (duplicates ignored), upsert tags, commit. Returns (rows
/// inserted, readings written).
async fn write_tx(client: &Client, items: &[&Item]) -> Result<(u64, u64), tokio_postgres::Error> {
    let readings: Vec<&Reading> = items
        .iter()
        .filter_map(|i| match &i.kind {
            Kind::Reading(r) => Some(r),
            _ => None,
        })
        .collect();
    // Last payload wins per topic (an upsert may touch a row once per statement).
    let mut tag_index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut topics: Vec<&str> = Vec::new();
    let mut payloads: Vec<&str> = Vec::new();
    for i in items {
        if let Kind::Tags { topic, payload } = &i.kind {
            match tag_index.get(topic.as_str()) {
                Some(&k) => payloads[k] = payload,
                None => {
                    tag_index.insert(topic, topics.len());
                    topics.push(topic);
                    payloads.push(payload);
                }
            }
        }
    }
    if readings.is_empty() && topics.is_empty() {
        return Ok((0, 0));
    }

    // `Client::transaction` needs `&mut`; plain BEGIN/COMMIT on the shared
    // client is equivalent since this writer is the only user.
    client.batch_execute("BEGIN").await?;
    let result = async {
        let mut inserted = 0;
        if !readings.is_empty() {
            let sink = client.copy_in("COPY staging_points (point, ts, value) FROM STDIN (FORMAT binary)").await?;
            let writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TIMESTAMPTZ, Type::FLOAT8]);
            let mut writer = std::pin::pin!(writer);
            for r in &readings {
                writer.as_mut().write(&[&r.point, &r.ts, &r.value]).await?;
            }
            writer.finish().await?;
            inserted = client
                .execute(
                    "INSERT INTO point_history (point, ts, value) \
                     SELECT point, ts, value FROM staging_points ON CONFLICT DO NOTHING",
                    &[],
                )
                .await?;
        }
        if !topics.is_empty() {
            client
                .execute(
                    "INSERT INTO entity_tags (topic, payload, updated_at) \
                     SELECT t, p::jsonb, now() FROM unnest($1::text[], $2::text[]) AS u(t, p) \
                     ON CONFLICT (topic) DO UPDATE SET payload = EXCLUDED.payload, updated_at = EXCLUDED.updated_at",
                    &[&topics, &payloads],
                )
                .await?;
        }
        client.batch_execute("COMMIT").await?;
        Ok::<u64, tokio_postgres::Error>(inserted)
    }
    .await;
    match result {
        Ok(inserted) => Ok((inserted, readings.len() as u64)),
        Err(e) => {
            if !client.is_closed() {
                let _ = client.batch_execute("ROLLBACK").await;
            }
            Err(e)
        }
    }
}

/// Errors that retrying cannot fix: PostgreSQL refused the data itself
/// (SQLSTATE class 22 data exception, 23 integrity constraint violation).
fn is_data_error(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|d| {
        let code = d.code().code();
        code.starts_with("22") || code.starts_with("23")
    })
}

/// tokio-postgres' Display says only "db error": add the server's message.
fn pg_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

/// A SQL string literal: `'…'` with quotes doubled.
fn quote_literal(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

fn redact(conn: &str) -> String {
    conn.split_whitespace()
        .map(|kv| if kv.starts_with("password=") { "password=…" } else { kv })
        .collect::<Vec<_>>()
        .join(" ")
}

async fn write_stats(path: &std::path::Path, stats: &Stats) {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let body = serde_json::to_vec(stats).expect("stats serialize");
    let r = async {
        tokio::fs::write(&tmp, &body).await?;
        tokio::fs::rename(&tmp, path).await
    }
    .await;
    if let Err(e) = r {
        log!("warn", "cannot write stats file {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_settings_parse_and_refuse_odd_names() {
        assert_eq!(
            parse_session_setting("synchronous_commit=off").unwrap(),
            ("synchronous_commit".into(), "off".into())
        );
        assert_eq!(parse_session_setting("my.ext=a=b").unwrap(), ("my.ext".into(), "a=b".into()));
        assert!(parse_session_setting("synchronous_commit").unwrap_err().contains("NAME=VALUE"));
        assert!(parse_session_setting("x; DROP TABLE point_history=1").is_err());
        assert!(parse_session_setting("=1").is_err());
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn refused_logins_say_what_to_check() {
        use rumqttc::ConnectReturnCode as C;
        let user = Args::parse_from(["h", "--mqtt-user", "hist"]);
        assert_eq!(user.mqtt_user.as_deref(), Some("hist"));
        let anon = Args::parse_from(["h"]);
        for code in [C::BadUserNamePassword, C::NotAuthorized] {
            let m = refusal(&user, code);
            assert!(m.contains("refused the login as \"hist\"") && m.contains(PASSWORD_ENV), "{m}");
            let m = refusal(&anon, code);
            assert!(m.contains("anonymous") && m.contains("--mqtt-user NAME"), "{m}");
        }
        assert!(refusal(&anon, C::BadClientId).contains("--client-id"));
    }

    #[test]
    fn control_mode_flags_parse() {
        let a = Args::parse_from([
            "h",
            "--ack-before-commit",
            "--session-setting",
            "synchronous_commit=off",
            "--session-setting",
            "work_mem=64MB",
        ]);
        assert!(a.ack_before_commit);
        assert_eq!(a.session_settings.len(), 2);
        let a = Args::parse_from(["h"]);
        assert!(!a.ack_before_commit && a.session_settings.is_empty());
    }
}
