//! Gangs through the `Scheduler` with the default profile: all or nothing,
//! waiting for members without taking resources, timeouts, minResources,
//! topology domains, bindings that fail, and members joining a placed gang.
//! The harness drives the scheduler as `run` does: pods arrive over time,
//! decisions are bound and the bound pods come back as the watch reports
//! them.

mod support;

use std::collections::HashSet;

use engine::gang::GangPhase;
use engine::model::LABEL_ZONE;
use engine::scheduler::CycleOutcome;
use engine::testing::{node, pod};
use engine::time::SECOND;
use support::{Cluster, GPU};

/// The 0.1 build left one member of the second gang holding a whole node
/// it could not use; now one gang is placed whole and the other not at
/// all, whatever the arrival order and the seed, and later rounds change
/// nothing and end (no livelock).
#[test]
fn two_gangs_never_split_the_cluster() {
    for seed in 1..=12 {
        let mut c = Cluster::new(seed);
        c.gpu_nodes("n", "", 4);
        c.group("a", 3, |_| {}, 0);
        c.group("b", 3, |_| {}, 0);
        let order: [(&str, &str); 6] = if seed % 2 == 0 {
            [("a-0", "a"), ("b-0", "b"), ("a-1", "a"), ("b-1", "b"), ("a-2", "a"), ("b-2", "b")]
        } else {
            [("b-0", "b"), ("b-1", "b"), ("a-0", "a"), ("b-2", "b"), ("a-1", "a"), ("a-2", "a")]
        };
        for (name, group) in order {
            c.member(name, group, 8, 0);
        }
        c.run(0);
        let (a, b) = (c.bound_of("a-"), c.bound_of("b-"));
        assert!(matches!((a, b), (3, 0) | (0, 3)), "seed {seed}: a={a} b={b}");
        let loser = if a == 0 { "a" } else { "b" };
        assert_eq!(
            c.message(&format!("{loser}-0")),
            format!(
                "0/4 nodes are available for gang default/{loser}: 1 of 3 members fit; 4 Insufficient nvidia.com/gpu."
            ),
            "seed {seed}"
        );
        let used: i64 = c.s.cache().node_infos().map(|n| n.requested.get(GPU)).sum();
        assert_eq!(used, 24, "seed {seed}: no GPU held by the losing gang");
        // Rounds of unrelated events: the loser is retried, as a whole,
        // and nothing moves.
        for round in 1..=5u64 {
            c.s.on_node_upsert(node("spare").capacity(1000, 1 << 30).build(), round * 20 * SECOND);
            c.run(round * 20 * SECOND);
            assert!(c.outcomes <= 3, "seed {seed} round {round}: {} outcomes", c.outcomes);
            assert_eq!((c.bound_of("a-"), c.bound_of("b-")), (a, b), "seed {seed} round {round}");
        }
    }
}

#[test]
fn a_short_gang_waits_without_resources_until_its_last_member() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 4);
    c.group("alpha", 4, |_| {}, 0);
    for i in 0..3 {
        c.member(&format!("alpha-{i}"), "alpha", 8, 0);
    }
    c.run(0);
    assert_eq!(c.bound_of("alpha-"), 0);
    assert_eq!(c.s.cache().pod_count(), 0, "waiting members take nothing");
    assert_eq!(c.message("alpha-2"), "gang default/alpha: 3 of 4 members pending");
    let statuses = c.s.take_gang_statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!((statuses[0].1.phase, statuses[0].1.scheduled), (GangPhase::Pending, 0));

    c.member("alpha-3", "alpha", 8, SECOND);
    c.run(SECOND);
    assert_eq!(c.bound_of("alpha-"), 4);
    let nodes: HashSet<&String> = c.bound.values().collect();
    assert_eq!(nodes.len(), 4, "one 8-GPU member per node");
    let statuses = c.s.take_gang_statuses();
    assert_eq!((statuses[0].1.phase, statuses[0].1.scheduled), (GangPhase::Scheduled, 4));
}

