//! Engine benchmarks shaped like kube-scheduler's scheduler_perf
//! SchedulingBasic: nodes of 4 cpu / 32 GiB / 110 pods, pods of 100m /
//! 500 MiB, the whole default profile.
//!
//! - `decision/*`: one scheduling cycle (pod popped, filtered, scored,
//!   assumed, bound, then deleted again so the cluster stays the same).
//! - `run_10k/*`: 10,000 pods scheduled onto a fresh cluster.
//!
//! Each at 500, 5,000 and 15,000 nodes, with the adaptive
//! percentageOfNodesToScore and with 100 %. At 5,000 nodes also
//! `decision/standard-*`: kube-scheduler's plugin set instead of the
//! policy profile; and `decision/facts-*`: the policy profile on nodes
//! that carry every policy fact (temperature, alerts, spot expiry, cloud,
//! disk type, some GPU nodes), so that no policy rule can skip the cycle;
//! and `decision/queues-*`: every pod in one of 16 team Queues under 4
//! parents and a root, half of the teams borrowing beyond their cpu quota
//! (admission up the chain with borrowing, on every cycle); and
//! `decision/gpushares-*`: 300-thousandth GPU shares on 8-GPU nodes, with
//! GpuFragmentation's gap balance and without it (`gpushares-nobalance-*`).
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

/// The engine's clock in every benchmark: 2026-01-01T00:00:00Z.
const NOW: u64 = 1_767_225_600_000;

/// What is scheduled onto what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// The default (policy) profile, scheduler_perf's plain nodes.
    Policy,
    /// kube-scheduler's plugin set, plain nodes.
    Standard,
    /// The policy profile, nodes with every policy fact.
    PolicyWithFacts,
    /// The policy profile without the plugins for claims (the four volume
    /// plugins and DynamicResources): what pods without claims cost before.
    PolicyNoClaimPlugins,
    /// The policy profile, every node with 8 GPUs as `nvidia.com/gpu`.
    PolicyGpuNodes,
    /// As `PolicyGpuNodes`, the pods 300-thousandth GPU shares (scored by
    /// the gap balance, then the fragmentation measure).
    PolicyGpuShares,
    /// As `PolicyGpuShares`, GpuFragmentation's `gapBalance` off: against
    /// it, what the gap balance costs.
    PolicyGpuSharesNoBalance,
    /// The policy profile, every node publishing its 8 GPUs through DRA (a
    /// ResourceSlice) instead, and a DeviceClass for them; pods still
    /// claim none. Against `PolicyGpuNodes`: what DRA GPUs cost.
    PolicyDraNodes,
    /// The policy profile, plain nodes, every pod in a Queue (see
    /// [`queues`]). Against `Policy`: what quota admission costs.
    PolicyQueues,
}

/// Teams per parent, parents under the root.
const TEAMS: usize = 4;
const PARENTS: usize = 4;

/// A root of 600 cores, 4 parents of 140, and under each 4 teams: two of
/// 60 cores, two of 10 that borrow from them (with the cluster's load of
/// 100m pods spread evenly, each team uses about 31).
fn queues() -> Vec<engine::queues::Queue> {
    let queue = |name: String, parent: Option<String>, cores: i64| engine::queues::Queue {
        name,
        parent,
        quota: [("cpu".to_string(), cores * 1000)].into(),
        borrowing_limit: Default::default(),
        lending_limit: Default::default(),
        weight: 1.0,
        reclaim: true,
    };
    let mut all = vec![queue("root".into(), None, 600)];
    for p in 0..PARENTS {
        all.push(queue(format!("group-{p}"), Some("root".into()), 140));
        for t in 0..TEAMS {
            all.push(queue(format!("team-{p}-{t}"), Some(format!("group-{p}")), if t < 2 { 60 } else { 10 }));
        }
    }
    all
}

