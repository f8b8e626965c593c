//! Fragmentation, as the FGD paper defines it (Weng et al., ATC '23): a
//! node's free GPU is a fragment for a typical shape when the shape cannot
//! use it. For each typical shape the node cannot host (too little cpu,
//! too few fitting GPUs, a model the shape does not accept, or no GPU at
//! all: CPU-only shapes use none), all its free GPU counts; for a shape it
//! can host, only the GPUs too small for it. The node's fragmentation is
//! the sum weighted by the shapes' probabilities, in thousandths of a GPU.
//!
//! The same measure picks devices: inside a node, a share goes to the
//! device that leaves the least fragmentation (`GpuPlacement::Fragmentation`),
//! or best or worst fit.
//!
//! [`GpuState`] is what the measure reads of a node (devices, cpu left,
//! model). Besides FGD's, two measures of our own rank placements
//! ([`Measure`]): `Stranded` and `Packed` (the default). [`choose_devices`]
//! chooses as a [`DeviceChoice`] says (placement, measure, gap balance);
//! The cluster's figure (`node_info::cluster_fragmentation`) is always FGD's.

use serde::{Deserialize, Serialize};

use super::gaps::GapBalance;
use super::index::DeviceSet;
use super::memo::{Candidates, FragMemo, MemoKey};
use super::request::{GpuKind, GpuRequest};
use super::shapes::{Group, TypicalShapes};
use super::{GpuPlacement, MAX_DEVICES, MILLI_PER_GPU};

/// A node's GPUs as the measure reads them.
#[derive(Debug, Clone, Copy)]
pub struct GpuState<'a> {
    /// Free thousandths per device.
    pub free_milli: &'a [i32],
    /// Free MiB per device; empty when unknown.
    pub free_memory: &'a [i64],
    /// MiB per device.
    pub memory_mib: Option<u64>,
    pub milli_cpu_left: i64,
    pub model: Option<&'a str>,
    /// Where the node keeps its measures, with its cache generation: only
    /// for a node's own state as the cache holds it.
    pub memo: Option<(&'a FragMemo, u64)>,
}

const FULL: i32 = MILLI_PER_GPU as i32;

/// Which measure ranks placements (the GpuFragmentation plugin's
/// `measure`); the fragmentation figure is always FGD's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Measure {
    /// FGD's: free GPU that the next typical pod could not use.
    Fgd,
    /// Free GPU left over when the node is filled with typical pods.
    Stranded,
    /// `Stranded`, plus twice the slivers of partly used devices that no
    /// mix of typical shares fills.
    #[default]
    Packed,
}

/// How much a partly used device's unfillable sliver counts in `Packed`,
/// against the stranded GPU (measured on Alibaba's trace: 0.5, 1, 2 and 4
/// were tried; 2 was best or within noise of it on every list).
const RESIDUE_WEIGHT: f64 = 2.0;

impl GpuState<'_> {
    /// Device `i`'s free part in thousandths: its free share, or less
    /// when less of its memory is free.
    fn effective(&self, i: usize) -> i64 {
        let milli = i64::from(self.free_milli[i].max(0));
        match (self.free_memory.get(i), self.memory_mib) {
            (Some(&free), Some(total)) if total > 0 => milli.min(free.max(0) * i64::from(FULL) / total as i64),
            _ => milli,
        }
    }

    /// Free thousandths over all devices.
    pub fn free_total(&self) -> i64 {
        (0..self.free_milli.len()).map(|i| self.effective(i)).sum()
    }

    fn is_free(&self, i: usize) -> bool {
        self.free_milli[i] >= FULL
            && match (self.free_memory.get(i), self.memory_mib) {
                (Some(&free), Some(total)) => free >= total as i64,
                _ => true,
            }
    }

    /// Whether device `i` holds a share of `milli` and `memory` MiB.
    fn fits_share(&self, i: usize, milli: i32, memory: i64) -> bool {
        self.free_milli[i] >= milli.max(1) && (memory == 0 || self.free_memory.get(i).is_some_and(|&m| m >= memory))
    }

    /// How many devices a group's shapes can use, and their free part.
    fn usable(&self, g: &Group) -> (usize, i64) {
        let mut n = 0;
        let mut sum = 0;
        for i in 0..self.free_milli.len() {
            let ok = if g.whole { self.is_free(i) } else { self.fits_share(i, g.milli, g.memory_mib) };
            if ok {
                n += 1;
                sum += self.effective(i);
            }
        }
        (n, sum)
    }

    /// Fully free devices.
    pub fn free_devices(&self) -> usize {
        (0..self.free_milli.len()).filter(|&i| self.is_free(i)).count()
    }
}

