//! `gpu-scheduler replay --timed`: a trace replayed on its own clock. Each
//! pod arrives at its `creation_time` and, once placed, runs for as long as
//! it ran in the trace ([`TracePod::run_ms`]: from `scheduled_time`, or
//! `creation_time` when the trace never saw it start, to `deletion_time`;
//! without a deletion time, to the end), then leaves; pods that do not fit
//! wait in the scheduler's queue and are tried again as the engine's
//! queue decides (a pod leaving, a timed retry, the 5-minute flush), as in
//! a live cluster. The trace's time 0 is taken as midnight (UTC), so that
//! hours of the day mean what the trace's do. After the last arrival and
//! the last pod's end, timed retries run for one more day; pods still
//! waiting then were never placed. Wait is start − arrival, in seconds,
//! over the pods placed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use engine::config::Configuration;
use engine::model::Pod;
use engine::profile::DefaultPlugin;
use engine::registry::Registry;
use engine::scheduler::capability::Forecast;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::time::Millis;

use crate::openb::{TraceNode, TracePod};
use crate::replay::{NodeGpuUse, ReplayBinder, fragmentation, node_use, trace_scheduler};
use crate::simulate::{SimError, in_pool};

const DAY: Millis = 24 * 3600 * 1000;

/// Waits of a set of pods placed, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WaitStats {
    pub pods: usize,
    pub mean_s: f64,
    /// Nearest-rank 95th percentile.
    pub p95_s: f64,
}

impl WaitStats {
    pub fn of(waits_ms: &[Millis]) -> WaitStats {
        if waits_ms.is_empty() {
            return WaitStats::default();
        }
        let mut v = waits_ms.to_vec();
        v.sort_unstable();
        let rank = (0.95 * v.len() as f64).ceil() as usize;
        let mean = v.iter().map(|&w| w as f64).sum::<f64>() / v.len() as f64;
        WaitStats { pods: v.len(), mean_s: mean / 1000.0, p95_s: v[rank.clamp(1, v.len()) - 1] as f64 / 1000.0 }
    }
}

/// What the timed replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Waits {
    pub all: WaitStats,
    /// Pods asking for GPUs.
    pub gpu: WaitStats,
    /// Per queue of the trace (pods with a queue only).
    pub queues: BTreeMap<String, WaitStats>,
    pub never_placed: usize,
    pub never_placed_gpu: usize,
}

/// A forecast that held nodes: its explanation when first seen, and the
/// most GPU its holds kept at once (thousandths).
#[derive(Debug, Clone, PartialEq)]
pub struct HeldForecast {
    pub explanation: String,
    pub peak_held_milli: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimedReplay {
    pub gpus_total: i64,
    pub nodes: usize,
    pub pods: usize,
    pub placed: usize,
    pub wait: Waits,
    /// GPU allocated and the fragmentation figure when the replay ended.
    pub allocated_milli: i64,
    pub fragmentation: f64,
    pub node_use: Vec<NodeGpuUse>,
    /// The forecasts that held nodes, in the order their windows began.
    pub held_forecasts: Vec<HeldForecast>,
    /// The replay's last instant, seconds from the trace's start.
    pub end_s: u64,
    pub seed: u64,
    /// Every pod of the trace, in order of arrival.
    pub placements: Vec<TimedPlacement>,
}

/// Where and when one pod of the trace ran (the trace's pod name; times
/// in ms from the trace's start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedPlacement {
    pub pod: String,
    pub arrival_ms: Millis,
    /// Node and start, None for a pod never placed.
    pub placed: Option<(String, Millis)>,
    /// When it left: start + its run time, None when it ran to the end.
    pub end_ms: Option<Millis>,
}

/// A pod of the trace that arrives.
struct Arrival {
    at: Millis,
    pod: Pod,
    run_ms: Option<Millis>,
    queue: String,
}

