//! kube-scheduler's scheduler_perf cases on the engine alone: one
//! criterion group per case, each iteration a fresh cluster holding the
//! case's init pods (bound, untimed) and the measured pods scheduled onto
//! it (timed: queued, decided, assumed, bound and confirmed; preemptors'
//! victims deleted and the preemptors decided again).
//!
//! Shapes as in Kubernetes v1.36's `test/integration/scheduler_perf` (the
//! gang case as v1.37's GangScheduling): nodes of 4 cpu / 32 GiB / 110 pods,
//! pods of 100m / 500 MiB unless said otherwise, the default profile. The
//! 5,000-node cases at a fifth of their standard size (1,000 nodes, init
//! and measured pods scaled alike) so the whole bench runs in about two
//! minutes; PreemptionBasic at its standard 1000Nodes size. The same
//! workloads run end to end against kube-scheduler in crates/e2e
//! (workload.rs).
//!
//! `cargo bench -p gpu-scheduler-sim --bench scheduler_perf`

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use engine::config::Configuration;
use engine::convert::pod_from_k8s;
use engine::framework::Binder;
use engine::gang::PodGroup;
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::resources::Resources;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::node;
use serde_json::{Value, json};

struct NoopBinder;
impl Binder for NoopBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// The engine's clock at the start of every iteration: 2026-01-01T00:00:00Z.
const NOW: u64 = 1_767_225_600_000;
const NAMESPACE: &str = "bench";
const GANG_SIZE: usize = 3;

fn pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().build().expect("thread pool"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    SchedulingPodAntiAffinity,
    SchedulingPodAffinity,
    TopologySpreading,
    PreferredTopologySpreading,
    SchedulingNodeAffinity,
    PreemptionBasic,
    GangScheduling,
}

const CASES: [Case; 7] = [
    Case::SchedulingPodAntiAffinity,
    Case::SchedulingPodAffinity,
    Case::TopologySpreading,
    Case::PreferredTopologySpreading,
    Case::SchedulingNodeAffinity,
    Case::PreemptionBasic,
    Case::GangScheduling,
];

impl Case {
    /// Nodes, init pods, measured pods.
    fn size(self) -> (usize, usize, usize) {
        match self {
            Case::SchedulingPodAntiAffinity => (1000, 200, 200),
            Case::SchedulingPodAffinity | Case::SchedulingNodeAffinity => (1000, 1000, 200),
            Case::TopologySpreading | Case::PreferredTopologySpreading => (1000, 1000, 400),
            Case::PreemptionBasic => (1000, 4000, 1000),
            Case::GangScheduling => (1000, 0, 600),
        }
    }

    fn zone(self, i: usize) -> Option<String> {
        match self {
            Case::SchedulingPodAffinity | Case::SchedulingNodeAffinity => Some("zone1".into()),
            Case::TopologySpreading | Case::PreferredTopologySpreading => Some(format!("moon-{}", i % 3 + 1)),
            _ => None,
        }
    }

    /// Where init pod `j` is bound, as a scheduler may place it: anti-affinity
    /// pods one per node, evenly apart; victims four per node; others in turn.
    fn init_node(self, j: usize) -> usize {
        let (nodes, init, _) = self.size();
        match self {
            Case::SchedulingPodAntiAffinity => j * nodes / init,
            Case::PreemptionBasic => j / 4,
            _ => j % nodes,
        }
    }

    /// The init pods' spec fields beside the container, labels and cpu.
    fn init_template(self) -> (Value, Value, &'static str) {
        match self {
            Case::SchedulingPodAntiAffinity | Case::SchedulingPodAffinity | Case::SchedulingNodeAffinity => {
                self.measured_template(0)
            }
            Case::PreemptionBasic => (json!({}), json!({}), "900m"),
            _ => (json!({}), json!({}), "100m"),
        }
    }

