//! What the scheduler knows about one node: [`NodeInfo`] (the node and the
//! pods on it), its [`NodeSummary`] (the few numbers and flags most filters
//! and scores read), and [`NodeView`], the pair plugins are handed.
//!
//! Why a summary: a decision visits hundreds or thousands of nodes, and the
//! first touch of each NodeInfo (a separate heap allocation) is a cache miss
//! that costs more than the arithmetic done on it. Snapshots keep the
//! summaries in one contiguous array, read sequentially; a plugin reaches
//! into the NodeInfo only when the pod needs more (labels, taints, ports,
//! extended resources, pods). A summary is always derived from a NodeInfo,
//! never edited.
//!
//! A NodeInfo also keeps the node's GPUs as devices (`gpus`, a
//! `devices::NodeGpus`), changed only by `add_pod`, `remove_pod` and
//! `set_node`. [`FactCounts`] (how many nodes have each policy fact, kept
//! by the snapshot with the summaries) lets a policy plugin skip a cycle in
//! a cluster none of whose nodes has its fact.

use std::num::NonZeroU64;
use std::ops::Deref;

use crate::devices::kept::NodeTypeRef;
use crate::devices::memo::FragMemo;
use crate::devices::shapes::TypicalShapes;
use crate::devices::{DeviceSet, Fragmentation, GPU_SHARED_RESOURCE, GpuState, MIG_RESOURCE_PREFIX, NodeGpus};
use crate::facts::{Cloud, GPU_RESOURCE, NodeFacts};
use crate::model::{HostPort, Node, PodRef, TaintEffect};
use crate::resources::Resources;
use crate::time::Millis;

/// The aggregated state of one node: the node and the pods on it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Sum of the pods' effective requests.
    pub requested: Resources,
    /// Sum of requests with the non-zero defaults, for scoring.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    pub pods: Vec<PodRef>,
    pub node: Node,
    /// The node's labels and annotations as typed facts (DESIGN.md §4),
    /// read when the node was stored.
    pub facts: NodeFacts,
    /// False for a placeholder made because pods name a node not (yet) seen.
    pub has_node: bool,
    /// Pods with any (anti-)affinity, for InterPodAffinity.
    pub pods_with_affinity: Vec<PodRef>,
    /// Pods with required anti-affinity, checked against every incoming pod.
    pub pods_with_required_anti_affinity: Vec<PodRef>,
    pub used_ports: Vec<HostPort>,
    /// The node's GPUs as devices, with what each pod took of them.
    pub gpus: NodeGpus,
    /// The cache generation of this node's last change.
    pub generation: u64,
    /// The GPU fragmentation measures of this generation
    /// ([`crate::devices::memo`]).
    pub frag_memo: FragMemo,
}

impl NodeInfo {
    pub fn new(node: Node) -> Self {
        NodeInfo {
            gpus: NodeGpus::of(&node),
            node,
            facts: NodeFacts::default(),
            has_node: true,
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            requested: Resources::default(),
            non_zero_milli_cpu: 0,
            non_zero_memory: 0,
            used_ports: Vec::new(),
            generation: 0,
            frag_memo: FragMemo::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.node.name
    }

    pub fn add_pod(&mut self, pod: PodRef) {
        self.requested.add(&pod.requests);
        self.non_zero_milli_cpu += pod.non_zero_milli_cpu;
        self.non_zero_memory += pod.non_zero_memory;
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.gpus.add_pod(&pod);
        self.pods.push(pod);
    }

    /// Replaces the node (its pods stay). The GPU devices are laid out
    /// again only when their count or memory changed.
    pub fn set_node(&mut self, node: Node) {
        if self.gpus.differs_from(&node) {
            self.gpus = NodeGpus::of(&node);
            for p in &self.pods {
                self.gpus.add_pod(p);
            }
        }
        self.node = node;
    }

    /// Lays the GPU devices out again: from DRA slices (`layout`), with
    /// the whole devices allocated claims hold, or from the allocatable.
    pub fn set_dra_gpus(&mut self, layout: Option<&crate::dra::GpuLayout>, held: &[(String, DeviceSet)]) {
        self.gpus = match layout {
            Some(l) => NodeGpus::dra(l.devices.len(), l.memory_mib),
            None => NodeGpus::of(&self.node),
        };
        for p in &self.pods {
            self.gpus.add_pod(p);
        }
        for (holder, devices) in held {
            self.gpus.hold(holder, *devices);
        }
    }

    /// Swaps in a new object of a pod already here whose requests, ports,
    /// affinity and devices are unchanged (a flag changed): nothing is
    /// counted again. False when the pod is not here.
    pub fn replace_pod(&mut self, pod: PodRef) -> bool {
        let Some(slot) = self.pods.iter_mut().find(|p| p.uid == pod.uid) else { return false };
        *slot = pod.clone();
        for list in [&mut self.pods_with_affinity, &mut self.pods_with_required_anti_affinity] {
            if let Some(slot) = list.iter_mut().find(|p| p.uid == pod.uid) {
                *slot = pod.clone();
            }
        }
        true
    }

    /// Removes the pod with `uid`; returns it if it was here.
    pub fn remove_pod(&mut self, uid: &str) -> Option<PodRef> {
        let i = self.pods.iter().position(|p| p.uid == uid)?;
        let pod = self.pods.swap_remove(i);
        self.requested.sub(&pod.requests);
        self.non_zero_milli_cpu -= pod.non_zero_milli_cpu;
        self.non_zero_memory -= pod.non_zero_memory;
        for hp in &pod.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        self.pods_with_affinity.retain(|p| p.uid != uid);
        self.pods_with_required_anti_affinity.retain(|p| p.uid != uid);
        self.gpus.remove_pod(uid);
        Some(pod)
    }

    /// What is still free of `resource` after the pods already here.
    pub fn free(&self, resource: &str) -> i64 {
        self.node.allocatable.get(resource) - self.requested.get(resource)
    }

    /// This node's summary, computed now.
    pub fn summary(&self) -> NodeSummary {
        NodeSummary::of(self)
    }

    /// A view for calling plugins on this node outside a snapshot.
    pub fn view(&self) -> NodeView<'_> {
        NodeView::new(self.summary(), self)
    }
}

