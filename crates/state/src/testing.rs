//! Builders for pods and nodes in tests of the engine, the plugins and
//! tools: terse, and explicit about what a test sets.
//!
//! `node(..).info()` reads the node's facts as the cache does.

use crate::facts::{FactsConfig, NodeFacts};
use crate::model::{LABEL_HOSTNAME, LABEL_ZONE, Node, Taint, TaintEffect};
use crate::node_info::NodeInfo;
use crate::resources::Resources;

// Pods are the object model's builders; nodes here add their NodeInfo.
pub use gpu_scheduler_model::testing::*;

/// A node with `kubernetes.io/hostname` set, 4 cpu, 32 GiB, 110 pods.
pub fn node(name: &str) -> NodeBuilder {
    let mut n = Node { name: name.into(), ..Default::default() };
    n.labels.insert(LABEL_HOSTNAME.into(), name.into());
    n.allocatable = Resources::new(4000, 32 << 30);
    n.allocatable.allowed_pod_number = 110;
    NodeBuilder(n)
}

pub struct NodeBuilder(pub Node);

impl NodeBuilder {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn zone(self, zone: &str) -> Self {
        self.label(LABEL_ZONE, zone)
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.annotations.insert(k.into(), v.into());
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.0.taints.push(Taint { key: key.into(), value: value.into(), effect });
        self
    }
    pub fn unschedulable(mut self) -> Self {
        self.0.unschedulable = true;
        self
    }
    /// Allocatable cpu (milli) and memory (bytes).
    pub fn capacity(mut self, milli_cpu: i64, memory: i64) -> Self {
        self.0.allocatable.milli_cpu = milli_cpu;
        self.0.allocatable.memory = memory;
        self
    }
    pub fn pods(mut self, n: i64) -> Self {
        self.0.allocatable.allowed_pod_number = n;
        self
    }
    pub fn resource(mut self, name: &str, v: i64) -> Self {
        self.0.allocatable.set(name, v);
        self
    }
    pub fn build(self) -> Node {
        self.0
    }
    /// A NodeInfo of this node with its facts read as the cache reads them
    /// (default `nodeFacts`), for calling plugins on it directly.
    pub fn info(self) -> NodeInfo {
        let mut info = NodeInfo::new(self.0);
        info.facts = NodeFacts::of(&info.node, &FactsConfig::default()).0;
        info
    }

    /// [`Self::info`], then `edit` (facts provided from outside, ...).
    pub fn info_with<T>(self, edit: impl FnOnce(&mut NodeInfo) -> T) -> NodeInfo {
        let mut info = self.info();
        edit(&mut info);
        info
    }
}
