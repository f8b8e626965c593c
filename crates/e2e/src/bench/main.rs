//! The end-to-end benchmark (`bench/e2e --nodes N --pods M`): one control
//! plane from tools/k8s, N nodes shaped like scheduler_perf's
//! SchedulingBasic (4 cpu, 32 Gi, 110 pods), and M pods (100m, 500 Mi)
//! scheduled by each contender on fresh pods: gpu-scheduler, kube-scheduler
//! (built in tools/k8s, same client limits), and the ceiling, a plain
//! client that makes only the writes every scheduler must make per pod
//! (the binding to a pre-chosen node and one Scheduled Event).
//!
//! Two modes. `drain` (the default): the M pods are created first, with no
//! scheduler running, then the contender starts; pods/s is counted from its
//! first binding to its last, and separately from its process start (cache
//! sync included). That is the burst a 10,000-task job array gives a real
//! cluster, and it measures the scheduler, not the API server's pod
//! creation. `stream`: the contender runs, warmed up by one pod, while the
//! pods are created; pods/s from the first creation to the last binding.
//!
//! `--repeat R` runs every contender R times, in alternating order, and
//! reports each run, the medians and the per-run ratios. Beside pods/s: the
//! latency to bound p50/p99, the scheduler process's CPU seconds per 1,000
//! pods and peak RSS, and the API server's CPU seconds over the run.
//! Results: target/bench/e2e-[MODE-][WORKLOAD-]N-M.{json,md,svg}.

mod ceiling;
mod contender;
mod results;
mod workload;

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Parser, ValueEnum};
use futures::{StreamExt, TryStreamExt};
use gpu_scheduler_e2e::client;
use gpu_scheduler_e2e::cluster::{ClusterGuard, IN_FLIGHT, SETTLE, create};
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use workload::Workload;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// All pods created first, then the contender starts.
    Drain,
    /// Pods created while the contender runs.
    Stream,
}

#[derive(Parser)]
pub struct Args {
    #[arg(long)]
    nodes: usize,
    #[arg(long)]
    pods: usize,
    /// What to schedule: scheduler_perf's cases (basic is SchedulingBasic),
    /// or a mixed GPU cluster of ours.
    #[arg(long, value_enum, default_value = "basic")]
    workload: Workload,
    #[arg(long, value_enum, default_value = "drain")]
    mode: Mode,
    /// Runs of every contender; the order alternates from one to the next.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Contenders to run, in the order of the first round.
    #[arg(long, value_delimiter = ',', default_value = "gpu-scheduler,kube-scheduler,ceiling")]
    only: Vec<String>,
    /// Bindings the ceiling keeps in flight.
    #[arg(long, default_value_t = ceiling::IN_FLIGHT)]
    ceiling_in_flight: usize,
    /// The ceiling's client speaks HTTP/1.1 only (kube's default) rather
    /// than HTTP/2.
    #[arg(long)]
    ceiling_http1: bool,
    /// The gpu-scheduler binary.
    #[arg(long, default_value = "target/release/gpu-scheduler")]
    gpu_scheduler: PathBuf,
    /// Where results go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// How long one contender may take to bind all pods.
    #[arg(long, default_value_t = 1800)]
    timeout_s: u64,
    /// KWOK plays the kubelets (tools/k8s/cluster with GPU_SCHEDULER_KWOK=1):
    /// every node keeps a Lease renewed every 10 s and bound pods are
    /// marked running, the load a real cluster's API server carries.
    #[arg(long)]
    kwok: bool,
}

const CONTENDERS: [&str; 3] = ["gpu-scheduler", "kube-scheduler", "ceiling"];

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    args.workload.check(args.nodes, args.pods)?;
    if args.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if let Some(other) = args.only.iter().find(|c| !CONTENDERS.contains(&c.as_str())) {
        bail!("unknown contender {other:?} (gpu-scheduler, kube-scheduler, ceiling)");
    }
    let repo = std::env::current_dir()?;
    let cluster_dir = repo.join(&args.out).join("cluster");
    std::fs::create_dir_all(&cluster_dir)?;
    let cluster = ClusterGuard::up(&repo, &cluster_dir, args.kwok)?;
    let client = client::http1(&cluster.kubeconfig).await?;

    eprintln!("creating {} nodes", args.nodes);
    create_nodes(&client, args.workload, args.nodes).await?;
    // The controllers react to new nodes; let that pass before measuring.
    tokio::time::sleep(SETTLE).await;

    let mut runs = Vec::new();
    for round in 0..args.repeat {
        let mut order = args.only.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for (position, name) in order.iter().enumerate() {
            eprintln!(
                "== round {}/{}: {name}, {:?} mode, {} pods on {} nodes",
                round + 1,
                args.repeat,
                args.mode,
                args.pods,
                args.nodes
            );
            let mut run = contender::run(&args, &cluster, &client, name, round).await?;
            run.position = position;
            eprintln!("   {}", run.summary());
            runs.push(run);
        }
    }
    results::write(&args, &runs)?;
    Ok(())
}

async fn create_nodes(client: &Client, workload: Workload, n: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let now = jiff::Timestamp::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { create(&api, &workload.node(i, now)?).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
