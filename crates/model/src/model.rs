//! The engine's view of Pods and Nodes: the fields scheduling reads, parsed
//! once (selectors compiled, requests summed) when an object enters the
//! cache, so that the per-node hot path never re-parses API objects.
//! `convert` builds these from k8s-openapi objects.
//!
//! A pod is shared as `Arc<Pod>` ([`PodRef`]) between the queue, the cache
//! and snapshots. Its GPU request (`gpu`) and the devices it holds
//! (`gpu_devices`, from `gpu-scheduler.io/gpu-index`) are fields like the
//! others, read once by conversion; so is the name of each of its
//! ResourceClaims (`Pod::claim_name`, kube's `resourceclaim.Name`).

use std::sync::Arc;

use crate::dra::{ClaimSource, Consumer, NodeScope, PodClaim};
use crate::gpu::{DeviceSet, GpuRequest};
use crate::resources::Resources;

pub use crate::terms::*;

// Matching the terms against pods and nodes.

impl NodeSelectorTerm {
    pub fn matches(&self, node: &Node) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions.iter().all(|r| r.matches(&node.labels))
            && self.match_fields.iter().all(|r| r.key == "metadata.name" && r.matches_value(Some(&node.name)))
    }
}

impl NodeSelector {
    pub fn matches(&self, node: &Node) -> bool {
        self.terms.iter().any(|t| t.matches(node))
    }
}

impl AffinityTerm {
    /// Whether `pod` (in a namespace with `ns_labels`) is matched by this term.
    pub fn matches(&self, pod: &Pod, ns_labels: Option<&Labels>) -> bool {
        let ns_ok = self.namespaces.contains(&pod.namespace)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|sel| sel.is_empty() || ns_labels.is_some_and(|l| sel.matches(l)));
        ns_ok && self.selector.matches(&pod.labels)
    }
}

// Which DRA devices a node may use and who reserves a claim.

impl NodeScope {
    pub fn matches(&self, node: &Node) -> bool {
        match self {
            NodeScope::Node(n) => *n == node.name,
            NodeScope::Selector(s) => s.matches(node),
            NodeScope::All => true,
        }
    }
}

impl Consumer {
    pub fn pod(pod: &Pod) -> Consumer {
        Consumer { api_group: String::new(), resource: "pods".into(), name: pod.name.clone(), uid: pod.uid.clone() }
    }
}

// --------------------------------------------------------------------- pod

/// What the scheduler knows of a pod. Shared as `Arc<Pod>` between the
/// queue, the cache and snapshots.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub annotations: Labels,
    pub scheduler_name: String,
    pub priority: i32,
    /// Set for pods bound (or assumed) to a node.
    pub node_name: Option<String>,
    pub nominated_node_name: Option<String>,
    /// Effective requests: max(app + sidecars, each init + sidecars before
    /// it) plus overhead, as kube-scheduler computes them.
    pub requests: Resources,
    /// Requests with the non-zero defaults (100m cpu, 200Mi memory) for
    /// containers that set none; used by scoring, as in kube-scheduler.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    pub host_ports: Vec<HostPort>,
    pub node_selector: Labels,
    pub required_node_affinity: Option<NodeSelector>,
    pub preferred_node_affinity: Vec<PreferredSchedulingTerm>,
    pub tolerations: Vec<Toleration>,
    pub pod_affinity: PodAffinity,
    pub pod_anti_affinity: PodAffinity,
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// The selector of the controller that owns this pod (ReplicaSet,
    /// StatefulSet, ...), used by the default topology-spread constraints,
    /// when the input knew it (a workload expanded by `simulate`).
    pub owner_selector: Option<LabelSelector>,
    /// Its controller (`metadata.ownerReferences` with `controller: true`),
    /// as (kind, name): its selector is looked up in the snapshot.
    pub owner: Option<(String, String)>,
    /// Pods being deleted do not count for spreading.
    pub terminating: bool,
    /// `spec.schedulingGates`: the pod is not scheduled while any remain.
    pub scheduling_gates: Vec<String>,
    /// The gang it belongs to: the PodGroup named by its label
    /// `scheduling.x-k8s.io/pod-group`, in its own namespace.
    pub pod_group: Option<String>,
    /// `spec.preemptionPolicy`: `Never` keeps it from preempting others.
    pub preemption_policy: PreemptionPolicy,
    /// `status.startTime` (ms since the epoch), for preemption's tie-break.
    pub start_time: Option<u64>,
    /// `status.phase` is Running (PodGroup status counts it).
    pub running: bool,
    /// The volumes the volume plugins look at (claims, inline disks).
    pub volumes: Vec<crate::volumes::PodVolume>,
    /// `spec.resourceClaims`: the DRA claims the pod uses.
    pub resource_claims: Vec<PodClaim>,
    /// `status.resourceClaimStatuses`: the claim made from each template
    /// entry (None: none was needed).
    pub claim_statuses: Vec<(String, Option<String>)>,
    /// What the pod asks of GPUs (whole, a share, slices; models), read
    /// from its requests and annotations by conversion.
    pub gpu: GpuRequest,
    /// The GPU devices the pod holds: chosen when it is assumed, or read
    /// from its `gpu-scheduler.io/gpu-index` annotation once bound.
    pub gpu_devices: Option<DeviceSet>,
    /// The API object as received, kept only when an extender needs it
    /// (extenders are sent whole objects); None otherwise, to save memory.
    pub source: Option<Arc<serde_json::Value>>,
}

