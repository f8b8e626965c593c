//! The figures of a live replay: per run, GPU allocation over time (the
//! GPU asked by the pods bound and not finished, over the cluster's GPUs,
//! each second), queueing delay by size class, pods that never ran, the
//! last binding and the scheduler's CPU; the simulator's prediction read
//! from `replay --timed --placements` and set against the live run; and
//! the files: JSON, a Markdown table and an SVG of allocation over time.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::live::run::{LiveRun, PodOutcome};
use crate::live::trace::{CLASSES, LivePod};

/// Queueing delays of the pods of one class, seconds: a pod that never
/// ran counts with its wait until the end of the run (censored), so that
/// a scheduler that never places a pod does not look fast.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Delay {
    pub placed: usize,
    pub never_ran: usize,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
}

/// The figures of one run (live or simulated).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Allocation (% of the cluster's GPUs) in the middle of each second.
    pub curve: Vec<f64>,
    /// Its mean over the run.
    pub mean_allocation: f64,
    pub delays: BTreeMap<&'static str, Delay>,
    pub never_ran: usize,
    /// Seconds from the start to the last binding.
    pub last_binding_s: f64,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The figures of `outcomes` (by pod name) for `pods`, over `end_s`
/// seconds on a cluster of `gpus` GPUs.
pub fn figures(pods: &[LivePod], outcomes: &HashMap<String, PodOutcome>, gpus: u64, end_s: f64) -> Figures {
    let capacity = (gpus * 1000).max(1) as f64;
    // Sampled in the middle of each second (k + 0.5 s): a pod bound a few
    // milliseconds after its arrival second counts in that second, as in
    // the simulator where it binds at the arrival itself.
    let samples = end_s.max(0.0).floor() as usize;
    let sample = |t: f64| ((t - 0.5).ceil().max(0.0) as usize).min(samples);
    // Allocation changes: +milli at binding, -milli at the end.
    let mut change = vec![0i64; samples + 1];
    let mut waits: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut never: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut last_binding: f64 = 0.0;
    for p in pods {
        let o = outcomes.get(&p.name).cloned().unwrap_or_default();
        let class = p.class();
        match (&o.bound, o.created_s) {
            (Some((at, _)), created) => {
                last_binding = last_binding.max(*at);
                waits.entry(class).or_default().push((at - created.unwrap_or(p.arrival_s as f64)).max(0.0));
                let milli = p.gpu_total_milli() as i64;
                let (from, to) = (sample(*at), o.finished_s.map_or(samples, sample));
                if from < to {
                    change[from] += milli;
                    change[to] -= milli;
                }
            }
            (None, Some(created)) => {
                *never.entry(class).or_default() += 1;
                waits.entry(class).or_default().push((end_s - created).max(0.0));
            }
            // Never created (the run stopped first): not counted.
            (None, None) => {}
        }
    }
    let mut curve = Vec::with_capacity(samples);
    let mut now = 0i64;
    for c in change.iter().take(samples) {
        now += c;
        curve.push(now as f64 * 100.0 / capacity);
    }
    let mean_allocation = if curve.is_empty() { 0.0 } else { curve.iter().sum::<f64>() / curve.len() as f64 };
    let mut delays = BTreeMap::new();
    for class in CLASSES {
        let mut w = waits.remove(class).unwrap_or_default();
        let never_ran = never.get(class).copied().unwrap_or(0);
        if w.is_empty() && never_ran == 0 {
            continue;
        }
        w.sort_by(f64::total_cmp);
        let mean_s = if w.is_empty() { 0.0 } else { w.iter().sum::<f64>() / w.len() as f64 };
        let placed = w.len() - never_ran;
        delays.insert(
            class,
            Delay { placed, never_ran, mean_s, p50_s: percentile(&w, 0.5), p99_s: percentile(&w, 0.99) },
        );
    }
    Figures { curve, mean_allocation, delays, never_ran: never.values().sum(), last_binding_s: last_binding }
}