impl TypicalShapes {
    /// The free GPU (thousandths) no shape uses: all of it, less what
    /// `used(group)` says each group of shapes the node's model accepts
    /// uses (already weighted by the shapes' probabilities).
    fn unused(&self, s: &GpuState<'_>, used: impl Fn(&Group) -> f64) -> f64 {
        if self.total == 0.0 || s.free_milli.is_empty() {
            return 0.0;
        }
        let free = s.free_total();
        if free <= 0 {
            return 0.0;
        }
        let used: f64 = self.groups.iter().filter(|g| accepts(g, s.model)).map(used).sum();
        (self.total * free as f64 - used).max(0.0)
    }

    /// The node's fragmentation in thousandths of a GPU (FGD's measure).
    pub fn fragmentation(&self, s: &GpuState<'_>) -> f64 {
        // Shapes that can run here use their part; everything else is a fragment.
        self.unused(s, |g| {
            let p = g.probability_within(s.milli_cpu_left);
            if p == 0.0 {
                return 0.0;
            }
            let (n, sum) = s.usable(g);
            if n >= g.count { p * sum as f64 } else { 0.0 }
        })
    }

    /// What the node strands: the free GPU left over when it is filled
    /// with as many pods of each typical shape as fit, cpu included,
    /// weighted by the shapes' probabilities (thousandths). Where FGD asks
    /// whether one more pod fits, this asks how many: a node whose cpu
    /// will run out before its GPUs, or whose devices hold shares that
    /// leave odd remainders, strands GPU before FGD's measure says so.
    /// CPU-only shapes strand all free GPU, as in FGD.
    pub fn stranded(&self, s: &GpuState<'_>) -> f64 {
        let free = s.free_total();
        self.unused(s, |g| {
            let (pods, per_pod) = if g.whole {
                ((s.free_devices() / g.count) as i64, g.count as i64 * i64::from(FULL))
            } else {
                let per_pod = i64::from(g.milli.max(1));
                let pods = (0..s.free_milli.len())
                    .filter(|&i| s.fits_share(i, g.milli, g.memory_mib))
                    .map(|i| {
                        let by_share = s.effective(i) / per_pod;
                        match s.free_memory.get(i) {
                            Some(&m) if g.memory_mib > 0 => by_share.min(m / g.memory_mib),
                            _ => by_share,
                        }
                    })
                    .sum();
                (pods, per_pod)
            };
            if pods == 0 {
                return 0.0;
            }
            let mut below = 0.0;
            let mut used = 0.0;
            for (&cpu, &cumulative) in g.cpu.iter().zip(&g.cumulative) {
                let p = cumulative - below;
                below = cumulative;
                let fitting = if cpu <= 0 { pods } else { (s.milli_cpu_left.max(0) / cpu).min(pods) };
                used += p * (fitting * per_pod).min(free) as f64;
            }
            used
        })
    }

    /// The slivers of partly used devices, in thousandths: on each, what
    /// the best mix of typical share sizes leaves unfilled; all of it when
    /// the node's cpu cannot take even the least demanding share. Where
    /// `stranded` sees each share size alone, this sees them together: a
    /// 190 left beside an 810 is stranded for good if no mix makes 190,
    /// while a 700 is not if shares of 300 and 400 both come.
    pub fn slivers(&self, s: &GpuState<'_>) -> f64 {
        if self.residue.is_empty() {
            return 0.0;
        }
        let cpu_out = s.milli_cpu_left < self.share_cpu;
        (0..s.free_milli.len())
            .filter(|&i| !s.is_free(i))
            .map(|i| {
                let g = s.effective(i).clamp(0, i64::from(FULL));
                if cpu_out { g } else { i64::from(self.residue[g as usize]) }
            })
            .sum::<i64>() as f64
    }

