//! The scheduler: cache, snapshot, queue, profiles and the decision
//! algorithm put together. Cluster changes come in through
//! [`Scheduler::apply`] (every object kind but pods, as an
//! [`ObjectChange`]), the pod methods (`on_pod_upsert`, `on_pod_delete`,
//! `on_unassigned_pod_delete`) and `on_node_provided_facts`: the one write
//! path (`apply` calls the kind's own `on_*` method, 29 in all);
//! `schedule_one` runs one scheduling cycle
//! and, on success, assumes the pod and hands back a [`BindingTask`] that
//! the caller runs (in the background, in `run`) and reports with
//! [`Scheduler::finish_binding`]. Both `run` and `simulate` drive this.
//! A gang is decided in one cycle (`gang.rs`): its members' outcomes are
//! handed out by the following calls of `schedule_one`.
//!
//! - Pods: bound ones go to the cache, pending ones to the queue, or are
//!   held while a PreEnqueue plugin says no; each change fires the
//!   `ClusterEvent` it implies. A pending pod's update that changes nothing
//!   the engine reads (our own status write coming back) is ignored. A
//!   pending pod's deletion (`on_unassigned_pod_delete`) only takes it out
//!   of the queue: an assumed pod stays until its binding reports.
//! - Profiles are chosen by schedulerName, then the first matching
//!   `podSelector` (canary profiles); pods naming our schedulerName that no
//!   profile takes are kept. Each cycle runs the profile as its
//!   `policySwitch` rule in force makes it ([`Scheduler::take_policy_switches`]);
//!   node fact warnings are handed out once each ([`Scheduler::take_warnings`]).
//! - [`Scheduler::reconfigure`] swaps in a reloaded configuration between
//!   cycles (profiles, backoffs, scoring percentage, assumed-pod expiry,
//!   extenders), sorts pending, gated and unclaimed pods to the new
//!   profiles and retries the unschedulable; a change of schedulerNames or
//!   of the queue sort is refused ([`ReconfigureError`]).
//! - A preemption nominates the pod in its queue entry and in the
//!   nominations every later cycle sees; its victims are tracked by
//!   `evictions.rs`.
//! - What is kept across cycles beyond the cache and the queue lives in
//!   [`capability`] (the starvation guard's holds, the forecast, quota
//!   competition): the core calls every capability's hooks in order.
//! - A Permit `Wait` is refused with an error: there is no waiting room yet.
//! - Devices: a pod entering the queue is counted as a shape, the profile's
//!   `gpuPlacement` goes into the cycle state, and assuming a pod gives it
//!   its devices (`assign_devices`).

pub mod capability;
mod evictions;
mod gang;
pub mod kinds;
mod nominator;
mod profiles;

pub use kinds::{Kind, KindVisitor, ObjectChange, ReadOptions, key, visit_kinds};

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::algorithm::{Algorithm, ExplainDetails, ScheduleError, ScheduleResult};
use crate::cache::{Cache, Snapshot};
use crate::config::Configuration;
use crate::devices::fgd::{self, FgdShapes};
use crate::devices::frag::DeviceChoice;
use crate::devices::{DeviceSet, GpuPlacement, choose_devices};
use crate::disruption::Pdb;
use crate::dra::{DeviceClass, PodAllocations, ResourceClaim, Slice};
use crate::explain::DecisionRecord;
use crate::extender::Extender;
use crate::facts::FactWarning;
use crate::facts::provided::ProvidedFacts;
use crate::framework::{Binder, ClusterEvent, Code, CycleState, EventAction, EventResource, Plugin, Status};
use crate::gang::{GangStatus, Gangs, PodGroup};
use crate::model::{LabelSelector, Labels, Node, Pod, PodRef};
use crate::policy_switch::PolicySwitched;
use crate::profile::Profile;
use crate::queue::{QueuedPod, SchedulingQueue};
use crate::queues::Queue;
use crate::time::Millis;
use crate::volumes::{Claim, CsiNode, PodVolumeBindings, StorageClass, Volume};
use capability::{Capability, Context};
use nominator::Nominator;
use profiles::Profiles;

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
    /// Set for the members of a gang decided together.
    pub gang: Option<Arc<GangBind>>,
}

/// Shared by the binding tasks of one gang decision: once a member's
/// binding fails, members not yet bound are not bound either; they are
/// un-assumed and retried with the gang, which then needs only the
/// members still missing.
#[derive(Debug)]
pub struct GangBind {
    pub group: String,
    failed: AtomicBool,
}

impl GangBind {
    pub fn new(group: String) -> Self {
        GangBind { group, failed: AtomicBool::new(false) }
    }

    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }
}