/// The numbers and flags of a node that the standard filters and scores
/// need for a pod without affinity, ports or extended resources. Derived
/// from a [`NodeInfo`], never edited on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeSummary {
    pub allocatable_milli_cpu: i64,
    pub allocatable_memory: i64,
    pub allocatable_ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    pub requested_milli_cpu: i64,
    pub requested_memory: i64,
    pub requested_ephemeral_storage: i64,
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    pub pod_count: u32,
    pub unschedulable: bool,
    /// Some taint with effect NoSchedule or NoExecute.
    pub has_hard_taints: bool,
    /// Some taint with effect PreferNoSchedule.
    pub has_prefer_no_schedule_taints: bool,
    /// Allocatable `nvidia.com/gpu`, MIG instances or time-sliced GPUs.
    pub has_gpus: bool,
    /// Facts every policy plugin reads for every pod (the rest stay in
    /// `NodeInfo::facts`).
    pub maintenance: bool,
    pub ssd: bool,
    pub cloud: Option<Cloud>,
    // Packed (a time of 0 is none; a temperature in f32) to keep the
    // summary small: a decision reads thousands of them.
    spot_expiry: Option<NonZeroU64>,
    last_hardware_alert: Option<NonZeroU64>,
    temperature_celsius: Option<f32>,
}

impl NodeSummary {
    pub fn of(info: &NodeInfo) -> Self {
        let alloc = &info.node.allocatable;
        let taints = &info.node.taints;
        NodeSummary {
            allocatable_milli_cpu: alloc.milli_cpu,
            allocatable_memory: alloc.memory,
            allocatable_ephemeral_storage: alloc.ephemeral_storage,
            allowed_pod_number: alloc.allowed_pod_number,
            requested_milli_cpu: info.requested.milli_cpu,
            requested_memory: info.requested.memory,
            requested_ephemeral_storage: info.requested.ephemeral_storage,
            non_zero_milli_cpu: info.non_zero_milli_cpu,
            non_zero_memory: info.non_zero_memory,
            pod_count: u32::try_from(info.pods.len()).unwrap_or(u32::MAX),
            unschedulable: info.node.unschedulable,
            has_hard_taints: taints.iter().any(|t| t.effect != TaintEffect::PreferNoSchedule),
            has_prefer_no_schedule_taints: taints.iter().any(|t| t.effect == TaintEffect::PreferNoSchedule),
            has_gpus: alloc.scalar(GPU_RESOURCE) > 0
                || (info.gpus.is_dra() && info.gpus.count() > 0)
                || alloc
                    .scalars()
                    .iter()
                    .any(|(n, v)| *v > 0 && (n.starts_with(MIG_RESOURCE_PREFIX) || &**n == GPU_SHARED_RESOURCE)),
            maintenance: info.facts.maintenance,
            ssd: info.facts.disk_type.as_deref() == Some("ssd"),
            cloud: info.facts.cloud,
            spot_expiry: info.facts.spot_expiry.and_then(NonZeroU64::new),
            last_hardware_alert: info.facts.last_hardware_alert.and_then(NonZeroU64::new),
            temperature_celsius: info.facts.temperature_celsius.map(|t| t as f32),
        }
    }

