//! A new configuration applied to a running engine (`run` reloads its
//! config file; docs/OPERATIONS.md, "Changing the configuration"): pods
//! that waited under the old profile are retried under the new one, pods a
//! widened podSelector now takes are queued, and what cannot change
//! without a restart is refused with the old configuration kept.

use engine::config::{self, Configuration};
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, ReconfigureError, Scheduler};
use engine::testing::{node, pod};

fn parse(yaml: &str) -> Configuration {
    config::parse(yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn profiles(cfg: &Configuration) -> Vec<engine::profile::Profile> {
    build_profiles(cfg, &plugins::registry(), &plugins::default_plugins()).unwrap_or_else(|e| panic!("{e}"))
}

fn scheduler(cfg: &Configuration) -> Scheduler {
    let mut s = Scheduler::new(cfg, profiles(cfg), 1).unwrap_or_else(|e| panic!("{e}"));
    for name in ["a", "b"] {
        s.on_node_upsert(node(name).label("pool", name).capacity(8000, 32 << 30).pods(110).build(), 0);
    }
    s
}

fn profile(extra: &str) -> String {
    format!(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- schedulerName: gpu-scheduler\n{extra}"
    )
}

/// Runs cycles until the queue has nothing ready; the pods placed, by name.
fn drain(s: &mut Scheduler, now: u64) -> Vec<(String, String)> {
    let mut placed = Vec::new();
    while let Some(outcome) = s.schedule_one(now) {
        if let CycleOutcome::Assumed(task) = outcome {
            placed.push((task.pod.name.clone(), task.node.clone()));
            let status = engine::framework::Status::success();
            s.finish_binding(*task, &status, now);
        }
    }
    placed
}

#[test]
fn a_waiting_pod_is_retried_under_the_new_profile() {
    // Only pool "c" is allowed, and there is none: the pod waits.
    let old = parse(&profile("  nodeSelector: {matchLabels: {pool: c}}\n"));
    let mut s = scheduler(&old);
    s.on_pod_upsert(pod("web").req(100, 1 << 20).build(), 0);
    assert_eq!(drain(&mut s, 0), []);
    assert_eq!(s.queue().lengths().unschedulable, 1);

    let new = parse(&profile("  nodeSelector: {matchLabels: {pool: b}}\n"));
    s.reconfigure(&new, profiles(&new), Vec::new(), 1).unwrap_or_else(|e| panic!("{e}"));
    // Out of the unschedulable pool at once, after its backoff (1 s).
    assert_eq!(s.queue().lengths().unschedulable, 0);
    assert_eq!(drain(&mut s, 2000), [("web".to_string(), "b".to_string())]);
}

#[test]
fn a_widened_pod_selector_takes_pods_it_left_before() {
    let old = parse(&profile("  podSelector: {matchLabels: {track: canary}}\n"));
    let mut s = scheduler(&old);
    s.on_pod_upsert(pod("stable").req(100, 1 << 20).build(), 0);
    s.on_pod_upsert(pod("canary").label("track", "canary").req(100, 1 << 20).build(), 0);
    let placed: Vec<String> = drain(&mut s, 0).into_iter().map(|(p, _)| p).collect();
    assert_eq!(placed, ["canary"], "the stable pod is another scheduler's");

    let new = parse(&profile(""));
    s.reconfigure(&new, profiles(&new), Vec::new(), 1).unwrap_or_else(|e| panic!("{e}"));
    let placed: Vec<String> = drain(&mut s, 1).into_iter().map(|(p, _)| p).collect();
    assert_eq!(placed, ["stable"]);

    // Narrowed again: a pending pod no profile takes leaves the queue.
    s.on_pod_upsert(pod("late").req(100, 1 << 20).build(), 2);
    s.reconfigure(&old, profiles(&old), Vec::new(), 2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(drain(&mut s, 3), []);
    assert!(s.queue().is_empty());
}

#[test]
fn what_needs_a_restart_is_refused_and_the_old_config_kept() {
    let old = parse(&profile("  nodeSelector: {matchLabels: {pool: a}}\n"));
    let mut s = scheduler(&old);
    let renamed = parse(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- schedulerName: other\n",
    );
    let err = s.reconfigure(&renamed, profiles(&renamed), Vec::new(), 1).expect_err("renamed");
    assert!(matches!(err, ReconfigureError::SchedulerNames { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "profiles: the schedulerNames [\"other\"] differ from the running ones [\"gpu-scheduler\"]; watching other names needs a restart"
    );
    // Still the old profile: pool a only.
    s.on_pod_upsert(pod("web").req(100, 1 << 20).build(), 1);
    assert_eq!(drain(&mut s, 1), [("web".to_string(), "a".to_string())]);

    // Settings read once at start are named for the operator.
    let mut moved = old.clone();
    moved.client_connection.qps = 5.0;
    moved.node_facts.hardware_alert_event_reasons.clear();
    assert_eq!(old.restart_needed(&moved), ["clientConnection", "nodeFacts"]);
    assert!(old.restart_needed(&old).is_empty());
}

#[test]
fn an_active_policy_rule_survives_a_reload_that_keeps_it() {
    let yaml = |weight: u32| {
        profile(&format!(
            "  policySwitch:\n    rules:\n    - name: busy\n      when: {{metric: cpuAllocation, atLeast: 1}}\n      weights: {{NodeResourcesBalancedAllocation: {weight}}}\n"
        ))
    };
    let old = parse(&yaml(2));
    let mut s = scheduler(&old);
    s.on_pod_upsert(pod("big").req(4000, 1 << 20).node("a").build(), 0);
    s.on_pod_upsert(pod("web").req(100, 1 << 20).build(), 0);
    drain(&mut s, 0);
    assert_eq!(s.take_policy_switches().len(), 1);
    assert_eq!(s.active_policies(), [("gpu-scheduler", 0, Some("busy"))]);
    let new = parse(&yaml(3));
    s.reconfigure(&new, profiles(&new), Vec::new(), 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.active_policies(), [("gpu-scheduler", 0, Some("busy"))]);
    s.on_pod_upsert(pod("web-2").req(100, 1 << 20).build(), 1);
    drain(&mut s, 1);
    assert!(s.take_policy_switches().is_empty(), "no switch reported for a rule that stayed");
}
