//! Builders for pods and nodes in tests of the engine, the plugins and
//! tools: terse, and explicit about what a test sets.

use std::sync::Arc;

use crate::facts::{FactsConfig, NodeFacts};
use crate::model::{HostPort, LABEL_HOSTNAME, LABEL_ZONE, Node, Pod, Taint, TaintEffect, Toleration, TolerationOp};
use crate::node_info::NodeInfo;
use crate::resources::Resources;

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

/// A pod in namespace `default` with uid = name and no requests.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        uid: name.into(),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "gpu-scheduler".into(),
        non_zero_milli_cpu: crate::resources::DEFAULT_MILLI_CPU_REQUEST,
        non_zero_memory: crate::resources::DEFAULT_MEMORY_REQUEST,
        ..Default::default()
    })
}

pub struct PodBuilder(pub Pod);

impl PodBuilder {
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.namespace = ns.into();
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.annotations.insert(k.into(), v.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    /// Requests cpu (milli) and memory (bytes); the non-zero values follow.
    pub fn req(mut self, milli_cpu: i64, memory: i64) -> Self {
        self.0.requests.milli_cpu = milli_cpu;
        self.0.requests.memory = memory;
        let (c, m) = crate::cache::non_zero_defaults(milli_cpu, memory);
        self.0.non_zero_milli_cpu = c;
        self.0.non_zero_memory = m;
        self
    }
    /// Requests an extended resource; GPU resources (`nvidia.com/gpu`,
    /// MIG, time-sliced) set the GPU request as conversion would.
    pub fn resource(mut self, name: &str, v: i64) -> Self {
        self.0.requests.set(name, v);
        if let Ok(gpu) = crate::devices::GpuRequest::from_pod(&mut self.0.requests, &self.0.annotations) {
            self.0.gpu = gpu;
        }
        self
    }
    pub fn node(mut self, node: &str) -> Self {
        self.0.node_name = Some(node.into());
        self
    }
    pub fn host_port(mut self, port: i32, protocol: &str, host_ip: &str) -> Self {
        self.0.host_ports.push(HostPort { protocol: protocol.into(), host_ip: host_ip.into(), port });
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.0.node_selector.insert(k.into(), v.into());
        self
    }
    pub fn toleration(mut self, key: &str, op: TolerationOp, value: &str, effect: Option<TaintEffect>) -> Self {
        self.0.tolerations.push(Toleration { key: key.into(), op, value: value.into(), effect });
        self
    }
    /// Direct access for fields without a builder method.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
    pub fn arc(self) -> Arc<Pod> {
        Arc::new(self.0)
    }
}