    /// When the node's spot instance expires (ms since the epoch).
    pub fn spot_expiry(&self) -> Option<Millis> {
        self.spot_expiry.map(NonZeroU64::get)
    }

    /// The node's last hardware alert (ms since the epoch).
    pub fn last_hardware_alert(&self) -> Option<Millis> {
        self.last_hardware_alert.map(NonZeroU64::get)
    }

    /// The node's temperature in °C (to f32 precision).
    pub fn temperature_celsius(&self) -> Option<f64> {
        self.temperature_celsius.map(f64::from)
    }
}

/// How many nodes of a snapshot have each fact. A policy plugin whose fact
/// no node has can skip the whole cycle (PreFilter or PreScore `Skip`)
/// instead of asking every node: clusters pay only for the facts they use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FactCounts {
    pub gpus: u32,
    pub maintenance: u32,
    pub ssd: u32,
    /// Nodes labelled with either cloud.
    pub cloud: u32,
    pub spot_expiry: u32,
    pub hardware_alert: u32,
    pub temperature: u32,
}

impl FactCounts {
    /// Counts `s` in (`delta` 1) or out (`delta` -1).
    pub fn apply(&mut self, s: &NodeSummary, delta: i32) {
        let count = |n: &mut u32, has: bool| {
            if has {
                *n = n.saturating_add_signed(delta);
            }
        };
        count(&mut self.gpus, s.has_gpus);
        count(&mut self.maintenance, s.maintenance);
        count(&mut self.ssd, s.ssd);
        count(&mut self.cloud, s.cloud.is_some());
        count(&mut self.spot_expiry, s.spot_expiry.is_some());
        count(&mut self.hardware_alert, s.last_hardware_alert.is_some());
        count(&mut self.temperature, s.temperature_celsius.is_some());
    }
}

/// A node as plugins see it: its summary (read first; in a snapshot it
/// comes from a contiguous array) and, through `Deref`, the full NodeInfo.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    summary: NodeSummary,
    info: &'a NodeInfo,
}

impl<'a> NodeView<'a> {
    pub fn new(summary: NodeSummary, info: &'a NodeInfo) -> Self {
        debug_assert_eq!(summary, NodeSummary::of(info), "stale summary of node {}", info.name());
        NodeView { summary, info }
    }

    pub fn summary(&self) -> &NodeSummary {
        &self.summary
    }

    pub fn info(&self) -> &'a NodeInfo {
        self.info
    }
}

impl Deref for NodeView<'_> {
    type Target = NodeInfo;

    fn deref(&self) -> &NodeInfo {
        self.info
    }
}

impl NodeInfo {
    /// The node's type, for the types kept for constrained shapes.
    pub fn gpu_type(&self) -> NodeTypeRef<'_> {
        NodeTypeRef {
            model: self.facts.gpu_model.as_ref(),
            gpus: self.gpus.count(),
            milli_cpu: self.node.allocatable.milli_cpu,
        }
    }

    /// This node's GPUs for the fragmentation measure.
    pub fn gpu_state(&self) -> GpuState<'_> {
        GpuState {
            free_milli: self.gpus.free_milli(),
            free_memory: self.gpus.free_memory(),
            memory_mib: self.gpus.memory_mib(),
            milli_cpu_left: self.node.allocatable.milli_cpu - self.requested.milli_cpu,
            model: self.facts.gpu_model.as_deref(),
            // Generation 0: a NodeInfo outside a cache, changed in place.
            memo: (self.generation != 0).then_some((&self.frag_memo, self.generation)),
        }
    }
}

/// The fragmentation of all `nodes` together.
pub fn cluster_fragmentation<'a>(
    nodes: impl IntoIterator<Item = &'a NodeInfo>,
    shapes: &TypicalShapes,
) -> Fragmentation {
    let mut f = Fragmentation::default();
    for n in nodes {
        if !n.has_node {
            continue;
        }
        let s = n.gpu_state();
        f.free_milli += s.free_total();
        f.fragmented_milli += shapes.fragmentation(&s);
    }
    f
}

/// The cluster's load (read by `policySwitch` rules), summed over the snapshot's nodes and kept up to
/// date as nodes change (no pass over the nodes per cycle).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub gpu_capacity_milli: i64,
    pub gpu_allocated_milli: i64,
    pub cpu_allocatable_milli: i64,
    pub cpu_requested_milli: i64,
}

