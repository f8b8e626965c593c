//! Intent prediction (pre-reservation): the scheduler counts the GPU pods
//! it sees arrive, per queue (`gpu-scheduler.io/queue`, "" for none) and
//! pod shape (whole GPUs per pod or a share of one GPU, and the GPU models
//! accepted), in hourly buckets over a sliding `history`; it forecasts the
//! demand of the current and the next `window` (aligned on UTC midnight)
//! as the mean of that window over the days seen (seasonal by hour of day)
//! plus the recent trend (the last hours against their own seasonal
//! means), and holds whole nodes for `holdShare` of the forecast pods,
//! within `maxHeldShare` of the cluster's GPUs. Other GPU pods are kept off
//! the held nodes, explained like a filter's rejection; an arriving
//! matching pod uses up one unit of the forecast, keeps its part of the
//! hold while it waits, and gives it up once placed; a window's holds end
//! with the window. The holds live here, apart from the starvation
//! guard's: a cycle gets them as [`ForecastHeld`], one of the
//! [`NodeHolds`] of its [`CycleState`](crate::framework::CycleState).
//!
//! [`Forecaster`] keeps the arrivals per [`Demand`] (queue and [`Shape`]),
//! predicts ([`Prediction::explain`] says how) and plans the holds on a
//! snapshot, leaving out the starvation guard's nodes. A held node's
//! rejection is unresolvable (evicting there would not let the pod in) and
//! retried at the window's end. `scheduler/forecast.rs` is the scheduler's
//! side, gang cycles included.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cache::Snapshot;
use crate::devices::GpuKind;
use crate::framework::{Code, NodeHolds, Status};
use crate::model::Pod;
use crate::node_info::NodeInfo;
use crate::time::{MINUTE, Millis};
use gpu_scheduler_model::field::ConfigError;
use gpu_scheduler_model::go_duration;

/// The name forecast-hold rejections are filed under (in explanations,
/// and for the events that release a pod kept off a held node).
pub const FORECAST: &str = "Forecast";

const HOUR: Millis = 60 * MINUTE;
const DAY_HOURS: u64 = 24;
/// Complete hours the trend looks back over: long enough not to follow
/// one odd hour, short enough to see a day that runs above its usual.
const TREND_HOURS: u64 = 3;
const MILLI_PER_GPU: i64 = 1000;

/// `forecast` (top level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForecastConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The forecast window: whole hours dividing a day (1h, 2h, 3h, 4h,
    /// 6h, 8h, 12h, 24h), aligned on midnight UTC.
    #[serde(default = "default_window", with = "go_duration")]
    pub window: Duration,
    /// How far back arrivals are remembered: whole hours, at least a day.
    #[serde(default = "default_history", with = "go_duration")]
    pub history: Duration,
    /// The share of the forecast pods whose capacity is held, in (0, 1].
    #[serde(default = "default_hold_share")]
    pub hold_share: f64,
    /// The most of the cluster's GPUs that forecast holds may keep, in (0, 1].
    #[serde(default = "default_max_held_share")]
    pub max_held_share: f64,
}

fn default_window() -> Duration {
    Duration::from_secs(3600)
}

fn default_history() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}

fn default_hold_share() -> f64 {
    0.5
}

fn default_max_held_share() -> f64 {
    0.2
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig {
            enabled: false,
            window: default_window(),
            history: default_history(),
            hold_share: default_hold_share(),
            max_held_share: default_max_held_share(),
        }
    }
}

