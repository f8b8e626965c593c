//! What a live run exposes: Prometheus metrics (kube-scheduler's names
//! where the meaning is the same, `gpu_scheduler_*` for ours) and the
//! health the `/healthz` and `/readyz` endpoints report. Written by the
//! scheduling thread and the binding tasks, read by the HTTP server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use engine::cache::Cache;
use engine::framework::Code;
use engine::instrument::Instrument;
use engine::node_info::cluster_fragmentation;
use engine::queue::QueueLengths;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The GPU resource the GPU metrics count.
pub const GPU: &str = "nvidia.com/gpu";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// scheduled, unschedulable or error, as kube-scheduler.
    pub result: &'static str,
    pub profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: &'static str,
    extension_point: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExtenderLabels {
    extender: &'static str,
    verb: &'static str,
    /// "true" when the cycle went on without the extender.
    ignored: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PointLabels {
    extension_point: &'static str,
    status: &'static str,
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptsLabel {
    attempts: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueResourceLabels {
    queue: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueNameLabel {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    profile: String,
    /// The rule's name; "" is the profile as written.
    rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvictionLabel {
    /// evicted, refused (a PodDisruptionBudget's 429), gone, failed, dry_run.
    result: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_buckets() -> Histogram {
    // 1 ms to about 16 s, as kube-scheduler's attempt buckets.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn plugin_buckets() -> Histogram {
    // 10 µs to about 160 ms: one plugin call, or one extension point.
    Histogram::new(exponential_buckets(0.00001, 2.0, 15))
}

fn sli_buckets() -> Histogram {
    // 10 ms to about 5 h: a pod may wait long for room.
    Histogram::new(exponential_buckets(0.01, 2.0, 21))
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    attempt_duration: Histograms<AttemptLabels>,
    pending: Family<QueueLabel, Gauge>,
    sli: Histograms<AttemptsLabel>,
    plugin_duration: Histograms<PluginLabels>,
    point_duration: Histograms<PointLabels>,
    binding_errors: Family<ReasonLabel, Counter>,
    leader: Gauge,
    gpus: Family<StateLabel, Gauge>,
    fragmentation: Gauge<f64, AtomicU64>,
    dropped_reports: Counter,
    extender_errors: Family<ExtenderLabels, Counter>,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
    gangs: Family<PhaseLabel, Gauge>,
    held_gpus: Gauge,
    bindings_in_flight: Gauge,
    fact_source_up: Family<SourceLabel, Gauge>,
    queue_usage: Family<QueueResourceLabels, Gauge<f64, AtomicU64>>,
    queue_quota: Family<QueueResourceLabels, Gauge<f64, AtomicU64>>,
    queue_pending: Family<QueueNameLabel, Gauge>,
    queue_admitted: Family<QueueNameLabel, Gauge>,
    spot_evictions: Family<EvictionLabel, Counter>,
    spot_draining_nodes: Gauge,
    config_generation: Gauge,
    config_reloads: Family<ResultLabel, Counter>,
    policy_switches: Family<PolicyLabels, Counter>,
    policy_active: Family<PolicyLabels, Gauge>,
    /// Whether every watch has listed once.
    synced: AtomicBool,
    /// When the scheduling thread last went round its loop (ms since the
    /// epoch); it wakes at least every second.
    heartbeat: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let attempts = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            attempts.clone(),
        );
        let attempt_duration: Histograms<AttemptLabels> = Family::new_with_constructor(latency_buckets);
        registry.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            attempt_duration.clone(),
        );
        let pending = Family::<QueueLabel, Gauge>::default();
        registry.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods; 'gated' is the number of pods held by PreEnqueue plugins.",
            pending.clone(),
        );
        let sli: Histograms<AttemptsLabel> = Family::new_with_constructor(sli_buckets);
        registry.register(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue until it is bound, by the number of attempts.",
            sli.clone(),
        );
        let plugin_duration: Histograms<PluginLabels> = Family::new_with_constructor(plugin_buckets);
        registry.register(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a once-per-cycle extension point (PreFilter, PreScore, NormalizeScore).",
            plugin_duration.clone(),
        );
        let point_duration: Histograms<PointLabels> = Family::new_with_constructor(plugin_buckets);
        registry.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point (Filter and Score over all nodes evaluated).",
            point_duration.clone(),
        );
        let binding_errors = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "gpu_scheduler_binding_errors",
            "Bindings that failed, by reason: pod_gone (404 or deleted), conflict (already bound or changed), other.",
            binding_errors.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "gpu_scheduler_leader",
            "1 while this replica holds the leader Lease and schedules.",
            leader.clone(),
        );
        let gpus = Family::<StateLabel, Gauge>::default();
        registry.register(
            "gpu_scheduler_gpus",
            "nvidia.com/gpu over all nodes: allocatable, and requested by the pods bound or assumed.",
            gpus.clone(),
        );
        let fragmentation = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "gpu_scheduler_gpu_fragmentation_ratio",
            "Share of the free GPU capacity that no typical pod can use (FGD's measure, against the pod shapes the scheduler has learned; 0 when nothing is free).",
            fragmentation.clone(),
        );
        let dropped_reports = Counter::default();
        registry.register(
            "gpu_scheduler_dropped_reports",
            "Events and status updates dropped because their queue was full.",
            dropped_reports.clone(),
        );
        let extender_errors = Family::<ExtenderLabels, Counter>::default();
        registry.register(
            "gpu_scheduler_extender_errors",
            "Extender calls that failed, by extender (its urlPrefix) and verb; ignored=true when the extender is ignorable and the cycle went on without it.",
            extender_errors.clone(),
        );
        let preemption_attempts = Counter::default();
        registry.register(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            preemption_attempts.clone(),
        );
        // kube-scheduler's buckets: 1 to 64 victims.
        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        registry.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            preemption_victims.clone(),
        );
        let gangs = Family::<PhaseLabel, Gauge>::default();
        registry.register(
            "gpu_scheduler_gangs",
            "PodGroups known to the scheduler, by the phase it last wrote (Pending, Unknown, Scheduled, Running).",
            gangs.clone(),
        );
        let held_gpus = Gauge::default();
        registry.register(
            "gpu_scheduler_held_gpus",
            "Allocatable GPUs of the nodes the starvation guard holds for pods that waited too long.",
            held_gpus.clone(),
        );
        let bindings_in_flight = Gauge::default();
        registry.register(
            "gpu_scheduler_bindings_in_flight",
            "Bindings started and not yet reported back (their pods are assumed in the cache).",
            bindings_in_flight.clone(),
        );
        let fact_source_up = Family::<SourceLabel, Gauge>::default();
        registry.register(
            "gpu_scheduler_fact_source_up",
            "1 while a node-fact source (alert Events, or a nodeFacts.prometheus query by its fact name) answers, 0 during an outage.",
            fact_source_up.clone(),
        );
        let spot_evictions = Family::<EvictionLabel, Counter>::default();
        registry.register(
            "gpu_scheduler_spot_evictions",
            "Evictions by the spot rebalancer, by result: evicted, refused (a PodDisruptionBudget said 429: tried later), gone (deleted meanwhile), failed, dry_run (reported only).",
            spot_evictions.clone(),
        );
        let spot_draining_nodes = Gauge::default();
        registry.register(
            "gpu_scheduler_spot_draining_nodes",
            "Spot nodes within the expiry window that the rebalancer taints and drains.",
            spot_draining_nodes.clone(),
        );
        let config_generation = Gauge::default();
        registry.register(
            "gpu_scheduler_config_generation",
            "The configuration in force: 1 as started, one more for each reload applied.",
            config_generation.clone(),
        );
        config_generation.set(1);
        let config_reloads = Family::<ResultLabel, Counter>::default();
        registry.register(
            "gpu_scheduler_config_reloads",
            "Changes of the configuration file seen, by result: applied, or rejected (invalid, or needing a restart; the old configuration kept).",
            config_reloads.clone(),
        );
        let policy_switches = Family::<PolicyLabels, Counter>::default();
        registry.register(
            "gpu_scheduler_policy_switches",
            "Changes of a profile's policySwitch rule, by the rule entered (\"\" is the profile as written).",
            policy_switches.clone(),
        );
        let policy_active = Family::<PolicyLabels, Gauge>::default();
        registry.register(
            "gpu_scheduler_policy_active",
            "1 for the policySwitch rule in force per profile (\"\" is the profile as written).",
            policy_active.clone(),
        );
        let queue_usage = Family::<QueueResourceLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "gpu_scheduler_queue_usage",
            "What a Queue and its descendants use, by resource (GPUs and cpu cores as numbers, memory in bytes; nvidia.com/gpu:MODEL per GPU model).",
            queue_usage.clone(),
        );
        let queue_quota = Family::<QueueResourceLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "gpu_scheduler_queue_quota",
            "A Queue's nominal quota, by resource (units as gpu_scheduler_queue_usage).",
            queue_quota.clone(),
        );
        let queue_pending = Family::<QueueNameLabel, Gauge>::default();
        registry.register(
            "gpu_scheduler_queue_pending_pods",
            "Pods of a Queue waiting to be scheduled.",
            queue_pending.clone(),
        );
        let queue_admitted = Family::<QueueNameLabel, Gauge>::default();
        registry.register(
            "gpu_scheduler_queue_admitted_pods",
            "Pods of a Queue bound or being bound.",
            queue_admitted.clone(),
        );
        Metrics {
            config_generation,
            config_reloads,
            policy_switches,
            policy_active,
            queue_usage,
            queue_quota,
            queue_pending,
            queue_admitted,
            fact_source_up,
            spot_evictions,
            spot_draining_nodes,
            bindings_in_flight,
            registry,
            extender_errors,
            preemption_attempts,
            preemption_victims,
            gangs,
            held_gpus,
            attempts,
            attempt_duration,
            pending,
            sli,
            plugin_duration,
            point_duration,
            binding_errors,
            leader,
            gpus,
            fragmentation,
            dropped_reports,
            synced: AtomicBool::new(false),
            heartbeat: AtomicU64::new(now_ms()),
        }
    }

    /// The Prometheus text format of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn attempt(&self, result: &'static str, profile: &str, took: Duration) {
        let labels = AttemptLabels { result, profile: profile.to_string() };
        self.attempts.get_or_create(&labels).inc();
        self.attempt_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// The engine's [`Instrument`]: times plugins and extension points
    /// into these metrics.
    pub fn instrument(self: &Arc<Self>) -> Arc<dyn Instrument> {
        Arc::new(Timer { metrics: self.clone(), epoch: Instant::now() })
    }

    /// A pod bound: its latency from first entering the queue.
    pub fn scheduled(&self, attempts: u32, since_first_seen: Duration) {
        let label = AttemptsLabel { attempts: if attempts >= 15 { "15+".into() } else { attempts.to_string() } };
        self.sli.get_or_create(&label).observe(since_first_seen.as_secs_f64());
    }

    pub fn binding_error(&self, reason: &'static str) {
        self.binding_errors.get_or_create(&ReasonLabel { reason }).inc();
    }

    pub fn set_bindings_in_flight(&self, n: usize) {
        self.bindings_in_flight.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// One Queue's gauges; amounts in the engine's units.
    pub fn set_queue_status(
        &self,
        queue: &engine::queues::QueueStatus,
        quota: &std::collections::BTreeMap<String, i64>,
        pending: usize,
    ) {
        let natural = |key: &str, v: i64| {
            let base = key.split(':').next().unwrap_or(key);
            if base == GPU || base == "cpu" { v as f64 / 1000.0 } else { v as f64 }
        };
        let labels = |resource: &str| QueueResourceLabels { queue: queue.name.clone(), resource: resource.to_string() };
        for (k, v) in &queue.usage {
            self.queue_usage.get_or_create(&labels(k)).set(natural(k, *v));
        }
        for (k, v) in quota {
            self.queue_quota.get_or_create(&labels(k)).set(natural(k, *v));
        }
        let name = QueueNameLabel { queue: queue.name.clone() };
        self.queue_pending.get_or_create(&name).set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.queue_admitted.get_or_create(&name).set(i64::try_from(queue.admitted).unwrap_or(i64::MAX));
    }

    /// Whether the node-fact source `source` answers.
    pub fn set_fact_source_up(&self, source: &str, up: bool) {
        self.fact_source_up.get_or_create(&SourceLabel { source: source.to_string() }).set(i64::from(up));
    }

    /// One eviction by the spot rebalancer, by its result.
    pub fn spot_eviction(&self, result: &'static str) {
        self.spot_evictions.get_or_create(&EvictionLabel { result }).inc();
    }

    /// `n` evictions with one result at once (a dry run's node).
    pub fn spot_eviction_n(&self, result: &'static str, n: usize) {
        self.spot_evictions.get_or_create(&EvictionLabel { result }).inc_by(n as u64);
    }

    pub fn set_config_generation(&self, generation: u64) {
        self.config_generation.set(i64::try_from(generation).unwrap_or(i64::MAX));
    }

    /// A change of the configuration file: `applied` or `rejected`.
    pub fn config_reload(&self, result: &'static str) {
        self.config_reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// A profile's policy rule changed to `rule` (None: the profile as written).
    pub fn policy_switch(&self, profile: &str, rule: Option<&str>) {
        let labels = PolicyLabels { profile: profile.to_string(), rule: rule.unwrap_or_default().to_string() };
        self.policy_switches.get_or_create(&labels).inc();
    }

    /// The rule in force per profile, from [`Scheduler::active_policies`](engine::scheduler::Scheduler::active_policies).
    pub fn set_active_policies(&self, active: &[(&str, usize, Option<&str>)]) {
        self.policy_active.clear();
        for (profile, _, rule) in active {
            let labels = PolicyLabels { profile: profile.to_string(), rule: rule.unwrap_or_default().to_string() };
            self.policy_active.get_or_create(&labels).set(1);
        }
    }

    pub fn set_spot_draining_nodes(&self, n: usize) {
        self.spot_draining_nodes.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    pub fn set_queue(&self, q: &QueueLengths, gated: usize) {
        for (queue, n) in
            [("active", q.active), ("backoff", q.backoff), ("unschedulable", q.unschedulable), ("gated", gated)]
        {
            self.pending.get_or_create(&QueueLabel { queue }).set(n as i64);
        }
    }

    pub fn set_gpus(&self, g: GpuUsage) {
        self.gpus.get_or_create(&StateLabel { state: "allocatable" }).set(g.allocatable);
        self.gpus.get_or_create(&StateLabel { state: "requested" }).set(g.requested);
        self.fragmentation.set(g.fragmentation());
    }

    /// A PostFilter (preemption) ran; `victims` were chosen, if any.
    pub fn preemption(&self, victims: usize) {
        self.preemption_attempts.inc();
        if victims > 0 {
            self.preemption_victims.observe(victims as f64);
        }
    }

    /// PodGroups by phase.
    pub fn set_gangs(&self, by_phase: &[(engine::gang::GangPhase, usize)]) {
        for (phase, n) in by_phase {
            self.gangs.get_or_create(&PhaseLabel { phase: phase.as_str() }).set(*n as i64);
        }
    }

    pub fn set_held_gpus(&self, n: i64) {
        self.held_gpus.set(n);
    }

    pub fn set_dropped_reports(&self, total: u64) {
        let seen = self.dropped_reports.get();
        if total > seen {
            self.dropped_reports.inc_by(total - seen);
        }
    }

    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// Ready: every watch has listed once (leader, or a warm follower).
    pub fn ready(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    pub fn beat(&self) {
        self.heartbeat.store(now_ms(), Ordering::Relaxed);
    }

    /// Alive: the scheduling thread went round its loop lately.
    pub fn alive(&self, within: Duration) -> bool {
        now_ms().saturating_sub(self.heartbeat.load(Ordering::Relaxed)) <= within.as_millis() as u64
    }
}

/// The clock behind the engine's timings: monotonic, from an epoch.
struct Timer {
    metrics: Arc<Metrics>,
    epoch: Instant,
}

impl Instrument for Timer {
    fn now_nanos(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn plugin_executed(&self, plugin: &'static str, extension_point: &'static str, code: Code, nanos: u64) {
        let labels = PluginLabels { plugin, extension_point, status: code.as_str() };
        self.metrics.plugin_duration.get_or_create(&labels).observe(nanos as f64 / 1e9);
    }

    fn extension_point(&self, extension_point: &'static str, code: Code, profile: &str, nanos: u64) {
        let labels = PointLabels { extension_point, status: code.as_str(), profile: profile.to_string() };
        self.metrics.point_duration.get_or_create(&labels).observe(nanos as f64 / 1e9);
    }

    fn extender_error(&self, extender: &'static str, verb: &'static str, ignored: bool) {
        let labels = ExtenderLabels { extender, verb, ignored: if ignored { "true" } else { "false" } };
        self.metrics.extender_errors.get_or_create(&labels).inc();
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// GPUs over all nodes.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct GpuUsage {
    pub allocatable: i64,
    /// Whole GPUs requested (`nvidia.com/gpu`; shares are not counted).
    pub requested: i64,
    /// The fragmentation figure: the share of the free GPU capacity (shares
    /// included) that no typical pod shape can use.
    pub fragmentation: f64,
}

impl GpuUsage {
    pub fn of(cache: &Cache) -> GpuUsage {
        let mut g = GpuUsage::default();
        for info in cache.node_infos() {
            let alloc = info.node.allocatable.get(GPU);
            if alloc <= 0 {
                continue;
            }
            g.allocatable += alloc;
            g.requested += info.requested.get(GPU).clamp(0, alloc);
        }
        g.fragmentation = cluster_fragmentation(cache.node_infos().map(|n| n.as_ref()), cache.gpu_shapes()).ratio();
        g
    }

    pub fn fragmentation(&self) -> f64 {
        self.fragmentation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::testing::{node, pod};

    #[test]
    fn gpu_usage_measures_fragmentation() {
        let mut cache = Cache::new();
        for (name, gpus) in [("idle", 8), ("half", 8), ("full", 4), ("cpu", 0)] {
            let mut n = node(name).capacity(64_000, 256 << 30).pods(110);
            if gpus > 0 {
                n = n.resource(GPU, gpus);
            }
            cache.upsert_node(n.build());
        }
        let bind = |cache: &mut Cache, name: &str, node_name: &str, gpus: i64| {
            let p = pod(name).resource(GPU, gpus).node(node_name).arc();
            cache.add_pod(p).unwrap_or_else(|e| panic!("{e}"));
        };
        bind(&mut cache, "a", "half", 4);
        bind(&mut cache, "b", "full", 4);
        let g = GpuUsage::of(&cache);
        assert_eq!((g.allocatable, g.requested), (20, 8));
        // Shapes: the two 4-GPU pods seen (1/2), the prior's whole GPU and
        // 8-GPU node (1/4 each). 12 GPUs free: the idle node's 8 host
        // every shape; the half-used node's 4 cannot host an 8-GPU pod.
        assert!((g.fragmentation() - (4.0 / 4.0) / 12.0).abs() < 1e-3, "{}", g.fragmentation());
        assert_eq!(GpuUsage::default().fragmentation(), 0.0);
    }

    #[test]
    fn metrics_use_kube_scheduler_names() {
        let m = Metrics::new();
        m.attempt("scheduled", "gpu-scheduler", Duration::from_millis(3));
        m.set_queue(&QueueLengths { active: 2, backoff: 1, unschedulable: 4, in_flight: 0 }, 0);
        m.scheduled(1, Duration::from_millis(50));
        m.preemption(0);
        m.preemption(3);
        m.set_gangs(&[(engine::gang::GangPhase::Pending, 2), (engine::gang::GangPhase::Scheduled, 1)]);
        m.set_held_gpus(8);
        let timer = Arc::new(Metrics::new());
        let i = timer.instrument();
        i.plugin_executed("NodeResourcesFit", "PreFilter", Code::Success, 20_000);
        i.extension_point("Filter", Code::Unschedulable, "gpu-scheduler", 50_000);
        i.extender_error("http://ext:8888", "filter", true);
        i.extender_error("http://ext:8888", "filter", true);
        let timings = timer.encode();
        for want in [
            "gpu_scheduler_extender_errors_total{extender=\"http://ext:8888\",verb=\"filter\",ignored=\"true\"} 2",
            "scheduler_plugin_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",extension_point=\"PreFilter\",status=\"Success\"} 1",
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Unschedulable\",profile=\"gpu-scheduler\"} 1",
        ] {
            assert!(timings.contains(want), "missing {want} in\n{timings}");
        }
        let text = m.encode();
        for want in [
            "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"gpu-scheduler\"} 1",
            "scheduler_pending_pods{queue=\"unschedulable\"} 4",
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"gpu-scheduler\"} 1",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"} 1",
            "scheduler_preemption_attempts_total 2",
            "scheduler_preemption_victims_count 1",
            "scheduler_preemption_victims_sum 3.0",
            "gpu_scheduler_gangs{phase=\"Pending\"} 2",
            "gpu_scheduler_gangs{phase=\"Scheduled\"} 1",
            "gpu_scheduler_held_gpus 8",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
    }
}