/// A run's pods as CSV (pod,created_s,bound_s,node,finished_s; blank
/// where it did not happen).
pub fn outcomes_csv(pods: &[LivePod], run: &LiveRun) -> String {
    let t = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    let mut out = String::from("pod,created_s,bound_s,node,finished_s\n");
    for p in pods {
        let o = run.pods.get(&p.name).cloned().unwrap_or_default();
        let (bound, node) = o.bound.map_or((None, String::new()), |(t, n)| (Some(t), n));
        let _ = writeln!(out, "{},{},{},{node},{}", p.name, t(o.created_s), t(bound), t(o.finished_s));
    }
    out
}

/// The simulator's outcomes from `replay --timed --placements` (CSV:
/// pod,node,arrival_s,start_s,end_s).
pub fn read_placements(text: &str) -> Result<HashMap<String, PodOutcome>> {
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [pod, node, arrival, start, end] = f[..] else {
            bail!("placements line {}: 5 fields expected, got {line:?}", i + 1);
        };
        let num = |v: &str| -> Result<Option<f64>> {
            if v.is_empty() {
                return Ok(None);
            }
            v.parse().map(Some).with_context(|| format!("placements line {}: {v:?} is not a number", i + 1))
        };
        let bound = num(start)?.map(|s| (s, node.to_string()));
        out.insert(pod.to_string(), PodOutcome { created_s: num(arrival)?, bound, finished_s: num(end)? });
    }
    Ok(out)
}

/// How far the simulator's prediction is from a live run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Agreement {
    /// Allocation over time: the largest and the mean difference, points.
    pub max_points: f64,
    pub mean_points: f64,
    /// Mean allocation over the run, live and predicted.
    pub live_mean: f64,
    pub sim_mean: f64,
    /// Pods placed in one and not the other by the end (names, sorted).
    pub live_only: Vec<String>,
    pub sim_only: Vec<String>,
    /// Pods placed by both, and how many on the same node.
    pub both: usize,
    pub same_node: usize,
}

/// Sets the live run against the prediction, over the live run's length.
pub fn agreement(pods: &[LivePod], live: &LiveRun, sim: &HashMap<String, PodOutcome>, gpus: u64) -> Agreement {
    let l = figures(pods, &live.pods, gpus, live.end_s);
    // The prediction's pods were created at their arrival, exactly.
    let sim: HashMap<String, PodOutcome> = sim
        .iter()
        .map(|(k, o)| {
            let mut o = o.clone();
            o.bound = o.bound.filter(|(t, _)| *t <= live.end_s);
            (k.clone(), o)
        })
        .collect();
    let s = figures(pods, &sim, gpus, live.end_s);
    let diffs: Vec<f64> = l.curve.iter().zip(&s.curve).map(|(a, b)| (a - b).abs()).collect();
    let mut a = Agreement {
        max_points: diffs.iter().copied().fold(0.0, f64::max),
        mean_points: if diffs.is_empty() { 0.0 } else { diffs.iter().sum::<f64>() / diffs.len() as f64 },
        live_mean: l.mean_allocation,
        sim_mean: s.mean_allocation,
        ..Agreement::default()
    };
    for p in pods {
        let on = |m: &HashMap<String, PodOutcome>| m.get(&p.name).and_then(|o| o.bound.as_ref().map(|b| b.1.clone()));
        match (on(&live.pods), on(&sim)) {
            (Some(a1), Some(b1)) => {
                a.both += 1;
                a.same_node += usize::from(a1 == b1);
            }
            (Some(_), None) => a.live_only.push(p.name.clone()),
            (None, Some(_)) => a.sim_only.push(p.name.clone()),
            (None, None) => {}
        }
    }
    a.live_only.sort();
    a.sim_only.sort();
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn delay_json(d: &Delay) -> Value {
    json!({"placed": d.placed, "never_ran": d.never_ran, "mean_s": round2(d.mean_s), "p50_s": round2(d.p50_s), "p99_s": round2(d.p99_s)})
}

/// A run's figures as JSON (the curve sampled every 10 s).
fn run_json(r: &LiveRun, f: &Figures) -> Value {
    let delays: serde_json::Map<String, Value> = f.delays.iter().map(|(k, d)| (k.to_string(), delay_json(d))).collect();
    json!({
        "name": r.name,
        "round": r.round + 1,
        "end_s": round2(r.end_s),
        "mean_allocation": round2(f.mean_allocation),
        "final_allocation": round2(f.curve.last().copied().unwrap_or(0.0)),
        "never_ran": f.never_ran,
        "last_binding_s": round2(f.last_binding_s),
        "delays": delays,
        "cpu_s": r.cpu_s.map(round2),
        "peak_rss_mib": r.peak_rss_mib.map(round2),
        "curve_every_10s": f.curve.iter().step_by(10).map(|v| round2(*v)).collect::<Vec<_>>(),
    })
}

/// Everything a live replay writes.
pub struct Report<'a> {
    pub title: String,
    /// How the trace was shaped, for the reader.
    pub shape: Value,
    pub pods: &'a [LivePod],
    pub gpus: u64,
    pub runs: &'a [LiveRun],
    /// The simulator's outcomes, when `replay --timed` ran.
    pub sim: Option<&'a HashMap<String, PodOutcome>>,
}

