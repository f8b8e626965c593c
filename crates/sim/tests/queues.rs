//! Queues with quotas (docs/POLICIES.md, "Queues"), simulated: borrowing
//! a sibling's unused quota, a queue without quota waiting with the
//! reason, a parent's quota capping its children, quota per GPU model.

use engine::config::Configuration;
use gpu_scheduler_sim as sim;
use sim::{Manifests, SimOptions, Simulation};

const NOW: &str = "2026-01-01T12:00:00Z";

fn run(yaml: &str) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("scenario.yaml", yaml).unwrap_or_else(|e| panic!("bad scenario: {e}"));
    let opts = SimOptions { seed: 7, now: NOW.parse().unwrap(), explain: None, extenders: Vec::new() };
    let cfg = Configuration::default();
    sim::simulate(&manifests, &cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("simulate: {e}"))
}

fn gpu_node(name: &str, model: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}, gpu-model: {model}}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}\n---\n"
    )
}

fn queue(name: &str, parent: Option<&str>, quota: &str) -> String {
    let parent = parent.map(|p| format!("  parent: {p}\n")).unwrap_or_default();
    format!(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: Queue\nmetadata: {{name: {name}}}\nspec:\n{parent}  quota: {{{quota}}}\n---\n"
    )
}

/// `n` one-GPU pods of `queue`, named `prefix-0` ...
fn pods(prefix: &str, queue: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: ml\n  labels: {{gpu-scheduler.io/queue: {queue}}}\nspec:\n  schedulerName: gpu-scheduler\n  containers:\n  - name: c\n    image: trainer\n    resources:\n      requests: {{cpu: \"1\", memory: 1Gi}}\n      limits: {{nvidia.com/gpu: \"1\"}}\n---\n"
            )
        })
        .collect()
}

fn placed(sim: &Simulation, prefix: &str) -> usize {
    sim.placements.iter().filter(|p| p.pod.starts_with(&format!("ml/{prefix}-")) && p.node.is_some()).count()
}

fn reasons(sim: &Simulation, prefix: &str) -> Vec<String> {
    let mut r: Vec<String> = sim
        .placements
        .iter()
        .filter(|p| p.pod.starts_with(&format!("ml/{prefix}-")) && p.node.is_none())
        .filter_map(|p| p.reason.clone())
        .collect();
    r.dedup();
    r
}

fn two_teams(root_quota: &str) -> String {
    [
        gpu_node("gpu-1", "a100"),
        gpu_node("gpu-2", "a100"),
        queue("root", None, root_quota),
        queue("team-a", Some("root"), "nvidia.com/gpu: 8"),
        queue("team-b", Some("root"), "nvidia.com/gpu: 8"),
    ]
    .concat()
}

#[test]
fn a_queue_alone_borrows_its_siblings_unused_quota() {
    let sim = run(&[two_teams("nvidia.com/gpu: 16"), pods("a", "team-a", 17)].concat());
    assert_eq!(placed(&sim, "a"), 16, "8 of its own and team-b's 8");
    assert_eq!(
        reasons(&sim, "a"),
        [
            "0/2 nodes are available: queue team-a: 16/8 GPUs in use, cannot borrow: team-b lends 8, 8 borrowed already. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        ]
    );
}

/// A gang of `n` one-GPU pods at `priority`.
fn gang(name: &str, queue: &str, n: usize, priority: i32) -> String {
    let group = format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: ml}}\nspec: {{minMember: {n}}}\n---\n"
    );
    let members = pods(name, queue, n).replace(
        "labels: {gpu-scheduler.io/queue:",
        &format!("labels: {{scheduling.x-k8s.io/pod-group: {name}, gpu-scheduler.io/queue:"),
    );
    group + &members.replace("spec:\n  schedulerName", &format!("spec:\n  priority: {priority}\n  schedulerName"))
}

