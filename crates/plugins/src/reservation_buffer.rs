//! ReservationBuffer: keeps room for system-critical pods, the article's
//! "always reserve at least 10 % for system components". A pod with
//! priority at or below `maxPriority` (1,000,000: everything under the
//! built-in `system-cluster-critical` / `system-node-critical` classes)
//! may take a node only while the requests of all pods there, its own
//! included, stay within `fraction` (90 %) of allocatable cpu and memory;
//! higher-priority pods may use the rest.
//!
//! GPU nodes are the exception (`gpuNodes`): there the last 10 % of cpu
//! and memory held back from every node strands GPUs (an 8-GPU pod asking
//! for 88 of a node's 96 cores fits nowhere, and the node's eight GPUs
//! stay idle; cpu-only pods kept off full nodes' reserves take the cpu
//! that nodes with free GPUs need). So a pod may fill a GPU node past the
//! line as long as the node's pool still has `keptNodesPercent` (10 %) of
//! its GPU nodes with the reserve whole. A pool is the nodes sharing a
//! value of `poolLabel`, or by default a GPU model. Nodes without GPUs
//! keep the line for every pod. Critical pods therefore always find room:
//! every node without GPUs, and at least one node in ten of each GPU pool,
//! keeps its reserve (docs/POLICIES.md has the figures of the trade-off).
//!
//! This is also where the article's "×1.5 score for priority > 1,000,000"
//! went: multiplying every node's score by the same factor cannot change
//! which node wins, whereas access to the reserve does (docs/POLICIES.md).

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use framework::model::Pod;
use framework::node_info::{NodeInfo, NodeSummary};
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::skip_if;

pub const NAME: &str = "ReservationBuffer";

/// `ReservationBufferArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservationBufferArgs {
    /// Pods with a priority above this may use the reserve.
    #[serde(default = "default_max_priority")]
    pub max_priority: i32,
    /// The share of allocatable cpu and memory other pods may fill.
    #[serde(default = "default_fraction")]
    pub fraction: f64,
    /// How pods may use GPU nodes' reserve.
    #[serde(default)]
    pub gpu_nodes: GpuNodesArgs,
}

/// `gpuNodes`: the reserve of GPU nodes, kept whole on part of each pool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuNodesArgs {
    /// The share of each pool's GPU nodes (rounded up) that keep their
    /// reserve whole; 100 keeps it on every node, as for nodes without GPUs.
    #[serde(default = "default_kept_percent")]
    pub kept_nodes_percent: u32,
    /// Nodes with the same value of this label form a pool; unset, or on a
    /// node without it, the pool is the node's GPU model.
    #[serde(default)]
    pub pool_label: Option<String>,
}

fn default_max_priority() -> i32 {
    1_000_000
}

fn default_fraction() -> f64 {
    0.9
}

fn default_kept_percent() -> u32 {
    10
}

impl Default for GpuNodesArgs {
    fn default() -> Self {
        GpuNodesArgs { kept_nodes_percent: default_kept_percent(), pool_label: None }
    }
}

impl Default for ReservationBufferArgs {
    fn default() -> Self {
        ReservationBufferArgs {
            max_priority: default_max_priority(),
            fraction: default_fraction(),
            gpu_nodes: GpuNodesArgs::default(),
        }
    }
}

