//! Rendering a simulation: the JSON contract of DESIGN.md §1 and a table
//! for people, plus the per-node explanation of one decision.

use serde_json::{Value, json};

use engine::explain::{Explanation, GangDecision, PreemptionRecord};
use engine::spot_drain::DrainPlan;

use crate::replay::Replay;
use crate::simulate::Simulation;

/// The `--output json` object: `placements` in scheduling order (the
/// contract), then a summary, node usage and, if asked, an explanation.
pub fn to_json(sim: &Simulation, explain: Option<&Explanation>) -> Value {
    let placements: Vec<Value> = sim
        .placements
        .iter()
        .map(|p| {
            let mut v = json!({"pod": p.pod, "node": p.node, "attempts": p.attempts, "priority": p.priority});
            if let Some(r) = &p.reason {
                v["reason"] = json!(r);
            }
            if let Some(s) = p.score {
                v["score"] = json!(s);
            }
            v
        })
        .collect();
    let placed = sim.placements.iter().filter(|p| p.node.is_some()).count();
    let nodes: Vec<Value> = sim
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "cpuMillis": {"requested": n.milli_cpu.0, "allocatable": n.milli_cpu.1},
                "memoryBytes": {"requested": n.memory.0, "allocatable": n.memory.1},
                "gpus": {"requested": n.gpu.0, "allocatable": n.gpu.1},
                "gpuMilli": {"allocated": n.gpu_milli.0, "capacity": n.gpu_milli.1},
                "pods": {"count": n.pods.0, "allocatable": n.pods.1},
            })
        })
        .collect();
    let mut out = json!({
        "placements": placements,
        "summary": {
            "pending": sim.placements.len(),
            "placed": placed,
            "unplaced": sim.placements.len() - placed,
            "existingPods": sim.existing_pods,
            "otherSchedulerPods": sim.foreign_pods,
            "ignoredObjects": sim.ignored_objects,
            "gpu": {
                "capacityMilli": sim.gpu.capacity_milli,
                "allocatedMilli": sim.gpu.allocated_milli,
                "fragmentation": (sim.gpu.fragmentation * 1e4).round() / 1e4,
                "gpuPodsPlaced": sim.gpu.gpu_pods_placed,
                "onPreferredModel": sim.gpu.on_preferred_model,
            },
        },
        "nodes": nodes,
        "seed": sim.seed,
        "now": sim.now.to_string(),
    });
    if !sim.preempted.is_empty() {
        let preempted: Vec<Value> =
            sim.preempted.iter().map(|p| json!({"pod": p.pod, "node": p.node, "by": p.by})).collect();
        out["preempted"] = json!(preempted);
    }
    if !sim.warnings.is_empty() {
        out["warnings"] = json!(sim.warnings);
    }
    if !sim.policy_switches.is_empty() {
        let switches: Vec<Value> = sim
            .policy_switches
            .iter()
            .map(|(at, s)| {
                json!({
                    "atDecision": at,
                    "schedulerName": s.scheduler_name,
                    "profile": s.profile,
                    "from": s.from,
                    "to": s.to,
                    "metric": s.metric.as_str(),
                    "percent": (s.value * 100.0).round() / 100.0,
                })
            })
            .collect();
        out["policySwitches"] = json!(switches);
    }
    let d = &sim.spot_drain;
    if !d.draining.is_empty() || !d.untaint.is_empty() {
        out["spotDrain"] = spot_drain_json(d);
    }
    if let Some(e) = explain {
        out["explain"] = serde_json::to_value(e).unwrap_or(Value::Null);
    }
    out
}

fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| ms.to_string(), |t| t.to_string())
}

