//! The starvation guard through the `Scheduler`: an 8-GPU pod that keeps
//! losing freed GPUs to a stream of 1-GPU pods gets a node held after
//! `starvationGuard.after`, and is placed as soon as that node drains.

mod support;

use std::collections::VecDeque;

use engine::config::Configuration;
use engine::scheduler::capability::StarvationGuard;
use engine::testing::{node, pod};
use engine::time::{MINUTE, SECOND};
use support::{Cluster, GPU};

/// Two 8-GPU nodes full of 1-GPU pods; an 8-GPU pod arrives; every minute
/// one small pod finishes on each node and two new ones arrive. Returns
/// when the big pod was placed (ms), if within an hour, and the cluster.
fn stream(guard: bool) -> (Option<u64>, Cluster) {
    let mut cfg = Configuration::default();
    cfg.profiles[0].starvation_guard.enabled = guard;
    // One node of two is half the GPUs; the default 20 % would hold none.
    cfg.profiles[0].starvation_guard.max_held_share = 0.5;
    let mut c = Cluster::with_config(1, &cfg);
    let mut running: Vec<VecDeque<String>> = vec![VecDeque::new(), VecDeque::new()];
    for (i, n) in ["n1", "n2"].into_iter().enumerate() {
        c.s.on_node_upsert(node(n).capacity(64_000, 512 << 30).resource(GPU, 8).build(), 0);
        for k in 0..8 {
            let name = format!("{n}-old-{k}");
            c.s.on_pod_upsert(pod(&name).node(n).req(1000, 1 << 30).resource(GPU, 1).build(), 0);
            running[i].push_back(name);
        }
    }
    c.s.on_pod_upsert(pod("big").req(8000, 8 << 30).resource(GPU, 8).build(), 0);
    c.run(0);
    let mut arrivals = 0;
    for minute in 1..=60u64 {
        let now = minute * MINUTE;
        // One small pod finishes on each node.
        for q in &mut running {
            if let Some(done) = q.pop_front() {
                c.s.on_pod_delete(&done, now);
                c.bound.remove(&done);
            }
        }
        for _ in 0..2 {
            arrivals += 1;
            c.s.on_pod_upsert(pod(&format!("small-{arrivals}")).req(1000, 1 << 30).resource(GPU, 1).build(), now);
        }
        // Within the minute: the pods retried after their backoff.
        for step in [0, 10, 20, 30] {
            c.run(now + step * SECOND);
        }
        if c.bound.contains_key("big") {
            return (Some(now), c);
        }
        // Newly bound small pods run until they finish in turn.
        for (name, node) in &c.bound {
            let i = if node == "n1" { 0 } else { 1 };
            if name != "big" && !running[i].contains(name) {
                running[i].push_back(name.clone());
            }
        }
    }
    (None, c)
}

#[test]
fn a_starving_gpu_pod_gets_a_node_held_and_lands_when_it_drains() {
    let (without, _) = stream(false);
    assert_eq!(without, None, "without the guard the small pods keep taking the freed GPUs");

    let (with, c) = stream(true);
    let placed = with.unwrap_or_else(|| panic!("the held node never drained for big: {:?}", c.failed));
    // Held at its first failure after 10 minutes; the eight pods on the
    // held node then finish one a minute, and none replaces them.
    assert!((17 * MINUTE..=18 * MINUTE).contains(&placed), "placed at minute {}", placed / MINUTE);
    let guard = c.s.capability::<StarvationGuard>().expect("the starvation guard is always on");
    assert!(guard.holds().is_empty(), "the hold ends when its holder is placed");
    let held_off = "1 node(s) held for default/big since 1970-01-01T00:00:00Z (starvation guard)";
    assert!(c.history.iter().any(|m| m.contains(held_off)), "small pods were told why: {:?}", c.history);
}
