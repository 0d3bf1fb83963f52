//! One module per subcommand.

pub mod bench;
pub mod bench_coordinator;
pub mod bench_http;
#[cfg(feature = "nats")]
pub mod bench_nats;
pub mod bench_prefill;
pub mod bench_soak;
pub mod bench_stacks;
#[cfg(feature = "docker")]
pub mod bench_workers;
pub mod compare;
pub mod deploy;
pub mod gen;
pub mod gen_bench;
pub mod gen_compression;
pub mod plan;
pub mod plugins;
pub mod plugins_check;
pub mod prefill;
pub mod report;
pub mod report_bench;
pub mod run;
#[cfg(feature = "docker")]
pub mod stack;
pub mod stack_start;
#[cfg(feature = "storage-study")]
pub mod storage;
#[cfg(feature = "nats")]
pub mod study;
pub mod table;
pub mod worker;

pub use crate::error::usage;

/// Make the TLS configuration and the NATS login the flags give this
/// process's, before anything connects; a bad file or a bad mix of flags is
/// a usage error naming it.
pub fn install_access(a: &crate::cli::SutAccess) -> anyhow::Result<()> {
    install_access_with(a, &a.tls_settings())
}

/// As [`install_access`], with these TLS settings instead of the flags'
/// (`--tls`: the local stack's throwaway CA).
pub fn install_access_with(a: &crate::cli::SutAccess, tls: &crate::tls::TlsSettings) -> anyhow::Result<()> {
    crate::tls::install(tls).map_err(|e| usage(e.to_string()))?;
    let account = crate::transport::nats_access::account_from(
        a.nats_creds.as_ref(),
        a.nats_nkey.as_ref(),
        a.nats_user.as_deref(),
        a.nats_token_file.as_ref(),
    )
    .map_err(|e| usage(e.to_string()))?;
    crate::transport::nats_access::install(account);
    Ok(())
}
