//! The scheduler: cache, snapshot, queue, profiles and the decision
//! algorithm put together. Cluster changes come in through the `on_*`
//! methods (the one write path); `schedule_one` runs one scheduling cycle
//! and, on success, assumes the pod and hands back a [`BindingTask`] that
//! the caller runs (in the background, in `run`) and reports with
//! [`Scheduler::finish_binding`]. Both `run` and `simulate` drive this.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::algorithm::{Algorithm, ExplainDetails, ScheduleError, ScheduleResult};
use crate::cache::{Cache, Snapshot};
use crate::config::Configuration;
use crate::explain::DecisionRecord;
use crate::extender::Extender;
use crate::facts::FactWarning;
use crate::framework::{Binder, ClusterEvent, Code, CycleState, EventAction, EventResource, Status};
use crate::model::{Labels, Node, Pod, PodRef};
use crate::profile::Profile;
use crate::queue::{QueuedPod, SchedulingQueue};
use crate::time::Millis;

/// Stands for "no plugin" when a pod failed because the cluster has no
/// nodes: unknown to the event registry, so every event requeues it.
const NO_NODES: &str = "(no nodes)";

/// A decision taken and assumed; binding remains.
pub struct BindingTask {
    /// The pod with `node_name` set to the chosen node.
    pub pod: PodRef,
    pub node: String,
    pub profile: Arc<Profile>,
    pub state: CycleState,
    pub record: DecisionRecord,
    pub queued: QueuedPod,
    /// The binding extender, when one is configured and wants this pod:
    /// it binds instead of the Bind plugins, as in kube-scheduler.
    pub extender: Option<Arc<dyn Extender>>,
}

impl BindingTask {
    /// PreBind, then the binding extender or the Bind plugins in order
    /// until one does not skip. Runs outside the scheduler's lock: it
    /// touches no scheduler state.
    pub fn bind(&mut self, binder: &dyn Binder) -> Status {
        for p in &self.profile.pre_bind {
            let Some(pb) = p.as_pre_bind() else { continue };
            let s = pb.pre_bind(&mut self.state, &self.pod, &self.node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        if let Some(ext) = &self.extender {
            return match ext.bind(&self.pod, &self.node) {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e.to_string()),
            }
            .with_plugin(ext.name());
        }
        for p in &self.profile.bind {
            let Some(b) = p.as_bind() else { continue };
            let s = b.bind(&mut self.state, &self.pod, &self.node, binder);
            if s.is_skip() {
                continue;
            }
            return s.with_plugin(p.name());
        }
        Status::error("no bind plugin bound the pod")
    }
}

/// What one scheduling cycle did.
pub enum CycleOutcome {
    /// The pod is assumed on a node; run the binding and report it.
    Assumed(Box<BindingTask>),
    /// No node fits (or a plugin failed): the pod went back to the queue.
    Failed(Box<Failure>),
}

pub struct Failure {
    pub pod: PodRef,
    pub record: DecisionRecord,
    /// kube-scheduler's message ("0/5 nodes are available: ...").
    pub message: String,
    /// True for "no node fits"; false for internal errors.
    pub unschedulable: bool,
    /// A node a PostFilter plugin made room on.
    pub nominated_node: Option<String>,
}

pub struct Scheduler {
    profiles: Vec<Arc<Profile>>,
    /// Profiles by schedulerName, in configuration order (the first whose
    /// podSelector matches takes the pod).
    by_name: HashMap<String, Vec<usize>>,
    /// Events each plugin registered, for requeueing unschedulable pods.
    plugin_events: HashMap<&'static str, Vec<ClusterEvent>>,
    cache: Cache,
    snapshot: Snapshot,
    queue: SchedulingQueue,
    algorithm: Algorithm,
    /// Pods held back by a PreEnqueue plugin (e.g. scheduling gates).
    gated: HashMap<String, PodRef>,
    /// HTTP (or other) extenders, after the plugins; see [`Extender`].
    extenders: Vec<Arc<dyn Extender>>,
    /// Every fact warning reported so far: each is reported once.
    fact_warnings: HashSet<FactWarning>,
    new_warnings: Vec<FactWarning>,
}

/// Raised when the configuration has no profile (never after validation).
#[derive(Debug, thiserror::Error)]
#[error("a scheduler needs at least one profile")]
pub struct NoProfiles;

impl Scheduler {
    pub fn new(cfg: &Configuration, profiles: Vec<Profile>, seed: u64) -> Result<Self, NoProfiles> {
        let sorter = profiles.first().ok_or(NoProfiles)?.queue_sort.clone();
        let mut plugin_events = HashMap::new();
        for p in &profiles {
            for plugin in p.plugins() {
                plugin_events.entry(plugin.name()).or_insert_with(|| plugin.events_to_register());
            }
        }
        let profiles: Vec<Arc<Profile>> = profiles.into_iter().map(Arc::new).collect();
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, p) in profiles.iter().enumerate() {
            by_name.entry(p.scheduler_name.clone()).or_default().push(i);
        }
        Ok(Scheduler {
            by_name,
            profiles,
            plugin_events,
            cache: Cache::for_config(cfg),
            fact_warnings: HashSet::new(),
            new_warnings: Vec::new(),
            snapshot: Snapshot::new(),
            queue: SchedulingQueue::new(
                sorter,
                cfg.pod_initial_backoff_seconds * 1000,
                cfg.pod_max_backoff_seconds * 1000,
            ),
            algorithm: Algorithm::new(cfg.percentage_of_nodes_to_score, seed),
            gated: HashMap::new(),
            extenders: Vec::new(),
        })
    }

