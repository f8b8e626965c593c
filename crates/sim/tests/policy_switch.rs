//! Policy switching by load (docs/POLICIES.md, "Policies that switch with
//! the load"): the switch happens at the threshold, the pods after it are
//! placed by the rule's policy, and a load wobbling ±2 % around the
//! threshold does not flap between policies.

use engine::config::{self, Configuration};
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};
use gpu_scheduler_sim as sim;
use sim::{Manifests, SimOptions, Simulation};

const GPU: &str = "nvidia.com/gpu";

/// The default profile placing GPU pods spread, with one policy rule.
fn spread_with_rule(hysteresis: u32, rule: &str) -> Configuration {
    let yaml = format!(
        "
apiVersion: gpu-scheduler.io/v1alpha1
kind: GpuSchedulerConfiguration
profiles:
- schedulerName: gpu-scheduler
  gpuPlacement: spread
  policySwitch:
    hysteresis: {hysteresis}
    rules:
    - {rule}
"
    );
    config::parse(&yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn simulate(cfg: &Configuration, yaml: &str, explain: Option<&str>) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("scenario.yaml", yaml).unwrap_or_else(|e| panic!("bad scenario: {e}"));
    let opts = SimOptions {
        seed: 7,
        now: "2026-01-01T12:00:00Z".parse().unwrap_or_else(|e| panic!("{e}")),
        explain: explain.map(str::to_string),
        extenders: Vec::new(),
    };
    sim::simulate(&manifests, cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("simulate: {e}"))
}

fn cluster(nodes: usize, pods: usize) -> String {
    let mut y = String::new();
    for i in 0..nodes {
        y += &format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-{i}\n  labels: {{kubernetes.io/hostname: gpu-{i}}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}\n---\n"
        );
    }
    for i in 0..pods {
        y += &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{i:02}\n  namespace: ml\nspec:\n  schedulerName: gpu-scheduler\n  containers:\n  - name: c\n    image: trainer\n    resources:\n      requests: {{cpu: \"1\", memory: 1Gi}}\n      limits: {{nvidia.com/gpu: \"1\"}}\n---\n"
        );
    }
    y
}

/// GPUs taken per node, sorted.
fn gpus_per_node(sim: &Simulation) -> Vec<usize> {
    let mut per: std::collections::BTreeMap<&str, usize> = Default::default();
    for p in &sim.placements {
        if let Some(n) = &p.node {
            *per.entry(n.as_str()).or_default() += 1;
        }
    }
    let mut v: Vec<usize> = per.into_values().collect();
    v.sort_unstable();
    v
}

#[test]
fn the_rule_takes_over_at_the_threshold() {
    // Spread GPU pods until half the GPUs are taken, then pack them.
    let cfg = spread_with_rule(5, "{name: packed, when: {metric: gpuAllocation, atLeast: 50}, gpuPlacement: binpack}");
    let sim = simulate(&cfg, &cluster(4, 24), Some("ml/p-20"));
    // 16 pods spread 4 per node (50 % of 32 GPUs), then 8 packed: two
    // nodes filled, two left at 4.
    assert_eq!(gpus_per_node(&sim), [4, 4, 8, 8]);
    let switches: Vec<(usize, Option<&str>, f64)> =
        sim.policy_switches.iter().map(|(at, s)| (*at, s.to.as_deref(), s.value)).collect();
    assert_eq!(switches, [(16, Some("packed"), 50.0)]);
    let record = sim.record.as_ref().unwrap_or_else(|| panic!("no record of ml/p-20"));
    assert_eq!(record.policy.as_deref(), Some("packed"), "the explanation names the rule");

    // Without the rule the same pods stay spread.
    let mut plain = cfg.clone();
    plain.profiles[0].policy_switch = None;
    let sim = simulate(&plain, &cluster(4, 24), None);
    assert_eq!(gpus_per_node(&sim), [6, 6, 6, 6]);
    assert!(sim.policy_switches.is_empty());
}

/// Drives the engine with a load of `bound` GPUs out of 100 and one CPU
/// pod to decide; returns the rule switches that decision saw.
struct Cluster {
    sched: Scheduler,
    bound: usize,
    next: usize,
}

impl Cluster {
    fn new(cfg: &Configuration) -> Cluster {
        let profiles =
            build_profiles(cfg, &plugins::registry(), &plugins::default_plugins()).unwrap_or_else(|e| panic!("{e}"));
        let mut sched = Scheduler::new(cfg, profiles, 1).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..2 {
            let n = node(&format!("gpu-{i}")).capacity(512_000, 4 << 40).pods(500).resource(GPU, 50).build();
            sched.on_node_upsert(n, 0);
        }
        Cluster { sched, bound: 0, next: 0 }
    }

    /// Binds or deletes 1-GPU pods until `pct` of the 100 GPUs are taken,
    /// then decides one CPU pod; returns the switches seen.
    fn at(&mut self, pct: usize) -> usize {
        while self.bound < pct {
            let node = format!("gpu-{}", self.bound % 2);
            self.sched.on_pod_upsert(pod(&format!("g{}", self.bound)).resource(GPU, 1).node(&node).build(), 0);
            self.bound += 1;
        }
        while self.bound > pct {
            self.bound -= 1;
            self.sched.on_pod_delete(&format!("g{}", self.bound), 0);
        }
        self.next += 1;
        self.sched.on_pod_upsert(pod(&format!("cpu-{}", self.next)).req(100, 1 << 20).build(), 0);
        match self.sched.schedule_one(0) {
            Some(CycleOutcome::Assumed(_)) => {}
            other => panic!("the CPU pod was not placed: {:?}", other.map(|_| "failed")),
        }
        self.sched.take_policy_switches().len()
    }
}

fn packed_at_85(hysteresis: u32) -> Configuration {
    spread_with_rule(
        hysteresis,
        "{name: packed, when: {metric: gpuAllocation, atLeast: 85}, gpuPlacement: fragmentation, weights: {GpuFragmentation: 5}}",
    )
}

#[test]
fn a_load_wobbling_around_the_threshold_switches_once() {
    let mut c = Cluster::new(&packed_at_85(5));
    assert_eq!(c.at(80), 0, "below the threshold");
    assert_eq!(c.at(85), 1, "at the threshold");
    let wobble: usize = (0..40).map(|i| c.at(if i % 2 == 0 { 83 } else { 87 })).sum();
    println!("hysteresis 5: {wobble} switches over 40 decisions at 83 % / 87 %");
    assert_eq!(wobble, 0, "no flapping within the hysteresis");
    assert_eq!(c.sched.active_policies(), [("gpu-scheduler", 0, Some("packed"))]);
    assert_eq!(c.at(79), 1, "left past the hysteresis");
    assert_eq!(c.at(83), 0, "re-entered only at the threshold");
    assert_eq!(c.sched.active_policies(), [("gpu-scheduler", 0, None)]);

    // The same wobble with no hysteresis flaps on every other decision.
    let mut c = Cluster::new(&packed_at_85(0));
    c.at(85);
    let wobble: usize = (0..40).map(|i| c.at(if i % 2 == 0 { 83 } else { 87 })).sum();
    println!("hysteresis 0: {wobble} switches over 40 decisions at 83 % / 87 %");
    assert_eq!(wobble, 40);
}
