//! `live-replay`: Alibaba's openb trace on a real API server, with KWOK
//! nodes and pods that arrive, run and finish, under each contender in
//! turn; and `gpu-scheduler replay --timed` on the same arrivals set
//! against it. `trace` reshapes the trace onto a live clock, `run` plays
//! it under one contender, `report` makes the figures.

pub mod report;
pub mod run;
pub mod trace;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::json;

use crate::cluster::{ClusterGuard, IN_FLIGHT, SETTLE, create};
use run::{LiveRun, PodOutcome, Setup};
use trace::{LivePod, Shape, TraceNode};

/// A live replay: the trace, how it is shaped, who runs it.
#[derive(Debug, Clone)]
pub struct Options {
    pub nodes_csv: PathBuf,
    pub pods_csv: PathBuf,
    pub shape: Shape,
    pub setup: Setup,
    /// Contenders in the order of the first round; the order alternates.
    pub contenders: Vec<String>,
    pub repeat: usize,
    /// Also replay the same arrivals with `gpu-scheduler replay --timed`.
    pub simulate: bool,
    /// Where the cluster, the reshaped trace and the results go.
    pub out: PathBuf,
}

/// What a live replay measured.
pub struct Outcome {
    pub nodes: Vec<TraceNode>,
    pub pods: Vec<LivePod>,
    pub runs: Vec<LiveRun>,
    pub sim: Option<HashMap<String, PodOutcome>>,
}

impl Outcome {
    pub fn gpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }
}

/// Reads and reshapes the trace, writes it as openb CSVs under `out`
/// (`nodes.csv`, `pods.csv`: the live clock), and returns it.
pub fn prepare(opts: &Options) -> Result<(Vec<TraceNode>, Vec<LivePod>)> {
    let read = |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let nodes = trace::read_nodes(&opts.nodes_csv.display().to_string(), &read(&opts.nodes_csv)?)?;
    let pods = trace::read_pods(&opts.pods_csv.display().to_string(), &read(&opts.pods_csv)?)?;
    let (nodes, pods) = trace::reshape(&nodes, &pods, &opts.shape)?;
    std::fs::create_dir_all(&opts.out)?;
    std::fs::write(opts.out.join("nodes.csv"), trace::write_nodes(&nodes))?;
    std::fs::write(opts.out.join("pods.csv"), trace::write_pods(&pods))?;
    Ok((nodes, pods))
}

/// `gpu-scheduler replay --timed` (default profile) on the reshaped trace:
/// the prediction of the live run.
pub fn predict(opts: &Options) -> Result<HashMap<String, PodOutcome>> {
    let placements = opts.out.join("predicted.csv");
    let out = Command::new(&opts.setup.gpu_scheduler)
        .args(["replay", "--format", "openb", "--timed", "--output", "json", "--seed", &opts.shape.seed.to_string()])
        .arg("--nodes")
        .arg(opts.out.join("nodes.csv"))
        .arg("--pods")
        .arg(opts.out.join("pods.csv"))
        .arg("--placements")
        .arg(&placements)
        .output()
        .with_context(|| format!("running {} replay", opts.setup.gpu_scheduler.display()))?;
    if !out.status.success() {
        bail!("gpu-scheduler replay --timed failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    report::read_placements(&std::fs::read_to_string(&placements)?)
}

/// Creates the nodes and waits until KWOK has made every one Ready.
async fn create_nodes(client: &kube::Client, nodes: &[TraceNode]) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let objects = nodes.iter().map(trace::node).collect::<Result<Vec<_>>>()?;
    futures::stream::iter(objects)
        .map(|n| {
            let api = api.clone();
            async move { create(&api, &n).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    let all = kube::api::ListParams::default();
    loop {
        let list = crate::cluster::retrying(|| api.list(&all)).await?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
                conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= nodes.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {ready} of {} nodes Ready after 10 minutes (is KWOK running?)", nodes.len());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The whole replay: prepare, predict, then every contender live on one
/// KWOK cluster (started in `out/cluster`, stopped at the end);
/// `after_run` sees the outcome so far after every run (to write it, so
/// that a run that fails later loses nothing).
pub async fn replay(opts: &Options, repo: &Path, mut after_run: impl FnMut(&Outcome) -> Result<()>) -> Result<Outcome> {
    if opts.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if let Some(other) = opts.contenders.iter().find(|c| !run::CONTENDERS.contains(&c.as_str())) {
        bail!("unknown contender {other:?} ({})", run::CONTENDERS.join(", "));
    }
    let (nodes, pods) = prepare(opts)?;
    eprintln!("live replay: {} nodes, {} pods, arrivals over {} min", nodes.len(), pods.len(), opts.shape.minutes);
    let sim = if opts.simulate { Some(predict(opts)?) } else { None };
    let cluster_dir = opts.out.join("cluster");
    std::fs::create_dir_all(&cluster_dir)?;
    let cluster = ClusterGuard::up(repo, &cluster_dir, true)?;
    let client = crate::client::http1(&cluster.kubeconfig).await?;
    crate::cluster::apply_pod_group_crd(&client).await?;
    create_nodes(&client, &nodes).await?;
    tokio::time::sleep(SETTLE).await;
    let mut outcome = Outcome { nodes, pods, runs: Vec::new(), sim };
    for round in 0..opts.repeat {
        let mut order = opts.contenders.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for name in &order {
            eprintln!("== round {}/{}: {name}", round + 1, opts.repeat);
            let r = run::run(&opts.setup, &cluster, &client, name, round, &outcome.pods).await?;
            let f = report::figures(&outcome.pods, &r.pods, outcome.gpus(), r.end_s);
            eprintln!("   mean GPU allocation {:.2} %, never ran {}", f.mean_allocation, f.never_ran);
            outcome.runs.push(r);
            after_run(&outcome)?;
        }
    }
    Ok(outcome)
}

/// Writes `NAME.{json,md,svg}` under `out`.
pub fn write(opts: &Options, outcome: &Outcome, name: &str) -> Result<()> {
    let shape = json!({
        "nodes": outcome.nodes.len(),
        "pods_file": opts.pods_csv.display().to_string(),
        "minutes": opts.shape.minutes,
        "duration_scale": opts.shape.duration_scale,
        "inflate": opts.shape.inflate,
        "seed": opts.shape.seed,
        "tail_s": opts.setup.tail_s,
    });
    let r = report::Report {
        title: format!("Live openb replay: {name}"),
        shape,
        pods: &outcome.pods,
        gpus: outcome.gpus(),
        runs: &outcome.runs,
        sim: outcome.sim.as_ref(),
    };
    std::fs::write(opts.out.join(format!("{name}.json")), serde_json::to_string_pretty(&r.json())?)?;
    std::fs::write(opts.out.join(format!("{name}.md")), r.markdown())?;
    std::fs::write(opts.out.join(format!("{name}.svg")), r.svg())?;
    // Each run's pods, to recompute any figure without running again.
    for run in &outcome.runs {
        let file = opts.out.join(format!("{name}-{}-{}.csv", run.name, run.round + 1));
        std::fs::write(file, report::outcomes_csv(&outcome.pods, run))?;
    }
    Ok(())
}
