//! The typical pod shapes fragmentation is measured against, learned
//! online from the pods the scheduler sees (FGD takes them from the whole
//! trace in advance; a scheduler only knows what has arrived).
//!
//! A shape is a pod's cpu request and its GPU request (thousandths per
//! GPU, GPU count, GPU memory, accepted models). The cache counts every
//! pod once, when it is queued or first seen bound, with older pods
//! fading (`halfLifePods`) so the shapes follow the workload; configured
//! prior shapes count as that many fresh pods each. With
//! `learnFrom: workload` the shapes come from a workload given in advance
//! (`ShapeStats::observe_workload`). The typical shapes are
//! the most frequent ones covering `coverage` of the weight, normalised
//! to sum to 1, as in the paper.
//!
//! [`TypicalShapes`] also keeps every shape seen (for other cuts), groups
//! the shapes by GPU part for a fast measure, and holds the table of what
//! no mix of typical shares fills of each free part (`residue`, rebuilt
//! when the shapes change) and what the live share sizes (1 % of the
//! typical shares or more) fill of each gap ([`TypicalShapes::live_fill`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::MILLI_PER_GPU;
use super::request::{GpuKind, GpuModels};
use crate::model::Pod;
use gpu_scheduler_model::field::ConfigError;

/// The shape of a pod, as fragmentation sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    pub milli_cpu: i64,
    /// Thousandths of each GPU (1000 for whole GPUs); 0 for CPU-only pods.
    pub gpu_milli: u32,
    pub gpu_count: u32,
    pub gpu_memory_mib: u64,
    pub models: Option<GpuModels>,
}

impl Shape {
    /// The shape of `pod`; None for MIG and time-sliced pods, which do not
    /// take devices.
    pub fn of(pod: &Pod) -> Option<Shape> {
        let (gpu_milli, gpu_count, gpu_memory_mib) = match pod.gpu.kind {
            GpuKind::None => (0, 0, 0),
            GpuKind::Whole { count } => (MILLI_PER_GPU, count, 0),
            GpuKind::Share { milli, memory_mib } => (milli, 1, memory_mib),
            GpuKind::Slices { .. } => return None,
        };
        let models = if gpu_count > 0 { pod.gpu.models.clone() } else { None };
        Some(Shape { milli_cpu: pod.requests.milli_cpu.max(0), gpu_milli, gpu_count, gpu_memory_mib, models })
    }

    /// Whole GPUs (each fully free) rather than a share of one.
    pub fn is_whole(&self) -> bool {
        self.gpu_milli >= MILLI_PER_GPU && self.gpu_memory_mib == 0
    }
}

/// The `gpuShapes` section of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuShapesConfig {
    /// The typical shapes are the most frequent ones covering this share
    /// of the pods seen (FGD's 95 %).
    #[serde(default = "default_coverage")]
    pub coverage: f64,
    /// A pod seen this many pods ago counts half as much as the last one;
    /// 0 never forgets.
    #[serde(default = "default_half_life")]
    pub half_life_pods: u32,
    /// Shapes assumed before pods are seen; each counts as `weight` pods
    /// seen just now, whatever the age of the others.
    #[serde(default = "default_prior")]
    pub prior: Vec<PriorShape>,
    /// Which pods are counted: those that arrive (the default), or the
    /// workload given in advance (FGD's typical pods come from the whole
    /// trace: a replay counts its pod list before the first pod).
    #[serde(default)]
    pub learn_from: LearnFrom,
}

/// Where the typical shapes are learned from (`gpuShapes.learnFrom`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LearnFrom {
    /// Every pod when it is queued, or first seen bound.
    #[default]
    Arrivals,
    /// Only a workload given in advance (`ShapeStats::observe_workload`);
    /// without one, only the prior counts.
    Workload,
}

