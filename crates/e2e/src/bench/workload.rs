//! What the benchmark schedules: the nodes and pods of each workload, what
//! must exist before a contender is measured, and how well a contender
//! placed the mixed one.
//!
//! - `basic`: scheduler_perf's SchedulingBasic (4 cpu, 32 Gi, 110 pods per
//!   node; pods of 100m, 500 Mi).
//! - `mixed`: a GPU cluster of ours. Per 25 nodes: 2 A100 and 1 H100 nodes
//!   (8 GPUs, 96 cpu, 1 Ti; the H100s tainted for training only), 2 T4
//!   nodes (4 GPUs, 32 cpu, 128 Gi) and 20 CPU nodes (16 cpu, 64 Gi), over
//!   three zones; about one node in 47 flagged as unfit (in maintenance,
//!   at 92 °C, or a spot instance expiring in 20 min). Per 20 pods: one
//!   training pod (2 GPUs), one inference pod (1 GPU), 18 web pods of 50
//!   services. No label or taint is made for gpu-scheduler alone: they are
//!   what GPU clusters carry (model labels, a dedicated taint, zones), and
//!   kube-scheduler runs on them with its default plugins.
//!
//! The others are kube-scheduler's scheduler_perf cases (Kubernetes
//! v1.36's `test/integration/scheduler_perf`), on its default node (4 cpu,
//! 32 Gi, 110 pods, a hostname label) and its pods (100m, 500 Mi unless
//! said otherwise). [`Workload::standard_size`] gives each case's standard
//! size; at other sizes the init pods scale with the nodes.
//!
//! - `pod-anti-affinity` (SchedulingPodAntiAffinity): pods labelled
//!   `color: green` that refuse a node holding another green pod; one init
//!   pod per 5 nodes, so each measured pod needs a node of its own among
//!   the rest.
//! - `pod-affinity` (SchedulingPodAffinity): every node in zone `zone1`;
//!   `color: blue` pods that require a blue pod in their zone; one init pod
//!   per node.
//! - `topology-spreading` (TopologySpreading): nodes in zones `moon-1..3`
//!   in turn; one plain init pod per node; measured pods labelled
//!   `color: blue` spread over the zones with maxSkew 5, DoNotSchedule.
//! - `preferred-topology-spreading` (PreferredTopologySpreading): the same
//!   with ScheduleAnyway.
//! - `node-affinity` (SchedulingNodeAffinity): every node in zone `zone1`;
//!   pods that require zone `zone1` or `zone2`; one init pod per node.
//! - `preemption` (PreemptionBasic): four init pods of 900m at priority 0
//!   per node (3.6 of 4 cpu), deletable at once (terminationGracePeriodSeconds
//!   0, as scheduler_perf's, so a preemptor binds without a kubelet); each
//!   measured pod asks for 3 cpu at priority 10 (PriorityClass
//!   `bench-high-priority`) and must preempt. Node 0 holds three, so the
//!   harness's 100m warm-up pod fits under gpu-scheduler's reservation
//!   buffer (90 % of cpu for pods of this priority). For the same reason a
//!   gpu-scheduler preemptor evicts all four victims of its node where
//!   kube-scheduler evicts three (3 + 0.9 cpu is over 90 % of 4).
//! - `gang` (v1.37's GangScheduling; v1.36's scheduler_perf has no gang
//!   case): no init pods; PodGroups (`scheduling.x-k8s.io/v1alpha1`, the
//!   CRD of deploy/crds, applied by [`Workload::prepare`]) of 3 members,
//!   pods of 100m, 100 Mi labelled `scheduling.x-k8s.io/pod-group`.
//!   kube-scheduler schedules the same pods one by one, without gang
//!   semantics, so the comparison is not like for like: kube-scheduler
//!   reads no PodGroup of this API. Its own gang scheduling (v1.36's alpha
//!   GangScheduling) works on v1.36.3 (tried by hand: a PodGroup
//!   `scheduling.k8s.io/v1alpha2` with `gang.minCount` 3 gets its three
//!   pods bound, one with only two members keeps both pending), but it needs
//!   kube-apiserver started with `--feature-gates=GenericWorkload=true
//!   --runtime-config=scheduling.k8s.io/v1alpha2=true`, kube-scheduler with
//!   `--feature-gates=GenericWorkload=true,GangScheduling=true`, and pods
//!   naming their group in `spec.schedulingGroup.podGroupName`: a control
//!   plane other than the one every other workload runs on.
//!
//! Init pods are created already bound (`spec.nodeName`, placed as a
//! scheduler may place them) before the contender starts, so no contender
//! pays for them and each starts from the same cluster. They are named
//! `init-NNNNNN` (the harness counts only `p-` pods) and live in the
//! contender's namespace with the measured pods: scheduler_perf puts them
//! in a second namespace that the measured pods' terms name, while here
//! the terms name none, which means the pods' own namespace, so the init
//! pods count as they do there and go with the namespace.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// Members of each gang of the `gang` workload (scheduler_perf's podsPerGroup).
pub const GANG_SIZE: usize = 3;
/// The PriorityClass of the `preemption` workload's measured pods.
const HIGH_PRIORITY_CLASS: &str = "bench-high-priority";
/// scheduler_perf's high priority (pod-high-priority.yaml).
const HIGH_PRIORITY: i32 = 10;
/// Pods of 100m a node may hold in the capacity check: gpu-scheduler's
/// reservation buffer lets 36 fill 90 % of 4 cpu; the rest is margin for
/// the warm-up pod and for spreading that cannot fill every node alike.
const SMALL_PODS_PER_NODE: usize = 30;
/// Requests the harness keeps in flight when preparing.
const IN_FLIGHT: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Basic,
    Mixed,
    PodAntiAffinity,
    PodAffinity,
    TopologySpreading,
    PreferredTopologySpreading,
    NodeAffinity,
    Preemption,
    /// kube-scheduler places these pods one by one, without gang
    /// semantics: not like for like.
    Gang,
}