impl BindingTask {
    /// Whether binding this task is the one API call [`Binder::bind`] and
    /// nothing else: not a gang member, no binding extender, every PreBind
    /// plugin's pre-flight skips, and the first Bind plugin is the API
    /// binding. The driver may then make the call without running `bind`
    /// (in `run`: asynchronously, with no blocking thread) and end it with
    /// [`BindingTask::api_binding_done`].
    pub fn api_binding_only(&self) -> bool {
        self.gang.is_none()
            && self.extender.is_none()
            && self.profile.pre_bind.iter().all(|p| {
                p.as_pre_bind().is_none_or(|pb| pb.pre_bind_pre_flight(&self.state, &self.pod, &self.node).is_skip())
            })
            && self.profile.bind.iter().find_map(|p| p.as_bind()).is_some_and(|b| b.is_api_binding())
    }

    /// The status `bind` would have returned for an [`Self::api_binding_only`]
    /// task whose [`Binder::bind`] call ended with `result`: the Bind
    /// plugins run against a binder that answers with it.
    pub fn api_binding_done(&mut self, result: Result<(), String>) -> Status {
        struct Answered(Result<(), String>);
        impl Binder for Answered {
            fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
                self.0.clone()
            }
        }
        self.bind_after_pre_bind(&Answered(result))
    }

    /// PreBind, then the binding extender or the Bind plugins in order
    /// until one does not skip. Runs outside the scheduler's lock: it
    /// touches no scheduler state.
    pub fn bind(&mut self, binder: &dyn Binder) -> Status {
        if let Some(g) = &self.gang
            && g.failed()
        {
            return Status::error(format!("gang {}: another member's binding failed", g.group));
        }
        let status = self.bind_one(binder);
        if let Some(g) = &self.gang
            && !status.is_success()
        {
            g.failed.store(true, Ordering::SeqCst);
        }
        status
    }

    fn bind_one(&mut self, binder: &dyn Binder) -> Status {
        let mut done = Vec::new();
        let profile = self.profile.clone();
        for p in &profile.pre_bind {
            let Some(pb) = p.as_pre_bind() else { continue };
            let s = pb.pre_bind(&mut self.state, &self.pod, &self.node, binder);
            if !s.is_success() {
                self.undo_pre_bind(&done, binder);
                return s.with_plugin(p.name());
            }
            done.push(p.clone());
        }
        let status = self.bind_after_pre_bind(binder);
        if !status.is_success() {
            self.undo_pre_bind(&done, binder);
        }
        status
    }

    fn undo_pre_bind(&mut self, done: &[Arc<dyn Plugin>], binder: &dyn Binder) {
        for p in done.iter().rev() {
            if let Some(pb) = p.as_pre_bind() {
                pb.undo_pre_bind(&mut self.state, &self.pod, &self.node, binder);
            }
        }
    }

    fn bind_after_pre_bind(&mut self, binder: &dyn Binder) -> Status {
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
    /// The pods to evict to make that room (preemption): the caller
    /// evicts them; the pod waits, nominated, until they are gone.
    pub victims: Vec<PodRef>,
    /// Whether preemption (PostFilter) was tried.
    pub preemption_attempted: bool,
    /// The PostFilter plugin that chose `victims` (DefaultPreemption, or
    /// QueueQuota reclaiming a queue's lent quota).
    pub victims_chosen_by: Option<&'static str>,
}

pub struct Scheduler {
    /// The profiles, how a pod finds its own, and their policy rules.
    profiles: Profiles,
    /// Events each plugin registered, for requeueing unschedulable pods.
    plugin_events: HashMap<&'static str, Vec<ClusterEvent>>,
    cache: Cache,
    snapshot: Snapshot,
    queue: SchedulingQueue,
    algorithm: Algorithm,
    /// HTTP (or other) extenders, after the plugins; see [`Extender`].
    extenders: Vec<Arc<dyn Extender>>,
    /// Every fact warning reported so far: each is reported once.
    fact_warnings: HashSet<FactWarning>,
    new_warnings: Vec<FactWarning>,
    /// PodGroups and their pending members.
    gangs: Gangs,
    /// Outcomes decided in one cycle and handed out one per call (a
    /// gang's members).
    decided: VecDeque<CycleOutcome>,
    /// Pending pods nominated to a node, which other pods leave room for.
    nominator: Nominator,
    /// What the scheduler keeps across cycles beyond the cache, each part
    /// in its own capability ([`capability`]), in hook order.
    capabilities: Vec<Box<dyn Capability>>,
    /// Victims whose eviction was decided, marked terminating until the
    /// API shows them so (`evictions`).
    evictions: evictions::Evictions,
}

/// Events each plugin of `profiles` registered (a policy rule's variant
/// registers its plugins' events too: the rule may be active).
fn plugin_events(
    profiles: &[Arc<Profile>],
    capabilities: &[Box<dyn Capability>],
) -> HashMap<&'static str, Vec<ClusterEvent>> {
    let mut events = gang::events();
    // A preemptor waiting for its victims is moved by their going alone.
    events.insert(evictions::PREEMPTION_VICTIMS, Vec::new());
    for c in capabilities {
        events.insert(c.name(), c.events());
    }
    let variants = profiles.iter().flat_map(|p| p.policy_switch.iter().flat_map(|ps| ps.variants.iter()));
    for p in profiles.iter().chain(variants) {
        for plugin in p.plugins() {
            events.entry(plugin.name()).or_insert_with(|| plugin.events_to_register());
        }
    }
    events
}

