//! Scoring machinery shared by NodeResourcesFit and
//! NodeResourcesBalancedAllocation (kube-scheduler's
//! `noderesources/resource_allocation.go`): the list of scored resources
//! with weights, the pod's request for each, and, per node, how much of
//! each resource the node offers and how much is already taken.
//!
//! Two flavours of "taken", as in kube-scheduler: NodeResourcesFit counts
//! cpu and memory with the non-zero defaults (100m, 200Mi for containers
//! that request nothing), BalancedAllocation counts the plain requests.

use std::sync::Arc;

use framework::cache::NodeView;
use framework::model::Pod;
use framework::registry::ArgsError;
use framework::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, ResourceName, is_scalar_resource_name};
use serde::Deserialize;

/// One `{name, weight}` entry of a plugin's `resources` list, as written in
/// the config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceSpecArgs {
    pub name: String,
    /// 0 (or absent) means the default weight, 1.
    #[serde(default)]
    pub weight: i64,
}

/// How a scored resource is looked up on pods and nodes, decided once from
/// its name so the per-node path does not compare strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cpu,
    Memory,
    EphemeralStorage,
    /// Any other name, looked up among the node's scalar resources.
    /// `scalar` marks names kube-scheduler treats as scalar resources
    /// (extended, hugepages, `kubernetes.io/`-prefixed, attachable volumes):
    /// those are left out of the score when the pod does not request them.
    Other {
        scalar: bool,
    },
}

/// A scored resource with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: ResourceName,
    pub weight: i64,
    kind: Kind,
}

impl ResourceSpec {
    pub fn new(name: &str, weight: i64) -> Self {
        let kind = match name {
            CPU => Kind::Cpu,
            MEMORY => Kind::Memory,
            EPHEMERAL_STORAGE => Kind::EphemeralStorage,
            _ => Kind::Other { scalar: is_scalar(name) },
        };
        ResourceSpec { name: Arc::from(name), weight, kind }
    }
}

/// kube-scheduler's `IsScalarResourceName`: the engine's scalar classes plus
/// prefixed native resources (`kubernetes.io/...`).
fn is_scalar(name: &str) -> bool {
    is_scalar_resource_name(name) || name.contains("kubernetes.io/")
}

/// The default scored resources of both plugins: cpu and memory, weight 1.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new(CPU, 1), ResourceSpec::new(MEMORY, 1)]
}

/// Applies kube-scheduler's defaulting to a `resources` list: an empty list
/// means cpu and memory, a weight of 0 means 1.
pub fn resources_from_args(list: &[ResourceSpecArgs]) -> Vec<ResourceSpec> {
    if list.is_empty() {
        return default_resources();
    }
    list.iter().map(|r| ResourceSpec::new(&r.name, if r.weight == 0 { 1 } else { r.weight })).collect()
}

/// Checks weights of a (defaulted) resource list are in (0, 100], naming
/// the field as `<path>[i].weight`.
pub fn validate_weights(list: &[ResourceSpecArgs], path: &str) -> Result<(), ArgsError> {
    for (i, r) in list.iter().enumerate() {
        // Weight 0 is defaulted to 1 before validation, as in kube-scheduler.
        if r.weight < 0 || r.weight > 100 {
            return Err(ArgsError::new(
                format!("{path}[{i}].weight"),
                format!("resource weight of {} not in valid range (0, 100]", r.name),
            ));
        }
    }
    Ok(())
}

/// How much of one resource a node offers and how much is taken, without
/// and with the pod being scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub weight: i64,
    /// The node's allocatable amount; never 0 (such resources are left out).
    pub allocatable: i64,
    /// Taken by the pods already on the node.
    pub allocated: i64,
    /// `allocated` plus the pod's request.
    pub requested: i64,
}

/// Computes pod requests and node usage for a list of scored resources.
#[derive(Debug, Clone)]
pub struct ResourceAllocationScorer {
    resources: Vec<ResourceSpec>,
    /// Count plain requests for cpu and memory (BalancedAllocation) instead
    /// of the non-zero defaults (NodeResourcesFit).
    use_requested: bool,
}

