//! NodeResourcesFit, as kube-scheduler v1.36: a node fits a pod when it has
//! a free pod slot and, for each resource the pod requests (cpu, memory,
//! ephemeral-storage, extended resources such as `nvidia.com/gpu`,
//! hugepages), allocatable minus what its pods request covers the pod's
//! effective request. Every shortfall is reported, in kube's order: "Too
//! many pods", cpu, memory, ephemeral-storage, then scalar resources (kube
//! walks a Go map there; we use name order, which is at least stable).
//!
//! The rejection is UnschedulableAndUnresolvable when some request exceeds
//! the node's whole allocatable (preemption cannot help), else
//! Unschedulable. A pod slot shortage alone is always Unschedulable.
//!
//! Extended resources in `ignoredResources`, or whose domain prefix is in
//! `ignoredResourceGroups`, are not checked. DRA-backed extended resources
//! (beta in v1.36) are delegated to DynamicResources by kube only when a
//! DeviceClass maps them; this scheduler knows no DeviceClasses, so every
//! extended resource is checked against node allocatable.
//!
//! Score: `scoringStrategy` LeastAllocated (default), MostAllocated or
//! RequestedToCapacityRatio over weighted resources (default cpu and
//! memory, weight 1), counting cpu and memory with the non-zero defaults.

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, Code, CycleState, EventAction, EventResource, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use framework::resources::{ResourceName, is_extended_resource_name};
use serde::Deserialize;

use crate::resource_allocation::{
    ResourceAllocationScorer, ResourceSpecArgs, Usage, resources_from_args, validate_weights,
};

pub const NAME: &str = "NodeResourcesFit";

pub const LEAST_ALLOCATED: &str = "LeastAllocated";
pub const MOST_ALLOCATED: &str = "MostAllocated";
pub const REQUESTED_TO_CAPACITY_RATIO: &str = "RequestedToCapacityRatio";

/// Highest score of a RequestedToCapacityRatio shape point (kube's
/// `MaxCustomPriorityScore`); points are scaled by 100 / 10 = 10.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
/// Utilization is a percentage.
const MAX_UTILIZATION: i64 = 100;