fn scheduler(nodes: usize, percentage: u32, setup: Setup) -> Scheduler {
    let mut cfg = Configuration { percentage_of_nodes_to_score: percentage, ..Default::default() };
    if setup == Setup::PolicyGpuSharesNoBalance {
        let yaml = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n\
                    - pluginConfig:\n  - name: GpuFragmentation\n    args: {gapBalance: false}\n";
        cfg = config(yaml);
        cfg.percentage_of_nodes_to_score = percentage;
    }
    let claim_plugins = ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "DynamicResources"];
    let set = match setup {
        Setup::Standard => plugins::standard_plugins(),
        Setup::PolicyNoClaimPlugins => {
            plugins::default_plugins().into_iter().filter(|p| !claim_plugins.contains(&p.name)).collect()
        }
        _ => plugins::default_plugins(),
    };
    let profiles = build_profiles(&cfg, &plugins::registry(), &set).expect("default profile");
    let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
    for i in 0..nodes {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        let mut n = node(&format!("node-{i}")).zone(zone).capacity(4000, 32 << 30).pods(110);
        if setup == Setup::PolicyWithFacts {
            n = n
                .label("gpu-scheduler.io/cloud", if i % 4 == 0 { "public" } else { "private" })
                .label("disk-type", if i % 2 == 0 { "ssd" } else { "hdd" })
                .label("maintenance-mode", "false")
                .annotation("gpu-scheduler.io/temperature-celsius", &format!("{}", 40 + i % 50))
                .annotation("gpu-scheduler.io/spot-expiry", "2026-06-01T00:00:00Z")
                // An hour before NOW: old enough not to count.
                .annotation("gpu-scheduler.io/last-hardware-alert", "2025-12-31T23:00:00Z");
            if i % 10 == 0 {
                n = n.label("gpu-model", "a100").resource("nvidia.com/gpu", 8);
            }
        }
        if matches!(setup, Setup::PolicyGpuNodes | Setup::PolicyGpuShares | Setup::PolicyGpuSharesNoBalance) {
            n = n.label("gpu-model", "a100").resource("nvidia.com/gpu", 8);
        }
        if setup == Setup::PolicyDraNodes {
            n = n.label("gpu-model", "a100");
        }
        s.on_node_upsert(n.build(), NOW);
        if setup == Setup::PolicyDraNodes {
            s.on_slice_upsert(gpu_slice(&format!("node-{i}")), NOW);
        }
    }
    if setup == Setup::PolicyQueues {
        for q in queues() {
            s.on_queue_upsert(q, NOW);
        }
    }
    if setup == Setup::PolicyDraNodes {
        let class = engine::dra::DeviceClass {
            name: "gpu.nvidia.com".into(),
            selectors: vec!["device.driver == 'gpu.nvidia.com'".into()],
            config: vec![],
        };
        s.on_device_class_upsert(class, NOW);
    }
    s
}

/// A node's 8 GPUs as NVIDIA's DRA driver publishes them.
fn gpu_slice(node: &str) -> engine::dra::Slice {
    use engine::dra::{Attribute, Device, NodeScope, Slice};
    let devices = (0..8)
        .map(|i| Device {
            name: format!("gpu-{i}"),
            attributes: [
                ("type".to_string(), Attribute::String("gpu".into())),
                ("productName".to_string(), Attribute::String("NVIDIA A100-SXM4-40GB".into())),
            ]
            .into(),
            capacity: [("memory".to_string(), engine::quantity::Quantity::from_value(40 << 30))].into(),
            taints: vec![],
            scope: None,
            has_binding_conditions: false,
            consumes_counters: false,
        })
        .collect();
    Slice {
        name: format!("{node}-gpus"),
        driver: Arc::from("gpu.nvidia.com"),
        pool: Arc::from(node),
        generation: 1,
        slice_count: 1,
        scope: Some(NodeScope::Node(node.to_string())),
        devices,
        unsupported: false,
    }
}

fn basic_pod(i: usize) -> Pod {
    pod(&format!("pod-{i}")).req(100, 500 << 20).build()
}

/// `basic_pod` asking 300 thousandths of a GPU (the existing load:
/// [`bound_share`]).
fn share_pod(i: usize) -> Pod {
    pod(&format!("pod-{i}")).req(100, 500 << 20).with(|p| p.gpu = engine::devices::GpuRequest::share(300, 0)).build()
}

