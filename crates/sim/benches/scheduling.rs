//! Engine benchmarks shaped like kube-scheduler's scheduler_perf
//! SchedulingBasic: nodes of 4 cpu / 32 GiB / 110 pods, pods of 100m /
//! 500 MiB, the whole default profile.
//!
//! - `decision/*`: one scheduling cycle (pod popped, filtered, scored,
//!   assumed, bound, then deleted again so the cluster stays the same).
//! - `run_10k/*`: 10,000 pods scheduled onto a fresh cluster.
//!
//! Each at 500, 5,000 and 15,000 nodes, with the adaptive
//! percentageOfNodesToScore and with 100 %. `decision/standard-*/5000`
//! runs kube-scheduler's plugin set instead of the policy profile, to show
//! what the policies cost.
//! `cargo bench -p gpu-scheduler-sim --bench scheduling`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use engine::config::Configuration;
use engine::framework::Binder;
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

struct NoopBinder;
impl Binder for NoopBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

fn scheduler(nodes: usize, percentage: u32, standard: bool) -> Scheduler {
    let cfg = Configuration { percentage_of_nodes_to_score: percentage, ..Default::default() };
    let set = if standard { plugins::standard_plugins() } else { plugins::default_plugins() };
    let profiles = build_profiles(&cfg, &plugins::registry(), &set).expect("default profile");
    let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
    for i in 0..nodes {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        s.on_node_upsert(node(&format!("node-{i}")).zone(zone).capacity(4000, 32 << 30).pods(110).build(), 0);
    }
    s
}

fn basic_pod(i: usize) -> Pod {
    pod(&format!("pod-{i}")).req(100, 500 << 20).build()
}

/// Schedules one pod through the whole cycle; returns whether it was placed.
fn schedule(s: &mut Scheduler, p: Pod) -> Option<Arc<Pod>> {
    s.on_pod_upsert(p, 0);
    match s.schedule_one(0)? {
        CycleOutcome::Assumed(mut task) => {
            let status = task.bind(&NoopBinder);
            let bound = task.pod.clone();
            s.finish_binding(*task, &status, 0);
            s.on_pod_upsert((*bound).clone(), 0);
            Some(bound)
        }
        CycleOutcome::Failed(_) => None,
    }
}

fn pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().build().expect("thread pool"))
}

const SIZES: [usize; 3] = [500, 5_000, 15_000];
const MODES: [(&str, u32); 2] = [("adaptive", 0), ("all-nodes", 100)];

fn decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("decision");
    g.sample_size(30).measurement_time(Duration::from_secs(5));
    let runs = SIZES
        .iter()
        .flat_map(|&n| MODES.iter().map(move |&(mode, pct)| (mode.to_string(), n, pct, false)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("standard-{mode}"), 5_000, pct, true)));
    for (mode, nodes, pct, standard) in runs {
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new(&mode, nodes), |b| {
            // Set up here, not outside: criterion calls this only for the
            // benchmarks selected on the command line.
            let mut s = scheduler(nodes, pct, standard);
            // Some existing load so scores differ between nodes.
            for i in 0..nodes {
                schedule(&mut s, basic_pod(1_000_000 + i));
            }
            let mut i = 0;
            b.iter_custom(|iters| {
                // Timed on a pool thread, as `simulate` and `run` drive
                // the engine: parallel filtering then splits work inside
                // the pool instead of handing each cycle over.
                pool().install(|| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        i += 1;
                        if let Some(bound) = schedule(&mut s, basic_pod(i)) {
                            s.on_pod_delete(&bound.uid, 0);
                        }
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

fn run_10k(c: &mut Criterion) {
    let mut g = c.benchmark_group("run_10k");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(10_000));
    for nodes in SIZES {
        for (mode, pct) in MODES {
            g.bench_function(BenchmarkId::new(mode, nodes), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut s = scheduler(nodes, pct, false);
                        total += pool().install(|| {
                            let start = Instant::now();
                            for i in 0..10_000 {
                                schedule(&mut s, basic_pod(i));
                            }
                            start.elapsed()
                        });
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decision, run_10k);
criterion_main!(benches);
