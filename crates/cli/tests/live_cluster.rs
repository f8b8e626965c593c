//! `gpu-scheduler run` and `snapshot` against a real control plane
//! (etcd, kube-apiserver and kube-controller-manager v1.36.3 built by
//! tools/k8s; DESIGN.md §6), with kubectl from the same build as the
//! client, and KWOK playing the kubelets (pods run; deleted ones go at
//! the end of their grace period). The scenarios of one cluster run side
//! by side: each has its own namespace, schedulerName and node pool (the
//! profile's nodeSelector), so they cannot see each other's pods.

mod support;

use std::collections::HashMap;

use support::cluster::{Cluster, config_yaml, node_yaml, pod_yaml, s, wait_for};

/// Creates `namespace` and the nodes (labelled `pool=POOL`).
fn setup(c: &Cluster, namespace: &str, nodes: &str) {
    c.kubectl(&["create", "namespace", namespace]);
    c.kubectl_in(&["create", "-f", "-"], nodes);
}

fn all_bound(c: &Cluster, namespace: &str, expected: usize) -> Option<HashMap<String, String>> {
    let p = c.placements(namespace);
    (p.len() == expected && p.iter().all(|(_, n)| !n.is_empty())).then(|| p.into_iter().collect())
}

type Scenario = fn(&Cluster);

#[test]
fn scheduling_a_live_cluster() {
    let c = Cluster::up_with_lifecycles("main");
    let scenarios: [(&str, Scenario); 6] = [
        ("policy placement", policy_placement),
        ("CEL rules from the config", cel_rules),
        ("snapshot and simulate agree with the live run", snapshot_agrees_with_live_run),
        ("a 1,000-pod burst", burst_of_a_thousand),
        ("killed and restarted", killed_and_restarted),
        ("GPU devices survive a restart", gpu_devices_survive_a_restart),
    ];
    let failed: Vec<&str> = std::thread::scope(|scope| {
        let handles: Vec<_> = scenarios.iter().map(|(name, f)| (*name, scope.spawn(|| f(&c)))).collect();
        handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect()
    });
    assert!(failed.is_empty(), "failed scenarios: {failed:?} (their panics are printed above)");
}