    /// The extenders to call after the filter and score plugins, and to
    /// bind with (the one with a bindVerb), as configured.
    pub fn extenders(&self) -> &[Arc<dyn Extender>] {
        &self.extenders
    }

    pub fn set_extenders(&mut self, extenders: Vec<Arc<dyn Extender>>) {
        self.algorithm.set_extenders(extenders.clone());
        self.extenders = extenders;
    }

    /// Times extension points and plugins for metrics (see
    /// [`Instrument`](crate::instrument::Instrument)); decisions do not change.
    pub fn set_instrument(&mut self, instrument: Arc<dyn crate::instrument::Instrument>) {
        self.algorithm.set_instrument(instrument);
    }

    /// Which decisions ask plugins for the details behind their verdicts
    /// (e.g. each CEL rule's value): costs a second pass over the feasible
    /// nodes, so only for decisions that will be explained.
    pub fn set_explain_details(&mut self, which: ExplainDetails) {
        self.algorithm.set_explain_details(which);
    }

    pub fn profiles(&self) -> &[Arc<Profile>] {
        &self.profiles
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// Pods held back by PreEnqueue plugins.
    pub fn gated_pods(&self) -> impl Iterator<Item = &PodRef> {
        self.gated.values()
    }

    /// Whether one of our profiles takes the pod: it names the profile's
    /// schedulerName and matches its podSelector, if any.
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        self.profile_for(pod).is_some()
    }

    fn profile_for(&self, pod: &Pod) -> Option<&Arc<Profile>> {
        self.by_name
            .get(&pod.scheduler_name)?
            .iter()
            .map(|&i| &self.profiles[i])
            .find(|p| p.pod_selector.as_ref().is_none_or(|s| s.matches(&pod.labels)))
    }

    /// Node fact warnings not yet taken, each reported once per node,
    /// key and value for the life of the scheduler.
    pub fn take_warnings(&mut self) -> Vec<FactWarning> {
        std::mem::take(&mut self.new_warnings)
    }

    fn fire(&mut self, event: ClusterEvent, now: Millis) {
        let events = &self.plugin_events;
        self.queue.on_event(event, now, &|plugin, e| {
            events.get(plugin).is_none_or(|registered| registered.iter().any(|r| e.triggers(r)))
        });
    }

    // ------------------------------------------------------------ events

    pub fn on_node_upsert(&mut self, node: Node, now: Millis) {
        let actions: Vec<EventAction> = match self.cache.node(&node.name) {
            None => vec![EventAction::Add],
            Some(old) => {
                let old = &old.node;
                let mut a = Vec::new();
                if old.labels != node.labels {
                    a.push(EventAction::UpdateLabel);
                }
                if old.taints != node.taints {
                    a.push(EventAction::UpdateTaint);
                }
                if old.allocatable != node.allocatable {
                    a.push(EventAction::UpdateAllocatable);
                }
                if old.unschedulable != node.unschedulable || old.annotations != node.annotations {
                    a.push(EventAction::Update);
                }
                a
            }
        };
        for w in self.cache.upsert_node(node) {
            if self.fact_warnings.insert(w.clone()) {
                self.new_warnings.push(w);
            }
        }
        for action in actions {
            self.fire(ClusterEvent::new(EventResource::Node, action), now);
        }
    }

