//! Scheduler extenders (kube-scheduler's HTTP extenders) as the engine
//! sees them: a trait the caller implements. The engine calls an extender
//! after its own filters, on the nodes that passed them, and after its own
//! scores; the implementation does the I/O (see `gpu-scheduler-extender`
//! for the HTTP one), so the engine itself still does none.
//!
//! As in kube: an extender is asked only about pods using its managed
//! resources; a filter failure skips an ignorable extender and fails the
//! cycle otherwise (the pod backs off); priorities (0 to
//! [`MAX_EXTENDER_PRIORITY`]) count as score × weight × 10, recorded as a
//! score column, and their failures are skipped; a binding extender binds
//! the pods it wants (`BindingTask`, in `scheduler`). [`sources_needed`]
//! says whether drivers must keep the API objects (`Pod::source`,
//! `Node::source`), which only extenders are sent.

use thiserror::Error;

use crate::model::Pod;
use crate::node_info::NodeInfo;

/// kube's `MaxExtenderPriority`: extender scores are 0..=10 and count
/// `MAX_NODE_SCORE / 10` times their value, times the extender's weight.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// What a filter call answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtenderFilterResult {
    /// Names of the nodes that passed.
    pub passed: Vec<String>,
    /// Nodes rejected, with the extender's reason.
    pub failed: Vec<(String, String)>,
    /// Nodes rejected where preemption would not help either.
    pub failed_and_unresolvable: Vec<(String, String)>,
}

/// An extender call that did not give an answer.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("extender {extender}: {message}")]
pub struct ExtenderError {
    pub extender: String,
    pub message: String,
}

pub trait Extender: Send + Sync {
    /// How it is named in messages and metrics (kube uses the URL prefix).
    fn name(&self) -> &'static str;
    /// Whether the pod is sent at all (its `managedResources`).
    fn is_interested(&self, pod: &Pod) -> bool;
    /// A failure skips the extender instead of failing the cycle.
    fn is_ignorable(&self) -> bool;
    fn has_filter(&self) -> bool;
    fn has_prioritize(&self) -> bool;
    fn is_binder(&self) -> bool;
    fn weight(&self) -> i64;
    /// Whether whole Node objects are sent (not nodeCacheCapable): the
    /// drivers then keep each node's API object (`Node::source`).
    fn needs_node_objects(&self) -> bool;
    fn filter(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Result<ExtenderFilterResult, ExtenderError>;
    /// Scores 0..=10 by node name.
    fn prioritize(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Result<Vec<(String, i64)>, ExtenderError>;
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), ExtenderError>;
}

impl std::fmt::Debug for dyn Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender").field("name", &self.name()).finish()
    }
}

/// Which API objects the drivers must keep for `extenders`: pods whenever
/// there is an extender (it is sent the pod), nodes when one is sent
/// whole nodes.
pub fn sources_needed(extenders: &[std::sync::Arc<dyn Extender>]) -> (bool, bool) {
    (!extenders.is_empty(), extenders.iter().any(|e| e.needs_node_objects()))
}