/// Why a new configuration cannot be applied to a running scheduler.
#[derive(Debug, thiserror::Error)]
pub enum ReconfigureError {
    #[error(transparent)]
    NoProfiles(#[from] NoProfiles),
    /// The watches select pods by schedulerName.
    #[error(
        "profiles: the schedulerNames {new:?} differ from the running ones {old:?}; watching other names needs a restart"
    )]
    SchedulerNames { old: Vec<String>, new: Vec<String> },
    /// One queue orders the pods of every profile.
    #[error("profiles[0].plugins.queueSort: {new} would replace {old}; the queue's order changes only at a restart")]
    QueueSort { old: &'static str, new: &'static str },
}

/// Raised when the configuration has no profile (never after validation).
#[derive(Debug, thiserror::Error)]
#[error("a scheduler needs at least one profile")]
pub struct NoProfiles;

impl Scheduler {
    pub fn new(cfg: &Configuration, profiles: Vec<Profile>, seed: u64) -> Result<Self, NoProfiles> {
        let sorter = profiles.first().ok_or(NoProfiles)?.queue_sort.clone();
        let profiles: Vec<Arc<Profile>> = profiles.into_iter().map(Arc::new).collect();
        let capabilities = capability::for_config(cfg);
        Ok(Scheduler {
            plugin_events: plugin_events(&profiles, &capabilities),
            profiles: Profiles::new(profiles),
            cache: Cache::configured(
                cfg.node_facts.clone(),
                cfg.gpu_shapes.clone(),
                cfg.assumed_pod_ttl_seconds.saturating_mul(1000),
            ),
            fact_warnings: HashSet::new(),
            new_warnings: Vec::new(),
            snapshot: Snapshot::new(),
            queue: SchedulingQueue::new(
                sorter,
                cfg.pod_initial_backoff_seconds.saturating_mul(1000),
                cfg.pod_max_backoff_seconds.saturating_mul(1000),
            ),
            algorithm: Algorithm::new(cfg.percentage_of_nodes_to_score, seed),
            extenders: Vec::new(),
            gangs: Gangs::default(),
            decided: VecDeque::new(),
            nominator: Nominator::default(),
            capabilities,
            evictions: evictions::Evictions::default(),
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

    /// Applies a new configuration between cycles (hot reload): profiles
    /// (plugins, weights, args, policy rules), the scoring percentage,
    /// backoffs, the assumed-pod expiry and extenders. Pods are re-sorted
    /// to the new profiles and every unschedulable pod is retried. The
    /// schedulerNames and the queue sort plugin must stay; the settings
    /// [`Configuration::restart_needed`] lists wait for a restart.
    pub fn reconfigure(
        &mut self,
        cfg: &Configuration,
        profiles: Vec<Profile>,
        extenders: Vec<Arc<dyn Extender>>,
        now: Millis,
    ) -> Result<(), ReconfigureError> {
        let names = |ps: &mut dyn Iterator<Item = &str>| {
            let set: std::collections::BTreeSet<String> = ps.map(str::to_string).collect();
            set.into_iter().collect::<Vec<_>>()
        };
        let old = names(&mut self.profiles.list().iter().map(|p| p.scheduler_name.as_str()));
        let new = names(&mut profiles.iter().map(|p| p.scheduler_name.as_str()));
        if old != new {
            return Err(ReconfigureError::SchedulerNames { old, new });
        }
        let sorter = profiles.first().ok_or(NoProfiles)?.queue_sort.name();
        let running = self.profiles.list().first().map_or(sorter, |p| p.queue_sort.name());
        if sorter != running {
            return Err(ReconfigureError::QueueSort { old: running, new: sorter });
        }
        let profiles: Vec<Arc<Profile>> = profiles.into_iter().map(Arc::new).collect();
        self.plugin_events = plugin_events(&profiles, &self.capabilities);
        self.profiles.replace(profiles);
        self.queue.set_backoff(
            cfg.pod_initial_backoff_seconds.saturating_mul(1000),
            cfg.pod_max_backoff_seconds.saturating_mul(1000),
        );
        self.algorithm.set_percentage_of_nodes_to_score(cfg.percentage_of_nodes_to_score);
        self.cache.set_assumed_ttl(cfg.assumed_pod_ttl_seconds.saturating_mul(1000));
        self.set_extenders(extenders);

        // Pods re-sorted: those no profile takes now leave the queue;
        // gated and unclaimed pods are offered again (PreEnqueue plugins
        // and podSelectors may have changed).
        for pod in self.queue.pending_pods() {
            if self.profile_for(&pod).is_none() {
                self.queue.delete(&pod.uid);
                self.left_queue(&pod.uid);
                self.profiles.set_aside(pod);
            }
        }
        let mut again = self.queue.take_gated();
        again.extend(self.profiles.take_unclaimed());
        for pod in again {
            self.on_pod_upsert(Pod::clone(&pod), now);
        }
        // Any plugin may now decide otherwise.
        self.queue.on_event(ClusterEvent::any(EventResource::Node), now, &|_, _| true);
        Ok(())
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
        self.profiles.list()
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// Pods held back by PreEnqueue plugins.
    pub fn gated_pods(&self) -> impl Iterator<Item = &PodRef> {
        self.queue.gated_pods()
    }

    /// Whether one of our profiles takes the pod: it names the profile's
    /// schedulerName and matches its podSelector, if any.
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        self.profile_for(pod).is_some()
    }

    fn profile_for(&self, pod: &Pod) -> Option<&Arc<Profile>> {
        self.profiles.for_pod(pod)
    }

    /// Policy rule changes since the last call, oldest first.
    pub fn take_policy_switches(&mut self) -> Vec<PolicySwitched> {
        self.profiles.take_switches()
    }

    /// The active `policySwitch` rule of each profile that has rules:
    /// (schedulerName, profile index, rule name or None).
    pub fn active_policies(&self) -> Vec<(&str, usize, Option<&str>)> {
        self.profiles.active()
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

    /// What outside sources (alert Events, Prometheus) now say of node
    /// `name`; pods a changed fact may help are moved back to the queue.
    pub fn on_node_provided_facts(&mut self, name: &str, facts: ProvidedFacts, now: Millis) {
        if self.cache.set_provided_facts(name, facts) {
            self.fire(ClusterEvent::new(EventResource::Node, EventAction::Update), now);
        }
    }

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

    /// The workload to come, known in advance (a replay's pod list): the
    /// typical GPU shapes are learned from it when the configuration says
    /// so (`gpuShapes.learnFrom: workload`, as the FGD paper's simulator
    /// does); otherwise ignored.
    pub fn observe_workload<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) {
        self.cache.observe_workload(pods);
    }

    /// A pod was added or changed. Bound pods go to the cache (confirming
    /// an assumed one); pending pods of our profiles go to the queue;
    /// others are ignored.
    pub fn on_pod_upsert(&mut self, pod: Pod, now: Millis) {
        let pod = Arc::new(pod);
        if pod.node_name.is_some() {
            self.queue.delete(&pod.uid);
            self.profiles.forget(&pod.uid);
            self.left_queue(&pod.uid);
            if let Some(key) = pod.group_key() {
                self.gangs.touch(&key);
            }
            let pod = self.evictions.adjust(pod);
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
        let Some(profile) = self.profile_for(&pod).cloned() else {
            self.profiles.set_aside(pod);
            return;
        };
        self.profiles.forget(&pod.uid);
        if self.queue.parked_pod(&pod.uid).is_some_and(|queued| **queued == *pod) {
            // Nothing the scheduler reads changed (often our own status
            // write coming back): no event, no new try.
            return;
        }
        if self.cache.pod(&pod.uid).is_some() {
            // Assumed (our decision, not yet confirmed), or already seen
            // bound: a node name is never unset, so this is a stale view
            // (a live run watches pending and bound pods separately).
            return;
        }
        for p in &profile.pre_enqueue {
            let Some(pe) = p.as_pre_enqueue() else { continue };
            if !pe.pre_enqueue(&pod).is_success() {
                self.queue.gate(pod);
                return;
            }
        }
        self.nominator.record(&pod);
        let entered = !self.queue.contains(&pod.uid);
        let cx = Context { snapshot: &self.snapshot, namespaces: self.cache.namespaces() };
        for c in &mut self.capabilities {
            c.pod_queued(&cx, &pod, entered, now);
        }
        if entered {
            let member = pod.group_key().map(|key| (key, pod.uid.clone()));
            self.cache.observe_shape(&pod);
            self.queue.add(pod, now);
            if let Some((key, uid)) = member {
                self.joined_queue(&key, &uid, now);
            }
        } else {
            self.queue.update(pod, now);
            self.fire(ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update), now);
        }
    }

    /// A gang member entered the queue: the members waiting for it try again.
    fn joined_queue(&mut self, key: &str, uid: &str, now: Millis) {
        let placed = self.cache.group_counts(key).placed;
        self.gangs.add_pending(key, uid, placed, now);
        let waiting = self.gangs.view(key, placed).pending;
        self.queue.activate(&waiting, now);
    }

    /// A pod left the queue for good (placed, deleted, bound elsewhere).
    fn left_queue(&mut self, uid: &str) {
        // Every pod passes here: the maps are usually empty, and checked
        // so before hashing the uid.
        self.gangs.left_queue(uid);
        self.nominator.forget(uid);
        for c in &mut self.capabilities {
            c.pod_left(uid);
        }
    }

    /// `pod`, pending since `since`, fit no node and nominated none: the
    /// capabilities hear it (the starvation guard may hold a node).
    fn unschedulable(
        &mut self,
        profile: &Profile,
        pod: &Pod,
        since: Millis,
        rejected: &[(usize, Status)],
        now: Millis,
    ) {
        let cx = Context { snapshot: &self.snapshot, namespaces: self.cache.namespaces() };
        for c in &mut self.capabilities {
            c.unschedulable(&cx, profile, pod, since, rejected, now);
        }
    }

    /// The capability of type `T`, if the configuration turned it on
    /// (`StarvationGuard`, `Forecast`, `QuotaCompetition`).
    pub fn capability<T: Capability>(&self) -> Option<&T> {
        self.capabilities.iter().find_map(|c| c.as_any().downcast_ref::<T>())
    }

    /// A preemption nominated `node` for the in-flight pod `qp`: the pod
    /// waits with the nomination (kept in its queue entry) for its victims
    /// to go.
    fn nominate_in_flight(&mut self, qp: &mut QueuedPod, node: &str) {
        let mut pod = (*qp.pod).clone();
        pod.nominated_node_name = Some(node.to_string());
        let pod = Arc::new(pod);
        self.queue.update_in_flight(pod.clone());
        self.nominator.record(&pod);
        qp.pod = pod;
    }

    /// Pods nominated to nodes, waiting for their victims to go.
    pub fn nominated_pods(&self) -> impl Iterator<Item = (&str, &PodRef)> {
        self.nominator.pods()
    }

    /// A PodGroup was added or changed: its members try again.
    pub fn on_pod_group_upsert(&mut self, group: PodGroup, now: Millis) {
        let key = group.key();
        if self.gangs.upsert(group) {
            let placed = self.cache.group_counts(&key).placed;
            let waiting = self.gangs.view(&key, placed).pending;
            self.queue.activate(&waiting, now);
        }
    }

    /// A PodGroup was deleted: its pending members wait for it again.
    pub fn on_pod_group_delete(&mut self, namespace: &str, name: &str) {
        self.gangs.remove(&format!("{namespace}/{name}"));
    }

    /// The known PodGroups.
    pub fn pod_groups(&self) -> impl Iterator<Item = &Arc<PodGroup>> {
        self.gangs.specs()
    }

    /// PodGroup statuses that changed since the last call, for the caller
    /// to write.
    pub fn take_gang_statuses(&mut self) -> Vec<(Arc<PodGroup>, GangStatus)> {
        let cache = &self.cache;
        self.gangs.take_statuses(|key| {
            let c = cache.group_counts(key);
            (c.placed, c.running)
        })
    }

    /// A PodDisruptionBudget was added or changed.
    pub fn on_pdb_upsert(&mut self, pdb: Pdb) {
        self.cache.upsert_pdb(pdb);
    }

    pub fn on_pdb_delete(&mut self, namespace: &str, name: &str) {
        self.cache.remove_pdb(namespace, name);
    }

    /// A Service's selector was added or changed (None: deleted).
    pub fn on_service(&mut self, namespace: &str, name: &str, selector: Option<Labels>) {
        let w = self.cache.workloads_mut();
        match selector {
            Some(s) => w.upsert_service(namespace, name, s),
            None => w.remove_service(namespace, name),
        }
    }

    /// A controller's (ReplicaSet, StatefulSet, ReplicationController)
    /// selector was added or changed (None: deleted).
    pub fn on_controller(&mut self, kind: &str, namespace: &str, name: &str, selector: Option<LabelSelector>) {
        let w = self.cache.workloads_mut();
        match selector {
            Some(s) => w.upsert_controller(kind, namespace, name, s),
            None => w.remove_controller(kind, namespace, name),
        }
    }

    /// A PersistentVolumeClaim was added or changed.
    pub fn on_claim_upsert(&mut self, claim: Claim, now: Millis) {
        let action = if self.cache.volumes().claim(&claim.namespace, &claim.name).is_some() {
            EventAction::Update
        } else {
            EventAction::Add
        };
        self.cache.upsert_claim(claim);
        self.fire(ClusterEvent::new(EventResource::PersistentVolumeClaim, action), now);
    }

    pub fn on_claim_delete(&mut self, namespace: &str, name: &str, now: Millis) {
        self.cache.remove_claim(namespace, name);
        self.fire(ClusterEvent::new(EventResource::PersistentVolumeClaim, EventAction::Delete), now);
    }

    /// A PersistentVolume was added or changed.
    pub fn on_volume_upsert(&mut self, volume: Volume, now: Millis) {
        let action =
            if self.cache.volumes().volume(&volume.name).is_some() { EventAction::Update } else { EventAction::Add };
        self.cache.upsert_volume(volume);
        self.fire(ClusterEvent::new(EventResource::PersistentVolume, action), now);
    }

    pub fn on_volume_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_volume(name);
        self.fire(ClusterEvent::new(EventResource::PersistentVolume, EventAction::Delete), now);
    }

    pub fn on_storage_class_upsert(&mut self, class: StorageClass, now: Millis) {
        self.cache.upsert_storage_class(class);
        self.fire(ClusterEvent::any(EventResource::StorageClass), now);
    }

    pub fn on_storage_class_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_storage_class(name);
        self.fire(ClusterEvent::new(EventResource::StorageClass, EventAction::Delete), now);
    }

    pub fn on_csi_node_upsert(&mut self, csi: CsiNode, now: Millis) {
        self.cache.upsert_csi_node(csi);
        self.fire(ClusterEvent::any(EventResource::CsiNode), now);
    }

    pub fn on_csi_node_delete(&mut self, node: &str, now: Millis) {
        self.cache.remove_csi_node(node);
        self.fire(ClusterEvent::new(EventResource::CsiNode, EventAction::Delete), now);
    }

    /// A ResourceClaim was added or changed.
    pub fn on_resource_claim_upsert(&mut self, claim: ResourceClaim, now: Millis) {
        let action = if self.cache.dra().claim(&claim.namespace, &claim.name).is_some() {
            EventAction::Update
        } else {
            EventAction::Add
        };
        self.cache.upsert_resource_claim(claim);
        self.fire(ClusterEvent::new(EventResource::ResourceClaim, action), now);
    }

    pub fn on_resource_claim_delete(&mut self, namespace: &str, name: &str, now: Millis) {
        self.cache.remove_resource_claim(namespace, name);
        self.fire(ClusterEvent::new(EventResource::ResourceClaim, EventAction::Delete), now);
    }

    /// A ResourceSlice was added or changed.
    pub fn on_slice_upsert(&mut self, slice: Slice, now: Millis) {
        self.cache.upsert_slice(slice);
        self.fire(ClusterEvent::any(EventResource::ResourceSlice), now);
    }

    pub fn on_slice_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_slice(name);
        self.fire(ClusterEvent::new(EventResource::ResourceSlice, EventAction::Delete), now);
    }