/// One shape of the prior.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PriorShape {
    #[serde(default)]
    pub milli_cpu: i64,
    /// GPUs: whole GPUs, or 1 for a share.
    #[serde(default)]
    pub gpus: u32,
    /// Thousandths of each GPU; below 1000 a share of one GPU.
    #[serde(default = "default_gpu_milli")]
    pub gpu_milli: u32,
    #[serde(default, rename = "gpuMemoryMiB")]
    pub gpu_memory_mib: u64,
    /// GPU models accepted; empty for any.
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default = "default_weight")]
    pub weight: f64,
}

/// The most a prior shape may weigh, in pods seen.
pub const PRIOR_WEIGHT_MAX: f64 = 1e9;

fn default_coverage() -> f64 {
    0.95
}
fn default_half_life() -> u32 {
    20_000
}
fn default_gpu_milli() -> u32 {
    MILLI_PER_GPU
}
fn default_weight() -> f64 {
    1.0
}
/// One whole GPU and a whole 8-GPU node, one pod's worth each: keep
/// GPUs whole, and whole nodes for whole-node jobs, also before (and
/// while) the pods seen say little about them.
fn default_prior() -> Vec<PriorShape> {
    [1, 8]
        .into_iter()
        .map(|gpus| PriorShape {
            milli_cpu: 0,
            gpus,
            gpu_milli: MILLI_PER_GPU,
            gpu_memory_mib: 0,
            models: Vec::new(),
            weight: default_weight(),
        })
        .collect()
}

impl Default for GpuShapesConfig {
    fn default() -> Self {
        GpuShapesConfig {
            coverage: default_coverage(),
            half_life_pods: default_half_life(),
            prior: default_prior(),
            learn_from: LearnFrom::default(),
        }
    }
}

impl GpuShapesConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        use crate::bounds::{Interval, int};
        ConfigError::check(format!("{path}.coverage"), Interval::above(0.0, 1.0).check(self.coverage))?;
        for (i, p) in self.prior.iter().enumerate() {
            let at = format!("{path}.prior[{i}]");
            // Worth that many pods seen: summed with them, so kept finite with room.
            ConfigError::check(format!("{at}.weight"), Interval::above(0.0, PRIOR_WEIGHT_MAX).check(p.weight))?;
            ConfigError::check(format!("{at}.milliCpu"), int(p.milli_cpu, 0, i64::MAX))?;
            ConfigError::check(format!("{at}.gpus"), int(p.gpus, 0, super::MAX_DEVICES as u32))?;
            ConfigError::check(format!("{at}.gpuMilli"), int(p.gpu_milli, 1, MILLI_PER_GPU))?;
            ConfigError::check(format!("{at}.gpuMemoryMiB"), int(p.gpu_memory_mib, 0, super::MAX_GPU_MEMORY_MIB))?;
            if (p.gpu_milli < MILLI_PER_GPU || p.gpu_memory_mib > 0) && p.gpus != 1 {
                return Err(ConfigError::new(
                    format!("{at}.gpus"),
                    "a GPU share (gpuMilli below 1000 or gpuMemoryMiB) is of 1 GPU",
                ));
            }
            if p.models.iter().any(|m| m.trim().is_empty()) {
                return Err(ConfigError::new(format!("{at}.models"), "model names must not be empty"));
            }
        }
        Ok(())
    }

    fn prior_shapes(&self) -> Vec<(Shape, f64)> {
        self.prior
            .iter()
            .map(|p| {
                let shape = Shape {
                    milli_cpu: p.milli_cpu,
                    gpu_milli: if p.gpus == 0 { 0 } else { p.gpu_milli },
                    gpu_count: p.gpus,
                    gpu_memory_mib: if p.gpus == 0 { 0 } else { p.gpu_memory_mib },
                    models: (p.gpus > 0 && !p.models.is_empty())
                        .then(|| p.models.iter().map(|m| Arc::from(m.trim().to_ascii_lowercase())).collect()),
                };
                (shape, p.weight)
            })
            .collect()
    }
}

