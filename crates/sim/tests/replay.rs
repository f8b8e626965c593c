//! The trace replay end to end on the openb lists shipped in the
//! repository (`bench/openb`), at a small inflation so that each list
//! takes well under a second; the full runs and their figures are
//! docs/BENCHMARKS.md's (`bench/openb/run`).

use std::path::PathBuf;

use engine::config::{self, Configuration};
use gpu_scheduler_sim as sim;
use sim::openb::{read_nodes, read_pods};
use sim::replay::{Replay, ReplayOptions, replay};

fn trace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/openb")
}

/// The replay configuration of docs/BENCHMARKS.md.
fn openb_config() -> Configuration {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/openb-config.yaml");
    config::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run(list: &str, cfg: &Configuration, inflate: f64, seed: u64) -> Replay {
    let dir = trace_dir();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    let nodes = read_nodes("nodes", &read("openb_node_list_gpu_node.csv")).unwrap();
    let pods = read_pods(list, &read(&format!("openb_pod_list_{list}.csv"))).unwrap();
    let opts = ReplayOptions { seed, inflate };
    replay(&nodes, &pods, cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{list}: {e}"))
}

/// One list end to end at 2 % of the GPUs (one test per list, so that
/// they run side by side).
fn replays_end_to_end(list: &str) {
    let r = run(list, &openb_config(), 0.02, 42);
    assert_eq!((r.nodes, r.gpus_total), (1213, 6212), "{list}");
    // Two per cent of the GPUs asked: everything fits, so the
    // allocation follows the arrivals.
    assert_eq!(r.placed + r.failed.total(), r.pods, "{list}");
    assert_eq!(r.failed.total(), 0, "{list}: {:?}", r.failed);
    assert_eq!(r.allocated_milli, r.arrived_milli, "{list}");
    assert!(r.arrived_milli as f64 <= 0.02 * 6_212_000.0, "{list}: {}", r.arrived_milli);
    let points: Vec<u32> = r.curve.iter().map(|p| p.arrived_pct).collect();
    assert_eq!(points, [0, 1, 2], "{list}: a point per percent up to 2");
    for p in &r.curve {
        assert!((p.allocated_pct - p.arrived_pct as f64).abs() <= 0.6, "{list}: {p:?}");
        assert!((0.0..=100.0).contains(&p.fragmentation_pct), "{list}: {p:?}");
    }
}

#[test]
fn default_replays_end_to_end() {
    replays_end_to_end("default");
}

#[test]
fn cpu050_replays_end_to_end() {
    replays_end_to_end("cpu050");
}

#[test]
fn cpu100_replays_end_to_end() {
    replays_end_to_end("cpu100");
}

#[test]
fn gpushare40_replays_end_to_end() {
    replays_end_to_end("gpushare40");
}

#[test]
fn gpuspec10_replays_end_to_end() {
    replays_end_to_end("gpuspec10");
}

#[test]
fn multigpu20_replays_end_to_end() {
    replays_end_to_end("multigpu20");
}

#[test]
fn the_seed_decides_the_run() {
    let cfg = openb_config();
    let a = run("multigpu20", &cfg, 0.01, 42);
    assert_eq!(a, run("multigpu20", &cfg, 0.01, 42), "same seed, same replay");
    let b = run("multigpu20", &cfg, 0.01, 43);
    assert_ne!((a.pods, a.arrived_milli), (b.pods, b.arrived_milli), "another seed, another sample");
}

/// The default profile holds back a tenth of each node's cpu and memory
/// (ReservationBuffer): a trace pod asking more than that of the largest
/// node never fits, whatever the load.
#[test]
fn the_default_profile_replays_too() {
    let r = run("default", &Configuration::default(), 0.02, 42);
    assert_eq!(r.placed + r.failed.total(), r.pods);
    assert!(r.failed.total() <= 2 && r.allocated_milli <= r.arrived_milli, "{:?}", r.failed);
}