    /// Measured pod `i`'s spec fields beside the container, labels and cpu.
    fn measured_template(self, i: usize) -> (Value, Value, &'static str) {
        let term = |color: &str, key: &str| {
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key}]})
        };
        let spread = |action: &str| {
            json!({"topologySpreadConstraints": [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": action, "labelSelector": {"matchLabels": {"color": "blue"}}}]})
        };
        match self {
            Case::SchedulingPodAntiAffinity => (
                json!({"affinity": {"podAntiAffinity": term("green", "kubernetes.io/hostname")}}),
                json!({"color": "green"}),
                "100m",
            ),
            Case::SchedulingPodAffinity => (
                json!({"affinity": {"podAffinity": term("blue", "topology.kubernetes.io/zone")}}),
                json!({"color": "blue"}),
                "100m",
            ),
            Case::TopologySpreading => (spread("DoNotSchedule"), json!({"color": "blue"}), "100m"),
            Case::PreferredTopologySpreading => (spread("ScheduleAnyway"), json!({"color": "blue"}), "100m"),
            Case::SchedulingNodeAffinity => (
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone1", "zone2"]}]}]}}}}),
                json!({}),
                "100m",
            ),
            // The priority admission would set from the preemptors' class.
            Case::PreemptionBasic => (json!({"priority": 10}), json!({}), "3"),
            Case::GangScheduling => {
                (json!({}), json!({"scheduling.x-k8s.io/pod-group": format!("gang-{}", i / GANG_SIZE)}), "100m")
            }
        }
    }

    /// Converted as `run` converts a watched pod.
    fn pod(self, name: &str, (mut spec, labels, cpu): (Value, Value, &str), node: Option<usize>) -> Pod {
        let memory = if self == Case::GangScheduling { "100Mi" } else { "500Mi" };
        let requests = json!({"cpu": cpu, "memory": memory});
        spec["containers"] = json!([{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": requests, "limits": requests}}]);
        spec["schedulerName"] = json!("gpu-scheduler");
        if let Some(n) = node {
            spec["nodeName"] = json!(format!("node-{n}"));
        }
        let obj = json!({"metadata": {"name": name, "namespace": NAMESPACE, "labels": labels}, "spec": spec});
        let k8s: k8s_openapi::api::core::v1::Pod = serde_json::from_value(obj).expect("a pod");
        pod_from_k8s(&k8s).expect("a valid pod")
    }

    /// The cluster before measuring: nodes, init pods bound, PodGroups.
    fn cluster(self) -> Scheduler {
        let cfg = Configuration::default();
        let profiles =
            build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()).expect("default profile");
        let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
        let (nodes, init, measured) = self.size();
        for i in 0..nodes {
            let mut n = node(&format!("node-{i}"));
            if let Some(zone) = self.zone(i) {
                n = n.zone(&zone);
            }
            s.on_node_upsert(n.build(), NOW);
        }
        for j in 0..init {
            s.on_pod_upsert(self.pod(&format!("init-{j}"), self.init_template(), Some(self.init_node(j))), NOW);
        }
        if self == Case::GangScheduling {
            for g in 0..measured / GANG_SIZE {
                let group = PodGroup {
                    namespace: NAMESPACE.into(),
                    name: format!("gang-{g}"),
                    min_member: GANG_SIZE as u32,
                    min_resources: Resources::default(),
                    schedule_timeout: None,
                    topology_key: None,
                };
                s.on_pod_group_upsert(group, NOW);
            }
        }
        s
    }

    fn measured_pods(self) -> Vec<Pod> {
        (0..self.size().2).map(|i| self.pod(&format!("p-{i}"), self.measured_template(i), None)).collect()
    }
}

/// Decides until the queue is empty, binding what is assumed and deleting
/// the victims of preemption at once (no grace period, as in
/// PreemptionBasic); the clock jumps to the end of a backoff when nothing
/// else is ready. Returns the pods bound.
fn drain(s: &mut Scheduler) -> usize {
    let mut now = NOW;
    let mut bound = 0;
    loop {
        let Some(outcome) = s.schedule_one(now) else {
            match s.queue().next_backoff_expiry() {
                Some(t) if t > now => {
                    now = t;
                    continue;
                }
                _ => return bound,
            }
        };
        match outcome {
            CycleOutcome::Assumed(mut task) => {
                let status = task.bind(&NoopBinder);
                let pod = task.pod.clone();
                s.finish_binding(*task, &status, now);
                s.on_pod_upsert((*pod).clone(), now);
                bound += 1;
            }
            CycleOutcome::Failed(f) => {
                for v in &f.victims {
                    s.on_pod_delete(&v.uid, now);
                }
            }
        }
    }
}

fn bench_case(c: &mut Criterion, case: Case) {
    let (nodes, init, measured) = case.size();
    let mut g = c.benchmark_group(format!("{case:?}"));
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(measured as u64));
    let id = BenchmarkId::from_parameter(format!("{nodes}Nodes_{init}Init_{measured}Pods"));
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut s = case.cluster();
                let pods = case.measured_pods();
                total += pool().install(|| {
                    let start = Instant::now();
                    for p in pods {
                        s.on_pod_upsert(p, NOW);
                    }
                    let bound = drain(&mut s);
                    let elapsed = start.elapsed();
                    assert_eq!(bound, measured, "{case:?}: pods left unbound");
                    elapsed
                });
            }
            total
        })
    });
    g.finish();
}

fn scheduler_perf(c: &mut Criterion) {
    for case in CASES {
        bench_case(c, case);
    }
}

criterion_group!(benches, scheduler_perf);
criterion_main!(benches);