impl ForecastConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let whole_hours = |d: &Duration| d.as_millis() > 0 && d.as_millis().is_multiple_of(u128::from(HOUR));
        if !whole_hours(&self.window) || !DAY_HOURS.is_multiple_of(self.window_hours()) {
            return Err(ConfigError::new(
                format!("{path}.window"),
                format!(
                    "must be a whole number of hours dividing a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h), got {}",
                    go_duration::format(&self.window)
                ),
            ));
        }
        if !whole_hours(&self.history) || self.history_hours() < DAY_HOURS {
            return Err(ConfigError::new(
                format!("{path}.history"),
                format!(
                    "must be a whole number of hours from 24h to {}, got {}",
                    go_duration::format(&crate::bounds::MAX_DURATION),
                    go_duration::format(&self.history)
                ),
            ));
        }
        for (field, v) in [("holdShare", self.hold_share), ("maxHeldShare", self.max_held_share)] {
            ConfigError::check(format!("{path}.{field}"), crate::bounds::Interval::above(0.0, 1.0).check(v))?;
        }
        Ok(())
    }

    fn window_hours(&self) -> u64 {
        (self.window.as_secs() / 3600).max(1)
    }

    fn history_hours(&self) -> u64 {
        self.history.as_secs() / 3600
    }
}

/// A pod's shape as the forecast counts it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    /// Whole GPUs per pod; 0 for a share of one GPU.
    pub gpus: u32,
    /// The share of one GPU, in thousandths, when `gpus` is 0.
    pub milli: u32,
    /// The GPU models accepted, `|`-joined; None for any.
    pub models: Option<String>,
}

impl Shape {
    /// The shape of a pod asking for whole GPUs or a share of one; None
    /// for other pods (no GPU, or MIG and time-sliced slices, which are
    /// not devices a hold could keep).
    pub fn of(pod: &Pod) -> Option<Shape> {
        let (gpus, milli) = match pod.gpu.kind {
            GpuKind::Whole { count } if count > 0 => (count, 0),
            GpuKind::Share { milli, .. } if milli > 0 => (0, milli),
            _ => return None,
        };
        let models = pod.gpu.models.as_ref().map(|m| m.iter().map(|s| &**s).collect::<Vec<_>>().join("|"));
        Some(Shape { gpus, milli, models })
    }

    /// "1-GPU", "0.5-GPU", "2-GPU a100".
    pub fn label(&self) -> String {
        let size = if self.gpus > 0 { self.gpus.to_string() } else { number(f64::from(self.milli) / 1000.0) };
        match &self.models {
            Some(m) => format!("{size}-GPU {m}"),
            None => format!("{size}-GPU"),
        }
    }

    /// Thousandths of GPU one pod of this shape takes.
    fn milli_per_pod(&self) -> i64 {
        if self.gpus > 0 { i64::from(self.gpus) * MILLI_PER_GPU } else { i64::from(self.milli) }
    }

    /// How many pods of this shape the node's free devices take now.
    fn fits(&self, node: &NodeInfo) -> usize {
        let model_ok = match (&self.models, node.facts.gpu_model.as_deref()) {
            (None, _) => true,
            (Some(m), Some(model)) => m.split('|').any(|a| a == model),
            (Some(_), None) => false,
        };
        if !model_ok {
            return 0;
        }
        if self.gpus > 0 {
            node.gpus.free_devices() / self.gpus as usize
        } else {
            node.gpus.free_milli().iter().map(|&f| f.max(0) as usize / self.milli as usize).sum()
        }
    }
}

/// What is forecast: the pods of one queue and shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Demand {
    /// The pod's queue; "" for none.
    pub queue: String,
    pub shape: Shape,
}

impl Demand {
    pub fn of(pod: &Pod, queue: Option<&str>) -> Option<Demand> {
        Some(Demand { queue: queue.unwrap_or_default().to_string(), shape: Shape::of(pod)? })
    }

    fn queue_name(&self) -> &str {
        if self.queue.is_empty() { "(none)" } else { &self.queue }
    }
}

/// One window's forecast for one demand, with the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub demand: Demand,
    /// The window, [start, end).
    pub start: Millis,
    pub end: Millis,
    /// The window's mean over the days seen, and how many days.
    pub seasonal: f64,
    pub days: u32,
    /// The recent trend over the window (per hour × its hours).
    pub trend: f64,
    /// round(max(0, seasonal + trend)).
    pub expected: u32,
    /// Matching pods arrived in the window so far.
    pub arrived: u32,
}

