//! The results of a benchmark run: every run, the medians per contender,
//! the ratios per round (gpu-scheduler against kube-scheduler and against
//! the ceiling), and whether the ceiling was the highest in each round
//! (and if not, the facts that say why). Written as JSON, Markdown and an
//! SVG of pods bound over time.

use anyhow::Result;
use serde_json::{Value, json};

use crate::contender::Run;
use crate::workload::Workload;
use crate::{Args, Mode};

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Drain => "drain",
        Mode::Stream => "stream",
    }
}

fn workload_name(w: Workload) -> String {
    w.name().to_string()
}

/// The figures compared, as (JSON key, getter, higher is better).
type Figure = (&'static str, fn(&Run, usize) -> Option<f64>, bool);

const FIGURES: [Figure; 7] = [
    ("pods_per_s", |r, _| Some(r.pods_per_s), true),
    ("pods_per_s_from_start", |r, _| r.pods_per_s_from_start, true),
    ("p50_ms", |r, _| Some(r.p50_ms), false),
    ("p99_ms", |r, _| Some(r.p99_ms), false),
    ("cpu_s_per_1000_pods", |r, pods| r.cpu_s_per_1000_pods(pods), false),
    ("peak_rss_mib", |r, _| r.peak_rss_mib, false),
    ("apiserver_cpu_s", |r, _| r.apiserver_cpu_s, false),
];

fn run_json(r: &Run, pods: usize) -> Value {
    let mut v = json!({
        "contender": r.name, "round": r.round + 1, "position": r.position + 1,
        "first_binding_s": r.first_binding_s, "cpu_s": r.cpu_s, "wall_s": r.wall_s,
        "created_s": r.created_s, "retries": r.retries,
    });
    for (key, get, _) in FIGURES {
        v[key] = json!(get(r, pods));
    }
    if let Some(p) = &r.placement {
        v["placement"] = p.json();
    }
    v
}

/// Why the ceiling was not the highest in a round, from what was measured.
fn ceiling_note(ceiling: &Run, beaten_by: &Run) -> String {
    let busy = |r: &Run| r.apiserver_cpu_s.map(|c| c / r.wall_s.max(1e-9));
    let gap = (beaten_by.pods_per_s / ceiling.pods_per_s - 1.0) * 100.0;
    let mut why = format!(
        "{} bound {:.0} pods/s, {gap:.1} % above the ceiling's {:.0}",
        beaten_by.name, beaten_by.pods_per_s, ceiling.pods_per_s
    );
    if let (Some(a), Some(b)) = (busy(ceiling), busy(beaten_by)) {
        why += &format!(
            "; the API server used {a:.2} CPU cores in the ceiling's run and {b:.2} in {}'s (of the machine's cores, shared with etcd and the harness)",
            beaten_by.name
        );
    }
    if let Some(n) = ceiling.retries.filter(|n| *n > 0) {
        why += &format!("; the ceiling retried {n} requests the API server dropped or shed");
    }
    if gap < 10.0 {
        why += "; a gap this small is within this machine's run-to-run noise";
    }
    why
}

pub fn write(args: &Args, runs: &[Run]) -> Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let stem = args.out.join(format!(
        "e2e-{}{}-{}-{}-{}",
        mode_name(args.mode),
        if args.kwok { "-kwok" } else { "" },
        workload_name(args.workload),
        args.nodes,
        args.pods
    ));
    let pods = args.pods;
    let names: Vec<&str> = args.only.iter().map(String::as_str).collect();
    let of = |name: &'_ str| runs.iter().filter(|r| r.name == name).collect::<Vec<_>>();

    let mut medians = json!({});
    for name in &names {
        let mut m = json!({"runs": of(name).len()});
        for (key, get, _) in FIGURES {
            m[key] = json!(median(of(name).into_iter().filter_map(|r| get(r, pods)).collect()));
        }
        medians[name.replace('-', "_")] = m;
    }

    // Per round: gpu-scheduler over kube-scheduler for each figure, over
    // the ceiling for pods/s, and the ceiling's standing.
    let mut rounds = Vec::new();
    let mut notes = Vec::new();
    for round in 0..args.repeat {
        let in_round = |name: &str| runs.iter().find(|r| r.round == round && r.name == name);
        let mut order: Vec<&Run> = runs.iter().filter(|r| r.round == round).collect();
        order.sort_by_key(|r| r.position);
        let mut v = json!({"round": round + 1, "order": order.iter().map(|r| r.name.clone()).collect::<Vec<_>>()});
        if let (Some(g), Some(k)) = (in_round("gpu-scheduler"), in_round("kube-scheduler")) {
            let mut ratios = json!({});
            for (key, get, _) in FIGURES {
                if let (Some(a), Some(b)) = (get(g, pods), get(k, pods)) {
                    ratios[key] = json!(a / b.max(1e-9));
                }
            }
            v["gpu_scheduler_over_kube_scheduler"] = ratios;
        }
        if let Some(c) = in_round("ceiling") {
            if let Some(g) = in_round("gpu-scheduler") {
                v["gpu_scheduler_share_of_ceiling"] = json!(g.pods_per_s / c.pods_per_s.max(1e-9));
            }
            let beaten: Vec<&Run> =
                order.iter().copied().filter(|r| r.name != "ceiling" && r.pods_per_s > c.pods_per_s).collect();
            v["ceiling_is_highest"] = json!(beaten.is_empty());
            for b in beaten {
                let note = format!("round {}: {}", round + 1, ceiling_note(c, b));
                notes.push(note.clone());
                v["ceiling_note"] = json!(note);
            }
        }
        rounds.push(v);
    }
    let ratio_median = |key: &str| {
        median(rounds.iter().filter_map(|r| r["gpu_scheduler_over_kube_scheduler"][key].as_f64()).collect())
    };
    let mut ratios = json!({});
    for (key, _, _) in FIGURES {
        ratios[key] = json!(ratio_median(key));
    }
    let share = median(rounds.iter().filter_map(|r| r["gpu_scheduler_share_of_ceiling"].as_f64()).collect());

    let out = json!({
        "workload": workload_name(args.workload),
        "mode": mode_name(args.mode),
        "kwok": args.kwok,
        "nodes": args.nodes,
        "pods": args.pods,
        "repeat": args.repeat,
        "ceiling": {"in_flight": args.ceiling_in_flight, "http2": !args.ceiling_http1},
        "medians": medians,
        "ratios_gpu_scheduler_over_kube_scheduler": ratios,
        "gpu_scheduler_share_of_ceiling": share,
        "rounds": rounds,
        "ceiling_notes": notes,
        "runs": runs.iter().map(|r| run_json(r, pods)).collect::<Vec<_>>(),
    });
    std::fs::write(stem.with_extension("json"), serde_json::to_string_pretty(&out)? + "\n")?;
    std::fs::write(stem.with_extension("md"), markdown(args, runs, &out, &notes))?;
    std::fs::write(stem.with_extension("svg"), svg(args, runs))?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    eprintln!("wrote {}.{{json,md,svg}}", stem.display());
    Ok(())
}

