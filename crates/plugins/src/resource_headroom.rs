//! ResourceHeadroom: the article's resource score (15 % of its total):
//! the mean of the cpu and memory fractions left free once the pod is
//! placed, × 100. Unlike the article's code it subtracts the pods already
//! on the node too, or a full node would score like an empty one
//! (docs/POLICIES.md). It plays the part of NodeResourcesFit's
//! LeastAllocated score, which the policy profile leaves off.
//!
//! Spreading cpu works against packing GPUs, so by default (`gpuAware`)
//! it spreads only where no GPUs are at stake: a pod that takes GPUs is
//! not scored (the GPU placement scores place it), and for other pods a
//! node with GPUs scores 0 (its cpu is there to feed its GPUs).

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::skip_if;

pub const NAME: &str = "ResourceHeadroom";

/// `ResourceHeadroomArgs`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceHeadroomArgs {
    /// Spread only where no GPUs are at stake (see the module doc); false
    /// scores every pod on every node by the article's formula.
    #[serde(default = "yes")]
    pub gpu_aware: bool,
}

fn yes() -> bool {
    true
}

impl Default for ResourceHeadroomArgs {
    fn default() -> Self {
        ResourceHeadroomArgs { gpu_aware: yes() }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ResourceHeadroom {
    gpu_aware: bool,
}

impl Default for ResourceHeadroom {
    fn default() -> Self {
        ResourceHeadroom { gpu_aware: true }
    }
}

/// The share of `allocatable` still free after `taken`, in 0..=1; a node
/// without any of the resource has none free.
fn free_fraction(allocatable: i64, taken: i64) -> f64 {
    if allocatable <= 0 {
        return 0.0;
    }
    ((allocatable - taken) as f64 / allocatable as f64).clamp(0.0, 1.0)
}

impl Plugin for ResourceHeadroom {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A score rejects nothing: no event needs to requeue pods for it.
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

impl PreScorePlugin for ResourceHeadroom {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, _nodes: NodeList<'_>) -> Status {
        skip_if(self.gpu_aware && state.pod_gpu(pod).wants_gpu())
    }
}

impl ScorePlugin for ResourceHeadroom {
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let s = node.summary();
        if self.gpu_aware && s.has_gpus {
            return Ok(0);
        }
        let cpu = free_fraction(s.allocatable_milli_cpu, s.requested_milli_cpu + pod.requests.milli_cpu);
        let memory = free_fraction(s.allocatable_memory, s.requested_memory + pod.requests.memory);
        Ok(((cpu + memory) / 2.0 * MAX_NODE_SCORE as f64) as i64)
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: ResourceHeadroomArgs = decode_args(args)?;
    Ok(Arc::new(ResourceHeadroom { gpu_aware: args.gpu_aware }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::facts::GPU_RESOURCE;
    use framework::framework::Code;
    use framework::testing::{node, pod};

    /// (name, already requested cpu/mem, pod cpu/mem, score)
    type Case = (&'static str, (i64, i64), (i64, i64), i64);

    const GI: i64 = 1 << 30;

    #[test]
    fn score_table() {
        // Node: 4 cpu, 16 GiB.
        let cases: &[Case] = &[
            ("empty node, empty pod", (0, 0), (0, 0), 100),
            ("empty node, quarter pod", (0, 0), (1000, 4 * GI), 75),
            ("half full after the pod", (1000, 4 * GI), (1000, 4 * GI), 50),
            ("cpu full, memory empty", (3000, 0), (1000, 0), 50),
            ("pods already there count", (2000, 8 * GI), (0, 0), 50),
            ("over-full clamps to 0", (4000, 16 * GI), (1000, GI), 0),
            ("truncated, not rounded", (0, 0), (1, 0), 99),
        ];
        for (name, (used_cpu, used_mem), (cpu, mem), want) in cases {
            let mut info = node("n").capacity(4000, 16 * GI).info();
            if *used_cpu > 0 || *used_mem > 0 {
                info.add_pod(pod("existing").node("n").req(*used_cpu, *used_mem).arc());
            }
            let got =
                ResourceHeadroom::default().score(&CycleState::new(), &pod("p").req(*cpu, *mem).build(), &info.view());
            assert_eq!(got, Ok(*want), "{name}");
        }
    }

    #[test]
    fn a_node_without_a_resource_has_no_headroom_in_it() {
        let info = node("n").capacity(0, 16 * GI).info();
        assert_eq!(ResourceHeadroom::default().score(&CycleState::new(), &pod("p").build(), &info.view()), Ok(50));
    }

    /// Where GPUs are at stake the score stays out: (name, gpuAware, pod
    /// GPUs, node GPUs, PreScore skips, score on the node half full).
    #[test]
    fn gpus_at_stake_table() {
        let cases: &[(&str, bool, i64, i64, bool, i64)] = &[
            ("cpu pod, cpu node", true, 0, 0, false, 50),
            ("cpu pod, gpu node: 0, its cpu feeds its GPUs", true, 0, 8, false, 0),
            ("gpu pod: left to the GPU scores", true, 1, 8, true, 0),
            ("not gpu-aware: cpu pod, gpu node", false, 0, 8, false, 50),
            ("not gpu-aware: gpu pod", false, 1, 8, false, 50),
        ];
        for (name, aware, pod_gpus, node_gpus, skipped, want) in cases {
            let plugin = new(Some(&serde_json::json!({ "gpuAware": aware }))).unwrap();
            let mut n = node("n").capacity(4000, 16 * GI);
            if *node_gpus > 0 {
                n = n.resource(GPU_RESOURCE, *node_gpus);
            }
            let mut info = n.info();
            info.add_pod(pod("existing").node("n").req(1000, 4 * GI).arc());
            let mut p = pod("p").req(1000, 4 * GI);
            if *pod_gpus > 0 {
                p = p.resource(GPU_RESOURCE, *pod_gpus);
            }
            let p = p.build();
            let snap = Snapshot::from_parts(vec![info.node.clone()], vec![]);
            let mut state = CycleState::new();
            let st = plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list());
            assert_eq!(st.code == Code::Skip, *skipped, "{name}");
            if !skipped {
                assert_eq!(plugin.as_score().unwrap().score(&state, &p, &info.view()), Ok(*want), "{name}");
            }
        }
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"resources": []}))).is_err());
        assert!(new(Some(&serde_json::json!({"gpuAware": false}))).is_ok());
    }
}