impl Prediction {
    /// "queue ml, 1-GPU pods: 24 expected 09:00–10:00 (seasonal 20 over 3 days, trend +4)".
    pub fn explain(&self) -> String {
        let days = if self.days == 1 { "day" } else { "days" };
        let sign = if self.trend < 0.0 { "" } else { "+" };
        let mut s = format!(
            "queue {}, {} pods: {} expected {}–{} (seasonal {} over {} {days}, trend {sign}{})",
            self.demand.queue_name(),
            self.demand.shape.label(),
            self.expected,
            clock(self.start),
            clock(self.end),
            number(self.seasonal),
            self.days,
            number(self.trend),
        );
        if self.arrived > 0 {
            s.push_str(&format!(", {} arrived", self.arrived));
        }
        s
    }
}

/// A node held for a forecast.
#[derive(Debug, Clone, PartialEq)]
pub struct ForecastHold {
    pub node: String,
    pub demand: Demand,
    /// The end of the forecast's window: the hold lapses then.
    pub end: Millis,
    pub expected: u32,
    /// The node's free GPU when held, thousandths (counted against the share).
    pub milli: i64,
}

impl ForecastHold {
    /// Whether the hold keeps `pod` (of demand `of`) off the node: a pod
    /// asking for GPUs that is not of the forecast's queue and shape.
    pub fn blocks(&self, pod: &Pod, of: Option<&Demand>) -> bool {
        pod.gpu.wants_gpu() && of != Some(&self.demand)
    }

    /// The rejection of a pod this hold blocks; tried again when the
    /// window ends, if nothing else moved it before. Unresolvable:
    /// evicting pods there would not let the pod in, and the starvation
    /// guard must not hold a node the forecast holds (it would then wait
    /// on a node no one may use).
    pub fn status(&self) -> Status {
        Status::new(
            Code::UnschedulableAndUnresolvable,
            format!(
                "node(s) held for the forecast demand of queue {} ({} pods, {} expected by {})",
                self.demand.queue_name(),
                self.demand.shape.label(),
                self.expected,
                clock(self.end)
            ),
        )
        .with_plugin(FORECAST)
        .with_retry_at(self.end)
    }
}

/// The forecast holds a cycle sees, and the demand of the cycle's pod.
#[derive(Debug, Clone)]
pub struct ForecastHeld {
    by_node: Arc<HashMap<String, ForecastHold>>,
    pod: Option<Demand>,
}

impl ForecastHeld {
    /// The hold that keeps `pod` off `node`, if any.
    pub fn blocking(&self, node: &str, pod: &Pod) -> Option<&ForecastHold> {
        self.by_node.get(node).filter(|h| h.blocks(pod, self.pod.as_ref()))
    }
}

impl NodeHolds for ForecastHeld {
    fn blocks(&self, node: &str, pod: &Pod) -> bool {
        self.blocking(node, pod).is_some()
    }

    fn blocking(&self, node: &str, pod: &Pod) -> Option<Status> {
        ForecastHeld::blocking(self, node, pod).map(ForecastHold::status)
    }

    fn held_nodes(&self) -> Vec<&str> {
        self.by_node.keys().map(String::as_str).collect()
    }
}

/// The scheduler's forecaster: history, waiting pods and the current holds.
#[derive(Debug)]
pub struct Forecaster {
    cfg: ForecastConfig,
    /// The first hour the forecaster saw: days before it are not "seen".
    start: Option<u64>,
    /// Arrivals per demand, by hour since the epoch.
    counts: BTreeMap<Demand, BTreeMap<u64, u32>>,
    /// Matching pods arrived and not yet placed, by uid.
    waiting: HashMap<String, Demand>,
    holds: Arc<HashMap<String, ForecastHold>>,
}

impl Forecaster {
    pub fn new(cfg: ForecastConfig) -> Self {
        Forecaster { cfg, start: None, counts: BTreeMap::new(), waiting: HashMap::new(), holds: Arc::default() }
    }

    pub fn config(&self) -> &ForecastConfig {
        &self.cfg
    }