    pub fn on_node_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_node(name);
        self.fire(ClusterEvent::new(EventResource::Node, EventAction::Delete), now);
    }

    pub fn on_namespace(&mut self, name: &str, labels: Labels, now: Millis) {
        self.cache.upsert_namespace(name, labels);
        self.fire(ClusterEvent::any(EventResource::Namespace), now);
    }

    /// A pod was added or changed. Bound pods go to the cache (confirming
    /// an assumed one); pending pods of our profiles go to the queue;
    /// others are ignored.
    pub fn on_pod_upsert(&mut self, pod: Pod, now: Millis) {
        let pod = Arc::new(pod);
        if pod.node_name.is_some() {
            self.queue.delete(&pod.uid);
            self.gated.remove(&pod.uid);
            let known = self.cache.pod(&pod.uid).cloned();
            let result = match &known {
                Some(old) if !self.cache.is_assumed(&pod.uid) => {
                    let changed_labels = old.labels != pod.labels;
                    let r = self.cache.update_pod(pod);
                    if changed_labels {
                        self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::UpdateLabel), now);
                    }
                    r
                }
                _ => {
                    let r = self.cache.add_pod(pod);
                    self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Add), now);
                    r
                }
            };
            // Only a duplicate add can fail here, which the update path excludes.
            debug_assert!(result.is_ok(), "{result:?}");
            return;
        }
        let Some(profile) = self.profile_for(&pod).cloned() else { return };
        if self.cache.pod(&pod.uid).is_some() {
            // Assumed (our decision, not yet confirmed), or already seen
            // bound: a node name is never unset, so this is a stale view
            // (a live run watches pending and bound pods separately).
            return;
        }
        for p in &profile.pre_enqueue {
            let Some(pe) = p.as_pre_enqueue() else { continue };
            if !pe.pre_enqueue(&pod).is_success() {
                self.queue.delete(&pod.uid);
                self.gated.insert(pod.uid.clone(), pod);
                return;
            }
        }
        self.gated.remove(&pod.uid);
        if self.queue.contains(&pod.uid) {
            self.queue.update(pod, now);
            self.fire(ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update), now);
        } else {
            self.cache.observe_shape(&pod);
            self.queue.add(pod, now);
        }
    }

    /// A pending pod is gone from the pending pods' view: deleted, or bound
    /// (the bound view then reports it). Only the queue forgets it; an
    /// assumed pod stays until its binding reports, which knows whether
    /// the pod landed.
    pub fn on_unassigned_pod_delete(&mut self, uid: &str) {
        self.queue.delete(uid);
        self.gated.remove(uid);
    }

    pub fn on_pod_delete(&mut self, uid: &str, now: Millis) {
        self.queue.delete(uid);
        self.gated.remove(uid);
        if self.cache.remove_pod(uid).is_ok() {
            self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete), now);
        }
    }

    // ------------------------------------------------------------ cycles

    /// Pops the next pod and runs one scheduling cycle; None when no pod is
    /// ready at `now`.
    pub fn schedule_one(&mut self, now: Millis) -> Option<CycleOutcome> {
        let qp = self.queue.pop(now)?;
        let Some(profile) = self.profile_for(&qp.pod).cloned() else {
            self.queue.done(&qp.pod.uid);
            return None;
        };
        self.cache.update_snapshot(&mut self.snapshot);
        let mut state = CycleState::at(now);
        state.set_node_selector(profile.node_selector.clone());
        state.write(profile.gpu_placement);
        let decision = self.algorithm.schedule(&profile, &mut state, &qp.pod, &self.snapshot);
        let record = decision.record;
        match decision.result {
            Ok(ScheduleResult { node, .. }) => Some(self.assume(profile, qp, node, state, record, now)),
            Err(err) => {
                let unschedulable = matches!(err, ScheduleError::Unschedulable(_) | ScheduleError::NoNodes);
                let plugins = match &err {
                    ScheduleError::Unschedulable(fit) => fit.unschedulable_plugins(),
                    // No plugin registered this; any cluster event (a node
                    // arriving) moves the pod back.
                    ScheduleError::NoNodes => [NO_NODES].into(),
                    ScheduleError::Internal(_) => HashSet::new(),
                };
                let message = err.message();
                let pod = qp.pod.clone();
                if unschedulable {
                    self.queue.add_unschedulable(qp, plugins, now);
                } else {
                    self.queue.add_backoff(qp, now);
                }
                Some(CycleOutcome::Failed(Box::new(Failure {
                    pod,
                    record,
                    message,
                    unschedulable,
                    nominated_node: decision.nominated_node,
                })))
            }
        }
    }

    /// Assume, Reserve and Permit; on any failure the pod is un-assumed
    /// and requeued.
    fn assume(
        &mut self,
        profile: Arc<Profile>,
        qp: QueuedPod,
        node: String,
        mut state: CycleState,
        mut record: DecisionRecord,
        now: Millis,
    ) -> CycleOutcome {
        let mut assumed = (*qp.pod).clone();
        assumed.node_name = Some(node.clone());
        assumed.nominated_node_name = None;
        assumed.gpu_devices = crate::devices::assign(&self.snapshot, &assumed, &node, profile.gpu_placement);
        let assumed = Arc::new(assumed);
        if let Err(e) = self.cache.assume_pod(assumed.clone()) {
            return self.fail_after_decision(qp, record, Status::error(e.to_string()), now);
        }
        let mut reserved = Vec::new();
        let mut failure = None;
        for p in &profile.reserve {
            let Some(r) = p.as_reserve() else { continue };
            let s = r.reserve(&mut state, &assumed, &node);
            reserved.push(p.clone());
            if !s.is_success() {
                failure = Some(s.with_plugin(p.name()));
                break;
            }
        }
        if failure.is_none() {
            for p in &profile.permit {
                let Some(pm) = p.as_permit() else { continue };
                let (s, _timeout) = pm.permit(&mut state, &assumed, &node);
                match s.code {
                    Code::Success => {}
                    // Waiting pods need a waiting room the binding cycle
                    // can be released from; until a plugin needs it, a
                    // Wait is refused rather than silently passed.
                    Code::Wait => {
                        failure = Some(Status::error("permit Wait is not supported").with_plugin(p.name()));
                        break;
                    }
                    _ => {
                        failure = Some(s.with_plugin(p.name()));
                        break;
                    }
                }
            }
        }
        if let Some(status) = failure {
            for p in reserved.iter().rev() {
                if let Some(r) = p.as_reserve() {
                    r.unreserve(&mut state, &assumed, &node);
                }
            }
            let _ = self.cache.forget_pod(&assumed.uid);
            record.node = None;
            return self.fail_after_decision(qp, record, status, now);
        }
        self.queue.done(&qp.pod.uid);
        let extender = self.extenders.iter().find(|e| e.is_binder() && e.is_interested(&assumed)).cloned();
        CycleOutcome::Assumed(Box::new(BindingTask {
            pod: assumed,
            node,
            profile,
            state,
            record,
            queued: qp,
            extender,
        }))
    }

    fn fail_after_decision(
        &mut self,
        qp: QueuedPod,
        mut record: DecisionRecord,
        status: Status,
        now: Millis,
    ) -> CycleOutcome {
        let message = if status.plugin.is_empty() {
            status.message()
        } else {
            format!("running {} plugin: {}", status.plugin, status.message())
        };
        record.message = Some(message.clone());
        let pod = qp.pod.clone();
        let unschedulable = status.is_rejected();
        let plugins: HashSet<&'static str> = [status.plugin].into_iter().filter(|p| !p.is_empty()).collect();
        if unschedulable {
            self.queue.add_unschedulable(qp, plugins, now);
        } else {
            self.queue.add_backoff(qp, now);
        }
        CycleOutcome::Failed(Box::new(Failure { pod, record, message, unschedulable, nominated_node: None }))
    }

    /// Reports the binding's outcome. On failure the assumption is undone,
    /// Unreserve runs, and the pod retries after backoff (if it still exists).
    pub fn finish_binding(&mut self, mut task: BindingTask, status: &Status, now: Millis) {
        if status.is_success() {
            for p in &task.profile.post_bind {
                if let Some(pb) = p.as_post_bind() {
                    pb.post_bind(&mut task.state, &task.pod, &task.node);
                }
            }
            return;
        }
        for p in task.profile.reserve.iter().rev() {
            if let Some(r) = p.as_reserve() {
                r.unreserve(&mut task.state, &task.pod, &task.node);
            }
        }
        if self.cache.forget_pod(&task.pod.uid).is_ok() {
            self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete), now);
            self.queue.add_backoff(task.queued, now);
        }
    }
}
