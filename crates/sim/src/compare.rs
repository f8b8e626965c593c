//! `simulate --compare` and `replay --compare`: the same workload under
//! two configurations, side by side, as a table, JSON, and a
//! self-contained HTML page with SVG charts (`--report`): GPU allocation
//! against the GPU work arrived, and each node's GPU occupancy as a heat
//! strip. How a user picks `gpuPlacement: binpack` or `fragmentation`
//! before changing production.

use serde_json::{Value, json};

use crate::replay::Replay;
use crate::simulate::Simulation;

/// One configuration's run, reduced to what the comparison shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The configuration's name (its file).
    pub label: String,
    pub gpu_capacity_milli: i64,
    pub gpu_allocated_milli: i64,
    /// The fragmentation figure at the end (0–1).
    pub fragmentation: f64,
    /// Pods that did not get a node.
    pub pending: usize,
    /// GPU pods placed, and on a model they prefer (None: not measured).
    pub gpu_pods_placed: usize,
    pub on_preferred_model: Option<usize>,
    /// GPU work arrived and GPU allocated, both in % of the GPUs.
    pub curve: Vec<(f64, f64)>,
    /// Each GPU node: name, GPUs, thousandths allocated.
    pub nodes: Vec<(String, i64, i64)>,
    /// Waits, for a timed replay.
    pub wait: Option<crate::timed::Waits>,
}

impl Run {
    pub fn of_simulation(label: &str, sim: &Simulation) -> Run {
        let g = &sim.gpu;
        let pct = |milli: i64| if g.capacity_milli > 0 { 100.0 * milli as f64 / g.capacity_milli as f64 } else { 0.0 };
        Run {
            label: label.to_string(),
            gpu_capacity_milli: g.capacity_milli,
            gpu_allocated_milli: g.allocated_milli,
            fragmentation: g.fragmentation,
            pending: sim.placements.iter().filter(|p| p.node.is_none()).count(),
            gpu_pods_placed: g.gpu_pods_placed,
            on_preferred_model: Some(g.on_preferred_model),
            curve: g.curve.iter().map(|&(a, b)| (pct(a), pct(b))).collect(),
            nodes: sim
                .nodes
                .iter()
                .filter(|n| n.gpu_milli.1 > 0)
                .map(|n| (n.name.clone(), n.gpu_milli.1 / 1000, n.gpu_milli.0))
                .collect(),
            wait: None,
        }
    }

    pub fn of_replay(label: &str, r: &Replay) -> Run {
        Run {
            label: label.to_string(),
            gpu_capacity_milli: r.gpus_total * 1000,
            gpu_allocated_milli: r.allocated_milli,
            fragmentation: r.curve.last().map_or(0.0, |p| p.fragmentation_pct / 100.0),
            pending: r.failed.total(),
            gpu_pods_placed: r.placed,
            on_preferred_model: None,
            curve: r.curve.iter().map(|p| (f64::from(p.arrived_pct), p.allocated_pct)).collect(),
            nodes: r.node_use.iter().map(|n| (n.name.clone(), n.gpus as i64, n.allocated_milli)).collect(),
            wait: None,
        }
    }

    /// A timed replay: the end state, and the waits.
    pub fn of_timed(label: &str, r: &crate::timed::TimedReplay) -> Run {
        Run {
            label: label.to_string(),
            gpu_capacity_milli: r.gpus_total * 1000,
            gpu_allocated_milli: r.allocated_milli,
            fragmentation: r.fragmentation,
            pending: r.wait.never_placed,
            gpu_pods_placed: r.wait.gpu.pods,
            on_preferred_model: None,
            curve: Vec::new(),
            nodes: r.node_use.iter().map(|n| (n.name.clone(), n.gpus as i64, n.allocated_milli)).collect(),
            wait: Some(r.wait.clone()),
        }
    }

    /// GPU allocated, % of the GPUs.
    pub fn allocated_pct(&self) -> f64 {
        if self.gpu_capacity_milli > 0 {
            100.0 * self.gpu_allocated_milli as f64 / self.gpu_capacity_milli as f64
        } else {
            0.0
        }
    }
}

