//! Gap balance: where a GPU share goes so that the gaps it leaves get
//! filled, judged over the whole cluster rather than one node.
//!
//! A partly used device has a gap: its free thousandths. The snapshot keeps
//! how many devices have each gap ([`GapHistogram`], updated with the nodes
//! that change). A gap is worth what the share sizes that come often enough
//! can fill of it ([`TypicalShapes::live_fill`]); the rest of it is dead.
//! Placing a share of `s` into a gap `h` turns one gap of `h` into one of
//! `h - s` (a fully free device has no gap). Its cost is the change of the
//! sum, over the gap values, of the squared number of devices with that
//! value, plus a little for the dead space it adds: the Sum-of-Squares rule
//! of online bin packing (Csirik, Johnson, Kenyon, Orlin, Shor and Weber,
//! "On the sum-of-squares algorithm for bin packing", JACM 2006): for item
//! sizes drawn from a fixed mix that packs perfectly its expected waste
//! grows only as the square root of the items, and it needs no knowledge
//! of the mix. Gaps of a value many devices already have are filled
//! first, and gaps few devices have are the ones made: a share does not
//! join a partner that leaves a gap only rare shares fill, when hundreds
//! of such gaps already wait for them.
//!
//! Counting gaps by their live part, not their size, is this project's
//! change to the rule: a 180 and a 190 left beside shares wait for the same
//! rare small shares, so they are one market; gaps no live size fills do
//! not count at all (counting them would keep shares from their best
//! partner only because pairs like it are common).

use std::sync::{Arc, OnceLock};

use super::MILLI_PER_GPU;
use super::node::NodeGpus;
use super::shapes::TypicalShapes;

const N: usize = MILLI_PER_GPU as usize;

/// How much one thousandth of dead space added costs, against the
/// squared counts (Alibaba's trace, docs/BENCHMARKS.md: 0, 0.03, 0.1 and
/// 0.3 were tried; 0.1 was best or within noise of it).
const DEAD_WEIGHT: f64 = 0.1;

/// The cluster's partly used devices by their free thousandths (1–999).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapHistogram {
    /// Empty until a node with GPUs is counted.
    counts: Vec<u32>,
}

impl GapHistogram {
    /// Counts a node's devices in (`delta` 1) or out (-1).
    pub fn apply(&mut self, gpus: &NodeGpus, delta: i32) {
        for &free in gpus.free_milli() {
            if free <= 0 || free >= N as i32 {
                continue;
            }
            if self.counts.is_empty() {
                self.counts = vec![0; N];
            }
            let c = &mut self.counts[free as usize];
            *c = c.saturating_add_signed(delta);
        }
    }

    /// Devices with `free` thousandths free (0 for 0, 1000 and beyond).
    pub fn count(&self, free: usize) -> u32 {
        self.counts.get(free).copied().unwrap_or(0)
    }
}

/// One cycle's view of the gaps, for the cost of a share's placement.
#[derive(Debug, Clone)]
pub struct GapBalance {
    /// The costs of one share size on every device state (`cost`, by
    /// free thousandths), filled at its first use: a decision asks for
    /// one size on thousands of devices in a few states.
    table: OnceLock<(i32, Vec<f64>)>,
    /// Whose `live_fill` says what live share sizes can fill of a gap.
    shapes: Arc<TypicalShapes>,
    /// Partly used devices by the live part of their gap.
    by_fill: Vec<u32>,
}

/// The table is a cache of `cost`: equal balances cost alike.
impl PartialEq for GapBalance {
    fn eq(&self, other: &Self) -> bool {
        self.shapes == other.shapes && self.by_fill == other.by_fill
    }
}

impl GapBalance {
    /// None without live share sizes (then there is nothing to balance).
    pub fn new(shapes: &Arc<TypicalShapes>, gaps: &GapHistogram) -> Option<GapBalance> {
        let fill = shapes.live_fill();
        if fill.len() != N + 1 {
            return None;
        }
        let mut by_fill = vec![0u32; N + 1];
        for (free, &n) in gaps.counts.iter().enumerate() {
            by_fill[usize::from(fill[free])] += n;
        }
        Some(GapBalance { table: OnceLock::new(), shapes: shapes.clone(), by_fill })
    }

    /// The cost of a share of `milli` on a device with `free` thousandths
    /// free (at least `milli`; 1000 is a fully free device). Lower is
    /// better; negative when the placement evens the gaps out.
    pub fn cost(&self, free: i32, milli: i32) -> f64 {
        match self.costs(milli) {
            Some(costs) => costs[free.clamp(0, N as i32) as usize],
            None => self.cost_now(free, milli),
        }
    }

    /// `cost(free, milli)` for every `free` from 0 to 1000, when `milli`
    /// is the size this balance was first asked for.
    pub fn costs(&self, milli: i32) -> Option<&[f64]> {
        let (size, costs) =
            self.table.get_or_init(|| (milli, (0..=N as i32).map(|f| self.cost_now(f, milli)).collect()));
        (*size == milli).then_some(costs.as_slice())
    }