    /// The node's fragmentation by `measure`, remembered with the node.
    pub fn measure(&self, measure: Measure, s: &GpuState<'_>) -> f64 {
        match s.memo {
            Some((memo, generation)) => {
                memo.before(MemoKey { generation, shapes: self.id(), measure }, || self.measure_now(measure, s))
            }
            None => self.measure_now(measure, s),
        }
    }

    fn measure_now(&self, measure: Measure, s: &GpuState<'_>) -> f64 {
        match measure {
            Measure::Fgd => self.fragmentation(s),
            Measure::Stranded => self.stranded(s),
            Measure::Packed => self.stranded(s) + RESIDUE_WEIGHT * self.slivers(s),
        }
    }

    /// The node's fragmentation by `measure` after `devices` each lose
    /// `milli` and `memory` MiB and the node `milli_cpu` of cpu.
    pub fn fragmentation_after(
        &self,
        measure: Measure,
        s: &GpuState<'_>,
        devices: DeviceSet,
        milli: i32,
        memory: i64,
        milli_cpu: i64,
    ) -> f64 {
        let n = s.free_milli.len();
        let mut free_milli = [0i32; MAX_DEVICES];
        let mut free_memory = [0i64; MAX_DEVICES];
        free_milli[..n].copy_from_slice(s.free_milli);
        let with_memory = s.free_memory.len() == n;
        if with_memory {
            free_memory[..n].copy_from_slice(s.free_memory);
        }
        for i in devices.below(n).iter() {
            free_milli[i] -= milli;
            free_memory[i] -= memory;
        }
        let after = GpuState {
            free_milli: &free_milli[..n],
            free_memory: if with_memory { &free_memory[..n] } else { &[] },
            milli_cpu_left: s.milli_cpu_left - milli_cpu,
            memo: None,
            ..*s
        };
        self.measure_now(measure, &after)
    }
}

fn accepts(g: &Group, model: Option<&str>) -> bool {
    match &g.models {
        None => true,
        Some(list) => model.is_some_and(|m| list.iter().any(|x| &**x == m)),
    }
}

/// What a pod takes of each of its devices: thousandths and MiB.
fn per_device(request: &GpuRequest, s: &GpuState<'_>) -> (i32, i64) {
    match request.kind {
        GpuKind::Whole { .. } => (FULL, s.memory_mib.map_or(0, |m| m as i64)),
        GpuKind::Share { milli, memory_mib } => (milli as i32, memory_mib as i64),
        GpuKind::None | GpuKind::Slices { .. } => (0, 0),
    }
}

/// Whether the pod fits the node's devices: `fitting_devices(..).is_some()`
/// without listing them (filters ask it of every node).
pub fn fits(s: &GpuState<'_>, request: &GpuRequest) -> bool {
    if request.wants_devices() && !request.accepts_model(s.model) {
        return false;
    }
    match request.kind {
        GpuKind::Whole { count } => {
            count == 0 || (0..s.free_milli.len()).filter(|&i| s.is_free(i)).nth(count as usize - 1).is_some()
        }
        GpuKind::Share { milli, memory_mib } => {
            (0..s.free_milli.len()).any(|i| s.fits_share(i, milli as i32, memory_mib as i64))
        }
        GpuKind::None | GpuKind::Slices { .. } => true,
    }
}

/// The devices a pod fits on, in increasing index order, as a set; None
/// when it does not fit (too few devices, or a model it does not accept).
/// Pods without device requests fit with no devices.
pub fn fitting_devices(s: &GpuState<'_>, request: &GpuRequest) -> Option<DeviceSet> {
    if request.wants_devices() && !request.accepts_model(s.model) {
        return None;
    }
    match request.kind {
        GpuKind::Whole { count } => {
            let free: DeviceSet = (0..s.free_milli.len()).filter(|&i| s.is_free(i)).collect();
            (free.len() >= count as usize).then_some(free)
        }
        GpuKind::Share { milli, memory_mib } => {
            let fit: DeviceSet =
                (0..s.free_milli.len()).filter(|&i| s.fits_share(i, milli as i32, memory_mib as i64)).collect();
            (!fit.is_empty()).then_some(fit)
        }
        GpuKind::None | GpuKind::Slices { .. } => Some(DeviceSet::EMPTY),
    }
}