/// The spot rebalancer's plan at the simulation's `now`.
fn spot_drain_json(d: &DrainPlan) -> Value {
    let nodes: Vec<Value> = d
        .draining
        .iter()
        .map(|n| json!({"node": n.node, "expiry": rfc3339(n.expiry), "tainted": n.tainted, "toEvict": n.to_evict}))
        .collect();
    let evict: Vec<Value> = d
        .evict
        .iter()
        .map(|e| {
            let pods: Vec<String> = e.pods.iter().map(|p| p.key()).collect();
            json!({"pods": pods, "node": e.node, "gang": e.gang, "afterTaint": !e.ready})
        })
        .collect();
    let kept: Vec<Value> =
        d.kept.iter().map(|(p, why)| json!({"pod": p.key(), "node": p.node_name, "reason": why.to_string()})).collect();
    json!({"nodes": nodes, "taint": d.taint, "untaint": d.untaint, "evict": evict, "kept": kept})
}

fn spot_drain_table(d: &DrainPlan) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Spot draining ({} node(s) within the expiry window):
",
        d.draining.len()
    ));
    for n in &d.draining {
        let taint = if n.tainted { "tainted" } else { "to taint first" };
        out.push_str(&format!(
            "  {} expires {} ({taint}), {} pod(s) to evict
",
            n.node,
            rfc3339(n.expiry),
            n.to_evict
        ));
    }
    for e in &d.evict {
        let pods: Vec<String> = e.pods.iter().map(|p| p.key()).collect();
        let gang = e.gang.as_ref().map(|g| format!(" (gang {g}, whole)")).unwrap_or_default();
        let when = if e.ready { "" } else { ", after the taint" };
        out.push_str(&format!(
            "  evict {}{gang} from {}{when}
",
            pods.join(", "),
            e.node
        ));
    }
    for (p, why) in &d.kept {
        out.push_str(&format!(
            "  keep {} on {}: {why}
",
            p.key(),
            p.node_name.as_deref().unwrap_or("")
        ));
    }
    for n in &d.untaint {
        out.push_str(&format!(
            "  untaint {n}: its expiry is no longer within the window
"
        ));
    }
    out
}

/// Columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = *w));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

fn cores(milli: i64) -> String {
    if milli % 1000 == 0 { format!("{}", milli / 1000) } else { format!("{:.1}", milli as f64 / 1000.0) }
}

/// Thousandths of GPUs as GPUs: `8`, `2.5`, `0.46`.
fn gpus(milli: i64) -> String {
    let s = format!("{:.2}", milli as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn gib(bytes: i64) -> String {
    let g = bytes as f64 / (1u64 << 30) as f64;
    if g >= 10.0 { format!("{g:.0}Gi") } else { format!("{g:.1}Gi") }
}

fn pct(used: i64, total: i64) -> String {
    if total <= 0 { "-".into() } else { format!("{:>3}%", used * 100 / total) }
}

/// The `--output table` report: placements, unplaced pods with the reason,
/// then each node's use.
pub fn to_table(sim: &Simulation) -> String {
    let mut out = String::new();
    let placed: Vec<_> = sim.placements.iter().filter(|p| p.node.is_some()).collect();
    let unplaced: Vec<_> = sim.placements.iter().filter(|p| p.node.is_none()).collect();
    out.push_str(&format!(
        "Scheduled {} of {} pending pods ({} already running, {} for other schedulers).\n",
        placed.len(),
        sim.placements.len(),
        sim.existing_pods,
        sim.foreign_pods
    ));
    let g = &sim.gpu;
    if g.capacity_milli > 0 {
        out.push_str(&format!(
            "GPUs: {} of {} allocated ({}), {:.1}% of the free GPU fragmented; {} of {} GPU pods on a preferred model.\n",
            gpus(g.allocated_milli),
            gpus(g.capacity_milli),
            pct(g.allocated_milli, g.capacity_milli).trim(),
            100.0 * g.fragmentation,
            g.on_preferred_model,
            g.gpu_pods_placed
        ));
    }
    out.push('\n');
    if !placed.is_empty() {
        let rows: Vec<Vec<String>> = placed
            .iter()
            .map(|p| {
                vec![
                    p.pod.clone(),
                    p.node.clone().unwrap_or_default(),
                    p.score.map_or("-".into(), |s| format!("{s:.1}")),
                ]
            })
            .collect();
        out.push_str(&table(&["POD", "NODE", "SCORE"], &rows));
        out.push('\n');
    }
    if !sim.preempted.is_empty() {
        out.push_str(&format!("Preempted ({}):\n", sim.preempted.len()));
        for p in &sim.preempted {
            out.push_str(&format!("  {} on {}, for {}\n", p.pod, p.node, p.by));
        }
        out.push('\n');
    }
    if !sim.policy_switches.is_empty() {
        out.push_str(&format!("Policy switches ({}):\n", sim.policy_switches.len()));
        for (at, s) in &sim.policy_switches {
            out.push_str(&format!("  at decision {at}: {}\n", s.message()));
        }
        out.push('\n');
    }
    let d = &sim.spot_drain;
    if !d.draining.is_empty() || !d.untaint.is_empty() {
        out.push_str(&spot_drain_table(d));
        out.push('\n');
    }
    if !unplaced.is_empty() {
        out.push_str(&format!("Unschedulable ({}):\n", unplaced.len()));
        for p in &unplaced {
            out.push_str(&format!("  {}\n    {}\n", p.pod, p.reason.as_deref().unwrap_or("no decision")));
        }
        out.push('\n');
    }
    let rows: Vec<Vec<String>> = sim
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                format!("{}/{}", cores(n.milli_cpu.0), cores(n.milli_cpu.1)),
                pct(n.milli_cpu.0, n.milli_cpu.1),
                format!("{}/{}", gib(n.memory.0), gib(n.memory.1)),
                pct(n.memory.0, n.memory.1),
                if n.gpu_milli.1 > 0 { format!("{}/{}", gpus(n.gpu_milli.0), gpus(n.gpu_milli.1)) } else { "-".into() },
                format!("{}/{}", n.pods.0, n.pods.1),
            ]
        })
        .collect();
    out.push_str(&table(&["NODE", "CPU", "", "MEMORY", "", "GPU", "PODS"], &rows));
    out
}

