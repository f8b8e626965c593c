//! The engine's timings for metrics: an instrumented scheduler records
//! every once-per-cycle plugin call and extension point, and decides
//! exactly as an uninstrumented one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use engine::config::Configuration;
use engine::framework::{Binder, Code};
use engine::instrument::Instrument;
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

#[derive(Default)]
struct Recorder {
    clock: AtomicU64,
    plugins: Mutex<Vec<(String, String)>>,
    points: Mutex<Vec<(String, &'static str)>>,
}

impl Instrument for Recorder {
    fn now_nanos(&self) -> u64 {
        self.clock.fetch_add(1000, Ordering::Relaxed)
    }
    fn plugin_executed(&self, plugin: &'static str, point: &'static str, _code: Code, nanos: u64) {
        assert!(nanos > 0);
        self.plugins.lock().unwrap_or_else(|e| e.into_inner()).push((plugin.into(), point.into()));
    }
    fn extension_point(&self, point: &'static str, code: Code, profile: &str, _nanos: u64) {
        assert_eq!(profile, "gpu-scheduler");
        self.points.lock().unwrap_or_else(|e| e.into_inner()).push((point.into(), code.as_str()));
    }
}

struct Accept;

impl Binder for Accept {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// Schedules three pods (the last fits nowhere) and returns where each went.
fn run(instrument: Option<Arc<Recorder>>) -> Vec<Option<String>> {
    let cfg = Configuration::default();
    let profiles = build_profiles(&cfg, &gpu_scheduler_plugins::registry(), &gpu_scheduler_plugins::default_plugins())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut s = Scheduler::new(&cfg, profiles, 7).unwrap_or_else(|e| panic!("{e}"));
    if let Some(i) = instrument {
        s.set_instrument(i);
    }
    for (name, cpu) in [("n1", 4000), ("n2", 8000), ("n3", 16000)] {
        s.on_node_upsert(node(name).zone("z1").capacity(cpu, 32 << 30).pods(10).build(), 0);
    }
    for (i, cpu) in [1000, 2000, 64000].into_iter().enumerate() {
        s.on_pod_upsert(pod(&format!("p{i}")).label("app", "web").req(cpu, 1 << 30).build(), 1);
    }
    let mut placed = Vec::new();
    while let Some(outcome) = s.schedule_one(2) {
        match outcome {
            CycleOutcome::Assumed(mut task) => {
                let status = task.bind(&Accept);
                placed.push(Some(task.node.clone()));
                let bound = (*task.pod).clone();
                s.finish_binding(*task, &status, 3);
                s.on_pod_upsert(bound, 3);
            }
            CycleOutcome::Failed(_) => placed.push(None),
        }
    }
    placed
}

#[test]
fn timings_are_recorded_and_change_no_decision() {
    let recorder = Arc::new(Recorder::default());
    let with = run(Some(recorder.clone()));
    assert_eq!(with, run(None));
    assert_eq!(with.len(), 3);
    assert!(with[2].is_none(), "the 64-cpu pod fits nowhere");

    let points = recorder.points.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for want in [
        ("PreFilter", "Success"),
        ("Filter", "Success"),
        ("Filter", "Unschedulable"),
        ("PreScore", "Success"),
        ("Score", "Success"),
    ] {
        assert!(points.contains(&(want.0.to_string(), want.1)), "no {want:?} in {points:?}");
    }
    let plugins = recorder.plugins.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(plugins.contains(&("NodeResourcesFit".into(), "PreFilter".into())), "{plugins:?}");
    assert!(plugins.iter().any(|(_, p)| p == "PreScore"), "{plugins:?}");
}
