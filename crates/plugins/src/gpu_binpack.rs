//! GpuBinpack: the simpler alternatives to GpuFragmentation, for profiles
//! with `gpuPlacement: binpack` (best fit: the node left with the least
//! free GPU after the pod scores highest, keeping other nodes whole for
//! large jobs) or `gpuPlacement: spread` (worst fit: the node left with
//! the most, spreading load and heat). Inside the node the device is
//! chosen the same way (the fullest device that fits, or the freest). The
//! score is the node's GPU use after the pod, in percent, or its
//! complement for spread.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::devices::{GpuPlacement, MILLI_PER_GPU};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "GpuBinpack";

#[derive(Debug, Default, Clone, Copy)]
pub struct GpuBinpack;

/// Fill (best fit) or empty (worst fit) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spread(bool);

impl Plugin for GpuBinpack {
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

impl PreScorePlugin for GpuBinpack {
    /// Active for pods taking devices in binpack and spread profiles
    /// (fragmentation and fgd have scores of their own).
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let placement = state.read::<GpuPlacement>().copied().unwrap_or_default();
        let skip = !matches!(placement, GpuPlacement::Binpack | GpuPlacement::Spread)
            || !state.pod_gpu(pod).wants_devices()
            || nodes.snapshot().fact_counts().gpus == 0;
        state.write(Spread(placement == GpuPlacement::Spread));
        skip_if(skip)
    }
}

impl ScorePlugin for GpuBinpack {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(Spread(spread)) = state.read::<Spread>() else {
            return Err(Status::error("GpuBinpack: PreScore did not run"));
        };
        let capacity = node.gpus.count() as i64 * i64::from(MILLI_PER_GPU);
        if capacity == 0 {
            return Ok(0);
        }
        let free_after = (node.gpu_state().free_total() - state.pod_gpu(pod).total_milli() as i64).max(0);
        let used = (capacity - free_after) * MAX_NODE_SCORE / capacity;
        Ok(if *spread { MAX_NODE_SCORE - used } else { used })
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(GpuBinpack))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::devices::{DeviceSet, GpuRequest};
    use framework::facts::GPU_RESOURCE;
    use framework::testing::{node, pod};

    #[test]
    fn score_table() {
        // Node a: 8 GPUs, 6 whole ones in use; node b: 8 GPUs, none in use.
        let nodes = vec![node("a").resource(GPU_RESOURCE, 8).build(), node("b").resource(GPU_RESOURCE, 8).build()];
        let used =
            pod("u").node("a").with(|p| (p.gpu, p.gpu_devices) = (GpuRequest::whole(6), DeviceSet::parse("0-5").ok()));
        let snap = Snapshot::from_parts(nodes, vec![used.arc()]);
        // (placement, request, score on a, score on b)
        let cases = [
            (GpuPlacement::Binpack, GpuRequest::whole(1), 87, 12),
            (GpuPlacement::Binpack, GpuRequest::share(500, 0), 81, 6),
            (GpuPlacement::Spread, GpuRequest::whole(1), 13, 88),
            (GpuPlacement::Spread, GpuRequest::whole(2), 0, 75),
        ];
        for (placement, gpu, a, b) in cases {
            let p = pod("p").with(|p| p.gpu = gpu.clone()).build();
            let mut state = CycleState::new();
            state.write(placement);
            assert!(GpuBinpack.pre_score(&mut state, &p, snap.node_list()).is_success());
            let at = |n: &str| GpuBinpack.score(&state, &p, &snap.view(snap.position(n).unwrap())).unwrap();
            assert_eq!((at("a"), at("b")), (a, b), "{placement:?} {gpu:?}");
        }
    }

    #[test]
    fn pre_score_skips() {
        let snap = Snapshot::from_parts(vec![node("a").resource(GPU_RESOURCE, 1).build()], vec![]);
        let skip = |placement: Option<GpuPlacement>, gpu: GpuRequest| {
            let mut state = CycleState::new();
            if let Some(p) = placement {
                state.write(p);
            }
            GpuBinpack.pre_score(&mut state, &pod("p").with(|p| p.gpu = gpu).build(), snap.node_list()).is_skip()
        };
        assert!(skip(None, GpuRequest::whole(1)), "fragmentation is the default");
        assert!(skip(Some(GpuPlacement::Fgd), GpuRequest::whole(1)), "FgdScore's");
        assert!(skip(Some(GpuPlacement::Binpack), GpuRequest::default()), "no GPU");
        assert!(!skip(Some(GpuPlacement::Spread), GpuRequest::whole(1)));
        let e = GpuBinpack.score(&CycleState::new(), &pod("p").build(), &snap.view(0)).unwrap_err();
        assert!(e.message().contains("PreScore"));
    }
}
