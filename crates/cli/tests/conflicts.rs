//! Conflicts on a real control plane (DESIGN.md §6): what happens when
//! our decisions race with the world. kube-scheduler started by mistake
//! with our schedulerName; a node deleted while pods are assumed on it; a
//! pod deleted and re-created under the same name while its binding is in
//! flight. In each, no pod is bound twice, the bindings that lose are
//! forgotten, and afterwards the scheduler's cache is the API server's
//! state (a probe pod decided live and simulated on a snapshot sees every
//! node the same). The scenarios share one cluster, each in its own
//! namespace, schedulerName and node pool. (A binding whose bound view
//! never arrives is the engine's assumed-pod expiry, tested in
//! `crates/plugins/tests/live_events.rs`.)

mod support;

use std::collections::HashMap;
use std::path::PathBuf;

use support::cluster::{Cluster, Scheduler, config_yaml, items, node_yaml, pod_yaml, s, wait_for};
use support::reliability::{cache_disagreements, start_kube_scheduler};

type Scenario = fn(&Cluster);

#[test]
fn conflicting_with_the_world() {
    let c = Cluster::up("conflicts");
    let scenarios: [(&str, Scenario); 3] = [
        ("kube-scheduler with our schedulerName", rival_scheduler),
        ("a node deleted under assumed pods", node_deleted_under_assumed_pods),
        ("a pod re-created while its binding is in flight", pod_recreated_during_binding),
    ];
    let failed: Vec<&str> = std::thread::scope(|scope| {
        let handles: Vec<_> = scenarios.iter().map(|(name, f)| (*name, scope.spawn(|| f(&c)))).collect();
        handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect()
    });
    assert!(failed.is_empty(), "failed scenarios: {failed:?} (their panics are printed above)");
}

/// A namespace, `n` nodes `POOL-i` (`cpu` cores, 4 GiB per core)
/// labelled `pool=POOL`, and a config for `scheduler` on them at `qps`;
/// returns the config. Small nodes: one pod of 100m moves a node's raw
/// headroom score, which the cache check compares.
fn setup(c: &Cluster, pool: &str, n: usize, cpu: u32, scheduler: &str, qps: u32) -> PathBuf {
    c.kubectl(&["create", "namespace", pool]);
    let nodes: String =
        (0..n).map(|i| node_yaml(&format!("{pool}-{i}"), &[("pool", pool)], cpu, cpu * 4, 0, &[])).collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    c.file(&format!("{pool}-config.yaml"), &config_yaml(scheduler, pool, qps, qps))
}

fn start(c: &Cluster, config: &std::path::Path, name: &str) -> Scheduler {
    c.start_scheduler_as(
        &c.kubeconfig,
        config,
        name,
        &c.dir.join(format!("{name}.log")),
        &["--enable-explain-endpoint"],
    )
}

/// Pods `PREFIX0000..` for `scheduler`, 100m cpu and 256 MiB each.
fn pods(prefix: &str, scheduler: &str, range: std::ops::Range<usize>) -> String {
    range
        .map(|i| pod_yaml(&format!("{prefix}{i:04}"), scheduler, &[("app", prefix)], "cpu: 100m, memory: 256Mi", 0))
        .collect()
}

fn all_bound(c: &Cluster, namespace: &str, expected: usize) -> Option<HashMap<String, String>> {
    let p = c.placements(namespace);
    (p.len() == expected && p.iter().all(|(_, n)| !n.is_empty())).then(|| p.into_iter().collect())
}

/// `Scheduled` Events by pod UID: a pod re-created under its name is
/// another pod.
fn scheduled_by_uid(c: &Cluster, namespace: &str) -> HashMap<String, u64> {
    let list = c.get_json(&["events.v1.events.k8s.io", "-n", namespace]);
    let mut counts = HashMap::new();
    for e in items(&list) {
        if e["reason"] == "Scheduled" {
            let n = e["series"]["count"].as_u64().unwrap_or(1);
            *counts.entry(s(&e["regarding"]["uid"])).or_insert(0) += n;
        }
    }
    counts
}

