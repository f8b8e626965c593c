//! Intent prediction on a replayed trace (docs/POLICIES.md, "Prediction
//! (pre-reservation)"): `bench/forecast`'s five days of a cluster kept
//! full by long batch pods, with twelve `ml` pods every day at 09:00,
//! replayed on the trace's clock with the forecast off and on. From the
//! second day the forecast holds nodes for the burst, which then waits
//! less; the figures are printed (`cargo test -p gpu-scheduler-sim --test
//! forecast -- --nocapture`).

use std::path::PathBuf;

use engine::config::{self, Configuration};
use gpu_scheduler_sim as sim;
use sim::openb::{read_nodes, read_pods};
use sim::timed::{TimedReplay, replay_timed};

fn repo(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run(config_file: &str) -> TimedReplay {
    let cfg: Configuration = config::parse(&repo(config_file)).unwrap();
    let nodes = read_nodes("nodes.csv", &repo("bench/forecast/nodes.csv")).unwrap();
    let pods = read_pods("pods.csv", &repo("bench/forecast/pods.csv")).unwrap();
    replay_timed(&nodes, &pods, &cfg, &plugins::registry(), &plugins::default_plugins(), 42, &mut |_, _| {}).unwrap()
}

#[test]
fn a_forecast_hold_shortens_the_daily_burst_wait() {
    let (off, on) = (run("examples/forecast-off.yaml"), run("examples/forecast-on.yaml"));
    println!("{:<14} {:>22} {:>22}", "", "forecast off", "forecast on");
    let row = |what: &str, f: &dyn Fn(&TimedReplay) -> String| println!("{what:<14} {:>22} {:>22}", f(&off), f(&on));
    let stats = |s: &sim::timed::WaitStats| format!("{:.0} s / {:.0} s ({})", s.mean_s, s.p95_s, s.pods);
    row("all, mean/p95", &|r| stats(&r.wait.all));
    row("GPU pods", &|r| stats(&r.wait.gpu));
    for q in ["ml", "batch"] {
        row(&format!("queue {q}"), &|r| stats(&r.wait.queues[q]));
    }
    row("never placed", &|r| r.wait.never_placed.to_string());
    for h in &on.held_forecasts {
        println!("held {:>5.1} GPUs for {}", h.peak_held_milli as f64 / 1000.0, h.explanation);
    }

    assert_eq!((off.pods, on.pods), (960, 960));
    assert_eq!((off.wait.never_placed, on.wait.never_placed), (0, 0), "every pod runs in the end");
    assert!(off.held_forecasts.is_empty(), "nothing is held with the forecast off");
    assert!(
        on.held_forecasts.iter().any(|h| h.explanation.starts_with("queue ml, 1-GPU pods: 12 expected 09:00–10:00")),
        "{:?}",
        on.held_forecasts
    );
    let (ml_off, ml_on) = (off.wait.queues["ml"], on.wait.queues["ml"]);
    assert!(ml_on.mean_s < 0.5 * ml_off.mean_s, "the burst waits less: {ml_on:?} against {ml_off:?}");
    assert!(ml_on.p95_s <= ml_off.p95_s, "{ml_on:?} against {ml_off:?}");
}
