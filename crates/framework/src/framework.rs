//! The scheduling framework: plugin traits for each extension point of
//! kube-scheduler, the status they return, and the per-cycle state they
//! share. A profile holds the plugins enabled at each point.
//!
//! - [`Status`] and [`Code`], with [`Code::Fallback`]: a filter's "fits,
//!   but only if nothing else does". `Status::success()` is a constant and
//!   reasons are built only on failure, so Filter and Score allocate
//!   nothing when a node passes.
//! - [`CycleState`]: per-cycle plugin state keyed by type, with the cycle's
//!   clock (`now`), the profile's nodeSelector, a [`Restriction`] (a gang's
//!   topology domain), the [`Nominated`] pods of earlier preemptions, and
//!   the starvation guard's held nodes. [`filter_with_nominated`] runs the
//!   filters with the nominated pods of higher or equal priority added and
//!   without, as kube does, and checks the holds; the hot loop leaves it to
//!   the few nodes concerned.
//! - [`PostFilterContext`] and [`PostFilterResult`]: a node to nominate and
//!   the victims to evict; the engine does no I/O, the driver evicts.
//! - `explain` on Filter and Score plugins: optional name → value details
//!   behind a verdict, asked for only when a decision is explained.
//! - [`ClusterEvent`]s a plugin registers, so the queue knows what can make
//!   a pod it rejected schedulable; the [`Binder`] trait.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::{NodeList, NodeView, Snapshot};
use crate::model::{LabelSelector, Pod, PodRef};
use crate::node_info::NodeInfo;
use crate::time::Millis;

/// Highest score a Score plugin may give a node after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;
pub const MIN_NODE_SCORE: i64 = 0;

/// Outcome code of a plugin call, as kube-scheduler's `framework.Code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Success,
    /// The node (or pod) fails now but could pass after the cluster changes
    /// (e.g. other pods leave); preemption may help.
    Unschedulable,
    /// Fails and preemption cannot help (e.g. the node does not match a selector).
    UnschedulableAndUnresolvable,
    /// An internal error: the pod is retried with backoff.
    Error,
    /// The plugin has nothing to do for this pod; its later stages are skipped.
    Skip,
    /// Permit: wait before binding.
    Wait,
    /// Filter: the node fits, but only as a fallback. It is scored only
    /// when no node passes every filter outright (e.g. public nodes for a
    /// pod that prefers private ones); otherwise it counts as rejected.
    Fallback,
}

impl Code {
    /// The name kube-scheduler's metrics use for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Error => "Error",
            Code::Skip => "Skip",
            Code::Wait => "Wait",
            Code::Fallback => "Fallback",
        }
    }
}

/// A plugin's verdict with human-readable reasons. Success carries no
/// allocation; reasons are usually static strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reasons: Vec<Cow<'static, str>>,
    /// The plugin that produced a failure (filled in by the framework).
    pub plugin: &'static str,
    /// A rejection that lapses with time alone (an alert ageing out): when
    /// to try the pod again without waiting for a cluster event.
    pub retry_at: Option<Millis>,
}

impl Status {
    pub const fn success() -> Status {
        Status { code: Code::Success, reasons: Vec::new(), plugin: "", retry_at: None }
    }

    pub const fn skip() -> Status {
        Status { code: Code::Skip, reasons: Vec::new(), plugin: "", retry_at: None }
    }

    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Status {
        Status { code, reasons: vec![reason.into()], plugin: "", retry_at: None }
    }

    /// This verdict no longer holds at `at`.
    pub fn with_retry_at(mut self, at: Millis) -> Status {
        self.retry_at = Some(at);
        self
    }

    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// See [`Code::Fallback`]; `reason` says why the node is held back.
    pub fn fallback(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Fallback, reason)
    }

    pub fn error(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Error, reason)
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Unschedulable or UnschedulableAndUnresolvable.
    pub fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable)
    }

    pub fn with_plugin(mut self, plugin: &'static str) -> Status {
        self.plugin = plugin;
        self
    }

    /// The reasons joined, as kube-scheduler's `Status.Message`.
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

/// State shared by the plugins of one scheduling cycle, keyed by type: a
/// plugin stores what its PreFilter/PreScore computed and its Filter/Score
/// reads it per node. A linear scan beats hashing for the few entries a
/// cycle has.
#[derive(Default)]
pub struct CycleState {
    entries: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
    now: Millis,
    node_selector: Option<Arc<LabelSelector>>,
    restriction: Option<Restriction>,
    nominated: Option<Arc<Nominated>>,
    holds: Vec<Arc<dyn NodeHolds>>,
    skip_post_filter: bool,
}

