//! GpuFragmentation: the FGD idea (Weng et al., "Beware of Fragmentation",
//! ATC '23) as a score: a node scores by how little placing the pod there
//! adds to its GPU fragmentation, measured against the typical pod shapes
//! the scheduler has learned (docs/POLICIES.md, "Fragmentation"). The
//! device inside the node is the one that adds the least (the choice the
//! scheduler then makes when it assumes the pod).
//!
//! Four changes to FGD, each measured on Alibaba's trace (docs/BENCHMARKS.md):
//!
//! - a share goes first where its gap balances the cluster's gaps best
//!   (`gapBalance`, on by default; [`framework::devices::gaps`]): the
//!   Sum-of-Squares rule of online bin packing over the gaps counted by
//!   what the frequent share sizes can fill of them. Among the nodes that
//!   balance equally well (a free device balances alike on every node that
//!   has one), the fragmentation measure decides;
//! - the measure (`measure: Packed`, the default) is the GPU a node
//!   would strand if filled with as many pods of each typical shape as fit,
//!   cpu included (`measure: Stranded` alone), plus twice the slivers of
//!   partly used devices that no mix of typical share sizes fills, where
//!   FGD's (`measure: Fgd`) asks only whether one more pod fits;
//! - a pod that also fits elsewhere leaves alone the nodes of the types
//!   that the pods which fit nothing else will need ([`framework::devices::kept`]:
//!   the GPU models that constrained shapes name, the nodes big enough
//!   for the largest shapes): those rank below every other node;
//! - nodes within `bandThousandths` of fragmentation of each other score
//!   alike, 10 points per band below the best node, down to 45 (so that
//!   GpuModel's preference, weighted more, still wins), and ties are
//!   broken at random (from the seed). FGD's published figures come from
//!   a kube-scheduler that breaks its coarse score ties by node name, a
//!   first fit; a fine score does worse, and so does breaking the ties
//!   towards the fullest node (best fit, this plugin's first version) or
//!   away from idle nodes: on Alibaba's trace random ties place about 0.2
//!   points more of the GPUs on the multi-GPU and model-constrained lists
//!   and as much on the others. Whole nodes stay whole through the
//!   measure (the prior's 8-GPU shape, the multi-GPU shapes seen).
//!
//! Active when the profile's `gpuPlacement` is `fragmentation` (the
//! default). CPU-only pods are scored too: their cpu can leave a GPU node
//! unable to host the typical GPU pods. Nodes without GPUs score as "no
//! fragmentation added".

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::devices::frag::{Measure, placement_effect};
use framework::devices::gaps::GapBalance;
use framework::devices::kept::KeptTypes;
use framework::devices::{DeviceSet, GpuKind, GpuPlacement, GpuRequest, MILLI_PER_GPU, TypicalShapes};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::skip_if;

pub const NAME: &str = "GpuFragmentation";

/// Points per band of fragmentation below the best node.
const BAND_POINTS: i64 = 10;
/// The lowest score. GpuModel gives 100 or 50 at weight 0.4, a 20-point
/// swing; from 100 down to 45 at weight 0.35 this score swings 19.25: the
/// GPU-model preference outweighs any fragmentation, as the policy orders
/// them, and fragmentation decides among the nodes of a model.
const MIN_SCORE: i64 = 45;

/// `GpuFragmentationArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuFragmentationArgs {
    /// `Packed` or `Stranded` (ours) or `Fgd` (the paper's).
    #[serde(default)]
    pub measure: Measure,
    /// Fragmentation (thousandths of a GPU) that counts as one band.
    #[serde(default = "default_band")]
    pub band_thousandths: u32,
    /// Shares go first where their gap balances the cluster's gaps.
    #[serde(default = "default_gap_balance")]
    pub gap_balance: bool,
}

fn default_band() -> u32 {
    100
}

fn default_gap_balance() -> bool {
    true
}