/// What a node of the mixed workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Cpu,
    Gpu(&'static str),
}

/// What a pod of the mixed workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    Web,
    Training,
    Inference,
}

impl PodKind {
    /// The GPU models this pod's class prefers (the default GpuModel args).
    fn preferred(self) -> &'static [&'static str] {
        match self {
            PodKind::Web => &[],
            PodKind::Training => &["a100", "h100"],
            PodKind::Inference => &["t4", "l4"],
        }
    }
}

/// A scheduler_perf size: nodes, pods bound before measuring, pods measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub nodes: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
}

/// The pod templates of the scheduler_perf cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Template {
    /// pod-default.yaml.
    Plain,
    /// pod-with-pod-anti-affinity.yaml.
    AntiAffinity,
    /// pod-with-pod-affinity.yaml.
    Affinity,
    /// pod-with-node-affinity.yaml.
    NodeAffinity,
    /// pod-with-(preferred-)topology-spreading.yaml: DoNotSchedule or not.
    Spreading { hard: bool },
    /// pod-low-priority.yaml: the victims.
    LowPriority,
    /// pod-high-priority.yaml: the preemptors.
    HighPriority,
    /// GangScheduling's gang-pod.yaml, in gang `n`.
    GangMember(usize),
}

impl Template {
    /// Labels, the spec fields beside the container, and requests.
    fn parts(self) -> (Value, Value, Value) {
        let small = json!({"cpu": "100m", "memory": "500Mi"});
        match self {
            Template::Plain => (json!({}), json!({}), small),
            Template::AntiAffinity => (
                json!({"color": "green"}),
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}
                ]}}}),
                small,
            ),
            Template::Affinity => (
                json!({"color": "blue"}),
                json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": "topology.kubernetes.io/zone"}
                ]}}}),
                small,
            ),
            Template::NodeAffinity => (
                json!({}),
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone1", "zone2"]}
                    ]}]
                }}}}),
                small,
            ),
            Template::Spreading { hard } => (
                json!({"color": "blue"}),
                json!({"topologySpreadConstraints": [{
                    "maxSkew": 5,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": if hard { "DoNotSchedule" } else { "ScheduleAnyway" },
                    "labelSelector": {"matchLabels": {"color": "blue"}}
                }]}),
                small,
            ),
            // Deleted at once: no kubelet (or, with --kwok, no grace) ends
            // a graceful deletion.
            Template::LowPriority => {
                (json!({}), json!({"terminationGracePeriodSeconds": 0}), json!({"cpu": "900m", "memory": "500Mi"}))
            }
            Template::HighPriority => {
                (json!({}), json!({"priorityClassName": HIGH_PRIORITY_CLASS}), json!({"cpu": "3", "memory": "500Mi"}))
            }
            Template::GangMember(n) => (
                json!({"scheduling.x-k8s.io/pod-group": gang_name(n)}),
                json!({}),
                json!({"cpu": "100m", "memory": "100Mi"}),
            ),
        }
    }

    /// The pod `name` for `scheduler`, on `node` when already bound.
    fn pod(self, name: &str, scheduler: &str, node: Option<&str>) -> Result<Pod> {
        let (labels, mut spec, requests) = self.parts();
        spec["schedulerName"] = json!(scheduler);
        spec["containers"] = json!([{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": requests, "limits": requests}}]);
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        Ok(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))?)
    }
}

pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

pub fn pod_name(i: usize) -> String {
    format!("p-{i:06}")
}