/// A preemption: the candidate nodes (with the victims each would need)
/// and the one chosen.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionRecord {
    pub candidates: Vec<PreemptionCandidate>,
    /// The node nominated, if any candidate was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionCandidate {
    pub node: String,
    /// `NAMESPACE/NAME` of each victim, most important first.
    pub victims: Vec<String>,
    /// Victims whose eviction would violate a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// The highest victim priority.
    pub highest_priority: i32,
}

/// Nodes kept for some pods for a while, which others may not use: the
/// starvation guard's holds, a forecast's. A cycle checks them outside the
/// filters' hot loop, only on the nodes they name, so a capability adds
/// its holds to the cycle (`CycleState::add_holds`) without the generic
/// filter path knowing it.
pub trait NodeHolds: Send + Sync {
    /// Whether `pod` is kept off `node`.
    fn blocks(&self, node: &str, pod: &Pod) -> bool;
    /// Why `pod` is kept off `node`, if it is.
    fn blocking(&self, node: &str, pod: &Pod) -> Option<Status>;
    /// The nodes held (from some pods at least).
    fn held_nodes(&self) -> Vec<&str>;
}

/// Pods that earlier preemptions nominated to nodes (kube's nominator), by
/// snapshot position: a cycle leaves room for those of higher or equal
/// priority than its pod, so that their victims' room is not taken.
#[derive(Debug, Clone, Default)]
pub struct Nominated {
    by_position: HashMap<usize, Vec<PodRef>>,
}

impl Nominated {
    pub fn new(by_position: HashMap<usize, Vec<PodRef>>) -> Self {
        Nominated { by_position }
    }

    pub fn is_empty(&self) -> bool {
        self.by_position.is_empty()
    }

    /// Every pod nominated, on any node.
    pub fn pods(&self) -> impl Iterator<Item = &PodRef> {
        self.by_position.values().flatten()
    }

    /// The pods nominated to the node at `position` that `pod` must leave
    /// room for: others, of priority at least its own.
    pub fn for_pod<'a>(&'a self, position: usize, pod: &'a Pod) -> impl Iterator<Item = &'a PodRef> + 'a {
        self.by_position
            .get(&position)
            .into_iter()
            .flatten()
            .filter(move |p| p.uid != pod.uid && p.priority >= pod.priority)
    }
}
/// Nodes a cycle is limited to by the engine itself (a gang's topology
/// domain): the others count as rejected for `reason`.
#[derive(Debug, Clone)]
pub struct Restriction {
    /// Snapshot positions, sorted.
    pub positions: Arc<Vec<usize>>,
    pub plugin: &'static str,
    pub reason: Arc<str>,
}

impl CycleState {
    /// A cycle at time 0 (for tests of rules that ignore the clock).
    pub fn new() -> Self {
        CycleState::default()
    }

    /// A cycle at `now` (milliseconds since the epoch): the clock that
    /// time-dependent rules (spot expiry, alert windows) compare against.
    pub fn at(now: Millis) -> Self {
        CycleState { now, ..CycleState::default() }
    }

    pub fn now(&self) -> Millis {
        self.now
    }

    /// The profile's `nodeSelector`: the nodes this cycle may use.
    pub fn node_selector(&self) -> Option<&LabelSelector> {
        self.node_selector.as_deref()
    }

    pub fn set_node_selector(&mut self, selector: Option<Arc<LabelSelector>>) {
        self.node_selector = selector;
    }

    /// The nodes this cycle is limited to, if the engine limited it.
    pub fn restriction(&self) -> Option<&Restriction> {
        self.restriction.as_ref()
    }

    pub fn set_restriction(&mut self, restriction: Option<Restriction>) {
        self.restriction = restriction;
    }

    /// Pods nominated to nodes by earlier preemptions.
    pub fn nominated(&self) -> Option<&Nominated> {
        self.nominated.as_deref()
    }

    pub fn set_nominated(&mut self, nominated: Option<Arc<Nominated>>) {
        self.nominated = nominated.filter(|n| !n.is_empty());
    }

    /// Nodes kept for other pods this cycle, in the order they were added.
    pub fn holds(&self) -> &[Arc<dyn NodeHolds>] {
        &self.holds
    }

    pub fn add_holds(&mut self, holds: Arc<dyn NodeHolds>) {
        self.holds.push(holds);
    }