/// The default policy on a live cluster: GPU work on its model, web pods
/// off GPU nodes and off nodes in maintenance or too hot; an impossible
/// pod reported; default-scheduler's pods left alone.
fn policy_placement(c: &Cluster) {
    let pool = [("pool", "policy")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        pool.iter().chain(extra.iter()).copied().collect()
    };
    let nodes = [
        node_yaml(
            "policy-a100",
            &with(&[("gpu-model", "a100"), ("topology.kubernetes.io/zone", "z1")]),
            32,
            256,
            8,
            &[],
        ),
        node_yaml("policy-t4", &with(&[("gpu-model", "t4"), ("topology.kubernetes.io/zone", "z2")]), 16, 64, 4, &[]),
        node_yaml("policy-cpu", &with(&[("topology.kubernetes.io/zone", "z1"), ("disk-type", "ssd")]), 8, 32, 0, &[]),
        node_yaml(
            "policy-maint",
            &with(&[("topology.kubernetes.io/zone", "z2"), ("maintenance-mode", "true")]),
            64,
            256,
            0,
            &[],
        ),
        node_yaml(
            "policy-hot",
            &with(&[("topology.kubernetes.io/zone", "z3")]),
            64,
            256,
            0,
            &[("gpu-scheduler.io/temperature-celsius", "95")],
        ),
    ]
    .concat();
    setup(c, "policy", &nodes);
    let config = c.file("policy-config.yaml", &config_yaml("gs-policy", "policy", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("policy-scheduler.log"));
    let pods = [
        pod_yaml("train", "gs-policy", &[("gpu-scheduler.io/workload", "training")], "cpu: 1", 2),
        pod_yaml("infer", "gs-policy", &[("gpu-scheduler.io/workload", "inference")], "cpu: 1", 1),
        pod_yaml("web", "gs-policy", &[("app", "web")], "cpu: 500m, memory: 1Gi", 0),
        pod_yaml("impossible", "gs-policy", &[], "cpu: 1", 16),
        pod_yaml("doomed", "gs-policy", &[], "cpu: 1", 16),
        pod_yaml("other", "default-scheduler", &[], "cpu: 1", 0),
    ]
    .concat();
    c.kubectl_in(&["create", "-n", "policy", "-f", "-"], &pods);

    let placed = wait_for(60, "train, infer and web bound", || {
        let p: HashMap<String, String> = c.placements("policy").into_iter().collect();
        ["train", "infer", "web"].iter().all(|n| p.get(*n).is_some_and(|v| !v.is_empty())).then_some(p)
    });
    assert_eq!(placed["train"], "policy-a100");
    assert_eq!(placed["infer"], "policy-t4");
    assert_eq!(placed["web"], "policy-cpu");

    // The impossible pod: an Event and the condition, as kubectl shows them.
    let describe = wait_for(60, "FailedScheduling on the impossible pod", || {
        let d = c.kubectl(&["describe", "pod", "impossible", "-n", "policy"]);
        d.contains("FailedScheduling").then_some(d)
    });
    assert!(describe.contains("Insufficient nvidia.com/gpu"), "{describe}");
    let pod = c.get_json(&["pod", "impossible", "-n", "policy"]);
    let cond = pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled").cloned())
        .unwrap_or_else(|| panic!("no PodScheduled condition: {pod}"));
    assert_eq!((s(&cond["status"]).as_str(), s(&cond["reason"]).as_str()), ("False", "Unschedulable"));
    assert!(s(&cond["message"]).contains("Insufficient nvidia.com/gpu"), "{cond}");
    assert_eq!(s(&pod["spec"]["nodeName"]), "");

    // A pending pod deleted leaves the queue: at the end only `impossible`
    // waits.
    wait_for(60, "FailedScheduling on the doomed pod", || {
        c.kubectl(&["describe", "pod", "doomed", "-n", "policy"]).contains("FailedScheduling").then_some(())
    });
    let uid = s(&c.get_json(&["pod", "doomed", "-n", "policy"])["metadata"]["uid"]);
    c.kubectl(&["delete", "pod", "doomed", "-n", "policy", "--wait=false"]);

    // default-scheduler's pod: not ours, untouched.
    let other = c.get_json(&["pod", "other", "-n", "policy"]);
    assert_eq!(s(&other["spec"]["nodeName"]), "", "{other}");
    assert!(other["status"]["conditions"].is_null(), "{other}");
    assert!(!c.scheduled_events("policy").contains_key("other"));

    wait_for(60, "the scheduler seeing doomed deleted", || {
        sched.log_text().contains(&format!("pending pod gone uid={uid}")).then_some(())
    });
    let status = sched.terminate();
    let log = sched.log_text();
    assert!(status.success(), "exit status {status:?} after SIGTERM:\n{log}");
    assert!(log.contains("waiting=1 "), "only the impossible pod should wait at the end:\n{log}");
}

/// A team's own rules as CEL in the config: a filter keeps each team's
/// pods on its nodes, a score prefers rack r1; a pod of a team with no
/// nodes is refused with the rule's message.
fn cel_rules(c: &Cluster) {
    let nodes = [
        node_yaml("cel-r1", &[("pool", "cel"), ("team", "ml"), ("rack", "r1")], 8, 32, 0, &[]),
        node_yaml("cel-r2", &[("pool", "cel"), ("team", "ml"), ("rack", "r2"), ("disk-type", "ssd")], 8, 32, 0, &[]),
        node_yaml("cel-web", &[("pool", "cel"), ("team", "web"), ("rack", "r1")], 8, 32, 0, &[]),
    ]
    .concat();
    setup(c, "cel", &nodes);
    let rules = "  plugins:\n    multiPoint:\n      enabled:\n      - {name: CelRules, weight: 5}\n  pluginConfig:\n  - name: CelRules\n    args:\n      rules:\n      - name: own-team\n        filter: \"node.labels[?'team'].orValue('') == pod.labels[?'team'].orValue('')\"\n        message: node(s) belong to another team\n      - name: rack-r1\n        score: \"node.labels[?'rack'].orValue('') == 'r1' ? 100 : 0\"\n";
    let config = c.file("cel-config.yaml", &(config_yaml("gs-cel", "cel", 50, 100) + rules));
    let mut sched = c.start_scheduler(&config, &c.dir.join("cel-scheduler.log"));
    let pods = [
        pod_yaml("ml", "gs-cel", &[("team", "ml")], "cpu: 1", 0),
        pod_yaml("web", "gs-cel", &[("team", "web")], "cpu: 1", 0),
        pod_yaml("ops", "gs-cel", &[("team", "ops")], "cpu: 1", 0),
    ]
    .concat();
    c.kubectl_in(&["create", "-n", "cel", "-f", "-"], &pods);
    let placed = wait_for(60, "ml and web bound", || {
        let p: HashMap<String, String> = c.placements("cel").into_iter().collect();
        ["ml", "web"].iter().all(|n| p.get(*n).is_some_and(|v| !v.is_empty())).then_some(p)
    });
    // cel-r2 has an SSD (DiskType's bonus) but the rule's r1 weighs more.
    assert_eq!(placed["ml"], "cel-r1");
    assert_eq!(placed["web"], "cel-web");
    let describe = wait_for(60, "FailedScheduling on ops", || {
        let d = c.kubectl(&["describe", "pod", "ops", "-n", "cel"]);
        d.contains("FailedScheduling").then_some(d)
    });
    // The other scenarios' nodes are counted too, outside this pool.
    assert!(describe.contains(" 3 node(s) belong to another team."), "{describe}");
    let status = sched.terminate();
    assert!(status.success(), "exit status {status:?}:\n{}", sched.log_text());
}

/// What-if on a real cluster: the snapshot's simulation places a pending
/// pod where the live scheduler then puts it.
fn snapshot_agrees_with_live_run(c: &Cluster) {
    let pool = [("pool", "whatif")];
    // Different sizes give different headroom scores: no ties to break.
    let nodes = [
        node_yaml("whatif-small", &pool, 4, 16, 0, &[]),
        node_yaml("whatif-medium", &pool, 16, 64, 0, &[]),
        node_yaml("whatif-large", &pool, 12, 96, 0, &[]),
    ]
    .concat();
    setup(c, "whatif", &nodes);
    let pods = pod_yaml("p", "gs-whatif", &[("app", "api")], "cpu: 2, memory: 4Gi", 0);
    c.kubectl_in(&["create", "-n", "whatif", "-f", "-"], &pods);
    let config = c.file("whatif-config.yaml", &config_yaml("gs-whatif", "whatif", 50, 100));

    let report = c.simulate_snapshot(&config, "whatif-snapshot.yaml");
    let simulated = report["placements"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["pod"] == "whatif/p"))
        .map(|p| s(&p["node"]))
        .unwrap_or_else(|| panic!("whatif/p not in the simulation: {report}"));
    assert!(simulated.starts_with("whatif-"), "simulated on {simulated:?}");

    let log = c.dir.join("whatif-scheduler.log");
    let mut sched = c.start_scheduler_as(&c.kubeconfig, &config, "whatif", &log, &["--enable-explain-endpoint"]);
    let live = wait_for(60, "whatif/p bound", || all_bound(c, "whatif", 1));
    assert_eq!(live["p"], simulated, "live run and simulation of the snapshot disagree");

    // `gpu-scheduler explain` shows the live decision, node by node.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(["explain", "whatif/p", "--output", "json", "--address", &sched.http_address()])
        .output()
        .unwrap_or_else(|e| panic!("running explain: {e}"));
    assert!(out.status.success(), "explain failed: {}", String::from_utf8_lossy(&out.stderr));
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(s(&e["node"]), simulated, "{e}");
    let feasible: Vec<String> = e["nodes"]
        .as_array()
        .map(|ns| ns.iter().filter(|n| n["verdict"] != "rejected").map(|n| s(&n["node"])).collect())
        .unwrap_or_default();
    assert_eq!(feasible.len(), 3, "the three whatif nodes should be feasible: {e}");
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(["explain", "whatif/p", "--address", &sched.http_address()])
        .output()
        .unwrap_or_else(|e| panic!("running explain: {e}"));
    assert!(String::from_utf8_lossy(&table.stdout).contains("ResourceHeadroom"), "{table:?}");
    assert!(sched.terminate().success());
}