impl Report<'_> {
    fn figures(&self) -> Vec<Figures> {
        self.runs.iter().map(|r| figures(self.pods, &r.pods, self.gpus, r.end_s)).collect()
    }

    /// Median over the runs of each contender of `f`.
    fn medians(&self, figs: &[Figures], f: impl Fn(&LiveRun, &Figures) -> Option<f64>) -> BTreeMap<String, f64> {
        let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (r, fi) in self.runs.iter().zip(figs) {
            if let Some(v) = f(r, fi) {
                by.entry(r.name.clone()).or_default().push(v);
            }
        }
        by.into_iter().map(|(k, v)| (k, median(v))).collect()
    }

    fn agreements(&self) -> Vec<(String, usize, Agreement)> {
        let Some(sim) = self.sim else { return Vec::new() };
        self.runs
            .iter()
            .filter(|r| r.name == "gpu-scheduler")
            .map(|r| (r.name.clone(), r.round + 1, agreement(self.pods, r, sim, self.gpus)))
            .collect()
    }

    pub fn json(&self) -> Value {
        let figs = self.figures();
        let runs: Vec<Value> = self.runs.iter().zip(&figs).map(|(r, f)| run_json(r, f)).collect();
        let agreements: Vec<Value> = self
            .agreements()
            .iter()
            .map(|(name, round, a)| {
                json!({
                    "contender": name, "round": round,
                    "max_points": round2(a.max_points), "mean_points": round2(a.mean_points),
                    "live_mean_allocation": round2(a.live_mean), "sim_mean_allocation": round2(a.sim_mean),
                    "placed_by_both": a.both, "same_node": a.same_node,
                    "live_only": a.live_only, "sim_only": a.sim_only,
                })
            })
            .collect();
        json!({
            "title": self.title,
            "shape": self.shape,
            "pods": self.pods.len(),
            "gpus": self.gpus,
            "runs": runs,
            "median_mean_allocation": self.medians(&figs, |_, f| Some(round2(f.mean_allocation))),
            "median_mean_delay_8gpu_s": self.medians(&figs, |_, f| f.delays.get("8").map(|d| round2(d.mean_s))),
            "simulator_vs_live": agreements,
        })
    }

    pub fn markdown(&self) -> String {
        let figs = self.figures();
        let mut out =
            format!("# {}\n\n{} pods on {} GPUs. Shape: `{}`\n\n", self.title, self.pods.len(), self.gpus, self.shape);
        out.push_str("| run | contender | mean GPU alloc. % | final % | never ran | last binding s | CPU s |");
        for c in CLASSES {
            let _ = write!(out, " {c} p50/p99 s |");
        }
        out.push_str("\n|---|---|---|---|---|---|---|");
        out.push_str(&"---|".repeat(CLASSES.len()));
        out.push('\n');
        for (r, f) in self.runs.iter().zip(&figs) {
            let _ = write!(
                out,
                "| {} | {} | {:.2} | {:.2} | {} | {:.0} | {} |",
                r.round + 1,
                r.name,
                f.mean_allocation,
                f.curve.last().copied().unwrap_or(0.0),
                f.never_ran,
                f.last_binding_s,
                r.cpu_s.map_or("-".into(), |c| format!("{c:.1}"))
            );
            for c in CLASSES {
                let cell = f.delays.get(c).map_or("-".into(), |d| format!("{:.1}/{:.1}", d.p50_s, d.p99_s));
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
        let means = self.medians(&figs, |_, f| f.delays.get("8").map(|d| d.mean_s));
        let allocs = self.medians(&figs, |_, f| Some(f.mean_allocation));
        out.push_str("\nMedians over rounds: ");
        for (name, a) in &allocs {
            let _ = write!(
                out,
                "{name} {a:.2} % allocated, 8-GPU mean delay {:.1} s; ",
                means.get(name).copied().unwrap_or(0.0)
            );
        }
        out.push('\n');
        let agreements = self.agreements();
        if !agreements.is_empty() {
            out.push_str("\n| simulator vs live (round) | max diff (points) | mean diff | live mean % | predicted mean % | placed by both | same node | live only | sim only |\n|---|---|---|---|---|---|---|---|---|\n");
            for (name, round, a) in agreements {
                let _ = writeln!(
                    out,
                    "| {name} ({round}) | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
                    a.max_points,
                    a.mean_points,
                    a.live_mean,
                    a.sim_mean,
                    a.both,
                    a.same_node,
                    a.live_only.len(),
                    a.sim_only.len()
                );
            }
        }
        out
    }

    /// Allocation over time, one line per run (the first round of each
    /// contender solid, later ones fainter) and the prediction dashed.
    pub fn svg(&self) -> String {
        let figs = self.figures();
        let (w, h, pad) = (900.0, 420.0, 50.0);
        let end = self.runs.iter().map(|r| r.end_s).fold(1.0, f64::max);
        let top = figs.iter().flat_map(|f| f.curve.iter().copied()).fold(100.0f64, f64::max);
        let x = |t: f64| pad + t / end * (w - 2.0 * pad);
        let y = |v: f64| h - pad - v / top * (h - 2.0 * pad);
        let colours = [("gpu-scheduler", "#1f77b4"), ("kube-scheduler", "#d62728"), ("scheduler-plugins", "#2ca02c")];
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{pad}\" y=\"20\">{}</text>\n",
            self.title
        );
        for v in [0.0, 25.0, 50.0, 75.0, 100.0] {
            let yy = y(v);
            let _ = writeln!(
                out,
                "<line x1=\"{pad}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/><text x=\"5\" y=\"{:.1}\">{v:.0} %</text>",
                w - pad,
                yy + 4.0
            );
        }
        let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\">seconds: 0 to {end:.0}</text>", w / 2.0 - 40.0, h - 15.0);
        let mut line = |curve: &[f64], colour: &str, extra: &str| {
            let points: Vec<String> =
                curve.iter().enumerate().map(|(t, v)| format!("{:.1},{:.1}", x(t as f64), y(*v))).collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" {extra} points=\"{}\"/>",
                points.join(" ")
            );
        };
        for (r, f) in self.runs.iter().zip(&figs) {
            let colour = colours.iter().find(|c| c.0 == r.name).map_or("#555", |c| c.1);
            line(&f.curve, colour, if r.round == 0 { "" } else { "stroke-opacity=\"0.4\"" });
        }
        if let Some(sim) = self.sim {
            let first = self.runs.iter().find(|r| r.name == "gpu-scheduler").map_or(end, |r| r.end_s);
            line(&figures(self.pods, sim, self.gpus, first).curve, "#000", "stroke-dasharray=\"4 3\"");
        }
        let mut ly = 40.0;
        for (name, colour) in colours.iter().filter(|(n, _)| self.runs.iter().any(|r| r.name == *n)) {
            let _ = writeln!(
                out,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{name}</text>",
                w - 230.0,
                w - 205.0,
                w - 200.0,
                ly + 4.0
            );
            ly += 18.0;
        }
        if self.sim.is_some() {
            let _ = writeln!(
                out,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"#000\" stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\">replay --timed (predicted)</text>",
                w - 230.0,
                w - 205.0,
                w - 200.0,
                ly + 4.0
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, gpus: u64, gpu_milli: u64, arrival_s: u64) -> LivePod {
        LivePod {
            name: name.into(),
            milli_cpu: 1,
            memory_mib: 1,
            gpus,
            gpu_milli,
            gpu_spec: String::new(),
            arrival_s,
            run_s: 1,
        }
    }

    fn outcome(created: f64, bound: Option<f64>, finished: Option<f64>) -> PodOutcome {
        PodOutcome { created_s: Some(created), bound: bound.map(|b| (b, "n".to_string())), finished_s: finished }
    }

    #[test]
    fn allocation_delays_and_pods_that_never_ran() {
        // 4 GPUs: a 2-GPU pod bound at 0.5 s and done at 2.2 s (counted at
        // 0.5 s and 1.5 s), half a GPU from 2 s to the end, a 1-GPU pod
        // that never ran.
        let pods = [pod("a", 2, 1000, 0), pod("b", 1, 500, 1), pod("c", 1, 1000, 2)];
        let outcomes = HashMap::from([
            ("a".to_string(), outcome(0.0, Some(0.5), Some(2.2))),
            ("b".to_string(), outcome(1.0, Some(2.0), None)),
            ("c".to_string(), outcome(2.0, None, None)),
        ]);
        let f = figures(&pods, &outcomes, 4, 4.0);
        assert_eq!(f.curve, [50.0, 50.0, 12.5, 12.5]);
        assert_eq!(f.never_ran, 1);
        assert_eq!(f.last_binding_s, 2.0);
        assert_eq!(f.delays["2"], Delay { placed: 1, never_ran: 0, mean_s: 0.5, p50_s: 0.5, p99_s: 0.5 });
        assert_eq!(f.delays["share"].mean_s, 1.0);
        assert_eq!(
            f.delays["1"],
            Delay { placed: 0, never_ran: 1, mean_s: 2.0, p50_s: 2.0, p99_s: 2.0 },
            "censored at the end"
        );
        assert!(!f.delays.contains_key("8"));
    }

    #[test]
    fn the_prediction_against_the_live_run() {
        let pods = [pod("a", 1, 1000, 0), pod("b", 1, 1000, 0), pod("c", 1, 1000, 0)];
        let sim = read_placements(
            "pod,node,arrival_s,start_s,end_s\na,n1,0.000,0.000,\nb,n2,0.000,1.000,3.000\nc,,0.000,,\n",
        )
        .unwrap();
        let mut live = LiveRun { name: "gpu-scheduler".into(), end_s: 4.0, ..LiveRun::default() };
        live.pods = HashMap::from([
            ("a".to_string(), PodOutcome { created_s: Some(0.0), bound: Some((0.1, "n1".into())), finished_s: None }),
            ("c".to_string(), PodOutcome { created_s: Some(0.0), bound: Some((2.0, "n3".into())), finished_s: None }),
        ]);
        let a = agreement(&pods, &live, &sim, 2);
        // Live: 50 50 100 100; predicted: 50 100 100 50.
        assert_eq!((a.max_points, a.mean_points), (50.0, 25.0));
        assert_eq!((a.both, a.same_node), (1, 1));
        assert_eq!((a.live_only.as_slice(), a.sim_only.as_slice()), (&["c".to_string()][..], &["b".to_string()][..]));
        assert!(read_placements("pod,node\na,n\n").unwrap_err().to_string().contains("5 fields"));
        assert!(read_placements("h\na,n,x,1,2\n").unwrap_err().to_string().contains("\"x\" is not a number"));
    }

    #[test]
    fn files_name_every_contender() {
        let pods = [pod("a", 1, 1000, 0)];
        let runs: Vec<LiveRun> = ["gpu-scheduler", "kube-scheduler"]
            .iter()
            .map(|n| LiveRun {
                name: n.to_string(),
                end_s: 2.0,
                pods: HashMap::from([("a".to_string(), outcome(0.0, Some(1.0), None))]),
                ..LiveRun::default()
            })
            .collect();
        let r = Report { title: "t".into(), shape: json!({}), pods: &pods, gpus: 1, runs: &runs, sim: None };
        let md = r.markdown();
        assert!(md.contains("| 1 | gpu-scheduler | 50.00 |") && md.contains("| 1 | kube-scheduler |"), "{md}");
        assert_eq!(r.json()["median_mean_allocation"]["kube-scheduler"], 50.0);
        assert!(r.svg().contains("#d62728"));
        assert_eq!(outcomes_csv(&pods, &runs[0]), "pod,created_s,bound_s,node,finished_s\na,0.000,1.000,n,\n");
    }
}
