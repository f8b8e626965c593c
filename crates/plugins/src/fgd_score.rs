//! FgdScore: the FGD paper's score (Weng et al., "Beware of Fragmentation",
//! ATC '23) as the paper's simulator computes it, a reference to compare
//! placements against ([`framework::devices::fgd`] has the details), not the
//! product's GpuFragmentation. Active when the profile's `gpuPlacement` is
//! `fgd`; the devices inside the chosen node are then picked the same way.
//!
//! The score is the simulator's: 100 × sigmoid(GPUs of fragmentation the
//! pod removes), truncated, without normalisation, for every pod (CPU-only
//! pods too: their cpu can leave a node's GPUs unusable). The simulator
//! breaks ties between equal scores by node name over a seeded
//! permutation of the nodes: the profile's `tieBreak: nodeOrder`.
//! `bench/openb/fgd-config.yaml` is the whole setting.

use std::sync::{Arc, Mutex, PoisonError};

use framework::cache::{NodeList, NodeView};
use framework::devices::fgd::FgdShapes;
use framework::devices::{GpuKind, GpuPlacement, TypicalShapes};
use framework::framework::{ClusterEvent, CycleState, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "FgdScore";

/// The score of a pod that fits no device of the node (only when
/// GpuDeviceFit is disabled): the simulator's for a share without a device.
const NO_FIT_SCORE: i64 = 0;

#[derive(Debug, Default)]
pub struct FgdScore {
    /// FGD's typical pods for the last shapes seen: they change only when
    /// the snapshot's shapes do.
    cached: Mutex<Option<(Arc<TypicalShapes>, Arc<FgdShapes>)>>,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(FgdScore::default()))
}

impl FgdScore {
    fn shapes(&self, typical: &Arc<TypicalShapes>) -> Arc<FgdShapes> {
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cached {
            Some((t, f)) if Arc::ptr_eq(t, typical) => f.clone(),
            _ => {
                let f = Arc::new(FgdShapes::new(typical));
                *cached = Some((typical.clone(), f.clone()));
                f
            }
        }
    }
}

impl Plugin for FgdScore {
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

impl PreScorePlugin for FgdScore {
    /// Skips other placements, clusters without GPU nodes, and MIG and
    /// time-sliced pods; leaves FGD's typical pods for the score and for
    /// the device choice at Reserve.
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let placement = state.read::<GpuPlacement>().copied().unwrap_or_default();
        let skip = placement != GpuPlacement::Fgd
            || nodes.snapshot().fact_counts().gpus == 0
            || matches!(state.pod_gpu(pod).kind, GpuKind::Slices { .. });
        if !skip {
            state.write(self.shapes(nodes.snapshot().gpu_shapes()));
        }
        skip_if(skip)
    }
}

impl ScorePlugin for FgdScore {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(shapes) = state.read::<Arc<FgdShapes>>() else {
            return Err(Status::error("FgdScore: PreScore did not run"));
        };
        let placed = shapes.place(&node.gpu_state(), state.pod_gpu(pod), pod.requests.milli_cpu);
        Ok(placed.map_or(NO_FIT_SCORE, |(_, score)| score))
    }

    /// The node's fragmentation now, and the devices the pod would get.
    fn explain(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        let Some(shapes) = state.read::<Arc<FgdShapes>>() else { return Vec::new() };
        let s = node.gpu_state();
        let mut out = vec![("fragmentation".to_string(), format!("{:.0}", shapes.fragmentation(&s)))];
        if let Some((devices, _)) = shapes.place(&s, state.pod_gpu(pod), pod.requests.milli_cpu)
            && !devices.is_empty()
        {
            out.push(("devices".to_string(), devices.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::devices::{DeviceSet, GpuRequest};
    use framework::facts::GPU_RESOURCE;
    use framework::testing::{node, pod};

    /// A snapshot of 4-GPU nodes with shares on them, having seen `seen`.
    fn cluster(nodes: &[(&str, &[(u32, &str)])], seen: &[GpuRequest]) -> Snapshot {
        let mut cache = framework::cache::Cache::new();
        for (name, shares) in nodes {
            cache.upsert_node(node(name).capacity(64_000, 256 << 30).resource(GPU_RESOURCE, 4).build());
            for (i, (milli, d)) in shares.iter().enumerate() {
                let p = pod(&format!("{name}-{i}")).node(name).with(|p| {
                    p.gpu = GpuRequest::share(*milli, 0);
                    p.gpu_devices = DeviceSet::parse(d).ok();
                });
                cache.add_pod(p.arc()).unwrap();
            }
        }
        for (i, g) in seen.iter().enumerate() {
            cache.observe_shape(&pod(&format!("seen-{i}")).with(|p| p.gpu = g.clone()).build());
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        snap
    }

    /// Scores of `gpu` on every node, in snapshot order; None when skipped.
    fn scores(snap: &Snapshot, placement: GpuPlacement, gpu: GpuRequest) -> Option<Vec<i64>> {
        let plugin = new(None).unwrap();
        let p = pod("p").with(|p| p.gpu = gpu).build();
        let mut state = CycleState::new();
        state.write(placement);
        if plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_skip() {
            return None;
        }
        let score = plugin.as_score().unwrap();
        Some(snap.node_list().iter().map(|n| score.score(&state, &p, &n).unwrap()).collect())
    }

    #[test]
    fn scores_are_the_simulators() {
        // Typical pods: whole GPUs 3/7 (two seen, the default prior's),
        // halves 2/7 (one seen, a's), 700s 1/7 (c's), 8 GPUs 1/7 (the
        // prior's, never hostable on 4 GPUs).
        let seen = [GpuRequest::whole(1), GpuRequest::whole(1), GpuRequest::share(500, 0)];
        let snap = cluster(&[("a", &[(500, "0")]), ("b", &[]), ("c", &[(700, "0")])], &seen);
        let at = |name: &str| snap.position(name).unwrap();
        // (request, score on a, b, c)
        let cases = [
            // A half fills a's half: its fragmentation falls from 786 to
            // 429 (sigmoid(0.357) = 0.588); on b it breaks a free GPU (571
            // to 786), on c it takes a free GPU as well (729 to 943).
            (GpuRequest::share(500, 0), [58, 44, 44]),
            // A whole GPU removes 143 everywhere: of the free GPU it takes,
            // only the 8-GPU pods' 1/7 was a fragment. A tie.
            (GpuRequest::whole(1), [53, 53, 53]),
        ];
        for (request, want) in cases {
            let got = scores(&snap, GpuPlacement::Fgd, request.clone()).unwrap();
            assert_eq!([got[at("a")], got[at("b")], got[at("c")]], want, "{request:?}");
        }
        assert_eq!(scores(&snap, GpuPlacement::Fragmentation, GpuRequest::whole(1)), None, "other placements");
    }

    #[test]
    fn explain_shows_the_fragmentation_and_devices() {
        let snap = cluster(&[("a", &[(500, "0")])], &[GpuRequest::share(500, 0)]);
        let plugin = new(None).unwrap();
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        let mut state = CycleState::new();
        state.write(GpuPlacement::Fgd);
        assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_success());
        let details = plugin.as_score().unwrap().explain(&state, &p, &snap.view(0));
        let keys: Vec<&str> = details.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["fragmentation", "devices"]);
        assert_eq!(details[1].1, "0", "the half goes beside the other half");
    }

    #[test]
    fn args_are_refused() {
        assert!(new(Some(&serde_json::json!({"measure": "Fgd"}))).is_err());
    }
}