/// An init pod's name: not `p-`, so the harness does not count it.
pub fn init_name(j: usize) -> String {
    format!("init-{j:06}")
}

/// The PodGroup of gang `n`.
pub fn gang_name(n: usize) -> String {
    format!("gang-{n}")
}

/// Index of a benchmark pod from its name (`p-000042` → 42).
pub fn pod_index(name: &str) -> Option<usize> {
    name.strip_prefix("p-")?.parse().ok()
}

impl Workload {
    /// The name `--workload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Basic => "basic",
            Workload::Mixed => "mixed",
            Workload::PodAntiAffinity => "pod-anti-affinity",
            Workload::PodAffinity => "pod-affinity",
            Workload::TopologySpreading => "topology-spreading",
            Workload::PreferredTopologySpreading => "preferred-topology-spreading",
            Workload::NodeAffinity => "node-affinity",
            Workload::Preemption => "preemption",
            Workload::Gang => "gang",
        }
    }

    /// scheduler_perf's standard size of the case: its 5000Nodes size, or
    /// the largest it runs (PreemptionBasic's 5,000-node size is commented
    /// out there as failing). None for `basic` and `mixed`, which have no
    /// init pods here.
    pub fn standard_size(self) -> Option<Size> {
        let (nodes, init_pods, measured_pods) = match self {
            Workload::Basic | Workload::Mixed => return None,
            Workload::PodAntiAffinity => (5000, 1000, 1000),
            Workload::PodAffinity | Workload::NodeAffinity => (5000, 5000, 1000),
            Workload::TopologySpreading | Workload::PreferredTopologySpreading => (5000, 5000, 2000),
            Workload::Preemption => (1000, 4000, 1000),
            Workload::Gang => (5000, 0, 3000),
        };
        Some(Size { nodes, init_pods, measured_pods })
    }

    /// Init pods on `nodes` nodes: the standard size's share per node
    /// (one fewer for preemption: node 0 keeps room for the warm-up pod).
    pub fn init_pods(self, nodes: usize) -> usize {
        let Some(std) = self.standard_size() else { return 0 };
        let n = std.init_pods * nodes / std.nodes;
        if self == Workload::Preemption { n.saturating_sub(1) } else { n }
    }

    /// The node of init pod `j` (of `init_pods(nodes)`).
    pub fn init_node(self, j: usize, nodes: usize) -> usize {
        match self {
            // Spread evenly, one per node.
            Workload::PodAntiAffinity => j * nodes / self.init_pods(nodes).max(1),
            // Four per node, three on node 0.
            Workload::Preemption => (j + 1) / 4,
            _ => j % nodes.max(1),
        }
    }

    /// Init pod `j` for `scheduler`, bound to its node.
    pub fn init_pod(self, j: usize, scheduler: &str, nodes: usize) -> Result<Pod> {
        let template = match self {
            Workload::PodAntiAffinity => Template::AntiAffinity,
            Workload::PodAffinity => Template::Affinity,
            Workload::NodeAffinity => Template::NodeAffinity,
            Workload::Preemption => Template::LowPriority,
            _ => Template::Plain,
        };
        template.pod(&init_name(j), scheduler, Some(&node_name(self.init_node(j, nodes))))
    }

    /// Refuses sizes at which the workload's pods would not all fit (the
    /// run would then wait for pods no scheduler can place).
    pub fn check(self, nodes: usize, pods: usize) -> Result<()> {
        let name = self.name();
        match self {
            Workload::Basic => return Ok(()),
            Workload::Mixed => {
                if nodes < 25 {
                    bail!("--workload mixed needs at least 25 nodes (one of each kind per 25), got {nodes}");
                }
                // Inference pods need 1 GPU each, 1 pod in 20, against 8 T4
                // GPUs per 25 nodes less the flagged ones: keep a margin.
                if pods > 6 * nodes {
                    bail!(
                        "--workload mixed fits at most 6 pods per node so that every GPU pod has room, got {pods} pods on {nodes} nodes"
                    );
                }
                return Ok(());
            }
            _ => {}
        }
        if nodes == 0 {
            bail!("--workload {name} needs at least one node");
        }
        let init = self.init_pods(nodes);
        match self {
            Workload::PodAntiAffinity if init + pods > nodes => bail!(
                "--workload {name} places at most one pod per node: {init} init pods and {pods} measured pods need {} nodes, got {nodes}",
                init + pods
            ),
            Workload::Preemption if pods > nodes => bail!(
                "--workload {name} has room for one preemptor (3 cpu) per node: {pods} pods need {pods} nodes, got {nodes}"
            ),
            Workload::Gang if !pods.is_multiple_of(GANG_SIZE) => {
                bail!(
                    "--workload {name} makes gangs of {GANG_SIZE}: the pods must be a multiple of {GANG_SIZE}, got {pods}"
                )
            }
            Workload::Preemption => Ok(()),
            _ if init + pods > SMALL_PODS_PER_NODE * nodes => bail!(
                "--workload {name} fits about {SMALL_PODS_PER_NODE} pods of 100m per node (4 cpu): {init} init pods and {pods} measured pods need {} nodes, got {nodes}",
                (init + pods).div_ceil(SMALL_PODS_PER_NODE)
            ),
            _ => Ok(()),
        }
    }

    pub fn node_kind(self, i: usize) -> NodeKind {
        match (self, i % 25) {
            (Workload::Mixed, 0 | 1) => NodeKind::Gpu("a100"),
            (Workload::Mixed, 2) => NodeKind::Gpu("h100"),
            (Workload::Mixed, 3 | 4) => NodeKind::Gpu("t4"),
            _ => NodeKind::Cpu,
        }
    }

    /// Whether node `i` is one no pod should go to, and why.
    pub fn flag(self, i: usize) -> Option<&'static str> {
        if self != Workload::Mixed || i % 47 != 3 {
            return None;
        }
        Some(["maintenance", "hot", "spot-expiring"][(i / 47) % 3])
    }

    pub fn pod_kind(self, i: usize) -> PodKind {
        match (self, i % 20) {
            (Workload::Mixed, 0) => PodKind::Training,
            (Workload::Mixed, 1) => PodKind::Inference,
            _ => PodKind::Web,
        }
    }

    /// The zone label of node `i`, where the case gives one.
    fn zone(self, i: usize) -> Option<String> {
        match self {
            Workload::Mixed => Some(format!("zone-{}", ["a", "b", "c"][(i / 25) % 3])),
            Workload::PodAffinity | Workload::NodeAffinity => Some("zone1".into()),
            Workload::TopologySpreading | Workload::PreferredTopologySpreading => Some(format!("moon-{}", i % 3 + 1)),
            _ => None,
        }
    }

    /// Node `i`; `now` is when the run started (for the spot expiry).
    pub fn node(self, i: usize, now: jiff::Timestamp) -> Result<Node> {
        let name = node_name(i);
        let mut labels = json!({"kubernetes.io/hostname": name});
        let mut annotations = json!({});
        let mut taints = json!([]);
        let resources = match (self, self.node_kind(i)) {
            (Workload::Mixed, NodeKind::Cpu) => json!({"cpu": "16", "memory": "64Gi", "pods": "110"}),
            (Workload::Mixed, NodeKind::Gpu(model)) => {
                labels["gpu-model"] = json!(model);
                if model == "h100" {
                    taints = json!([{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]);
                }
                if model == "t4" {
                    json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"})
                } else {
                    json!({"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"})
                }
            }
            _ => json!({"cpu": "4", "memory": "32Gi", "pods": "110"}),
        };
        if let Some(zone) = self.zone(i) {
            labels["topology.kubernetes.io/zone"] = json!(zone);
        }
        match self.flag(i) {
            Some("maintenance") => labels["maintenance-mode"] = json!("true"),
            Some("hot") => annotations["gpu-scheduler.io/temperature-celsius"] = json!("92"),
            Some(_) => {
                let expiry = now + jiff::SignedDuration::from_mins(20);
                annotations["gpu-scheduler.io/spot-expiry"] = json!(expiry.to_string());
            }
            None => {}
        }
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"taints": taints},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))?)
    }

    /// Pod `name` (index `i`) for `scheduler`.
    pub fn pod(self, i: usize, name: &str, scheduler: &str) -> Result<Pod> {
        let template = match self {
            Workload::Basic | Workload::Mixed => return self.mixed_pod(i, name, scheduler),
            Workload::PodAntiAffinity => Template::AntiAffinity,
            Workload::PodAffinity => Template::Affinity,
            Workload::TopologySpreading => Template::Spreading { hard: true },
            Workload::PreferredTopologySpreading => Template::Spreading { hard: false },
            Workload::NodeAffinity => Template::NodeAffinity,
            Workload::Preemption => Template::HighPriority,
            Workload::Gang => Template::GangMember(i / GANG_SIZE),
        };
        template.pod(name, scheduler, None)
    }

    /// A pod of `basic` or `mixed`.
    fn mixed_pod(self, i: usize, name: &str, scheduler: &str) -> Result<Pod> {
        let (labels, requests, tolerations): (Value, Value, Value) = match self.pod_kind(i) {
            PodKind::Web if self == Workload::Basic => {
                (json!({}), json!({"cpu": "100m", "memory": "500Mi"}), json!([]))
            }
            PodKind::Web => {
                (json!({"app": format!("web-{}", i % 50)}), json!({"cpu": "250m", "memory": "512Mi"}), json!([]))
            }
            PodKind::Training => (
                json!({"app": format!("train-{}", i % 10), "gpu-scheduler.io/workload": "training"}),
                json!({"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}),
                json!([{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]),
            ),
            PodKind::Inference => (
                json!({"app": format!("infer-{}", i % 10), "gpu-scheduler.io/workload": "inference"}),
                json!({"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}),
                json!([]),
            ),
        };
        // Extended resources must be limited as they are requested.
        let limits = match requests.get("nvidia.com/gpu") {
            Some(gpus) => json!({"nvidia.com/gpu": gpus}),
            None => json!({}),
        };
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "schedulerName": scheduler,
                "tolerations": tolerations,
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": limits}}]
            }
        }))?)
    }

    /// Makes what must exist before `scheduler` is measured on `pods` pods
    /// in `namespace`: the preemptors' PriorityClass, the PodGroup CRD and
    /// the gangs' PodGroups, and the init pods, bound. Call it after the
    /// namespace exists and before the contender starts (gpu-scheduler
    /// looks for the PodGroup CRD when it starts).
    pub async fn prepare(
        self,
        client: &Client,
        namespace: &str,
        scheduler: &str,
        nodes: usize,
        pods: usize,
    ) -> Result<()> {
        if self == Workload::Preemption {
            let class: PriorityClass = serde_json::from_value(json!({
                "metadata": {"name": HIGH_PRIORITY_CLASS},
                "value": HIGH_PRIORITY,
                "description": "The preemptors of the end-to-end benchmark's preemption workload."
            }))?;
            create_all(&Api::all(client.clone()), vec![Ok(class)]).await.context("creating the PriorityClass")?;
        }
        if self == Workload::Gang {
            gpu_scheduler_e2e::cluster::apply_pod_group_crd(client).await?;
            let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"));
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            let groups = (0..pods / GANG_SIZE).map(|n| {
                Ok(serde_json::from_value(json!({
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": gang_name(n)},
                    "spec": {"minMember": GANG_SIZE}
                }))?)
            });
            create_all(&api, groups.collect()).await.context("creating the PodGroups")?;
        }
        let init = self.init_pods(nodes);
        if init > 0 {
            eprintln!("   {init} init pods, bound");
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let pods = (0..init).map(|j| self.init_pod(j, scheduler, nodes)).collect();
            create_all(&api, pods).await.context("creating the init pods")?;
        }
        Ok(())
    }

    /// How well `bound` (pod name → node name) places the mixed workload.
    pub fn placement(self, bound: &HashMap<String, String>) -> Placement {
        let node_index = |n: &str| n.strip_prefix("node-")?.parse::<usize>().ok();
        let mut p = Placement::default();
        for (pod, node) in bound {
            let (Some(i), Some(n)) = (pod_index(pod), node_index(node)) else { continue };
            let kind = self.pod_kind(i);
            let on = self.node_kind(n);
            match (kind, on) {
                (PodKind::Web, NodeKind::Gpu(_)) => {
                    p.cpu_pods += 1;
                    p.cpu_pods_on_gpu_nodes += 1;
                }
                (PodKind::Web, NodeKind::Cpu) => p.cpu_pods += 1,
                (_, NodeKind::Gpu(model)) => {
                    p.gpu_pods += 1;
                    p.gpu_pods_on_preferred_model += usize::from(kind.preferred().contains(&model));
                }
                // A GPU pod on a node without GPUs: only the ceiling, which
                // decides nothing, does that.
                (_, NodeKind::Cpu) => p.gpu_pods += 1,
            }
            p.pods_on_flagged_nodes += usize::from(self.flag(n).is_some());
        }
        p
    }
}