impl ReservationBufferArgs {
    pub fn validate(&self) -> Result<(), ArgsError> {
        ArgsError::check("fraction", framework::bounds::Interval::above(0.0, 1.0).check(self.fraction))?;
        if self.gpu_nodes.kept_nodes_percent > 100 {
            return Err(ArgsError::new(
                "gpuNodes.keptNodesPercent",
                format!("{}: must be in [0, 100]", self.gpu_nodes.kept_nodes_percent),
            ));
        }
        if self.gpu_nodes.pool_label.as_deref() == Some("") {
            return Err(ArgsError::new("gpuNodes.poolLabel", "must not be empty (leave it out for GPU models)"));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct ReservationBuffer {
    max_priority: i32,
    /// Parts per million of allocatable: integer arithmetic in Filter.
    ppm: i64,
    kept_percent: u32,
    pool_label: Option<String>,
    cpu_reason: String,
    memory_reason: String,
}

/// Each GPU pool's nodes and how many of them keep their reserve whole,
/// counted in PreFilter for a pod that would cross the line somewhere.
#[derive(Debug, Default)]
struct GpuPools {
    /// (pool, schedulable GPU nodes, of them with the reserve whole).
    pools: Vec<(Option<Arc<str>>, u32, u32)>,
}

impl ReservationBuffer {
    /// What a non-critical pod may fill of `allocatable`.
    fn limit(&self, allocatable: i64) -> i64 {
        // 128-bit division is a library call: only when 64 bits overflow
        // (more than 9 TB of memory).
        match allocatable.checked_mul(self.ppm) {
            Some(v) => v / 1_000_000,
            None => i64::try_from(i128::from(allocatable) * i128::from(self.ppm) / 1_000_000).unwrap_or(i64::MAX),
        }
    }

    /// Whether nothing has taken the node's reserve yet.
    fn whole(&self, s: &NodeSummary) -> bool {
        s.requested_milli_cpu <= self.limit(s.allocatable_milli_cpu)
            && s.requested_memory <= self.limit(s.allocatable_memory)
    }

    /// How many of `nodes` GPU nodes keep the reserve: the percentage,
    /// rounded up.
    fn kept(&self, nodes: u32) -> u64 {
        (u64::from(nodes) * u64::from(self.kept_percent)).div_ceil(100)
    }

    /// Whether `pod` would cross the line on some schedulable GPU node:
    /// only then are the pools counted (the summaries alone tell).
    fn crosses_somewhere(&self, pod: &Pod, snapshot: &Snapshot) -> bool {
        let r = &pod.requests;
        snapshot.summaries().iter().any(|s| {
            s.has_gpus
                && !s.unschedulable
                && ((r.milli_cpu > 0 && s.requested_milli_cpu + r.milli_cpu > self.limit(s.allocatable_milli_cpu))
                    || (r.memory > 0 && s.requested_memory + r.memory > self.limit(s.allocatable_memory)))
        })
    }

    /// A node's pool without copying its name (`pool`, borrowed).
    fn pool_of<'a>(&self, info: &'a NodeInfo) -> Option<&'a str> {
        let label = self.pool_label.as_deref().and_then(|k| info.node.labels.get(k));
        match label {
            Some(v) => Some(v.as_str()),
            None => info.facts.gpu_model.as_deref(),
        }
    }

    /// Runs for every pod that would cross the line on a GPU node, over
    /// every node: summaries first, names borrowed, a handful of pools.
    fn count_pools(&self, snapshot: &Snapshot) -> GpuPools {
        let mut pools: Vec<(Option<&str>, u32, u32)> = Vec::new();
        for (s, info) in snapshot.summaries().iter().zip(snapshot.nodes()) {
            if !s.has_gpus || s.unschedulable {
                continue;
            }
            let pool = self.pool_of(info);
            let whole = u32::from(self.whole(s));
            match pools.iter_mut().find(|(p, _, _)| *p == pool) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 += whole;
                }
                None => pools.push((pool, 1, whole)),
            }
        }
        GpuPools { pools: pools.into_iter().map(|(p, n, w)| (p.map(Arc::from), n, w)).collect() }
    }

    /// Whether a pod may fill this GPU node's reserve: the node's pool
    /// keeps enough nodes whole without it.
    fn may_fill(&self, state: &CycleState, node: &NodeView<'_>) -> bool {
        let Some(pools) = state.read::<GpuPools>() else { return false };
        let pool = self.pool_of(node.info());
        let Some(&(_, nodes, whole)) = pools.pools.iter().find(|(p, _, _)| p.as_deref() == pool) else { return false };
        let others = whole.saturating_sub(u32::from(self.whole(node.summary())));
        u64::from(others) >= self.kept(nodes)
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: ReservationBufferArgs = decode_args(args)?;
    args.validate()?;
    // Rounded to whole percent tenths for the message; exact in the check.
    let percent = format!("{}", (args.fraction * 1000.0).round() / 10.0);
    let reason = |r: &str| format!("node(s) would exceed {percent}% of {r} (reserved for critical pods)");
    Ok(Arc::new(ReservationBuffer {
        max_priority: args.max_priority,
        ppm: (args.fraction * 1_000_000.0).round() as i64,
        kept_percent: args.gpu_nodes.kept_nodes_percent,
        pool_label: args.gpu_nodes.pool_label,
        cpu_reason: reason("cpu"),
        memory_reason: reason("memory"),
    }))
}

