//! `bench/live-replay`: Alibaba's openb trace replayed on a real API
//! server with KWOK nodes, under gpu-scheduler, kube-scheduler and
//! scheduler-plugins' kube-scheduler with Coscheduling in turn, and
//! predicted by `gpu-scheduler replay --timed` (see `gpu_scheduler_e2e::live`).

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use gpu_scheduler_e2e::live::{self, Options, run::Setup, trace::Shape};

#[derive(Parser)]
struct Args {
    /// The node list (openb CSV).
    #[arg(long, default_value = "bench/openb/openb_node_list_gpu_node.csv")]
    nodes: PathBuf,
    /// The pod list (openb CSV with creation and deletion times).
    #[arg(long, default_value = "bench/openb/openb_pod_list_default.csv")]
    pods: PathBuf,
    /// Keep this many nodes, evenly spread, and pods in proportion.
    #[arg(long)]
    sample_nodes: Option<usize>,
    /// Live minutes over which the trace's arrivals come.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Live seconds a pod runs per second it ran in the trace.
    #[arg(long, default_value_t = 1.0)]
    duration_scale: f64,
    /// Copies are added until the GPU asked is this multiple of the cluster's.
    #[arg(long, default_value_t = 2.0)]
    inflate: f64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Seconds the run goes on after the last arrival.
    #[arg(long, default_value_t = 240)]
    tail_s: u64,
    /// Runs of every contender; the order alternates.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    #[arg(long, value_delimiter = ',', default_value = "gpu-scheduler,kube-scheduler,scheduler-plugins")]
    only: Vec<String>,
    #[arg(long, default_value = "target/release/gpu-scheduler")]
    gpu_scheduler: PathBuf,
    /// scheduler-plugins' kube-scheduler (tools/k8s/build-scheduler-plugins).
    #[arg(long)]
    scheduler_plugins: Option<PathBuf>,
    /// Skip the prediction by `gpu-scheduler replay --timed`.
    #[arg(long)]
    no_simulate: bool,
    #[arg(long, default_value = "target/bench/live-replay")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let a = Args::parse();
    let opts = Options {
        nodes_csv: a.nodes,
        pods_csv: a.pods.clone(),
        shape: Shape {
            nodes: a.sample_nodes,
            minutes: a.minutes,
            duration_scale: a.duration_scale,
            inflate: a.inflate,
            seed: a.seed,
        },
        setup: Setup { gpu_scheduler: a.gpu_scheduler, scheduler_plugins: a.scheduler_plugins, tail_s: a.tail_s },
        contenders: a.only,
        repeat: a.repeat,
        simulate: !a.no_simulate,
        out: a.out,
    };
    let repo = std::env::current_dir()?;
    let stem = a.pods.file_stem().and_then(|s| s.to_str()).unwrap_or("pods").to_string();
    let name = |o: &live::Outcome| format!("live-replay-{stem}-{}n-{}m", o.nodes.len(), a.minutes);
    let outcome = live::replay(&opts, &repo, |o| live::write(&opts, o, &name(o))).await?;
    let md = std::fs::read_to_string(opts.out.join(format!("{}.md", name(&outcome))))?;
    eprintln!("{md}");
    Ok(())
}
