//! Prints the order in which `gpu-scheduler replay` sends an openb trace's
//! pods, one line a pod: `GPUS MILLI` (GPUs asked, thousandths of each),
//! for `bench/openb/bound`:
//! `cargo run --release -p gpu-scheduler-sim --example openb_arrivals -- NODES.csv PODS.csv SEED [INFLATE]`

use std::io::Write;

use gpu_scheduler_sim::openb::{read_nodes, read_pods};
use gpu_scheduler_sim::replay::{ReplayOptions, arrival_order};

fn main() {
    if let Err(e) = run() {
        eprintln!("openb_arrivals: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (nodes, pods, seed, inflate) = match args.as_slice() {
        [n, p, s] => (n, p, s, "1.3"),
        [n, p, s, i] => (n, p, s, i.as_str()),
        _ => return Err("usage: openb_arrivals NODES.csv PODS.csv SEED [INFLATE]".into()),
    };
    let read = |f: &str| std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"));
    let nodes = read_nodes(nodes, &read(nodes)?).map_err(|e| e.to_string())?;
    let pods = read_pods(pods, &read(pods)?).map_err(|e| e.to_string())?;
    let seed = seed.parse().map_err(|_| format!("SEED {seed:?} is not a whole number"))?;
    let inflate = inflate.parse().map_err(|_| format!("INFLATE {inflate:?} is not a number"))?;
    let capacity: i64 = nodes.iter().map(|n| n.gpus).sum::<i64>() * 1000;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, _) in arrival_order(&pods, capacity, &ReplayOptions { seed, inflate }) {
        let p = &pods[i];
        writeln!(out, "{} {}", p.gpus, p.gpu_milli).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}