/// A share of 300, 500 or 700 already bound, one per node (on one of its
/// 8 devices), the same whatever the configuration.
fn bound_share(i: usize, nodes: usize) -> Pod {
    let milli = [300, 500, 700][i % 3];
    pod(&format!("pod-{i}"))
        .req(100, 500 << 20)
        .node(&format!("node-{}", i % nodes))
        .with(|p| {
            p.gpu = engine::devices::GpuRequest::share(milli, 0);
            p.gpu_devices = Some(engine::devices::DeviceSet::single((i / 3) % 8));
        })
        .build()
}

fn config(yaml: &str) -> Configuration {
    engine::config::parse(yaml).expect("benchmark configuration")
}

/// `basic_pod` in team Queue `i` mod 16.
fn queued_pod(i: usize) -> Pod {
    let team = format!("team-{}-{}", (i / TEAMS) % PARENTS, i % TEAMS);
    pod(&format!("pod-{i}")).label(engine::queues::LABEL_QUEUE, &team).req(100, 500 << 20).build()
}

/// Schedules one pod through the whole cycle; returns whether it was placed.
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

const SIZES: [usize; 3] = [500, 5_000, 15_000];
const MODES: [(&str, u32); 2] = [("adaptive", 0), ("all-nodes", 100)];

fn decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("decision");
    g.sample_size(30).measurement_time(Duration::from_secs(5));
    let runs = SIZES
        .iter()
        .flat_map(|&n| MODES.iter().map(move |&(mode, pct)| (mode.to_string(), n, pct, Setup::Policy)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("standard-{mode}"), 5_000, pct, Setup::Standard)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("facts-{mode}"), 5_000, pct, Setup::PolicyWithFacts)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("noclaims-{mode}"), 5_000, pct, Setup::PolicyNoClaimPlugins)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("gpunodes-{mode}"), 5_000, pct, Setup::PolicyGpuNodes)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("dranodes-{mode}"), 5_000, pct, Setup::PolicyDraNodes)))
        .chain(MODES.iter().map(|&(mode, pct)| (format!("gpushares-{mode}"), 5_000, pct, Setup::PolicyGpuShares)))
        .chain(
            MODES.iter().map(|&(mode, pct)| {
                (format!("gpushares-nobalance-{mode}"), 5_000, pct, Setup::PolicyGpuSharesNoBalance)
            }),
        )
        .chain(MODES.iter().map(|&(mode, pct)| (format!("queues-{mode}"), 5_000, pct, Setup::PolicyQueues)));
    for (mode, nodes, pct, setup) in runs {
        g.throughput(Throughput::Elements(1));
        // Set up on the first call: criterion calls the closure only for
        // the benchmarks selected on the command line, but many times each.
        let mut cluster: Option<Scheduler> = None;
        let mut i = 0;
        let make = match setup {
            Setup::PolicyQueues => queued_pod,
            Setup::PolicyGpuShares | Setup::PolicyGpuSharesNoBalance => share_pod,
            _ => basic_pod,
        };
        g.bench_function(BenchmarkId::new(&mode, nodes), |b| {
            let s = cluster.get_or_insert_with(|| {
                let mut s = scheduler(nodes, pct, setup);
                // Some existing load so scores differ between nodes.
                for i in 0..nodes {
                    if matches!(setup, Setup::PolicyGpuShares | Setup::PolicyGpuSharesNoBalance) {
                        // Bound as is, so that both settings start from the same shares.
                        s.on_pod_upsert(bound_share(1_000_000 + i, nodes), NOW);
                        continue;
                    }
                    let placed = schedule(&mut s, make(1_000_000 + i));
                    assert!(placed.is_some() || setup != Setup::PolicyQueues, "queue refused pod {i}");
                }
                s
            });
            b.iter_custom(|iters| {
                // Timed on a pool thread, as `simulate` and `run` drive
                // the engine: parallel filtering then splits work inside
                // the pool instead of handing each cycle over.
                pool().install(|| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        i += 1;
                        if let Some(bound) = schedule(s, make(i)) {
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
                        let mut s = scheduler(nodes, pct, Setup::Policy);
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