/// Replays `pods` on `nodes` on the trace's clock; `progress(done, total)`
/// as pods arrive. Every pod needs a `creation_time`.
pub fn replay_timed(
    nodes: &[TraceNode],
    pods: &[TracePod],
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
    seed: u64,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<TimedReplay, SimError> {
    in_pool(|| {
        let (mut sched, converted) = trace_scheduler(nodes, pods, cfg, registry, defaults, seed)?;
        let mut arrivals: Vec<Arrival> = pods
            .iter()
            .zip(converted)
            .map(|(p, pod)| {
                let created = p.creation_time.ok_or_else(|| {
                    SimError::Engine(format!("pod {}: no creation_time (a timed replay needs arrival times)", p.name))
                })?;
                Ok(Arrival { at: created * 1000, pod, run_ms: p.run_ms(), queue: p.queue.clone() })
            })
            .collect::<Result<_, SimError>>()?;
        arrivals.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.pod.name.cmp(&b.pod.name)));
        let total = arrivals.len();

        let mut placements: Vec<TimedPlacement> = arrivals
            .iter()
            .map(|a| TimedPlacement { pod: a.pod.name.clone(), arrival_ms: a.at, placed: None, end_ms: None })
            .collect();
        let index: HashMap<String, usize> = arrivals.iter().enumerate().map(|(i, a)| (a.pod.uid.clone(), i)).collect();
        // Pods arrived and not placed yet: uid → (arrival, queue, asks for GPUs, run time).
        let mut waiting: HashMap<String, (Millis, String, bool, Option<Millis>)> = HashMap::new();
        let mut waits: Vec<(Millis, String, bool)> = Vec::new();
        let mut running: BinaryHeap<Reverse<(Millis, String)>> = BinaryHeap::new();
        let mut held: BTreeMap<(Millis, String), HeldForecast> = BTreeMap::new();
        let mut seen: HashMap<(Millis, String), String> = HashMap::new();
        let (mut next, mut now, mut last_event) = (0usize, 0 as Millis, 0 as Millis);
        loop {
            let event = [arrivals.get(next).map(|a| a.at), running.peek().map(|Reverse((t, _))| *t)]
                .into_iter()
                .flatten()
                .min();
            // Timed retries (backoffs, rejections that lapse) in between;
            // once nothing arrives or ends, for one more day.
            let retry = sched.queue().next_backoff_expiry().map(|t| t.max(now + 1));
            now = match (event, retry) {
                (Some(e), Some(r)) => e.min(r),
                (Some(e), None) => e,
                (None, Some(r)) if r <= last_event + DAY => r,
                _ => break,
            };
            while let Some(Reverse((t, uid))) = running.peek().cloned()
                && t <= now
            {
                running.pop();
                sched.on_pod_delete(&uid, now);
                last_event = t;
            }
            while let Some(a) = arrivals.get(next)
                && a.at <= now
            {
                waiting.insert(a.pod.uid.clone(), (a.at, a.queue.clone(), a.pod.gpu.wants_gpu(), a.run_ms));
                sched.on_pod_upsert(a.pod.clone(), now);
                last_event = a.at;
                next += 1;
                progress(next, total);
            }
            while let Some(outcome) = sched.schedule_one(now) {
                let CycleOutcome::Assumed(mut task) = outcome else { continue };
                let status = task.bind(&ReplayBinder);
                let bound = (*task.pod).clone();
                sched.finish_binding(*task, &status, now);
                if !status.is_success() {
                    continue;
                }
                let uid = bound.uid.clone();
                if let (Some(&i), Some(node)) = (index.get(&uid), &bound.node_name) {
                    placements[i].placed = Some((node.clone(), now));
                }
                sched.on_pod_upsert(bound, now);
                let Some((at, queue, gpu, run)) = waiting.remove(&uid) else { continue };
                waits.push((now - at, queue, gpu));
                if let Some(run) = run {
                    if let Some(&i) = index.get(&uid) {
                        placements[i].end_ms = Some(now + run);
                    }
                    running.push(Reverse((now + run, uid)));
                }
            }
            record_holds(&sched, now, &mut seen, &mut held);
        }

        let stats = |f: &dyn Fn(&(Millis, String, bool)) -> bool| {
            WaitStats::of(&waits.iter().filter(|w| f(w)).map(|w| w.0).collect::<Vec<_>>())
        };
        let mut queues = BTreeMap::new();
        for (_, q, _) in &waits {
            if !q.is_empty() && !queues.contains_key(q) {
                queues.insert(q.clone(), stats(&|w| &w.1 == q));
            }
        }
        let wait = Waits {
            all: stats(&|_| true),
            gpu: stats(&|w| w.2),
            queues,
            never_placed: waiting.len(),
            never_placed_gpu: waiting.values().filter(|w| w.2).count(),
        };
        let node_use = node_use(&sched, nodes);
        let allocated_milli = node_use.iter().map(|n| n.allocated_milli).sum();
        Ok(TimedReplay {
            gpus_total: nodes.iter().map(|n| n.gpus).sum(),
            nodes: nodes.len(),
            pods: total,
            placed: waits.len(),
            wait,
            allocated_milli,
            fragmentation: fragmentation(&sched, nodes).ratio(),
            node_use,
            held_forecasts: held.into_values().collect(),
            end_s: now / 1000,
            seed,
            placements,
        })
    })
}

/// Notes each forecast's explanation when first seen, and the GPU its
/// holds keep now, by window end and demand.
fn record_holds(
    sched: &Scheduler,
    now: Millis,
    seen: &mut HashMap<(Millis, String), String>,
    held: &mut BTreeMap<(Millis, String), HeldForecast>,
) {
    let Some(f) = sched.capability::<Forecast>().map(Forecast::forecaster) else { return };
    for p in f.predictions(now) {
        seen.entry((p.end, format!("{:?}", p.demand))).or_insert_with(|| p.explain());
    }
    let mut now_held: BTreeMap<(Millis, String), i64> = BTreeMap::new();
    for h in f.holds() {
        *now_held.entry((h.end, format!("{:?}", h.demand))).or_default() += h.milli;
    }
    for (key, milli) in now_held {
        let explanation = seen.get(&key).cloned().unwrap_or_default();
        let e = held.entry(key).or_insert(HeldForecast { explanation, peak_held_milli: 0 });
        e.peak_held_milli = e.peak_held_milli.max(milli);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statistics() {
        // (waits in ms, pods, mean s, p95 s)
        let cases: &[(&[Millis], usize, f64, f64)] = &[
            (&[], 0, 0.0, 0.0),
            (&[3000], 1, 3.0, 3.0),
            (&[0, 1000, 2000, 3000], 4, 1.5, 3.0),
            // 20 pods: the 19th smallest is the 95th percentile.
            (&[0; 18].iter().copied().chain([10_000, 50_000]).collect::<Vec<_>>(), 20, 3.0, 10.0),
        ];
        for (waits, pods, mean, p95) in cases {
            let s = WaitStats::of(waits);
            assert_eq!((s.pods, s.mean_s, s.p95_s), (*pods, *mean, *p95), "{waits:?}");
        }
    }
}