#[test]
fn a_gang_past_its_timeout_backs_off_as_a_whole() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 4);
    c.group("slow", 3, |g| g.schedule_timeout = Some(60 * SECOND), 0);
    c.member("slow-0", "slow", 8, 0);
    c.member("slow-1", "slow", 8, 0);
    c.run(0);
    assert_eq!(c.message("slow-0"), "gang default/slow: 2 of 3 members pending");
    // Retried when the wait times out, with no event needed.
    c.run(59 * SECOND);
    assert_eq!(c.outcomes, 0);
    c.run(60 * SECOND);
    assert_eq!(c.outcomes, 2);
    for m in ["slow-0", "slow-1"] {
        assert_eq!(c.message(m), "gang default/slow: 2 of 3 members pending; timed out after 60s, backing off");
    }
    assert_eq!(c.s.take_gang_statuses()[0].1.phase, GangPhase::Pending);
    // The last member arrives while the gang backs off: it waits too.
    c.member("slow-2", "slow", 8, 70 * SECOND);
    c.run(70 * SECOND);
    assert_eq!(c.bound_of("slow-"), 0);
    assert_eq!(c.message("slow-2"), "gang default/slow: backing off for 50s after waiting 60s for its members");
    c.run(120 * SECOND);
    assert_eq!(c.bound_of("slow-"), 3, "placed once the backoff ends");
}

#[test]
fn min_resources_beyond_the_free_capacity_reject_the_gang_at_once() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 4);
    c.group("big", 2, |g| g.min_resources.set(GPU, 64), 0);
    c.member("big-0", "big", 8, 0);
    c.member("big-1", "big", 8, 0);
    c.run(0);
    assert_eq!(c.bound_of("big-"), 0);
    assert_eq!(
        c.message("big-1"),
        "0/4 nodes are available for gang default/big: minResources exceed the cluster's free capacity (nvidia.com/gpu 64 needed, 32 free)"
    );
}

#[test]
fn a_topology_key_keeps_the_gang_in_the_fullest_domain_that_fits() {
    // (gang size × GPUs each, zone expected): zone a has 12 GPUs free,
    // b 24, c 8.
    let cases: [(usize, i64, Option<&str>); 4] =
        [(4, 4, Some("b")), (2, 4, Some("c")), (3, 4, Some("a")), (4, 8, None)];
    for (size, gpus, want) in cases {
        let mut c = Cluster::new(1);
        c.gpu_nodes("a", "a", 2);
        c.gpu_nodes("b", "b", 3);
        c.gpu_nodes("c", "c", 1);
        c.s.on_pod_upsert(pod("busy").node("a1").resource(GPU, 4).build(), 0);
        c.group("g", size as u32, |g| g.topology_key = Some(LABEL_ZONE.into()), 0);
        for i in 0..size {
            c.member(&format!("g-{i}"), "g", gpus, 0);
        }
        c.run(0);
        match want {
            Some(zone) => {
                assert_eq!(c.bound_of("g-"), size, "{size}×{gpus}");
                assert!(
                    c.bound.iter().filter(|(p, _)| p.starts_with("g-")).all(|(_, n)| n.starts_with(zone)),
                    "{size}×{gpus}: {:?}",
                    c.bound
                );
            }
            None => {
                assert_eq!(c.bound_of("g-"), 0);
                assert_eq!(
                    c.message("g-0"),
                    "0/6 nodes are available for gang default/g: no topology.kubernetes.io/zone domain has 32 free nvidia.com/gpu"
                );
            }
        }
    }
}

#[test]
fn a_failed_member_binding_retries_the_rest_of_the_gang() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 4);
    c.group("g", 3, |_| {}, 0);
    for i in 0..3 {
        c.member(&format!("g-{i}"), "g", 8, 0);
    }
    c.api.refuse.lock().unwrap_or_else(|e| e.into_inner()).insert("g-1".into());
    c.run(0);
    // g-0 bound before g-1 failed; g-2 was not bound after it.
    assert_eq!(c.bound_of("g-"), 1);
    assert!(c.message("g-2").contains("another member's binding failed"), "{}", c.message("g-2"));
    assert_eq!(c.s.cache().pod_count(), 1, "the members not bound are no longer assumed");
    assert_eq!(c.s.take_gang_statuses()[0].1.phase, GangPhase::Unknown);
    c.run(20 * SECOND);
    assert_eq!(c.bound_of("g-"), 3, "the missing members are placed as a gang");
}

#[test]
fn members_beyond_the_minimum_join_the_placed_gang() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 2);
    c.group("g", 2, |_| {}, 0);
    for i in 0..3 {
        c.member(&format!("g-{i}"), "g", 8, 0);
    }
    c.run(0);
    assert_eq!(c.bound_of("g-"), 2, "the minimum is placed, the third does not fit");
    // Decided in the gang's cycle, where a member alone preempts nothing.
    assert_eq!(c.message("g-2"), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    // Room frees: the third joins like an ordinary pod.
    c.gpu_nodes("m", "", 1);
    c.run(30 * SECOND);
    assert_eq!(c.bound_of("g-"), 3);
}