/// The devices that leave the node least fragmented by `measure`, its
/// fragmentation then, and with `gaps` the gap cost of a share's device:
/// a share goes first to the device whose gap it balances best (see
/// [`super::gaps`]), then by the measure.
/// Ties go to the fullest device (best fit), then the lowest index. Whole
/// GPUs take the lowest free indices: any free devices leave the same
/// state. None when the pod does not fit. The choices and their measures
/// are remembered with the node ([`super::memo`]); the gap costs, which
/// depend on the whole cluster, are computed each time.
pub fn least_fragmenting(
    measure: Measure,
    s: &GpuState<'_>,
    request: &GpuRequest,
    milli_cpu: i64,
    shapes: &TypicalShapes,
    gaps: Option<&GapBalance>,
) -> Option<(DeviceSet, f64, Option<f64>)> {
    placement_effect(measure, s, request, milli_cpu, shapes, gaps).1
}

/// The node's measure now, and `least_fragmenting`'s answer: what a
/// score asks of each node, the two from one look at the node's memo.
pub fn placement_effect(
    measure: Measure,
    s: &GpuState<'_>,
    request: &GpuRequest,
    milli_cpu: i64,
    shapes: &TypicalShapes,
    gaps: Option<&GapBalance>,
) -> (f64, Option<(DeviceSet, f64, Option<f64>)>) {
    if request.wants_devices() && !request.accepts_model(s.model) {
        return (shapes.measure(measure, s), None);
    }
    let (milli, memory) = per_device(request, s);
    let before = || shapes.measure_now(measure, s);
    let compute = || candidates(measure, s, request, milli, memory, milli_cpu, shapes);
    let pick = |b: f64, c: &[(DeviceSet, f64)]| (b, pick_candidate(s, request, milli, gaps, c));
    match s.memo {
        Some((memo, generation)) => {
            let count = match request.kind {
                GpuKind::Whole { count } => count,
                GpuKind::Share { .. } => 1,
                GpuKind::None | GpuKind::Slices { .. } => 0,
            };
            let key = MemoKey { generation, shapes: shapes.id(), measure };
            memo.candidates(key, (milli, memory, count, milli_cpu), before, compute, pick)
        }
        None => pick(before(), &compute()),
    }
}

/// What `request` may take on the node and the measure after each choice
/// (see [`Candidates`]): for a share, the first device of each distinct
/// state it fits (devices in the same state leave the same measure); for
/// whole GPUs, the lowest free indices (any free devices leave the same
/// state); for no devices, none.
fn candidates(
    measure: Measure,
    s: &GpuState<'_>,
    request: &GpuRequest,
    milli: i32,
    memory: i64,
    milli_cpu: i64,
    shapes: &TypicalShapes,
) -> Candidates {
    let Some(fit) = fitting_devices(s, request) else { return Vec::new() };
    let after = |devices: DeviceSet| shapes.fragmentation_after(measure, s, devices, milli, memory, milli_cpu);
    match request.kind {
        GpuKind::Share { .. } => {
            let mut out: Candidates = Vec::new();
            let state = |i: usize| (s.free_milli[i], s.free_memory.get(i).copied().unwrap_or(0));
            for i in fit.iter() {
                let seen = out.iter().any(|(d, _)| d.iter().next().is_some_and(|j| state(j) == state(i)));
                if !seen {
                    out.push((DeviceSet::single(i), after(DeviceSet::single(i))));
                }
            }
            out
        }
        GpuKind::Whole { count } => {
            let devices: DeviceSet = fit.iter().take(count as usize).collect();
            vec![(devices, after(devices))]
        }
        GpuKind::None | GpuKind::Slices { .. } => vec![(DeviceSet::EMPTY, after(DeviceSet::EMPTY))],
    }
}