impl Plugin for ReservationBuffer {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Room appears when pods leave or nodes grow (a new GPU node also
    /// lets its pool keep the reserve on fewer others).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for ReservationBuffer {
    /// Critical pods, and pods that request neither cpu nor memory, are not
    /// this plugin's concern. For a pod that would cross the line on some
    /// GPU node, each GPU pool's nodes with the reserve whole are counted
    /// once here.
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let exempt = pod.priority > self.max_priority || (pod.requests.milli_cpu == 0 && pod.requests.memory == 0);
        if !exempt && self.kept_percent < 100 && self.crosses_somewhere(pod, snapshot) {
            state.write(self.count_pools(snapshot));
        }
        (PreFilterResult::default(), skip_if(exempt))
    }
}

impl FilterPlugin for ReservationBuffer {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        let s = node.summary();
        let r = &pod.requests;
        // Only what the pod adds can push a node over: a node already past
        // the line (critical pods in the reserve) still takes requests of 0.
        let cpu_over = r.milli_cpu > 0 && s.requested_milli_cpu + r.milli_cpu > self.limit(s.allocatable_milli_cpu);
        let memory_over = r.memory > 0 && s.requested_memory + r.memory > self.limit(s.allocatable_memory);
        // A cordoned node (that the pod tolerates) is not counted in its
        // pool and keeps the line.
        if !(cpu_over || memory_over) || (s.has_gpus && !s.unschedulable && self.may_fill(state, node)) {
            return Status::success();
        }
        let reason = if cpu_over { &self.cpu_reason } else { &self.memory_reason };
        Status::unschedulable(Cow::Owned(reason.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::GPU_RESOURCE;
    use framework::framework::Code;
    use framework::testing::{node, pod};

    const GI: i64 = 1 << 30;

    fn plugin(args: serde_json::Value) -> Arc<dyn Plugin> {
        new(Some(&args)).unwrap()
    }

    #[test]
    fn filter_table() {
        // Node: 10 cpu, 10 GiB; `used` cpu (milli) already requested.
        let cases: &[(&str, i64, i64, i64, Option<&str>)] = &[
            ("empty node", 0, 1000, GI, None),
            ("exactly 90% of cpu", 8000, 1000, GI, None),
            ("one milli-cpu over", 8001, 1000, GI, Some("cpu")),
            ("memory over 90%", 0, 1000, 10 * GI, Some("memory")),
            ("9.0 GiB of memory is allowed", 0, 1000, 9 * GI, None),
            ("pod of no cpu on a node past the line", 9500, 0, GI, None),
        ];
        let p = plugin(serde_json::Value::Null);
        let f = p.as_filter().unwrap();
        for (name, used, cpu, mem, want) in cases {
            let mut info = node("n").capacity(10_000, 10 * GI).info();
            if *used > 0 {
                info.add_pod(pod("existing").node("n").req(*used, 0).arc());
            }
            let s = f.filter(&CycleState::new(), &pod("p").req(*cpu, *mem).build(), &info.view());
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(r) => {
                    assert_eq!(s.code, Code::Unschedulable, "{name}");
                    assert_eq!(
                        s.message(),
                        format!("node(s) would exceed 90% of {r} (reserved for critical pods)"),
                        "{name}"
                    );
                }
            }
        }
    }

    #[test]
    fn limits_of_huge_nodes_do_not_overflow() {
        let b = ReservationBuffer {
            max_priority: 0,
            ppm: 900_000,
            kept_percent: 10,
            pool_label: None,
            cpu_reason: String::new(),
            memory_reason: String::new(),
        };
        let tib = 1i64 << 40;
        for alloc in [0, 10, 64 * GI, 20 * tib, i64::MAX] {
            let want = i64::try_from(i128::from(alloc) * 9 / 10).unwrap();
            assert_eq!(b.limit(alloc), want, "{alloc}");
        }
    }

    #[test]
    fn critical_and_empty_pods_skip() {
        let p = plugin(serde_json::Value::Null);
        let pf = p.as_pre_filter().unwrap();
        let snap = Snapshot::new();
        let cases = [
            ("normal pod", pod("p").req(100, 0).priority(0).build(), false),
            ("at the limit is not critical", pod("p").req(100, 0).priority(1_000_000).build(), false),
            ("system-cluster-critical", pod("p").req(100, 0).priority(2_000_000_000).build(), true),
            ("requests nothing", pod("p").build(), true),
        ];
        for (name, pod, skip) in cases {
            assert_eq!(pf.pre_filter(&mut CycleState::new(), &pod, &snap).1.is_skip(), skip, "{name}");
        }
    }

    #[test]
    fn args() {
        let p = plugin(serde_json::json!({"fraction": 0.75, "maxPriority": 10}));
        let info = node("n").capacity(4000, GI).info();
        let s = p.as_filter().unwrap().filter(&CycleState::new(), &pod("p").req(3001, 0).build(), &info.view());
        assert_eq!(s.message(), "node(s) would exceed 75% of cpu (reserved for critical pods)");
        let snap = Snapshot::new();
        let critical = pod("p").req(1, 0).priority(11).build();
        assert!(p.as_pre_filter().unwrap().pre_filter(&mut CycleState::new(), &critical, &snap).1.is_skip());

        for (args, field) in [
            (serde_json::json!({"fraction": 0}), "fraction"),
            (serde_json::json!({"fraction": 1.5}), "fraction"),
            (serde_json::json!({"fraction": "most"}), "fraction"),
            (serde_json::json!({"reserve": 0.1}), "reserve"),
            (serde_json::json!({"gpuNodes": {"keptNodesPercent": 101}}), "gpuNodes.keptNodesPercent"),
            (serde_json::json!({"gpuNodes": {"keptNodesPercent": -1}}), "gpuNodes.keptNodesPercent"),
            (serde_json::json!({"gpuNodes": {"poolLabel": ""}}), "gpuNodes.poolLabel"),
            (serde_json::json!({"gpuNodes": {"pool": "x"}}), "gpuNodes"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }

    /// GPU nodes of 10 cpu / 10 GiB with 8 GPUs, `full` of them with 9.5
    /// cpu requested (reserve taken), the rest with 1 cpu; a pod of
    /// `cpu` asks to fill node "n0" (empty of GPU pods, 1 cpu used).
    /// (name, args, nodes, full, pod GPUs, pod cpu, fits n0)
    #[test]
    fn pods_may_fill_gpu_nodes_while_the_pool_keeps_its_share() {
        type Case = (&'static str, serde_json::Value, usize, usize, i64, i64, bool);
        let cases: &[Case] = &[
            ("gpu pod within the line", serde_json::Value::Null, 10, 0, 8, 8000, true),
            ("gpu pod past the line, 9 others whole", serde_json::Value::Null, 10, 0, 8, 9500, true),
            ("cpu pod past the line, 9 others whole", serde_json::Value::Null, 10, 0, 0, 9500, true),
            ("cpu pod, n0 the last whole node", serde_json::Value::Null, 10, 9, 0, 9500, false),
            // 10 nodes keep ceil(1.0) = 1: n0 may go when one other stays.
            ("one other node still whole", serde_json::Value::Null, 10, 8, 8, 9500, true),
            ("n0 is the last whole node", serde_json::Value::Null, 10, 9, 8, 9500, false),
            // 20 %: 2 of 10 nodes kept.
            (
                "20 %: one other whole is too few",
                serde_json::json!({"gpuNodes": {"keptNodesPercent": 20}}),
                10,
                8,
                8,
                9500,
                false,
            ),
            ("20 %: two others whole", serde_json::json!({"gpuNodes": {"keptNodesPercent": 20}}), 10, 7, 8, 9500, true),
            (
                "100 %: the line on every node",
                serde_json::json!({"gpuNodes": {"keptNodesPercent": 100}}),
                10,
                0,
                8,
                9500,
                false,
            ),
            (
                "0 %: pods may fill every GPU node",
                serde_json::json!({"gpuNodes": {"keptNodesPercent": 0}}),
                10,
                9,
                8,
                9500,
                true,
            ),
            ("a pool of one node keeps it", serde_json::Value::Null, 1, 0, 8, 9500, false),
        ];
        for (name, args, nodes, full, pod_gpus, cpu, fits) in cases {
            let p = plugin(args.clone());
            let mut all = Vec::new();
            let mut pods = Vec::new();
            for i in 0..*nodes {
                let n = format!("n{i}");
                all.push(
                    node(&n).capacity(10_000, 10 * GI).resource(GPU_RESOURCE, 8).label("gpu-model", "a100").build(),
                );
                // n0 is never among the full ones.
                let used = if i >= 1 && i <= *full { 9500 } else { 1000 };
                pods.push(pod(&format!("on-{n}")).node(&n).req(used, 0).arc());
            }
            let snap = Snapshot::from_parts(all, pods);
            let mut q = pod("p").req(*cpu, 0);
            if *pod_gpus > 0 {
                q = q.resource(GPU_RESOURCE, *pod_gpus);
            }
            let q = q.build();
            let mut state = CycleState::new();
            let (_, st) = p.as_pre_filter().unwrap().pre_filter(&mut state, &q, &snap);
            assert!(st.is_success(), "{name}: {st:?}");
            let got = p.as_filter().unwrap().filter(&state, &q, &snap.view(snap.position("n0").unwrap()));
            assert_eq!(got.is_success(), *fits, "{name}: {got:?}");
        }
    }

    /// Pools by GPU model, or by `poolLabel`: a pool at its floor does not
    /// stop another pool's nodes from being filled.
    #[test]
    fn pools_are_counted_apart() {
        // Two a100 nodes (one full), two t4 nodes (both whole), or by the
        // label: a100-0 and t4-0 in pool "x", the others in "y".
        let cases: &[(&str, serde_json::Value, &str, bool)] = &[
            ("a100 pool at its floor", serde_json::Value::Null, "a100-0", false),
            ("t4 pool has room", serde_json::Value::Null, "t4-0", true),
            (
                "by label: pool x has t4-0 whole beside a100-0",
                serde_json::json!({"gpuNodes": {"poolLabel": "pool"}}),
                "a100-0",
                true,
            ),
        ];
        for (name, args, target, fits) in cases {
            let p = plugin(args.clone());
            let mk = |n: &str, model: &str, pool: &str| {
                node(n)
                    .capacity(10_000, 10 * GI)
                    .resource(GPU_RESOURCE, 8)
                    .label("gpu-model", model)
                    .label("pool", pool)
                    .build()
            };
            let nodes = vec![
                mk("a100-0", "a100", "x"),
                mk("a100-1", "a100", "y"),
                mk("t4-0", "t4", "x"),
                mk("t4-1", "t4", "y"),
            ];
            let pods = vec![pod("full").node("a100-1").req(9500, 0).arc()];
            let snap = Snapshot::from_parts(nodes, pods);
            let q = pod("p").req(9500, 0).resource(GPU_RESOURCE, 8).build();
            let mut state = CycleState::new();
            let _ = p.as_pre_filter().unwrap().pre_filter(&mut state, &q, &snap);
            let got = p.as_filter().unwrap().filter(&state, &q, &snap.view(snap.position(target).unwrap()));
            assert_eq!(got.is_success(), *fits, "{name}: {got:?}");
        }
    }

    /// A cordoned GPU node a pod tolerates is not in its pool's count and
    /// keeps the line, however many nodes of the pool are whole.
    #[test]
    fn a_cordoned_gpu_node_keeps_the_line() {
        let p = plugin(serde_json::Value::Null);
        let mut nodes: Vec<_> = (0..10)
            .map(|i| node(&format!("n{i}")).capacity(10_000, 10 * GI).resource(GPU_RESOURCE, 8).build())
            .collect();
        nodes[0].unschedulable = true;
        let snap = Snapshot::from_parts(nodes, vec![pod("on-n0").node("n0").req(1000, 0).arc()]);
        let q = pod("p").req(9500, 0).resource(GPU_RESOURCE, 8).build();
        let mut state = CycleState::new();
        let _ = p.as_pre_filter().unwrap().pre_filter(&mut state, &q, &snap);
        let filter = p.as_filter().unwrap();
        assert!(!filter.filter(&state, &q, &snap.view(snap.position("n0").unwrap())).is_success());
        assert!(filter.filter(&state, &q, &snap.view(snap.position("n1").unwrap())).is_success());
    }
}
