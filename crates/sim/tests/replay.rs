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

/// The reserve for critical pods (ReservationBuffer) with the default
/// profile, on the openb cluster driven to 100 % of its GPUs by its most
/// cpu-hungry pods (the multi-GPU pods of multigpu20, of which the 8-GPU
/// ones ask for up to 94 % of a node's cpu): the pods that take GPUs may
/// fill GPU nodes past the 90 % line, so far fewer GPUs stay idle than
/// with the reserve on every node, and yet each GPU model keeps a tenth
/// of its nodes with the reserve whole, where a critical pod finds room.
#[test]
fn critical_pods_find_room_and_the_reserve_strands_no_gpus() {
    use engine::framework::{Binder, Status};
    use engine::model::Pod;
    use engine::scheduler::CycleOutcome;
    use sim::replay::{arrival_order, trace_scheduler};

    struct Accept;
    impl Binder for Accept {
        fn bind(&self, _: &Pod, _: &str) -> Result<(), String> {
            Ok(())
        }
    }
    let dir = trace_dir();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let nodes = read_nodes("nodes", &read("openb_node_list_gpu_node.csv")).unwrap();
    let pods: Vec<_> = read_pods("multigpu20", &read("openb_pod_list_multigpu20.csv"))
        .unwrap()
        .into_iter()
        .filter(|p| p.gpus >= 2)
        .collect();
    let capacity: i64 = nodes.iter().map(|n| n.gpus * 1000).sum();
    let reserve_everywhere = config::parse(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- schedulerName: gpu-scheduler\n  pluginConfig:\n  - name: ReservationBuffer\n    args: {gpuNodes: {keptNodesPercent: 100}}\n",
    )
    .unwrap();
    let mut allocated = Vec::new();
    for cfg in [Configuration::default(), reserve_everywhere] {
        let (mut sched, converted) =
            trace_scheduler(&nodes, &pods, &cfg, &plugins::registry(), &plugins::default_plugins(), 42).unwrap();
        let order = arrival_order(&pods, capacity, &ReplayOptions { seed: 42, inflate: 1.0 });
        let place = |sched: &mut engine::scheduler::Scheduler, pod: Pod| -> Option<String> {
            let uid = pod.uid.clone();
            sched.on_pod_upsert(pod, 0);
            match sched.schedule_one(0) {
                Some(CycleOutcome::Assumed(mut task)) => {
                    let status: Status = task.bind(&Accept);
                    let bound = (*task.pod).clone();
                    let node = task.node.clone();
                    sched.finish_binding(*task, &status, 0);
                    sched.on_pod_upsert(bound, 0);
                    Some(node)
                }
                _ => {
                    sched.on_pod_delete(&uid, 0);
                    None
                }
            }
        };
        let mut milli = 0;
        for (k, &(i, copy)) in order.iter().enumerate() {
            let mut pod = converted[i].clone();
            pod.name = format!("{}-{k}-{copy:?}", pod.name);
            pod.uid = format!("openb/{}", pod.name);
            let gpu = pod.gpu.total_milli() as i64;
            if place(&mut sched, pod).is_some() {
                milli += gpu;
            }
        }
        allocated.push(milli);

        // Each GPU model keeps at least a tenth of its nodes (rounded up)
        // with 10 % of cpu and memory free.
        let mut pools: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for info in sched.cache().node_infos() {
            let model = info.facts.gpu_model.as_deref().unwrap_or("").to_string();
            let alloc = &info.node.allocatable;
            let whole =
                info.requested.milli_cpu * 10 <= alloc.milli_cpu * 9 && info.requested.memory * 10 <= alloc.memory * 9;
            let e = pools.entry(model).or_default();
            e.0 += 1;
            e.1 += u64::from(whole);
        }
        for (model, (n, whole)) in &pools {
            assert!(whole * 10 >= *n, "{model}: {whole} of {n} nodes keep the reserve");
        }
        // A critical pod of a tenth of the biggest node's cpu finds room.
        let trace_pod =
            sim::openb::TracePod { name: "critical".into(), milli_cpu: 9_600, memory_mib: 8_192, ..Default::default() };
        let mut critical = engine::convert::pod_from_k8s(&trace_pod.to_k8s("gpu-scheduler")).unwrap();
        critical.priority = 2_000_000_000;
        assert!(place(&mut sched, critical).is_some(), "the critical pod found no room");
    }
    // The reserve on every GPU node left 8-GPU pods of 88 cores without a
    // node, and their GPUs idle.
    assert!(
        allocated[0] > allocated[1] + 200_000,
        "GPU allocated: {} with the pool reserve, {} with it everywhere",
        allocated[0],
        allocated[1]
    );
}

/// The FGD reference's configuration (docs/BENCHMARKS.md, "A faithful
/// FGD") replays: everything fits at 5 %, and the seed decides the run.
#[test]
fn the_fgd_reference_replays() {
    let path = trace_dir().join("fgd-config.yaml");
    let cfg = config::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let r = run("gpushare40", &cfg, 0.05, 42);
    assert_eq!((r.failed.total(), r.allocated_milli), (0, r.arrived_milli), "{:?}", r.failed);
    assert_eq!(r, run("gpushare40", &cfg, 0.05, 42));
}
