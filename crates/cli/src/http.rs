//! The HTTP endpoints of `run`: `/healthz` (the scheduling thread is
//! going round), `/readyz` (every watch has listed once: a leader, or a
//! follower whose cache is warm) and `/metrics` (Prometheus text format);
//! with `--enable-explain-endpoint`, `/debug/explain/NS/POD` (the pod's
//! last decision as JSON, read by `gpu-scheduler explain`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use live::explain::Explanations;
use live::metrics::Metrics;

/// A scheduling thread silent for this long is stuck: it wakes every second.
const STUCK_AFTER: Duration = Duration::from_secs(30);

pub fn router(metrics: Arc<Metrics>, explanations: Option<Arc<Explanations>>) -> Router {
    let probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(metrics);
    match explanations {
        Some(e) => probes.merge(Router::new().route("/debug/explain/{namespace}/{pod}", get(explain)).with_state(e)),
        None => probes,
    }
}

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    explanations: Option<Arc<Explanations>>,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(metrics, explanations)).await {
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

async fn explain(
    State(e): State<Arc<Explanations>>,
    Path((namespace, pod)): Path<(String, String)>,
) -> impl IntoResponse {
    let key = format!("{namespace}/{pod}");
    match e.get(&key) {
        Some(json) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], json),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!(
                "no decision for {key} (not one of ours, not attempted since the scheduler started, or not this replica: ask the leader)"
            ),
        ),
    }
}