/// `spec.preemptionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreemptionPolicy {
    #[default]
    PreemptLowerPriority,
    Never,
}

impl Pod {
    /// The claim a pod's entry refers to: `Ok(None)` when no claim was needed
    /// (the controller recorded none), and whether the claim must be owned by
    /// the pod (`resourceclaim.Name`).
    pub fn claim_name<'p>(&'p self, claim: &'p PodClaim) -> Result<Option<(&'p str, bool)>, String> {
        match &claim.source {
            ClaimSource::Claim(name) => Ok(Some((name, false))),
            ClaimSource::Template(_) => match self.claim_statuses.iter().find(|(n, _)| *n == claim.name) {
                Some((_, Some(generated))) => Ok(Some((generated, true))),
                Some((_, None)) => Ok(None),
                None => Err(format!("pod \"{}/{}\": ResourceClaim not created yet", self.namespace, self.name)),
            },
        }
    }

    /// `NAMESPACE/NAME`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn has_required_anti_affinity(&self) -> bool {
        !self.pod_anti_affinity.required.is_empty()
    }

    /// `NAMESPACE/GROUP` of its PodGroup, if it belongs to a gang.
    pub fn group_key(&self) -> Option<String> {
        self.pod_group.as_ref().map(|g| format!("{}/{g}", self.namespace))
    }

    pub fn has_affinity(&self) -> bool {
        !self.pod_affinity.is_empty() || !self.pod_anti_affinity.is_empty()
    }
}

// -------------------------------------------------------------------- node

/// A node as the scheduler needs it. `repr(C)`, the fields filters read
/// first (when a pod needs more than the node's `NodeSummary`) leading.
#[derive(Debug, Clone, PartialEq, Default)]
#[repr(C)]
pub struct Node {
    pub unschedulable: bool,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub name: String,
    pub labels: Labels,
    pub annotations: Labels,
    /// `status.conditions`, for the facts that come from them.
    pub conditions: Vec<NodeCondition>,
    /// The API object as received, kept only when an extender that is not
    /// nodeCacheCapable needs it.
    pub source: Option<Arc<serde_json::Value>>,
}

/// One of a node's `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeCondition {
    pub type_: String,
    /// True when the condition's status is "True".
    pub status: bool,
    /// `lastTransitionTime`, milliseconds since the epoch.
    pub last_transition: Option<u64>,
}

pub type PodRef = Arc<Pod>;
pub type NodeRef = Arc<Node>;

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn requirement_operators() {
        use SelectorOp::*;
        let cases: &[(Requirement, Option<&str>, bool)] = &[
            (req("k", In, &["a", "b"]), Some("a"), true),
            (req("k", In, &["a"]), Some("c"), false),
            (req("k", In, &["a"]), None, false),
            (req("k", NotIn, &["a"]), Some("a"), false),
            (req("k", NotIn, &["a"]), None, true),
            (req("k", Exists, &[]), Some(""), true),
            (req("k", Exists, &[]), None, false),
            (req("k", DoesNotExist, &[]), None, true),
            (req("k", DoesNotExist, &[]), Some("x"), false),
            (req("k", Gt, &["5"]), Some("6"), true),
            (req("k", Gt, &["5"]), Some("5"), false),
            (req("k", Gt, &["5"]), Some("x"), false),
            (req("k", Gt, &["5"]), None, false),
            (req("k", Lt, &["5"]), Some("-1"), true),
            (req("k", Lt, &["5"]), Some("5"), false),
        ];
        for (i, (r, v, want)) in cases.iter().enumerate() {
            assert_eq!(r.matches_value(*v), *want, "case {i}: {r:?} on {v:?}");
        }
    }

    #[test]
    fn empty_term_matches_no_node_and_fields_match_name() {
        let node = Node { name: "n1".into(), ..Default::default() };
        assert!(!NodeSelectorTerm::default().matches(&node));
        let t = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", SelectorOp::In, &["n1"])],
        };
        assert!(t.matches(&node));
    }

    #[test]
    fn toleration_semantics() {
        let taint = Taint { key: "k".into(), value: "v".into(), effect: TaintEffect::NoSchedule };
        let tol = |key: &str, op, value: &str, effect| Toleration { key: key.into(), op, value: value.into(), effect };
        use TolerationOp::*;
        for (t, want) in [
            (tol("k", Equal, "v", Some(TaintEffect::NoSchedule)), true),
            (tol("k", Equal, "w", Some(TaintEffect::NoSchedule)), false),
            (tol("k", Exists, "", None), true),
            (tol("", Exists, "", None), true),
            (tol("k", Equal, "v", Some(TaintEffect::NoExecute)), false),
            (tol("other", Exists, "", None), false),
        ] {
            assert_eq!(t.tolerates(&taint), want, "{t:?}");
        }
    }

    #[test]
    fn nil_selector_matches_nothing_empty_matches_all() {
        let l: Labels = [("a".to_string(), "b".to_string())].into();
        assert!(LabelSelector::everything().matches(&l));
        assert!(!LabelSelector::nothing().matches(&l));
    }
}
