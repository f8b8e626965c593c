//! GpuSlicePacking: MIG instances (`nvidia.com/mig-<g>g.<m>gb`) and
//! time-sliced GPUs (`nvidia.com/gpu.shared`) packed best fit, so that the
//! least GPU memory is stranded in half-used nodes. Their counts are
//! extended resources NodeResourcesFit checks; this score prefers the node
//! left with the least of them free after the pod: for MIG, the free MIG
//! memory over all the node's profiles (a 1g.10gb instance goes where
//! 10 GB are left rather than where 40 GB are, keeping the big instances
//! for big pods); for time-sliced replicas, the free replicas. With
//! `gpuPlacement: spread` the order is reversed.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::devices::request::mig_memory_mib;
use framework::devices::{GpuKind, GpuPlacement, MIG_RESOURCE_PREFIX};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "GpuSlicePacking";

#[derive(Debug, Default, Clone, Copy)]
pub struct GpuSlicePacking;

#[derive(Debug, Clone, Copy)]
struct Spread(bool);

impl Plugin for GpuSlicePacking {
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

impl PreScorePlugin for GpuSlicePacking {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let spread = state.read::<GpuPlacement>().copied().unwrap_or_default() == GpuPlacement::Spread;
        state.write(Spread(spread));
        skip_if(!matches!(pod.gpu.kind, GpuKind::Slices { .. }) || nodes.snapshot().fact_counts().gpus == 0)
    }
}

impl ScorePlugin for GpuSlicePacking {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(Spread(spread)) = state.read::<Spread>() else {
            return Err(Status::error("GpuSlicePacking: PreScore did not run"));
        };
        let GpuKind::Slices { resource, count, memory_mib } = &pod.gpu.kind else { return Ok(0) };
        let alloc = &node.node.allocatable;
        let (total, free) = if *memory_mib > 0 {
            // MIG memory over every profile of the node.
            alloc
                .scalars()
                .iter()
                .filter_map(|(name, n)| {
                    let mem = mig_memory_mib(name.strip_prefix(MIG_RESOURCE_PREFIX)?) as i64;
                    Some((n * mem, (n - node.requested.scalar(name)).max(0) * mem))
                })
                .fold((0, 0), |(t, f), (nt, nf)| (t + nt, f + nf))
        } else {
            (alloc.scalar(resource), (alloc.scalar(resource) - node.requested.scalar(resource)).max(0))
        };
        if total <= 0 {
            return Ok(0);
        }
        let taken = i64::from(*count) * if *memory_mib > 0 { *memory_mib as i64 } else { 1 };
        let used = (total - (free - taken).max(0)) * MAX_NODE_SCORE / total;
        Ok(if *spread { MAX_NODE_SCORE - used } else { used })
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(GpuSlicePacking))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::devices::{GPU_SHARED_RESOURCE, GpuRequest};
    use framework::testing::{node, pod};

    const MIG_1G: &str = "nvidia.com/mig-1g.10gb";
    const MIG_3G: &str = "nvidia.com/mig-3g.40gb";

    fn slices(resource: &str, count: u32) -> GpuRequest {
        let memory_mib = resource.strip_prefix(MIG_RESOURCE_PREFIX).map_or(0, mig_memory_mib);
        GpuRequest { kind: GpuKind::Slices { resource: resource.into(), count, memory_mib }, models: None }
    }

    #[test]
    fn best_fit_by_memory_and_by_count() {
        // a: 2 × 1g.10gb + 1 × 3g.40gb (60 GB), one 1g used; b: 7 × 1g.10gb (70 GB), none used;
        // t1: 4 replicas, 3 used; t2: 8 replicas, none used.
        let nodes = vec![
            node("a").resource(MIG_1G, 2).resource(MIG_3G, 1).build(),
            node("b").resource(MIG_1G, 7).build(),
            node("t1").resource(GPU_SHARED_RESOURCE, 4).build(),
            node("t2").resource(GPU_SHARED_RESOURCE, 8).build(),
        ];
        let pods = vec![
            pod("u1").node("a").resource(MIG_1G, 1).arc(),
            pod("u2").node("t1").resource(GPU_SHARED_RESOURCE, 3).arc(),
        ];
        let snap = Snapshot::from_parts(nodes, pods);
        let at = |n: &str| snap.position(n).unwrap();
        // (request, spread, node, score)
        let cases = [
            // a: 60 GB of MIG, 50 free, 40 after the pod: a third used.
            (slices(MIG_1G, 1), false, "a", 33),
            (slices(MIG_1G, 1), false, "b", 14),
            (slices(MIG_1G, 1), true, "a", 67),
            (slices(GPU_SHARED_RESOURCE, 1), false, "t1", 100),
            (slices(GPU_SHARED_RESOURCE, 1), false, "t2", 12),
            (slices(GPU_SHARED_RESOURCE, 1), false, "a", 0),
        ];
        for (gpu, spread, n, want) in cases {
            let p = pod("p").with(|p| p.gpu = gpu.clone()).build();
            let mut state = CycleState::new();
            if spread {
                state.write(GpuPlacement::Spread);
            }
            assert!(GpuSlicePacking.pre_score(&mut state, &p, snap.node_list()).is_success());
            assert_eq!(GpuSlicePacking.score(&state, &p, &snap.view(at(n))).unwrap(), want, "{gpu:?} on {n}");
        }
        let whole = pod("p").with(|p| p.gpu = GpuRequest::whole(1)).build();
        assert!(GpuSlicePacking.pre_score(&mut CycleState::new(), &whole, snap.node_list()).is_skip());
    }
}
