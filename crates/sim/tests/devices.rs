//! GPUs as devices end to end: whole GPUs, shares and the placement modes,
//! simulated with the default profile or a `gpuPlacement` of a profile.

use engine::config::{self, Configuration};
use gpu_scheduler_sim as sim;
use sim::{Manifests, SimOptions, Simulation};

fn run(yaml: &str, placement: Option<&str>) -> Simulation {
    let cfg = match placement {
        None => Configuration::default(),
        Some(p) => config::parse(&format!(
            "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- gpuPlacement: {p}\n"
        ))
        .unwrap_or_else(|e| panic!("{e}")),
    };
    run_with(yaml, &cfg)
}

fn run_with(yaml: &str, cfg: &Configuration) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("devices.yaml", yaml).unwrap_or_else(|e| panic!("bad scenario: {e}"));
    let opts =
        SimOptions { seed: 3, now: "2026-01-01T12:00:00Z".parse().unwrap(), explain: None, extenders: Vec::new() };
    sim::simulate(&manifests, cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("simulate: {e}"))
}

fn gpu_node(name: &str, gpus: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}, gpu-model: a100}}\nstatus:\n  allocatable: {{cpu: \"96\", memory: 1Ti, pods: \"110\", nvidia.com/gpu: \"{gpus}\"}}\n---\n"
    )
}

/// A pod of ours asking `gpus` whole GPUs, or with `milli` < 1000 a share of one.
fn gpu_pod(name: &str, gpus: u32, milli: u32) -> String {
    let (request, annotations) = if milli < 1000 {
        (String::new(), format!("  annotations: {{gpu-scheduler.io/gpu-milli: \"{milli}\"}}\n"))
    } else {
        (format!(", nvidia.com/gpu: \"{gpus}\""), String::new())
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n{annotations}spec:\n  schedulerName: gpu-scheduler\n  containers:\n  - name: c\n    resources:\n      requests: {{cpu: \"1\", memory: 4Gi{request}}}\n---\n"
    )
}

fn node_of<'a>(sim: &'a Simulation, pod: &str) -> Option<&'a str> {
    let key = format!("default/{pod}");
    sim.placements.iter().find(|p| p.pod == key).unwrap_or_else(|| panic!("{pod} not reported")).node.as_deref()
}

#[test]
fn single_gpu_pods_pack_and_a_whole_node_stays_for_an_eight_gpu_job() {
    let mut yaml: String = (1..=4).map(|i| gpu_node(&format!("n{i}"), 8)).collect();
    yaml.extend((1..=8).map(|i| gpu_pod(&format!("one-{i}"), 1, 1000)));
    // Two 8-GPU jobs after them: with the single-GPU pods on two nodes at
    // most, both find a whole node.
    yaml.push_str(&gpu_pod("eight-a", 8, 1000));
    yaml.push_str(&gpu_pod("eight-b", 8, 1000));
    // (placement, nodes the single-GPU pods may use at most, 8-GPU jobs placed)
    let cases = [(None, 2, 2), (Some("fragmentation"), 2, 2), (Some("binpack"), 2, 2), (Some("spread"), 4, 0)];
    for (placement, most, whole) in cases {
        let sim = run(&yaml, placement);
        let mut used: Vec<&str> = (1..=8).filter_map(|i| node_of(&sim, &format!("one-{i}"))).collect();
        assert_eq!(used.len(), 8, "{placement:?}: every single-GPU pod placed");
        used.sort();
        used.dedup();
        assert!(used.len() <= most, "{placement:?}: spread over {used:?}");
        let placed = ["eight-a", "eight-b"].iter().filter(|p| node_of(&sim, p).is_some()).count();
        assert_eq!(placed, whole, "{placement:?}: 8-GPU jobs placed");
    }
}