// ------------------------------------------------------------------- args

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Extended-resource domains (the part before `/`) the filter does not check.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// Absent: LeastAllocated over cpu and memory, weight 1.
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategyArgs>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScoringStrategyArgs {
    /// LeastAllocated, MostAllocated or RequestedToCapacityRatio; required
    /// when `scoringStrategy` is given, as in kube-scheduler.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Empty: cpu and memory, weight 1.
    #[serde(default)]
    pub resources: Vec<ResourceSpecArgs>,
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioArgs>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestedToCapacityRatioArgs {
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// A point of the RequestedToCapacityRatio function: at `utilization`
/// percent (0..=100) the score is `score` (0..=10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UtilizationShapePoint {
    pub utilization: i32,
    pub score: i32,
}

/// kube's `ValidateLabelName` (a qualified name: optional DNS-subdomain
/// prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_`, `.`
/// starting and ending alphanumeric).
fn validate_qualified_name(value: &str) -> Result<(), String> {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Err(format!(
                "{value:?}: prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters"
            ));
        }
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty()
        || name.len() > 63
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || !edge_ok(name.chars().next())
        || !edge_ok(name.chars().last())
    {
        return Err(format!(
            "{value:?}: name part must consist of at most 63 alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

fn validate_shape(shape: &[UtilizationShapePoint], path: &str) -> Result<(), ArgsError> {
    if shape.is_empty() {
        return Err(ArgsError::new(path, "at least one point must be specified"));
    }
    for i in 1..shape.len() {
        if shape[i - 1].utilization >= shape[i].utilization {
            return Err(ArgsError::new(
                format!("{path}[{i}].utilization"),
                "values must be sorted in increasing order",
            ));
        }
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=MAX_UTILIZATION).contains(&i64::from(p.utilization)) {
            return Err(ArgsError::new(
                format!("{path}[{i}].utilization"),
                format!("{}: not in valid range [0, {MAX_UTILIZATION}]", p.utilization),
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&i64::from(p.score)) {
            return Err(ArgsError::new(
                format!("{path}[{i}].score"),
                format!("{}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]", p.score),
            ));
        }
    }
    Ok(())
}

impl NodeResourcesFitArgs {
    /// kube's `ValidateNodeResourcesFitArgs`, first error only.
    pub fn validate(&self) -> Result<(), ArgsError> {
        for (i, r) in self.ignored_resources.iter().enumerate() {
            validate_qualified_name(r).map_err(|m| ArgsError::new(format!("ignoredResources[{i}]"), m))?;
        }
        for (i, g) in self.ignored_resource_groups.iter().enumerate() {
            let path = format!("ignoredResourceGroups[{i}]");
            if g.contains('/') {
                return Err(ArgsError::new(path, format!("{g:?}: resource group name can't contain '/'")));
            }
            validate_qualified_name(g).map_err(|m| ArgsError::new(path, m))?;
        }
        let Some(s) = &self.scoring_strategy else {
            return Ok(());
        };
        if ![LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO].contains(&s.type_.as_str()) {
            return Err(ArgsError::new(
                "scoringStrategy.type",
                format!(
                    "Unsupported value: {:?}: supported values: \"{LEAST_ALLOCATED}\", \"{MOST_ALLOCATED}\", \
                     \"{REQUESTED_TO_CAPACITY_RATIO}\"",
                    s.type_
                ),
            ));
        }
        validate_weights(&s.resources, "scoringStrategy.resources")?;
        match &s.requested_to_capacity_ratio {
            Some(r) => validate_shape(&r.shape, "scoringStrategy.requestedToCapacityRatio.shape")?,
            // kube would dereference a nil shape here; say what is missing instead.
            None if s.type_ == REQUESTED_TO_CAPACITY_RATIO => {
                return Err(ArgsError::new(
                    "scoringStrategy.requestedToCapacityRatio",
                    "Required value: a shape is required for the RequestedToCapacityRatio strategy",
                ));
            }
            None => {}
        }
        Ok(())
    }
}

// --------------------------------------------------------------- strategies

/// kube's `BuildBrokenLinearFunction` over shape points already scaled to
/// 0..=MAX_NODE_SCORE: constant before the first and after the last point,
/// linear (integer arithmetic) in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape(Vec<(i64, i64)>);

impl Shape {
    fn from_args(points: &[UtilizationShapePoint]) -> Self {
        Shape(
            points
                .iter()
                .map(|p| {
                    let scaled = i64::from(p.score) * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE);
                    (i64::from(p.utilization), scaled)
                })
                .collect(),
        )
    }

    fn eval(&self, p: i64) -> i64 {
        for (i, &(u, s)) in self.0.iter().enumerate() {
            if p <= u {
                if i == 0 {
                    return s;
                }
                let (pu, ps) = self.0[i - 1];
                return ps + (s - ps) * (p - pu) / (u - pu);
            }
        }
        self.0.last().map_or(0, |&(_, s)| s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoringStrategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(Shape),
}

/// Free share of a resource after placing the pod, 0..=100.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// Used share of a resource after placing the pod, 0..=100 (requests above
/// capacity, possible with the non-zero defaults, count as full).
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

impl ScoringStrategy {
    /// Weighted mean of the per-resource scores, as each kube scorer does.
    pub fn score(&self, usages: impl Iterator<Item = Usage>) -> i64 {
        let (mut total, mut weights) = (0i64, 0i64);
        match self {
            ScoringStrategy::LeastAllocated | ScoringStrategy::MostAllocated => {
                let per =
                    if *self == ScoringStrategy::LeastAllocated { least_requested_score } else { most_requested_score };
                for u in usages {
                    total += per(u.requested, u.allocatable) * u.weight;
                    weights += u.weight;
                }
                if weights == 0 { 0 } else { total / weights }
            }
            ScoringStrategy::RequestedToCapacityRatio(shape) => {
                for u in usages {
                    let s = if u.requested > u.allocatable {
                        shape.eval(MAX_UTILIZATION)
                    } else {
                        shape.eval(u.requested * MAX_UTILIZATION / u.allocatable)
                    };
                    // kube leaves resources scoring 0 out of the mean.
                    if s > 0 {
                        total += s * u.weight;
                        weights += u.weight;
                    }
                }
                if weights == 0 { 0 } else { (total as f64 / weights as f64).round() as i64 }
            }
        }
    }
}

// ------------------------------------------------------------------ plugin

pub struct NodeResourcesFit {
    ignored_resources: Vec<String>,
    ignored_resource_groups: Vec<String>,
    strategy: ScoringStrategy,
    scorer: ResourceAllocationScorer,
}

/// A scalar resource the pod requests and the filter checks.
struct ScalarRequest {
    name: ResourceName,
    quantity: i64,
    /// "Insufficient <name>", built once per pod.
    reason: Cow<'static, str>,
}

/// What Filter needs of the pod, computed in PreFilter.
struct PreFilterState {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    /// Sorted by name; zero and ignored requests left out.
    scalars: Vec<ScalarRequest>,
    /// Whether the pod requests anything at all (else only pod slots count).
    any: bool,
}

/// The pod's request of each scored resource, computed in PreScore.
struct PreScoreState {
    pod_requests: Vec<i64>,
}

impl NodeResourcesFit {
    fn is_ignored(&self, name: &str) -> bool {
        if !is_extended_resource_name(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or(name);
        self.ignored_resources.iter().any(|r| r == name) || self.ignored_resource_groups.iter().any(|g| g == group)
    }

    fn compute_pre_filter_state(&self, pod: &Pod) -> PreFilterState {
        let r = &pod.requests;
        let scalars: Vec<ScalarRequest> = r
            .scalars()
            .iter()
            .filter(|(name, q)| *q != 0 && !self.is_ignored(name))
            .map(|(name, q)| ScalarRequest {
                name: name.clone(),
                quantity: *q,
                reason: Cow::Owned(format!("Insufficient {name}")),
            })
            .collect();
        let any =
            r.milli_cpu != 0 || r.memory != 0 || r.ephemeral_storage != 0 || r.scalars().iter().any(|(_, q)| *q != 0);
        PreFilterState {
            milli_cpu: r.milli_cpu,
            memory: r.memory,
            ephemeral_storage: r.ephemeral_storage,
            scalars,
            any,
        }
    }
}

/// Builds the plugin from its args.
pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: NodeResourcesFitArgs = decode_args(args)?;
    args.validate()?;
    let (strategy, resources) = match &args.scoring_strategy {
        None => (ScoringStrategy::LeastAllocated, resources_from_args(&[])),
        Some(s) => {
            let strategy = match s.type_.as_str() {
                MOST_ALLOCATED => ScoringStrategy::MostAllocated,
                REQUESTED_TO_CAPACITY_RATIO => ScoringStrategy::RequestedToCapacityRatio(Shape::from_args(
                    s.requested_to_capacity_ratio.as_ref().map_or(&[][..], |r| &r.shape),
                )),
                _ => ScoringStrategy::LeastAllocated,
            };
            (strategy, resources_from_args(&s.resources))
        }
    };
    Ok(Arc::new(NodeResourcesFit {
        ignored_resources: args.ignored_resources,
        ignored_resource_groups: args.ignored_resource_groups,
        strategy,
        scorer: ResourceAllocationScorer::new(resources, false),
    }))
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Resources come back when a bound pod leaves or shrinks (in-place
    /// resize is GA, so kube registers scale-down updates; we have no finer
    /// action than Update), or when a node appears or its allocatable grows.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Update),
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeResourcesFit {
    /// Never skips: even a pod requesting nothing needs a pod slot.
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        state.write(self.compute_pre_filter_state(pod));
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error("error reading \"PreFilterNodeResourcesFit\" from cycleState: not found");
        };
        // The summary has all but extended resources.
        let n = node.summary();
        // Stays unallocated unless the node fails.
        let mut reasons: Vec<Cow<'static, str>> = Vec::new();
        let mut unresolvable = false;

        if i64::from(n.pod_count) + 1 > n.allowed_pod_number {
            reasons.push(Cow::Borrowed("Too many pods"));
        }
        if s.any {
            let mut check = |request: i64, allocatable: i64, in_use: i64, reason: Cow<'static, str>| {
                if request > 0 && request > allocatable - in_use {
                    reasons.push(reason);
                    unresolvable |= request > allocatable;
                }
            };
            check(s.milli_cpu, n.allocatable_milli_cpu, n.requested_milli_cpu, Cow::Borrowed("Insufficient cpu"));
            check(s.memory, n.allocatable_memory, n.requested_memory, Cow::Borrowed("Insufficient memory"));
            check(
                s.ephemeral_storage,
                n.allocatable_ephemeral_storage,
                n.requested_ephemeral_storage,
                Cow::Borrowed("Insufficient ephemeral-storage"),
            );
            let (alloc, used) = (&node.node.allocatable, &node.requested);
            for r in &s.scalars {
                let allocatable = alloc.scalar(&r.name);
                if r.quantity > allocatable - used.scalar(&r.name) {
                    reasons.push(r.reason.clone());
                    unresolvable |= r.quantity > allocatable;
                }
            }
        }

        if reasons.is_empty() {
            return Status::success();
        }
        let code = if unresolvable { Code::UnschedulableAndUnresolvable } else { Code::Unschedulable };
        Status { code, reasons, plugin: "", retry_at: None }
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, _nodes: NodeList<'_>) -> Status {
        state.write(PreScoreState { pod_requests: self.scorer.pod_requests(pod) });
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        match state.read::<PreScoreState>() {
            Some(s) => Ok(self.strategy.score(self.scorer.usages(node, &s.pod_requests))),
            // As kube: without PreScore, compute the requests here.
            None => {
                let reqs = self.scorer.pod_requests(pod);
                Ok(self.strategy.score(self.scorer.usages(node, &reqs)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::{node, pod};
    use serde_json::json;

    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;

    fn plugin(args: Option<serde_json::Value>) -> Arc<dyn Plugin> {
        new(args.as_ref()).unwrap()
    }

    fn run_filter(pl: &dyn Plugin, pod: &Pod, nodes: Vec<framework::model::Node>, existing: Vec<Arc<Pod>>) -> Status {
        let snap = Snapshot::from_parts(nodes, existing);
        let mut state = CycleState::new();
        let (_, st) = pl.as_pre_filter().unwrap().pre_filter(&mut state, pod, &snap);
        assert!(st.is_success(), "{st:?}");
        let info = &snap.nodes()[0];
        pl.as_filter().unwrap().filter(&state, pod, &info.view())
    }

    #[test]
    fn filter_cases() {
        struct Case {
            name: &'static str,
            args: Option<serde_json::Value>,
            pod: Pod,
            node: framework::model::Node,
            existing: Vec<Arc<Pod>>,
            code: Code,
            reasons: Vec<&'static str>,
        }
        let n = || node("n1").capacity(4000, 8 * GI).pods(110);
        let cases = vec![
            Case {
                name: "fits on an empty node",
                args: None,
                pod: pod("p").req(1000, GI).build(),
                node: n().build(),
                existing: vec![],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "exactly fills the node",
                args: None,
                pod: pod("p").req(3000, 6 * GI).build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(1000, 2 * GI).arc()],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "cpu short by one milli",
                args: None,
                pod: pod("p").req(3001, GI).build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(1000, 0).arc()],
                code: Code::Unschedulable,
                reasons: vec!["Insufficient cpu"],
            },
            Case {
                name: "cpu and memory short, in kube's order; preemption could help",
                args: None,
                pod: pod("p").req(2000, 5 * GI).build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(3000, 4 * GI).arc()],
                code: Code::Unschedulable,
                reasons: vec!["Insufficient cpu", "Insufficient memory"],
            },
            Case {
                name: "request above the whole allocatable is unresolvable",
                args: None,
                pod: pod("p").req(5000, GI).build(),
                node: n().build(),
                existing: vec![],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient cpu"],
            },
            Case {
                name: "one resource beyond allocatable makes the whole status unresolvable",
                args: None,
                pod: pod("p").req(1000, 9 * GI).build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(3500, 0).arc()],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient cpu", "Insufficient memory"],
            },
            Case {
                name: "too many pods, with resources short as well",
                args: None,
                pod: pod("p").req(4000, GI).build(),
                node: n().pods(1).build(),
                existing: vec![pod("a").node("n1").req(1000, 0).arc()],
                code: Code::Unschedulable,
                reasons: vec!["Too many pods", "Insufficient cpu"],
            },
            Case {
                name: "too many pods for a pod requesting nothing",
                args: None,
                pod: pod("p").build(),
                node: n().pods(1).build(),
                existing: vec![pod("a").node("n1").arc()],
                code: Code::Unschedulable,
                reasons: vec!["Too many pods"],
            },
            Case {
                name: "zero pod slots is still only Unschedulable",
                args: None,
                pod: pod("p").build(),
                node: n().pods(0).build(),
                existing: vec![],
                code: Code::Unschedulable,
                reasons: vec!["Too many pods"],
            },
            Case {
                name: "a pod requesting nothing fits a full node",
                args: None,
                pod: pod("p").build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(4000, 8 * GI).arc()],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "unrequested resources are not checked (memory over-committed)",
                args: None,
                pod: pod("p").req(1000, 0).build(),
                node: n().build(),
                existing: vec![pod("a").node("n1").req(0, 9 * GI).arc()],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "ephemeral-storage short",
                args: None,
                pod: pod("p").resource("ephemeral-storage", 20 * GI).build(),
                node: n().resource("ephemeral-storage", 50 * GI).build(),
                existing: vec![pod("a").node("n1").resource("ephemeral-storage", 40 * GI).arc()],
                code: Code::Unschedulable,
                reasons: vec!["Insufficient ephemeral-storage"],
            },
            Case {
                name: "gpu on a node without gpus: insufficient, unresolvable",
                args: None,
                pod: pod("p").req(100, MI).resource("nvidia.com/gpu", 1).build(),
                node: n().build(),
                existing: vec![],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient nvidia.com/gpu"],
            },
            Case {
                name: "gpus taken by other pods: insufficient, preemption may help",
                args: None,
                pod: pod("p").resource("nvidia.com/gpu", 2).build(),
                node: n().resource("nvidia.com/gpu", 4).build(),
                existing: vec![pod("a").node("n1").resource("nvidia.com/gpu", 3).arc()],
                code: Code::Unschedulable,
                reasons: vec!["Insufficient nvidia.com/gpu"],
            },
            Case {
                name: "gpus fit",
                args: None,
                pod: pod("p").resource("nvidia.com/gpu", 1).build(),
                node: n().resource("nvidia.com/gpu", 4).build(),
                existing: vec![pod("a").node("n1").resource("nvidia.com/gpu", 3).arc()],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "every failing resource reported: pods, cpu, memory, storage, scalars by name",
                args: None,
                pod: pod("p")
                    .req(5000, 9 * GI)
                    .resource("ephemeral-storage", GI)
                    .resource("nvidia.com/gpu", 1)
                    .resource("example.com/foo", 1)
                    .resource("hugepages-2Mi", 4 * MI)
                    .build(),
                node: n().pods(0).build(),
                existing: vec![],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec![
                    "Too many pods",
                    "Insufficient cpu",
                    "Insufficient memory",
                    "Insufficient ephemeral-storage",
                    "Insufficient example.com/foo",
                    "Insufficient hugepages-2Mi",
                    "Insufficient nvidia.com/gpu",
                ],
            },
            Case {
                name: "ignoredResources skips that extended resource",
                args: Some(json!({"ignoredResources": ["nvidia.com/gpu"]})),
                pod: pod("p").resource("nvidia.com/gpu", 1).resource("example.com/foo", 1).build(),
                node: n().build(),
                existing: vec![],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient example.com/foo"],
            },
            Case {
                name: "ignoredResourceGroups skips the whole domain",
                args: Some(json!({"ignoredResourceGroups": ["nvidia.com"]})),
                pod: pod("p").resource("nvidia.com/gpu", 1).resource("nvidia.com/mig-1g.5gb", 1).build(),
                node: n().build(),
                existing: vec![],
                code: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "hugepages are not extended resources: never ignored",
                args: Some(json!({"ignoredResources": ["hugepages-2Mi"]})),
                pod: pod("p").resource("hugepages-2Mi", 2 * MI).build(),
                node: n().build(),
                existing: vec![],
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient hugepages-2Mi"],
            },
        ];
        for c in cases {
            let pl = plugin(c.args);
            let st = run_filter(&*pl, &c.pod, vec![c.node], c.existing);
            assert_eq!(st.code, c.code, "{}: {st:?}", c.name);
            let got: Vec<&str> = st.reasons.iter().map(|r| r.as_ref()).collect();
            assert_eq!(got, c.reasons, "{}", c.name);
        }
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let pl = plugin(None);
        let snap = Snapshot::from_parts(vec![node("n1").build()], vec![]);
        let st = pl.as_filter().unwrap().filter(&CycleState::new(), &pod("p").build(), &snap.nodes()[0].view());
        assert_eq!(st.code, Code::Error);
    }

    fn scores(
        args: Option<serde_json::Value>,
        pod: &Pod,
        nodes: Vec<framework::model::Node>,
        existing: Vec<Arc<Pod>>,
    ) -> Vec<i64> {
        let pl = plugin(args);
        let snap = Snapshot::from_parts(nodes, existing);
        let mut state = CycleState::new();
        let st = pl.as_pre_score().unwrap().pre_score(&mut state, pod, snap.node_list());
        assert!(st.is_success());
        let sc = pl.as_score().unwrap();
        assert!(!sc.has_normalize());
        let mut names: Vec<&str> = snap.nodes().iter().map(|n| n.name()).collect();
        names.sort();
        names.iter().map(|n| sc.score(&state, pod, &snap.get(n).unwrap().view()).unwrap()).collect()
    }

    #[test]
    fn score_cases() {
        struct Case {
            name: &'static str,
            args: Option<serde_json::Value>,
            pod: Pod,
            nodes: Vec<framework::model::Node>,
            existing: Vec<Arc<Pod>>,
            want: Vec<i64>,
        }
        let most = json!({"scoringStrategy": {"type": "MostAllocated"}});
        let cases = vec![
            Case {
                // The pod requests nothing: the non-zero defaults count, cpu 100m, mem 200Mi.
                // n1 (4000m, 10000Mi): cpu (4000-100)*100/4000 = 97, mem (10000-200)*100/10000 = 98 → (97+98)/2 = 97
                // n2 (6000m, 10000Mi): cpu (6000-100)*100/6000 = 98, mem 98 → 98
                name: "least allocated, best-effort pod counts the non-zero defaults",
                args: None,
                pod: pod("p").build(),
                nodes: vec![
                    node("n1").capacity(4000, 10000 * MI).build(),
                    node("n2").capacity(6000, 10000 * MI).build(),
                ],
                existing: vec![],
                want: vec![97, 98],
            },
            Case {
                // Pod 3000m / 5000Mi.
                // n1 (4000m, 10000Mi): cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 → 37
                // n2 (6000m, 10000Mi), 3000m/5000Mi already: cpu 0, mem 0 → 0
                name: "least allocated",
                args: None,
                pod: pod("p").req(3000, 5000 * MI).build(),
                nodes: vec![
                    node("n1").capacity(4000, 10000 * MI).build(),
                    node("n2").capacity(6000, 10000 * MI).build(),
                ],
                existing: vec![pod("a").node("n2").req(3000, 5000 * MI).arc()],
                want: vec![37, 0],
            },
            Case {
                // Requests beyond capacity (non-zero defaults) score 0 for least.
                // n1 (50m, 100Mi) with a best-effort pod: cpu 200 > 50 → 0; mem 400Mi > 100Mi → 0
                name: "least allocated, over capacity scores 0",
                args: None,
                pod: pod("p").build(),
                nodes: vec![node("n1").capacity(50, 100 * MI).build()],
                existing: vec![pod("a").node("n1").arc()],
                want: vec![0],
            },
            Case {
                // Weights cpu 3, memory 1. Pod 1000m / 2000Mi on (4000m, 8000Mi):
                // cpu (3000*100/4000) = 75, mem (6000*100/8000) = 75 → (75*3 + 75)/4 = 75;
                // on (2000m, 8000Mi): cpu 50, mem 75 → (150+75)/4 = 56
                name: "least allocated with weights",
                args: Some(json!({"scoringStrategy": {"type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]}})),
                pod: pod("p").req(1000, 2000 * MI).build(),
                nodes: vec![node("n1").capacity(4000, 8000 * MI).build(), node("n2").capacity(2000, 8000 * MI).build()],
                existing: vec![],
                want: vec![75, 56],
            },
            Case {
                // Pod 1000m / 2000Mi.
                // n1 (4000m, 10000Mi), 2000m/3000Mi already: cpu 3000*100/4000 = 75, mem 5000*100/10000 = 50 → 62
                // n2 (4000m, 10000Mi) empty: cpu 25, mem 20 → 22
                name: "most allocated",
                args: Some(most.clone()),
                pod: pod("p").req(1000, 2000 * MI).build(),
                nodes: vec![
                    node("n1").capacity(4000, 10000 * MI).build(),
                    node("n2").capacity(4000, 10000 * MI).build(),
                ],
                existing: vec![pod("a").node("n1").req(2000, 3000 * MI).arc()],
                want: vec![62, 22],
            },
            Case {
                // Over capacity counts as full: cpu 200 of 50 → 100, mem 400Mi of 100Mi → 100
                name: "most allocated, over capacity capped at 100",
                args: Some(most.clone()),
                pod: pod("p").build(),
                nodes: vec![node("n1").capacity(50, 100 * MI).build()],
                existing: vec![pod("a").node("n1").arc()],
                want: vec![100],
            },
            Case {
                // Resources cpu 1, memory 1, nvidia.com/gpu 2. Pod 1000m / 1Gi / 1 GPU.
                // n1 (8000m, 32Gi, 4 GPUs): pod "a" holds 2 GPUs and requests no cpu or
                //   memory, so counts 100m / 200Mi: cpu 1100*100/8000 = 13,
                //   mem (200Mi + 1Gi)*100/32Gi = 3, gpu 3*100/4 = 75 → (13 + 3 + 2*75)/4 = 41
                // n2 (8000m, 32Gi, no GPU): gpu left out → cpu 12, mem 3 → (12 + 3)/2 = 7
                name: "most allocated with an extended resource",
                args: Some(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [
                    {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                    {"name": "nvidia.com/gpu", "weight": 2}]}})),
                pod: pod("p").req(1000, GI).resource("nvidia.com/gpu", 1).build(),
                nodes: vec![
                    node("n1").capacity(8000, 32 * GI).resource("nvidia.com/gpu", 4).build(),
                    node("n2").capacity(8000, 32 * GI).build(),
                ],
                existing: vec![pod("a").node("n1").resource("nvidia.com/gpu", 2).req(0, 0).arc()],
                want: vec![41, 7],
            },
            Case {
                // A GPU-less pod: the gpu resource is left out everywhere.
                // n1 (8000m, 32Gi): cpu 1000*100/8000 = 12, mem 3 → 7
                name: "most allocated, unrequested extended resource skipped",
                args: Some(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [
                    {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                    {"name": "nvidia.com/gpu", "weight": 2}]}})),
                pod: pod("p").req(1000, GI).build(),
                nodes: vec![node("n1").capacity(8000, 32 * GI).resource("nvidia.com/gpu", 4).build()],
                existing: vec![],
                want: vec![7],
            },
            Case {
                // Shape (0,0),(100,10) → scaled (0,0),(100,100): bin packing.
                // Pod 2000m / 4Gi on (4000m, 16Gi) where pod "a" requests 1000m and no
                //   memory (counts 200Mi): cpu util 3000*100/4000 = 75 → 75;
                //   mem (4Gi + 200Mi)*100/16Gi = 26 → 26 → round(101/2 = 50.5) = 51
                // Empty (8000m, 16Gi): cpu 25 → 25, mem 25 → 25 → 25
                name: "requested to capacity ratio, bin packing shape",
                args: Some(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [
                        {"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}})),
                pod: pod("p").req(2000, 4 * GI).build(),
                nodes: vec![node("n1").capacity(4000, 16 * GI).build(), node("n2").capacity(8000, 16 * GI).build()],
                existing: vec![pod("a").node("n1").req(1000, 0).arc()],
                want: vec![51, 25],
            },
            Case {
                // Shape (0,10),(50,3),(100,0) → (0,100),(50,30),(100,0).
                // Pod 1000m / 1Gi on (4000m, 4Gi), 1000m and 2Gi already:
                //   cpu util 2000*100/4000 = 50 → 30; mem 3*100/4 = 75 → 30 + (0-30)*(75-50)/50 = 15
                //   → round((30 + 15)/2 = 22.5) = 23
                // On (1000m, 4Gi) where pod "b" requests 1000m and no memory (counts 200Mi):
                //   cpu 2000 > 1000 → f(100) = 0, left out of the mean;
                //   mem (1Gi + 200Mi)*100/4Gi = 29 → 100 + (30-100)*29/50 = 100 - 40 (truncated) = 60
                name: "requested to capacity ratio, spreading shape with rounding and zero scores left out",
                args: Some(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [
                        {"utilization": 0, "score": 10}, {"utilization": 50, "score": 3},
                        {"utilization": 100, "score": 0}]}}})),
                pod: pod("p").req(1000, GI).build(),
                nodes: vec![node("n1").capacity(4000, 4 * GI).build(), node("n2").capacity(1000, 4 * GI).build()],
                existing: vec![pod("a").node("n1").req(1000, 2 * GI).arc(), pod("b").node("n2").req(1000, 0).arc()],
                want: vec![23, 60],
            },
        ];
        for c in cases {
            assert_eq!(scores(c.args, &c.pod, c.nodes, c.existing), c.want, "{}", c.name);
        }
    }

    #[test]
    fn shape_interpolation() {
        let s = Shape::from_args(&[
            UtilizationShapePoint { utilization: 20, score: 2 },
            UtilizationShapePoint { utilization: 60, score: 10 },
        ]);
        // Before the first point: its score; after the last: its score;
        // between: 20 + (100-20)*(p-20)/40.
        for (p, want) in [(0, 20), (20, 20), (30, 40), (59, 98), (60, 100), (100, 100)] {
            assert_eq!(s.eval(p), want, "p={p}");
        }
    }

    #[test]
    fn args_validation() {
        let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
            ("empty args", json!({}), None),
            ("all strategies valid", json!({"scoringStrategy": {"type": "MostAllocated"}}), None),
            ("unknown type", json!({"scoringStrategy": {"type": "Mostly"}}), Some("scoringStrategy.type")),
            ("type is required", json!({"scoringStrategy": {"resources": []}}), Some("scoringStrategy.type")),
            (
                "weight above 100",
                json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}}),
                Some("scoringStrategy.resources[0].weight"),
            ),
            (
                "negative weight",
                json!({"scoringStrategy": {"type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": -2}]}}),
                Some("scoringStrategy.resources[1].weight"),
            ),
            (
                "shape required for RequestedToCapacityRatio",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                Some("scoringStrategy.requestedToCapacityRatio"),
            ),
            (
                "empty shape",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}}),
                Some("scoringStrategy.requestedToCapacityRatio.shape"),
            ),
            (
                "unsorted shape",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
                    {"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}}}),
                Some("scoringStrategy.requestedToCapacityRatio.shape[1].utilization"),
            ),
            (
                "score above 10",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
                    {"utilization": 0, "score": 11}]}}}),
                Some("scoringStrategy.requestedToCapacityRatio.shape[0].score"),
            ),
            (
                "utilization above 100",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
                    {"utilization": 101, "score": 1}]}}}),
                Some("scoringStrategy.requestedToCapacityRatio.shape[0].utilization"),
            ),
            ("unknown field", json!({"ignoredResource": []}), Some("ignoredResource")),
            (
                "unknown nested field",
                json!({"scoringStrategy": {"type": "MostAllocated", "shape": []}}),
                Some("scoringStrategy.shape"),
            ),
            (
                "bad ignored resource name",
                json!({"ignoredResources": ["nvidia.com/-gpu"]}),
                Some("ignoredResources[0]"),
            ),
            ("good ignored resource name", json!({"ignoredResources": ["example.com/foo_bar.1"]}), None),
            (
                "group with slash",
                json!({"ignoredResourceGroups": ["nvidia.com/gpu"]}),
                Some("ignoredResourceGroups[0]"),
            ),
            ("group fine", json!({"ignoredResourceGroups": ["nvidia.com"]}), None),
        ];
        for (name, args, want) in cases {
            let got = new(Some(&args)).err().map(|e| e.path);
            assert_eq!(got.as_deref(), want, "{name}");
        }
    }

    #[test]
    fn registers_resource_freeing_events() {
        let ev = plugin(None).events_to_register();
        assert!(ev.contains(&ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete)));
        assert!(ev.contains(&ClusterEvent::new(EventResource::Node, EventAction::Add)));
        assert!(ev.contains(&ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable)));
        assert!(!ev.iter().any(|e| e.resource == EventResource::Namespace));
    }
}
