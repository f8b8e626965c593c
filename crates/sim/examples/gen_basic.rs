//! Writes a SchedulingBasic-shaped cluster as manifests on stdout:
//! `cargo run --release -p gpu-scheduler-sim --example gen_basic -- NODES PODS`

use std::io::Write;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (nodes, pods) = match args.as_slice() {
        [n, p] => (*n, *p),
        _ => {
            eprintln!("usage: gen_basic NODES PODS");
            std::process::exit(2);
        }
    };
    let yaml = gpu_scheduler_sim::generate::scheduling_basic_yaml(nodes, pods, "gpu-scheduler");
    if std::io::stdout().write_all(yaml.as_bytes()).is_err() {
        std::process::exit(1);
    }
}
