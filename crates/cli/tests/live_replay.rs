//! The simulator against a live run, at a small size: a sample of the
//! openb trace (60 of its nodes, its pods in proportion, arrivals over 90
//! seconds, durations as in the trace, copies to 1.5× the GPUs) played on
//! a real control plane with KWOK nodes under gpu-scheduler, and the same
//! arrivals replayed by `gpu-scheduler replay --timed`. The prediction
//! must hold: mean GPU allocation within 1 point of the live run's, the
//! curves a little further apart at most (the live run binds a moment
//! after the arrival, and at saturation ties broken otherwise let other
//! pods fit). The full-size table is in docs/BENCHMARKS.md
//! (bench/live-replay).

use std::path::PathBuf;

use gpu_scheduler_e2e::live::{self, Options, report, run::Setup, trace::Shape};

#[test]
fn the_simulator_predicts_the_live_run() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let opts = Options {
        nodes_csv: repo.join("bench/openb/openb_node_list_gpu_node.csv"),
        pods_csv: repo.join("bench/openb/openb_pod_list_default.csv"),
        shape: Shape { nodes: Some(60), minutes: 1.5, duration_scale: 1.0, inflate: 1.5, seed: 42 },
        setup: Setup {
            gpu_scheduler: PathBuf::from(env!("CARGO_BIN_EXE_gpu-scheduler")),
            scheduler_plugins: None,
            tail_s: 30,
        },
        contenders: vec!["gpu-scheduler".into()],
        repeat: 1,
        simulate: true,
        out: repo.join("target/live-tests/live_replay"),
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let write = |o: &live::Outcome| live::write(&opts, o, "live-replay-small");
    let outcome = runtime.block_on(live::replay(&opts, &repo, write)).expect("the live replay");
    let (run, sim) = (&outcome.runs[0], outcome.sim.as_ref().expect("the prediction"));

    let created = run.pods.values().filter(|o| o.created_s.is_some()).count();
    assert_eq!(created, outcome.pods.len(), "every pod of the trace was created");
    let finished = run.pods.values().filter(|o| o.finished_s.is_some()).count();
    assert!(finished > 0, "pods ran to their end and left (KWOK's lifecycle)");
    let bound = run.pods.values().filter(|o| o.bound.is_some()).count();
    assert!(bound < outcome.pods.len(), "the sample saturates the cluster: some pods wait to the end");

    let a = report::agreement(&outcome.pods, run, sim, outcome.gpus());
    eprintln!("{a:?}");
    assert!(
        (a.live_mean - a.sim_mean).abs() <= 1.0,
        "mean allocation: live {:.2} %, predicted {:.2} %",
        a.live_mean,
        a.sim_mean
    );
    assert!(a.mean_points <= 2.0, "the curves differ by {:.2} points on average", a.mean_points);
    let differ = a.live_only.len() + a.sim_only.len();
    assert!(differ * 10 <= a.both, "{differ} pods placed in one run only, {} in both", a.both);
}