    fn cost_now(&self, free: i32, milli: i32) -> f64 {
        let free = free.clamp(0, N as i32) as usize;
        let after = free.saturating_sub(milli.max(0) as usize);
        // A fully free device has no gap; a full one neither.
        let (before_live, before_dead) = if free >= N { (0, 0) } else { self.split(free) };
        let (after_live, after_dead) = self.split(after);
        let mut squares = 0.0;
        if before_live != after_live {
            if before_live > 0 {
                squares += 1.0 - 2.0 * f64::from(self.by_fill[before_live]);
            }
            if after_live > 0 {
                squares += 1.0 + 2.0 * f64::from(self.by_fill[after_live]);
            }
        }
        squares + DEAD_WEIGHT * (after_dead as f64 - before_dead as f64)
    }

    /// A gap's live part and its dead rest.
    fn split(&self, gap: usize) -> (usize, usize) {
        let live = usize::from(self.shapes.live_fill()[gap]);
        (live, gap - live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::shapes::Shape;
    use crate::testing::pod;

    fn share(milli: u32) -> Shape {
        Shape { milli_cpu: 0, gpu_milli: milli, gpu_count: 1, gpu_memory_mib: 0, models: None }
    }

    /// Shares of 810, 470, 320 and 160 (the last rare: 0.5 % of the shares).
    fn shapes() -> Arc<TypicalShapes> {
        let weighted = vec![(share(810), 40.0), (share(470), 40.0), (share(320), 19.5), (share(160), 0.5)];
        Arc::new(TypicalShapes::build(weighted, 1.0))
    }

    fn info(free: &[u32]) -> NodeGpus {
        use crate::devices::{DeviceSet, GpuRequest};
        let mut n = NodeGpus::new(free.len(), None);
        for (i, &f) in free.iter().enumerate() {
            if f < 1000 {
                let p = pod(&format!("p{i}")).node("n").with(|p| {
                    p.gpu = GpuRequest::share(1000 - f, 0);
                    p.gpu_devices = DeviceSet::parse(&i.to_string()).ok();
                });
                n.add_pod(&p.build());
            }
        }
        n
    }

    #[test]
    fn the_histogram_counts_partly_used_devices() {
        let mut h = GapHistogram::default();
        assert_eq!(h.count(530), 0);
        let a = info(&[1000, 530, 530, 190]);
        h.apply(&a, 1);
        h.apply(&info(&[530]), 1);
        assert_eq!((h.count(530), h.count(190), h.count(1000), h.count(0)), (3, 1, 0, 0));
        h.apply(&a, -1);
        assert_eq!((h.count(530), h.count(190)), (1, 0));
    }

    #[test]
    fn rare_sizes_are_not_live() {
        let s = shapes();
        let fill = s.live_fill();
        // 160 is below 1 % of the shares: a 190 is dead, 530 holds a 470,
        // 680 a 320 (or 470), 1000 a 470 + 470 or 320 + 320 + 320.
        let cases = [(190, 0), (320, 320), (530, 470), (680, 640), (1000, 960), (0, 0)];
        for (gap, want) in cases {
            assert_eq!(fill[gap], want, "gap {gap}");
        }
    }

    #[test]
    fn costs() {
        let s = shapes();
        let mut h = GapHistogram::default();
        // Ten devices with 530 free (beside a 470), two with 680 (beside a 320).
        h.apply(&info(&[530; 10]), 1);
        h.apply(&info(&[680, 680]), 1);
        let g = GapBalance::new(&s, &h).unwrap();
        let cases = [
            // A 470 beside a 470: one of ten 530s (live 470, dead 60) filled,
            // leaving the 60 dead as it was.
            (530, 470, 1.0 - 2.0 * 10.0),
            // A 470 on a free device: an eleventh 530, 60 of it dead.
            (1000, 470, 1.0 + 2.0 * 10.0 + 0.1 * 60.0),
            // A 320 beside a 320: 680 (live 640) becomes 360 (live 320).
            (680, 320, (1.0 - 2.0 * 2.0) + 1.0 + 0.1 * (40.0 - 40.0)),
            // A 320 beside a 470: 530 becomes 210, all dead.
            (530, 320, 1.0 - 2.0 * 10.0 + 0.1 * (210.0 - 60.0)),
        ];
        for (free, milli, want) in cases {
            assert!(
                (g.cost(free, milli) - want).abs() < 1e-9,
                "{milli} into {free}: {} != {want}",
                g.cost(free, milli)
            );
        }
        let whole = Arc::new(TypicalShapes::build(vec![(share(1000), 1.0)], 1.0));
        assert!(GapBalance::new(&whole, &h).is_none(), "no shares");
    }
}