    /// Why `pod` may not use `node`: the first of the cycle's holds that
    /// keeps it off.
    pub fn held_from(&self, node: &str, pod: &Pod) -> Option<Status> {
        self.holds.iter().find_map(|h| h.blocking(node, pod))
    }

    /// Whether PostFilter (preemption) is to be left out of this cycle: a
    /// gang's first attempt, which preempts only for all members at once.
    pub fn skips_post_filter(&self) -> bool {
        self.skip_post_filter
    }

    pub fn set_skip_post_filter(&mut self, skip: bool) {
        self.skip_post_filter = skip;
    }

    /// The pod's GPU request as the GPU policies see it: its own, or else
    /// the GPUs its DRA claims ask for.
    pub fn pod_gpu<'a>(&'a self, pod: &'a Pod) -> &'a crate::devices::GpuRequest {
        match self.read::<crate::devices::ClaimedGpus>() {
            Some(c) if !pod.gpu.wants_gpu() => &c.0,
            _ => &pod.gpu,
        }
    }

    pub fn write<T: Any + Send + Sync>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.entries.iter_mut().find(|(t, _)| *t == id) {
            Some(e) => e.1 = Box::new(value),
            None => self.entries.push((id, Box::new(value))),
        }
    }

    pub fn read<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        // Newest first: Score reads, once per node, what PreScore wrote last.
        self.entries.iter().rev().find(|(t, _)| *t == id).and_then(|(_, v)| v.downcast_ref())
    }

    pub fn read_mut<T: Any + Send + Sync>(&mut self) -> Option<&mut T> {
        let id = TypeId::of::<T>();
        self.entries.iter_mut().find(|(t, _)| *t == id).and_then(|(_, v)| v.downcast_mut())
    }
}

/// Kinds of objects whose changes can make an unschedulable pod schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    Node,
    /// A pod bound to a node (added, changed or deleted).
    AssignedPod,
    /// A pending pod changed (its own spec or labels).
    UnscheduledPod,
    Namespace,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CsiNode,
    ResourceClaim,
    ResourceSlice,
    DeviceClass,
    /// A Queue (quotas) changed.
    Queue,
}

/// What happened to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventAction {
    Add,
    Delete,
    UpdateLabel,
    UpdateTaint,
    UpdateAllocatable,
    /// Node.spec.unschedulable changed, or any other update.
    Update,
}

/// A cluster event a plugin registers interest in, as kube-scheduler's
/// `ClusterEvent`. `action: None` means any action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: Option<EventAction>,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: EventAction) -> Self {
        ClusterEvent { resource, action: Some(action) }
    }

    pub const fn any(resource: EventResource) -> Self {
        ClusterEvent { resource, action: None }
    }

    /// Whether an event that happened (`self`) is one `registered` asks for.
    pub fn triggers(&self, registered: &ClusterEvent) -> bool {
        self.resource == registered.resource
            && (registered.action.is_none() || self.action.is_none() || self.action == registered.action)
    }
}

/// Every plugin implements this, and returns itself from the `as_*`
/// methods of the extension points it serves.
pub trait Plugin: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// Cluster events that may make a pod this plugin rejected schedulable.
    /// The default, any event, is safe but requeues more than needed.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::any(EventResource::Node),
            ClusterEvent::any(EventResource::AssignedPod),
            ClusterEvent::any(EventResource::Namespace),
        ]
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
}

/// Gate before a pod enters the active queue (e.g. scheduling gates).
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &Pod) -> Status;
}

/// Orders the active queue.
pub trait QueueSortPlugin: Plugin {
    /// Whether `a` should be scheduled before `b`. `a_seq`/`b_seq` are the
    /// arrival order in the queue.
    fn less(&self, a: &Pod, a_seq: u64, b: &Pod, b_seq: u64) -> bool;
}

/// What PreFilter may tell the framework besides its status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// When set, only these nodes can fit the pod (e.g. NodeAffinity on
    /// `metadata.name`); the framework filters no other node.
    pub node_names: Option<HashSet<String>>,
}

pub trait PreFilterPlugin: Plugin {
    /// Computes per-pod state once per cycle. Return `Status::skip()` when
    /// the pod needs nothing from this plugin: its Filter is then not called.
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status);
}

pub trait FilterPlugin: Plugin {
    /// Whether `pod` fits `node`. Called in parallel over nodes: must not
    /// allocate on success. Read `node.summary()` before the NodeInfo
    /// behind it: the summary is already in cache, the NodeInfo often not.
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status;

