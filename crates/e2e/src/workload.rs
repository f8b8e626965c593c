//! What the benchmark schedules: the nodes and pods of each workload, and
//! how well a contender placed the mixed one.
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

use std::collections::HashMap;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Basic,
    Mixed,
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

pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

pub fn pod_name(i: usize) -> String {
    format!("p-{i:06}")
}

/// Index of a benchmark pod from its name (`p-000042` → 42).
pub fn pod_index(name: &str) -> Option<usize> {
    name.strip_prefix("p-")?.parse().ok()
}

impl Workload {
    /// Refuses sizes at which the workload's pods would not all fit (the
    /// run would then wait for pods no scheduler can place).
    pub fn check(self, nodes: usize, pods: usize) -> Result<()> {
        if self == Workload::Mixed {
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
        }
        Ok(())
    }

    pub fn node_kind(self, i: usize) -> NodeKind {
        match (self, i % 25) {
            (Workload::Basic, _) => NodeKind::Cpu,
            (Workload::Mixed, 0 | 1) => NodeKind::Gpu("a100"),
            (Workload::Mixed, 2) => NodeKind::Gpu("h100"),
            (Workload::Mixed, 3 | 4) => NodeKind::Gpu("t4"),
            (Workload::Mixed, _) => NodeKind::Cpu,
        }
    }

    /// Whether node `i` is one no pod should go to, and why.
    pub fn flag(self, i: usize) -> Option<&'static str> {
        if self == Workload::Basic || i % 47 != 3 {
            return None;
        }
        Some(["maintenance", "hot", "spot-expiring"][(i / 47) % 3])
    }

    pub fn pod_kind(self, i: usize) -> PodKind {
        match (self, i % 20) {
            (Workload::Basic, _) => PodKind::Web,
            (Workload::Mixed, 0) => PodKind::Training,
            (Workload::Mixed, 1) => PodKind::Inference,
            (Workload::Mixed, _) => PodKind::Web,
        }
    }

    /// Node `i`; `now` is when the run started (for the spot expiry).
    pub fn node(self, i: usize, now: jiff::Timestamp) -> Result<Node> {
        let name = node_name(i);
        let mut labels = json!({"kubernetes.io/hostname": name});
        let mut annotations = json!({});
        let mut taints = json!([]);
        let resources = match (self, self.node_kind(i)) {
            (Workload::Basic, _) => json!({"cpu": "4", "memory": "32Gi", "pods": "110"}),
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
        };
        if self == Workload::Mixed {
            labels["topology.kubernetes.io/zone"] = json!(format!("zone-{}", ["a", "b", "c"][(i / 25) % 3]));
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
        ] {
            assert_eq!(workload.check(nodes, pods).is_ok(), ok, "{workload:?} {nodes}x{pods}");
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
        for w in [Workload::Basic, Workload::Mixed] {
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