    /// A pod entered the scheduling queue at `now`: counted if it asks for
    /// GPUs, and waiting until it leaves the queue.
    pub fn arrived(&mut self, uid: &str, demand: Option<Demand>, now: Millis) {
        self.tick(now);
        let Some(d) = demand else { return };
        *self.counts.entry(d.clone()).or_default().entry(now / HOUR).or_default() += 1;
        self.waiting.insert(uid.to_string(), d);
    }

    /// A pod left the queue (placed, deleted).
    pub fn left(&mut self, uid: &str) {
        self.waiting.remove(uid);
    }

    /// Moves the clock: the first hour seen, and buckets past the history dropped.
    pub fn tick(&mut self, now: Millis) {
        let hour = now / HOUR;
        self.start.get_or_insert(hour);
        let lower = hour.saturating_sub(self.cfg.history_hours());
        for buckets in self.counts.values_mut() {
            while buckets.first_key_value().is_some_and(|(h, _)| *h < lower) {
                buckets.pop_first();
            }
        }
        self.counts.retain(|_, b| !b.is_empty());
    }

    fn count(&self, d: &Demand, hours: std::ops::Range<u64>) -> u32 {
        self.counts.get(d).map_or(0, |b| b.range(hours).map(|(_, c)| c).sum())
    }

    /// The mean arrivals of the hours [first, first + hours) over the
    /// earlier days whose same hours were seen completely and are in the
    /// history, and the number of those days.
    fn seasonal(&self, d: &Demand, first: u64, hours: u64, now_hour: u64) -> (f64, u32) {
        let Some(start) = self.start else { return (0.0, 0) };
        let lower = now_hour.saturating_sub(self.cfg.history_hours()).max(start);
        let (mut sum, mut days) = (0u64, 0u32);
        for day in 1.. {
            let Some(s) = first.checked_sub(day * DAY_HOURS) else { break };
            if s < lower {
                break;
            }
            if s + hours > now_hour {
                continue;
            }
            sum += u64::from(self.count(d, s..s + hours));
            days += 1;
        }
        (if days > 0 { sum as f64 / f64::from(days) } else { 0.0 }, days)
    }

    /// Per hour: the mean of the last complete hours' arrivals less their
    /// own seasonal means (hours without a day seen before left out).
    fn trend(&self, d: &Demand, now_hour: u64) -> f64 {
        let Some(start) = self.start else { return 0.0 };
        let from = now_hour.saturating_sub(TREND_HOURS).max(start);
        let devs: Vec<f64> = (from..now_hour)
            .filter_map(|h| {
                let (mean, days) = self.seasonal(d, h, 1, now_hour);
                (days > 0).then(|| f64::from(self.count(d, h..h + 1)) - mean)
            })
            .collect();
        if devs.is_empty() { 0.0 } else { devs.iter().sum::<f64>() / devs.len() as f64 }
    }

    /// The forecast of the window starting at hour `first`, seen at `now`;
    /// None before a day of history.
    pub fn predict(&self, d: &Demand, first: u64, now: Millis) -> Option<Prediction> {
        let now_hour = now / HOUR;
        let hours = self.cfg.window_hours();
        let (seasonal, days) = self.seasonal(d, first, hours, now_hour);
        if days == 0 {
            return None;
        }
        let trend = self.trend(d, now_hour) * hours as f64;
        let expected = (seasonal + trend).max(0.0).round() as u32;
        let arrived = self.count(d, first..(first + hours).min(now_hour + 1));
        Some(Prediction {
            demand: d.clone(),
            start: first * HOUR,
            end: (first + hours) * HOUR,
            seasonal,
            days,
            trend,
            expected,
            arrived,
        })
    }

    /// The open forecasts at `now`: the current and the next window of
    /// each demand seen, those expecting pods.
    pub fn predictions(&self, now: Millis) -> Vec<Prediction> {
        let hours = self.cfg.window_hours();
        let current = now / HOUR / hours * hours;
        self.counts
            .keys()
            .flat_map(|d| [current, current + hours].map(|w| self.predict(d, w, now)))
            .flatten()
            .filter(|p| p.expected > 0)
            .collect()
    }