impl ResourceAllocationScorer {
    pub fn new(resources: Vec<ResourceSpec>, use_requested: bool) -> Self {
        ResourceAllocationScorer { resources, use_requested }
    }

    pub fn resources(&self) -> &[ResourceSpec] {
        &self.resources
    }

    /// The pod's request of each scored resource, in the order of
    /// [`Self::resources`]. Computed once per pod, in PreScore.
    pub fn pod_requests(&self, pod: &Pod) -> Vec<i64> {
        self.resources.iter().map(|r| self.pod_request(pod, r)).collect()
    }

    fn pod_request(&self, pod: &Pod, spec: &ResourceSpec) -> i64 {
        match spec.kind {
            Kind::Cpu if self.use_requested => pod.requests.milli_cpu,
            Kind::Cpu => pod.non_zero_milli_cpu,
            Kind::Memory if self.use_requested => pod.requests.memory,
            Kind::Memory => pod.non_zero_memory,
            Kind::EphemeralStorage => pod.requests.ephemeral_storage,
            Kind::Other { .. } => pod.requests.scalar(&spec.name),
        }
    }

    /// A pod requesting none of the scored resources (kube's "best effort"
    /// check of BalancedAllocation).
    pub fn is_best_effort(pod_requests: &[i64]) -> bool {
        pod_requests.iter().all(|&r| r == 0)
    }

    /// The node's allocatable amount and what its pods already take of one
    /// resource, or None when the resource is left out of the score: a
    /// scalar resource the pod does not request, or one the node lacks.
    fn allocatable_allocated(&self, node: &NodeView<'_>, spec: &ResourceSpec, pod_request: i64) -> Option<(i64, i64)> {
        // Standard resources come from the summary; only extended ones
        // need the NodeInfo.
        let n = node.summary();
        let (allocatable, allocated) = match spec.kind {
            Kind::Cpu if self.use_requested => (n.allocatable_milli_cpu, n.requested_milli_cpu),
            Kind::Cpu => (n.allocatable_milli_cpu, n.non_zero_milli_cpu),
            Kind::Memory if self.use_requested => (n.allocatable_memory, n.requested_memory),
            Kind::Memory => (n.allocatable_memory, n.non_zero_memory),
            Kind::EphemeralStorage => (n.allocatable_ephemeral_storage, n.requested_ephemeral_storage),
            Kind::Other { scalar } => {
                if scalar && pod_request == 0 {
                    return None;
                }
                (node.node.allocatable.scalar(&spec.name), node.requested.scalar(&spec.name))
            }
        };
        (allocatable != 0).then_some((allocatable, allocated))
    }