/// The comparison as a table: one column per configuration.
pub fn table(runs: &[Run]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = vec![
        ("".into(), runs.iter().map(|r| r.label.clone()).collect()),
        ("GPU allocated".into(), runs.iter().map(|r| format!("{:.2}%", r.allocated_pct())).collect()),
        ("free GPU fragmented".into(), runs.iter().map(|r| format!("{:.2}%", 100.0 * r.fragmentation)).collect()),
        ("pods pending".into(), runs.iter().map(|r| r.pending.to_string()).collect()),
    ];
    if runs.iter().all(|r| r.on_preferred_model.is_some()) {
        rows.push((
            "GPU pods on a preferred model".into(),
            runs.iter().map(|r| format!("{} of {}", r.on_preferred_model.unwrap_or(0), r.gpu_pods_placed)).collect(),
        ));
    }
    if let Some(waits) = runs.iter().map(|r| r.wait.as_ref()).collect::<Option<Vec<_>>>() {
        let stats = |s: &crate::timed::WaitStats| format!("{:.0} s / {:.0} s", s.mean_s, s.p95_s);
        rows.push(("wait mean / p95".into(), waits.iter().map(|w| stats(&w.all)).collect()));
        rows.push(("  GPU pods".into(), waits.iter().map(|w| stats(&w.gpu)).collect()));
        let queues: std::collections::BTreeSet<&String> = waits.iter().flat_map(|w| w.queues.keys()).collect();
        for q in queues {
            rows.push((
                format!("  queue {q}"),
                waits.iter().map(|w| w.queues.get(q).map_or("-".into(), &stats)).collect(),
            ));
        }
        rows.push(("pods never placed".into(), waits.iter().map(|w| w.never_placed.to_string()).collect()));
    }
    let first = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..runs.len()).map(|i| rows.iter().map(|(_, v)| v[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for (k, v) in &rows {
        let mut line = format!("{k:<first$}");
        for (cell, w) in v.iter().zip(&widths) {
            line.push_str(&format!("  {cell:>w$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The comparison as JSON: `{"runs": [{"config", "gpuAllocatedPct", ...}]}`.
pub fn json(runs: &[Run]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "config": r.label,
                "gpuAllocatedPct": (r.allocated_pct() * 100.0).round() / 100.0,
                "fragmentationPct": (r.fragmentation * 1e4).round() / 100.0,
                "pending": r.pending,
                "gpuPodsPlaced": r.gpu_pods_placed,
                "onPreferredModel": r.on_preferred_model,
                "wait": r.wait.as_ref().map(crate::report::wait_json),
            })
        })
        .collect();
    json!({ "runs": runs })
}

/// Line colours, one per configuration.
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The allocation chart: one polyline per run over GPU work arrived.
fn allocation_chart(runs: &[Run]) -> String {
    let (w, h, left, bottom) = (640.0, 360.0, 50.0, 40.0);
    let x_max = runs.iter().flat_map(|r| r.curve.iter().map(|p| p.0)).fold(100.0f64, f64::max).ceil();
    let x = |v: f64| left + v / x_max * (w - left - 10.0);
    let y = |v: f64| h - bottom - v / 100.0 * (h - bottom - 10.0);
    let mut svg = format!(
        "<svg id=\"allocation-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"GPU allocated against GPU work arrived\">\n"
    );
    // Axes, grid and the diagonal: everything arrived is allocated.
    for tick in (0..=(x_max as i64)).step_by(10) {
        let t = tick as f64;
        svg.push_str(&format!(
            "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"{3:.1}\" font-size=\"10\" text-anchor=\"middle\">{tick}</text>\n",
            x(t),
            y(0.0),
            y(100.0),
            h - bottom + 14.0
        ));
    }
    for tick in (0..=100).step_by(10) {
        let t = f64::from(tick);
        svg.push_str(&format!(
            "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{2:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/><text x=\"{3:.1}\" y=\"{4:.1}\" font-size=\"10\" text-anchor=\"end\">{tick}</text>\n",
            x(0.0),
            y(t),
            x(x_max),
            left - 4.0,
            y(t) + 3.0
        ));
    }
    svg.push_str(&format!(
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n",
        x(0.0),
        y(0.0),
        x(100.0),
        y(100.0)
    ));
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">GPU work arrived (% of the GPUs)</text>\n<text x=\"12\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1})\">GPU allocated (%)</text>\n",
        (left + w) / 2.0,
        h - 6.0,
        h / 2.0,
        h / 2.0
    ));
    for (i, r) in runs.iter().enumerate() {
        let points: Vec<String> = r.curve.iter().map(|&(a, b)| format!("{:.1},{:.1}", x(a), y(b))).collect();
        let colour = COLOURS[i % COLOURS.len()];
        svg.push_str(&format!(
            "<polyline class=\"curve\" data-config=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{colour}\">{}</text>\n",
            escape(&r.label),
            points.join(" "),
            left + 10.0,
            20.0 + 14.0 * i as f64,
            escape(&r.label)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Each node's GPU occupancy as a cell, 60 nodes a row, darker when fuller.
fn heat_strip(i: usize, r: &Run) -> String {
    const PER_ROW: usize = 60;
    const CELL: usize = 10;
    let rows = r.nodes.len().div_ceil(PER_ROW).max(1);
    let mut svg = format!(
        "<svg class=\"heat-strip\" data-config=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"GPU occupancy per node\">\n",
        escape(&r.label),
        PER_ROW * CELL,
        rows * CELL
    );
    for (k, (name, gpus, allocated)) in r.nodes.iter().enumerate() {
        let share = if *gpus > 0 { (*allocated as f64 / (*gpus * 1000) as f64).clamp(0.0, 1.0) } else { 0.0 };
        // From pale (empty) to the run's colour (full).
        let light = 95.0 - 60.0 * share;
        let hue = [210, 0, 120, 270][i % 4];
        svg.push_str(&format!(
            "<rect class=\"node\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"hsl({hue},70%,{light:.0}%)\"><title>{}: {:.2} of {} GPUs</title></rect>\n",
            (k % PER_ROW) * CELL,
            (k / PER_ROW) * CELL,
            CELL - 1,
            CELL - 1,
            escape(name),
            *allocated as f64 / 1000.0,
            gpus
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The comparison as one self-contained HTML page (no script, no
/// outside resource).
pub fn html(title: &str, runs: &[Run]) -> String {
    let mut rows = String::new();
    for r in runs {
        let preferred = r.on_preferred_model.map_or("-".to_string(), |n| format!("{n} of {}", r.gpu_pods_placed));
        rows.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{:.2}%</td><td>{:.2}%</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.label),
            r.allocated_pct(),
            100.0 * r.fragmentation,
            r.pending,
            preferred
        ));
    }
    let strips: String =
        runs.iter().enumerate().map(|(i, r)| format!("<h3>{}</h3>\n{}", escape(&r.label), heat_strip(i, r))).collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n<style>\nbody {{ font-family: sans-serif; margin: 2em; color: #222; }}\ntable {{ border-collapse: collapse; }}\nth, td {{ padding: 4px 12px; border-bottom: 1px solid #ddd; text-align: right; }}\nth[scope=row] {{ text-align: left; }}\n</style>\n</head>\n<body>\n<h1>{t}</h1>\n<table id=\"summary\">\n<tr><th>configuration</th><th>GPU allocated</th><th>free GPU fragmented</th><th>pods pending</th><th>GPU pods on a preferred model</th></tr>\n{rows}</table>\n<h2>GPU allocated as the GPU work arrives</h2>\n{chart}<h2>GPU occupancy per node</h2>\n<p>One cell per GPU node in name order, darker when more of its GPUs are allocated.</p>\n{strips}</body>\n</html>\n",
        t = escape(title),
        chart = allocation_chart(runs),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, allocated: i64, curve: Vec<(f64, f64)>) -> Run {
        Run {
            label: label.into(),
            gpu_capacity_milli: 16_000,
            gpu_allocated_milli: allocated,
            fragmentation: 0.25,
            pending: 2,
            gpu_pods_placed: 5,
            on_preferred_model: Some(4),
            curve,
            nodes: vec![("n1".into(), 8, 8000), ("n2".into(), 8, allocated - 8000)],
            wait: None,
        }
    }

    #[test]
    fn table_and_json() {
        let runs = [run("a.yaml", 12_000, vec![(0.0, 0.0)]), run("b<x>.yaml", 10_000, vec![(0.0, 0.0)])];
        let t = table(&runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["a.yaml", "b<x>.yaml"]);
        assert!(lines[1].starts_with("GPU allocated") && lines[1].contains("75.00%") && lines[1].contains("62.50%"));
        assert!(lines[4].ends_with("4 of 5     4 of 5"), "{t}");
        let j = json(&runs);
        assert_eq!(j["runs"][1]["gpuAllocatedPct"], 62.5);
        assert_eq!(j["runs"][0]["fragmentationPct"], 25.0);
    }

    #[test]
    fn html_is_one_page_with_the_charts() {
        let runs = [
            run("a.yaml", 12_000, vec![(0.0, 0.0), (50.0, 50.0), (120.0, 75.0)]),
            run("b<x>.yaml", 10_000, vec![(0.0, 0.0), (120.0, 62.5)]),
        ];
        let page = html("GPU placement: a vs b", &runs);
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        assert_eq!(page.matches("<polyline class=\"curve\"").count(), 2);
        assert_eq!(page.matches("<svg class=\"heat-strip\"").count(), 2);
        assert_eq!(page.matches("<rect class=\"node\"").count(), 4);
        assert!(page.contains("data-config=\"b&lt;x&gt;.yaml\""), "labels are escaped");
        assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="), "self-contained");
        // The x axis runs to the last point arrived: 120 %.
        assert!(page.contains(">120</text>"));
    }
}