#[test]
fn a_queue_reclaims_its_lent_quota_from_the_borrowers_gang_whole() {
    // team-a runs its training gang (8, its own quota) and a sweep gang at
    // low priority on team-b's 8 GPUs; team-b's pods arrive and take
    // them back: the sweep is evicted whole, the training stays.
    let yaml = [
        two_teams("nvidia.com/gpu: 16"),
        gang("train", "team-a", 8, 100),
        gang("sweep", "team-a", 8, 0),
        pods("b", "team-b", 8),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!((placed(&sim, "train"), placed(&sim, "b")), (8, 8), "{:?}", sim.placements);
    let mut evicted: Vec<&str> = sim.preempted.iter().map(|p| p.pod.as_str()).collect();
    evicted.sort();
    let want: Vec<String> = (0..8).map(|i| format!("ml/sweep-{i}")).collect();
    assert_eq!(evicted, want, "the borrowing gang goes whole, nothing else");
    assert!(sim.preempted.iter().all(|p| p.by == "ml/b-0"), "{:?}", sim.preempted);
}

#[test]
fn weights_two_to_one_share_a_lenders_idle_quota_two_to_one() {
    // The lender's 12 GPUs are idle; team-a (weight 2) and team-b (weight
    // 1) have no quota of their own and more pods than fit.
    let yaml = [
        gpu_node("gpu-1", "a100"),
        gpu_node("gpu-2", "a100"),
        queue("root", None, "nvidia.com/gpu: 12"),
        queue("lender", Some("root"), "nvidia.com/gpu: 12"),
        queue("team-a", Some("root"), "nvidia.com/gpu: 0").replace("spec:\n", "spec:\n  weight: 2\n"),
        queue("team-b", Some("root"), "nvidia.com/gpu: 0"),
        pods("a", "team-a", 12),
        pods("b", "team-b", 12),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!((placed(&sim, "a"), placed(&sim, "b")), (8, 4));
    // Equal weights: equal shares.
    let sim = run(&yaml.replace("  weight: 2\n", ""));
    assert_eq!((placed(&sim, "a"), placed(&sim, "b")), (6, 6));
}

#[test]
fn a_queue_that_may_not_reclaim_waits() {
    let yaml = [two_teams("nvidia.com/gpu: 16"), gang("sweep", "team-a", 16, 0), pods("b", "team-b", 1)]
        .concat()
        .replace("metadata: {name: team-b}\nspec:\n", "metadata: {name: team-b}\nspec:\n  reclaim: false\n");
    let sim = run(&yaml);
    assert_eq!((placed(&sim, "sweep"), placed(&sim, "b")), (16, 0));
    assert!(sim.preempted.is_empty());
}

#[test]
fn a_queue_within_its_quota_takes_back_only_what_it_needs() {
    // team-a takes 12 (4 borrowed); team-b's 6 pods get the 4 left of its
    // quota, then take 2 of the 4 back from team-a's newest pods.
    let yaml = [two_teams("nvidia.com/gpu: 16"), pods("a", "team-a", 12), pods("b", "team-b", 6)].concat();
    let sim = run(&yaml);
    assert_eq!((placed(&sim, "a"), placed(&sim, "b")), (10, 6));
    assert_eq!(sim.preempted.len(), 2, "{:?}", sim.preempted);
    assert!(sim.preempted.iter().all(|p| p.pod.starts_with("ml/a-")), "{:?}", sim.preempted);
}

#[test]
fn a_queue_without_quota_waits_with_the_reason() {
    let yaml = [
        gpu_node("gpu-1", "a100"),
        queue("research", None, "nvidia.com/gpu: 0"),
        pods("r", "research", 1),
        pods("lost", "no-such-queue", 1),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(
        reasons(&sim, "r"),
        [
            "0/1 nodes are available: queue research: 0/0 GPUs in use, and it has no parent to borrow from. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        ]
    );
    assert_eq!(
        reasons(&sim, "lost"),
        [
            "0/1 nodes are available: queue no-such-queue does not exist. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        ]
    );
}

#[test]
fn a_parents_quota_caps_its_children() {
    let sim = run(&[two_teams("nvidia.com/gpu: 12"), pods("a", "team-a", 8), pods("b", "team-b", 8)].concat());
    assert_eq!((placed(&sim, "a"), placed(&sim, "b")), (8, 4), "12 in all, the root's quota");
    assert_eq!(
        reasons(&sim, "b"),
        [
            "0/2 nodes are available: queue root: 12/12 GPUs in use, and it has no parent to borrow from. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        ]
    );
}

#[test]
fn a_quota_per_gpu_model_sends_the_rest_to_other_models() {
    let yaml = [
        gpu_node("a100-1", "a100"),
        gpu_node("t4-1", "t4"),
        queue("team-a", None, "nvidia.com/gpu: 16, \"nvidia.com/gpu:a100\": 2"),
        pods("a", "team-a", 6),
    ]
    .concat();
    let sim = run(&yaml);
    let on = |node: &str| sim.placements.iter().filter(|p| p.node.as_deref() == Some(node)).count();
    // Training pods prefer a100 (GpuModel); only 2 may run there.
    assert_eq!((on("a100-1"), on("t4-1")), (2, 4));
}

#[test]
fn pods_without_a_queue_are_not_concerned() {
    let yaml = [two_teams("nvidia.com/gpu: 0"), pods("x", "", 3)].concat();
    let sim = run(&yaml
        .replace("gpu-scheduler.io/queue: }", "}")
        .replace("labels: {gpu-scheduler.io/queue: }", "labels: {}"));
    assert_eq!(placed(&sim, "x"), 3);
}