    /// The usage of each scored resource the node has, given the pod's
    /// requests from [`Self::pod_requests`]. Allocation-free; cloneable for
    /// scorers that need two passes.
    pub fn usages<'a>(
        &'a self,
        node: &'a NodeView<'a>,
        pod_requests: &'a [i64],
    ) -> impl Iterator<Item = Usage> + Clone + 'a {
        self.resources.iter().zip(pod_requests).filter_map(move |(spec, &req)| {
            self.allocatable_allocated(node, spec, req).map(|(allocatable, allocated)| Usage {
                weight: spec.weight,
                allocatable,
                allocated,
                requested: allocated + req,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::testing::{node, pod};

    /// A case: name, the `resources` args, the defaulted (name, weight) list.
    type DefaultsCase = (&'static str, Vec<ResourceSpecArgs>, Vec<(&'static str, i64)>);

    #[test]
    fn defaults_and_weights() {
        let cases: &[DefaultsCase] = &[
            ("empty list means cpu and memory", vec![], vec![("cpu", 1), ("memory", 1)]),
            (
                "weight 0 defaults to 1",
                vec![ResourceSpecArgs { name: "nvidia.com/gpu".into(), weight: 0 }],
                vec![("nvidia.com/gpu", 1)],
            ),
            (
                "explicit weights kept",
                vec![
                    ResourceSpecArgs { name: "cpu".into(), weight: 3 },
                    ResourceSpecArgs { name: "memory".into(), weight: 5 },
                ],
                vec![("cpu", 3), ("memory", 5)],
            ),
        ];
        for (name, args, want) in cases {
            let got: Vec<(String, i64)> =
                resources_from_args(args).iter().map(|r| (r.name.to_string(), r.weight)).collect();
            let want: Vec<(String, i64)> = want.iter().map(|(n, w)| (n.to_string(), *w)).collect();
            assert_eq!(got, want, "{name}");
        }
        let bad = [ResourceSpecArgs { name: "cpu".into(), weight: 101 }];
        let err = validate_weights(&bad, "scoringStrategy.resources").unwrap_err();
        assert_eq!(err.path, "scoringStrategy.resources[0].weight");
        assert!(validate_weights(&[ResourceSpecArgs { name: "cpu".into(), weight: -1 }], "r").is_err());
        assert!(validate_weights(&[ResourceSpecArgs { name: "cpu".into(), weight: 100 }], "r").is_ok());
    }

    #[test]
    fn usages_follow_kube_rules() {
        // Node: 4 cpu, 32Gi, 2 GPUs, 100Gi ephemeral; one pod with no
        // requests (non-zero: 100m, 200Mi) and one with 1 cpu, 1 GPU.
        let n = node("n")
            .resource("nvidia.com/gpu", 2)
            .resource("ephemeral-storage", 100 << 30)
            .resource("example.com/foo", 4)
            .build();
        let existing =
            vec![pod("a").node("n").arc(), pod("b").node("n").req(1000, 0).resource("nvidia.com/gpu", 1).arc()];
        let snap = Snapshot::from_parts(vec![n], existing);
        let info = snap.get("n").unwrap();
        let specs = vec![
            ResourceSpec::new("cpu", 1),
            ResourceSpec::new("memory", 1),
            ResourceSpec::new("nvidia.com/gpu", 2),
            ResourceSpec::new("ephemeral-storage", 1),
            ResourceSpec::new("example.com/foo", 1),
            ResourceSpec::new("example.com/absent", 1),
            ResourceSpec::new("pods", 1),
        ];
        let incoming = pod("p").req(500, 1 << 30).resource("nvidia.com/gpu", 1).build();

        // Non-zero flavour (NodeResourcesFit).
        let fit = ResourceAllocationScorer::new(specs.clone(), false);
        let reqs = fit.pod_requests(&incoming);
        assert_eq!(reqs, vec![500, 1 << 30, 1, 0, 0, 0, 0]);
        let got: Vec<Usage> = fit.usages(&info.view(), &reqs).collect();
        let mem_nz = 200 * 1024 * 1024; // pod "b" requests cpu only: its memory counts 200Mi, as does "a"'s
        assert_eq!(
            got,
            vec![
                // cpu: 100m (a, default) + 1000m (b), plus 500m.
                Usage { weight: 1, allocatable: 4000, allocated: 1100, requested: 1600 },
                Usage { weight: 1, allocatable: 32 << 30, allocated: 2 * mem_nz, requested: 2 * mem_nz + (1 << 30) },
                Usage { weight: 2, allocatable: 2, allocated: 1, requested: 2 },
                // ephemeral-storage is not scalar: kept though the pod asks none.
                Usage { weight: 1, allocatable: 100 << 30, allocated: 0, requested: 0 },
                // example.com/foo, absent and pods: left out (not requested / not on node).
            ]
        );

        // Plain-requests flavour (BalancedAllocation).
        let bal = ResourceAllocationScorer::new(specs[..2].to_vec(), true);
        let reqs = bal.pod_requests(&incoming);
        let got: Vec<Usage> = bal.usages(&info.view(), &reqs).collect();
        assert_eq!(got[0], Usage { weight: 1, allocatable: 4000, allocated: 1000, requested: 1500 });
        assert_eq!(got[1], Usage { weight: 1, allocatable: 32 << 30, allocated: 0, requested: 1 << 30 });
        assert!(ResourceAllocationScorer::is_best_effort(&bal.pod_requests(&pod("be").build())));
        assert!(!ResourceAllocationScorer::is_best_effort(&reqs));
    }
}
