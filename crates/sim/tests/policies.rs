//! The seed's policies (DESIGN.md §4) end to end: each scenario is a small
//! cluster simulated with the default profile (no config file) or a given
//! config, at a fixed clock, and the placements the policy calls for.

use engine::config::{self, Configuration};
use gpu_scheduler_sim as sim;
use sim::{Manifests, SimOptions, Simulation};

const NOW: &str = "2026-01-01T12:00:00Z";

fn run_with(yaml: &str, cfg: &Configuration, explain: Option<&str>) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("scenario.yaml", yaml).unwrap_or_else(|e| panic!("bad scenario: {e}"));
    let opts =
        SimOptions { seed: 7, now: NOW.parse().unwrap(), explain: explain.map(str::to_string), extenders: Vec::new() };
    sim::simulate(&manifests, cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("simulate: {e}"))
}

fn run(yaml: &str) -> Simulation {
    run_with(yaml, &Configuration::default(), None)
}

fn node_of<'a>(sim: &'a Simulation, pod: &str) -> Option<&'a str> {
    sim.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not reported")).node.as_deref()
}

fn reason_of<'a>(sim: &'a Simulation, pod: &str) -> &'a str {
    let p = sim.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not reported"));
    assert_eq!(p.node, None, "{pod} should be unplaced");
    p.reason.as_deref().unwrap_or_else(|| panic!("{pod} unplaced without a reason"))
}

/// A node: `labels` and `annotations` are flow-mapping bodies; `gpus` > 0
/// adds `nvidia.com/gpu` and the GPU operator's taint.
fn node(name: &str, cpu: &str, memory: &str, gpus: u32, labels: &str, annotations: &str) -> String {
    let sep = if labels.is_empty() { "" } else { ", " };
    let taint =
        if gpus > 0 { "spec:\n  taints:\n  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}\n" } else { "" };
    let gpu = if gpus > 0 { format!(", nvidia.com/gpu: \"{gpus}\"") } else { String::new() };
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}{sep}{labels}}}\n  annotations: {{{annotations}}}\n{taint}status:\n  allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"110\"{gpu}}}\n---\n"
    )
}