impl Load {
    /// Counts `info` in (`delta` 1) or out (`delta` -1). Sums over the
    /// cluster saturate rather than wrap (a node holds at most
    /// `resources::MAX_AMOUNT` cpu: thousands of such nodes reach the bound).
    pub fn apply(&mut self, info: &NodeInfo, delta: i64) {
        let gpus = &info.gpus;
        let capacity = gpus.count() as i64 * i64::from(gpu_scheduler_model::gpu::MILLI_PER_GPU);
        let allocated = capacity.saturating_sub(gpus.free_total()).clamp(0, capacity);
        let requested = info.requested.milli_cpu.min(info.node.allocatable.milli_cpu);
        for (sum, v) in [
            (&mut self.gpu_capacity_milli, capacity),
            (&mut self.gpu_allocated_milli, allocated),
            (&mut self.cpu_allocatable_milli, info.node.allocatable.milli_cpu),
            (&mut self.cpu_requested_milli, requested),
        ] {
            *sum = sum.saturating_add(v.saturating_mul(delta));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Taint;
    use crate::testing::{node, pod};

    /// Decisions stream through thousands of summaries: one that grows
    /// past two cache lines costs every decision (docs/BENCHMARKS.md).
    #[test]
    fn summary_stays_small() {
        assert!(std::mem::size_of::<NodeSummary>() <= 112, "{} bytes", std::mem::size_of::<NodeSummary>());
    }

    #[test]
    fn summary_follows_the_node_and_its_pods() {
        let taint = |effect| Taint { key: "k".into(), value: String::new(), effect };
        let mut n = node("n").capacity(4000, 8 << 30).pods(110).build();
        n.taints = vec![taint(TaintEffect::PreferNoSchedule)];
        let mut info = NodeInfo::new(n);
        info.add_pod(pod("a").node("n").req(1000, 1 << 30).arc());
        info.add_pod(pod("b").node("n").arc());
        let s = info.summary();
        assert_eq!(
            (s.allocatable_milli_cpu, s.allocatable_memory, s.allowed_pod_number),
            (4000, 8 << 30, 110),
            "allocatable"
        );
        assert_eq!((s.requested_milli_cpu, s.requested_memory, s.pod_count), (1000, 1 << 30, 2), "requested");
        // Pod "b" requests nothing: it counts 100m and 200 MiB when scoring.
        assert_eq!((s.non_zero_milli_cpu, s.non_zero_memory), (1100, (1 << 30) + (200 << 20)), "non-zero");
        assert_eq!((s.has_hard_taints, s.has_prefer_no_schedule_taints, s.unschedulable), (false, true, false));

        info.node.taints.push(taint(TaintEffect::NoExecute));
        info.node.unschedulable = true;
        info.remove_pod(&info.pods[0].uid.clone());
        let s = info.summary();
        assert_eq!((s.has_hard_taints, s.unschedulable, s.pod_count), (true, true, 1));
        assert_eq!(s, NodeSummary::of(&info.clone()), "pure function of the NodeInfo");
    }

    #[test]
    fn devices_follow_pods_and_the_node() {
        use crate::devices::{DeviceSet, GpuRequest};
        let gpu_pod = |uid: &str, gpu: GpuRequest, d: Option<&str>| {
            pod(uid).node("n").with(|p| (p.gpu, p.gpu_devices) = (gpu, d.and_then(|d| DeviceSet::parse(d).ok()))).arc()
        };
        let mut info = node("n").resource(GPU_RESOURCE, 2).info();
        info.add_pod(gpu_pod("a", GpuRequest::whole(1), Some("1")));
        info.add_pod(gpu_pod("b", GpuRequest::share(300, 0), None));
        assert_eq!(info.gpus.free_milli(), [700, 0]);
        // The node grows to four GPUs: devices are laid out again, pods keep theirs.
        info.set_node(node("n").resource(GPU_RESOURCE, 4).build());
        assert_eq!(info.gpus.free_milli(), [700, 0, 1000, 1000]);
        // An unrelated change of the node leaves the devices as they are.
        let before = info.gpus.clone();
        info.set_node(node("n").resource(GPU_RESOURCE, 4).label("x", "y").build());
        assert_eq!(info.gpus, before);
        // A clone with a pod removed is exact; the original is untouched.
        let mut clone = info.clone();
        clone.remove_pod("a");
        assert_eq!(clone.gpus.free_milli(), [700, 1000, 1000, 1000]);
        assert_eq!(info.gpus.free_milli(), [700, 0, 1000, 1000]);
    }
}