    /// What went into the verdict on `node` beyond its status (e.g. each
    /// rule's value), as name → value, for an explained decision. Called
    /// only for decisions being explained, never on the hot path.
    fn explain(&self, _state: &CycleState, _pod: &Pod, _node: &NodeView<'_>) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// What a PostFilter plugin gets besides the pod: the snapshot, the nodes
/// the filters rejected, and the cycle's filters to try nodes changed in
/// thought (victims removed) against.
pub struct PostFilterContext<'a> {
    pub snapshot: &'a Snapshot,
    /// Nodes rejected by a filter, by snapshot position, with the status.
    pub rejected: &'a [(usize, Status)],
    pub filters: &'a [(&'static str, &'a dyn FilterPlugin)],
}

impl PostFilterContext<'_> {
    /// Runs the cycle's filters on `node` (a changed copy of the snapshot
    /// node at `position`), with the pods nominated there that `pod` must
    /// leave room for, as kube's `RunFilterPluginsWithNominatedPods`.
    pub fn filter(&self, state: &CycleState, pod: &Pod, position: usize, node: &NodeInfo) -> Result<(), Status> {
        filter_with_nominated(self.filters, state, pod, position, node)
    }
}

/// What a PostFilter plugin decided: a node to nominate and the pods to
/// evict there (preemption), and its status. The engine does no I/O: the
/// driver evicts the victims and records the nomination.
#[derive(Debug, Clone)]
pub struct PostFilterResult {
    pub nominated_node: Option<String>,
    pub victims: Vec<PodRef>,
    pub status: Status,
    /// The candidates considered, for an explanation.
    pub record: Option<PreemptionRecord>,
}

impl PostFilterResult {
    /// Nothing to do, for `reason`.
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        PostFilterResult {
            nominated_node: None,
            victims: Vec::new(),
            status: Status::unschedulable(reason),
            record: None,
        }
    }
}

