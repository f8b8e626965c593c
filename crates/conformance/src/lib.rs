//! The conformance suite's machinery: kube-scheduler v1.36.3 (from
//! `tools/k8s`; another supported release with `K8S_VERSION`, as
//! tools/k8s/matrix runs it) is the oracle for gpu-scheduler run with
//! `examples/kube-default-config.yaml`, kube's own default profile.
//!
//! A [`Scenario`] (generated from a seed by [`generate`], or read from a
//! named case's YAML) is created on one real control plane; its pending
//! pod is placed first by gpu-scheduler, then (that pod deleted) by
//! kube-scheduler, against the same cluster state ([`runner`]). The two
//! decisions must agree ([`compare`]): both unschedulable with the same
//! "0/N nodes are available: ..." message, or kube's node among our
//! top-scoring ones. [`report`] renders a disagreement and the run's
//! summary.

pub mod compare;
pub mod control_plane;
pub mod generate;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod suite;

pub use compare::{Decision, Verdict};
pub use generate::{generate, generate_named};
pub use scenario::Scenario;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Scenario(String),
    #[error("YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
    #[error("{0}")]
    ControlPlane(String),
    /// A scheduler decided on a view of the cluster that was not yet the
    /// scenario's (a watch event still on its way): the run says nothing
    /// about conformance and is repeated.
    #[error("stale view: {0}")]
    Stale(String),
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout { what: String, secs: u64 },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}
