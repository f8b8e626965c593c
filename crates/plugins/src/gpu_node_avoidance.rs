//! GpuNodeAvoidance: keeps GPU nodes for GPU work (DESIGN.md §4). A pod
//! that requests no GPU scores 100 on nodes without GPUs and 0 on GPU
//! nodes, so it lands on a GPU node only when no CPU node fits. The
//! article's score gave any GPU node 50 points whatever the pod, which
//! sends web pods to A100s (docs/POLICIES.md).

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "GpuNodeAvoidance";

#[derive(Debug, Default, Clone, Copy)]
pub struct GpuNodeAvoidance;

impl Plugin for GpuNodeAvoidance {
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

impl PreScorePlugin for GpuNodeAvoidance {
    /// GPU pods are GpuModel's business; without GPU nodes every node
    /// would score 100.
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        skip_if(state.pod_gpu(pod).wants_gpu() || nodes.snapshot().fact_counts().gpus == 0)
    }
}

impl ScorePlugin for GpuNodeAvoidance {
    fn score(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        Ok(if node.summary().has_gpus { 0 } else { MAX_NODE_SCORE })
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(GpuNodeAvoidance))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::facts::GPU_RESOURCE;
    use framework::testing::{node, pod};

    #[test]
    fn score_table() {
        let cases = [
            ("cpu pod, cpu node", 0, 0, Some(100)),
            ("cpu pod, gpu node", 0, 8, Some(0)),
            ("cpu pod, node with 0 gpus allocatable", 0, 0, Some(100)),
            ("gpu pod: skipped", 1, 8, None),
        ];
        for (name, pod_gpus, node_gpus, want) in cases {
            let mut n = node("n");
            if node_gpus > 0 {
                n = n.resource(GPU_RESOURCE, node_gpus);
            }
            let mut p = pod("p").req(100, 0);
            if pod_gpus > 0 {
                p = p.resource(GPU_RESOURCE, pod_gpus);
            }
            let p = p.build();
            // Another GPU node, so that the cluster has GPUs whatever `n` is.
            let other = node("other").resource(GPU_RESOURCE, 1).build();
            let snap = Snapshot::from_parts(vec![n.build(), other], vec![]);
            let mut state = CycleState::new();
            let pre = GpuNodeAvoidance.pre_score(&mut state, &p, snap.node_list());
            match want {
                None => assert!(pre.is_skip(), "{name}"),
                Some(score) => {
                    assert!(pre.is_success(), "{name}");
                    let at = snap.position("n").unwrap();
                    assert_eq!(GpuNodeAvoidance.score(&state, &p, &snap.view(at)), Ok(score), "{name}");
                }
            }
        }
    }

    #[test]
    fn a_cluster_without_gpu_nodes_skips() {
        let snap = Snapshot::from_parts(vec![node("n").build()], vec![]);
        assert!(GpuNodeAvoidance.pre_score(&mut CycleState::new(), &pod("p").build(), snap.node_list()).is_skip());
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"weight": 1}))).is_err());
    }
}