#[test]
fn members_of_an_unknown_group_wait_for_it() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 2);
    c.member("g-0", "g", 8, 0);
    c.run(0);
    assert_eq!(c.message("g-0"), "pod group default/g not found");
    c.group("g", 1, |_| {}, SECOND);
    c.run(SECOND);
    assert_eq!(c.bound_of("g-"), 1);
}

/// A pending gang of higher priority preempts for all its members in one
/// decision (nominated, victims evicted, then placed), or not at all.
#[test]
fn a_gang_preempts_for_all_its_members_or_not_at_all() {
    // (gang size, victims expected)
    for (size, want_victims) in [(3usize, 3usize), (5, 0)] {
        let mut c = Cluster::new(1);
        c.gpu_nodes("n", "", 4);
        for i in 1..=4 {
            let p = pod(&format!("low-{i}")).node(&format!("n{i}")).req(1000, 1 << 30).resource(GPU, 8).build();
            c.s.on_pod_upsert(p, 0);
        }
        c.group("g", size as u32, |_| {}, 0);
        for i in 0..size {
            let p = pod(&format!("g-{i}"))
                .req(1000, 1 << 30)
                .resource(GPU, 8)
                .priority(100)
                .with(|p| p.pod_group = Some("g".into()))
                .build();
            c.s.on_pod_upsert(p, 0);
        }
        let mut victims = Vec::new();
        let mut nominated = Vec::new();
        while let Some(outcome) = c.s.schedule_one(0) {
            if let CycleOutcome::Failed(f) = outcome {
                victims.extend(f.victims.iter().map(|v| v.name.clone()));
                nominated.extend(f.nominated_node.clone());
                c.failed.insert(f.pod.name.clone(), f.message.clone());
            }
        }
        assert_eq!(victims.len(), want_victims, "gang of {size}: {victims:?}");
        if want_victims == 0 {
            assert!(nominated.is_empty(), "gang of {size}: nothing nominated");
            assert_eq!(c.s.cache().pod_count(), 4, "no pod evicted, none assumed");
            continue;
        }
        assert!(c.message("g-0").ends_with("preemption: 3 pod(s) to evict to place the gang."), "{}", c.message("g-0"));
        assert_eq!(nominated.len(), 3, "each member nominated");
        assert_eq!(c.s.cache().pod_count(), 4, "victims stay until the caller evicts them");
        // The caller evicts; the gang lands on its nominated nodes.
        for v in &victims {
            c.s.on_pod_delete(v, SECOND);
        }
        c.run(20 * SECOND);
        assert_eq!(c.bound_of("g-"), 3);
        for (pod, node) in c.bound.iter().filter(|(p, _)| p.starts_with("g-")) {
            assert!(nominated.contains(node), "{pod} on {node}, nominated {nominated:?}");
        }
    }
}

/// A preemptor's nomination holds the room its victims free: a pod of
/// lower priority arriving meanwhile does not take it.
#[test]
fn a_nominated_pod_keeps_the_room_its_victims_free() {
    let mut c = Cluster::new(1);
    c.gpu_nodes("n", "", 1);
    c.s.on_pod_upsert(pod("victim").node("n1").req(1000, 1 << 30).resource(GPU, 8).build(), 0);
    c.s.on_pod_upsert(pod("urgent").req(1000, 1 << 30).resource(GPU, 8).priority(100).build(), 0);
    let Some(CycleOutcome::Failed(f)) = c.s.schedule_one(0) else { panic!("urgent should wait for its victim") };
    assert_eq!((f.nominated_node.as_deref(), f.victims.len()), (Some("n1"), 1));
    c.s.on_pod_delete("victim", 0);
    // A lower-priority pod comes while urgent still backs off: the node
    // is kept for urgent.
    c.s.on_pod_upsert(pod("sneaky").req(1000, 1 << 30).resource(GPU, 1).priority(5).build(), 0);
    c.run(0);
    assert!(!c.bound.contains_key("sneaky"), "{:?}", c.bound);
    assert!(c.message("sneaky").contains("Insufficient nvidia.com/gpu"), "{}", c.message("sneaky"));
    c.run(20 * SECOND);
    assert_eq!(c.bound.get("urgent").map(String::as_str), Some("n1"));
    assert!(!c.bound.contains_key("sneaky"), "n1 is full with urgent");
}