    /// A DeviceClass was added or changed.
    pub fn on_device_class_upsert(&mut self, class: DeviceClass, now: Millis) {
        self.cache.upsert_device_class(class);
        self.fire(ClusterEvent::any(EventResource::DeviceClass), now);
    }

    pub fn on_device_class_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_device_class(name);
        self.fire(ClusterEvent::new(EventResource::DeviceClass, EventAction::Delete), now);
    }

    /// A Queue (quotas) was added or changed.
    pub fn on_queue_upsert(&mut self, queue: Queue, now: Millis) {
        self.cache.upsert_queue(queue);
        self.fire(ClusterEvent::any(EventResource::Queue), now);
    }

    pub fn on_queue_delete(&mut self, name: &str, now: Millis) {
        self.cache.remove_queue(name);
        self.fire(ClusterEvent::new(EventResource::Queue, EventAction::Delete), now);
    }

    /// A pending pod is gone from the pending pods' view: deleted, or bound
    /// (the bound view then reports it). Only the queue forgets it; an
    /// assumed pod stays until its binding reports, which knows whether
    /// the pod landed.
    pub fn on_unassigned_pod_delete(&mut self, uid: &str) {
        self.queue.delete(uid);
        self.profiles.forget(uid);
        self.left_queue(uid);
    }

    pub fn on_pod_delete(&mut self, uid: &str, now: Millis) {
        self.queue.delete(uid);
        self.profiles.forget(uid);
        self.left_queue(uid);
        let ready = self.evictions.forget(uid);
        if !ready.is_empty() {
            self.queue.activate_now(&ready);
        }
        let group = if self.cache.has_groups() { self.cache.pod(uid).and_then(|p| p.group_key()) } else { None };
        if self.cache.remove_pod(uid).is_ok() {
            if let Some(key) = group {
                self.gangs.touch(&key);
            }
            self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete), now);
        }
    }

    // ------------------------------------------------------------ cycles

    /// The state one cycle starts from, for a single pod and a gang's
    /// member alike: every side table a cycle reads is written here, so a
    /// new one cannot be missed by gangs.
    fn cycle_state(&mut self, profile: &Profile, pod: &Pod, now: Millis) -> CycleState {
        let mut state = CycleState::at(now);
        state.set_node_selector(profile.node_selector.clone());
        state.set_nominated(self.nominator.for_cycle(&self.snapshot));
        state.write(profile.gpu_placement);
        let cx = Context { snapshot: &self.snapshot, namespaces: self.cache.namespaces() };
        for c in &mut self.capabilities {
            c.prepare_cycle(&cx, &mut state, pod, now);
        }
        state
    }

    /// Pops the next pod and runs one scheduling cycle; None when no pod is
    /// ready at `now`.
    pub fn schedule_one(&mut self, now: Millis) -> Option<CycleOutcome> {
        let expired = self.evictions.expire(&mut self.cache, now);
        if !expired.is_empty() {
            // A victim's deletion never showed: its preemptor may try again.
            self.queue.activate_now(&expired);
        }
        if let Some(outcome) = self.decided.pop_front() {
            return Some(outcome);
        }
        let qp = self.queue.pop(now)?;
        let Some(index) = self.profiles.index_for(&qp.pod) else {
            self.queue.done(&qp.pod.uid);
            return None;
        };
        self.cache.update_snapshot(&mut self.snapshot);
        let profile = self.profiles.switched(index, self.snapshot.load());
        if let Some(key) = qp.pod.group_key() {
            let view = self.gangs.view(&key, self.cache.group_counts(&key).placed);
            if view.needed() > 0 || view.spec.is_none() {
                self.schedule_gang(profile, qp, view, now);
                return self.decided.pop_front();
            }
            // The gang has its minMember: later members join like ordinary pods.
        }
        let mut state = self.cycle_state(&profile, &qp.pod, now);
        let decision = self.algorithm.schedule(&profile, &mut state, &qp.pod, &self.snapshot);
        let mut record = decision.record;
        let mut qp = qp;
        for c in &mut self.capabilities {
            c.decided(&qp.pod, &state, decision.result.is_ok());
        }
        match decision.result {
            Ok(ScheduleResult { node, .. }) => {
                if record.preemption.is_none() {
                    record.preemption = self.nominator.preemption(&qp.pod.uid).cloned();
                }
                Some(self.assume(profile, qp, node, state, record, now))
            }
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
                let retry_at = match &err {
                    ScheduleError::Unschedulable(fit) => fit.retry_at(),
                    _ => None,
                };
                let mut plugins = plugins;
                if let Some(node) = &decision.nominated_node {
                    self.nominate_in_flight(&mut qp, node);
                    if !decision.victims.is_empty() {
                        let preemptor = [qp.pod.uid.clone()];
                        self.evictions.mark(&mut self.cache, &decision.victims, &preemptor, now);
                        plugins = [evictions::PREEMPTION_VICTIMS].into();
                    }
                    if let Some(p) = &record.preemption {
                        self.nominator.record_preemption(&qp.pod.uid, p.clone());
                    }
                } else if unschedulable {
                    self.unschedulable(&profile, &qp.pod, qp.first_seen, &record.rejected, now);
                }
                let pod = qp.pod.clone();
                if unschedulable {
                    self.queue.add_unschedulable_until(qp, plugins, retry_at, now);
                } else {
                    self.queue.add_backoff(qp, now);
                }
                Some(CycleOutcome::Failed(Box::new(Failure {
                    pod,
                    record,
                    message,
                    unschedulable,
                    nominated_node: decision.nominated_node,
                    victims: decision.victims,
                    preemption_attempted: decision.post_filter_ran,
                    victims_chosen_by: decision.victims_chosen_by,
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
        match self.reserve(&profile, &qp.pod, &node, &mut state) {
            Ok(assumed) => {
                self.queue.done(&qp.pod.uid);
                self.left_queue(&qp.pod.uid);
                CycleOutcome::Assumed(Box::new(self.binding_task(profile, assumed, node, state, record, qp, None)))
            }
            Err(status) => {
                record.node = None;
                self.fail_after_decision(qp, record, status, now)
            }
        }
    }

    /// Assumes `pod` on `node` in the cache, then runs Reserve and Permit.
    /// On failure everything is undone and the failing status returned.
    fn reserve(&mut self, profile: &Profile, pod: &Pod, node: &str, state: &mut CycleState) -> Result<PodRef, Status> {
        let mut assumed = pod.clone();
        assumed.node_name = Some(node.to_string());
        assumed.nominated_node_name = None;
        // GpuFragmentation leaves the measure and gap balance it scored
        // with; devices are chosen by them.
        let how = DeviceChoice {
            placement: profile.gpu_placement,
            measure: state.read::<crate::devices::frag::Measure>().copied().unwrap_or_default(),
            gaps: state.read::<crate::devices::gaps::GapBalance>(),
        };
        // FgdScore leaves FGD's typical pods for the `fgd` placement.
        let fgd = state.read::<Arc<FgdShapes>>().map(Arc::as_ref);
        assumed.gpu_devices = assign_devices(&self.snapshot, &assumed, node, how, fgd);
        let assumed = Arc::new(assumed);
        self.cache.assume_pod(assumed.clone()).map_err(|e| Status::error(e.to_string()))?;
        let mut reserved = Vec::new();
        let mut failure = None;
        for p in &profile.reserve {
            let Some(r) = p.as_reserve() else { continue };
            let s = r.reserve(state, &assumed, node);
            reserved.push(p.clone());
            if !s.is_success() {
                failure = Some(s.with_plugin(p.name()));
                break;
            }
        }
        if failure.is_none() {
            for p in &profile.permit {
                let Some(pm) = p.as_permit() else { continue };
                let (s, _timeout) = pm.permit(state, &assumed, node);
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
        match failure {
            None => {
                // VolumeBinding's Reserve chose the pod's volume bindings:
                // the next decisions see them taken.
                if let Some(b) = state.read::<PodVolumeBindings>().filter(|b| !b.is_empty()) {
                    self.cache.assume_volumes(&assumed.uid, b);
                }
                // DynamicResources's Reserve allocated the pod's claims:
                // the next decisions see the devices taken.
                if let Some(a) = state.read::<PodAllocations>().filter(|a| !a.is_empty()) {
                    self.cache.assume_claims(&assumed.uid, a);
                }
                Ok(assumed)
            }
            Some(status) => {
                for p in reserved.iter().rev() {
                    if let Some(r) = p.as_reserve() {
                        r.unreserve(state, &assumed, node);
                    }
                }
                let forgotten = self.cache.forget_pod(&assumed.uid);
                // Assumed above in this call; Reserve and Permit plugins
                // cannot reach the cache, so it is still assumed here.
                debug_assert!(forgotten.is_ok(), "a pod assumed in this cycle: {forgotten:?}");
                Err(status)
            }
        }
    }

    /// Undoes [`Scheduler::reserve`] for a pod whose binding will not run.
    fn unreserve(&mut self, profile: &Profile, pod: &Pod, node: &str, state: &mut CycleState) {
        for p in profile.reserve.iter().rev() {
            if let Some(r) = p.as_reserve() {
                r.unreserve(state, pod, node);
            }
        }
        self.cache.forget_volumes(&pod.uid);
        self.cache.forget_claims(&pod.uid);
        let forgotten = self.cache.forget_pod(&pod.uid);
        // Only a gang attempt takes its members back, in the cycle that
        // assumed them: no watch event came in between.
        debug_assert!(forgotten.is_ok(), "a member assumed in this cycle: {forgotten:?}");
    }

    #[allow(clippy::too_many_arguments)]
    fn binding_task(
        &self,
        profile: Arc<Profile>,
        pod: PodRef,
        node: String,
        state: CycleState,
        record: DecisionRecord,
        queued: QueuedPod,
        gang: Option<Arc<GangBind>>,
    ) -> BindingTask {
        let extender = self.extenders.iter().find(|e| e.is_binder() && e.is_interested(&pod)).cloned();
        BindingTask { pod, node, profile, state, record, queued, extender, gang }
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
        CycleOutcome::Failed(Box::new(Failure {
            pod,
            record,
            message,
            unschedulable,
            nominated_node: None,
            victims: Vec::new(),
            preemption_attempted: false,
            victims_chosen_by: None,
        }))
    }

    /// Reports the binding's outcome. On failure the assumption is undone,
    /// Unreserve runs, and the pod retries after backoff (if it still exists).
    pub fn finish_binding(&mut self, mut task: BindingTask, status: &Status, now: Millis) {
        if status.is_success() {
            // The bound view confirms it; until then the assumption holds,
            // for the configured TTL at most (`expire_assumed_pods`).
            self.cache.finish_binding(&task.pod.uid, now);
            self.cache.confirm_volumes(&task.pod.uid);
            self.cache.confirm_claims(&task.pod.uid);
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
        self.cache.forget_volumes(&task.pod.uid);
        self.cache.forget_claims(&task.pod.uid);
        if self.cache.forget_pod(&task.pod.uid).is_ok() {
            self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete), now);
            let member = task.pod.group_key().map(|key| (key, task.pod.uid.clone()));
            self.queue.add_backoff(task.queued, now);
            if let Some((key, uid)) = member
                && self.queue.contains(&uid)
            {
                self.gangs.touch(&key);
                self.joined_queue(&key, &uid, now);
            }
        }
    }

    /// Forgets the assumed pods whose binding succeeded more than
    /// `assumedPodTTLSeconds` before `now` while the API never showed them
    /// bound (kube-scheduler's assumed-pod expiry: a lost watch event must
    /// not hold a node's resources for ever). Returns them as they were
    /// assumed; a driver that knows one is still pending queues it again.
    pub fn expire_assumed_pods(&mut self, now: Millis) -> Vec<PodRef> {
        if self.cache.awaiting_confirmation() == 0 {
            return Vec::new();
        }
        let expired = self.cache.cleanup_assumed_pods(now);
        if !expired.is_empty() {
            self.fire(ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete), now);
        }
        expired
    }
}
/// The devices `pod` gets on `node` of `snapshot` (the one its decision
/// saw), chosen as `how` says (the measure and gap balance
/// GpuFragmentation scored with; for `fgd`, FGD's typical pods FgdScore
/// scored with, else derived here); None when it takes no device.
fn assign_devices(
    snapshot: &Snapshot,
    pod: &Pod,
    node: &str,
    how: DeviceChoice<'_>,
    fgd_shapes: Option<&FgdShapes>,
) -> Option<DeviceSet> {
    if !pod.gpu.wants_devices() {
        return None;
    }
    let info = snapshot.get(node)?;
    let shapes = snapshot.gpu_shapes();
    let s = info.gpu_state();
    let devices = if how.placement == GpuPlacement::Fgd {
        match fgd_shapes {
            Some(f) => fgd::choose_devices(&s, &pod.gpu, pod.requests.milli_cpu, f),
            None => fgd::choose_devices(&s, &pod.gpu, pod.requests.milli_cpu, &FgdShapes::new(shapes)),
        }
    } else {
        choose_devices(&s, &pod.gpu, pod.requests.milli_cpu, how, shapes)
    };
    devices.filter(|d| !d.is_empty())
}
