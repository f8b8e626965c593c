//! ResourceHeadroom: the article's resource score (15 % of its total):
//! the mean of the cpu and memory fractions left free once the pod is
//! placed, × 100. Unlike the article's code it subtracts the pods already
//! on the node too, or a full node would score like an empty one
//! (docs/POLICIES.md). It plays the part of NodeResourcesFit's
//! LeastAllocated score, which the policy profile leaves off.

use std::sync::Arc;

use engine::cache::NodeView;
use engine::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, ScorePlugin, Status};
use engine::model::Pod;
use engine::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "ResourceHeadroom";

#[derive(Debug, Default, Clone, Copy)]
pub struct ResourceHeadroom;

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

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl ScorePlugin for ResourceHeadroom {
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let s = node.summary();
        let cpu = free_fraction(s.allocatable_milli_cpu, s.requested_milli_cpu + pod.requests.milli_cpu);
        let memory = free_fraction(s.allocatable_memory, s.requested_memory + pod.requests.memory);
        Ok(((cpu + memory) / 2.0 * MAX_NODE_SCORE as f64) as i64)
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(ResourceHeadroom))
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::testing::{node, pod};

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
            let got = ResourceHeadroom.score(&CycleState::new(), &pod("p").req(*cpu, *mem).build(), &info.view());
            assert_eq!(got, Ok(*want), "{name}");
        }
    }

    #[test]
    fn a_node_without_a_resource_has_no_headroom_in_it() {
        let info = node("n").capacity(0, 16 * GI).info();
        assert_eq!(ResourceHeadroom.score(&CycleState::new(), &pod("p").build(), &info.view()), Ok(50));
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"resources": []}))).is_err());
    }
}
