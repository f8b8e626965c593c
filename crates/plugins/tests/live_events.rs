//! How the `Scheduler` takes the event orderings a live cluster produces:
//! a relist after a watch error, an expired assumption or another
//! scheduler's binding show a pod's views out of order, and a pending pod
//! may vanish while its binding is in flight.

use engine::config::Configuration;
use engine::framework::{Binder, Status};
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

struct Refuse;

impl Binder for Refuse {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Err("binding rejected: not found (404)".into())
    }
}

fn scheduler() -> Scheduler {
    let cfg = Configuration::default();
    let profiles = build_profiles(&cfg, &gpu_scheduler_plugins::registry(), &gpu_scheduler_plugins::default_plugins())
        .unwrap_or_else(|e| panic!("default profiles: {e}"));
    let mut s = Scheduler::new(&cfg, profiles, 1).unwrap_or_else(|e| panic!("{e}"));
    s.on_node_upsert(node("n1").capacity(4000, 8 << 30).pods(10).build(), 0);
    s
}

fn pending(name: &str) -> Pod {
    pod(name).req(1000, 1 << 30).build()
}

fn queued(s: &Scheduler) -> usize {
    let l = s.queue().lengths();
    l.active + l.backoff + l.unschedulable
}

#[test]
fn a_stale_pending_view_of_a_bound_pod_is_not_queued() {
    let mut s = scheduler();
    let mut bound = pending("p");
    bound.node_name = Some("n1".into());
    s.on_pod_upsert(bound, 1);
    s.on_pod_upsert(pending("p"), 2);
    assert_eq!(queued(&s), 0);
    assert!(s.schedule_one(3).is_none());
}

#[test]
fn a_pending_pod_gone_leaves_the_queue() {
    let mut s = scheduler();
    s.on_pod_upsert(pending("p"), 1);
    assert_eq!(queued(&s), 1);
    s.on_unassigned_pod_delete("p");
    assert_eq!(queued(&s), 0);
    assert!(s.schedule_one(2).is_none());
}

#[test]
fn an_assumed_pod_stays_until_its_binding_reports() {
    let mut s = scheduler();
    s.on_pod_upsert(pending("p"), 1);
    let Some(CycleOutcome::Assumed(mut task)) = s.schedule_one(2) else { panic!("p was not assumed") };
    // The pending view drops the pod (deleted, or bound and not yet seen
    // bound): the assumption must hold, the binding decides.
    s.on_unassigned_pod_delete("p");
    assert!(s.cache().is_assumed("p"));
    let status: Status = task.bind(&Refuse);
    assert!(!status.is_success());
    s.finish_binding(*task, &status, 3);
    assert!(s.cache().pod("p").is_none());
    // A failed binding goes to backoff; the driver then drops the pod,
    // which is gone.
    assert_eq!(queued(&s), 1);
    s.on_unassigned_pod_delete("p");
    assert_eq!(queued(&s), 0);
}

struct Accept;

impl Binder for Accept {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// A binding that succeeded but whose bound view never arrives (a lost
/// watch event): after `assumedPodTTLSeconds` the node's room is given
/// back, and the pod, still pending as far as the driver knows, is
/// scheduled again; a confirmation in time keeps it.
#[test]
fn a_binding_never_confirmed_expires_after_the_ttl() {
    for (name, confirm, expired) in [("never confirmed", false, true), ("confirmed in time", true, false)] {
        // The default TTL; n1 takes 3 pods of 1 cpu (the last 10 % of its
        // 4 are reserved).
        let mut s = scheduler();
        let mut tasks = Vec::new();
        for i in 0..3 {
            s.on_pod_upsert(pending(&format!("p{i}")), 1);
            let Some(CycleOutcome::Assumed(task)) = s.schedule_one(2) else { panic!("{name}: p{i} not assumed") };
            tasks.push(task);
        }
        s.on_pod_upsert(pending("late"), 3);
        assert!(matches!(s.schedule_one(3), Some(CycleOutcome::Failed(_))), "{name}: n1 is full");
        for mut task in tasks {
            let status = task.bind(&Accept);
            let (pod, node) = (task.pod.clone(), task.node.clone());
            s.finish_binding(*task, &status, 10_000);
            if confirm {
                let mut bound = (*pod).clone();
                bound.node_name = Some(node);
                s.on_pod_upsert(bound, 11_000);
            }
        }
        let deadline = 10_000 + Configuration::default().assumed_pod_ttl_seconds * 1000;
        assert!(s.expire_assumed_pods(deadline - 1).is_empty(), "{name}: expired before the TTL");
        let gone = s.expire_assumed_pods(deadline);
        assert_eq!(gone.len(), if expired { 3 } else { 0 }, "{name}");
        assert_eq!(s.cache().pod_count(), if expired { 0 } else { 3 }, "{name}");
        // The late pod was unschedulable for want of room: the expiry is
        // the event that lets it in.
        let next = s.schedule_one(deadline + 60_000);
        assert_eq!(matches!(next, Some(CycleOutcome::Assumed(_))), expired, "{name}");
    }
}
