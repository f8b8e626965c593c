//! NodeResourcesBalancedAllocation, as kube-scheduler v1.36: favours nodes
//! whose resource usage becomes more balanced with the pod placed there.
//!
//! For each scored resource (args `resources`, default cpu and memory) the
//! fraction requested/allocatable is taken, capped at 1; resources the node
//! lacks, and scalar resources the pod does not request, are left out. The
//! balance of a set of fractions is `(1 − σ) × 100` truncated, σ their
//! population standard deviation (for two fractions, |f₁ − f₂| / 2). Since
//! v1.36 (kubernetes#135573) the score compares the balance with the pod
//! (`with`) to the balance of the pods already there (`without`):
//!
//! `score = 50 + (50 + with − without) / 2` (integer division), in 50..=100;
//! 75 means no change.
//!
//! Requests here are the plain ones (no non-zero defaults), and a pod
//! requesting none of the scored resources is not scored at all (PreScore
//! returns Skip, kubernetes#129138).
//!
//! `gpuAware` (not kube's; off unless set, on in gpu-scheduler's default
//! profile) keeps the score where no GPUs are at stake, as
//! ResourceHeadroom: a pod that takes GPUs is not scored, and other pods
//! score 0 on nodes with GPUs.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::resource_allocation::{ResourceAllocationScorer, ResourceSpecArgs, Usage, resources_from_args};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Empty: cpu and memory. Weights must be 1 (0 or absent means 1).
    #[serde(default)]
    pub resources: Vec<ResourceSpecArgs>,
    /// Spread only where no GPUs are at stake (module doc).
    #[serde(default)]
    pub gpu_aware: bool,
}

impl NodeResourcesBalancedAllocationArgs {
    /// kube's `ValidateNodeResourcesBalancedAllocationArgs`, first error only.
    pub fn validate(&self) -> Result<(), ArgsError> {
        for (i, r) in self.resources.iter().enumerate() {
            if self.resources[..i].iter().any(|o| o.name == r.name) {
                return Err(ArgsError::new(format!("resources[{i}].name"), format!("Duplicate value: {:?}", r.name)));
            }
            // Weight 0 is defaulted to 1 before validation.
            if r.weight != 0 && r.weight != 1 {
                return Err(ArgsError::new(format!("resources[{i}].weight"), format!("{}: must be 1", r.weight)));
            }
        }
        Ok(())
    }
}

