//! A preemption's victims between the decision and their deletion (a live
//! driver deletes them in the background, and the watch shows it later):
//! the preemptor, tried again meanwhile, waits for them instead of
//! preempting again; if their deletion never shows, it preempts again
//! once the mark has lasted its time.

use engine::config;
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

fn scheduler() -> Scheduler {
    let cfg = config::parse("apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let profiles =
        build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()).unwrap_or_else(|e| panic!("{e}"));
    let mut s = Scheduler::new(&cfg, profiles, 1).unwrap_or_else(|e| panic!("{e}"));
    s.on_node_upsert(node("a").capacity(4000, 16 << 30).pods(110).build(), 0);
    for i in 0..4 {
        s.on_pod_upsert(pod(&format!("low-{i}")).req(900, 1 << 20).node("a").build(), 0);
    }
    s
}

/// What one cycle at `now` gives: the victims chosen, or the failure's
/// message, or where the pod was placed.
fn cycle(s: &mut Scheduler, now: u64) -> Result<Vec<String>, String> {
    match s.schedule_one(now) {
        Some(CycleOutcome::Failed(f)) if !f.victims.is_empty() => {
            let mut v: Vec<String> = f.victims.iter().map(|p| p.name.clone()).collect();
            v.sort();
            Ok(v)
        }
        Some(CycleOutcome::Failed(f)) => Err(f.message),
        Some(CycleOutcome::Assumed(task)) => Err(format!("placed on {}", task.node)),
        None => Err("nothing to schedule".into()),
    }
}

#[test]
fn a_preemptor_waits_for_its_victims_until_the_mark_ends() {
    let mut s = scheduler();
    s.on_pod_upsert(pod("urgent").req(3000, 1 << 20).priority(10).build(), 0);
    let first = cycle(&mut s, 0).expect("victims");
    assert!(first.len() >= 3, "{first:?}");

    // The victims' deletions are on their way. An update of a victim (its
    // DisruptionTarget condition) does not unmark it; other events do not
    // move the preemptor, which would fail ("not eligible due to a
    // terminating pod on the nominated node") and back off longer.
    let victim = s.cache().pod(&first[0]).cloned();
    let mut update = (*victim.expect("the victim in the cache")).clone();
    assert!(update.terminating, "marked at the decision");
    update.terminating = false;
    s.on_pod_upsert(update, 5_000);
    s.on_node_upsert(node("b").capacity(100, 1 << 20).pods(110).build(), 5_000);
    assert_eq!(cycle(&mut s, 20_000), Err("nothing to schedule".to_string()));

    // Their deletion never showed: after the mark's 30 s, it preempts again.
    assert_eq!(cycle(&mut s, 31_000), Ok(first.clone()));

    // Now they go: the preemptor is tried when the last one is gone, at
    // once (no backoff), and lands where they were.
    let (last, rest) = first.split_last().expect("victims");
    for v in rest {
        s.on_pod_delete(v, 32_000);
    }
    assert_eq!(cycle(&mut s, 32_000), Err("nothing to schedule".to_string()));
    s.on_pod_delete(last, 32_000);
    assert_eq!(cycle(&mut s, 32_000), Err("placed on a".to_string()));
}