fn markdown(args: &Args, runs: &[Run], out: &Value, notes: &[String]) -> String {
    let mixed = args.workload == Workload::Mixed;
    let f = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let mut md = format!(
        "# {} mode, {} workload: {} nodes, {} pods, {} round(s)\n\n\
         Medians over the rounds (drain: pods/s from the first binding to the last; \
         stream: from the first creation to the last binding).\n\n\
         | contender | pods/s | pods/s from start | p50 ms | p99 ms | CPU s / 1000 pods | peak RSS MiB | API server CPU s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        mode_name(args.mode),
        workload_name(args.workload),
        args.nodes,
        args.pods,
        args.repeat,
    );
    for name in &args.only {
        let m = &out["medians"][name.replace('-', "_")];
        md += &format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
            f(m["pods_per_s"].as_f64(), 0),
            f(m["pods_per_s_from_start"].as_f64(), 0),
            f(m["p50_ms"].as_f64(), 0),
            f(m["p99_ms"].as_f64(), 0),
            f(m["cpu_s_per_1000_pods"].as_f64(), 2),
            f(m["peak_rss_mib"].as_f64(), 0),
            f(m["apiserver_cpu_s"].as_f64(), 1),
        );
    }
    md += "\nEvery run, in the order run:\n\n| round | # | contender | pods/s | from start | first binding s | p99 ms | CPU s / 1000 pods | peak RSS MiB |";
    md += if mixed { " GPU pods on preferred model | CPU pods on GPU nodes | pods on flagged nodes |\n" } else { "\n" };
    md += "|---:|---:|---|---:|---:|---:|---:|---:|---:|";
    md += if mixed { "---:|---:|---:|\n" } else { "\n" };
    let mut ordered: Vec<&Run> = runs.iter().collect();
    ordered.sort_by_key(|r| (r.round, r.position));
    for r in ordered {
        md += &format!(
            "| {} | {} | {} | {:.0} | {} | {} | {:.0} | {} | {} |",
            r.round + 1,
            r.position + 1,
            r.name,
            r.pods_per_s,
            f(r.pods_per_s_from_start, 0),
            f(r.first_binding_s, 1),
            r.p99_ms,
            f(r.cpu_s_per_1000_pods(args.pods), 2),
            f(r.peak_rss_mib, 0),
        );
        if mixed {
            md += &match &r.placement {
                Some(p) => format!(
                    " {} of {} | {} of {} | {} |",
                    p.gpu_pods_on_preferred_model,
                    p.gpu_pods,
                    p.cpu_pods_on_gpu_nodes,
                    p.cpu_pods,
                    p.pods_on_flagged_nodes
                ),
                None => " - | - | - |".into(),
            };
        }
        md += "\n";
    }
    let ratios = &out["ratios_gpu_scheduler_over_kube_scheduler"];
    if ratios["pods_per_s"].is_number() {
        md += &format!(
            "\ngpu-scheduler / kube-scheduler, median of the per-round ratios: pods/s {}, pods/s from start {}, p99 {}, CPU per 1000 pods {}, peak RSS {}.\n",
            f(ratios["pods_per_s"].as_f64(), 2),
            f(ratios["pods_per_s_from_start"].as_f64(), 2),
            f(ratios["p99_ms"].as_f64(), 2),
            f(ratios["cpu_s_per_1000_pods"].as_f64(), 2),
            f(ratios["peak_rss_mib"].as_f64(), 2),
        );
    }
    if let Some(s) = out["gpu_scheduler_share_of_ceiling"].as_f64() {
        md += &format!("\ngpu-scheduler's share of the ceiling, median per round: {:.0} %.\n", s * 100.0);
    }
    for n in notes {
        md += &format!("\nThe ceiling was not the highest in {n}.\n");
    }
    md
}