/// The best of the candidates: for a share, the lowest gap cost (with
/// the balance), then the least measure, then the fullest device, then
/// the lowest index.
fn pick_candidate(
    s: &GpuState<'_>,
    request: &GpuRequest,
    milli: i32,
    gaps: Option<&GapBalance>,
    candidates: &[(DeviceSet, f64)],
) -> Option<(DeviceSet, f64, Option<f64>)> {
    if !matches!(request.kind, GpuKind::Share { .. }) {
        return candidates.first().map(|&(d, f)| (d, f, None));
    }
    // (device, gap cost, fragmentation after); without the balance every
    // cost is 0.
    let mut best: Option<(usize, f64, f64)> = None;
    let table = gaps.map(|g| (g, g.costs(milli)));
    for &(devices, f) in candidates {
        let Some(i) = devices.iter().next() else { continue };
        let c = match table {
            Some((_, Some(costs))) => costs[s.free_milli[i].clamp(0, FULL) as usize],
            Some((g, None)) => g.cost(s.free_milli[i], milli),
            None => 0.0,
        };
        let better = match best {
            None => true,
            Some((j, d, g)) => {
                c < d - 1e-9
                    || (c <= d + 1e-9 && (f < g - 1e-9 || (f <= g + 1e-9 && s.free_milli[i] < s.free_milli[j])))
            }
        };
        if better {
            best = Some((i, c, f));
        }
    }
    best.map(|(i, c, f)| (DeviceSet::single(i), f, gaps.map(|_| c)))
}

/// How devices are chosen inside a node: the profile's placement and,
/// for `Fragmentation`, the measure and gap balance the scores used.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceChoice<'a> {
    pub placement: GpuPlacement,
    pub measure: Measure,
    pub gaps: Option<&'a GapBalance>,
}

impl DeviceChoice<'_> {
    pub fn new(placement: GpuPlacement) -> Self {
        DeviceChoice { placement, ..DeviceChoice::default() }
    }
}

/// The devices `request` gets on this node as `how` says; None when it
/// does not fit, EMPTY when it takes no device.
pub fn choose_devices(
    s: &GpuState<'_>,
    request: &GpuRequest,
    milli_cpu: i64,
    how: DeviceChoice<'_>,
    shapes: &TypicalShapes,
) -> Option<DeviceSet> {
    let placement = how.placement;
    if placement == GpuPlacement::Fragmentation {
        return least_fragmenting(how.measure, s, request, milli_cpu, shapes, how.gaps).map(|(d, ..)| d);
    }
    let fit = fitting_devices(s, request)?;
    match request.kind {
        GpuKind::Whole { count } => Some(fit.iter().take(count as usize).collect()),
        GpuKind::Share { .. } => {
            // Best fit: the least free device; worst fit: the most free.
            let key = |i: usize| (s.free_milli[i], s.free_memory.get(i).copied().unwrap_or(0));
            let pick = if placement == GpuPlacement::Binpack {
                fit.iter().min_by_key(|&i| key(i))
            } else {
                fit.iter().max_by_key(|&i| (key(i), std::cmp::Reverse(i)))
            };
            pick.map(DeviceSet::single)
        }
        GpuKind::None | GpuKind::Slices { .. } => Some(DeviceSet::EMPTY),
    }
}

/// Fragmentation over many nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Fragmentation {
    /// Thousandths of a GPU no typical shape can use.
    pub fragmented_milli: f64,
    /// Thousandths of a GPU free.
    pub free_milli: i64,
}