    /// Matching pods waiting, per demand.
    fn waiting_by_demand(&self) -> HashMap<&Demand, usize> {
        let mut m = HashMap::new();
        for d in self.waiting.values() {
            *m.entry(d).or_default() += 1;
        }
        m
    }

    /// Chooses the held nodes for `now` on `snap`, leaving out the nodes in
    /// `taken` (held by the starvation guard). Per open forecast, pods to
    /// hold for: `holdShare` of the forecast not yet arrived, plus (in its
    /// first open window) the matching pods arrived and still waiting, at
    /// most `holdShare` of the forecast. Largest forecasts first; nodes
    /// where a pod of the shape fits now, those whose free GPU is exactly
    /// one pod's first, then the least free; within `maxHeldShare`.
    pub fn plan(&mut self, snap: &Snapshot, now: Millis, taken: &HashSet<&str>) {
        self.tick(now);
        let mut preds = self.predictions(now);
        preds.sort_by(|a, b| b.expected.cmp(&a.expected).then(a.start.cmp(&b.start)).then(a.demand.cmp(&b.demand)));
        let mut waiting = self.waiting_by_demand();
        let total: i64 = snap.nodes().iter().map(|n| n.gpus.count() as i64 * MILLI_PER_GPU).sum();
        let budget = self.cfg.max_held_share * total as f64;
        let share = self.cfg.hold_share;
        let mut held: HashMap<String, ForecastHold> = HashMap::new();
        let mut held_milli = 0i64;
        // Current windows before next ones, so that waiting pods count in the first.
        let mut order: Vec<usize> = (0..preds.len()).collect();
        order.sort_by_key(|&i| preds[i].start);
        let mut want: Vec<usize> = vec![0; preds.len()];
        for i in order {
            let p = &preds[i];
            let cap = (share * f64::from(p.expected)).ceil() as usize;
            let remaining = (share * f64::from(p.expected.saturating_sub(p.arrived))).ceil() as usize;
            let w = waiting.remove(&p.demand).unwrap_or(0);
            want[i] = (remaining + w).min(cap);
        }
        for (p, want) in preds.iter().zip(want) {
            if want == 0 {
                continue;
            }
            let mut candidates: Vec<(bool, i64, usize, usize)> = snap
                .nodes()
                .iter()
                .enumerate()
                .filter(|(_, n)| !taken.contains(n.name()) && !held.contains_key(n.name()))
                .filter_map(|(i, n)| {
                    let units = p.demand.shape.fits(n);
                    let free = n.gpus.free_total();
                    (units > 0).then_some((free != p.demand.shape.milli_per_pod(), free, i, units))
                })
                .collect();
            candidates.sort();
            let mut got = 0;
            for (_, free, i, units) in candidates {
                if got >= want {
                    break;
                }
                if (held_milli + free) as f64 > budget {
                    continue;
                }
                held_milli += free;
                got += units;
                let name = snap.nodes()[i].name().to_string();
                held.insert(
                    name.clone(),
                    ForecastHold {
                        node: name,
                        demand: p.demand.clone(),
                        end: p.end,
                        expected: p.expected,
                        milli: free,
                    },
                );
            }
        }
        self.holds = Arc::new(held);
    }

    /// The holds of the last plan, by node name.
    pub fn holds(&self) -> impl Iterator<Item = &ForecastHold> {
        self.holds.values()
    }

    /// GPU held, thousandths.
    pub fn held_milli(&self) -> i64 {
        self.holds.values().map(|h| h.milli).sum()
    }

    /// What a cycle for a pod of demand `pod` sees; None when nothing is held.
    pub fn index(&self, pod: Option<Demand>) -> Option<ForecastHeld> {
        (!self.holds.is_empty()).then(|| ForecastHeld { by_node: self.holds.clone(), pod })
    }
}