/// Pods bound over time, one line per run, one colour per contender.
fn svg(args: &Args, runs: &[Run]) -> String {
    let (w, h, pad) = (800.0, 420.0, 50.0);
    let t_max = runs.iter().filter_map(|r| r.bound_at.last()).fold(1e-9f64, |a, b| a.max(*b));
    let n = args.pods.max(1) as f64;
    let colours = ["#d62728", "#1f77b4", "#7f7f7f"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{pad}\" y=\"20\">Pods bound over time ({} mode, {}): {} nodes, {} pods</text>\n\
         <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\">{t_max:.1} s</text>\n<text x=\"5\" y=\"{}\">{}</text>\n",
        mode_name(args.mode),
        workload_name(args.workload),
        args.nodes,
        args.pods,
        h - pad,
        w - pad,
        h - pad,
        h - pad,
        w - pad - 30.0,
        h - pad + 20.0,
        pad + 4.0,
        args.pods,
    );
    for (k, name) in args.only.iter().enumerate() {
        let c = colours[k % colours.len()];
        let mine: Vec<&Run> = runs.iter().filter(|r| &r.name == name).collect();
        for r in &mine {
            let step = (r.bound_at.len() / 400).max(1);
            let points: Vec<String> = r
                .bound_at
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == r.bound_at.len())
                .map(|(i, t)| {
                    let x = pad + t / t_max * (w - 2.0 * pad);
                    let y = h - pad - (i + 1) as f64 / n * (h - 2.0 * pad);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            s += &format!(
                "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                points.join(" ")
            );
        }
        let med = median(mine.iter().map(|r| r.pods_per_s).collect()).unwrap_or(0.0);
        s += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{name} ({med:.0} pods/s, median of {})</text>\n",
            w - 330.0,
            pad + 20.0 * (k as f64 + 1.0),
            mine.len()
        );
    }
    s + "</svg>\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contender::percentile;

    fn run(name: &str, round: usize, pods_per_s: f64) -> Run {
        Run { name: name.into(), round, pods_per_s, wall_s: 1.0, apiserver_cpu_s: Some(1.8), ..Default::default() }
    }

    #[test]
    fn medians_and_names() {
        for (v, m) in
            [(vec![], None), (vec![3.0], Some(3.0)), (vec![5.0, 1.0, 3.0], Some(3.0)), (vec![4.0, 1.0], Some(2.5))]
        {
            assert_eq!(median(v), m);
        }
        assert_eq!(workload_name(Workload::Basic), "basic");
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }

    #[test]
    fn a_ceiling_beaten_says_why() {
        let note = ceiling_note(&run("ceiling", 0, 1000.0), &run("gpu-scheduler", 0, 1050.0));
        assert!(note.contains("gpu-scheduler bound 1050 pods/s, 5.0 % above the ceiling's 1000"), "{note}");
        assert!(note.contains("1.80 CPU cores"), "{note}");
        assert!(note.contains("noise"), "{note}");
        let far = ceiling_note(&run("ceiling", 0, 500.0), &run("kube-scheduler", 0, 1000.0));
        assert!(!far.contains("noise"), "{far}");
    }
}