/// 1,000 pods created at once are all bound, each exactly once.
fn burst_of_a_thousand(c: &Cluster) {
    let pool = [("pool", "burst")];
    let nodes: String = (0..10).map(|i| node_yaml(&format!("burst-{i}"), &pool, 32, 128, 0, &[])).collect();
    setup(c, "burst", &nodes);
    let config = c.file("burst-config.yaml", &config_yaml("gs-burst", "burst", 500, 1000));
    let mut sched = c.start_scheduler(&config, &c.dir.join("burst-scheduler.log"));
    let pods: String =
        (0..1000).map(|i| pod_yaml(&format!("p{i:04}"), "gs-burst", &[("app", "burst")], "cpu: 100m", 0)).collect();
    c.kubectl_in(&["create", "-n", "burst", "-f", "-"], &pods);
    let placed = wait_for(300, "1,000 pods bound", || all_bound(c, "burst", 1000));
    // 110 pods fit a node: the burst spreads over at least ten nodes' worth.
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for n in placed.values() {
        *per_node.entry(n).or_default() += 1;
    }
    assert!(per_node.values().all(|&n| n <= 110), "{per_node:?}");
    let events = wait_for(60, "a Scheduled Event for every pod", || {
        let e = c.scheduled_events("burst");
        (e.len() == 1000).then_some(e)
    });
    let twice: Vec<_> = events.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");
    assert!(sched.terminate().success());
    let log = sched.log_text();
    assert!(!log.contains("binding failed"), "{log}");
}