/// The balance of a set of fractions, as kube computes it (same float
/// operations in the same order, so the truncated result matches).
fn balance(fractions: impl Iterator<Item = f64> + Clone) -> i64 {
    let (mut n, mut total) = (0usize, 0.0f64);
    for f in fractions.clone() {
        n += 1;
        total += f;
    }
    let std = match n {
        0 | 1 => 0.0,
        2 => {
            let mut it = fractions;
            let (a, b) = (it.next().unwrap_or(0.0), it.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        _ => {
            let mean = total / n as f64;
            let sum: f64 = fractions.fold(0.0, |acc, f| acc + (f - mean) * (f - mean));
            (sum / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

fn fraction(taken: i64, allocatable: i64) -> f64 {
    (taken as f64 / allocatable as f64).min(1.0)
}

/// The v1.36 score from the node's usages (see the module doc).
pub fn balanced_score(usages: impl Iterator<Item = Usage>) -> i64 {
    let mut usages = usages;
    let (first, second, third) = (usages.next(), usages.next(), usages.next());
    if let (Some(a), Some(b), None) = (first, second, third) {
        // Two resources, the default (cpu and memory): the same float
        // operations as `balance`, without its buffers.
        let two = |x: f64, y: f64| ((1.0 - ((x - y) / 2.0).abs()) * MAX_NODE_SCORE as f64) as i64;
        let with = two(fraction(a.requested, a.allocatable), fraction(b.requested, b.allocatable));
        let without = two(fraction(a.allocated, a.allocatable), fraction(b.allocated, b.allocatable));
        return MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2;
    }
    // Each fraction is computed once (balance reads them twice or more);
    // a handful of resources fit on the stack, more spill to the heap.
    const ON_STACK: usize = 8;
    let mut stack = [(0.0, 0.0); ON_STACK];
    let mut heap: Vec<(f64, f64)> = Vec::new();
    let mut n = 0;
    for u in first.into_iter().chain(second).chain(third).chain(usages) {
        let pair = (fraction(u.requested, u.allocatable), fraction(u.allocated, u.allocatable));
        if n < ON_STACK {
            stack[n] = pair;
        } else {
            if heap.is_empty() {
                heap.extend_from_slice(&stack);
            }
            heap.push(pair);
        }
        n += 1;
    }
    let pairs = if n <= ON_STACK { &stack[..n] } else { &heap[..] };
    let with = balance(pairs.iter().map(|p| p.0));
    let without = balance(pairs.iter().map(|p| p.1));
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2
}

pub struct BalancedAllocation {
    scorer: ResourceAllocationScorer,
    gpu_aware: bool,
}

/// The pod's request of each scored resource, computed in PreScore.
struct PreScoreState {
    pod_requests: Vec<i64>,
}

/// Builds the plugin from its args.
pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: NodeResourcesBalancedAllocationArgs = decode_args(args)?;
    args.validate()?;
    Ok(Arc::new(BalancedAllocation {
        scorer: ResourceAllocationScorer::new(resources_from_args(&args.resources), true),
        gpu_aware: args.gpu_aware,
    }))
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A score plugin rejects nothing, so no event needs to requeue pods for it.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, _nodes: NodeList<'_>) -> Status {
        if self.gpu_aware && state.pod_gpu(pod).wants_gpu() {
            return Status::skip();
        }
        let pod_requests = self.scorer.pod_requests(pod);
        // Scoring best-effort pods piles them onto one node (kubernetes#129138).
        if ResourceAllocationScorer::is_best_effort(&pod_requests) {
            return Status::skip();
        }
        state.write(PreScoreState { pod_requests });
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        if self.gpu_aware && node.summary().has_gpus {
            return Ok(0);
        }
        match state.read::<PreScoreState>() {
            Some(s) => Ok(balanced_score(self.scorer.usages(node, &s.pod_requests))),
            // As kube: without PreScore, compute the requests here.
            None => {
                let reqs = self.scorer.pod_requests(pod);
                if ResourceAllocationScorer::is_best_effort(&reqs) {
                    return Ok(0);
                }
                Ok(balanced_score(self.scorer.usages(node, &reqs)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::framework::Code;
    use framework::testing::{node, pod};
    use serde_json::json;

    /// Scores of `pod` on each node (sorted by name), or None when PreScore skips.
    fn scores(
        args: Option<serde_json::Value>,
        pod: &Pod,
        nodes: Vec<framework::model::Node>,
        existing: Vec<Arc<Pod>>,
    ) -> Option<Vec<i64>> {
        let pl = new(args.as_ref()).unwrap();
        let snap = Snapshot::from_parts(nodes, existing);
        let mut state = CycleState::new();
        let st = pl.as_pre_score().unwrap().pre_score(&mut state, pod, snap.node_list());
        if st.code == Code::Skip {
            return None;
        }
        assert!(st.is_success());
        let sc = pl.as_score().unwrap();
        assert!(!sc.has_normalize());
        let mut names: Vec<&str> = snap.nodes().iter().map(|n| n.name()).collect();
        names.sort();
        Some(names.iter().map(|n| sc.score(&state, pod, &snap.get(n).unwrap().view()).unwrap()).collect())
    }

    /// The score from the formula written out, for any number of resources.
    fn reference_score(usages: &[Usage]) -> i64 {
        let std_of = |f: Vec<f64>| -> f64 {
            match f.len() {
                0 | 1 => 0.0,
                2 => ((f[0] - f[1]) / 2.0).abs(),
                n => {
                    let mean = f.iter().sum::<f64>() / n as f64;
                    (f.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64).sqrt()
                }
            }
        };
        let frac = |t: i64, a: i64| (t as f64 / a as f64).min(1.0);
        let with = std_of(usages.iter().map(|u| frac(u.requested, u.allocatable)).collect());
        let without = std_of(usages.iter().map(|u| frac(u.allocated, u.allocatable)).collect());
        let (with, without) = (((1.0 - with) * 100.0) as i64, ((1.0 - without) * 100.0) as i64);
        50 + (50 + with - without) / 2
    }

    #[test]
    fn score_matches_the_formula_on_and_off_the_stack() {
        // 2 resources take the closed form; 1, 3 and 8 stay on the stack;
        // 9 and 12 spill to the heap.
        for n in [1usize, 2, 3, 8, 9, 12] {
            let usages: Vec<Usage> = (0..n as i64)
                .map(|i| Usage {
                    weight: 1,
                    allocatable: 1000 + i * 37,
                    allocated: i * 91 % 700,
                    requested: i * 91 % 700 + 50 * i,
                })
                .collect();
            assert_eq!(balanced_score(usages.iter().cloned()), reference_score(&usages), "{n} resources");
        }
    }

    #[test]
    fn score_cases() {
        struct Case {
            name: &'static str,
            args: Option<serde_json::Value>,
            pod: Pod,
            nodes: Vec<framework::model::Node>,
            existing: Vec<Arc<Pod>>,
            want: Option<Vec<i64>>,
        }
        let gpu_args =
            json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu", "weight": 1}]});
        let cases = vec![
            Case {
                name: "best-effort pod is skipped",
                args: None,
                pod: pod("p").build(),
                nodes: vec![node("n1").capacity(4000, 10000).build()],
                existing: vec![],
                want: None,
            },
            Case {
                name: "pod requesting only an unscored resource is skipped",
                args: None,
                pod: pod("p").resource("nvidia.com/gpu", 1).build(),
                nodes: vec![node("n1").capacity(4000, 10000).resource("nvidia.com/gpu", 1).build()],
                existing: vec![],
                want: None,
            },
            Case {
                // Empty nodes (10000m, 20000) and (6000m, 10000); pod 3000m / 5000.
                // n1: without 0,0 → 100; with .3,.25 → σ .025 → 97 → 50 + (50+97-100)/2 = 73
                // n2: without 100; with .5,.5 → 100 → 50 + 50/2 = 75
                name: "nothing scheduled yet",
                args: None,
                pod: pod("p").req(3000, 5000).build(),
                nodes: vec![node("n1").capacity(10000, 20000).build(), node("n2").capacity(6000, 10000).build()],
                existing: vec![],
                want: Some(vec![73, 75]),
            },
            Case {
                // kube's v1.36 test: nodes (6000m, 10000), pod cpu 3000m only.
                // n1 holds 3000m cpu: without .5,0 → σ .25 → 75; with 1,0 → σ .5 → 50
                //   → 50 + (50+50-75)/2 = 50 + 12 = 62
                // n2 holds 3000m / 5000: without .5,.5 → 100; with 1,.5 → 75 → 50 + 25/2 = 62
                name: "kube's example: both nodes 62",
                args: None,
                pod: pod("p").req(3000, 0).build(),
                nodes: vec![node("n1").capacity(6000, 10000).build(), node("n2").capacity(6000, 10000).build()],
                existing: vec![pod("a").node("n1").req(3000, 0).arc(), pod("b").node("n2").req(3000, 5000).arc()],
                want: Some(vec![62, 62]),
            },
            Case {
                // Pod memory only 5000 on (3000m, 5000) nodes.
                // n1 holds 3000m: without 1,0 → 50; with 1,1 → 100 → 50 + (50+100-50)/2 = 100
                // n2 empty: without 0,0 → 100; with 0,1 → 50 → 50 + (50+50-100)/2 = 50
                name: "extremes: imbalanced to balanced is 100, balanced to imbalanced is 50",
                args: None,
                pod: pod("p").req(0, 5000).build(),
                nodes: vec![node("n1").capacity(3000, 5000).build(), node("n2").capacity(3000, 5000).build()],
                existing: vec![pod("a").node("n1").req(3000, 0).arc()],
                want: Some(vec![100, 50]),
            },
            Case {
                // Fractions above 1 are capped. Node (6000m, 10000) holds 3000m;
                // pod 4500m / 2000: with cpu 7500/6000 → 1, mem .2 → σ .4 → 60;
                // without .5,0 → 75 → 50 + (50+60-75)/2 = 50 + 17 = 67
                name: "over-committed fraction capped at 1",
                args: None,
                pod: pod("p").req(4500, 2000).build(),
                nodes: vec![node("n1").capacity(6000, 10000).build()],
                existing: vec![pod("a").node("n1").req(3000, 0).arc()],
                want: Some(vec![67]),
            },
            Case {
                // Plain requests, not non-zero defaults: pod "a" requests nothing
                // and counts 0. Node (4000m, 8000); pod 2000m / 4000:
                // without 0,0 → 100; with .5,.5 → 100 → 75
                name: "pods without requests count zero",
                args: None,
                pod: pod("p").req(2000, 4000).build(),
                nodes: vec![node("n1").capacity(4000, 8000).build()],
                existing: vec![pod("a").node("n1").arc()],
                want: Some(vec![75]),
            },
            Case {
                // Three resources. Node (4000m, 8000, 4 GPUs) holds 1000m / 4000 / 0 GPUs;
                // pod 1000m / 0 / 2 GPUs.
                // without: .25, .5, 0 → mean .25, var (0 + .0625 + .0625)/3 = .041667,
                //   σ .204124 → 79
                // with: .5, .5, .5 → σ 0 → 100 → 50 + (50+100-79)/2 = 50 + 35 = 85
                // Node without GPUs (4000m, 8000), same load: gpu left out;
                //   without .25,.5 → σ .125 → 87; with .5,.5 → 100 → 50 + (50+100-87)/2 = 81
                name: "three resources, gpu node and cpu-only node",
                args: Some(gpu_args.clone()),
                pod: pod("p").req(1000, 0).resource("nvidia.com/gpu", 2).build(),
                nodes: vec![
                    node("n1").capacity(4000, 8000).resource("nvidia.com/gpu", 4).build(),
                    node("n2").capacity(4000, 8000).build(),
                ],
                existing: vec![pod("a").node("n1").req(1000, 4000).arc(), pod("b").node("n2").req(1000, 4000).arc()],
                want: Some(vec![85, 81]),
            },
            Case {
                // The gpu is not requested: left out (a scalar resource), so cpu and
                // memory only. Node (4000m, 8000, 4 GPUs), holds 1000m / 4000, 2 GPUs.
                // without .25,.5 → 87; with pod 1000m / 0: .5,.5 → 100 → 81
                name: "unrequested extended resource left out",
                args: Some(gpu_args),
                pod: pod("p").req(1000, 0).build(),
                nodes: vec![node("n1").capacity(4000, 8000).resource("nvidia.com/gpu", 4).build()],
                existing: vec![pod("a").node("n1").req(1000, 4000).resource("nvidia.com/gpu", 2).arc()],
                want: Some(vec![81]),
            },
            Case {
                // A single resource has no spread: both balances 100 → 75.
                name: "single resource",
                args: Some(json!({"resources": [{"name": "cpu", "weight": 1}]})),
                pod: pod("p").req(1000, 0).build(),
                nodes: vec![node("n1").capacity(4000, 8000).build()],
                existing: vec![pod("a").node("n1").req(2000, 0).arc()],
                want: Some(vec![75]),
            },
            Case {
                // gpuAware: a pod taking GPUs is left to the GPU scores.
                name: "gpu-aware: gpu pod skipped",
                args: Some(json!({"gpuAware": true})),
                pod: pod("p").req(1000, 1000).resource("nvidia.com/gpu", 1).build(),
                nodes: vec![node("n1").capacity(4000, 8000).resource("nvidia.com/gpu", 4).build()],
                existing: vec![],
                want: None,
            },
            Case {
                // gpuAware: a cpu pod scores 0 on the GPU node (n1), as
                // usual on the cpu node (n2: 3000m / 8000 → with .5,.25 →
                // 87; without 0,0 → 100 → 50 + (50+87-100)/2 = 68).
                name: "gpu-aware: cpu pod, gpu node 0",
                args: Some(json!({"gpuAware": true})),
                pod: pod("p").req(2000, 2000).build(),
                nodes: vec![
                    node("n1").capacity(4000, 8000).resource("nvidia.com/gpu", 4).build(),
                    node("n2").capacity(4000, 8000).build(),
                ],
                existing: vec![],
                want: Some(vec![0, 68]),
            },
        ];
        for c in cases {
            assert_eq!(scores(c.args, &c.pod, c.nodes, c.existing), c.want, "{}", c.name);
        }
    }

    #[test]
    fn balance_of_fractions() {
        // σ of two values is half their distance; truncation toward zero.
        for (fr, want) in [
            (vec![], 100),
            (vec![0.7], 100),
            (vec![0.3, 0.25], 97),
            (vec![1.0, 0.0], 50),
            (vec![0.6, 0.25], 82),
            (vec![1.0, 0.0, 1.0, 0.0], 50),
        ] {
            assert_eq!(balance(fr.iter().copied()), want, "{fr:?}");
        }
    }

    #[test]
    fn args_validation() {
        let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
            ("empty", json!({}), None),
            (
                "weights default to 1",
                json!({"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 1}]}),
                None,
            ),
            ("weight must be 1", json!({"resources": [{"name": "cpu", "weight": 2}]}), Some("resources[0].weight")),
            (
                "duplicate resource",
                json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "cpu"}]}),
                Some("resources[2].name"),
            ),
            ("unknown field", json!({"resources": [{"name": "cpu", "wieght": 1}]}), Some("resources[0].wieght")),
        ];
        for (name, args, want) in cases {
            let got = new(Some(&args)).err().map(|e| e.path);
            assert_eq!(got.as_deref(), want, "{name}");
        }
    }
}