pub trait PostFilterPlugin: Plugin {
    /// Called when no node fits, e.g. for preemption.
    fn post_filter(&self, ctx: &PostFilterContext<'_>, state: &CycleState, pod: &Pod) -> PostFilterResult;
}

/// Runs the filters on one node; the first failure decides, as in
/// kube-scheduler. A node that passes all but was marked Fallback by some
/// filter comes back as `Err` with that (first) Fallback status.
#[inline]
pub fn run_filters(
    filters: &[(&'static str, &dyn FilterPlugin)],
    state: &CycleState,
    pod: &Pod,
    node: &NodeView<'_>,
) -> Result<(), Status> {
    let mut fallback: Option<Status> = None;
    for (name, f) in filters {
        let s = f.filter(state, pod, node);
        match s.code {
            Code::Success => {}
            Code::Fallback => {
                if fallback.is_none() {
                    fallback = Some(s.with_plugin(name));
                }
            }
            _ => return Err(s.with_plugin(name)),
        }
    }
    fallback.map_or(Ok(()), Err)
}

/// [`run_filters`] on `node` at snapshot `position`, leaving room for the
/// pods nominated there (see [`Nominated`]): the filters must pass with
/// them added, and (for affinity to them, which must not count) without;
/// and the node must not be held from the pod ([`NodeHolds`]).
/// The hot loop runs [`run_filters`] alone and this only on the few nodes
/// concerned.
pub fn filter_with_nominated(
    filters: &[(&'static str, &dyn FilterPlugin)],
    state: &CycleState,
    pod: &Pod,
    position: usize,
    node: &NodeInfo,
) -> Result<(), Status> {
    if let Some(held) = state.held_from(node.name(), pod) {
        return Err(held);
    }
    let nominated: Vec<&PodRef> = state.nominated().map(|n| n.for_pod(position, pod).collect()).unwrap_or_default();
    if !nominated.is_empty() {
        let mut with = node.clone();
        for p in nominated {
            with.add_pod(p.clone());
        }
        run_filters(filters, state, pod, &with.view())?;
    }
    run_filters(filters, state, pod, &node.view())
}

pub trait PreScorePlugin: Plugin {
    /// Computes per-pod state for scoring over the feasible `nodes`.
    /// `Status::skip()` means this plugin's Score is not called.
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status;
}

pub trait ScorePlugin: Plugin {
    /// The node's raw score. Called in parallel over nodes.
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status>;

    /// Whether [`ScorePlugin::normalize`] does anything (saves a pass).
    fn has_normalize(&self) -> bool {
        false
    }

    /// Maps raw scores onto 0..=MAX_NODE_SCORE, over all feasible nodes.
    fn normalize(&self, _state: &CycleState, _pod: &Pod, _scores: &mut [i64]) -> Status {
        Status::success()
    }

    /// What went into the score on `node` (e.g. each rule's value), as
    /// name → value, for an explained decision; never on the hot path.
    fn explain(&self, _state: &CycleState, _pod: &Pod, _node: &NodeView<'_>) -> Vec<(String, String)> {
        Vec::new()
    }
}

pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &Pod, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &Pod, node: &str);
}

pub trait PermitPlugin: Plugin {
    /// Success to go on, Wait with a timeout in seconds to hold the pod, or a rejection.
    fn permit(&self, state: &mut CycleState, pod: &Pod, node: &str) -> (Status, u64);
}

pub trait PreBindPlugin: Plugin {
    /// Whether `pre_bind` has work for this pod, asked before the binding
    /// starts (kube-scheduler's PreBindPreFlight): `Skip` when it has none.
    /// The default, Success, is always safe; a plugin that says Skip lets a
    /// plain pod be bound by one API call without a blocking thread.
    fn pre_bind_pre_flight(&self, _state: &CycleState, _pod: &Pod, _node: &str) -> Status {
        Status::success()
    }

    /// Runs in the binding task, outside the scheduling cycle; writes go
    /// through `binder`.
    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, node: &str, binder: &dyn Binder) -> Status;

    /// Undoes what a successful `pre_bind` wrote, when a later step of
    /// the binding failed (best effort; nothing by default).
    fn undo_pre_bind(&self, _state: &mut CycleState, _pod: &Pod, _node: &str, _binder: &dyn Binder) {}
}

/// Where binding writes go: the API server in `run`, the simulated cluster
/// in `simulate`. The engine itself does no I/O.
pub trait Binder: Send + Sync {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String>;

    /// Writes a decision's volume bindings (VolumeBinding's PreBind): each
    /// static volume's claimRef, each claim to provision's selected node;
    /// then waits, up to `timeout_seconds`, for the PV controller to bind
    /// every claim. The simulated cluster has nothing to wait for.
    fn bind_volumes(
        &self,
        _pod: &Pod,
        _bindings: &crate::volumes::PodVolumeBindings,
        _timeout_seconds: u64,
    ) -> Result<(), String> {
        Ok(())
    }

    /// Writes a decision's DRA claims (DynamicResources's PreBind): each
    /// claim's `status.allocation` when the decision made it, and the pod
    /// in its `status.reservedFor`. The simulated cluster keeps the
    /// cache's assumed claims as they are.
    fn bind_claims(&self, _pod: &Pod, _claims: &crate::dra::PodAllocations) -> Result<(), String> {
        Ok(())
    }

    /// Takes back what [`Binder::bind_claims`] wrote (the binding failed
    /// after it): the pod's reservation, and the allocation if no one else
    /// reserved the claim since.
    fn unbind_claims(&self, _pod: &Pod, _claims: &crate::dra::PodAllocations) -> Result<(), String> {
        Ok(())
    }
}

pub trait BindPlugin: Plugin {
    /// Binds the pod, or returns `Skip` to let the next Bind plugin do it.
    fn bind(&self, state: &mut CycleState, pod: &Pod, node: &str, binder: &dyn Binder) -> Status;

    /// True when `bind` is exactly [`Binder::bind`], its error an Error
    /// status (DefaultBinder): the driver may then make that call itself
    /// (see the scheduler's `BindingTask::api_binding_only`).
    fn is_api_binding(&self) -> bool {
        false
    }
}

pub trait PostBindPlugin: Plugin {
    fn post_bind(&self, state: &mut CycleState, pod: &Pod, node: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_state_is_typed() {
        struct A(u32);
        struct B(&'static str);
        let mut s = CycleState::new();
        s.write(A(1));
        s.write(B("x"));
        s.write(A(2));
        assert_eq!(s.read::<A>().map(|a| a.0), Some(2));
        assert_eq!(s.read::<B>().map(|b| b.0), Some("x"));
        assert!(s.read::<u8>().is_none());
    }

    #[test]
    fn event_matching() {
        let added = ClusterEvent::new(EventResource::Node, EventAction::Add);
        assert!(added.triggers(&ClusterEvent::any(EventResource::Node)));
        assert!(added.triggers(&ClusterEvent::new(EventResource::Node, EventAction::Add)));
        assert!(!added.triggers(&ClusterEvent::new(EventResource::Node, EventAction::UpdateTaint)));
        assert!(!added.triggers(&ClusterEvent::any(EventResource::AssignedPod)));
    }
}