impl Fragmentation {
    /// The share of the free GPU that is fragmented (0 when none is free).
    pub fn ratio(&self) -> f64 {
        if self.free_milli <= 0 { 0.0 } else { self.fragmented_milli / self.free_milli as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::GpuModels;
    use super::super::shapes::Shape;
    use super::*;
    use std::sync::Arc;

    fn shape(cpu: i64, milli: u32, count: u32) -> Shape {
        Shape { milli_cpu: cpu, gpu_milli: milli, gpu_count: count, gpu_memory_mib: 0, models: None }
    }

    fn typical(list: &[(Shape, f64)]) -> TypicalShapes {
        TypicalShapes::build(list.to_vec(), 1.0)
    }

    fn state<'a>(free: &'a [i32], cpu_left: i64, model: Option<&'a str>) -> GpuState<'a> {
        GpuState { free_milli: free, free_memory: &[], memory_mib: None, milli_cpu_left: cpu_left, model, memo: None }
    }

    /// `fits` says what `fitting_devices` says, on every request against
    /// every node of a small table.
    #[test]
    fn fits_agrees_with_fitting_devices() {
        let a100: GpuModels = Arc::from(vec![Arc::from("a100")]);
        let requests = [
            GpuRequest::whole(0),
            GpuRequest::whole(1),
            GpuRequest::whole(2),
            GpuRequest::whole(3),
            GpuRequest::share(300, 0),
            GpuRequest::share(800, 0),
            GpuRequest::share(1000, 0),
            GpuRequest { models: Some(a100), ..GpuRequest::whole(1) },
            GpuRequest::default(),
        ];
        let frees: [&[i32]; 5] = [&[], &[1000, 1000], &[1000, 300], &[700, 200, 0], &[1000, 1000, 1000]];
        for free in frees {
            for model in [None, Some("a100"), Some("t4")] {
                let s = state(free, 8000, model);
                for r in &requests {
                    assert_eq!(fits(&s, r), fitting_devices(&s, r).is_some(), "{r:?} on {free:?} {model:?}");
                }
            }
        }
    }

    /// The paper's definition on hand-made nodes.
    #[test]
    fn fragmentation_follows_the_definition() {
        let one_gpu = shape(4000, 1000, 1);
        let half = shape(2000, 500, 1);
        let two_gpus = shape(8000, 1000, 2);
        let cpu_only = shape(1000, 0, 0);
        let mut t4_only = shape(0, 1000, 1);
        t4_only.models = Some(Arc::from(vec![Arc::from("t4")]));
        // (case, shapes, free per device, cpu left, model, fragmentation)
        type Case<'a> = (&'a str, Vec<(Shape, f64)>, Vec<i32>, i64, Option<&'a str>, f64);
        let cases: Vec<Case> = vec![
            (
                "hostable: only GPUs too small count",
                vec![(one_gpu.clone(), 1.0)],
                vec![1000, 600, 300],
                64_000,
                None,
                900.0,
            ),
            ("all free whole GPUs: no fragment", vec![(one_gpu.clone(), 1.0)], vec![1000, 1000], 64_000, None, 0.0),
            (
                "not hostable (no GPU fits): all idle counts",
                vec![(one_gpu.clone(), 1.0)],
                vec![600, 300],
                64_000,
                None,
                900.0,
            ),
            ("not hostable (cpu): all idle counts", vec![(one_gpu.clone(), 1.0)], vec![1000, 600], 3_999, None, 1600.0),
            (
                "too few GPUs for a 2-GPU shape",
                vec![(two_gpus.clone(), 1.0)],
                vec![1000, 700, 700],
                64_000,
                None,
                2400.0,
            ),
            ("enough GPUs for a 2-GPU shape", vec![(two_gpus, 1.0)], vec![1000, 1000, 700], 64_000, None, 700.0),
            ("a half fits on the 600", vec![(half.clone(), 1.0)], vec![600, 300], 64_000, None, 300.0),
            (
                "CPU-only shapes use no GPU: all idle counts",
                vec![(cpu_only.clone(), 1.0)],
                vec![1000, 500],
                64_000,
                None,
                1500.0,
            ),
            (
                "a model the shape does not accept",
                vec![(t4_only.clone(), 1.0)],
                vec![1000, 1000],
                64_000,
                Some("a100"),
                2000.0,
            ),
            ("the model it accepts", vec![(t4_only, 1.0)], vec![1000, 1000], 64_000, Some("t4"), 0.0),
            (
                "weighted by the shapes' probabilities",
                vec![(one_gpu.clone(), 0.5), (half, 0.25), (cpu_only, 0.25)],
                vec![1000, 600, 300],
                64_000,
                None,
                0.5 * 900.0 + 0.25 * 300.0 + 0.25 * 1900.0,
            ),
            ("no free GPU: nothing to fragment", vec![(one_gpu.clone(), 1.0)], vec![0, 0], 64_000, None, 0.0),
            (
                "over-committed devices count as empty",
                vec![(one_gpu.clone(), 1.0)],
                vec![-200, 1000],
                64_000,
                None,
                0.0,
            ),
            ("no shapes: no measure", vec![], vec![1000, 500], 64_000, None, 0.0),
        ];
        for (name, shapes, free, cpu_left, model, want) in cases {
            let got = typical(&shapes).fragmentation(&state(&free, cpu_left, model));
            assert!((got - want).abs() < 1e-6, "{name}: {got} != {want}");
        }
    }

    /// Stranded GPU: what is left when the node is filled with each shape.
    #[test]
    fn stranded_counts_what_filling_leaves() {
        // (case, shape, free per device, cpu left, stranded, FGD's fragmentation)
        let cases = [
            ("cpu runs out before the GPUs", shape(4000, 1000, 1), vec![1000, 1000, 1000], 8000, 1000.0, 0.0),
            ("shares leave a remainder", shape(0, 400, 1), vec![1000], 64_000, 200.0, 0.0),
            ("no share fits", shape(0, 400, 1), vec![300], 64_000, 300.0, 300.0),
            ("an odd GPU for 2-GPU pods", shape(0, 1000, 2), vec![1000, 1000, 1000], 64_000, 1000.0, 0.0),
            ("a perfect fill", shape(2000, 500, 1), vec![1000, 500], 6000, 0.0, 0.0),
        ];
        for (name, sh, free, cpu, stranded, fgd) in cases {
            let t = typical(&[(sh, 1.0)]);
            let s = state(&free, cpu, None);
            assert!((t.stranded(&s) - stranded).abs() < 1e-9, "{name}: {}", t.stranded(&s));
            assert!((t.fragmentation(&s) - fgd).abs() < 1e-9, "{name}: FGD {}", t.fragmentation(&s));
            assert_eq!(t.measure(Measure::Stranded, &s), t.stranded(&s));
        }
    }

    /// Slivers: what no mix of typical shares fills on partly used devices.
    #[test]
    fn packed_adds_the_slivers_no_share_mix_fills() {
        let t = typical(&[(shape(4000, 1000, 1), 0.5), (shape(2000, 400, 1), 0.25), (shape(3000, 300, 1), 0.25)]);
        // (case, free per device, cpu left, slivers)
        let cases = [
            ("free devices have none", vec![1000, 1000], 64_000, 0.0),
            ("700 = 400 + 300: none", vec![1000, 700], 64_000, 0.0),
            ("a 190 and a 650 (600 fills)", vec![190, 650], 64_000, 190.0 + 50.0),
            ("cpu for no share: all of a partly used device", vec![1000, 700], 1999, 700.0),
            ("over-committed counts as nothing", vec![-100, 1000], 64_000, 0.0),
        ];
        for (name, free, cpu, slivers) in cases {
            let s = state(&free, cpu, None);
            assert!((t.slivers(&s) - slivers).abs() < 1e-9, "{name}: {}", t.slivers(&s));
            let packed = t.measure(Measure::Packed, &s);
            assert!((packed - t.stranded(&s) - 2.0 * slivers).abs() < 1e-9, "{name}: packed {packed}");
        }
        // Whole-GPU shapes only: nothing to fill slivers with, Packed is Stranded.
        let whole = typical(&[(shape(0, 1000, 1), 1.0)]);
        let s = state(&[1000, 300], 64_000, None);
        assert_eq!(whole.measure(Measure::Packed, &s), whole.stranded(&s));
    }

    #[test]
    fn memory_limits_what_a_device_offers() {
        let t = typical(&[(Shape { gpu_memory_mib: 8_000, ..shape(0, 100, 1) }, 1.0)]);
        // 16 GB devices: one with 10 GB free (a share fits), one with 4 GB
        // free and most of its compute (a fragment worth 250 thousandths).
        let s = GpuState {
            free_milli: &[1000, 900],
            free_memory: &[10_000, 4_000],
            memory_mib: Some(16_000),
            milli_cpu_left: 1000,
            model: None,
            memo: None,
        };
        assert_eq!(s.free_total(), 625 + 250);
        assert!((t.fragmentation(&s) - 250.0).abs() < 1e-9);
        assert_eq!(s.free_devices(), 0);
    }

    #[test]
    fn device_choice_inside_a_node() {
        let shapes = typical(&[(shape(0, 1000, 1), 0.5), (shape(0, 500, 1), 0.5)]);
        let free = [1000, 700, 600];
        let s = state(&free, 64_000, None);
        // (case, request, placement, devices)
        let cases: Vec<(&str, GpuRequest, GpuPlacement, Option<&str>)> = vec![
            // 200 on the 700 leaves a half; on the 600 it leaves 400, a fragment.
            ("fragmentation: 200 onto the 700", GpuRequest::share(200, 0), GpuPlacement::Fragmentation, Some("1")),
            ("fragmentation: 500 onto the 600", GpuRequest::share(500, 0), GpuPlacement::Fragmentation, Some("2")),
            ("binpack: the fullest that fits", GpuRequest::share(200, 0), GpuPlacement::Binpack, Some("2")),
            ("spread: the freest", GpuRequest::share(200, 0), GpuPlacement::Spread, Some("0")),
            ("whole GPUs: the free ones", GpuRequest::whole(1), GpuPlacement::Binpack, Some("0")),
            ("too many whole GPUs", GpuRequest::whole(2), GpuPlacement::Fragmentation, None),
            ("a share only one device holds", GpuRequest::share(800, 0), GpuPlacement::Binpack, Some("0")),
            ("no GPU: no device", GpuRequest::default(), GpuPlacement::Fragmentation, Some("")),
            ("a model not accepted", GpuRequest::share(100, 0).with_models(&["t4"]), GpuPlacement::Binpack, None),
        ];
        for (name, request, placement, want) in cases {
            let got = choose_devices(&s, &request, 0, DeviceChoice::new(placement), &shapes).map(|d| d.to_string());
            assert_eq!(got.as_deref(), want, "{name}");
        }
        // Ties go to the fullest device: two equally good devices.
        let tie = [500, 500, 1000];
        let s = state(&tie, 64_000, None);
        let only_whole = typical(&[(shape(0, 1000, 1), 1.0)]);
        let got = least_fragmenting(Measure::Stranded, &s, &GpuRequest::share(100, 0), 0, &only_whole, None)
            .map(|(d, ..)| d.to_string());
        assert_eq!(got.as_deref(), Some("0"));
        // Shares of 300 and 400: a 300 on the 800 leaves 500, which one
        // of each size alone strands as much as 800 and 700 do, but no
        // mix fills; 800 (400 + 400) and 700 (300 + 400) both fill.
        let mix = typical(&[(shape(0, 300, 1), 0.5), (shape(0, 400, 1), 0.5)]);
        let s = state(&[800, 1000], 64_000, None);
        for (measure, want) in [(Measure::Stranded, "0"), (Measure::Packed, "1")] {
            let got =
                least_fragmenting(measure, &s, &GpuRequest::share(300, 0), 0, &mix, None).map(|(d, ..)| d.to_string());
            assert_eq!(got.as_deref(), Some(want), "{measure:?}");
        }
    }

    #[test]
    fn whole_gpus_on_a_node_with_memory() {
        let s = GpuState {
            free_milli: &[1000, 1000, 1000],
            free_memory: &[16_000, 8_000, 16_000],
            memory_mib: Some(16_000),
            milli_cpu_left: 0,
            model: None,
            memo: None,
        };
        // Device 1 has lent half its memory: not free.
        let got = choose_devices(
            &s,
            &GpuRequest::whole(2),
            0,
            DeviceChoice::new(GpuPlacement::Binpack),
            &TypicalShapes::default(),
        );
        assert_eq!(got.map(|d| d.to_string()).as_deref(), Some("0,2"));
        let share = GpuRequest::share(0, 10_000);
        assert_eq!(fitting_devices(&s, &share).map(|d| d.to_string()).as_deref(), Some("0,2"));
        let unknown = state(&[1000], 0, None);
        assert_eq!(fitting_devices(&unknown, &share), None, "memory asked of a node that does not say it");
    }
}