/// A scheduler killed mid-burst and started again binds the rest; no pod
/// is lost or bound twice.
fn killed_and_restarted(c: &Cluster) {
    let pool = [("pool", "restart")];
    let nodes: String = (0..5).map(|i| node_yaml(&format!("restart-{i}"), &pool, 32, 128, 0, &[])).collect();
    setup(c, "restart", &nodes);
    // A low rate limit keeps the burst going long enough to interrupt.
    let config = c.file("restart-config.yaml", &config_yaml("gs-restart", "restart", 20, 20));
    let pods: String =
        (0..300).map(|i| pod_yaml(&format!("p{i:03}"), "gs-restart", &[("app", "restart")], "cpu: 100m", 0)).collect();
    c.kubectl_in(&["create", "-n", "restart", "-f", "-"], &pods);
    let mut first = c.start_scheduler(&config, &c.dir.join("restart-scheduler-1.log"));
    wait_for(120, "some pods bound by the first scheduler", || {
        let n = c.bound_count("restart");
        (n >= 20).then_some(())
    });
    first.kill();
    let bound_before = c.bound_count("restart");
    assert!(bound_before < 300, "the burst finished before the kill; nothing to resume");

    let mut second = c.start_scheduler(&config, &c.dir.join("restart-scheduler-2.log"));
    wait_for(300, "all 300 pods bound after the restart", || all_bound(c, "restart", 300));
    assert!(second.terminate().success());
    let twice = c.scheduled_twice("restart");
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");
    let log = second.log_text();
    assert!(!log.contains("binding failed"), "the restarted scheduler re-bound a pod:\n{log}");
}

