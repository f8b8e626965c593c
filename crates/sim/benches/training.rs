//! What gangs and preemption cost (docs/BENCHMARKS.md), with the default
//! profile on GPU nodes of 64 cpu / 512 GiB / 8 GPUs:
//!
//! - `gang/member-5000`: one 8-GPU pod's whole cycle on 5,000 nodes, and
//!   `gang/gang-of-8-5000`: a gang of eight such pods decided together
//!   (each member bound, then all deleted so the cluster stays the same).
//!   Goal: the gang ≤ 8 × one pod + 20 %.
//! - `simulate/500-gangs-of-8-on-1000`: `simulate` of 1,000 GPU nodes and
//!   500 PodGroups of eight 1-GPU workers, manifests included. Goal ≤ 2 s.
//! - `preemption/5000`: one preemption on 5,000 nodes full of
//!   lower-priority pods (kube's scheduler_perf PreemptionBasic shape):
//!   every node filtered and rejected, candidates searched, victims chosen.
//!   Goal ≤ 20 ms.
//!
//! `cargo bench -p gpu-scheduler-sim --bench training`

use std::fmt::Write;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use engine::config::Configuration;
use engine::framework::Binder;
use engine::gang::PodGroup;
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::resources::Resources;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

const GPU: &str = "nvidia.com/gpu";
const NOW: u64 = 1_767_225_600_000;

struct NoopBinder;
impl Binder for NoopBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

fn pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().build().expect("thread pool"))
}

fn scheduler(nodes: usize, cpu: i64, gpus: i64) -> Scheduler {
    let cfg = Configuration::default();
    let profiles = build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()).expect("default profile");
    let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
    for i in 0..nodes {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        let mut n = node(&format!("node-{i}")).zone(zone).capacity(cpu * 1000, 512 << 30).pods(110);
        if gpus > 0 {
            n = n.label("gpu-model", "a100").resource(GPU, gpus);
        }
        s.on_node_upsert(n.build(), NOW);
    }
    s
}

/// Runs cycles until nothing is ready, binding what is assumed; returns
/// the pods bound.
fn drain(s: &mut Scheduler) -> Vec<String> {
    let mut bound = Vec::new();
    while let Some(outcome) = s.schedule_one(NOW) {
        if let CycleOutcome::Assumed(mut task) = outcome {
            let status = task.bind(&NoopBinder);
            let pod = task.pod.clone();
            s.finish_binding(*task, &status, NOW);
            s.on_pod_upsert((*pod).clone(), NOW);
            bound.push(pod.uid.clone());
        }
    }
    bound
}

fn gang(c: &mut Criterion) {
    let mut g = c.benchmark_group("gang");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    let nodes = 5_000;
    let mut cluster: Option<Scheduler> = None;
    let mut round = 0;
    for (name, members) in [("member", 1usize), ("gang-of-8", 8)] {
        g.bench_function(BenchmarkId::new(name, nodes), |b| {
            let s = cluster.get_or_insert_with(|| {
                let mut s = scheduler(nodes, 64, 8);
                // Half the nodes half used, so scores differ.
                for i in 0..nodes / 2 {
                    s.on_pod_upsert(pod(&format!("load-{i}")).req(1000, 1 << 30).resource(GPU, 4).build(), NOW);
                }
                drain(&mut s);
                s
            });
            b.iter_custom(|iters| {
                pool().install(|| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        round += 1;
                        let group = format!("g{round}");
                        if members > 1 {
                            s.on_pod_group_upsert(
                                PodGroup {
                                    namespace: "default".into(),
                                    name: group.clone(),
                                    min_member: members as u32,
                                    min_resources: Resources::default(),
                                    schedule_timeout: None,
                                    topology_key: None,
                                },
                                NOW,
                            );
                        }
                        for m in 0..members {
                            let p = pod(&format!("{group}-{m}")).req(4000, 16 << 30).resource(GPU, 8).with(|p| {
                                p.pod_group = (members > 1).then(|| group.clone());
                            });
                            s.on_pod_upsert(p.build(), NOW);
                        }
                        let start = Instant::now();
                        let bound = drain(s);
                        total += start.elapsed();
                        assert_eq!(bound.len(), members, "round {round}");
                        for uid in bound {
                            s.on_pod_delete(&uid, NOW);
                        }
                        s.on_pod_group_delete("default", &group);
                    }
                    total
                })
            })
        });
    }
    g.finish();
}