/// Creates `objects` through `api`, a few in flight. One that exists
/// already counts as made (a PriorityClass or the CRD left by an earlier
/// contender); a dropped connection or an overloaded API server is tried
/// again, any other refusal ends the run.
async fn create_all<K>(api: &Api<K>, objects: Vec<Result<K>>) -> Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let post = PostParams::default();
    futures::stream::iter(objects)
        .map(|obj| {
            let post = &post;
            async move {
                let obj = obj?;
                for attempt in 1.. {
                    match api.create(post, &obj).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => break,
                        Err(kube::Error::Api(s)) if s.code != 429 && s.code < 500 => {
                            return Err(kube::Error::Api(s).into());
                        }
                        Err(e) if attempt >= 5 => return Err(e.into()),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200 * attempt)).await,
                    }
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Placement quality of one contender on the mixed workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    pub gpu_pods: usize,
    pub gpu_pods_on_preferred_model: usize,
    pub cpu_pods: usize,
    pub cpu_pods_on_gpu_nodes: usize,
    /// Pods on nodes in maintenance, too hot or about to be reclaimed.
    pub pods_on_flagged_nodes: usize,
}

impl Placement {
    pub fn json(&self) -> Value {
        let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        json!({
            "gpu_pods": self.gpu_pods,
            "gpu_pods_on_preferred_model": self.gpu_pods_on_preferred_model,
            "gpu_pods_on_preferred_model_share": share(self.gpu_pods_on_preferred_model, self.gpu_pods),
            "cpu_pods": self.cpu_pods,
            "cpu_pods_on_gpu_nodes": self.cpu_pods_on_gpu_nodes,
            "cpu_pods_on_gpu_nodes_share": share(self.cpu_pods_on_gpu_nodes, self.cpu_pods),
            "pods_on_flagged_nodes": self.pods_on_flagged_nodes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_shares() {
        let w = Workload::Mixed;
        let kinds: Vec<NodeKind> = (0..25).map(|i| w.node_kind(i)).collect();
        assert_eq!(kinds.iter().filter(|k| **k == NodeKind::Gpu("a100")).count(), 2);
        assert_eq!(kinds.iter().filter(|k| **k == NodeKind::Gpu("h100")).count(), 1);
        assert_eq!(kinds.iter().filter(|k| **k == NodeKind::Gpu("t4")).count(), 2);
        let pods: Vec<PodKind> = (0..20).map(|i| w.pod_kind(i)).collect();
        assert_eq!(pods.iter().filter(|k| **k == PodKind::Training).count(), 1);
        assert_eq!(pods.iter().filter(|k| **k == PodKind::Inference).count(), 1);
        // Flags fall on GPU and CPU nodes alike.
        let flagged: Vec<NodeKind> = (0..1000).filter(|i| w.flag(*i).is_some()).map(|i| w.node_kind(i)).collect();
        assert!(flagged.contains(&NodeKind::Cpu) && flagged.iter().any(|k| *k != NodeKind::Cpu));
        assert_eq!(Workload::Basic.flag(3), None);
    }

    #[test]
    fn sizes_that_cannot_fit_are_refused() {
        for (workload, nodes, pods, ok) in [
            (Workload::Basic, 1, 10_000, true),
            (Workload::Mixed, 100, 500, true),
            (Workload::Mixed, 1000, 5000, true),
            (Workload::Mixed, 10, 20, false),
            (Workload::Mixed, 100, 700, false),
            // 20 init pods on 100 nodes leave 80 for the measured ones.
            (Workload::PodAntiAffinity, 100, 80, true),
            (Workload::PodAntiAffinity, 100, 81, false),
            (Workload::PodAntiAffinity, 0, 0, false),
            // 100 init pods and 2,900 measured: 30 per node.
            (Workload::PodAffinity, 100, 2900, true),
            (Workload::PodAffinity, 100, 2901, false),
            (Workload::NodeAffinity, 100, 2901, false),
            (Workload::TopologySpreading, 100, 200, true),
            (Workload::PreferredTopologySpreading, 100, 2901, false),
            (Workload::Preemption, 100, 100, true),
            (Workload::Preemption, 100, 101, false),
            (Workload::Preemption, 0, 0, false),
            (Workload::Gang, 100, 300, true),
            (Workload::Gang, 100, 301, false),
            (Workload::Gang, 100, 3003, false),
        ] {
            assert_eq!(workload.check(nodes, pods).is_ok(), ok, "{workload:?} {nodes}x{pods}");
        }
    }

    #[test]
    fn refusals_say_why() {
        for (workload, nodes, pods, says) in [
            (Workload::PodAntiAffinity, 100, 81, "20 init pods and 81 measured pods need 101 nodes, got 100"),
            (Workload::Preemption, 100, 101, "one preemptor (3 cpu) per node"),
            (Workload::Gang, 100, 301, "must be a multiple of 3, got 301"),
            (Workload::PodAffinity, 100, 2901, "need 101 nodes, got 100"),
            (Workload::NodeAffinity, 0, 1, "needs at least one node"),
        ] {
            let e = workload.check(nodes, pods).expect_err("refused").to_string();
            assert!(e.starts_with(&format!("--workload {}", workload.name())), "{e}");
            assert!(e.contains(says), "{e}");
        }
    }

    /// All scheduler_perf cases.
    const CASES: [Workload; 7] = [
        Workload::PodAntiAffinity,
        Workload::PodAffinity,
        Workload::TopologySpreading,
        Workload::PreferredTopologySpreading,
        Workload::NodeAffinity,
        Workload::Preemption,
        Workload::Gang,
    ];

    #[test]
    fn standard_sizes_are_accepted_and_scale() {
        assert_eq!(Workload::Basic.standard_size(), None);
        assert_eq!(Workload::Mixed.init_pods(100), 0);
        for w in CASES {
            let std = w.standard_size().expect("a scheduler_perf case");
            w.check(std.nodes, std.measured_pods).unwrap_or_else(|e| panic!("{w:?}: {e}"));
            let less = usize::from(w == Workload::Preemption);
            assert_eq!(w.init_pods(std.nodes), std.init_pods - less, "{w:?}");
        }
        assert_eq!(Workload::PodAntiAffinity.init_pods(500), 100);
        assert_eq!(Workload::TopologySpreading.init_pods(500), 500);
        assert_eq!(Workload::Preemption.init_pods(500), 1999);
    }

    #[test]
    fn names_are_the_flag_values() {
        use clap::ValueEnum;
        for w in Workload::value_variants() {
            assert_eq!(w.to_possible_value().expect("a value").get_name(), w.name());
        }
    }

    /// The node an init pod is bound to, and its cpu request in millicores.
    fn placed(pod: &Pod) -> (usize, i64) {
        let spec = pod.spec.as_ref().expect("spec");
        let node = spec.node_name.as_deref().and_then(|n| n.strip_prefix("node-")?.parse().ok()).expect("bound");
        let cpu = &spec.containers[0].resources.as_ref().and_then(|r| r.requests.as_ref()).expect("requests")["cpu"].0;
        let milli = match cpu.strip_suffix('m') {
            Some(m) => m.parse().expect("millicores"),
            None => cpu.parse::<i64>().expect("cores") * 1000,
        };
        (node, milli)
    }

    #[test]
    fn init_pods_are_bound_legally() {
        for w in CASES {
            for nodes in [5, 100, 501] {
                let mut per_node = vec![0usize; nodes];
                for j in 0..w.init_pods(nodes) {
                    let pod = w.init_pod(j, "s", nodes).expect("init pod");
                    let name = pod.metadata.name.clone().expect("name");
                    assert_eq!(pod_index(&name), None, "{name} must not count as measured");
                    let (node, _) = placed(&pod);
                    per_node[node] += 1;
                }
                let most = per_node.iter().copied().max().unwrap_or(0);
                match w {
                    // Anti-affinity: never two green pods on one node.
                    Workload::PodAntiAffinity => assert!(most <= 1, "{w:?} on {nodes}"),
                    Workload::Preemption => {
                        assert_eq!(per_node[0], 3);
                        assert!(per_node[1..].iter().all(|n| *n == 4), "{w:?} on {nodes}");
                    }
                    Workload::Gang => assert_eq!(most, 0),
                    _ => assert!(most <= 1 && per_node.iter().sum::<usize>() == nodes, "{w:?} on {nodes}"),
                }
            }
        }
    }

    #[test]
    fn every_preemptor_must_preempt() {
        let (w, nodes) = (Workload::Preemption, 1000);
        let mut used = vec![0i64; nodes];
        for j in 0..w.init_pods(nodes) {
            let pod = w.init_pod(j, "s", nodes).expect("init pod");
            assert_eq!(pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds), Some(0));
            assert_eq!(pod.spec.as_ref().and_then(|s| s.priority_class_name.clone()), None);
            let (node, cpu) = placed(&pod);
            used[node] += cpu;
        }
        let preemptor = w.pod(0, &pod_name(0), "s").expect("pod");
        let spec = preemptor.spec.expect("spec");
        assert_eq!(spec.priority_class_name.as_deref(), Some(HIGH_PRIORITY_CLASS));
        // 3 cpu fits no node of 4, even without gpu-scheduler's 10 % buffer...
        assert!(used.iter().all(|u| 4000 - u < 3000), "a node has room for a preemptor");
        // ...and the 100m warm-up pod fits node 0 under the buffer.
        assert!(used[0] + 100 <= 3600);
    }

    #[test]
    fn zones_are_the_cases() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let zone = |w: Workload, i: usize| {
            let node = w.node(i, now).expect("node");
            node.metadata.labels.and_then(|l| l.get("topology.kubernetes.io/zone").cloned())
        };
        for i in 0..9 {
            assert_eq!(zone(Workload::PodAffinity, i).as_deref(), Some("zone1"));
            assert_eq!(zone(Workload::NodeAffinity, i).as_deref(), Some("zone1"));
            assert_eq!(zone(Workload::TopologySpreading, i), Some(format!("moon-{}", i % 3 + 1)));
            assert_eq!(zone(Workload::PreferredTopologySpreading, i), Some(format!("moon-{}", i % 3 + 1)));
            assert_eq!(zone(Workload::PodAntiAffinity, i), None);
            assert_eq!(zone(Workload::Preemption, i), None);
            assert_eq!(zone(Workload::Gang, i), None);
        }
        // No node of a scheduler_perf case is flagged or has GPUs.
        for w in CASES {
            assert!((0..100).all(|i| w.flag(i).is_none() && w.node_kind(i) == NodeKind::Cpu), "{w:?}");
        }
    }

    #[test]
    fn measured_pods_carry_the_case() {
        let spec = |w: Workload, i: usize| {
            let pod = w.pod(i, &pod_name(i), "s").expect("pod");
            assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.clone()), None);
            (pod.metadata.labels.unwrap_or_default(), pod.spec.expect("spec"))
        };
        let (labels, s) = spec(Workload::PodAntiAffinity, 0);
        assert_eq!(labels.get("color").map(String::as_str), Some("green"));
        let term = &s
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .expect("anti-affinity")[0];
        assert_eq!(term.topology_key, "kubernetes.io/hostname");
        // No namespaces: the pod's own, which holds the init pods too.
        assert_eq!(term.namespaces, None);

