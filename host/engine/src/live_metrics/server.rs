//! The `/metrics` endpoint: an HTTP listener serving [`LiveMetrics`] in
//! the OpenMetrics text format, on its own task until the process ends.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;

use super::LiveMetrics;

/// OpenMetrics' content type, which Prometheus asks for.
const CONTENT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Listen on `addr` (on the current tokio runtime); the bound address
/// (port 0 picks one).
///
/// Boxed at the crate's edge: see `crate::future`.
pub fn serve(
    addr: SocketAddr,
    metrics: Arc<LiveMetrics>,
) -> crate::future::BoxFuture<'static, Result<SocketAddr, crate::error::UsageError>> {
    Box::pin(serve_here(addr, metrics))
}

async fn serve_here(addr: SocketAddr, metrics: Arc<LiveMetrics>) -> Result<SocketAddr, crate::error::UsageError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        crate::error::UsageError(format!(
            "--metrics-listen: cannot listen on {addr}: {e} (choose another address or port)"
        ))
    })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move { ([(CONTENT_TYPE, CONTENT)], m.render()) }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(bound)
}
