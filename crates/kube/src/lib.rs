//! gpu-scheduler's link to a live cluster: API clients with client-side
//! rate limits ([`client`]), watches feeding the engine ([`watch`]), the
//! `pods/binding` binder ([`binder`]), Events and pod conditions
//! ([`report`]), leader election ([`leader`]), node facts from alert
//! Events ([`alerts`]) and Prometheus ([`prometheus`]), the spot
//! rebalancer ([`rebalancer`]), the `run` driver
//! ([`run`]) and `snapshot` ([`snapshot`]). The engine itself knows none of this.

pub mod alerts;
pub mod binder;
pub mod client;
pub mod explain;
pub mod leader;
pub mod metrics;
pub mod podgroup;
pub mod prometheus;
pub mod rebalancer;
pub mod reload;
pub mod report;
pub mod run;
pub mod snapshot;
pub mod watch;

pub use client::Clients;
pub use run::{RunOptions, RunSummary, run};

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Api(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Runtime(String),
}