        let (labels, s) = spec(Workload::PodAffinity, 0);
        assert_eq!(labels.get("color").map(String::as_str), Some("blue"));
        let term = &s
            .affinity
            .and_then(|a| a.pod_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .expect("affinity")[0];
        assert_eq!(term.topology_key, "topology.kubernetes.io/zone");

        for (w, action) in
            [(Workload::TopologySpreading, "DoNotSchedule"), (Workload::PreferredTopologySpreading, "ScheduleAnyway")]
        {
            let (labels, s) = spec(w, 0);
            assert_eq!(labels.get("color").map(String::as_str), Some("blue"));
            let c = &s.topology_spread_constraints.expect("constraints")[0];
            assert_eq!((c.max_skew, c.when_unsatisfiable.as_str()), (5, action));
        }

        let (_, s) = spec(Workload::NodeAffinity, 0);
        let terms = s
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .expect("node affinity")
            .node_selector_terms;
        assert_eq!(
            terms[0].match_expressions.as_ref().expect("expressions")[0].values.as_deref(),
            Some(&["zone1".to_string(), "zone2".to_string()][..])
        );

        // Gangs of three, in order.
        for i in 0..9 {
            let (labels, _) = spec(Workload::Gang, i);
            assert_eq!(labels.get("scheduling.x-k8s.io/pod-group"), Some(&gang_name(i / 3)));
        }
    }

