//! End-to-end scenarios of the standard plugins through `sim::simulate`
//! with kube-scheduler's plugin set and weights (`standard_plugins`): each
//! is a small manifest and the placements kube-scheduler would make for
//! it. The shipped policy profile has its own scenarios in `policies.rs`.

use std::collections::BTreeMap;

use engine::config::Configuration;
use gpu_scheduler_sim as sim;
use sim::{Manifests, SimOptions, Simulation};

fn run(yaml: &str) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("scenario.yaml", yaml).unwrap_or_else(|e| panic!("bad scenario: {e}"));
    let opts =
        SimOptions { seed: 1, now: "2026-01-01T00:00:00Z".parse().unwrap(), explain: None, extenders: Vec::new() };
    sim::simulate(
        &manifests,
        &Configuration::default(),
        &plugins::registry(),
        &plugins::standard_plugins(),
        &opts,
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("simulate: {e}"))
}

/// Where `pod` (`NS/NAME`) went; panics if it was not reported.
fn node_of<'a>(sim: &'a Simulation, pod: &str) -> Option<&'a str> {
    sim.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not reported")).node.as_deref()
}

fn reason_of<'a>(sim: &'a Simulation, pod: &str) -> &'a str {
    let p = sim.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not reported"));
    assert_eq!(p.node, None, "{pod} should be unplaced");
    p.reason.as_deref().unwrap_or_else(|| panic!("{pod} unplaced without a reason"))
}

/// A node document; `extra` is indented YAML appended to the mapping
/// (labels go in `labels`, a flow mapping body).
fn node(name: &str, cpu: &str, memory: &str, labels: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}{sep}{labels}}}\n{extra}status:\n  allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"110\"}}\n---\n",
        sep = if labels.is_empty() { "" } else { ", " }
    )
}

