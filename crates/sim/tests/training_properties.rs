//! Property tests of gangs and preemption on random clusters, through
//! `simulate`: no gang is ever partly placed (bound members are 0 or at
//! least minMember), no pod is bound twice or over a node's GPUs, no
//! preemption evicts a pod of equal or higher priority, and no
//! PodDisruptionBudget is violated when a node could make room without.

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

/// A running pod: its cpus, priority, and whether the budget covers it.
type Running = (u32, i32, bool);

/// A cluster of cpu-only nodes full of pods, some protected by a budget
/// that allows no disruption, and one high-priority pod to place.
#[derive(Debug, Clone)]
struct Budgeted {
    /// Per node: its cpus and its pods.
    nodes: Vec<(u32, Vec<Running>)>,
    preemptor_cpu: u32,
}

fn budgeted() -> impl Strategy<Value = Budgeted> {
    let pods = prop::collection::vec((1u32..=3, prop_oneof![Just(0), Just(5), Just(200)], any::<bool>()), 1..=4);
    (prop::collection::vec((4u32..=8, pods), 1..=6), 1u32..=6)
        .prop_map(|(nodes, preemptor_cpu)| Budgeted { nodes, preemptor_cpu })
}

fn check_budgets(input: &Budgeted) -> Result<(), TestCaseError> {
    let mut text = String::new();
    let mut protected = 0;
    for (i, (cpus, pods)) in input.nodes.iter().enumerate() {
        let _ = write!(
            text,
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: \"{cpus}\", memory: 64Gi, pods: \"110\"}}\n"
        );
        let mut used = 0;
        for (k, (cpu, priority, guarded)) in pods.iter().enumerate() {
            if used + cpu > *cpus {
                continue; // the kubelet would not have admitted it
            }
            used += cpu;
            protected += usize::from(*guarded);
            let app = if *guarded { "protected" } else { "free" };
            let _ = write!(
                text,
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}-{k}, namespace: ml, labels: {{app: {app}}}}}\nspec:\n  nodeName: n{i}\n  priority: {priority}\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
            );
        }
    }
    let _ = write!(
        text,
        "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: protected, namespace: ml}}\nspec:\n  minAvailable: {protected}\n  selector: {{matchLabels: {{app: protected}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: urgent, namespace: ml}}\nspec:\n  schedulerName: gpu-scheduler\n  priority: 100\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{}\"}}}}}}]\n",
        input.preemptor_cpu
    );
    let mut m = sim::Manifests::default();
    m.add_str("budgets.yaml", &text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let opts = sim::SimOptions {
        seed: 1,
        now: "2026-01-01T00:00:00Z".parse().unwrap_or_default(),
        explain: None,
        extenders: Vec::new(),
    };
    // kube-scheduler's plugin set: only NodeResourcesFit decides here.
    let s = sim::simulate(
        &m,
        &Configuration::default(),
        &plugins::registry(),
        &plugins::standard_plugins(),
        &opts,
        &mut |_, _| {},
    )
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // Independently: a node where evicting only unprotected pods of lower
    // priority makes room.
    let mut clean_candidate = false;
    for (cpus, pods) in &input.nodes {
        let mut used = 0;
        let mut freeable = 0;
        for (cpu, priority, guarded) in pods {
            if used + cpu > *cpus {
                continue;
            }
            used += cpu;
            if *priority < 100 && !guarded {
                freeable += cpu;
            }
        }
        clean_candidate |= input.preemptor_cpu <= *cpus && cpus - used + freeable >= input.preemptor_cpu;
    }
    let violated = s.preempted.iter().any(|v| {
        let name = v.pod.trim_start_matches("ml/p");
        let (i, k) = name.split_once('-').unwrap_or(("", ""));
        let (i, k): (usize, usize) = (i.parse().unwrap_or(usize::MAX), k.parse().unwrap_or(usize::MAX));
        input.nodes.get(i).and_then(|(_, p)| p.get(k)).is_some_and(|p| p.2)
    });
    prop_assert!(
        !(violated && clean_candidate),
        "a budget was violated although a node without violation existed\n{text}"
    );
    for v in &s.preempted {
        prop_assert!(!v.pod.ends_with("urgent"), "{v:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn no_budget_is_violated_when_a_node_avoids_it(input in budgeted()) {
        check_budgets(&input)?;
    }
}
