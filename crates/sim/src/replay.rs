//! `gpu-scheduler replay`: a GPU cluster trace replayed through the same
//! `Scheduler` as `simulate` and `run`, with the FGD paper's protocol:
//! the pods shuffled with a seed, random copies appended until their GPU
//! requests reach `inflate` × the cluster's GPUs, then scheduled one at a
//! time in that order; a pod that does not fit is dropped (never retried),
//! and no pod finishes. After each pod the replay records the GPU
//! requests arrived and the GPU allocated, both as shares of the cluster's
//! GPUs; the curve gives, for every whole percent arrived, the mean
//! allocation over the pods at that percent (rounded), as the paper's
//! analysis does, and the cluster's fragmentation ratio there.

use std::sync::Arc;

use engine::config::Configuration;
use engine::convert;
use engine::devices::GpuKind;
use engine::devices::frag::Fragmentation;
use engine::framework::{Binder, Status};
use engine::model::Pod;
use engine::node_info::cluster_fragmentation;
use engine::profile::{DefaultPlugin, build_profiles};
use engine::registry::Registry;
use engine::scheduler::{CycleOutcome, ObjectChange, Scheduler};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::openb::{TraceNode, TracePod};
use crate::simulate::{SimError, in_pool};

/// Replay settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// Shuffles the pods, picks the copies, and breaks score ties.
    pub seed: u64,
    /// GPU requests to reach, as a multiple of the cluster's GPUs.
    pub inflate: f64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { seed: 42, inflate: 1.3 }
    }
}

/// One point of the allocation curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    /// GPU requests arrived, % of the cluster's GPUs.
    pub arrived_pct: u32,
    /// GPU allocated, % of the cluster's GPUs (mean over the pods that
    /// arrived at this percent).
    pub allocated_pct: f64,
    /// Share of the free GPU that no typical pod can use, % (after the
    /// last pod that arrived at this percent).
    pub fragmentation_pct: f64,
}

/// Pods that did not fit, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failed {
    pub cpu_only: usize,
    pub gpu_share: usize,
    pub one_gpu: usize,
    pub multi_gpu: usize,
    /// Of all the above, pods that name GPU models.
    pub with_models: usize,
}

impl Failed {
    pub fn total(&self) -> usize {
        self.cpu_only + self.gpu_share + self.one_gpu + self.multi_gpu
    }
}

/// A node's GPUs at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGpuUse {
    pub name: String,
    pub model: String,
    pub gpus: usize,
    /// Thousandths allocated over all its GPUs.
    pub allocated_milli: i64,
}

/// What a replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub gpus_total: i64,
    pub nodes: usize,
    /// Pods replayed (the list and its copies).
    pub pods: usize,
    pub placed: usize,
    pub failed: Failed,
    /// GPU requests arrived and GPU allocated at the end, thousandths.
    pub arrived_milli: i64,
    pub allocated_milli: i64,
    pub curve: Vec<CurvePoint>,
    pub node_use: Vec<NodeGpuUse>,
    pub seed: u64,
    pub inflate: f64,
}

impl Replay {
    /// The curve's allocation at `arrived_pct` (None past its end).
    pub fn allocated_at(&self, arrived_pct: u32) -> Option<f64> {
        self.curve.iter().find(|p| p.arrived_pct == arrived_pct).map(|p| p.allocated_pct)
    }
}

/// The simulated API: bindings always succeed.
pub(crate) struct ReplayBinder;

impl Binder for ReplayBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// The arrival order: the list by name, shuffled, then random copies until
/// the GPU requests would pass `inflate` × `capacity` (thousandths); or,
/// when the list alone asks more, random pods left out until it does not
/// (the paper's tuning, both ways).
pub fn arrival_order(pods: &[TracePod], capacity_milli: i64, opts: &ReplayOptions) -> Vec<(usize, Option<usize>)> {
    let mut by_name: Vec<usize> = (0..pods.len()).collect();
    by_name.sort_by(|&a, &b| pods[a].name.cmp(&pods[b].name));
    let mut rng = StdRng::seed_from_u64(opts.seed);
    by_name.shuffle(&mut rng);
    let mut order: Vec<(usize, Option<usize>)> = by_name.into_iter().map(|i| (i, None)).collect();
    let target = opts.inflate * capacity_milli as f64;
    let mut total: i64 = pods.iter().map(TracePod::gpu_milli_total).sum();
    if pods.is_empty() || pods.iter().all(|p| p.gpus == 0) {
        return order;
    }
    while total as f64 > target && !order.is_empty() {
        let (i, _) = order.remove(rng.random_range(0..order.len()));
        total -= pods[i].gpu_milli_total();
    }
    let mut copy = 0;
    loop {
        let i = rng.random_range(0..pods.len());
        let milli = pods[i].gpu_milli_total();
        if (total + milli) as f64 > target {
            break;
        }
        total += milli;
        order.push((i, Some(copy)));
        copy += 1;
    }
    order
}