/// A pending pod of ours: `labels` a flow-mapping body; `gpus` > 0 requests
/// GPUs and tolerates the GPU taint; `spec` is extra YAML under `spec:`.
fn pod(name: &str, cpu: &str, memory: &str, gpus: u32, labels: &str, spec: &str) -> String {
    let (gpu, tol) = if gpus > 0 {
        (
            format!(", nvidia.com/gpu: \"{gpus}\""),
            "  tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n",
        )
    } else {
        (String::new(), "")
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{{labels}}}\nspec:\n  schedulerName: gpu-scheduler\n{tol}{spec}  containers:\n  - name: c\n    image: app\n    resources:\n      requests: {{cpu: \"{cpu}\", memory: {memory}{gpu}}}\n      limits: {{cpu: \"{cpu}\", memory: {memory}{gpu}}}\n---\n"
    )
}

#[test]
fn gpu_work_goes_to_its_model_by_either_label() {
    // A100 and T4 named once by the gpu-model label, once by the GPU
    // operator's product label; the T4s are emptier, so only the model
    // preference sends training to the A100s.
    let yaml = [
        node("a100-label", "32", "256Gi", 8, "gpu-model: a100", ""),
        node("t4-label", "64", "512Gi", 8, "gpu-model: t4", ""),
        node("a100-product", "32", "256Gi", 8, "nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB", ""),
        node("t4-product", "64", "512Gi", 8, "nvidia.com/gpu.product: Tesla-T4", ""),
        node("l4-product", "64", "512Gi", 8, "nvidia.com/gpu.product: NVIDIA-L4", ""),
        pod("train-1", "4", "16Gi", 4, "gpu-scheduler.io/workload: training", ""),
        pod("train-2", "4", "16Gi", 4, "gpu-scheduler.io/workload: training", ""),
        pod("infer-1", "1", "4Gi", 1, "gpu-scheduler.io/workload: inference", ""),
        pod("infer-2", "1", "4Gi", 1, "gpu-scheduler.io/workload: inference", ""),
        pod("untyped", "1", "4Gi", 1, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    for p in ["train-1", "train-2", "untyped"] {
        let n = node_of(&sim, &format!("default/{p}")).unwrap();
        assert!(n.starts_with("a100"), "{p} on {n}");
    }
    for p in ["infer-1", "infer-2"] {
        let n = node_of(&sim, &format!("default/{p}")).unwrap();
        assert!(n.starts_with("t4") || n.starts_with("l4"), "{p} on {n}");
    }
}

#[test]
fn cpu_pods_stay_off_gpu_nodes_while_cpu_nodes_fit() {
    // The GPU node is huge and empty and the web pods tolerate its taint:
    // only GpuNodeAvoidance keeps them on the small CPU node until it is full.
    let tolerate = "  tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n";
    let yaml = [
        node("gpu", "96", "768Gi", 8, "gpu-model: a100", ""),
        node("cpu", "4", "16Gi", 0, "", ""),
        pod("web-1", "1", "2Gi", 0, "app: web", tolerate),
        pod("web-2", "1", "2Gi", 0, "app: web", tolerate),
        pod("web-3", "3", "2Gi", 0, "app: web", tolerate),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/web-1"), Some("cpu"));
    assert_eq!(node_of(&sim, "default/web-2"), Some("cpu"));
    // 2 of 4 cpu left (and the 90% buffer): the third goes to the GPU node.
    assert_eq!(node_of(&sim, "default/web-3"), Some("gpu"));
}

#[test]
fn replicas_spread_over_zones() {
    let yaml = [
        node("a1", "16", "64Gi", 0, "topology.kubernetes.io/zone: a", ""),
        node("a2", "16", "64Gi", 0, "topology.kubernetes.io/zone: a", ""),
        node("b1", "16", "64Gi", 0, "topology.kubernetes.io/zone: b", ""),
        node("c1", "16", "64Gi", 0, "topology.kubernetes.io/zone: c", ""),
        pod("api-1", "1", "1Gi", 0, "app: api", ""),
        pod("api-2", "1", "1Gi", 0, "app: api", ""),
        pod("api-3", "1", "1Gi", 0, "app: api", ""),
    ]
    .concat();
    let sim = run(&yaml);
    let mut zones: Vec<char> =
        (1..=3).map(|i| node_of(&sim, &format!("default/api-{i}")).unwrap().chars().next().unwrap()).collect();
    zones.sort();
    assert_eq!(zones, ['a', 'b', 'c'], "one replica per zone");
}

#[test]
fn recent_hardware_alerts_are_avoided_old_ones_are_not() {
    // NOW is 12:00. "recent" alerted 2 min ago; "old" 10 min ago and is
    // emptier than "clean", so it wins once the alert has aged out.
    let yaml = [
        node("recent", "64", "256Gi", 0, "", "gpu-scheduler.io/last-hardware-alert: \"2026-01-01T11:58:00Z\""),
        node("old", "64", "256Gi", 0, "", "gpu-scheduler.io/last-hardware-alert: \"2026-01-01T11:50:00Z\""),
        node("clean", "8", "32Gi", 0, "", ""),
        pod("job", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/job"), Some("old"));

    // The same with only the recent node and a fuller clean one: still avoided.
    let yaml = [
        node("recent", "64", "256Gi", 0, "", "gpu-scheduler.io/last-hardware-alert: \"2026-01-01T11:58:00Z\""),
        node("clean", "8", "32Gi", 0, "", ""),
        pod("job", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    assert_eq!(node_of(&run(&yaml), "default/job"), Some("clean"));
}

#[test]
fn a_pod_kept_off_by_an_alert_is_placed_when_the_alert_ages_out() {
    // NodeHealth as a filter: the only node alerted 2 min before NOW keeps
    // the pod pending; it is retried when the alert leaves the 5-minute
    // window (at 12:03), not at the 5-minute flush of unschedulable pods.
    let cfg = config::parse(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n\
         - schedulerName: gpu-scheduler\n  pluginConfig:\n  - name: NodeHealth\n    args: {mode: Filter}\n",
    )
    .unwrap();
    let yaml = [
        node("only", "64", "256Gi", 0, "", "gpu-scheduler.io/last-hardware-alert: \"2026-01-01T11:58:00Z\""),
        pod("job", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run_with(&yaml, &cfg, None);
    assert_eq!(node_of(&sim, "default/job"), Some("only"));
    let p = sim.placements.iter().find(|p| p.pod == "default/job").unwrap();
    assert_eq!(p.attempts, 2, "one refusal, then placed when the alert aged out");
}

#[test]
fn maintenance_nodes_are_never_used() {
    let yaml = [
        node("maint", "64", "256Gi", 0, "maintenance-mode: \"true\"", ""),
        node("ok", "2", "4Gi", 0, "", ""),
        pod("p1", "1", "1Gi", 0, "", ""),
        pod("p2", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/p1"), Some("ok"));
    let reason = reason_of(&sim, "default/p2");
    assert!(reason.starts_with("0/2 nodes are available:"), "{reason}");
    assert!(reason.contains("1 node(s) in maintenance mode"), "{reason}");
}

#[test]
fn the_last_ten_percent_is_kept_for_critical_pods() {
    // 10 cpu, 8 already taken: a normal pod may fill to 9, the critical one
    // may take the last cpu too.
    let running = "apiVersion: v1\nkind: Pod\nmetadata: {name: load, namespace: default}\nspec:\n  nodeName: n\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"8\"}}}]\n---\n";
    let yaml = [
        node("n", "10", "100Gi", 0, "", ""),
        running.to_string(),
        pod("critical", "1", "1Gi", 0, "", "  priority: 2000000000\n"),
        pod("normal-1", "1", "1Gi", 0, "", ""),
        pod("normal-2", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    // Priority first: the critical pod takes 8 → 9; no normal pod fits under 90 %.
    assert_eq!(node_of(&sim, "default/critical"), Some("n"));
    for p in ["default/normal-1", "default/normal-2"] {
        let reason = reason_of(&sim, p);
        assert_eq!(
            reason,
            "0/1 nodes are available: 1 node(s) would exceed 90% of cpu (reserved for critical pods). \
             preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
    }

    // Without the critical pod, one normal pod fits (9 of 10) and the next does not.
    let yaml = [
        node("n", "10", "100Gi", 0, "", ""),
        running.to_string(),
        pod("normal-1", "1", "1Gi", 0, "", ""),
        pod("normal-2", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/normal-1"), Some("n"));
    assert!(reason_of(&sim, "default/normal-2").contains("90% of cpu"));
}

#[test]
fn spot_nodes_close_to_expiry_take_no_new_pods() {
    let yaml = [
        node("expiring", "64", "256Gi", 0, "", "gpu-scheduler.io/spot-expiry: \"2026-01-01T12:20:00Z\""),
        node("later", "64", "256Gi", 0, "", "gpu-scheduler.io/spot-expiry: \"2026-01-01T14:00:00Z\""),
        pod("p1", "1", "1Gi", 0, "", ""),
        pod("p2", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/p1"), Some("later"));
    assert_eq!(node_of(&sim, "default/p2"), Some("later"));
}

#[test]
fn clouds_sensitive_data_overflow_and_service_affinity() {
    let private = "gpu-scheduler.io/cloud: private";
    let public = "gpu-scheduler.io/cloud: public";
    // Private is small; public is big and empty.
    let yaml = [
        node("priv", "4", "16Gi", 0, private, ""),
        node("pub", "64", "256Gi", 0, public, ""),
        // Sensitive: private only, and unplaceable once private is full.
        pod("secret-1", "1", "1Gi", 0, "app: vault, gpu-scheduler.io/data-class: sensitive", ""),
        pod("secret-2", "3", "1Gi", 0, "app: vault-b, gpu-scheduler.io/data-class: sensitive", ""),
        // Web prefers private and fits there (1 + 2 of the 3.6 cpu allowed).
        pod("web-1", "2", "1Gi", 0, "app: web", ""),
        // A batch service finds private full and overflows to public; its
        // second pod follows it there.
        pod("batch-1", "1", "1Gi", 0, "app: batch", ""),
        pod("batch-2", "1", "1Gi", 0, "app: batch", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/secret-1"), Some("priv"));
    // 1 + 3 cpu of 4 cross the 90% buffer: secret-2 cannot go private and may not go public.
    let reason = reason_of(&sim, "default/secret-2");
    assert!(reason.contains("1 node(s) not in the private cloud"), "{reason}");
    assert_eq!(node_of(&sim, "default/web-1"), Some("priv"));
    assert_eq!(node_of(&sim, "default/batch-1"), Some("pub"), "overflow once private is full");
    assert_eq!(node_of(&sim, "default/batch-2"), Some("pub"), "the service stays where it started");

    // A service already running in public stays there even with room in private.
    let yaml = [
        node("priv", "64", "256Gi", 0, private, ""),
        node("pub", "64", "256Gi", 0, public, ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: old, namespace: default, labels: {app: shop}}\nspec:\n  nodeName: pub\n  containers: [{name: c, image: x}]\n---\n".to_string(),
        pod("shop-2", "1", "1Gi", 0, "app: shop", ""),
        pod("fresh", "1", "1Gi", 0, "app: fresh", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/shop-2"), Some("pub"));
    assert_eq!(node_of(&sim, "default/fresh"), Some("priv"));
}

#[test]
fn hot_nodes_are_rejected_and_cool_ones_preferred() {
    let yaml = [
        node("hot", "64", "256Gi", 0, "", "gpu-scheduler.io/temperature-celsius: \"95\""),
        node("warm", "64", "256Gi", 0, "", "gpu-scheduler.io/temperature-celsius: \"80\""),
        node("cool", "64", "256Gi", 0, "", "gpu-scheduler.io/temperature-celsius: \"55\""),
        pod("p", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run_with(&yaml, &Configuration::default(), Some("default/p"));
    assert_eq!(node_of(&sim, "default/p"), Some("cool"));
    let e = sim.explanation().unwrap();
    let hot = e.nodes.iter().find(|n| n.node == "hot").unwrap();
    assert_eq!((hot.verdict.as_str(), hot.plugin.as_deref()), ("rejected", Some("Temperature")));
}

#[test]
fn ssd_wins_a_tie() {
    let yaml = [
        node("hdd", "16", "64Gi", 0, "disk-type: hdd", ""),
        node("ssd", "16", "64Gi", 0, "disk-type: ssd", ""),
        pod("p", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run_with(&yaml, &Configuration::default(), Some("default/p"));
    assert_eq!(node_of(&sim, "default/p"), Some("ssd"));
    // --explain shows each plugin's part: DiskType made the difference.
    let e = sim.explanation().unwrap();
    let score = |node: &str, plugin: &str| {
        let n = e.nodes.iter().find(|n| n.node == node).unwrap();
        n.scores.iter().find(|s| s.plugin == plugin).map(|s| s.weighted).unwrap()
    };
    assert!(score("ssd", "DiskType") > score("hdd", "DiskType"));
    let ssd = e.nodes.iter().find(|n| n.node == "ssd").unwrap();
    let plugins: Vec<&str> = ssd.scores.iter().map(|s| s.plugin.as_str()).collect();
    assert!(plugins.contains(&"ResourceHeadroom"), "{plugins:?}");
    for plugin in plugins.iter().filter(|p| **p != "DiskType") {
        assert_eq!(score("ssd", plugin), score("hdd", plugin), "{plugin}");
    }
    // Rules with no fact on any node skip the pod: no column.
    for absent in ["NodeHealth", "Temperature", "GpuNodeAvoidance", "GpuModel"] {
        assert!(!plugins.contains(&absent), "{absent} in {plugins:?}");
    }
}

#[test]
fn canary_profile_takes_its_pods_to_canary_nodes_only() {
    let cfg = config::parse(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n\
         - schedulerName: gpu-scheduler\n  podSelector:\n    matchLabels: {scheduler-group: experimental}\n  nodeSelector:\n    matchLabels: {scheduler-canary: enabled}\n\
         - schedulerName: gpu-scheduler\n  nodeSelector:\n    matchExpressions:\n    - {key: scheduler-canary, operator: DoesNotExist}\n",
    )
    .unwrap();
    let yaml = [
        node("canary", "8", "32Gi", 0, "scheduler-canary: enabled", ""),
        node("stable", "64", "256Gi", 0, "", ""),
        pod("exp-1", "1", "1Gi", 0, "scheduler-group: experimental", ""),
        pod("exp-2", "1", "1Gi", 0, "scheduler-group: experimental", ""),
        pod("normal-1", "1", "1Gi", 0, "", ""),
        pod("big-exp", "16", "1Gi", 0, "scheduler-group: experimental", ""),
    ]
    .concat();
    let sim = run_with(&yaml, &cfg, None);
    assert_eq!(node_of(&sim, "default/exp-1"), Some("canary"));
    assert_eq!(node_of(&sim, "default/exp-2"), Some("canary"));
    assert_eq!(node_of(&sim, "default/normal-1"), Some("stable"));
    let reason = reason_of(&sim, "default/big-exp");
    assert!(reason.contains("1 node(s) outside this profile's node pool"), "{reason}");
}

#[test]
fn malformed_annotations_are_ignored_with_a_warning() {
    let yaml = [
        node(
            "odd",
            "64",
            "256Gi",
            0,
            "gpu-scheduler.io/cloud: moon",
            "gpu-scheduler.io/temperature-celsius: hot, gpu-scheduler.io/spot-expiry: tomorrow",
        ),
        pod("p", "1", "1Gi", 0, "", ""),
    ]
    .concat();
    let sim = run(&yaml);
    assert_eq!(node_of(&sim, "default/p"), Some("odd"), "the node is used as if it had no such facts");
    assert_eq!(sim.warnings.len(), 3, "{:?}", sim.warnings);
    assert!(sim.warnings.iter().any(|w| w.contains("temperature-celsius \"hot\": not a number")), "{:?}", sim.warnings);
}

/// A PyTorchJob-shaped gang: a Job whose template carries the pod-group
/// label expands into members of the PodGroup read from the manifests,
/// placed together within one zone (the group's topology key), with the
/// gang's decision in the explanation.
#[test]
fn a_job_with_the_pod_group_label_is_placed_as_a_gang() {
    let job = |name: &str, group: &str, n: u32| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  parallelism: {n}\n  completions: {n}\n  template:\n    metadata:\n      labels: {{scheduling.x-k8s.io/pod-group: {group}, gpu-scheduler.io/workload: training}}\n    spec:\n      schedulerName: gpu-scheduler\n      restartPolicy: Never\n      tolerations:\n      - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}\n      containers:\n      - name: worker\n        image: trainer\n        resources:\n          limits: {{cpu: \"8\", memory: 64Gi, nvidia.com/gpu: \"8\"}}\n---\n"
        )
    };
    let group = |name: &str, min: u32| {
        format!(
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: {name}\n  namespace: ml\n  annotations: {{gpu-scheduler.io/topology-key: topology.kubernetes.io/zone}}\nspec: {{minMember: {min}}}\n---\n"
        )
    };
    let mut yaml = String::new();
    for (zone, n) in [("a", 3), ("b", 4)] {
        for i in 1..=n {
            yaml.push_str(&node(
                &format!("{zone}{i}"),
                "96",
                "1024Gi",
                8,
                &format!("topology.kubernetes.io/zone: {zone}, gpu-model: a100"),
                "",
            ));
        }
    }
    yaml.push_str(&group("pretrain", 4));
    yaml.push_str(&job("pretrain", "pretrain", 4));
    // A second gang of 4 finds no zone with 4 free nodes left: none of it runs.
    yaml.push_str(&group("finetune", 4));
    yaml.push_str(&job("finetune", "finetune", 4));
    // Pod names come from the Job; the first run finds one to explain.
    let first = run(&yaml);
    let member = first.placements.iter().find(|p| p.pod.starts_with("ml/finetune-")).map(|p| p.pod.clone());
    let member = member.unwrap_or_else(|| panic!("no finetune pod"));
    let sim = run_with(&yaml, &Configuration::default(), Some(&member));
    let nodes = |job: &str| -> Vec<Option<String>> {
        sim.placements.iter().filter(|p| p.pod.starts_with(&format!("ml/{job}-"))).map(|p| p.node.clone()).collect()
    };
    let pretrain = nodes("pretrain");
    assert_eq!(pretrain.len(), 4);
    assert!(pretrain.iter().all(|n| n.as_deref().is_some_and(|n| n.starts_with('b'))), "{pretrain:?}");
    assert_eq!(nodes("finetune"), vec![None; 4]);
    let reason = reason_of(&sim, &member);
    assert_eq!(
        reason,
        "0/7 nodes are available for gang ml/finetune: no topology.kubernetes.io/zone domain has 32 free nvidia.com/gpu"
    );
    let gang = sim.explanation().and_then(|e| e.gang).unwrap_or_else(|| panic!("no gang in the explanation"));
    assert_eq!((gang.group.as_str(), gang.min_member, gang.members.len()), ("ml/finetune", 4, 4));
}

/// Preemption end to end: a high-priority GPU pod evicts the fewest,
/// least important pods, honours a PodDisruptionBudget when another node
/// avoids it, and lands once they are gone; `preemptionPolicy: Never`
/// waits instead, with kube's message.
#[test]
fn a_high_priority_pod_preempts_lower_ones() {
    let bound = |name: &str, node_name: &str, priority: i32, labels: &str| {
        pod(name, "4", "16Gi", 8, labels, &format!("  nodeName: {node_name}\n  priority: {priority}\n"))
    };
    let budget = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: serving, namespace: default}\nspec:\n  minAvailable: 1\n  selector: {matchLabels: {app: serving}}\n---\n";
    let cluster = [
        node("g1", "32", "256Gi", 8, "gpu-model: a100", ""),
        node("g2", "32", "256Gi", 8, "gpu-model: a100", ""),
        bound("serving", "g1", 0, "app: serving"),
        bound("batch", "g2", 0, "app: batch"),
        budget.to_string(),
    ]
    .concat();
    let urgent = pod("urgent", "4", "16Gi", 8, "", "  priority: 1000\n");
    let sim = run(&format!("{cluster}{urgent}"));
    assert_eq!(node_of(&sim, "default/urgent"), Some("g2"), "the node whose victim violates no budget");
    let preempted: Vec<(&str, &str, &str)> =
        sim.preempted.iter().map(|p| (p.pod.as_str(), p.node.as_str(), p.by.as_str())).collect();
    assert_eq!(preempted, [("default/batch", "g2", "default/urgent")]);

    let meek = pod("meek", "4", "16Gi", 8, "", "  priority: 1000\n  preemptionPolicy: Never\n");
    let sim = run(&format!("{cluster}{meek}"));
    assert!(sim.preempted.is_empty());
    assert_eq!(
        reason_of(&sim, "default/meek"),
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never."
    );

    let peer = pod("peer", "4", "16Gi", 8, "", "");
    let sim = run(&format!("{cluster}{peer}"));
    assert_eq!(
        reason_of(&sim, "default/peer"),
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
}
