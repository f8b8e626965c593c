//! Hostile objects through a real API server (DESIGN.md §6): objects as
//! large and as odd as the API server accepts. A node with 3,000 labels,
//! one with 500 taints, one with 200 KiB of annotations and unreadable
//! facts in non-ASCII digits and words; a pod with 10,000 tolerations, one
//! with 200 KiB of annotations, one selecting the 3,000th label, one with
//! the longest name allowed. Every pod is placed where its constraints
//! say, the unreadable facts are reported, and the scheduler keeps
//! running. What each decision costs is the `hostile` criterion
//! benchmark's (crates/sim/benches/hostile.rs), not a timed assertion.

mod support;

use std::collections::HashMap;
use std::fmt::Write as _;

use support::cluster::{Cluster, config_yaml, items, node_yaml, pod_yaml, s, wait_for};

/// YAML for `n` entries `PREFIX-i: VALUE-i` of a flow map.
fn many(prefix: &str, value: &str, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let _ = write!(out, "{prefix}-{i}: \"{value}-{i}\", ");
    }
    out
}

#[test]
fn hostile_objects_through_the_api() {
    let c = Cluster::up("hostile");
    let (pool, name) = ("hostile", "gs-hostile");
    c.kubectl(&["create", "namespace", pool]);
    let big = "ノード温度θ🚀 ".repeat(200 << 10 >> 5); // about 200 KiB
    let labels = node_yaml("hostile-labels", &[("pool", pool)], 8, 32, 0, &[])
        .replace("labels: {", &format!("labels: {{{}", many("example.com/l", "v", 3000)));
    let mut taints = String::from("spec:\n  taints:\n");
    for i in 0..500 {
        let _ = writeln!(taints, "  - {{key: example.com/t-{i}, value: x, effect: PreferNoSchedule}}");
    }
    let tainted = node_yaml("hostile-taints", &[("pool", pool)], 8, 32, 0, &[])
        .replace("status:\n", &format!("{taints}status:\n"));
    let annotated = node_yaml(
        "hostile-annotations",
        &[("pool", pool)],
        8,
        32,
        0,
        &[
            ("example.com/blob", &big),
            // Full-width digits and a word: facts that cannot be read.
            ("gpu-scheduler.io/temperature-celsius", "９５"),
            ("gpu-scheduler.io/spot-expiry", "明日"),
        ],
    );
    c.kubectl_in(&["create", "-f", "-"], &[labels, tainted, annotated].concat());

    let mut tolerations = String::from("  tolerations:\n");
    for i in 0..10_000 {
        let _ = writeln!(tolerations, "  - {{key: example.com/other-{i}, operator: Exists}}");
    }
    let tolerant = pod_yaml("tolerant", name, &[], "cpu: 100m", 0)
        .replace("  containers:\n", &format!("{tolerations}  containers:\n"));
    let blob = pod_yaml("annotated", name, &[], "cpu: 100m", 0)
        .replace("metadata:\n", &format!("metadata:\n  annotations: {{example.com/blob: \"{big}\"}}\n"));
    let selective = pod_yaml("selective", name, &[], "cpu: 100m", 0)
        .replace("  containers:\n", "  nodeSelector: {example.com/l-2999: v-2999}\n  containers:\n");
    // A DNS subdomain: 253 characters at most.
    let long_name = format!("{}.{}", "a".repeat(63), ["b".repeat(63), "c".repeat(63), "d".repeat(61)].join("."));
    let long = pod_yaml(&long_name, name, &[], "cpu: 100m", 0);
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &[tolerant, blob, selective, long].concat());

    let config = c.file("hostile-config.yaml", &config_yaml(name, pool, 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("hostile-scheduler.log"));
    let placed: HashMap<String, String> = wait_for(120, "the four pods bound", || {
        let p = c.placements(pool);
        (p.len() == 4 && p.iter().all(|(_, n)| !n.is_empty())).then(|| p.into_iter().collect())
    });
    assert_eq!(placed["selective"], "hostile-labels", "{placed:?}");
    assert!(placed.values().all(|n| n.starts_with("hostile-")), "{placed:?}");
    // The unreadable facts: one Warning Event each on the node.
    let warned = wait_for(60, "the unreadable facts reported", || {
        let list = c.get_json(&["events.v1.events.k8s.io", "-A"]);
        let notes: Vec<String> = items(&list)
            .iter()
            .filter(|e| e["regarding"]["name"] == "hostile-annotations" && e["type"] == "Warning")
            .map(|e| s(&e["note"]))
            .collect();
        (notes.len() >= 2).then_some(notes)
    });
    assert!(warned.iter().any(|n| n.contains("temperature-celsius") && n.contains("９５")), "{warned:?}");
    assert!(warned.iter().any(|n| n.contains("spot-expiry") && n.contains("明日")), "{warned:?}");
    let status = sched.terminate();
    assert!(status.success(), "{status:?}:\n{}", sched.log_text());
}
