//! Property tests of gangs and preemption on random GPU clusters, through
//! `simulate`: no gang is ever partly placed (bound members are 0 or at
//! least minMember), no pod is bound twice or over a node's GPUs, and no
//! preemption evicts a pod of equal or higher priority.

use std::collections::BTreeMap;
use std::fmt::Write;

use engine::config::Configuration;
use gpu_scheduler_sim as sim;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Gang {
    min: u32,
    members: u32,
    gpus: u32,
    priority: i32,
}

#[derive(Debug, Clone)]
struct Input {
    /// GPUs per node.
    nodes: Vec<u32>,
    /// Bound pods: (node, GPUs, priority).
    running: Vec<(usize, u32, i32)>,
    gangs: Vec<Gang>,
    /// Single pods: (GPUs, priority).
    singles: Vec<(u32, i32)>,
    seed: u64,
}

fn input() -> impl Strategy<Value = Input> {
    let gang = (1u32..=4, 0u32..=2, 1u32..=8, prop_oneof![Just(0), Just(10), Just(100)])
        .prop_map(|(min, extra, gpus, priority)| Gang { min, members: min + extra, gpus, priority });
    (
        prop::collection::vec(prop_oneof![Just(4u32), Just(8)], 2..=8),
        prop::collection::vec((0usize..8, 1u32..=4, prop_oneof![Just(0), Just(50)]), 0..=10),
        prop::collection::vec(gang, 1..=4),
        prop::collection::vec((1u32..=8, prop_oneof![Just(0), Just(10), Just(100)]), 0..=4),
        0u64..4,
    )
        .prop_map(|(nodes, running, gangs, singles, seed)| Input { nodes, running, gangs, singles, seed })
}

fn pod(out: &mut String, name: &str, gpus: u32, priority: i32, extra: &str) {
    let _ = write!(
        out,
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n{extra}spec:\n  schedulerName: gpu-scheduler\n  priority: {priority}\n  containers:\n  - name: c\n    image: x\n    resources:\n      requests: {{cpu: 100m, memory: 128Mi}}\n      limits: {{nvidia.com/gpu: \"{gpus}\"}}\n"
    );
}

/// The manifests, and how many GPUs each node holds after the running
/// pods that fit.
fn manifests(input: &Input) -> String {
    let mut out = String::new();
    for (i, gpus) in input.nodes.iter().enumerate() {
        let _ = write!(
            out,
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}, gpu-model: a100}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 256Gi, pods: \"110\", nvidia.com/gpu: \"{gpus}\"}}\n"
        );
    }
    let mut used = vec![0u32; input.nodes.len()];
    for (k, (node, gpus, priority)) in input.running.iter().enumerate() {
        let n = node % input.nodes.len();
        if used[n] + gpus > input.nodes[n] {
            continue; // the kubelet would not have admitted it
        }
        used[n] += gpus;
        pod(&mut out, &format!("run-{k}"), *gpus, *priority, "");
        out = out.replace(
            "spec:\n  schedulerName: gpu-scheduler\n  priority",
            &format!("spec:\n  nodeName: n{n}\n  schedulerName: gpu-scheduler\n  priority"),
        );
    }
    for (g, gang) in input.gangs.iter().enumerate() {
        let _ = write!(
            out,
            "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g{g}, namespace: ml}}\nspec: {{minMember: {}}}\n",
            gang.min
        );
        for m in 0..gang.members {
            let labels = format!("  labels: {{scheduling.x-k8s.io/pod-group: g{g}}}\n");
            pod(&mut out, &format!("g{g}-{m}"), gang.gpus, gang.priority, &labels);
        }
    }
    for (k, (gpus, priority)) in input.singles.iter().enumerate() {
        pod(&mut out, &format!("single-{k}"), *gpus, *priority, "");
    }
    out
}

fn check(input: &Input) -> Result<(), TestCaseError> {
    let text = manifests(input);
    let mut m = sim::Manifests::default();
    m.add_str("gangs.yaml", &text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let opts = sim::SimOptions {
        seed: input.seed,
        now: "2026-01-01T00:00:00Z".parse().unwrap_or_default(),
        explain: None,
        extenders: Vec::new(),
    };
    let s = sim::simulate(
        &m,
        &Configuration::default(),
        &plugins::registry(),
        &plugins::default_plugins(),
        &opts,
        &mut |_, _| {},
    )
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let node_of: BTreeMap<&str, Option<&str>> =
        s.placements.iter().map(|p| (p.pod.as_str(), p.node.as_deref())).collect();
    for (g, gang) in input.gangs.iter().enumerate() {
        let bound = (0..gang.members)
            .filter(|m| node_of.get(format!("ml/g{g}-{m}").as_str()).copied().flatten().is_some())
            .count() as u32;
        let preempted = s.preempted.iter().filter(|v| v.pod.starts_with(&format!("ml/g{g}-"))).count();
        // A gang preempted after it was placed goes whole: none bound.
        prop_assert!(
            bound == 0 || bound >= gang.min,
            "gang g{g} ({gang:?}) partly placed: {bound} bound, {preempted} preempted\n{text}"
        );
    }
    let priority = |key: &str| -> Option<i32> {
        let name = key.strip_prefix("ml/")?;
        if let Some(k) = name.strip_prefix("run-") {
            return input.running.get(k.parse::<usize>().ok()?).map(|r| r.2);
        }
        if let Some(k) = name.strip_prefix("single-") {
            return input.singles.get(k.parse::<usize>().ok()?).map(|r| r.1);
        }
        let g = name.strip_prefix('g')?.split('-').next()?.parse::<usize>().ok()?;
        input.gangs.get(g).map(|g| g.priority)
    };
    for v in &s.preempted {
        prop_assert!(priority(&v.pod) < priority(&v.by), "{} preempted for {}\n{text}", v.pod, v.by);
    }
    for n in &s.nodes {
        prop_assert!(n.gpu.0 <= n.gpu.1, "{} holds {} of {} GPUs\n{text}", n.name, n.gpu.0, n.gpu.1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn gangs_are_placed_whole_or_not_at_all(input in input()) {
        check(&input)?;
    }
}
