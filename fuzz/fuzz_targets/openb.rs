//! The openb trace that `gpu-scheduler replay --format openb` reads: a
//! node list and a pod list (CSV), split at the input's first NUL byte.
//! Errors name file, line and column; a trace the reader accepts always
//! converts into objects the engine takes, and a small one replays with
//! the default profile (allocation never above what arrived or what the
//! nodes have).

#![no_main]

use libfuzzer_sys::fuzz_target;
use sim::openb::{CsvError, read_nodes, read_pods};
use sim::replay::{ReplayOptions, arrival_order, replay};

/// Past these the replay is skipped: the target looks for wrong answers,
/// not for the cost of a big cluster.
const MAX_NODES: usize = 8;
const MAX_GPUS: i64 = 32;
const MAX_ARRIVALS: usize = 64;

fn check(e: &CsvError, file: &str, text: &str) {
    assert_eq!(e.file, file, "{e}");
    // Line 1 is the header; an empty file reports line 1 too.
    assert!(e.line >= 1 && e.line <= text.lines().count().max(1), "{e}: no such line");
    assert!(!e.column.trim().is_empty() && !e.message.trim().is_empty(), "{e:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    let (node_text, pod_text) = text.split_once('\0').unwrap_or((text, ""));
    let nodes = match read_nodes("nodes.csv", node_text) {
        Ok(n) => n,
        Err(e) => return check(&e, "nodes.csv", node_text),
    };
    let pods = match read_pods("pods.csv", pod_text) {
        Ok(p) => p,
        Err(e) => return check(&e, "pods.csv", pod_text),
    };
    let gpus: i64 = nodes.iter().map(|n| n.gpus).sum();
    if nodes.len() > MAX_NODES || gpus > MAX_GPUS {
        return;
    }
    let opts = ReplayOptions { seed: 1, inflate: 1.0 };
    if arrival_order(&pods, gpus * 1000, &opts).len() > MAX_ARRIVALS {
        return;
    }
    let cfg = engine::config::Configuration::default();
    let r = match replay(&nodes, &pods, &cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
    {
        Ok(r) => r,
        // The reader let through a row the engine cannot take.
        Err(e) => panic!("a trace read without error did not replay: {e}"),
    };
    assert!(r.placed <= r.pods, "{} placed of {}", r.placed, r.pods);
    assert!(r.allocated_milli <= r.arrived_milli, "{} allocated of {} arrived", r.allocated_milli, r.arrived_milli);
    assert!(r.allocated_milli <= gpus * 1000, "{} allocated on {gpus} GPUs", r.allocated_milli);
});