/// A pending pod of ours requesting `cpu`; `spec` is extra YAML under `spec:`
/// (indented by two spaces), `meta` extra YAML under `metadata:`.
fn pod(name: &str, cpu: &str, meta: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n{meta}spec:\n  schedulerName: gpu-scheduler\n{spec}  containers:\n  - name: c\n    image: app\n    resources:\n      requests: {{cpu: \"{cpu}\", memory: 1Gi}}\n---\n"
    )
}

#[test]
fn taint_keeps_pod_off_node() {
    // The tainted node is far emptier, so only the taint keeps the pod off it.
    let yaml = [
        node("big", "64", "256Gi", "", "spec:\n  taints:\n  - {key: dedicated, value: gpu, effect: NoSchedule}\n"),
        node("small", "4", "8Gi", "", ""),
        pod("plain", "1", "", ""),
        pod(
            "tolerant",
            "1",
            "",
            "  tolerations:\n  - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}\n",
        ),
        pod("too-big", "8", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/plain"), Some("small"));
    assert_eq!(node_of(&sim, "default/tolerant"), Some("big"));
    assert_eq!(
        reason_of(&sim, "default/too-big"),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn no_execute_taint_also_filters_and_prefer_no_schedule_does_not() {
    let yaml = [
        node("evicting", "64", "256Gi", "", "spec:\n  taints:\n  - {key: evict, effect: NoExecute}\n"),
        node("soft", "2", "4Gi", "", "spec:\n  taints:\n  - {key: soft, value: x, effect: PreferNoSchedule}\n"),
        pod("p", "1", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/p"), Some("soft"));
}

#[test]
fn required_node_affinity() {
    let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let affinity = |op: &str, values: &str| {
        format!(
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {{key: topology.kubernetes.io/zone, operator: {op}, values: [{values}]}}\n"
        )
    };
    let yaml = [
        node("a", "64", "256Gi", &zone("z1"), ""),
        node("b", "4", "8Gi", &zone("z2"), ""),
        node("c", "8", "16Gi", &zone("z3"), ""),
        pod("in-z2", "1", "", &affinity("In", "z2")),
        pod("not-in-z1-z3", "1", "", &affinity("NotIn", "z1, z3")),
        pod("in-z9", "1", "", &affinity("In", "z9")),
        pod("selector-z3", "1", "", "  nodeSelector: {topology.kubernetes.io/zone: z3}\n"),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/in-z2"), Some("b"));
    assert_eq!(node_of(&sim, "default/not-in-z1-z3"), Some("b"));
    assert_eq!(node_of(&sim, "default/selector-z3"), Some("c"));
    assert_eq!(
        reason_of(&sim, "default/in-z9"),
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn pod_anti_affinity_one_per_host() {
    let yaml = [
        node("n1", "16", "64Gi", "", ""),
        node("n2", "16", "64Gi", "", ""),
        "apiVersion: apps/v1
kind: Deployment
metadata: {name: cache, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      schedulerName: gpu-scheduler
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: cache}}
      containers:
      - {name: c, image: redis, resources: {requests: {cpu: 100m, memory: 128Mi}}}
"
        .to_string(),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(sim.placements.len(), 3);
    let mut placed: Vec<&str> = sim.placements.iter().filter_map(|p| p.node.as_deref()).collect();
    placed.sort_unstable();
    assert_eq!(placed, ["n1", "n2"], "one replica per host");
    let unplaced: Vec<_> = sim.placements.iter().filter(|p| p.node.is_none()).collect();
    assert_eq!(unplaced.len(), 1);
    assert_eq!(
        unplaced[0].reason.as_deref(),
        Some(
            "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        )
    );
}

#[test]
fn topology_spread_do_not_schedule_across_zones() {
    let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let spread = "  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector: {matchLabels: {app: spread}}\n";
    let labelled = "  labels: {app: spread}\n";
    // Two pods of the app already run in zone a; zone b's node is smaller
    // and busier, so only the constraint sends the next pods there.
    let existing = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{app: spread}}\nspec:\n  nodeName: a1\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: \"1\", memory: 1Gi}}}}}}\n---\n"
        )
    };
    let yaml = [
        node("a1", "64", "256Gi", &zone("a"), ""),
        node("a2", "64", "256Gi", &zone("a"), ""),
        node("b1", "8", "16Gi", &zone("b"), ""),
        existing("old-1"),
        existing("old-2"),
        pod("new-1", "1", labelled, spread),
        pod("new-2", "1", labelled, spread),
        pod("new-3", "1", labelled, spread),
    ]
    .concat();
    let sim = run(&yaml);
    let zone_of = |n: &str| if n.starts_with('a') { "a" } else { "b" };
    let mut count: BTreeMap<&str, i32> = [("a", 2), ("b", 0)].into();
    for p in &sim.placements {
        let n = p.node.as_deref().unwrap_or_else(|| panic!("{} unplaced: {:?}", p.pod, p.reason));
        *count.get_mut(zone_of(n)).unwrap() += 1;
        let skew = (count["a"] - count["b"]).abs();
        assert!(skew <= 1, "after {} on {n}: zone counts {count:?}", p.pod);
    }
    assert_eq!(count, [("a", 3), ("b", 2)].into());
    assert_eq!(node_of(&sim, "default/new-1"), Some("b1"));
}

#[test]
fn topology_spread_unsatisfiable_leaves_pod_pending() {
    let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let spread = "  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector: {matchLabels: {app: spread}}\n";
    // Zone b exists but its only node is too small: the pod may not go
    // to zone a (skew would be 2) and does not fit in zone b.
    let yaml = [
        node("a1", "64", "256Gi", &zone("a"), ""),
        node("b1", "1", "16Gi", &zone("b"), ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: old, namespace: default, labels: {app: spread}}\nspec:\n  nodeName: a1\n  containers: [{name: c, image: app}]\n---\n".to_string(),
        pod("new", "2", "  labels: {app: spread}\n", spread),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(
        reason_of(&sim, "default/new"),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread constraints. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn node_ports_conflict() {
    let port = "  containers:\n  - name: c\n    image: app\n    ports: [{containerPort: 80, hostPort: 8080}]\n";
    let pod_with_port = |name: &str, node_name: Option<&str>| {
        let bound = node_name.map(|n| format!("  nodeName: {n}\n")).unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  schedulerName: gpu-scheduler\n{bound}{port}---\n"
        )
    };
    let yaml = [
        // n1 is emptier, but its port 8080 is taken.
        node("n1", "64", "256Gi", "", ""),
        node("n2", "4", "8Gi", "", ""),
        pod_with_port("existing", Some("n1")),
        pod_with_port("first", None),
        pod_with_port("second", None),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/first"), Some("n2"));
    assert_eq!(
        reason_of(&sim, "default/second"),
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn higher_priority_pod_is_scheduled_first() {
    // Both pending, the low one first in the input; only one fits.
    let yaml = [
        node("only", "2", "8Gi", "", ""),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: important}\nvalue: 1000\n---\n"
            .to_string(),
        pod("low", "2", "", "  priority: 10\n"),
        pod("high", "2", "", "  priorityClassName: important\n"),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/high"), Some("only"));
    assert_eq!(
        reason_of(&sim, "default/low"),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    assert_eq!(sim.placements[0].pod, "default/high", "placements are in scheduling order");
    assert_eq!(sim.placements[0].priority, 1000);
}

#[test]
fn scheduling_gates_keep_pod_unplaced() {
    let yaml = [
        node("n1", "8", "16Gi", "", ""),
        pod("gated", "1", "", "  schedulingGates:\n  - name: example.com/quota\n  - name: example.com/review\n"),
        pod("free", "1", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/free"), Some("n1"));
    let reason = reason_of(&sim, "default/gated");
    assert!(reason.contains("scheduling gates"), "{reason}");
    assert!(reason.contains("example.com/quota") && reason.contains("example.com/review"), "{reason}");
    let gated = sim.placements.iter().find(|p| p.pod == "default/gated").unwrap();
    assert_eq!(gated.attempts, 0, "a gated pod is never tried");
}

#[test]
fn init_and_sidecar_containers_decide_fit() {
    // Each case: containers YAML under `spec:` and whether it fits a 4-cpu node.
    let c = |name: &str, cpu: &str| {
        format!("  - {{name: {name}, image: app, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}\n")
    };
    let side = |name: &str, cpu: &str| {
        format!(
            "  - {{name: {name}, image: app, restartPolicy: Always, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}\n"
        )
    };
    let cases: Vec<(&str, String, bool)> = vec![
        ("app only", format!("  containers:\n{}", c("app", "4")), true),
        (
            "init larger than app but fits",
            format!("  initContainers:\n{}  containers:\n{}", c("init", "3500m"), c("app", "1")),
            true,
        ),
        ("init exceeds node", format!("  initContainers:\n{}  containers:\n{}", c("init", "5"), c("app", "1")), false),
        (
            "init containers run one at a time",
            format!("  initContainers:\n{}{}  containers:\n{}", c("i1", "3"), c("i2", "3"), c("app", "1")),
            true,
        ),
        (
            "sidecar adds to app",
            format!("  initContainers:\n{}  containers:\n{}", side("proxy", "1500m"), c("app", "3")),
            false,
        ),
        (
            "sidecar plus app fits",
            format!("  initContainers:\n{}  containers:\n{}", side("proxy", "1"), c("app", "3")),
            true,
        ),
        (
            "init after sidecar runs beside it",
            format!(
                "  initContainers:\n{}{}  containers:\n{}",
                side("proxy", "1"),
                c("migrate", "3500m"),
                c("app", "1")
            ),
            false,
        ),
        (
            "init before sidecar does not",
            format!(
                "  initContainers:\n{}{}  containers:\n{}",
                c("migrate", "3500m"),
                side("proxy", "1"),
                c("app", "1")
            ),
            true,
        ),
    ];
    for (name, containers, fits) in cases {
        let yaml = format!(
            "{}apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default}}\nspec:\n  schedulerName: gpu-scheduler\n{containers}",
            node("n", "4", "16Gi", "", "")
        );
        let sim = run(&yaml);
        let got = node_of(&sim, "default/p");
        if fits {
            assert_eq!(got, Some("n"), "{name}: {:?}", sim.placements[0].reason);
        } else {
            assert_eq!(got, None, "{name}");
            assert_eq!(
                reason_of(&sim, "default/p"),
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
                "{name}"
            );
        }
    }
}

/// Default (System) topology spreading applies to pods of a controller:
/// a Deployment's replicas spread over zones that resource scores alone
/// would not use, while the same pods without an owner pile into the big node.
#[test]
fn deployment_replicas_spread_over_zones_by_default() {
    let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let nodes = [node("big-a", "64", "256Gi", &zone("a"), ""), node("small-b", "8", "32Gi", &zone("b"), "")].concat();
    let deployment = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: gpu-scheduler
      containers:
      - {name: c, image: web, resources: {requests: {cpu: \"1\", memory: 4Gi}}}
";
    let sim = run(&format!("{nodes}{deployment}"));
    let in_zone = |sim: &Simulation, n: &str| sim.placements.iter().filter(|p| p.node.as_deref() == Some(n)).count();
    assert_eq!(sim.placements.len(), 6);
    assert!(sim.placements.iter().all(|p| p.node.is_some()));
    let (a, b) = (in_zone(&sim, "big-a"), in_zone(&sim, "small-b"));
    assert!(b >= 2 && a.abs_diff(b) <= 2, "replicas should spread over both zones: a={a} b={b}");

    // The same pods, bare: no controller, no default constraints.
    let bare: String = (0..6)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: web-{i}, namespace: default, labels: {{app: web}}}}\nspec:\n  schedulerName: gpu-scheduler\n  containers:\n  - {{name: c, image: web, resources: {{requests: {{cpu: \"1\", memory: 4Gi}}}}}}\n---\n"
            )
        })
        .collect();
    let sim = run(&format!("{nodes}{bare}"));
    assert_eq!(in_zone(&sim, "big-a"), 6, "{:?}", sim.placements);
}

#[test]
fn unschedulable_node_admits_only_pods_tolerating_it() {
    let cordoned = "spec:\n  unschedulable: true\n";
    let yaml = [
        node("cordoned", "64", "256Gi", "", cordoned),
        node("open", "2", "4Gi", "", ""),
        pod("plain", "1", "", ""),
        pod(
            "tolerant",
            "1",
            "",
            "  tolerations:\n  - {key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}\n",
        ),
        pod("too-big", "4", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/plain"), Some("open"));
    assert_eq!(node_of(&sim, "default/tolerant"), Some("cordoned"));
    assert_eq!(
        reason_of(&sim, "default/too-big"),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn required_pod_affinity_co_locates_and_first_pod_may_match_itself() {
    let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let affinity = |app: &str| {
        format!(
            "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - topologyKey: topology.kubernetes.io/zone\n        labelSelector: {{matchLabels: {{app: {app}}}}}\n"
        )
    };
    let yaml = [
        node("a1", "4", "16Gi", &zone("a"), ""),
        node("b1", "64", "256Gi", &zone("b"), ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: default, labels: {app: db}}\nspec:\n  nodeName: a1\n  containers: [{name: c, image: db}]\n---\n".to_string(),
        // Must share a zone with the db, although b1 is far emptier.
        pod("api", "1", "", &affinity("db")),
        // No pod matches anywhere: none can satisfy it...
        pod("orphan", "1", "", &affinity("nothing")),
        // ...unless the pod matches its own term (the first of a group).
        pod("self", "1", "  labels: {app: self}\n", &affinity("self")),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/api"), Some("a1"));
    assert_eq!(
        reason_of(&sim, "default/orphan"),
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert!(node_of(&sim, "default/self").is_some(), "{:?}", sim.placements);
}

#[test]
fn existing_pods_anti_affinity_is_symmetric() {
    // The running pod refuses company labelled app=noisy on its host.
    let yaml = [
        node("quiet-host", "64", "256Gi", "", ""),
        node("other", "2", "4Gi", "", ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: quiet, namespace: default, labels: {app: quiet}}\nspec:\n  nodeName: quiet-host\n  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - topologyKey: kubernetes.io/hostname\n        labelSelector: {matchLabels: {app: noisy}}\n  containers: [{name: c, image: q}]\n---\n".to_string(),
        pod("noisy", "1", "  labels: {app: noisy}\n", ""),
        pod("noisy-big", "4", "  labels: {app: noisy}\n", ""),
        pod("calm", "1", "  labels: {app: calm}\n", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/noisy"), Some("other"));
    assert_eq!(node_of(&sim, "default/calm"), Some("quiet-host"));
    assert_eq!(
        reason_of(&sim, "default/noisy-big"),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy existing pods anti-affinity rules. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn global_default_priority_class_orders_pods_without_a_class() {
    let yaml = [
        node("only", "2", "8Gi", "", ""),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: normal}\nvalue: 500\nglobalDefault: true\n---\n"
            .to_string(),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 100\n---\n".to_string(),
        pod("explicit-low", "2", "", "  priorityClassName: low\n"),
        pod("defaulted", "2", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/defaulted"), Some("only"));
    assert_eq!(sim.placements.iter().find(|p| p.pod == "default/defaulted").unwrap().priority, 500);
    assert_eq!(
        reason_of(&sim, "default/explicit-low"),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn topology_spread_counts_only_nodes_matching_the_pods_node_selector() {
    let labels = |z: &str, pool: &str| format!("topology.kubernetes.io/zone: {z}, pool: {pool}");
    let spread = "  nodeSelector: {pool: web}\n  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector: {matchLabels: {app: spread}}\n";
    // Zone c has only a node outside the pod's pool: with the default
    // nodeAffinityPolicy (Honor) it is not a domain, so its 0 pods do not
    // hold the others back.
    let yaml = [
        node("a1", "16", "64Gi", &labels("a", "web"), ""),
        node("b1", "16", "64Gi", &labels("b", "web"), ""),
        node("c1", "16", "64Gi", &labels("c", "batch"), ""),
        pod("s1", "1", "  labels: {app: spread}\n", spread),
        pod("s2", "1", "  labels: {app: spread}\n", spread),
        pod("s3", "1", "  labels: {app: spread}\n", spread),
        pod("s4", "1", "  labels: {app: spread}\n", spread),
    ]
    .concat();
    let sim = run(&yaml);
    let mut nodes: Vec<&str> = sim.placements.iter().map(|p| p.node.as_deref().unwrap_or("-")).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["a1", "a1", "b1", "b1"], "{:?}", sim.placements);
}

/// A node-name affinity (`matchFields` on `metadata.name`) narrows the
/// candidates in NodeAffinity's PreFilter; nodes left out count as
/// "didn't satisfy plugin(s) [NodeAffinity]", as kube-scheduler reports.
const PINNED: &str = "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [NODES]}\n";

#[test]
fn node_name_affinity_pins_the_pod() {
    let yaml = [
        node("n1", "64", "256Gi", "", ""),
        node("n2", "4", "8Gi", "", ""),
        pod("pinned", "1", "", &PINNED.replace("NODES", "n2")),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/pinned"), Some("n2"));
}

#[test]
fn conflicting_node_name_fields_are_rejected_in_pre_filter() {
    let conflict = "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [n1]}\n          - {key: metadata.name, operator: In, values: [n2]}\n";
    let yaml = [node("n1", "4", "8Gi", "", ""), node("n2", "4", "8Gi", "", ""), pod("p", "1", "", conflict)].concat();
    let sim = run(&yaml);
    assert_eq!(
        reason_of(&sim, "default/p"),
        "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn nodes_left_out_by_pre_filter_name_the_plugin() {
    let yaml = [
        node("n1", "4", "8Gi", "", ""),
        node("n2", "4", "8Gi", "", ""),
        node("small", "1", "8Gi", "", ""),
        pod("pinned", "2", "", &PINNED.replace("NODES", "small")),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(
        reason_of(&sim, "default/pinned"),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn node_name_affinity_to_a_missing_node_leaves_the_pod_pending() {
    let yaml = [
        node("n1", "4", "8Gi", "", ""),
        node("n2", "4", "8Gi", "", ""),
        pod("ghostly", "1", "", &PINNED.replace("NODES", "ghost")),
        pod("fine", "1", "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(
        reason_of(&sim, "default/ghostly"),
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert!(node_of(&sim, "default/fine").is_some());
}

#[test]
fn no_nodes_reports_the_pod_unplaced() {
    let yaml = pod("lonely", "1", "", "");
    // The bug is a hang: run on a thread and give up after a while.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let sim = run(&yaml);
        let _ = tx
            .send(sim.placements.iter().map(|p| (p.pod.clone(), p.node.clone(), p.reason.clone())).collect::<Vec<_>>());
    });
    let placements = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("simulate did not return within 20 s");
    assert_eq!(
        placements,
        [("default/lonely".to_string(), None, Some("no nodes available to schedule pods".to_string()))]
    );
}

/// PersistentVolumeClaims, as kube-scheduler's volume plugins place them.
#[test]
fn volumes_decide_the_node() {
    let class = |name: &str, provisioner: &str| {
        format!(
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: {provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n---\n"
        )
    };
    let claim = |name: &str, class: &str, mode: &str, volume: &str| {
        let bound = if volume.is_empty() { String::new() } else { format!("  volumeName: {volume}\n") };
        format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  storageClassName: {class}\n  accessModes: [{mode}]\n{bound}  resources: {{requests: {{storage: 10Gi}}}}\n---\n"
        )
    };
    let volume = |name: &str, class: &str, affinity: &str, labels: &str| {
        format!(
            "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec:\n  storageClassName: {class}\n  capacity: {{storage: 100Gi}}\n  accessModes: [ReadWriteOnce, ReadWriteOncePod]\n  hostPath: {{path: /data}}\n{affinity}---\n"
        )
    };
    let on = |host: &str| {
        format!(
            "  nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{host}]}}]}}]}}}}\n"
        )
    };
    let using = |pod_name: &str, claim: &str| {
        pod(pod_name, "1", "", &format!("  volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]\n"))
    };
    let nodes = [
        node("a", "4", "16Gi", "topology.kubernetes.io/zone: z1", ""),
        node("b", "4", "16Gi", "topology.kubernetes.io/zone: z2", ""),
        node("c", "4", "16Gi", "topology.kubernetes.io/zone: z2", ""),
    ]
    .concat();
    let yaml = [
        nodes,
        class("local", "kubernetes.io/no-provisioner"),
        class("fast", "ebs.csi.aws.com"),
        // A WaitForFirstConsumer claim and the static volume on b.
        claim("data", "local", "ReadWriteOnce", ""),
        volume("pv-b", "local", &on("b"), ""),
        using("trainer", "data"),
        // A bound claim whose volume lives in zone z1.
        claim("zonal", "fast", "ReadWriteOnce", "pv-z1"),
        volume("pv-z1", "fast", "", "topology.kubernetes.io/zone: z1"),
        using("zonal-user", "zonal"),
        // A ReadWriteOncePod claim: the second user cannot have it.
        claim("solo", "fast", "ReadWriteOncePod", "pv-solo"),
        volume("pv-solo", "fast", "", ""),
        using("solo-1", "solo"),
        using("solo-2", "solo"),
        // No volume, no provisioner: nowhere.
        claim("orphan", "local", "ReadWriteOnce", ""),
        using("orphan-user", "orphan"),
        // Provisioned where the pod goes.
        claim("scratch", "fast", "ReadWriteOnce", ""),
        using("scratch-user", "scratch"),
        // A bound claim whose volume is on no node of the cluster.
        claim("pinned", "fast", "ReadWriteOnce", "pv-elsewhere"),
        volume("pv-elsewhere", "fast", &on("elsewhere"), ""),
        using("pinned-user", "pinned"),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/trainer"), Some("b"));
    assert_eq!(node_of(&sim, "default/zonal-user"), Some("a"));
    assert!(node_of(&sim, "default/solo-1").is_some());
    // kube 1.36's words and codes (conformance seeds 57 and 62): the claim
    // in use fails each node in Filter, so preemption looks for victims.
    assert_eq!(
        reason_of(&sim, "default/solo-2"),
        "0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    assert_eq!(
        reason_of(&sim, "default/pinned-user"),
        "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        reason_of(&sim, "default/orphan-user"),
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert!(node_of(&sim, "default/scratch-user").is_some());
}

/// A gang short of members with a schedule timeout times out and waits
/// again forever; the simulation still ends (found by fuzzing: the
/// gang-training example with minMember 9 for its 4 workers never did).
#[test]
fn a_gang_that_never_gets_its_members_ends_pending() {
    let mut yaml = node("n1", "64", "256Gi", "", "");
    yaml.push_str(
        "---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: default}
spec: {minMember: 9, scheduleTimeoutSeconds: 1}
---
",
    );
    for i in 0..4 {
        yaml.push_str(&pod(&format!("w{i}"), "1", "  labels: {scheduling.x-k8s.io/pod-group: g}\n", ""));
    }
    let sim = run(&yaml);
    for i in 0..4 {
        let reason = reason_of(&sim, &format!("default/w{i}"));
        assert!(reason.contains("gang default/g: 4 of 9 members pending"), "{reason}");
    }
}
