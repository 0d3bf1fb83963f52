//! `haystack-testserver`: a Haystack HTTP server for tests (see the crate doc
//! and docs/haystack-test-server.md).

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "A small Haystack server for tests: about, read, commit, hisWrite, hisRead; SCRAM-SHA-256 or no auth. Not Haxall.")]
struct Args {
    /// Port to listen on (0: any free port; the ready file says which).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// SCRAM user; with --password-file. Without both, the server runs without auth.
    #[arg(long, requires = "password_file")]
    user: Option<String>,
    /// File holding the user's password (trailing newline ignored).
    #[arg(long, requires = "user")]
    password_file: Option<PathBuf>,
    /// PBKDF2 iterations of the stored SCRAM credentials.
    #[arg(long, default_value_t = 10_000)]
    scram_iterations: u32,
    /// Keep at most this many samples per point, dropping the oldest (0: unlimited).
    /// Haxall keeps 1,000 per point in memory unless configured.
    #[arg(long, default_value_t = 0)]
    his_cap: usize,
    /// Written once listening: "port=<port>\n".
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let auth = match (&a.user, &a.password_file) {
        (Some(u), Some(f)) => {
            let pw = std::fs::read_to_string(f).with_context(|| format!("reading --password-file {}", f.display()))?;
            let pw = pw.trim_end_matches(['\n', '\r']).to_string();
            anyhow::ensure!(!pw.is_empty(), "--password-file {} is empty", f.display());
            Some((u.clone(), pw))
        }
        _ => None,
    };
    let cfg = haystack_testserver::Config {
        bind: a.bind.clone(),
        port: a.port,
        auth,
        scram_iterations: a.scram_iterations,
        his_cap: a.his_cap,
    };
    let with_auth = cfg.auth.is_some();
    let (addr, handle) = haystack_testserver::spawn(cfg).await?;
    eprintln!("haystack-testserver listening on http://{addr}/api/ ({})", if with_auth { "SCRAM-SHA-256" } else { "no auth" });
    if let Some(p) = &a.ready_file {
        std::fs::write(p, format!("port={}\n", addr.port())).with_context(|| format!("writing --ready-file {}", p.display()))?;
    }
    tokio::select! {
        _ = handle => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