/// A metric of the scheduler's, by its full name with labels.
fn metric(sched: &Scheduler, name: &str) -> u64 {
    let (_, body) = sched.get("/metrics");
    let name = format!("{name} ");
    body.lines().find_map(|l| l.strip_prefix(&name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Waits until the scheduler has no binding in flight: its assumed pods
/// are all confirmed or forgotten, so its cache can be compared.
fn wait_idle(sched: &Scheduler) {
    wait_for(180, "the scheduler's bindings in flight to come back", || {
        (metric(sched, "gpu_scheduler_bindings_in_flight") == 0).then_some(())
    });
}

fn assert_cache_agrees(c: &Cluster, sched: &Scheduler, config: &std::path::Path, pool: &str, scheduler: &str) {
    let diff = cache_disagreements(c, sched, config, pool, scheduler, "cpu: 100m, memory: 256Mi");
    assert!(diff.is_empty(), "{pool}: the cache is not the API's state:\n{}", diff.join("\n"));
}

/// kube-scheduler, started by mistake with our schedulerName, races us
/// for 300 pods. Ours binds slowly (5 requests/s) so that it decides
/// pods kube-scheduler then binds first: those bindings get 409 and are
/// dropped. Every pod ends bound once, by one of the two, and our cache
/// holds what the API says, whoever bound it.
fn rival_scheduler(c: &Cluster) {
    let (pool, name) = ("rival", "gs-rival");
    let config = setup(c, pool, 5, 8, name, 5);
    let mut ours = start(c, &config, "rival-ours");
    let kube = start_kube_scheduler(c, name, pool, 50, &c.dir.join("rival-kube-scheduler.log"));
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &pods("p", name, 0..300));
    wait_for(300, "300 pods bound", || all_bound(c, pool, 300));
    wait_idle(&ours);
    let conflicts = metric(&ours, "gpu_scheduler_binding_errors_total{reason=\"conflict\"}");
    assert!(conflicts > 0, "no binding of ours lost the race: the test raced nothing");
    let by_uid = scheduled_by_uid(c, pool);
    let twice: Vec<_> = by_uid.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");
    eprintln!("rival: {conflicts} of our bindings lost to kube-scheduler with 409");
    // The cache check's probe pod must be decided by ours: a running
    // kube-scheduler could bind it first and leave no decision to compare.
    drop(kube);
    assert_cache_agrees(c, &ours, &config, pool, name);
    let log = ours.log_text();
    assert!(!log.contains("binding failed, retrying"), "a lost binding was retried:\n{log}");
    assert!(ours.terminate().success());
}

/// A node deleted while bindings to it wait behind the rate limit: the
/// assumed pods' bindings finish or fail, no pod created afterwards goes
/// to the deleted node, and the cache forgets the node.
fn node_deleted_under_assumed_pods(c: &Cluster) {
    let (pool, name) = ("nodedel", "gs-nodedel");
    let config = setup(c, pool, 2, 8, name, 4);
    let mut sched = start(c, &config, "nodedel");
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &pods("a", name, 0..40));
    wait_for(60, "a first binding", || (c.bound_count(pool) > 0).then_some(()));
    c.kubectl(&["delete", "node", "nodedel-0"]);
    let bound_at_delete = c.bound_count(pool);
    assert!(bound_at_delete < 40, "every binding was done before the node went: nothing was in flight");
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &pods("b", name, 0..20));
    let placed = wait_for(300, "60 pods bound", || all_bound(c, pool, 60));
    let late: Vec<_> = placed.iter().filter(|(p, n)| p.starts_with('b') && n.as_str() != "nodedel-1").collect();
    assert!(late.is_empty(), "pods created after the deletion went elsewhere than nodedel-1: {late:?}");
    let twice: Vec<_> = scheduled_by_uid(c, pool).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");
    let on_deleted = placed.values().filter(|n| n.as_str() == "nodedel-0").count();
    eprintln!("nodedel: {bound_at_delete} bound before the deletion, {on_deleted} on the deleted node in all");
    wait_idle(&sched);
    assert_cache_agrees(c, &sched, &config, pool, name);
    assert!(sched.terminate().success());
}

/// A pod deleted and re-created under the same name (a new UID) while
/// the binding decided for the old one waits: that binding carries the
/// old UID, the API server refuses it (404 or 409), it is dropped, and the
/// new pod is decided and bound once.
fn pod_recreated_during_binding(c: &Cluster) {
    let (pool, name) = ("recreate", "gs-recreate");
    let config = setup(c, pool, 3, 4, name, 2);
    // Filler pods first: at 2 requests/s their bindings hold the victim's
    // back for seconds after it is decided.
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &pods("f", name, 0..20));
    let victim = pod_yaml("victim", name, &[("app", "victim")], "cpu: 100m, memory: 256Mi", 0);
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &victim);
    let old_uid = s(&c.get_json(&["pod", "victim", "-n", pool])["metadata"]["uid"]);
    let mut sched = start(c, &config, "recreate");
    wait_for(60, "the victim decided", || {
        let (status, _) = sched.get(&format!("/debug/explain/{pool}/victim"));
        (status == 200).then_some(())
    });
    let at_recreation = c.get_json(&["pod", "victim", "-n", pool]);
    assert_eq!(s(&at_recreation["spec"]["nodeName"]), "", "the victim was bound before it could be re-created");
    c.kubectl(&["delete", "pod", "victim", "-n", pool, "--wait=true"]);
    c.kubectl_in(&["create", "-n", pool, "-f", "-"], &victim);
    let new_uid = s(&c.get_json(&["pod", "victim", "-n", pool])["metadata"]["uid"]);
    assert_ne!(old_uid, new_uid);
    wait_for(300, "21 pods bound", || all_bound(c, pool, 21));
    wait_for(60, "the old victim's binding dropped", || {
        sched.log_text().lines().any(|l| l.contains("binding dropped") && l.contains("recreate/victim")).then_some(())
    });
    let events = wait_for(60, "a Scheduled Event for the new victim", || {
        let e = scheduled_by_uid(c, pool);
        e.contains_key(&new_uid).then_some(e)
    });
    assert_eq!(events.get(&new_uid), Some(&1), "{events:?}");
    assert_eq!(events.get(&old_uid), None, "the deleted pod was reported scheduled: {events:?}");
    wait_idle(&sched);
    assert_cache_agrees(c, &sched, &config, pool, name);
    assert!(sched.terminate().success());
}