/// Replays `pods` on `nodes` with `cfg`; `progress(done, total)` after each pod.
pub fn replay(
    nodes: &[TraceNode],
    pods: &[TracePod],
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
    opts: &ReplayOptions,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<Replay, SimError> {
    in_pool(|| {
        let (mut sched, converted) = trace_scheduler(nodes, pods, cfg, registry, defaults, opts.seed)?;
        let now = 0;
        let gpus_total: i64 = nodes.iter().map(|n| n.gpus).sum();
        let capacity = gpus_total * 1000;
        let order = arrival_order(pods, capacity, opts);
        let total = order.len();

        let mut samples: Vec<(f64, f64)> = Vec::with_capacity(total + 1);
        samples.push((0.0, 0.0));
        let mut frag_at: Vec<(i64, f64)> = vec![(0, fragmentation(&sched, nodes).ratio())];
        let (mut arrived, mut allocated, mut placed) = (0i64, 0i64, 0usize);
        let mut failed = Failed::default();
        let pct = |milli: i64| if capacity > 0 { 100.0 * milli as f64 / capacity as f64 } else { 0.0 };
        for (done, &(i, copy)) in order.iter().enumerate() {
            let mut pod = converted[i].clone();
            if let Some(c) = copy {
                pod.name = format!("{}-copy-{c}", pod.name);
                pod.uid = format!("{}/{}", pod.namespace, pod.name);
            }
            let milli = pod.gpu.total_milli() as i64;
            let uid = pod.uid.clone();
            let kind = pod.gpu.clone();
            arrived += milli;
            sched.on_pod_upsert(pod, now);
            match sched.schedule_one(now) {
                Some(CycleOutcome::Assumed(mut task)) => {
                    let status: Status = task.bind(&ReplayBinder);
                    let bound = (*task.pod).clone();
                    sched.finish_binding(*task, &status, now);
                    if status.is_success() {
                        sched.on_pod_upsert(bound, now);
                        allocated += milli;
                        placed += 1;
                    }
                }
                Some(CycleOutcome::Failed(_)) | None => {
                    // Dropped, as in the paper: never retried.
                    sched.on_pod_delete(&uid, now);
                    match kind.kind {
                        GpuKind::None | GpuKind::Slices { .. } => failed.cpu_only += 1,
                        GpuKind::Share { .. } => failed.gpu_share += 1,
                        GpuKind::Whole { count: 1 } => failed.one_gpu += 1,
                        GpuKind::Whole { .. } => failed.multi_gpu += 1,
                    }
                    failed.with_models += usize::from(kind.models.is_some());
                }
            }
            samples.push((pct(arrived), pct(allocated)));
            // The fragmentation after the last pod of each whole percent.
            let next = order.get(done + 1).map(|&(j, _)| arrived + pods[j].gpu_milli_total());
            let here = pct(arrived).round() as i64;
            if next.is_none_or(|n| pct(n).round() as i64 != here) {
                frag_at.push((here, fragmentation(&sched, nodes).ratio()));
            }
            progress(done + 1, total);
        }

        let last = (opts.inflate * 100.0).round().max(0.0) as u32;
        let curve = curve(&samples, &frag_at, last);
        let node_use = node_use(&sched, nodes);
        Ok(Replay {
            gpus_total,
            nodes: nodes.len(),
            pods: total,
            placed,
            failed,
            arrived_milli: arrived,
            allocated_milli: allocated,
            curve,
            node_use,
            seed: opts.seed,
            inflate: opts.inflate,
        })
    })
}

/// A scheduler for `cfg` with the trace's nodes and queues, and the
/// trace's pods converted (once; copies are renamed clones).
pub fn trace_scheduler(
    nodes: &[TraceNode],
    pods: &[TracePod],
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
    seed: u64,
) -> Result<(Scheduler, Vec<Pod>), SimError> {
    let profiles = build_profiles(cfg, registry, defaults)?;
    let scheduler_name = profiles.first().map(|p| p.scheduler_name.clone()).unwrap_or_default();
    let mut sched = Scheduler::new(cfg, profiles, seed).map_err(|e| SimError::Engine(e.to_string()))?;
    let engine_error = |what: String, e: convert::ConvertError| SimError::Engine(format!("{what}: {e}"));
    for n in nodes {
        let node = convert::node_from_k8s(&n.to_k8s()).map_err(|e| engine_error(format!("node {}", n.name), e))?;
        sched.apply(ObjectChange::Node(Box::new(node)), 0);
    }
    for q in crate::openb::queues(pods) {
        sched.apply(ObjectChange::Queue(Box::new(q)), 0);
    }
    let converted: Vec<Pod> = pods
        .iter()
        .map(|p| {
            convert::pod_from_k8s(&p.to_k8s(&scheduler_name)).map_err(|e| engine_error(format!("pod {}", p.name), e))
        })
        .collect::<Result<_, _>>()?;
    // The trace is the workload, known in advance: the typical GPU shapes
    // come from it when the configuration says so (`gpuShapes.learnFrom:
    // workload`, the FGD paper's protocol); otherwise this does nothing.
    sched.observe_workload(&converted);
    Ok((sched, converted))
}

/// The cluster's fragmentation, summed in the trace's node order (a sum
/// of floats in hash order would differ in its last bits between runs).
pub(crate) fn fragmentation(sched: &Scheduler, nodes: &[TraceNode]) -> Fragmentation {
    let infos = nodes.iter().filter_map(|n| sched.cache().node(&n.name)).map(|n| n.as_ref());
    cluster_fragmentation(infos, sched.cache().gpu_shapes())
}

/// Mean allocation per whole percent arrived (the paper's analysis: the
/// samples whose arrival rounds to the percent; if none, those within one
/// percent; if none, the previous point's), and the fragmentation last
/// measured at or before it.
fn curve(samples: &[(f64, f64)], frag_at: &[(i64, f64)], last: u32) -> Vec<CurvePoint> {
    let mut sums = vec![(0.0f64, 0usize); last as usize + 2];
    for &(arrived, allocated) in samples {
        let k = arrived.round() as i64;
        if (0..=i64::from(last)).contains(&k) {
            let s = &mut sums[k as usize];
            s.0 += allocated;
            s.1 += 1;
        }
    }
    let mut out: Vec<CurvePoint> = Vec::with_capacity(last as usize + 1);
    for k in 0..=last as usize {
        let mean = |range: std::ops::RangeInclusive<usize>| {
            let (sum, n) = range.filter_map(|j| sums.get(j)).fold((0.0, 0), |(s, n), (a, b)| (s + a, n + b));
            (n > 0).then(|| sum / n as f64)
        };
        let allocated = mean(k..=k)
            .or_else(|| mean(k.saturating_sub(1)..=k + 1))
            .or_else(|| out.last().map(|p| p.allocated_pct))
            .unwrap_or(0.0);
        let frag = frag_at.iter().rev().find(|(at, _)| *at <= k as i64).map_or(0.0, |(_, f)| *f);
        out.push(CurvePoint { arrived_pct: k as u32, allocated_pct: allocated, fragmentation_pct: 100.0 * frag });
    }
    out
}

pub(crate) fn node_use(sched: &Scheduler, nodes: &[TraceNode]) -> Vec<NodeGpuUse> {
    nodes
        .iter()
        .filter(|n| n.gpus > 0)
        .filter_map(|n| {
            let info: &Arc<engine::node_info::NodeInfo> = sched.cache().node(&n.name)?;
            let g = &info.gpus;
            let free: i64 = g.free_milli().iter().map(|&f| i64::from(f.max(0))).sum();
            Some(NodeGpuUse {
                name: n.name.clone(),
                model: n.model.clone(),
                gpus: g.count(),
                allocated_milli: g.count() as i64 * 1000 - free,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_pod(name: &str, gpus: i64, milli: i64) -> TracePod {
        TracePod {
            name: name.into(),
            milli_cpu: 1000,
            memory_mib: 1024,
            gpus,
            gpu_milli: milli,
            gpu_spec: String::new(),
            ..Default::default()
        }
    }

    #[test]
    fn arrival_is_shuffled_then_inflated_by_copies() {
        let pods: Vec<TracePod> = (0..10).map(|i| trace_pod(&format!("p{i}"), 1, 1000)).collect();
        let opts = ReplayOptions { seed: 42, inflate: 1.5 };
        // 10 GPUs asked of a 10-GPU cluster: 5 copies reach 1.5 ×.
        let order = arrival_order(&pods, 10_000, &opts);
        assert_eq!(order.len(), 15);
        assert_eq!(order.iter().filter(|(_, c)| c.is_some()).count(), 5);
        let mut first: Vec<usize> = order[..10].iter().map(|(i, _)| *i).collect();
        assert_ne!(first, (0..10).collect::<Vec<_>>(), "shuffled");
        first.sort();
        assert_eq!(first, (0..10).collect::<Vec<_>>(), "each pod once before the copies");
        assert_eq!(arrival_order(&pods, 10_000, &opts), order, "the seed decides");
        assert_ne!(arrival_order(&pods, 10_000, &ReplayOptions { seed: 43, ..opts.clone() }), order);
        let cpu_only = vec![trace_pod("c", 0, 0)];
        assert_eq!(arrival_order(&cpu_only, 10_000, &opts).len(), 1, "no GPU asked: no copies");
        // Half the GPUs: five of the ten pods are left out.
        let half = arrival_order(&pods, 10_000, &ReplayOptions { seed: 42, inflate: 0.5 });
        assert_eq!(half.len(), 5);
        assert!(half.iter().all(|(_, c)| c.is_none()));
    }

    /// The trace is counted for the typical shapes before the first pod
    /// only when they are learned from the workload (FGD's protocol).
    #[test]
    fn the_workload_is_counted_when_shapes_are_learned_from_it() {
        use engine::devices::shapes::LearnFrom;
        let nodes =
            vec![TraceNode { name: "n0".into(), milli_cpu: 64_000, memory_mib: 1 << 18, gpus: 8, model: "G2".into() }];
        let pods = vec![trace_pod("a", 1, 500), trace_pod("b", 1, 500), trace_pod("c", 0, 0)];
        // (learnFrom, pods counted besides the default prior's two)
        for (learn_from, counted) in [(LearnFrom::Arrivals, 0.0), (LearnFrom::Workload, 3.0)] {
            let mut cfg = Configuration::default();
            cfg.gpu_shapes.learn_from = learn_from;
            let registry = plugins::registry();
            let (sched, _) = trace_scheduler(&nodes, &pods, &cfg, &registry, &plugins::default_plugins(), 42).unwrap();
            let seen: f64 = sched.cache().gpu_shapes().seen().iter().map(|(_, w)| w).sum();
            assert!((seen - 2.0 - counted).abs() < 1e-3, "{learn_from:?}: {seen}");
        }
    }

    #[test]
    fn the_curve_averages_each_percent() {
        let samples = [(0.0, 0.0), (0.4, 0.4), (0.8, 0.8), (1.2, 1.0), (3.1, 2.0)];
        let frag = [(0, 0.0), (1, 0.1), (3, 0.3)];
        let c = curve(&samples, &frag, 4);
        let got: Vec<(u32, f64, f64)> =
            c.iter().map(|p| (p.arrived_pct, p.allocated_pct, p.fragmentation_pct)).collect();
        let want = vec![
            (0, 0.2, 0.0),                      // 0.0 and 0.4
            (1, 0.9, 10.0),                     // 0.8 and 1.2
            (2, (0.8 + 1.0 + 2.0) / 3.0, 10.0), // none at 2: those at 1 and 3
            (3, 2.0, 30.0),
            (4, 2.0, 30.0), // none at 3 to 5: the previous point
        ];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(g.0 == w.0 && (g.1 - w.1).abs() < 1e-9 && (g.2 - w.2).abs() < 1e-9, "{g:?} != {w:?}");
        }
    }
}