/// The shapes seen so far, with fading weights, and the typical shapes
/// derived from them.
#[derive(Debug, Clone)]
pub struct ShapeStats {
    config: GpuShapesConfig,
    prior: Vec<(Shape, f64)>,
    weights: HashMap<Shape, f64>,
    /// The weight of the next pod: grows by `growth` per pod, which is the
    /// same as every older weight fading, without touching them.
    unit: f64,
    growth: f64,
    seen: u64,
    /// `seen` when the typical shapes were last computed.
    refreshed: u64,
    typical: Arc<TypicalShapes>,
}

impl Default for ShapeStats {
    fn default() -> Self {
        ShapeStats::new(GpuShapesConfig::default())
    }
}

impl ShapeStats {
    pub fn new(config: GpuShapesConfig) -> Self {
        let growth = if config.half_life_pods == 0 { 1.0 } else { 2f64.powf(1.0 / f64::from(config.half_life_pods)) };
        let mut s = ShapeStats {
            prior: config.prior_shapes(),
            config,
            weights: HashMap::new(),
            unit: 1.0,
            growth,
            seen: 0,
            refreshed: 0,
            typical: Arc::default(),
        };
        s.refresh();
        s
    }

    pub fn config(&self) -> &GpuShapesConfig {
        &self.config
    }

    /// Pods counted so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Counts one pod; returns whether the typical shapes changed. The
    /// shapes are recomputed for a shape never seen before, and otherwise
    /// once another 1/64 of the pods seen so far has come: a pod's cycle
    /// should not pay for sorting every shape, and one more pod of a known
    /// shape moves the probabilities by less than that.
    pub fn observe(&mut self, pod: &Pod) -> bool {
        if self.config.learn_from == LearnFrom::Workload {
            return false;
        }
        self.count(pod)
    }

    /// Counts a workload known in advance, all at once, when the shapes
    /// are learned from it (`learnFrom: workload`); returns whether the
    /// typical shapes changed.
    pub fn observe_workload<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) -> bool {
        if self.config.learn_from != LearnFrom::Workload {
            return false;
        }
        let before = self.seen;
        for pod in pods {
            self.count(pod);
        }
        if self.seen == before {
            return false;
        }
        self.refresh();
        true
    }

    /// Counts one pod, refreshing the typical shapes now and then.
    fn count(&mut self, pod: &Pod) -> bool {
        let Some(shape) = Shape::of(pod) else { return false };
        let weight = self.weights.entry(shape).or_default();
        let new = *weight == 0.0;
        *weight += self.unit;
        self.seen += 1;
        self.unit *= self.growth;
        if self.unit > 1e200 {
            // Rescale before the weights overflow; ratios are unchanged.
            let unit = self.unit;
            self.weights.values_mut().for_each(|w| *w /= unit);
            self.unit = 1.0;
        }
        if !new && self.seen - self.refreshed < (self.refreshed / 64).max(1) {
            return false;
        }
        self.refresh();
        true
    }

    /// The current typical shapes.
    pub fn typical(&self) -> &Arc<TypicalShapes> {
        &self.typical
    }

    fn refresh(&mut self) {
        self.refreshed = self.seen;
        // Weights in units of "one pod seen just now", so the prior keeps
        // its configured strength.
        let mut all: HashMap<&Shape, f64> = HashMap::with_capacity(self.weights.len() + self.prior.len());
        let now = self.unit / self.growth;
        for (s, w) in &self.weights {
            *all.entry(s).or_default() += w / now;
        }
        for (s, w) in &self.prior {
            *all.entry(s).or_default() += w;
        }
        let list: Vec<(Shape, f64)> = all.into_iter().map(|(s, w)| (s.clone(), w)).collect();
        self.typical = Arc::new(TypicalShapes::build(list, self.config.coverage));
    }
}