/// One decision as a table: every node, its verdict, and per-plugin
/// normalised × weight scores or the rejecting plugin and reason.
pub fn explanation_table(e: &Explanation) -> String {
    let mut out = format!(
        "Decision for {} (profile {}{}): {}\n",
        e.pod,
        e.profile,
        e.policy.as_ref().map(|r| format!(", policy {r}")).unwrap_or_default(),
        match &e.node {
            Some(n) => format!("scheduled to {n}"),
            None => "not scheduled".to_string(),
        }
    );
    if let Some(m) = &e.message {
        out.push_str(&format!("  {m}\n"));
    }
    out.push_str(&format!(
        "{} nodes, {} evaluated, {} feasible.\n\n",
        e.total_nodes, e.evaluated_nodes, e.feasible_nodes
    ));
    let mut plugins: Vec<String> = Vec::new();
    for n in &e.nodes {
        for s in &n.scores {
            if !plugins.contains(&s.plugin) {
                plugins.push(s.plugin.clone());
            }
        }
    }
    let mut header: Vec<&str> = vec!["NODE", "VERDICT", "TOTAL"];
    header.extend(plugins.iter().map(String::as_str));
    header.push("REASON");
    // Plugins' own details (e.g. each CEL rule's value), when they gave any.
    let with_details = e.nodes.iter().any(|n| !n.details.is_empty());
    if with_details {
        header.push("DETAILS");
    }
    let rows: Vec<Vec<String>> = e
        .nodes
        .iter()
        .map(|n| {
            let mut row = vec![n.node.clone(), n.verdict.clone(), n.total.map_or("-".into(), |t| format!("{t:.1}"))];
            for p in &plugins {
                row.push(match n.scores.iter().find(|s| &s.plugin == p) {
                    Some(s) => format!("{}×{}={:.1} (raw {})", s.normalized, s.weight, s.weighted, s.raw),
                    None => "-".into(),
                });
            }
            row.push(match &n.plugin {
                Some(p) => format!("{p}: {}", n.reasons.join(", ")),
                None => String::new(),
            });
            if with_details {
                let shown: Vec<String> =
                    n.details.iter().map(|d| format!("{}/{}={}", d.plugin, d.name, d.value)).collect();
                row.push(shown.join(", "));
            }
            row
        })
        .collect();
    out.push_str(&table(&header, &rows));
    if let Some(g) = &e.gang {
        out.push_str(&gang_table(g));
    }
    if let Some(p) = &e.preemption {
        out.push_str(&preemption_table(p));
    }
    out
}

