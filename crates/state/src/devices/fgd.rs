//! The FGD paper's policy (Weng et al., "Beware of Fragmentation", ATC '23)
//! as the paper's simulator runs it: a reference to compare placements
//! against on workloads without a published figure (`gpuPlacement: fgd`
//! and the FgdScore plugin), not the product's policy (GpuFragmentation,
//! [`super::frag`]). It is kept apart from `frag.rs` so that the reference
//! stays put when the product's measure changes.
//!
//! What it follows, each point read from the simulator's code:
//!
//! - **Typical pods**: the shapes (cpu, share of each GPU, GPU count,
//!   accepted models; no memory) of the whole workload, counted in advance
//!   (`gpuShapes.learnFrom: workload`), most frequent first, equal counts
//!   ordered by larger cpu, share, count, models; kept one at a time until
//!   they cover `gpuShapes.coverage` of the pods (95 %), probabilities
//!   renormalised over those kept. Our own selection keeps rare shapes
//!   that name models and learns from arrivals: not this.
//! - **Fragmentation** of a node: for each typical pod, all the node's free
//!   GPU if the pod cannot run there (too little cpu, too few GPUs with
//!   room for its share, a model it does not accept, or no GPU asked:
//!   CPU-only pods count all free GPU), else the free GPU of the devices
//!   too small for its share; weighted by the probabilities.
//! - **Score**: the fragmentation the pod removes, in GPUs, through a
//!   sigmoid, times 100, truncated: 50 for no change, one point about every
//!   40 thousandths near it, coarser further; not normalised. Ties between
//!   nodes go to a fixed order (`tieBreak: nodeOrder`).
//! - **Device** of a share: the first by index among those whose score is
//!   the highest (an integer score: devices within a point tie); whole GPUs
//!   take the lowest free indices.
//!
//! [`FgdShapes`] holds its typical pods, cut from the shapes seen, with its
//! fragmentation, score and device choice. Why it is kept and how it
//! compares: docs/BENCHMARKS.md, "A faithful FGD".

use std::sync::Arc;

use super::frag::{GpuState, fitting_devices};
use super::request::{GpuKind, GpuModels, GpuRequest};
use super::shapes::{Shape, TypicalShapes};
use super::{DeviceSet, MAX_DEVICES, MILLI_PER_GPU};

const FULL: i32 = MILLI_PER_GPU as i32;

/// FGD's typical pods, grouped by GPU part for the measure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FgdShapes {
    /// The typical pods, most frequent first, with their probabilities.
    typical: Vec<(Shape, f64)>,
    /// Sum of the probabilities (1, or 0 without typical pods).
    total: f64,
    groups: Vec<Group>,
}

/// Typical pods with the same GPU part (CPU-only pods have none: they count
/// all free GPU, through `total`).
#[derive(Debug, Clone, PartialEq)]
struct Group {
    /// Thousandths of each GPU (1000: whole GPUs).
    milli: i32,
    count: usize,
    models: Option<GpuModels>,
    /// Cpu requests, ascending, and the probability of the pods asking at
    /// most that much.
    cpu: Vec<i64>,
    cumulative: Vec<f64>,
}

impl Group {
    fn probability_within(&self, milli_cpu_left: i64) -> f64 {
        match self.cpu.partition_point(|&c| c <= milli_cpu_left) {
            0 => 0.0,
            n => self.cumulative[n - 1],
        }
    }
}

/// A shape as the paper's simulator keys it: cpu, share, GPU count, and
/// the accepted models as written (`A|B`); GPU memory is not part of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    milli_cpu: i64,
    gpu_milli: u32,
    gpu_count: u32,
    models: String,
}

impl Key {
    fn of(s: &Shape) -> Key {
        let models = s.models.as_deref().map(|m| m.join("|")).unwrap_or_default();
        Key { milli_cpu: s.milli_cpu, gpu_milli: s.gpu_milli, gpu_count: s.gpu_count, models }
    }
}