/// The typical shapes with their probabilities (summing to 1), grouped
/// for a fast fragmentation measure: one group per GPU part, with the
/// probability of its shapes by cpu request.
#[derive(Debug, Clone, Default)]
pub struct TypicalShapes {
    /// Tells builds apart for the nodes' remembered measures
    /// ([`super::memo`]); unique in the process, 0 for no shapes.
    id: u64,
    shapes: Vec<(Shape, f64)>,
    /// Every shape seen with its weight, before the cut (most frequent
    /// first), and the coverage of the cut: other selections of typical
    /// shapes (FGD's own, [`super::fgd`]) start from them.
    seen: Vec<(Shape, f64)>,
    coverage: f64,
    /// Sum of the probabilities (1, or 0 without shapes).
    pub(super) total: f64,
    pub(super) groups: Vec<Group>,
    /// `residue[g]`: what of `g` free thousandths of one device no mix of
    /// the typical share sizes can fill (g less the largest sum of shares
    /// at most g); empty without share shapes.
    pub(super) residue: Vec<u16>,
    /// The least cpu a typical share asks for.
    pub(super) share_cpu: i64,
    /// `live_fill[g]`: the largest sum of live share sizes (those of at
    /// least [`LIVE_SHARE`] of the typical shares) at most g; empty
    /// without share shapes.
    live_fill: Vec<u16>,
}

/// The next `TypicalShapes::id`.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Equal shapes measure alike, whichever build they come from.
impl PartialEq for TypicalShapes {
    fn eq(&self, other: &Self) -> bool {
        self.shapes == other.shapes
            && self.seen == other.seen
            && self.coverage == other.coverage
            && self.total == other.total
            && self.groups == other.groups
            && self.residue == other.residue
            && self.share_cpu == other.share_cpu
            && self.live_fill == other.live_fill
    }
}

/// A share size is live, for the gap balance, when at least this part of
/// the typical shares have it (Alibaba's trace: 0.5, 1 and 2 % were
/// tried; 0.5 and 1 % alike, 2 % below them).
pub const LIVE_SHARE: f64 = 0.01;

/// Shapes with the same GPU part.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Group {
    pub milli: i32,
    pub count: usize,
    pub memory_mib: i64,
    /// Needs fully free devices.
    pub whole: bool,
    pub models: Option<GpuModels>,
    /// Cpu requests, ascending, and the probability of the shapes
    /// requesting at most that much.
    pub cpu: Vec<i64>,
    pub cumulative: Vec<f64>,
}

impl Group {
    /// Probability of this group's shapes whose cpu fits in `milli_cpu_left`.
    pub fn probability_within(&self, milli_cpu_left: i64) -> f64 {
        match self.cpu.partition_point(|&c| c <= milli_cpu_left) {
            0 => 0.0,
            n => self.cumulative[n - 1],
        }
    }
}

