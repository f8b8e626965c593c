//! The HTTP endpoints of `run`: `/healthz` (the scheduling thread is
//! going round), `/readyz` (every watch has listed once: a leader, or a
//! follower whose cache is warm) and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use live::metrics::Metrics;

/// A scheduling thread silent for this long is stuck: it wakes every second.
const STUCK_AFTER: Duration = Duration::from_secs(30);

pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(metrics)
}

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(metrics)).await {
            tracing::error!("HTTP server stopped: {e}");
        }
    });
    Ok(bound)
}

async fn healthz(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    if m.alive(STUCK_AFTER) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "the scheduling loop is stuck")
    }
}

async fn readyz(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    if m.ready() { (StatusCode::OK, "ok") } else { (StatusCode::SERVICE_UNAVAILABLE, "cluster state not synced yet") }
}

async fn metrics_text(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.encode())
}
