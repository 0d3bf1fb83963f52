//! Hostile adapter: an honest Haystack adapter (../hostile-base) whose
//! `headers` for the second step's new points (the `?late` address) are
//! 16 MiB: the host must refuse them as the adapter's bug, naming the plugin
//! and `headers`, not send them or blame the server.
#[path = "../../hostile-base/adapter.rs"]
mod adapter;

fn before_encode(_points: &[u32]) {}

/// 256 headers of 64 KiB each.
fn extra_headers(address: &str) -> Vec<(String, String)> {
    if !address.ends_with("?late") {
        return Vec::new();
    }
    (0..256).map(|i| (format!("X-Padding-{i}"), "x".repeat(64 << 10))).collect()
}

fn before_judge(_address: &str) {}