/// The GPU devices a pod gets reach it through the Binding's annotations
/// (the API server copies them onto the pod), and a restarted scheduler
/// reads them back: a whole GPU freed before the restart is given again,
/// never the device a share still holds.
fn gpu_devices_survive_a_restart(c: &Cluster) {
    let pool = [("pool", "devices")];
    setup(c, "devices", &node_yaml("devices-0", &pool, 32, 128, 2, &[]));
    let config = c.file("devices-config.yaml", &config_yaml("gs-devices", "devices", 50, 100));
    let pod = |name: &str, annotations: &str, gpus: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  schedulerName: gs-devices\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources: {{requests: {{cpu: 100m{gpus}}}, limits: {{cpu: 100m{gpus}}}}}\n"
        )
    };
    let whole = |name: &str| pod(name, "", ", nvidia.com/gpu: \"1\"");
    let half = |name: &str| pod(name, "gpu-scheduler.io/gpu-milli: \"500\"", "");
    let index = |name: &str| {
        wait_for(120, &format!("{name} bound with its devices"), || {
            let p = c.get_json(&["pod", "-n", "devices", name]);
            let i = s(&p["metadata"]["annotations"]["gpu-scheduler.io/gpu-index"]);
            (!s(&p["spec"]["nodeName"]).is_empty() && !i.is_empty()).then_some(i)
        })
    };

    let mut first = c.start_scheduler(&config, &c.dir.join("devices-scheduler-1.log"));
    c.kubectl_in(&["create", "-n", "devices", "-f", "-"], &whole("w0"));
    assert_eq!(index("w0"), "0", "a whole GPU: the first free device");
    c.kubectl_in(&["create", "-n", "devices", "-f", "-"], &half("s1"));
    assert_eq!(index("s1"), "1", "a share: the device left");
    first.kill();

    // Device 0 comes free while no scheduler runs. Reading the pods alone,
    // a share would be put on the lowest free device, 0; its annotation says 1.
    // KWOK stops it (a second's grace) and removes it, as a kubelet would.
    c.kubectl(&["delete", "pod", "-n", "devices", "w0", "--grace-period=1", "--wait=true"]);
    let mut second = c.start_scheduler(&config, &c.dir.join("devices-scheduler-2.log"));
    c.kubectl_in(&["create", "-n", "devices", "-f", "-"], &whole("w2"));
    assert_eq!(index("w2"), "0", "the whole GPU goes to the freed device, not to the share's");
    c.kubectl_in(&["create", "-n", "devices", "-f", "-"], &half("s2"));
    assert_eq!(index("s2"), "1", "the second half beside the first");
    assert!(second.terminate().success());
}

/// kube-apiserver restarted in the middle of a burst: the watches relist,
/// every pod is bound afterwards, none twice.
#[test]
fn surviving_an_api_server_restart() {
    let c = Cluster::up("apiserver-restart");
    let pool = [("pool", "p")];
    let nodes: String = (0..5).map(|i| node_yaml(&format!("n{i}"), &pool, 32, 128, 0, &[])).collect();
    setup(&c, "burst", &nodes);
    let config = c.file("config.yaml", &config_yaml("gs", "p", 20, 20));
    let pods: String = (0..300).map(|i| pod_yaml(&format!("p{i:03}"), "gs", &[("app", "a")], "cpu: 100m", 0)).collect();
    c.kubectl_in(&["create", "-n", "burst", "-f", "-"], &pods);
    let mut sched = c.start_scheduler(&config, &c.dir.join("scheduler.log"));
    wait_for(120, "some pods bound", || {
        let n = c.bound_count("burst");
        (n >= 20).then_some(())
    });
    c.restart_apiserver();
    let bound_at_restart = c.bound_count("burst");
    assert!(bound_at_restart < 300, "the burst finished before the restart");
    // More pods after the restart: the watches must have come back.
    let more: String =
        (300..350).map(|i| pod_yaml(&format!("p{i:03}"), "gs", &[("app", "a")], "cpu: 100m", 0)).collect();
    c.kubectl_in(&["create", "-n", "burst", "-f", "-"], &more);
    wait_for(300, "all 350 pods bound after the restart", || all_bound(&c, "burst", 350));
    let status = sched.terminate();
    assert!(status.success(), "{status:?}:\n{}", sched.log_text());
    let twice = c.scheduled_twice("burst");
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");
}