#[test]
fn shares_fill_devices_and_whole_gpus_need_a_free_device() {
    // One 2-GPU node: four 500 shares fill both devices; a whole GPU
    // then has no free device although nvidia.com/gpu counts none in use.
    let mut yaml = gpu_node("n", 2);
    yaml.extend((1..=4).map(|i| gpu_pod(&format!("half-{i}"), 1, 500)));
    yaml.push_str(&gpu_pod("one-more-half", 1, 500));
    yaml.push_str(&gpu_pod("whole", 1, 1000));
    let sim = run(&yaml, None);
    for i in 1..=4 {
        assert_eq!(node_of(&sim, &format!("half-{i}")), Some("n"));
    }
    let reason = |pod: &str| {
        let key = format!("default/{pod}");
        sim.placements.iter().find(|p| p.pod == key).and_then(|p| p.reason.clone()).unwrap_or_default()
    };
    let no_victims = " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    assert_eq!(
        reason("one-more-half"),
        format!("0/1 nodes are available: 1 node(s) didn't have a GPU with enough free share.{no_victims}")
    );
    assert_eq!(
        reason("whole"),
        format!("0/1 nodes are available: 1 node(s) didn't have enough free GPU devices.{no_victims}")
    );
}

#[test]
fn fragmentation_is_lower_under_fragmentation_than_spread() {
    // Four 8-GPU nodes; shares of 300 and 500, single GPUs and pairs, interleaved.
    let mut yaml: String = (1..=4).map(|i| gpu_node(&format!("n{i}"), 8)).collect();
    for i in 0..12 {
        let (gpus, milli) = [(1, 300), (1, 500), (1, 1000), (1, 500), (2, 1000), (1, 300)][i % 6];
        yaml.push_str(&gpu_pod(&format!("p{i}"), gpus, milli));
    }
    let fragmentation = |placement| run(&yaml, Some(placement)).gpu.fragmentation;
    let (ours, spread, binpack) = (fragmentation("fragmentation"), fragmentation("spread"), fragmentation("binpack"));
    assert!(ours < spread, "fragmentation {ours} vs spread {spread}");
    assert!(ours <= binpack, "fragmentation {ours} vs binpack {binpack}");
    let sim = run(&yaml, None);
    assert_eq!(sim.placements.iter().filter(|p| p.node.is_some()).count(), 12);
    // 4 shares of 300 (1.2), 4 of 500 (2), 2 GPUs and 2 pairs (4): 9.2 GPUs of 32.
    assert_eq!((sim.gpu.allocated_milli, sim.gpu.capacity_milli), (9_200, 32_000));
    assert_eq!(sim.gpu.curve.last(), Some(&(9_200, 9_200)));
}

/// The gap balance (GpuFragmentation's `gapBalance`): six 810 shares
/// leave five 190s waiting for small shares (one 160 came). A 320 beside
/// a lone 470 would leave a 210, one more of those; with the balance it
/// opens a GPU of its own, which the 650 then fills, and the second 470
/// joins the first: two GPUs for the four shares, so four whole GPUs
/// still fit. Without it the 320 joins the 470 and the four shares take
/// three GPUs.
#[test]
fn the_gap_balance_pairs_shares_that_fill_their_gpu() {
    let mut yaml: String = (0..3).map(|i| gpu_node(&format!("n{i}"), 4)).collect();
    let shares = [810, 810, 810, 810, 810, 810, 160, 470, 320, 470, 650];
    yaml.extend(shares.iter().enumerate().map(|(i, &m)| gpu_pod(&format!("s{i}-{m}"), 1, m)));
    yaml.extend((0..4).map(|i| gpu_pod(&format!("whole-{i}"), 1, 1000)));
    for (balance, whole_placed) in [(true, 4), (false, 3)] {
        // Every shape typical, however rare, so that the scenario is small.
        let cfg = config::parse(&format!(
            "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\ngpuShapes:\n  coverage: 1\n\
             profiles:\n- pluginConfig:\n  - name: GpuFragmentation\n    args: {{gapBalance: {balance}}}\n"
        ))
        .unwrap();
        let sim = run_with(&yaml, &cfg);
        assert!(shares.iter().enumerate().all(|(i, m)| node_of(&sim, &format!("s{i}-{m}")).is_some()));
        let placed = (0..4).filter(|i| node_of(&sim, &format!("whole-{i}")).is_some()).count();
        assert_eq!(placed, whole_placed, "gapBalance {balance}");
        if balance {
            assert_eq!(node_of(&sim, "s8-320"), node_of(&sim, "s10-650"), "the 320 and the 650 share a node");
            assert_eq!(node_of(&sim, "s7-470"), node_of(&sim, "s9-470"), "the two 470s share a node");
        }
    }
}