    #[test]
    fn every_gpu_pod_fits_its_preferred_model_at_the_largest_size() {
        // At 6 pods per node the unflagged preferred GPUs still hold the
        // GPU pods, so a perfect placement exists.
        let (w, nodes, pods) = (Workload::Mixed, 1000, 6000);
        let gpus = |models: &[&str]| -> usize {
            (0..nodes)
                .filter(|i| w.flag(*i).is_none())
                .filter_map(|i| match w.node_kind(i) {
                    NodeKind::Gpu(m) if models.contains(&m) => Some(if m == "t4" { 4 } else { 8 }),
                    _ => None,
                })
                .sum()
        };
        let need = |kind: PodKind, per: usize| (0..pods).filter(|i| w.pod_kind(*i) == kind).count() * per;
        assert!(need(PodKind::Training, 2) <= gpus(PodKind::Training.preferred()));
        assert!(need(PodKind::Inference, 1) <= gpus(PodKind::Inference.preferred()));
    }

    #[test]
    fn placement_counts() {
        let w = Workload::Mixed;
        let bound: HashMap<String, String> = [
            (pod_name(0), node_name(0)),  // training on a100: preferred
            (pod_name(20), node_name(3)), // training on t4: not preferred, and node 3 is flagged
            (pod_name(1), node_name(4)),  // inference on t4: preferred
            (pod_name(2), node_name(1)),  // web on a GPU node
            (pod_name(3), node_name(10)), // web on a CPU node
        ]
        .into_iter()
        .collect();
        let p = w.placement(&bound);
        assert_eq!(
            p,
            Placement {
                gpu_pods: 3,
                gpu_pods_on_preferred_model: 2,
                cpu_pods: 2,
                cpu_pods_on_gpu_nodes: 1,
                pods_on_flagged_nodes: 1
            }
        );
    }

    #[test]
    fn objects_are_valid() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        for w in [Workload::Basic, Workload::Mixed].into_iter().chain(CASES) {
            for i in 0..50 {
                let node = w.node(i, now).expect("node");
                assert_eq!(node.metadata.name.as_deref(), Some(node_name(i).as_str()));
                let pod = w.pod(i, &pod_name(i), "s").expect("pod");
                assert_eq!(pod.spec.and_then(|s| s.scheduler_name).as_deref(), Some("s"));
            }
        }
        let h100 = Workload::Mixed.node(2, now).expect("node");
        assert_eq!(h100.spec.and_then(|s| s.taints).map(|t| t.len()), Some(1));
    }
}
