//! Hostile objects (docs/RELIABILITY.md): what one decision costs when the
//! objects are as large as the API server lets them be, against the same
//! decision on ordinary objects. 500 nodes of 4 cpu / 32 GiB, the whole
//! default profile, adaptive percentageOfNodesToScore:
//!
//! - `decision/plain`: scheduler_perf's plain nodes and pods (the base);
//! - `decision/labels-2000`: every node with 2,000 labels (unicode values),
//!   the pod selecting nodes by one of them;
//! - `decision/taints-200`: every node with 200 PreferNoSchedule and 1
//!   NoSchedule taints, the pod tolerating the NoSchedule one;
//! - `decision/tolerations-10000`: a pod with 10,000 tolerations on nodes
//!   with 20 taints each;
//! - `decision/annotations-256k`: nodes and pod with 256 KiB of
//!   annotations (the API server's limit), unicode included;
//! - `decision/unicode-names`: node, zone and pod names outside ASCII;
//! - `node_update/*`: one watch event of such a node (its facts read and
//!   the cache updated), against a plain node.
//!
//! `cargo bench -p gpu-scheduler-sim --bench hostile`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use engine::config::Configuration;
use engine::framework::Binder;
use engine::model::{Node, Pod, TaintEffect, TolerationOp};
use engine::profile::build_profiles;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{NodeBuilder, node, pod};

struct NoopBinder;
impl Binder for NoopBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

const NOW: u64 = 1_767_225_600_000;
const NODES: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Plain,
    Labels,
    Taints,
    Tolerations,
    Annotations,
    Unicode,
}

const CASES: [(&str, Case); 6] = [
    ("plain", Case::Plain),
    ("labels-2000", Case::Labels),
    ("taints-200", Case::Taints),
    ("tolerations-10000", Case::Tolerations),
    ("annotations-256k", Case::Annotations),
    ("unicode-names", Case::Unicode),
];

/// 256 KiB of text with some multi-byte characters.
fn big_text() -> String {
    let mut s = String::new();
    while s.len() < (256 << 10) - 64 {
        s.push_str("ノード温度-θ-🚀-");
    }
    s
}

fn hostile_node(i: usize, case: Case, annotation: &str) -> Node {
    let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
    let name = if case == Case::Unicode { format!("узел-ノード-{i}") } else { format!("node-{i}") };
    let mut n: NodeBuilder = node(&name).capacity(4000, 32 << 30).pods(110);
    n = if case == Case::Unicode { n.zone(&format!("зона-{zone}")) } else { n.zone(zone) };
    match case {
        Case::Labels => {
            for l in 0..2000 {
                n = n.label(&format!("example.com/label-{l}"), &format!("värde-{l}-{}", i % 7));
            }
        }
        Case::Taints => {
            for t in 0..200 {
                n = n.taint(&format!("example.com/soft-{t}"), "x", TaintEffect::PreferNoSchedule);
            }
            n = n.taint("example.com/dedicated", "batch", TaintEffect::NoSchedule);
        }
        Case::Tolerations => {
            for t in 0..20 {
                n = n.taint(&format!("example.com/soft-{t}"), "x", TaintEffect::PreferNoSchedule);
            }
        }
        Case::Annotations => n = n.annotation("example.com/blob", annotation),
        Case::Plain | Case::Unicode => {}
    }
    n.build()
}

fn hostile_pod(i: usize, case: Case, annotation: &str) -> Pod {
    let name = if case == Case::Unicode { format!("pod-ポッド-{i}") } else { format!("pod-{i}") };
    let mut p = pod(&name).req(100, 500 << 20);
    match case {
        Case::Labels => p = p.node_selector("example.com/label-1999", &format!("värde-1999-{}", i % 7)),
        Case::Taints => {
            p = p.toleration("example.com/dedicated", TolerationOp::Equal, "batch", Some(TaintEffect::NoSchedule))
        }
        Case::Tolerations => {
            for t in 0..10_000 {
                p = p.toleration(&format!("example.com/other-{t}"), TolerationOp::Exists, "", None);
            }
        }
        Case::Annotations => p = p.with(|p| drop(p.annotations.insert("example.com/blob".into(), annotation.into()))),
        Case::Plain | Case::Unicode => {}
    }
    p.build()
}

fn scheduler(case: Case, annotation: &str) -> Scheduler {
    let cfg = Configuration::default();
    let profiles = build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()).expect("default profile");
    let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
    for i in 0..NODES {
        s.on_node_upsert(hostile_node(i, case, annotation), NOW);
    }
    s
}

fn schedule(s: &mut Scheduler, p: Pod) -> Option<Arc<Pod>> {
    s.on_pod_upsert(p, NOW);
    match s.schedule_one(NOW)? {
        CycleOutcome::Assumed(mut task) => {
            let status = task.bind(&NoopBinder);
            let bound = task.pod.clone();
            s.finish_binding(*task, &status, NOW);
            s.on_pod_upsert((*bound).clone(), NOW);
            Some(bound)
        }
        CycleOutcome::Failed(_) => None,
    }
}

fn pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().build().expect("thread pool"))
}

fn decision(c: &mut Criterion) {
    let annotation = big_text();
    let mut g = c.benchmark_group("decision");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for (name, case) in CASES {
        let mut cluster: Option<Scheduler> = None;
        let mut i = 0;
        g.bench_function(BenchmarkId::new(name, NODES), |b| {
            let s = cluster.get_or_insert_with(|| scheduler(case, &annotation));
            // Built outside the timing: the pod arrives converted, as
            // from a watch; its conversion is the watch's cost.
            b.iter_custom(|iters| {
                let pods: Vec<Pod> = (0..iters as usize).map(|k| hostile_pod(i + k, case, &annotation)).collect();
                i += iters as usize;
                pool().install(|| {
                    let start = Instant::now();
                    for p in pods {
                        let bound = schedule(s, p);
                        assert!(bound.is_some(), "{name}: the pod was not placed");
                        if let Some(bound) = bound {
                            s.on_pod_delete(&bound.uid, NOW);
                        }
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

fn node_update(c: &mut Criterion) {
    let annotation = big_text();
    let mut g = c.benchmark_group("node_update");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for (name, case) in CASES {
        let mut cluster: Option<Scheduler> = None;
        let mut i = 0;
        g.bench_function(BenchmarkId::new(name, NODES), |b| {
            let s = cluster.get_or_insert_with(|| scheduler(case, &annotation));
            b.iter_custom(|iters| {
                let nodes: Vec<Node> =
                    (0..iters as usize).map(|k| hostile_node((i + k) % NODES, case, &annotation)).collect();
                i += iters as usize;
                let start = Instant::now();
                for n in nodes {
                    s.on_node_upsert(n, NOW);
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decision, node_update);
criterion_main!(benches);