impl TypicalShapes {
    /// The most frequent of `weighted` covering `coverage` of the weight.
    pub fn build(mut weighted: Vec<(Shape, f64)>, coverage: f64) -> TypicalShapes {
        weighted.retain(|(_, w)| *w > 0.0 && w.is_finite());
        // Deterministic: by weight, then by shape.
        weighted.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let seen = weighted.clone();
        let sum: f64 = weighted.iter().map(|(_, w)| w).sum();
        let mut kept = 0.0;
        let mut n = 0;
        while n < weighted.len() && kept < coverage * sum * (1.0 - 1e-12) {
            kept += weighted[n].1;
            n += 1;
        }
        // Pods naming GPU models are rarely typical one shape at a time, but
        // together they say which models are in demand: the rest of each
        // model set's weight stays, on its heaviest shape.
        let tail: Vec<(Shape, f64)> = weighted.split_off(n);
        let mut by_models: Vec<(Shape, f64)> = Vec::new();
        for (s, w) in tail.into_iter().filter(|(s, _)| s.models.is_some() && s.gpu_count > 0) {
            match by_models.iter_mut().find(|(a, _)| a.models == s.models) {
                Some(e) => e.1 += w,
                None => by_models.push((s, w)),
            }
        }
        for (s, w) in by_models {
            kept += w;
            match weighted.iter_mut().find(|(a, _)| *a == s) {
                Some(e) => e.1 += w,
                None => weighted.push((s, w)),
            }
        }
        if kept <= 0.0 {
            return TypicalShapes { seen, coverage, ..TypicalShapes::default() };
        }
        let shapes: Vec<(Shape, f64)> = weighted.into_iter().map(|(s, w)| (s, w / kept)).collect();
        let mut groups: Vec<Group> = Vec::new();
        let mut by_cpu: Vec<&(Shape, f64)> = shapes.iter().filter(|(s, _)| s.gpu_count > 0).collect();
        by_cpu.sort_by(|a, b| a.0.milli_cpu.cmp(&b.0.milli_cpu).then_with(|| a.0.cmp(&b.0)));
        for (s, p) in by_cpu {
            let whole = s.is_whole();
            let key = |g: &Group| {
                g.milli == s.gpu_milli as i32
                    && g.count == s.gpu_count as usize
                    && g.memory_mib == s.gpu_memory_mib as i64
                    && g.models == s.models
            };
            let g = match groups.iter().position(key) {
                Some(i) => &mut groups[i],
                None => {
                    groups.push(Group {
                        milli: s.gpu_milli as i32,
                        count: s.gpu_count as usize,
                        memory_mib: s.gpu_memory_mib as i64,
                        whole,
                        models: s.models.clone(),
                        cpu: Vec::new(),
                        cumulative: Vec::new(),
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            let before = g.cumulative.last().copied().unwrap_or(0.0);
            if g.cpu.last() == Some(&s.milli_cpu) {
                *g.cumulative.last_mut().expect("non-empty") += p;
            } else {
                g.cpu.push(s.milli_cpu);
                g.cumulative.push(before + p);
            }
        }
        let shares: Vec<&Group> = groups.iter().filter(|g| !g.whole && g.count == 1 && g.milli > 0).collect();
        let share_cpu = shares.iter().filter_map(|g| g.cpu.first().copied()).min().unwrap_or(0);
        let residue = residues(&shares.iter().map(|g| g.milli).collect::<Vec<_>>());
        let mut by_size: Vec<(i32, f64)> = Vec::new();
        for g in &shares {
            let p = g.cumulative.last().copied().unwrap_or(0.0);
            match by_size.iter_mut().find(|(m, _)| *m == g.milli) {
                Some(e) => e.1 += p,
                None => by_size.push((g.milli, p)),
            }
        }
        let share_total: f64 = by_size.iter().map(|(_, p)| p).sum();
        let live: Vec<i32> = by_size.iter().filter(|(_, p)| *p >= LIVE_SHARE * share_total).map(|(m, _)| *m).collect();
        let live_fill = residues(&live).iter().enumerate().map(|(g, r)| g as u16 - r).collect();
        TypicalShapes {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            total: shapes.iter().map(|(_, p)| p).sum(),
            shapes,
            seen,
            coverage,
            groups,
            residue,
            share_cpu,
            live_fill,
        }
    }

    /// Which build these shapes are (see the field).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What live share sizes can fill of each gap, 0–1000 (see
    /// [`super::gaps`]); empty without share shapes.
    pub fn live_fill(&self) -> &[u16] {
        &self.live_fill
    }

    /// The shapes with their probabilities, most frequent first.
    pub fn shapes(&self) -> &[(Shape, f64)] {
        &self.shapes
    }

    /// Every shape seen, with its weight (pods seen just now), most
    /// frequent first: the shapes before the cut at [`Self::coverage`].
    pub fn seen(&self) -> &[(Shape, f64)] {
        &self.seen
    }

    /// The share of the weight the typical shapes cover (`gpuShapes.coverage`).
    pub fn coverage(&self) -> f64 {
        self.coverage
    }

    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }
}

/// For every free part g of a device (0 to 1000 thousandths), what is
/// left of it after the best fill by shares of the sizes `milli` (any
/// number of each): an unbounded knapsack, 1,001 × sizes steps, run when
/// the typical shapes change. Empty when there are no sizes.
fn residues(milli: &[i32]) -> Vec<u16> {
    let sizes: Vec<usize> = milli.iter().filter_map(|&m| usize::try_from(m).ok()).filter(|&m| m > 0).collect();
    if sizes.is_empty() {
        return Vec::new();
    }
    let n = MILLI_PER_GPU as usize;
    let mut reachable = vec![false; n + 1];
    reachable[0] = true;
    for g in 1..=n {
        reachable[g] = sizes.iter().any(|&m| m <= g && reachable[g - m]);
    }
    let mut best = 0;
    (0..=n)
        .map(|g| {
            if reachable[g] {
                best = g;
            }
            (g - best) as u16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::request::GpuRequest;
    use crate::testing::pod;

    fn shape(cpu: i64, milli: u32, count: u32) -> Shape {
        Shape { milli_cpu: cpu, gpu_milli: milli, gpu_count: count, gpu_memory_mib: 0, models: None }
    }

    fn gpu_pod(cpu: i64, gpu: GpuRequest) -> Pod {
        pod("p").req(cpu, 0).with(|p| p.gpu = gpu).build()
    }

    #[test]
    fn shapes_of_pods() {
        let cases = [
            (gpu_pod(4000, GpuRequest::whole(2)), Some(shape(4000, 1000, 2))),
            (gpu_pod(1000, GpuRequest::share(250, 0)), Some(shape(1000, 250, 1))),
            (gpu_pod(500, GpuRequest::default()), Some(shape(500, 0, 0))),
        ];
        for (p, want) in cases {
            assert_eq!(Shape::of(&p), want, "{:?}", p.gpu);
        }
        let typed = gpu_pod(0, GpuRequest::whole(1).with_models(&["T4"]));
        assert_eq!(Shape::of(&typed).and_then(|s| s.models).as_deref().map(|m| m.len()), Some(1));
        let untyped_cpu = gpu_pod(0, GpuRequest::default().with_models(&["T4"]));
        assert_eq!(Shape::of(&untyped_cpu).and_then(|s| s.models), None, "models matter only with GPUs");
        let mig = gpu_pod(
            0,
            GpuRequest {
                kind: GpuKind::Slices { resource: Arc::from("nvidia.com/mig-1g.10gb"), count: 1, memory_mib: 10240 },
                models: None,
            },
        );
        assert_eq!(Shape::of(&mig), None);
    }

    #[test]
    fn typical_shapes_cover_the_most_frequent_and_sum_to_one() {
        let weighted = vec![
            (shape(1000, 1000, 1), 50.0),
            (shape(2000, 500, 1), 30.0),
            (shape(0, 0, 0), 15.0),
            (shape(8000, 1000, 8), 5.0),
        ];
        // (coverage, shapes kept)
        for (coverage, kept) in [(0.5, 1), (0.8, 2), (0.95, 3), (0.96, 4), (1.0, 4)] {
            let t = TypicalShapes::build(weighted.clone(), coverage);
            assert_eq!(t.shapes().len(), kept, "coverage {coverage}");
            assert!((t.total - 1.0).abs() < 1e-9);
        }
        let t = TypicalShapes::build(weighted, 0.8);
        assert_eq!(t.shapes()[0], (shape(1000, 1000, 1), 50.0 / 80.0));
        assert_eq!(t.groups.len(), 2);
        assert!(TypicalShapes::build(Vec::new(), 0.95).is_empty());
    }

    #[test]
    fn rare_shapes_naming_models_stay_per_model_set() {
        let typed = |models: &[&str], milli: u32| Shape {
            models: Some(models.iter().map(|m| Arc::from(*m)).collect()),
            ..shape(1000, milli, 1)
        };
        let weighted = vec![
            (shape(1000, 1000, 1), 90.0),
            (typed(&["t4"], 1000), 3.0),
            (typed(&["t4"], 500), 2.0),
            (typed(&["p100"], 500), 2.0),
            (shape(2000, 300, 1), 3.0),
        ];
        // 90 % coverage keeps the first shape only; the T4 shapes come back
        // as one (the heaviest, with their 5), the P100 one as itself.
        let t = TypicalShapes::build(weighted, 0.9);
        let got: Vec<(Shape, f64)> = t.shapes().to_vec();
        let want = vec![
            (shape(1000, 1000, 1), 90.0 / 97.0),
            (typed(&["t4"], 1000), 5.0 / 97.0),
            (typed(&["p100"], 500), 2.0 / 97.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((gs, gp), (ws, wp)) in got.iter().zip(&want) {
            assert!(gs == ws && (gp - wp).abs() < 1e-9, "{gs:?} {gp} != {ws:?} {wp}");
        }
    }

    #[test]
    fn groups_sum_probabilities_by_cpu() {
        let weighted = vec![
            (shape(4000, 1000, 1), 1.0),
            (shape(1000, 1000, 1), 1.0),
            (shape(1000, 1000, 1).clone(), 0.0),
            (shape(2000, 1000, 1), 2.0),
        ];
        let t = TypicalShapes::build(weighted, 1.0);
        let g = &t.groups[0];
        assert_eq!(g.cpu, [1000, 2000, 4000]);
        for (left, want) in [(999, 0.0), (1000, 0.25), (3999, 0.75), (100_000, 1.0)] {
            assert!((g.probability_within(left) - want).abs() < 1e-9, "{left}");
        }
    }

    #[test]
    fn residue_is_what_no_mix_of_typical_shares_fills() {
        // (share sizes, [(free part, residue)])
        type Case<'a> = (&'a [i32], &'a [(usize, u16)]);
        let cases: &[Case] = &[
            (&[500], &[(0, 0), (499, 499), (500, 0), (999, 499), (1000, 0)]),
            (&[300, 500], &[(290, 290), (300, 0), (700, 100), (800, 0), (1000, 0)]),
            (&[810], &[(190, 190), (810, 0), (1000, 190)]),
            (&[250, 1000], &[(260, 10), (750, 0)]),
        ];
        for (sizes, want) in cases {
            let r = residues(sizes);
            assert_eq!(r.len(), 1001);
            for &(g, res) in *want {
                assert_eq!(r[g], res, "sizes {sizes:?}, free {g}");
            }
        }
        assert!(residues(&[]).is_empty());
        assert!(residues(&[0]).is_empty());
        // Built from the share groups only, with their least cpu.
        let t = TypicalShapes::build(vec![(shape(4000, 1000, 1), 1.0), (shape(2000, 400, 1), 1.0)], 1.0);
        assert_eq!((t.residue[1000], t.residue[900], t.share_cpu), (200, 100, 2000));
        assert!(TypicalShapes::build(vec![(shape(0, 1000, 2), 1.0)], 1.0).residue.is_empty());
    }

    #[test]
    fn stats_learn_with_a_prior_and_fade() {
        let defaults = ShapeStats::default();
        assert_eq!(
            defaults.typical().shapes(),
            [(shape(0, 1000, 1), 0.5), (shape(0, 1000, 8), 0.5)],
            "the default prior"
        );
        let one_gpu = default_prior().remove(0);
        let cfg = GpuShapesConfig { half_life_pods: 2, prior: vec![one_gpu], ..Default::default() };
        let mut s = ShapeStats::new(cfg);
        assert_eq!(s.typical().shapes(), [(shape(0, 1000, 1), 1.0)], "the prior alone");
        // Four share pods, then four CPU pods: with a half-life of two
        // pods, the CPU pods outweigh the shares, and the prior (one fresh
        // pod's worth) stays.
        for _ in 0..4 {
            assert!(s.observe(&gpu_pod(1000, GpuRequest::share(500, 0))));
        }
        for _ in 0..4 {
            s.observe(&gpu_pod(2000, GpuRequest::default()));
        }
        assert_eq!(s.seen(), 8);
        let t = s.typical();
        let p = |want: &Shape| t.shapes().iter().find(|(x, _)| x == want).map_or(0.0, |(_, p)| *p);
        let cpu = p(&shape(2000, 0, 0));
        let share = p(&shape(1000, 500, 1));
        let prior = p(&shape(0, 1000, 1));
        // In fresh pods' worth: the CPU pods 1 + .71 + .5 + .35 = 2.56, the
        // shares, two half-lives older, .64; the prior 1.
        assert!(cpu > prior && prior > share && share > 0.0, "{cpu} {prior} {share}");
        assert!((cpu + share + prior - 1.0).abs() < 1e-9);
    }

    /// `learnFrom: workload`: arrivals are not counted, the workload given
    /// in advance is, at once; with `arrivals`, the other way round.
    #[test]
    fn shapes_learn_from_arrivals_or_the_workload() {
        let workload: Vec<Pod> = [GpuRequest::share(500, 0), GpuRequest::share(500, 0), GpuRequest::default()]
            .into_iter()
            .map(|g| gpu_pod(1000, g))
            .collect();
        let arrival = gpu_pod(2000, GpuRequest::whole(1));
        // (learnFrom, arrival counted, workload counted, typical shapes)
        let cases = [
            (LearnFrom::Arrivals, true, false, vec![(shape(2000, 1000, 1), 1.0)]),
            (LearnFrom::Workload, false, true, vec![(shape(1000, 500, 1), 2.0 / 3.0), (shape(1000, 0, 0), 1.0 / 3.0)]),
        ];
        for (learn_from, arrival_counted, workload_counted, want) in cases {
            let cfg = GpuShapesConfig { learn_from, half_life_pods: 0, prior: Vec::new(), ..Default::default() };
            let mut s = ShapeStats::new(cfg);
            assert_eq!(s.observe(&arrival), arrival_counted, "{learn_from:?}");
            assert_eq!(s.observe_workload(&workload), workload_counted, "{learn_from:?}");
            let got = s.typical().shapes();
            assert_eq!(got.len(), want.len(), "{learn_from:?}: {got:?}");
            for ((gs, gp), (ws, wp)) in got.iter().zip(&want) {
                assert!(gs == ws && (gp - wp).abs() < 1e-12, "{learn_from:?}: {gs:?} {gp}");
            }
            let seen: f64 = s.typical().seen().iter().map(|(_, w)| w).sum();
            assert_eq!(seen, if workload_counted { 3.0 } else { 1.0 });
            assert_eq!(s.typical().coverage(), 0.95);
        }
    }

    #[test]
    fn config_errors_name_the_field() {
        let prior = |f: fn(&mut PriorShape)| {
            let mut p = default_prior();
            f(&mut p[0]);
            GpuShapesConfig { prior: p, ..Default::default() }
        };
        let cases = [
            (GpuShapesConfig { coverage: 0.0, ..Default::default() }, "gpuShapes.coverage"),
            (GpuShapesConfig { coverage: 1.5, ..Default::default() }, "gpuShapes.coverage"),
            (prior(|p| p.weight = 0.0), "gpuShapes.prior[0].weight"),
            (prior(|p| p.gpu_milli = 0), "gpuShapes.prior[0].gpuMilli"),
            (prior(|p| p.milli_cpu = -1), "gpuShapes.prior[0].milliCpu"),
            (
                prior(|p| {
                    p.gpu_milli = 500;
                    p.gpus = 2
                }),
                "gpuShapes.prior[0].gpus",
            ),
            (prior(|p| p.models = vec![" ".into()]), "gpuShapes.prior[0].models"),
        ];
        for (cfg, path) in cases {
            let e = cfg.validate("gpuShapes").expect_err(path);
            assert_eq!(e.path, path);
        }
        GpuShapesConfig::default().validate("gpuShapes").unwrap();
    }
}