impl FgdShapes {
    /// FGD's typical pods from the shapes seen (their weights: pods).
    pub fn new(shapes: &TypicalShapes) -> FgdShapes {
        FgdShapes::select(shapes.seen(), shapes.coverage())
    }

    /// The most frequent of `seen` until they cover `coverage` of the
    /// weight, one shape at a time, in the simulator's order.
    pub fn select(seen: &[(Shape, f64)], coverage: f64) -> FgdShapes {
        let mut merged: Vec<(Key, Shape, f64)> = Vec::new();
        for (s, w) in seen.iter().filter(|(_, w)| *w > 0.0 && w.is_finite()) {
            let key = Key::of(s);
            match merged.iter_mut().find(|(k, ..)| *k == key) {
                Some(e) => e.2 += w,
                None => merged.push((key, Shape { gpu_memory_mib: 0, ..s.clone() }, *w)),
            }
        }
        // By weight, then the larger shape first (the simulator sorts in
        // reverse of "fewer pods, then smaller").
        merged.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| b.0.cmp(&a.0)));
        let total: f64 = merged.iter().map(|e| e.2).sum();
        // The simulator's threshold is a percent: percent × total / 100.
        let expected = coverage * 100.0 * total / 100.0;
        let mut cum = 0.0;
        let mut kept = 0;
        while cum < expected && kept < merged.len() {
            cum += merged[kept].2;
            kept += 1;
        }
        merged.truncate(kept);
        if cum <= 0.0 {
            return FgdShapes::default();
        }
        let typical: Vec<(Shape, f64)> = merged.into_iter().map(|(_, s, w)| (s, w / cum)).collect();
        FgdShapes::grouped(typical)
    }

    fn grouped(typical: Vec<(Shape, f64)>) -> FgdShapes {
        let mut by_cpu: Vec<&(Shape, f64)> = typical.iter().filter(|(s, _)| s.gpu_count > 0).collect();
        by_cpu.sort_by_key(|a| a.0.milli_cpu);
        let mut groups: Vec<Group> = Vec::new();
        for (s, p) in by_cpu {
            let same =
                |g: &Group| g.milli == s.gpu_milli as i32 && g.count == s.gpu_count as usize && g.models == s.models;
            let i = match groups.iter().position(same) {
                Some(i) => i,
                None => {
                    groups.push(Group {
                        milli: s.gpu_milli as i32,
                        count: s.gpu_count as usize,
                        models: s.models.clone(),
                        cpu: Vec::new(),
                        cumulative: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[i];
            let before = g.cumulative.last().copied().unwrap_or(0.0);
            if g.cpu.last() == Some(&s.milli_cpu) {
                if let Some(last) = g.cumulative.last_mut() {
                    *last += p;
                }
            } else {
                g.cpu.push(s.milli_cpu);
                g.cumulative.push(before + p);
            }
        }
        FgdShapes { total: typical.iter().map(|(_, p)| p).sum(), typical, groups }
    }

    /// The typical pods with their probabilities, most frequent first.
    pub fn typical(&self) -> &[(Shape, f64)] {
        &self.typical
    }

    pub fn is_empty(&self) -> bool {
        self.typical.is_empty()
    }

    /// The node's fragmentation, thousandths of a GPU (FGD's measure; a
    /// device's free part is its free share, memory aside, as there).
    pub fn fragmentation(&self, s: &GpuState<'_>) -> f64 {
        let free: i64 = s.free_milli.iter().map(|&f| i64::from(f.max(0))).sum();
        if free <= 0 || self.total == 0.0 {
            return 0.0;
        }
        let mut used = 0.0;
        for g in self.groups.iter().filter(|g| accepts(g.models.as_deref(), s.model)) {
            let p = g.probability_within(s.milli_cpu_left);
            if p == 0.0 {
                continue;
            }
            let (mut n, mut sum) = (0, 0i64);
            for &f in s.free_milli {
                if f >= g.milli {
                    n += 1;
                    sum += i64::from(f);
                }
            }
            if n >= g.count {
                used += p * sum as f64;
            }
        }
        (self.total * free as f64 - used).max(0.0)
    }

    /// The fragmentation after `devices` each lose `milli` and the node
    /// `milli_cpu` of cpu.
    fn fragmentation_after(&self, s: &GpuState<'_>, devices: DeviceSet, milli: i32, milli_cpu: i64) -> f64 {
        let n = s.free_milli.len().min(MAX_DEVICES);
        let mut free = [0i32; MAX_DEVICES];
        free[..n].copy_from_slice(&s.free_milli[..n]);
        for i in devices.below(n).iter() {
            free[i] -= milli;
        }
        let after = GpuState { free_milli: &free[..n], milli_cpu_left: s.milli_cpu_left - milli_cpu, ..*s };
        self.fragmentation(&after)
    }

    /// Where `request` goes on this node and its score there (see
    /// [`score`]): for a share, the first device by index of the highest
    /// score; whole GPUs the lowest free indices. None when it does not fit.
    pub fn place(&self, s: &GpuState<'_>, request: &GpuRequest, milli_cpu: i64) -> Option<(DeviceSet, i64)> {
        let fit = fitting_devices(s, request)?;
        let before = self.fragmentation(s);
        let score_of =
            |devices: DeviceSet, milli: i32| score(before, self.fragmentation_after(s, devices, milli, milli_cpu));
        match request.kind {
            GpuKind::Share { milli, .. } => {
                let milli = milli as i32;
                // Devices with the same free share score the same: one
                // evaluation per distinct share.
                let mut seen: Vec<(i32, i64)> = Vec::with_capacity(s.free_milli.len());
                let mut best: Option<(usize, i64)> = None;
                for i in fit.iter() {
                    let free = s.free_milli[i];
                    let sc = match seen.iter().find(|(f, _)| *f == free) {
                        Some(&(_, sc)) => sc,
                        None => {
                            let sc = score_of(DeviceSet::single(i), milli);
                            seen.push((free, sc));
                            sc
                        }
                    };
                    if best.is_none_or(|(_, b)| sc > b) {
                        best = Some((i, sc));
                    }
                }
                best.map(|(i, sc)| (DeviceSet::single(i), sc))
            }
            GpuKind::Whole { count } => {
                let devices: DeviceSet = fit.iter().take(count as usize).collect();
                Some((devices, score_of(devices, FULL)))
            }
            GpuKind::None | GpuKind::Slices { .. } => Some((DeviceSet::EMPTY, score_of(DeviceSet::EMPTY, 0))),
        }
    }
}

/// FGD's node score for a fragmentation going from `before` to `after`
/// (thousandths): 100 × sigmoid(GPUs removed), truncated as the
/// simulator's integer conversion does; 50 when nothing changes.
pub fn score(before: f64, after: f64) -> i64 {
    let x = (before - after) / 1000.0;
    let sigmoid = 1.0 / (1.0 + (-x).exp());
    (sigmoid * 100.0) as i64
}

/// The devices `request` gets on this node, as FGD picks them; None when
/// it does not fit.
pub fn choose_devices(s: &GpuState<'_>, request: &GpuRequest, milli_cpu: i64, shapes: &FgdShapes) -> Option<DeviceSet> {
    shapes.place(s, request, milli_cpu).map(|(d, _)| d)
}

fn accepts(models: Option<&[Arc<str>]>, model: Option<&str>) -> bool {
    match models {
        None => true,
        Some(list) => model.is_some_and(|m| list.iter().any(|x| &**x == m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(cpu: i64, milli: u32, count: u32) -> Shape {
        Shape { milli_cpu: cpu, gpu_milli: milli, gpu_count: count, gpu_memory_mib: 0, models: None }
    }

    fn typed(cpu: i64, milli: u32, count: u32, models: &[&str]) -> Shape {
        Shape { models: Some(models.iter().map(|m| Arc::from(*m)).collect()), ..shape(cpu, milli, count) }
    }

    fn state<'a>(free: &'a [i32], cpu_left: i64, model: Option<&'a str>) -> GpuState<'a> {
        GpuState { free_milli: free, free_memory: &[], memory_mib: None, milli_cpu_left: cpu_left, model, memo: None }
    }

    fn exact(list: &[(Shape, f64)]) -> FgdShapes {
        FgdShapes::select(list, 1.0)
    }

    #[test]
    fn typical_pods_are_cut_and_ordered_as_the_simulator_does() {
        let seen = vec![
            (shape(1000, 1000, 1), 50.0),
            (shape(2000, 500, 1), 20.0),
            (shape(4000, 500, 1), 20.0),
            (shape(0, 0, 0), 6.0),
            (shape(8000, 1000, 8), 4.0),
        ];
        // (coverage, typical pods kept in order)
        let cases: Vec<(f64, Vec<Shape>)> = vec![
            (0.5, vec![shape(1000, 1000, 1)]),
            // Equal counts: the larger cpu first; 70 % is reached with it.
            (0.7, vec![shape(1000, 1000, 1), shape(4000, 500, 1)]),
            (0.9, vec![shape(1000, 1000, 1), shape(4000, 500, 1), shape(2000, 500, 1)]),
            (0.95, vec![shape(1000, 1000, 1), shape(4000, 500, 1), shape(2000, 500, 1), shape(0, 0, 0)]),
            (
                1.0,
                vec![
                    shape(1000, 1000, 1),
                    shape(4000, 500, 1),
                    shape(2000, 500, 1),
                    shape(0, 0, 0),
                    shape(8000, 1000, 8),
                ],
            ),
        ];
        for (coverage, want) in cases {
            let f = FgdShapes::select(&seen, coverage);
            let got: Vec<Shape> = f.typical().iter().map(|(s, _)| s.clone()).collect();
            assert_eq!(got, want, "coverage {coverage}");
            let kept: f64 = seen.iter().filter(|(s, _)| want.contains(s)).map(|(_, w)| w).sum();
            assert!((f.typical()[0].1 - 50.0 / kept).abs() < 1e-12, "renormalised over those kept");
            assert!((f.total - 1.0).abs() < 1e-12);
        }
        // Shapes differing only in GPU memory are one typical pod.
        let memory = vec![(Shape { gpu_memory_mib: 8000, ..shape(1000, 300, 1) }, 2.0), (shape(1000, 300, 1), 1.0)];
        assert_eq!(FgdShapes::select(&memory, 0.95).typical(), [(shape(1000, 300, 1), 1.0)]);
        // Models order ties as their written names do.
        let models = vec![(typed(1000, 1000, 1, &["t4"]), 1.0), (typed(1000, 1000, 1, &["g2"]), 1.0)];
        assert_eq!(FgdShapes::select(&models, 0.5).typical()[0].0, typed(1000, 1000, 1, &["t4"]));
        assert!(FgdShapes::select(&[], 0.95).is_empty());
    }

    /// The paper's definition on hand-made nodes.
    #[test]
    fn fragmentation_follows_the_definition() {
        let one_gpu = shape(4000, 1000, 1);
        let half = shape(2000, 500, 1);
        // (case, typical pods, free per device, cpu left, model, fragmentation)
        type Case<'a> = (&'a str, Vec<(Shape, f64)>, Vec<i32>, i64, Option<&'a str>, f64);
        let cases: Vec<Case> = vec![
            ("hostable: only GPUs too small", vec![(one_gpu.clone(), 1.0)], vec![1000, 600, 300], 64_000, None, 900.0),
            ("not hostable (no GPU fits)", vec![(one_gpu.clone(), 1.0)], vec![600, 300], 64_000, None, 900.0),
            ("not hostable (cpu)", vec![(one_gpu.clone(), 1.0)], vec![1000, 600], 3_999, None, 1600.0),
            ("too few for 2 GPUs", vec![(shape(0, 1000, 2), 1.0)], vec![1000, 700, 700], 64_000, None, 2400.0),
            ("a half fits the 600", vec![(half.clone(), 1.0)], vec![600, 300], 64_000, None, 300.0),
            ("CPU-only pods: all free GPU", vec![(shape(1000, 0, 0), 1.0)], vec![1000, 500], 64_000, None, 1500.0),
            (
                "a model not accepted",
                vec![(typed(0, 1000, 1, &["t4"]), 1.0)],
                vec![1000, 1000],
                64_000,
                Some("g2"),
                2000.0,
            ),
            ("the model accepted", vec![(typed(0, 1000, 1, &["t4"]), 1.0)], vec![1000, 1000], 64_000, Some("t4"), 0.0),
            (
                "weighted",
                vec![(one_gpu.clone(), 0.5), (half, 0.25), (shape(1000, 0, 0), 0.25)],
                vec![1000, 600, 300],
                64_000,
                None,
                0.5 * 900.0 + 0.25 * 300.0 + 0.25 * 1900.0,
            ),
            ("no free GPU", vec![(one_gpu, 1.0)], vec![0, 0], 64_000, None, 0.0),
        ];
        for (name, shapes, free, cpu, model, want) in cases {
            let got = exact(&shapes).fragmentation(&state(&free, cpu, model));
            assert!((got - want).abs() < 1e-6, "{name}: {got} != {want}");
            // The product's measure is FGD's too, on the same typical pods.
            let ours = TypicalShapes::build(shapes.clone(), 1.0).fragmentation(&state(&free, cpu, model));
            assert!((ours - want).abs() < 1e-6, "{name}: frag.rs {ours} != {want}");
        }
    }

    #[test]
    fn score_is_an_integer_sigmoid() {
        // (fragmentation removed, score)
        let cases = [
            (0.0, 50),
            (39.0, 50),
            (41.0, 51),
            (-1.0, 49),
            (-41.0, 48),
            (1000.0, 73),
            (-1000.0, 26),
            (8000.0, 99),
            (-8000.0, 0),
        ];
        for (removed, want) in cases {
            assert_eq!(score(5000.0, 5000.0 - removed), want, "removed {removed}");
        }
    }

    #[test]
    fn devices_are_chosen_by_score_then_index() {
        // Whole GPUs 3/4, halves 1/4.
        let shapes = exact(&[(shape(0, 1000, 1), 3.0), (shape(0, 500, 1), 1.0)]);
        // (case, free per device, request, devices, score)
        type Case<'a> = (&'a str, Vec<i32>, GpuRequest, Option<(&'a str, i64)>);
        let cases: Vec<Case> = vec![
            // A half on the 500 removes its 0.75 × 500 fragment; on a free
            // GPU it makes one (0.75 × 500).
            ("a half fills the half", vec![1000, 500, 1000], GpuRequest::share(500, 0), Some(("1", 59))),
            // 100 on the 700 or the 600 removes 75 (both still hold a
            // half); on the free GPU it adds 675. The 600 is the better fit,
            // but the scores tie: the lowest index.
            ("equal scores: the lowest index", vec![700, 600, 1000], GpuRequest::share(100, 0), Some(("0", 51))),
            ("whole GPUs: the lowest free", vec![500, 1000, 1000], GpuRequest::whole(1), Some(("1", 50))),
            ("CPU-only: no device", vec![1000], GpuRequest::default(), Some(("", 50))),
            ("does not fit", vec![300], GpuRequest::share(500, 0), None),
        ];
        for (name, free, request, want) in cases {
            let got = shapes.place(&state(&free, 64_000, None), &request, 0).map(|(d, sc)| (d.to_string(), sc));
            assert_eq!(got.as_ref().map(|(d, sc)| (d.as_str(), *sc)), want, "{name}");
        }
    }
}