/// 1,000 nodes and 500 PodGroups of eight 1-GPU workers, as manifests.
fn gangs_yaml(nodes: usize, gangs: usize, size: usize) -> String {
    let mut out = String::new();
    for i in 0..nodes {
        let _ = write!(
            out,
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i}\n  labels: {{kubernetes.io/hostname: node-{i}, topology.kubernetes.io/zone: zone-{}, gpu-model: a100}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}\n",
            i % 3
        );
    }
    for g in 0..gangs {
        let _ = write!(
            out,
            "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g{g}, namespace: ml}}\nspec: {{minMember: {size}}}\n"
        );
        for m in 0..size {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: g{g}-{m}\n  namespace: ml\n  labels: {{scheduling.x-k8s.io/pod-group: g{g}}}\nspec:\n  schedulerName: gpu-scheduler\n  containers:\n  - name: w\n    image: trainer\n    resources:\n      requests: {{cpu: \"2\", memory: 8Gi}}\n      limits: {{nvidia.com/gpu: \"1\"}}\n"
            );
        }
    }
    out
}

fn simulate(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulate");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let yaml = gangs_yaml(1_000, 500, 8);
    g.bench_function("500-gangs-of-8-on-1000", |b| {
        b.iter(|| {
            let mut m = gpu_scheduler_sim::Manifests::default();
            m.add_str("gangs.yaml", &yaml).expect("manifests");
            let opts = gpu_scheduler_sim::SimOptions {
                seed: 1,
                now: jiff::Timestamp::from_millisecond(NOW as i64).expect("clock"),
                explain: None,
                extenders: Vec::new(),
            };
            let sim = gpu_scheduler_sim::simulate(
                &m,
                &Configuration::default(),
                &plugins::registry(),
                &plugins::default_plugins(),
                &opts,
                &mut |_, _| {},
            )
            .expect("simulate");
            assert_eq!(sim.placements.iter().filter(|p| p.node.is_some()).count(), 4_000);
        })
    });
    g.finish();
}

fn preemption(c: &mut Criterion) {
    let mut g = c.benchmark_group("preemption");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    let nodes = 5_000;
    let mut cluster: Option<Scheduler> = None;
    let mut i = 0;
    g.bench_function(BenchmarkId::from_parameter(nodes), |b| {
        let s = cluster.get_or_insert_with(|| {
            let mut s = scheduler(nodes, 4, 0);
            // Every node full: four 1-cpu pods of priority 0.
            for n in 0..nodes {
                for k in 0..4 {
                    let p = pod(&format!("low-{n}-{k}")).node(&format!("node-{n}")).req(1000, 1 << 30);
                    s.on_pod_upsert(p.build(), NOW);
                }
            }
            s
        });
        b.iter_custom(|iters| {
            pool().install(|| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    i += 1;
                    let name = format!("high-{i}");
                    s.on_pod_upsert(pod(&name).req(1000, 1 << 30).priority(100).build(), NOW);
                    let start = Instant::now();
                    let outcome = s.schedule_one(NOW);
                    total += start.elapsed();
                    match outcome {
                        // Two: the reservation buffer keeps a pod of this
                        // priority under 90 % of the node's 4 cpu.
                        Some(CycleOutcome::Failed(f)) => assert_eq!(f.victims.len(), 2, "victims {:?}", f.victims),
                        _ => panic!("a preemption was expected"),
                    }
                    // The victims stay (not evicted): every round sees the same cluster.
                    s.on_unassigned_pod_delete(&name);
                }
                total
            })
        })
    });
    g.finish();
}

criterion_group!(benches, gang, simulate, preemption);
criterion_main!(benches);