/// A preemption: each candidate node with the victims it would need.
fn preemption_table(p: &PreemptionRecord) -> String {
    let mut out = match &p.chosen {
        Some(n) => format!("\nPreemption: nominated {n}; {} candidate node(s):\n", p.candidates.len()),
        None => "\nPreemption: no candidate node.\n".to_string(),
    };
    let rows: Vec<Vec<String>> = p
        .candidates
        .iter()
        .map(|c| {
            vec![
                c.node.clone(),
                if p.chosen.as_ref() == Some(&c.node) { "chosen" } else { "" }.to_string(),
                c.pdb_violations.to_string(),
                c.highest_priority.to_string(),
                c.victims.join(", "),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(&["NODE", "", "PDB VIOLATIONS", "HIGHEST PRIORITY", "VICTIMS"], &rows));
    }
    out
}

/// A gang decision: each member's node, or why it found none.
fn gang_table(g: &GangDecision) -> String {
    let within = g.domain.as_ref().map_or_else(String::new, |d| format!(", within {d}"));
    let mut out =
        format!("\nGang {} (minMember {}, {} placed before{within}):\n", g.group, g.min_member, g.placed_before);
    let rows: Vec<Vec<String>> = g
        .members
        .iter()
        .map(|m| {
            vec![m.pod.clone(), m.node.clone().unwrap_or_else(|| "-".into()), m.reason.clone().unwrap_or_default()]
        })
        .collect();
    out.push_str(&table(&["MEMBER", "NODE", "REASON"], &rows));
    out
}

/// `replay --output json`: the contract (`gpus_total`, `pods`, `placed`,
/// `curve`), then what else the replay measured.
pub fn replay_json(r: &Replay) -> Value {
    let curve: Vec<Value> = r
        .curve
        .iter()
        .map(|p| {
            json!({
                "arrived_pct": p.arrived_pct,
                "allocated_pct": round2(p.allocated_pct),
                "fragmentation_pct": round2(p.fragmentation_pct),
            })
        })
        .collect();
    let f = &r.failed;
    json!({
        "gpus_total": r.gpus_total,
        "pods": r.pods,
        "placed": r.placed,
        "curve": curve,
        "nodes": r.nodes,
        "seed": r.seed,
        "inflate": r.inflate,
        "arrived_gpu_milli": r.arrived_milli,
        "allocated_gpu_milli": r.allocated_milli,
        "failed": {
            "cpu_only": f.cpu_only,
            "gpu_share": f.gpu_share,
            "one_gpu": f.one_gpu,
            "multi_gpu": f.multi_gpu,
            "with_models": f.with_models,
        },
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `replay --output table`: the totals, the curve every 10 %, and the pods
/// that did not fit.
pub fn replay_table(r: &Replay) -> String {
    let mut out = format!(
        "Replayed {} pods on {} nodes ({} GPUs), seed {}, inflated to {}x: {} placed, {} did not fit.\n\n",
        r.pods,
        r.nodes,
        r.gpus_total,
        r.seed,
        r.inflate,
        r.placed,
        r.failed.total()
    );
    let rows: Vec<Vec<String>> = r
        .curve
        .iter()
        .filter(|p| p.arrived_pct % 10 == 0 || Some(p.arrived_pct) == r.curve.last().map(|l| l.arrived_pct))
        .map(|p| {
            vec![
                format!("{}%", p.arrived_pct),
                format!("{:.2}%", p.allocated_pct),
                format!("{:.2}%", p.fragmentation_pct),
            ]
        })
        .collect();
    out.push_str(&table(&["ARRIVED", "ALLOCATED", "FRAGMENTED"], &rows));
    let f = &r.failed;
    out.push_str(&format!(
        "\nDid not fit: {} CPU-only, {} GPU-share, {} one-GPU, {} multi-GPU pods ({} of them naming GPU models).\n",
        f.cpu_only, f.gpu_share, f.one_gpu, f.multi_gpu, f.with_models
    ));
    out
}

/// The waits of a timed replay, seconds: `{"all": {"pods", "mean_s",
/// "p95_s"}, "gpu": {...}, "queues": {"ml": {...}}, "never_placed",
/// "never_placed_gpu"}`.
pub fn wait_json(w: &crate::timed::Waits) -> Value {
    let stats =
        |s: &crate::timed::WaitStats| json!({"pods": s.pods, "mean_s": round2(s.mean_s), "p95_s": round2(s.p95_s)});
    let queues: serde_json::Map<String, Value> = w.queues.iter().map(|(q, s)| (q.clone(), stats(s))).collect();
    json!({
        "all": stats(&w.all),
        "gpu": stats(&w.gpu),
        "queues": queues,
        "never_placed": w.never_placed,
        "never_placed_gpu": w.never_placed_gpu,
    })
}

/// `replay --timed --output json`: the totals, the `wait` object, and
/// the forecasts that held nodes.
pub fn timed_json(r: &crate::timed::TimedReplay) -> Value {
    let held: Vec<Value> = r
        .held_forecasts
        .iter()
        .map(|h| json!({"forecast": h.explanation, "peak_held_gpus": round2(h.peak_held_milli as f64 / 1000.0)}))
        .collect();
    json!({
        "gpus_total": r.gpus_total,
        "pods": r.pods,
        "placed": r.placed,
        "nodes": r.nodes,
        "seed": r.seed,
        "end_s": r.end_s,
        "wait": wait_json(&r.wait),
        "forecast_holds": held,
    })
}

/// `replay --timed --placements FILE.csv`: where and when every pod ran,
/// seconds with millisecond precision from the trace's start.
pub fn placements_csv(placements: &[crate::timed::TimedPlacement]) -> String {
    let secs = |ms: u64| format!("{}.{:03}", ms / 1000, ms % 1000);
    let mut out = String::from("pod,node,arrival_s,start_s,end_s\n");
    for p in placements {
        let (node, start) = p.placed.as_ref().map_or((String::new(), String::new()), |(n, t)| (n.clone(), secs(*t)));
        let end = p.end_ms.map(secs).unwrap_or_default();
        out.push_str(&format!("{},{node},{},{start},{end}\n", p.pod, secs(p.arrival_ms)));
    }
    out
}

/// `replay --timed --output table`: waits overall, for GPU pods and per
/// queue, and the forecasts that held nodes.
pub fn timed_table(r: &crate::timed::TimedReplay) -> String {
    let w = &r.wait;
    let mut out = format!(
        "Replayed {} pods on {} nodes ({} GPUs) on the trace's clock ({:.1} h), seed {}: {} placed, {} never placed.\n\n",
        r.pods,
        r.nodes,
        r.gpus_total,
        r.end_s as f64 / 3600.0,
        r.seed,
        r.placed,
        w.never_placed
    );
    let row = |name: String, s: &crate::timed::WaitStats| {
        vec![name, s.pods.to_string(), format!("{:.0}", s.mean_s), format!("{:.0}", s.p95_s)]
    };
    let mut rows = vec![row("all".into(), &w.all), row("GPU pods".into(), &w.gpu)];
    rows.extend(w.queues.iter().map(|(q, s)| row(format!("queue {q}"), s)));
    out.push_str(&table(&["PODS", "PLACED", "MEAN WAIT (S)", "P95 WAIT (S)"], &rows));
    if !r.held_forecasts.is_empty() {
        out.push_str("\nForecasts that held nodes (most GPUs held at once):\n");
        for h in &r.held_forecasts {
            out.push_str(&format!("  {:>5.1} GPUs  {}\n", h.peak_held_milli as f64 / 1000.0, h.explanation));
        }
    }
    out
}