impl Default for GpuFragmentationArgs {
    fn default() -> Self {
        GpuFragmentationArgs {
            measure: Measure::default(),
            band_thousandths: default_band(),
            gap_balance: default_gap_balance(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct GpuFragmentation {
    measure: Measure,
    band: i64,
    gap_balance: bool,
}

/// With the gap balance, a share's raw score is the fragmentation removed
/// less `GAP_SCALE` × the gap cost: nodes compare by cost first. The
/// removed part stays far within ±`GAP_SCALE / 2` (at most 64 devices ×
/// 1000 × the measure's weights).
const GAP_SCALE: i64 = 1_000_000;
const HALF: i64 = GAP_SCALE / 2;

/// A gap-balanced raw score's (−cost, fragmentation removed).
fn split_gap_score(raw: i64) -> (i64, i64) {
    let shifted = raw.saturating_add(HALF);
    (shifted.div_euclid(GAP_SCALE), shifted.rem_euclid(GAP_SCALE) - HALF)
}

/// Gap costs are clamped to ±`COST_LIMIT` (a share that does not fit costs
/// it), so that a gap-balanced score stays within ±`TIER_SCALE / 4`.
const COST_LIMIT: i64 = 1_000_000_000;
/// Nodes of a type kept for other pods ([`framework::devices::kept`]) rank
/// below every other node: their raw score is `TIER_SCALE` lower.
const TIER_SCALE: i64 = 4 * COST_LIMIT * GAP_SCALE;

/// A raw score's (tier: 0, or −1 on a kept type; the score within it).
fn split_tier(raw: i64) -> (i64, i64) {
    let shifted = raw.saturating_add(TIER_SCALE / 2);
    (shifted.div_euclid(TIER_SCALE), shifted.rem_euclid(TIER_SCALE) - TIER_SCALE / 2)
}

/// What PreScore leaves for Score, read once per node: the typical
/// shapes of this cycle, the gap balance (shares only) and the pod's GPU
/// request.
struct Cycle {
    shapes: Arc<TypicalShapes>,
    gaps: Option<GapBalance>,
    request: GpuRequest,
    /// Node types this pod should leave to pods that fit nothing else.
    kept: Option<KeptTypes>,
}

impl Cycle {
    fn keeps(&self, node: &NodeView<'_>) -> bool {
        self.kept.as_ref().is_some_and(|k| k.keeps(node.info().gpu_type()))
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: GpuFragmentationArgs = decode_args(args)?;
    if args.band_thousandths == 0 || args.band_thousandths > MILLI_PER_GPU {
        return Err(ArgsError::new("bandThousandths", "must be from 1 to 1000"));
    }
    Ok(Arc::new(GpuFragmentation {
        measure: args.measure,
        band: i64::from(args.band_thousandths),
        gap_balance: args.gap_balance,
    }))
}

impl Plugin for GpuFragmentation {
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

impl PreScorePlugin for GpuFragmentation {
    /// Skips other placements, clusters without GPU nodes, MIG and
    /// time-sliced pods (GpuSlicePacking's), and while no shape is known.
    /// For a share of compute (thousandths), leaves the gap balance.
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let placement = state.read::<GpuPlacement>().copied().unwrap_or_default();
        let shapes = nodes.snapshot().gpu_shapes();
        let skip = placement != GpuPlacement::Fragmentation
            || nodes.snapshot().fact_counts().gpus == 0
            || matches!(state.pod_gpu(pod).kind, GpuKind::Slices { .. })
            || shapes.is_empty();
        if !skip {
            // Reserve picks the devices by the same measure and balance.
            state.write(self.measure);
            let request = state.pod_gpu(pod).clone();
            let share = matches!(request.kind, GpuKind::Share { milli, .. } if milli > 0);
            let gaps =
                if self.gap_balance && share { GapBalance::new(shapes, nodes.snapshot().gpu_gaps()) } else { None };
            if let Some(g) = &gaps {
                state.write(g.clone());
            }
            let kept = KeptTypes::for_request(shapes, nodes.snapshot().gpu_types(), &request, pod.requests.milli_cpu);
            state.write(Cycle { shapes: shapes.clone(), gaps, request, kept });
        }
        skip_if(skip)
    }
}

/// What placing a pod on a node does.
struct Effect {
    /// The node's fragmentation now.
    before: f64,
    /// The devices and the fragmentation after; None when it does not fit.
    placed: Option<(DeviceSet, f64)>,
    /// The gap balance's cost of the device chosen (shares with the balance on).
    gap_cost: Option<f64>,
}

impl GpuFragmentation {
    fn effect(&self, cycle: &Cycle, pod: &Pod, node: &NodeView<'_>) -> Effect {
        let s = node.gpu_state();
        let (before, placed) = placement_effect(
            self.measure,
            &s,
            &cycle.request,
            pod.requests.milli_cpu,
            &cycle.shapes,
            cycle.gaps.as_ref(),
        );
        Effect { before, placed: placed.map(|(d, f, _)| (d, f)), gap_cost: placed.and_then(|(.., c)| c) }
    }
}

impl ScorePlugin for GpuFragmentation {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(cycle) = state.read::<Cycle>() else {
            return Err(Status::error("GpuFragmentation: PreScore did not run"));
        };
        if !node.summary().has_gpus {
            return Ok(0);
        }
        let e = self.effect(cycle, pod, node);
        // Does not fit (GpuDeviceFit disabled): as if all its free GPU became a fragment.
        let after = e.placed.map_or_else(|| e.before + node.gpus.free_total() as f64, |(_, f)| f);
        // The raw score: fragmentation removed, in thousandths.
        let removed = (e.before - after).round() as i64;
        let inner = if cycle.gaps.is_none() {
            removed
        } else {
            // Costs are whole numbers but for the dead space's tenths:
            // rounded. No cost: the share does not fit, the worst of all.
            let cost = e.gap_cost.map_or(COST_LIMIT, |c| (c.round() as i64).clamp(-COST_LIMIT, COST_LIMIT));
            removed.clamp(-HALF, HALF - 1) - cost * GAP_SCALE
        };
        Ok(if cycle.keeps(node) { inner - TIER_SCALE } else { inner })
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// 100 for the best node, 10 less per band of fragmentation more; at
    /// least [`MIN_SCORE`]. With the gap balance, only the nodes of the
    /// lowest cost are banded; the others get [`MIN_SCORE`].
    fn normalize(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let gaps = state.read::<GapBalance>().is_some();
        // Most cycles keep no node type: no tier to split off then.
        let tiers = state.read::<Cycle>().is_some_and(|c| c.kept.is_some());
        // (tier and −gap cost, fragmentation removed): higher is better in
        // each. The cost is within ±COST_LIMIT, so the tier weighs more.
        let parts = |s: i64| {
            let (tier, inner) = if tiers { split_tier(s) } else { (0, s) };
            let (balance, removed) = if gaps { split_gap_score(inner) } else { (0, inner) };
            (tier * 4 * COST_LIMIT + balance, removed)
        };
        // The best in one pass: the highest tier and balance, and the most
        // removed at them.
        let Some((top, best)) = scores.iter().map(|&s| parts(s)).max() else { return Status::success() };
        for s in scores.iter_mut() {
            let (balance, removed) = parts(*s);
            if balance != top {
                *s = MIN_SCORE;
                continue;
            }
            let bands = (best - removed) / self.band;
            *s = MAX_NODE_SCORE.saturating_sub(bands.saturating_mul(BAND_POINTS)).max(MIN_SCORE);
        }
        Status::success()
    }

    /// The node's fragmentation before and after the pod, and its devices.
    fn explain(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        let Some(cycle) = state.read::<Cycle>() else { return Vec::new() };
        let e = self.effect(cycle, pod, node);
        let free = node.gpus.free_total();
        let free_after = (node.gpu_state().free_total() - cycle.request.total_milli() as i64).max(0);
        let mut out = vec![("fragmentation".to_string(), format!("{:.0}/{free}", e.before))];
        if let Some((devices, after)) = e.placed {
            out.push(("after".to_string(), format!("{after:.0}")));
            if !devices.is_empty() {
                out.push(("devices".to_string(), devices.to_string()));
            }
        }
        if let Some(cost) = e.gap_cost {
            out.push(("gapCost".to_string(), format!("{cost:.1}")));
        }
        if cycle.keeps(node) {
            out.push(("keptForOthers".to_string(), "true".to_string()));
        }
        out.push(("freeAfter".to_string(), free_after.to_string()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::devices::GpuRequest;
    use framework::facts::{GPU_RESOURCE, LABEL_GPU_MODEL};
    use framework::framework::Code;
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

    /// Normalised scores of `gpu` on every node, in snapshot order.
    fn scores(plugin: &Arc<dyn Plugin>, snap: &Snapshot, gpu: GpuRequest) -> Option<Vec<i64>> {
        let p = pod("p").with(|p| p.gpu = gpu).build();
        let mut state = CycleState::new();
        if plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_skip() {
            return None;
        }
        let score = plugin.as_score().unwrap();
        let mut raw: Vec<i64> = snap.node_list().iter().map(|n| score.score(&state, &p, &n).unwrap()).collect();
        assert!(score.normalize(&state, &p, &mut raw).is_success());
        Some(raw)
    }

    #[test]
    fn the_least_fragmenting_node_wins() {
        let seen = [GpuRequest::whole(1), GpuRequest::whole(1), GpuRequest::share(500, 0)];
        // Node a: a 500 share on device 0; node b: nothing; node c: 700 on device 0.
        let snap = cluster(&[("a", &[(500, "0")]), ("b", &[]), ("c", &[(700, "0")])], &seen);
        let at = |name: &str| snap.position(name).unwrap();
        for measure in [Measure::Packed, Measure::Stranded, Measure::Fgd] {
            let args = serde_json::json!({"measure": format!("{measure:?}"), "bandThousandths": 50});
            let plugin = new(Some(&args)).unwrap();
            // A half fills a's half; on b it breaks a whole GPU, on c it does not fit device 0.
            let s = scores(&plugin, &snap, GpuRequest::share(500, 0)).unwrap();
            assert_eq!(s[at("a")], 100, "{measure:?} {s:?}");
            assert_eq!((s[at("b")], s[at("c")]), (MIN_SCORE, MIN_SCORE), "{measure:?} {s:?}");
            // A 300 share fits in c's 300 left exactly.
            let s = scores(&plugin, &snap, GpuRequest::share(300, 0)).unwrap();
            assert_eq!(s[at("c")], 100, "{measure:?} {s:?}");
            // A whole GPU fragments nothing more anywhere: a tie.
            let s = scores(&plugin, &snap, GpuRequest::whole(1)).unwrap();
            assert_eq!((s[at("a")], s[at("b")], s[at("c")]), (100, 100, 100), "{measure:?}");
        }
    }

    /// Reserve picks the devices by the measure the scores used.
    #[test]
    fn pre_score_leaves_its_measure_for_reserve() {
        let snap = cluster(&[("a", &[])], &[GpuRequest::whole(1)]);
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        for measure in [Measure::Packed, Measure::Stranded, Measure::Fgd] {
            let plugin = new(Some(&serde_json::json!({"measure": format!("{measure:?}")}))).unwrap();
            let mut state = CycleState::new();
            assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_success());
            assert_eq!(state.read::<Measure>(), Some(&measure));
        }
    }

    #[test]
    fn bands_and_points() {
        let plugin = new(None).unwrap();
        let state = CycleState::new();
        let p = pod("p").build();
        // fragmentation removed → score
        let cases = [(0, 100), (-99, 100), (-100, 90), (-250, 80), (-5000, 45), (-199, 90)];
        let mut raw: Vec<i64> = cases.iter().map(|(removed, _)| *removed).collect();
        plugin.as_score().unwrap().normalize(&state, &p, &mut raw);
        assert_eq!(raw, cases.map(|(_, want)| want));
    }

    #[test]
    fn pre_score_skips() {
        let plugin = new(None).unwrap();
        let snap = cluster(&[("a", &[])], &[GpuRequest::whole(1)]);
        let mig = GpuRequest {
            kind: GpuKind::Slices { resource: "nvidia.com/mig-1g.10gb".into(), count: 1, memory_mib: 10240 },
            models: None,
        };
        assert!(scores(&plugin, &snap, mig).is_none(), "MIG pods");
        let no_gpus = Snapshot::from_parts(vec![node("n").build()], vec![]);
        assert!(scores(&plugin, &no_gpus, GpuRequest::whole(1)).is_none(), "no GPU nodes");
        assert!(scores(&plugin, &snap, GpuRequest::default()).is_some(), "CPU pods are scored");
        let p = pod("p").with(|p| p.gpu = GpuRequest::whole(1)).build();
        let mut state = CycleState::new();
        state.write(GpuPlacement::Binpack);
        assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_skip(), "binpack");
        let e = plugin.as_score().unwrap().score(&CycleState::new(), &p, &snap.view(0)).unwrap_err();
        assert_eq!(e.code, Code::Error);
    }

    #[test]
    fn explain_shows_the_fragmentation() {
        let plugin = new(Some(&serde_json::json!({"measure": "Fgd"}))).unwrap();
        let snap = cluster(&[("a", &[(500, "0")])], &[GpuRequest::whole(1)]);
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        let mut state = CycleState::new();
        plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list());
        let details = plugin.as_score().unwrap().explain(&state, &p, &snap.view(0));
        // Shapes: whole GPUs 2/4 (seen, prior), 8 GPUs 1/4 (prior), halves
        // 1/4 (the pod on a): the 500 on device 0 is a fragment for the
        // whole GPUs, and everything is for 8 GPUs.
        // The gap balance: the only 500 gap filled, -2 × 1 + 1.
        let want = [
            ("fragmentation", "1125/3500"),
            ("after", "750"),
            ("devices", "0"),
            ("gapCost", "-1.0"),
            ("freeAfter", "3000"),
        ];
        assert_eq!(details, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    /// A 230 share beside a lone 590 leaves 180, which waits for the few
    /// 160s with the twenty 190s beside 810s: the gap balance opens a free
    /// device instead, on the same node (keeping the empty node whole).
    /// Without it, the measure fills the 590's device.
    #[test]
    fn the_gap_balance_keeps_shares_from_crowded_gaps() {
        let mut seen: Vec<GpuRequest> = Vec::new();
        for (milli, n) in [(810, 40), (590, 10), (370, 10), (230, 20), (160, 5)] {
            seen.extend(std::iter::repeat_n(GpuRequest::share(milli, 0), n));
        }
        let crowded: &[(u32, &str)] = &[(810, "0"), (810, "1"), (810, "2"), (810, "3")];
        let nodes: Vec<(String, &[(u32, &str)])> = (0..5)
            .map(|i| (format!("crowded-{i}"), crowded))
            .chain([("lone-590".to_string(), &[(590, "0")][..]), ("empty".to_string(), &[][..])])
            .collect();
        let nodes: Vec<(&str, &[(u32, &str)])> = nodes.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let snap = cluster(&nodes, &seen);
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(230, 0)).build();
        let at = snap.position("lone-590").unwrap();
        for (balance, devices, gap_cost) in [(true, "1", Some("2.0")), (false, "0", None)] {
            let plugin = new(Some(&serde_json::json!({ "gapBalance": balance }))).unwrap();
            let mut state = CycleState::new();
            assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_success());
            let details = plugin.as_score().unwrap().explain(&state, &p, &snap.view(at));
            let get = |k: &str| details.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            assert_eq!(get("devices"), Some(devices), "balance {balance}: {details:?}");
            assert_eq!(get("gapCost"), gap_cost, "balance {balance}");
            // The scores: the 590's node and the empty one tie on the cost of
            // a free device; the measure prefers breaking a used node's GPU.
            let s = scores(&plugin, &snap, GpuRequest::share(230, 0)).unwrap();
            assert_eq!(s[at], 100, "balance {balance}: {s:?}");
            assert!(s[snap.position("crowded-0").unwrap()] < 100, "no room on the 810s' node");
        }
    }

    #[test]
    fn gap_balanced_scores_compare_the_cost_first() {
        let plugin = new(None).unwrap();
        let snap = cluster(&[("a", &[(500, "0")])], &[GpuRequest::share(500, 0)]);
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        let mut state = CycleState::new();
        assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_success());
        assert!(state.read::<GapBalance>().is_some());
        // (gap cost, fragmentation removed) → score
        let cases = [((-3, 0), 100), ((-3, -150), 90), ((-2, 500), MIN_SCORE), ((5, 900), MIN_SCORE), ((-3, -99), 100)];
        let mut raw: Vec<i64> = cases.iter().map(|((cost, removed), _)| removed - cost * GAP_SCALE).collect();
        for (r, ((cost, removed), _)) in raw.iter().zip(&cases) {
            assert_eq!(split_gap_score(*r), (-cost, *removed));
        }
        assert!(plugin.as_score().unwrap().normalize(&state, &p, &mut raw).is_success());
        assert_eq!(raw, cases.map(|(_, want)| want));
    }

    /// Half the typical shapes name T4, which is a third of the free GPUs:
    /// a pod that runs anywhere leaves the T4 node to them even where it
    /// would fragment less; a pod naming T4 is not kept from it.
    #[test]
    fn nodes_kept_for_constrained_shapes_rank_last() {
        let mut cache = framework::cache::Cache::new();
        for (name, model) in [("t4", "T4"), ("v100-a", "V100"), ("v100-b", "V100")] {
            let n = node(name).capacity(64_000, 256 << 30).resource(GPU_RESOURCE, 4).label(LABEL_GPU_MODEL, model);
            cache.upsert_node(n.build());
        }
        // A half on the T4 node: the measure alone would fill it next.
        let half = pod("half").node("t4").with(|p| {
            p.gpu = GpuRequest::share(500, 0);
            p.gpu_devices = DeviceSet::parse("0").ok();
        });
        cache.add_pod(half.arc()).unwrap();
        let t4_only = GpuRequest::share(500, 0).with_models(&["T4"]);
        for (i, g) in [GpuRequest::share(500, 0), t4_only.clone()].iter().enumerate() {
            cache.observe_shape(&pod(&format!("seen-{i}")).with(|p| p.gpu = g.clone()).build());
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let plugin = new(None).unwrap();
        let t4 = snap.position("t4").unwrap();
        let v100 = snap.position("v100-a").unwrap();
        let s = scores(&plugin, &snap, GpuRequest::share(500, 0)).unwrap();
        assert_eq!((s[t4], s[v100]), (MIN_SCORE, 100), "{s:?}");
        let s = scores(&plugin, &snap, t4_only).unwrap();
        assert_eq!(s[t4], 100, "{s:?}");
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        let mut state = CycleState::new();
        assert!(plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_success());
        let details = plugin.as_score().unwrap().explain(&state, &p, &snap.view(t4));
        assert!(details.contains(&("keptForOthers".to_string(), "true".to_string())), "{details:?}");
    }

    #[test]
    fn args() {
        for (args, field) in [
            (serde_json::json!({"bandThousandths": 0}), "bandThousandths"),
            (serde_json::json!({"measure": "Best"}), "measure"),
            (serde_json::json!({"band": 5}), "band"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