/// A time of day, "09:00" (UTC).
fn clock(at: Millis) -> String {
    let minutes = at / MINUTE % (DAY_HOURS * 60);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// A number as the explanations say it: whole, or with one decimal.
fn number(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 { format!("{r:.0}") } else { format!("{r:.1}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::GPU_RESOURCE;
    use crate::testing::{node, pod};

    const GPU: &str = GPU_RESOURCE;
    const DAY: Millis = DAY_HOURS * HOUR;

    fn ml(gpus: u32) -> Demand {
        Demand { queue: "ml".into(), shape: Shape { gpus, milli: 0, models: None } }
    }

    /// Arrivals: (day, hour, minute, count) of demand `d`.
    fn history(f: &mut Forecaster, d: &Demand, arrivals: &[(u64, u64, u64, u32)]) {
        let mut n = 0;
        for &(day, hour, minute, count) in arrivals {
            for _ in 0..count {
                n += 1;
                f.arrived(&format!("p{n}"), Some(d.clone()), day * DAY + hour * HOUR + minute * MINUTE);
            }
        }
        f.waiting.clear();
    }

    fn enabled() -> ForecastConfig {
        ForecastConfig { enabled: true, ..Default::default() }
    }

    #[test]
    fn seasonal_plus_trend() {
        // (name, arrivals, now, window's first hour, expected, seasonal, days, trend, explanation)
        type Case = (&'static str, Vec<(u64, u64, u64, u32)>, Millis, u64, Option<(u32, f64, u32, f64)>);
        let cases: Vec<Case> = vec![
            ("no day seen yet", vec![(0, 0, 0, 1)], 8 * HOUR, 9, None),
            // 18, 20, 22 at 09:00 on three days: 20 on the fourth, no trend (quiet mornings).
            (
                "three days",
                vec![(0, 0, 0, 1), (0, 9, 5, 18), (1, 9, 5, 20), (2, 9, 5, 22)],
                3 * DAY + 8 * HOUR,
                3 * 24 + 9,
                Some((20, 20.0, 3, 0.0)),
            ),
            // The morning runs 4 an hour above its usual 2: trend +4.
            (
                "trend up",
                vec![(0, 5, 0, 2), (0, 6, 0, 2), (0, 7, 0, 2), (0, 9, 0, 20), (1, 5, 0, 6), (1, 6, 0, 6), (1, 7, 0, 6)],
                DAY + 8 * HOUR,
                24 + 9,
                Some((24, 20.0, 1, 4.0)),
            ),
            // Quieter than usual: the trend cannot take the forecast below 0.
            (
                "clamped",
                vec![(0, 5, 0, 9), (0, 6, 0, 9), (0, 7, 0, 9), (0, 9, 0, 1)],
                DAY + 8 * HOUR,
                24 + 9,
                Some((0, 1.0, 1, -9.0)),
            ),
            // The current window counts yesterday's same hour, not today's.
            (
                "current window",
                vec![(0, 0, 0, 1), (0, 9, 0, 10), (1, 9, 0, 4)],
                DAY + 9 * HOUR + 30 * MINUTE,
                24 + 9,
                Some((10, 10.0, 1, 0.0)),
            ),
        ];
        for (name, arrivals, now, first, want) in cases {
            let mut f = Forecaster::new(enabled());
            history(&mut f, &ml(1), &arrivals);
            let got = f.predict(&ml(1), first, now).map(|p| (p.expected, p.seasonal, p.days, p.trend));
            assert_eq!(got, want, "{name}");
        }
        let mut f = Forecaster::new(enabled());
        history(
            &mut f,
            &ml(1),
            &[(0, 5, 0, 2), (0, 6, 0, 2), (0, 7, 0, 2), (0, 9, 0, 20), (1, 5, 0, 6), (1, 6, 0, 6), (1, 7, 0, 6)],
        );
        let p = f.predictions(DAY + 8 * HOUR + 30 * MINUTE);
        let texts: Vec<String> = p.iter().map(Prediction::explain).collect();
        // The trend lifts the current hour too (nothing usually comes at 08:00).
        assert_eq!(
            texts,
            [
                "queue ml, 1-GPU pods: 4 expected 08:00–09:00 (seasonal 0 over 1 day, trend +4)",
                "queue ml, 1-GPU pods: 24 expected 09:00–10:00 (seasonal 20 over 1 day, trend +4)"
            ]
        );
    }

    #[test]
    fn the_window_slides() {
        let cfg = ForecastConfig { history: Duration::from_secs(2 * 24 * 3600), ..enabled() };
        let mut f = Forecaster::new(cfg);
        history(&mut f, &ml(2), &[(0, 9, 0, 30), (1, 9, 0, 10), (2, 9, 0, 20)]);
        // On day 3, day 0 is past the two days kept: (10 + 20) / 2.
        let p = f.predict(&ml(2), 3 * 24 + 9, 3 * DAY + 8 * HOUR);
        assert_eq!(p.map(|p| (p.expected, p.days)), Some((15, 2)));
        f.tick(10 * DAY);
        assert!(f.counts.is_empty(), "everything older than the history is dropped");
        assert!(f.predictions(10 * DAY).is_empty());
    }

    #[test]
    fn holds_shrink_as_demand_arrives_and_end_with_the_window() {
        // Six 1-GPU slots free (n1: 1, n2: 2, n3: 3), two 8-GPU nodes in all busy.
        let nodes = vec![
            node("n1").resource(GPU, 8).build(),
            node("n2").resource(GPU, 8).build(),
            node("n3").resource(GPU, 8).build(),
            node("full").resource(GPU, 8).build(),
        ];
        let load = |n1: i64, n2: i64| {
            vec![
                pod("a").node("n1").resource(GPU, n1).arc(),
                pod("b").node("n2").resource(GPU, n2).arc(),
                pod("c").node("n3").resource(GPU, 5).arc(),
                pod("d").node("full").resource(GPU, 8).arc(),
            ]
        };
        let snap = Snapshot::from_parts(nodes.clone(), load(7, 6));
        let cfg = ForecastConfig { hold_share: 0.5, max_held_share: 1.0, ..enabled() };
        let mut f = Forecaster::new(cfg);
        history(&mut f, &ml(1), &[(0, 0, 0, 1), (0, 9, 0, 4)]);
        let at8 = DAY + 8 * HOUR;
        f.plan(&snap, at8, &HashSet::new());
        let held = |f: &Forecaster| {
            let mut v: Vec<String> = f.holds().map(|h| h.node.clone()).collect();
            v.sort();
            v
        };
        // 4 expected at 09:00, half held: n1 (exactly one pod's GPU), then n2.
        assert_eq!(held(&f), ["n1", "n2"]);
        let index = f.index(Demand::of(&pod("x").resource(GPU, 1).build(), None)).unwrap();
        let other = pod("x").resource(GPU, 1).build();
        let blocked = index.blocking("n1", &other).map(ForecastHold::status).unwrap_or_else(Status::success);
        assert_eq!(
            blocked.message(),
            "node(s) held for the forecast demand of queue ml (1-GPU pods, 4 expected by 10:00)"
        );
        assert_eq!((blocked.plugin, blocked.retry_at), (FORECAST, Some(DAY + 10 * HOUR)));
        assert!(index.blocking("n3", &other).is_none(), "not held");
        assert!(index.blocking("n1", &pod("web").build()).is_none(), "CPU-only pods are not affected");
        let mine = f.index(Some(ml(1))).unwrap();
        assert!(mine.blocking("n1", &other).is_none(), "a pod of the forecast's queue and shape");
        let two = f.index(Some(ml(2))).unwrap();
        assert!(two.blocking("n1", &pod("y").resource(GPU, 2).build()).is_some(), "another shape");

        // Two arrive at 09:00 and wait: the forecast has 2 left (1 held)
        // and 2 wait: still 2 held.
        let at9 = DAY + 9 * HOUR;
        f.arrived("m1", Some(ml(1)), at9);
        f.arrived("m2", Some(ml(1)), at9);
        f.plan(&snap, at9, &HashSet::new());
        assert_eq!(held(&f), ["n1", "n2"]);
        // Both placed (on n1 and n2): the hold shrinks to the one pod of the
        // forecast still to come, on n2's last free GPU.
        f.left("m1");
        f.left("m2");
        let snap = Snapshot::from_parts(nodes.clone(), load(8, 7));
        f.plan(&snap, at9 + MINUTE, &HashSet::new());
        assert_eq!(held(&f), ["n2"]);
        // The other two arrive: nothing is left to hold for once they are placed.
        f.arrived("m3", Some(ml(1)), at9 + 2 * MINUTE);
        f.arrived("m4", Some(ml(1)), at9 + 2 * MINUTE);
        f.left("m3");
        f.left("m4");
        f.plan(&snap, at9 + 3 * MINUTE, &HashSet::new());
        assert!(held(&f).is_empty());
        // A late pod keeps its part while it waits, until the window passes.
        f.arrived("late", Some(ml(1)), at9 + 30 * MINUTE);
        f.plan(&snap, at9 + 40 * MINUTE, &HashSet::new());
        assert_eq!(held(&f), ["n2"]);
        f.plan(&snap, DAY + 10 * HOUR, &HashSet::new());
        assert!(held(&f).is_empty());
        assert!(f.index(None).is_none());
    }

    #[test]
    fn holds_stay_within_the_share_and_off_starvation_holds() {
        let nodes = vec![node("n1").resource(GPU, 4).build(), node("n2").resource(GPU, 4).build()];
        let snap = Snapshot::from_parts(nodes, vec![]);
        // 8 GPUs, 16 expected: half is 8 pods, but half of the GPUs is one node.
        let cfg = ForecastConfig { hold_share: 0.5, max_held_share: 0.5, ..enabled() };
        let mut f = Forecaster::new(cfg);
        history(&mut f, &ml(1), &[(0, 0, 0, 1), (0, 9, 0, 16)]);
        f.plan(&snap, DAY + 8 * HOUR, &HashSet::new());
        assert_eq!(f.held_milli(), 4000);
        assert_eq!(f.holds().count(), 1);
        f.plan(&snap, DAY + 8 * HOUR, &HashSet::from(["n1", "n2"]));
        assert_eq!(f.held_milli(), 0, "nodes the starvation guard holds are left alone");
    }

    #[test]
    fn shapes_and_config() {
        let share = pod("s").annotation(crate::devices::ANNOTATION_GPU_MILLI, "500").resource(GPU, 1).build();
        assert_eq!(Shape::of(&share).map(|s| s.label()), Some("0.5-GPU".to_string()));
        assert_eq!(Shape::of(&pod("w").resource(GPU, 2).build()).map(|s| s.label()), Some("2-GPU".to_string()));
        assert_eq!(Shape::of(&pod("cpu").build()), None);

        let bad: Vec<(&str, &str)> = vec![
            ("forecast:\n  window: 90m\n", "forecast.window"),
            ("forecast:\n  window: 5h\n", "forecast.window"),
            ("forecast:\n  history: 12h\n", "forecast.history"),
            ("forecast:\n  history: 0s\n", "forecast.history"),
            ("forecast:\n  holdShare: 0\n", "forecast.holdShare"),
            ("forecast:\n  holdShare: 1.5\n", "forecast.holdShare"),
            ("forecast:\n  maxHeldShare: -0.1\n", "forecast.maxHeldShare"),
            ("forecast:\n  window: soon\n", "forecast.window"),
            ("forecast:\n  holdshare: 0.5\n", "forecast.holdshare"),
        ];
        let head = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n";
        for (body, path) in bad {
            let got = crate::config::parse(&format!("{head}{body}")).map(|_| ()).map_err(|e| e.path);
            assert_eq!(got, Err(path.to_string()), "{body}");
        }
        let cfg = crate::config::parse(&format!(
            "{head}forecast:\n  enabled: true\n  window: 2h\n  history: 72h\n  holdShare: 1\n  maxHeldShare: 0.3\n"
        ))
        .map(|c| c.forecast);
        assert_eq!(
            cfg,
            Ok(ForecastConfig {
                enabled: true,
                window: Duration::from_secs(7200),
                history: Duration::from_secs(72 * 3600),
                hold_share: 1.0,
                max_held_share: 0.3,
            })
        );
        let default = crate::config::parse(head).map(|c| c.forecast);
        assert_eq!(default, Ok(ForecastConfig::default()));
    }
}
