//! The scheduler cache and its snapshots.
//!
//! The cache is the one place cluster state is written (watch events in
//! `run`, manifests in `simulate`), and only through `Scheduler`'s methods.
//! Every change to a node bumps a global
//! generation; a [`Snapshot`] remembers the generation it has seen and
//! [`Cache::update_snapshot`] copies only the nodes changed since then.
//! NodeInfos are shared (`Arc`) between the cache and snapshots and cloned
//! on write, so an update costs one copy of each changed node, and only of
//! a node a snapshot still holds.
//!
//! Besides one `NodeInfo` per node (with its facts, read once per node
//! update), the cache keeps pod states (bound or assumed), namespace labels,
//! [`ServiceStats`] per service (moved when a node's zone or cloud changes),
//! each gang's members held ([`Cache::group_counts`]), and the pod shapes
//! seen ([`Cache::observe_shape`]: a pod when queued, or first seen bound).
//! An assumed pod whose binding succeeded gets a deadline
//! `assumedPodTTLSeconds` later; [`Cache::cleanup_assumed_pods`] forgets
//! those whose bound view has not come by then (kube-scheduler's expiry: a
//! lost watch event must not hold a node's room for ever); a binding in
//! flight never expires.
//!
//! A snapshot holds the NodeInfos in search order (zones interleaved, like
//! kube's node tree, recomputed only when nodes come or go or a node's
//! region or zone changes), their summaries in one contiguous array, their
//! names ([`NodeNames`], shared with decision records), and what changes
//! with the nodes: `FactCounts`, the load, the GPU gaps and free GPU per
//! node type. Service stats, PDBs, volumes, DRA objects, queues and the
//! typical GPU shapes are copied only when their generation changed.
//! [`NodeList`] is some of a snapshot's nodes by position (what PreScore
//! gets).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use thiserror::Error;

use crate::devices::gaps::GapHistogram;
use crate::devices::kept::TypeCapacity;
use crate::devices::{GpuShapesConfig, ShapeStats, TypicalShapes};
use crate::disruption::Pdb;
use crate::dra::{DeviceClass, DraObjects, PodAllocations, ResourceClaim, Slice};
use crate::facts::provided::ProvidedFacts;
use crate::facts::{Cloud, FactWarning, FactsConfig, NodeFacts, service_identity};
use crate::model::{LABEL_REGION, LABEL_ZONE, Labels, Node, Pod, PodRef};
use crate::node_info::Load;
pub use crate::node_info::{FactCounts, NodeInfo, NodeSummary, NodeView};
use crate::queues::{Queue, Queues};
use crate::selectors::WorkloadSelectors;
use crate::time::Millis;
use crate::volumes::{Claim, CsiNode, PodVolumeBindings, StorageClass, Volume, VolumeObjects};

pub use crate::resources::non_zero_defaults;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("pod {0} is already in the cache")]
    PodExists(String),
    #[error("pod {0} is not in the cache")]
    PodNotFound(String),
    #[error("pod {0} has no node name")]
    NoNodeName(String),
    #[error("pod {0} is not assumed")]
    NotAssumed(String),
}

#[derive(Debug, Clone)]
struct PodState {
    pod: PodRef,
    /// The queue its use is counted in, and its node's GPU model then
    /// (kept so that removing it takes back exactly what was counted).
    queue: Option<(String, Option<Arc<str>>)>,
    assumed: bool,
    /// For an assumed pod whose binding succeeded: when the cache forgets
    /// it if the API has not shown it bound by then (kube-scheduler's
    /// `deadline` with `bindingFinished`). None while the binding runs:
    /// a binding in flight never expires.
    deadline: Option<Millis>,
}

/// The cluster as the scheduler believes it: nodes, pods on them (bound or
/// assumed), and namespace labels.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: HashMap<String, Arc<NodeInfo>>,
    pods: HashMap<String, PodState>,
    namespaces: Arc<HashMap<String, Labels>>,
    generation: u64,
    /// Node name by the generation of its latest change: lets a snapshot
    /// find what changed since it was taken without scanning every node.
    changes: BTreeMap<u64, String>,
    /// Bumped when the set of nodes (or a node's zone) changes; snapshots
    /// then rebuild their node order.
    node_set_generation: u64,
    namespaces_generation: u64,
    facts_config: FactsConfig,
    /// Facts from outside the Node objects (alert Events, Prometheus), by
    /// node name; kept for nodes not (yet) known too.
    provided: HashMap<String, ProvidedFacts>,
    /// Where each service's pods run, kept as pods come and go.
    services: HashMap<String, Arc<ServiceStats>>,
    /// Service by the generation of its latest change (as `changes`).
    service_changes: BTreeMap<u64, String>,
    service_generation: HashMap<String, u64>,
    /// Members of each gang held here (bound or assumed), and how many of
    /// them run: what gang cycles and PodGroup statuses count.
    groups: HashMap<String, GroupCounts>,
    /// PodDisruptionBudgets by `NAMESPACE/NAME`, for preemption.
    pdbs: BTreeMap<String, Pdb>,
    pdbs_generation: u64,
    /// How long an assumed pod whose binding finished waits for its bound
    /// view; 0: for ever.
    assumed_ttl: Millis,
    /// Assumed pods whose binding finished, by deadline then uid: what
    /// [`Cache::cleanup_assumed_pods`] looks at, without scanning every pod.
    deadlines: std::collections::BTreeSet<(Millis, String)>,
    /// Claims, volumes, classes and CSINodes, with assumed bindings.
    volumes: Arc<VolumeObjects>,
    volumes_generation: u64,
    /// Services' and controllers' selectors (default spreading).
    workloads: Arc<WorkloadSelectors>,
    workloads_generation: u64,
    /// ResourceSlices, DeviceClasses and ResourceClaims, with assumed
    /// allocations.
    dra: Arc<DraObjects>,
    dra_generation: u64,
    /// Queues (quotas) and what their pods use.
    queues: Arc<Queues>,
    queues_generation: u64,
    /// The pod shapes seen, for the GPU fragmentation measure.
    shapes: ShapeStats,
    shapes_generation: u64,
}

/// A gang's members in the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Bound or assumed.
    pub placed: u32,
    pub running: u32,
}

/// Where the pods of one service (DESIGN.md §4: namespace + `app` label)
/// run: per zone and per cloud. Kept incrementally by the cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Pods per zone; nodes without a zone label count under "".
    pub zones: Vec<(Arc<str>, u32)>,
    pub private: u32,
    pub public: u32,
    pub total: u32,
}

impl ServiceStats {
    /// Pods of the service in `zone` ("" for nodes without one).
    pub fn in_zone(&self, zone: &str) -> u32 {
        self.zones.iter().find(|(z, _)| &**z == zone).map_or(0, |(_, n)| *n)
    }

    /// The cloud the service is in: the one holding its pods, or, if pods
    /// run in both, the one holding more (private on a tie).
    pub fn cloud(&self) -> Option<Cloud> {
        match (self.private, self.public) {
            (0, 0) => None,
            (p, q) if p >= q => Some(Cloud::Private),
            _ => Some(Cloud::Public),
        }
    }

    fn add(&mut self, zone: Option<&Arc<str>>, cloud: Option<Cloud>, delta: i64) {
        let apply = |n: &mut u32| *n = u32::try_from(i64::from(*n) + delta).unwrap_or(0);
        let zone = zone.cloned().unwrap_or_else(|| Arc::from(""));
        match self.zones.iter_mut().find(|(z, _)| *z == zone) {
            Some((_, n)) => apply(n),
            None if delta > 0 => self.zones.push((zone, u32::try_from(delta).unwrap_or(0))),
            None => {}
        }
        self.zones.retain(|(_, n)| *n > 0);
        match cloud {
            Some(Cloud::Private) => apply(&mut self.private),
            Some(Cloud::Public) => apply(&mut self.public),
            None => {}
        }
        apply(&mut self.total);
    }
}

impl Cache {
    pub fn new() -> Self {
        Cache::with_facts(FactsConfig::default())
    }

    /// A cache that reads node facts with `facts_config`.
    pub fn with_facts(facts_config: FactsConfig) -> Self {
        let dra = Arc::new(DraObjects::with_gpu_drivers(&facts_config.dra_gpu_drivers));
        Cache { node_set_generation: 1, facts_config, dra, ..Default::default() }
    }

    /// A cache that reads node facts with `facts_config`, learns the
    /// typical GPU shapes as `shapes` says, and forgets an assumed pod not
    /// confirmed within `assumed_ttl` (0: never).
    pub fn configured(facts_config: FactsConfig, shapes: GpuShapesConfig, assumed_ttl: Millis) -> Self {
        Cache {
            node_set_generation: 1,
            dra: Arc::new(DraObjects::with_gpu_drivers(&facts_config.dra_gpu_drivers)),
            facts_config,
            shapes: ShapeStats::new(shapes),
            assumed_ttl,
            ..Default::default()
        }
    }

    /// Counts a pod's shape for the typical GPU shapes (once per pod: when
    /// it is queued, or first seen bound).
    pub fn observe_shape(&mut self, pod: &Pod) {
        // `observe` says when the typical shapes changed.
        if self.shapes.observe(pod) {
            self.shapes_generation += 1;
        }
    }

    /// Counts a workload known in advance for the typical GPU shapes,
    /// when they are learned from it (`gpuShapes.learnFrom: workload`).
    pub fn observe_workload<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) {
        if self.shapes.observe_workload(pods) {
            self.shapes_generation += 1;
        }
    }

    /// The typical pod shapes as learned so far.
    pub fn gpu_shapes(&self) -> &Arc<TypicalShapes> {
        self.shapes.typical()
    }

    /// Counts `pod` (+1 or -1) for its service on a node with these facts.
    fn account(&mut self, pod: &Pod, facts: &NodeFacts, delta: i64) {
        let Some(service) = service_identity(pod) else { return };
        self.generation += 1;
        let stats = self.services.entry(service.clone()).or_default();
        Arc::make_mut(stats).add(facts.zone.as_ref(), facts.cloud, delta);
        if stats.total == 0 {
            self.services.remove(&service);
        }
        if let Some(old) = self.service_generation.insert(service.clone(), self.generation) {
            self.service_changes.remove(&old);
        }
        self.service_changes.insert(self.generation, service);
    }

    /// Counts `pod`'s use (+1 or -1) in its queue, on a node of the model given.
    fn count_in_queue(&mut self, pod: &Pod, queue: Option<&(String, Option<Arc<str>>)>, sign: i64) {
        let Some((queue, model)) = queue else { return };
        self.queues_generation += 1;
        Arc::make_mut(&mut self.queues).account(queue, &crate::queues::demand(pod), model.as_deref(), sign);
    }

    /// The queue `pod` is counted in: its label's, else its namespace's.
    fn queue_for(&self, pod: &Pod) -> Option<String> {
        crate::queues::queue_of(pod, &self.namespaces).map(str::to_string)
    }

    /// Queues, to read.
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// Every namespace's labels.
    pub fn namespaces(&self) -> &HashMap<String, Labels> {
        &self.namespaces
    }

    /// Adds or replaces a Queue.
    pub fn upsert_queue(&mut self, q: Queue) {
        self.queues_generation += 1;
        Arc::make_mut(&mut self.queues).upsert(q);
    }

    pub fn remove_queue(&mut self, name: &str) {
        self.queues_generation += 1;
        Arc::make_mut(&mut self.queues).remove(name);
    }

    /// Counts `pod` (+1 or -1) for its gang, if it has one.
    fn count_member(&mut self, pod: &Pod, delta: i32) {
        let Some(key) = pod.group_key() else { return };
        let c = self.groups.entry(key.clone()).or_default();
        c.placed = c.placed.saturating_add_signed(delta);
        if pod.running {
            c.running = c.running.saturating_add_signed(delta);
        }
        if c.placed == 0 {
            self.groups.remove(&key);
        }
    }

    /// Whether any gang member is held here.
    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }

    /// The members of gang `key` held here.
    pub fn group_counts(&self, key: &str) -> GroupCounts {
        self.groups.get(key).copied().unwrap_or_default()
    }

    /// Adds or replaces a PodDisruptionBudget.
    pub fn upsert_pdb(&mut self, pdb: Pdb) {
        let key = format!("{}/{}", pdb.namespace, pdb.name);
        if self.pdbs.get(&key) != Some(&pdb) {
            self.pdbs.insert(key, pdb);
            self.pdbs_generation += 1;
        }
    }

    pub fn remove_pdb(&mut self, namespace: &str, name: &str) {
        if self.pdbs.remove(&format!("{namespace}/{name}")).is_some() {
            self.pdbs_generation += 1;
        }
    }

    /// Services' and controllers' selectors, to change.
    pub fn workloads_mut(&mut self) -> &mut WorkloadSelectors {
        self.workloads_generation += 1;
        Arc::make_mut(&mut self.workloads)
    }

    fn volumes_mut(&mut self) -> &mut VolumeObjects {
        self.volumes_generation += 1;
        Arc::make_mut(&mut self.volumes)
    }

    pub fn volumes(&self) -> &VolumeObjects {
        &self.volumes
    }

    pub fn upsert_claim(&mut self, claim: Claim) {
        self.volumes_mut().upsert_claim(claim);
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) {
        self.volumes_mut().remove_claim(namespace, name);
    }

    pub fn upsert_volume(&mut self, volume: Volume) {
        self.volumes_mut().upsert_volume(volume);
    }

    pub fn remove_volume(&mut self, name: &str) {
        self.volumes_mut().remove_volume(name);
    }

    pub fn upsert_storage_class(&mut self, class: StorageClass) {
        self.volumes_mut().upsert_class(class);
    }

    pub fn remove_storage_class(&mut self, name: &str) {
        self.volumes_mut().remove_class(name);
    }

    pub fn upsert_csi_node(&mut self, csi: CsiNode) {
        self.volumes_mut().upsert_csi_node(csi);
    }

    pub fn remove_csi_node(&mut self, node: &str) {
        self.volumes_mut().remove_csi_node(node);
    }

    /// Assumes a decision's volume bindings (see [`VolumeObjects::assume`]).
    pub fn assume_volumes(&mut self, pod_uid: &str, bindings: &PodVolumeBindings) {
        self.volumes_mut().assume(pod_uid, bindings);
    }

    /// Undoes them (the binding failed).
    pub fn forget_volumes(&mut self, pod_uid: &str) {
        if self.volumes.assumed(pod_uid).is_some() {
            self.volumes_mut().forget(pod_uid);
        }
    }

    /// Keeps them (the binding was written).
    pub fn confirm_volumes(&mut self, pod_uid: &str) {
        if self.volumes.assumed(pod_uid).is_some() {
            self.volumes_mut().confirm(pod_uid);
        }
    }

    fn dra_mut(&mut self) -> &mut DraObjects {
        self.dra_generation += 1;
        Arc::make_mut(&mut self.dra)
    }

    pub fn dra(&self) -> &DraObjects {
        &self.dra
    }

    pub fn upsert_slice(&mut self, slice: Slice) {
        let nodes = self.dra_mut().upsert_slice(slice);
        self.refresh_dra_gpus(&nodes);
    }

    pub fn remove_slice(&mut self, name: &str) {
        let nodes = self.dra_mut().remove_slice(name);
        self.refresh_dra_gpus(&nodes);
    }

    pub fn upsert_device_class(&mut self, class: DeviceClass) {
        self.dra_mut().upsert_class(class);
    }

    pub fn remove_device_class(&mut self, name: &str) {
        self.dra_mut().remove_class(name);
    }

    pub fn upsert_resource_claim(&mut self, claim: ResourceClaim) {
        let nodes = self.dra_mut().upsert_claim(claim);
        self.refresh_dra_gpus(&nodes);
    }

    pub fn remove_resource_claim(&mut self, namespace: &str, name: &str) {
        let nodes = self.dra_mut().remove_claim(namespace, name);
        self.refresh_dra_gpus(&nodes);
    }

    /// Assumes a decision's claim allocations and reservations (see
    /// [`DraObjects::assume`]).
    pub fn assume_claims(&mut self, pod_uid: &str, decisions: &PodAllocations) {
        let nodes = self.dra_mut().assume(pod_uid, decisions);
        self.refresh_dra_gpus(&nodes);
    }

    /// Undoes them (the binding failed).
    pub fn forget_claims(&mut self, pod_uid: &str) {
        if self.dra.has_assumed(pod_uid) {
            let nodes = self.dra_mut().forget(pod_uid);
            self.refresh_dra_gpus(&nodes);
        }
    }

    /// Keeps them (the claims were written).
    pub fn confirm_claims(&mut self, pod_uid: &str) {
        if self.dra.has_assumed(pod_uid) {
            self.dra_mut().confirm(pod_uid);
        }
    }

    /// Lays out again the GPU devices of `nodes` from their DRA slices, with
    /// the devices their allocated claims take; their GPU model fact is
    /// the slices' when no label names one.
    fn refresh_dra_gpus(&mut self, nodes: &[String]) {
        for name in nodes {
            let Some(info) = self.nodes.get(name) else { continue };
            let layout = self.dra.gpu_layout(name);
            if layout.is_none() && !info.gpus.is_dra() {
                continue;
            }
            let held: Vec<(String, crate::devices::DeviceSet)> = match &layout {
                None => Vec::new(),
                Some(l) => self
                    .dra
                    .claims_on(name)
                    .filter_map(|c| {
                        let a = c.allocation.as_ref()?;
                        let set: crate::devices::DeviceSet = a
                            .devices
                            .iter()
                            .filter(|d| !d.admin_access)
                            .filter_map(|d| l.devices.iter().position(|x| *x == d.id))
                            .collect();
                        (!set.is_empty()).then(|| (c.uid.clone(), set))
                    })
                    .collect(),
            };
            let model = self.dra_model(name, layout.as_ref());
            let info = self.touch(name);
            info.set_dra_gpus(layout.as_ref(), &held);
            info.facts.gpu_model = model;
        }
    }

    /// The GPU model of a node: its labels' (as node facts read them), or
    /// else its DRA slices'.
    fn dra_model(&self, node: &str, layout: Option<&crate::dra::GpuLayout>) -> Option<Arc<str>> {
        let from_labels = self.nodes.get(node).and_then(|i| NodeFacts::of(&i.node, &self.facts_config).0.gpu_model);
        from_labels.or_else(|| {
            let l = layout?;
            let m = l.model.as_deref()?;
            if l.model_is_product { self.facts_config.normalise_product(m).map(Arc::from) } else { Some(Arc::from(m)) }
        })
    }

    fn touch(&mut self, name: &str) -> &mut NodeInfo {
        self.generation += 1;
        let generation = self.generation;
        let entry = self.nodes.entry(name.to_string()).or_insert_with(|| {
            // Pods may arrive before their node: keep them on a placeholder.
            let mut info = NodeInfo::new(Node { name: name.to_string(), ..Default::default() });
            info.has_node = false;
            Arc::new(info)
        });
        let info = Arc::make_mut(entry);
        if info.generation != 0 {
            self.changes.remove(&info.generation);
        }
        info.generation = generation;
        self.changes.insert(generation, name.to_string());
        info
    }

    /// How node facts are read (`nodeFacts`).
    pub fn facts_config(&self) -> &FactsConfig {
        &self.facts_config
    }

    pub fn node_count(&self) -> usize {
        self.nodes.values().filter(|n| n.has_node).count()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Every node the cache holds, in no particular order (placeholders for
    /// pods whose node is not yet known included; their allocatable is 0).
    pub fn node_infos(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.nodes.values()
    }

    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.nodes.get(name).filter(|n| n.has_node)
    }

    /// Adds or replaces a node; returns the problems found reading its
    /// facts (the facts concerned are left absent).
    pub fn upsert_node(&mut self, node: Node) -> Vec<FactWarning> {
        let zone_key = |n: &Node| (n.labels.get(LABEL_REGION).cloned(), n.labels.get(LABEL_ZONE).cloned());
        let set_changed = match self.nodes.get(&node.name) {
            Some(old) if old.has_node => zone_key(&old.node) != zone_key(&node),
            _ => true,
        };
        let (mut facts, warnings) = NodeFacts::of(&node, &self.facts_config);
        if let Some(p) = self.provided.get(&node.name) {
            p.apply(&mut facts);
        }
        let name = node.name.clone();
        let info = self.touch(&name);
        let old_facts = std::mem::replace(&mut info.facts, facts.clone());
        info.set_node(node);
        info.has_node = true;
        let dra_gpus = info.gpus.is_dra();
        // Service counts follow the node if its zone or cloud changed.
        if (&old_facts.zone, old_facts.cloud) != (&facts.zone, facts.cloud) {
            let pods = info.pods.clone();
            for p in &pods {
                self.account(p, &old_facts, -1);
                self.account(p, &facts, 1);
            }
        }
        if set_changed {
            self.node_set_generation += 1;
        }
        // GPUs published through DRA, and their model when no label names it.
        if dra_gpus || self.dra.gpu_layout(&name).is_some() {
            self.refresh_dra_gpus(std::slice::from_ref(&name));
        }
        warnings
    }

    /// Sets what outside sources say of node `name` (replacing what they
    /// said before); returns whether the node's facts changed.
    pub fn set_provided_facts(&mut self, name: &str, provided: ProvidedFacts) -> bool {
        if self.provided.get(name).map_or(provided.is_empty(), |old| *old == provided) {
            return false;
        }
        let facts = self.nodes.get(name).filter(|i| i.has_node).map(|info| {
            let mut facts = NodeFacts::of(&info.node, &self.facts_config).0;
            provided.apply(&mut facts);
            facts
        });
        if provided.is_empty() {
            self.provided.remove(name);
        } else {
            self.provided.insert(name.to_string(), provided);
        }
        match facts {
            Some(facts) if self.nodes.get(name).is_some_and(|i| i.facts != facts) => {
                self.touch(name).facts = facts;
                true
            }
            _ => false,
        }
    }

    /// Removes a node. Pods still bound to it keep it as a placeholder until
    /// they are deleted too, as in kube-scheduler.
    pub fn remove_node(&mut self, name: &str) {
        let Some(info) = self.nodes.get(name) else { return };
        if info.pods.is_empty() {
            if let Some(info) = self.nodes.remove(name) {
                self.changes.remove(&info.generation);
            }
        } else {
            let info = self.touch(name);
            info.has_node = false;
        }
        self.node_set_generation += 1;
    }

    /// Sets a namespace's labels (for affinity namespace selectors).
    pub fn upsert_namespace(&mut self, name: &str, labels: Labels) {
        let label = crate::queues::LABEL_QUEUE;
        let old = self.namespaces.get(name).and_then(|l| l.get(label)).cloned();
        let moved = old.as_ref() != labels.get(label);
        Arc::make_mut(&mut self.namespaces).insert(name.to_string(), labels);
        self.namespaces_generation += 1;
        if moved {
            self.requeue_namespace_pods(name);
        }
    }

    /// The namespace's queue changed: its pods without a queue label of
    /// their own move their use to the new queue.
    fn requeue_namespace_pods(&mut self, namespace: &str) {
        let uids: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, s)| s.pod.namespace == namespace && !s.pod.labels.contains_key(crate::queues::LABEL_QUEUE))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in uids {
            let Some(state) = self.pods.get(&uid) else { continue };
            let (pod, old) = (state.pod.clone(), state.queue.clone());
            let model = old.as_ref().map_or_else(
                || pod.node_name.as_deref().and_then(|n| self.nodes.get(n)).and_then(|i| i.facts.gpu_model.clone()),
                |(_, m)| m.clone(),
            );
            let new = self.queue_for(&pod).map(|q| (q, model));
            self.count_in_queue(&pod, old.as_ref(), -1);
            self.count_in_queue(&pod, new.as_ref(), 1);
            if let Some(state) = self.pods.get_mut(&uid) {
                state.queue = new;
            }
        }
    }

    /// Records a pod the scheduler decided on before the binding is
    /// confirmed, so the next cycles see its resources in use.
    pub fn assume_pod(&mut self, pod: PodRef) -> Result<(), CacheError> {
        let node = pod.node_name.clone().ok_or_else(|| CacheError::NoNodeName(pod.key()))?;
        if self.pods.contains_key(&pod.uid) {
            return Err(CacheError::PodExists(pod.key()));
        }
        let info = self.touch(&node);
        info.add_pod(pod.clone());
        let facts = info.facts.clone();
        self.account(&pod, &facts, 1);
        self.count_member(&pod, 1);
        let queue = self.queue_for(&pod).map(|q| (q, facts.gpu_model.clone()));
        self.count_in_queue(&pod, queue.as_ref(), 1);
        self.pods.insert(pod.uid.clone(), PodState { pod, queue, assumed: true, deadline: None });
        Ok(())
    }

    /// Sets how long an assumed pod may wait for its bound view once its
    /// binding finished (0: for ever). Applies to bindings finished later.
    pub fn set_assumed_ttl(&mut self, ttl: Millis) {
        self.assumed_ttl = ttl;
    }

    /// The binding of an assumed pod succeeded: from `now` its bound view
    /// has the TTL to arrive before [`Cache::cleanup_assumed_pods`]
    /// forgets it. Does nothing for a pod not assumed (already confirmed).
    pub fn finish_binding(&mut self, uid: &str, now: Millis) {
        if self.assumed_ttl == 0 {
            return;
        }
        let Some(state) = self.pods.get_mut(uid).filter(|s| s.assumed) else { return };
        let deadline = now.saturating_add(self.assumed_ttl);
        if let Some(old) = state.deadline.replace(deadline) {
            self.deadlines.remove(&(old, uid.to_string()));
        }
        self.deadlines.insert((deadline, uid.to_string()));
    }

    /// Forgets the assumed pods whose binding finished more than the TTL
    /// before `now` and whose bound view never came (a lost watch event):
    /// their resources are freed. Returns them, as they were assumed.
    pub fn cleanup_assumed_pods(&mut self, now: Millis) -> Vec<PodRef> {
        let mut expired = Vec::new();
        while let Some((deadline, uid)) = self.deadlines.first().cloned() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(state) = self.pods.get(&uid).filter(|s| s.assumed && s.deadline == Some(deadline)) {
                expired.push(state.pod.clone());
                let removed = self.remove_pod(&uid);
                // Found just above: remove_pod fails only for a pod not there.
                debug_assert!(removed.is_ok(), "an expired assumed pod: {removed:?}");
            }
        }
        expired
    }

    /// Assumed pods whose binding finished and whose bound view is awaited.
    pub fn awaiting_confirmation(&self) -> usize {
        self.deadlines.len()
    }

    /// Undoes an assumption (the binding failed).
    pub fn forget_pod(&mut self, uid: &str) -> Result<(), CacheError> {
        match self.pods.get(uid) {
            Some(s) if s.assumed => {}
            Some(s) => return Err(CacheError::NotAssumed(s.pod.key())),
            None => return Err(CacheError::PodNotFound(uid.to_string())),
        }
        self.remove_pod(uid)
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|s| s.assumed)
    }

    /// Adds a pod bound to a node (seen from the API or a manifest). An
    /// assumed pod with the same UID is confirmed, moved if the API says it
    /// landed elsewhere.
    pub fn add_pod(&mut self, pod: PodRef) -> Result<(), CacheError> {
        match self.pods.get(&pod.uid) {
            Some(state) if !state.assumed => return Err(CacheError::PodExists(pod.key())),
            Some(_) => {}
            // Bound by someone else, or bound before we started: a pod seen for the first time.
            None if pod.node_name.is_some() => self.observe_shape(&pod),
            None => {}
        }
        self.insert_pod(pod)
    }

    /// Adds a bound pod, replacing an assumed one of the same UID.
    fn insert_pod(&mut self, pod: PodRef) -> Result<(), CacheError> {
        let node = pod.node_name.clone().ok_or_else(|| CacheError::NoNodeName(pod.key()))?;
        if self.pods.get(&pod.uid).is_some_and(|s| s.assumed) {
            self.remove_pod(&pod.uid)?;
        }
        let info = self.touch(&node);
        info.add_pod(pod.clone());
        let facts = info.facts.clone();
        self.account(&pod, &facts, 1);
        self.count_member(&pod, 1);
        let queue = self.queue_for(&pod).map(|q| (q, facts.gpu_model.clone()));
        self.count_in_queue(&pod, queue.as_ref(), 1);
        self.pods.insert(pod.uid.clone(), PodState { pod, queue, assumed: false, deadline: None });
        Ok(())
    }

    /// Replaces a bound pod's state (labels or requests changed).
    pub fn update_pod(&mut self, pod: PodRef) -> Result<(), CacheError> {
        self.remove_pod(&pod.uid)?;
        self.insert_pod(pod)
    }

    /// Removes a pod (deleted, or forgotten).
    pub fn remove_pod(&mut self, uid: &str) -> Result<(), CacheError> {
        let state = self.pods.remove(uid).ok_or_else(|| CacheError::PodNotFound(uid.to_string()))?;
        if let Some(deadline) = state.deadline {
            self.deadlines.remove(&(deadline, uid.to_string()));
        }
        let Some(node) = state.pod.node_name.as_deref() else { return Ok(()) };
        let (drop_placeholder, facts) = {
            let info = self.touch(node);
            info.remove_pod(uid);
            (!info.has_node && info.pods.is_empty(), info.facts.clone())
        };
        self.account(&state.pod, &facts, -1);
        self.count_member(&state.pod, -1);
        self.count_in_queue(&state.pod, state.queue.as_ref(), -1);
        if drop_placeholder && let Some(info) = self.nodes.remove(node) {
            self.changes.remove(&info.generation);
        }
        Ok(())
    }

    /// Marks a pod in the cache terminating or not (a victim whose
    /// eviction was sent, before the API shows it), keeping its state
    /// (assumed or bound) and its counts. Returns the flag it had, or None
    /// for a pod not in the cache.
    pub fn set_terminating(&mut self, uid: &str, terminating: bool) -> Option<bool> {
        let state = self.pods.get(uid)?;
        let was = state.pod.terminating;
        if was == terminating {
            return Some(was);
        }
        let mut pod = (*state.pod).clone();
        pod.terminating = terminating;
        let pod = Arc::new(pod);
        if let Some(node) = pod.node_name.clone() {
            self.touch(&node).replace_pod(pod.clone());
        }
        if let Some(state) = self.pods.get_mut(uid) {
            state.pod = pod;
        }
        Some(was)
    }

    pub fn pod(&self, uid: &str) -> Option<&PodRef> {
        self.pods.get(uid).map(|s| &s.pod)
    }

    /// Brings `snap` up to date: copies (by pointer) the nodes changed since
    /// its generation; rebuilds the node order only when nodes came or went.
    pub fn update_snapshot(&self, snap: &mut Snapshot) {
        if snap.shapes_generation != Some(self.shapes_generation) {
            snap.gpu_shapes = self.shapes.typical().clone();
            snap.shapes_generation = Some(self.shapes_generation);
        }
        for (_, name) in self.service_changes.range(snap.generation + 1..) {
            match self.services.get(name) {
                Some(stats) => snap.services.insert(name.clone(), stats.clone()),
                None => snap.services.remove(name),
            };
        }
        if snap.node_set_generation != self.node_set_generation {
            self.rebuild_snapshot(snap);
            return;
        }
        let mut affinity_changed = false;
        for (_, name) in self.changes.range(snap.generation + 1..) {
            let (Some(&i), Some(info)) = (snap.index.get(name), self.nodes.get(name)) else {
                continue;
            };
            let old = std::mem::replace(&mut snap.nodes[i], info.clone());
            affinity_changed |= old.pods_with_affinity.len() != info.pods_with_affinity.len()
                || old.pods_with_required_anti_affinity.len() != info.pods_with_required_anti_affinity.len();
            snap.count_node(&old, -1);
            snap.count_node(info, 1);
            let summary = info.summary();
            snap.fact_counts.apply(&snap.summaries[i], -1);
            snap.fact_counts.apply(&summary, 1);
            snap.summaries[i] = summary;
        }
        if affinity_changed {
            snap.index_affinity();
        }
        if snap.namespaces_generation != self.namespaces_generation {
            snap.namespaces = self.namespaces.clone();
            snap.namespaces_generation = self.namespaces_generation;
        }
        self.update_pdbs(snap);
        snap.generation = self.generation;
    }

    fn update_pdbs(&self, snap: &mut Snapshot) {
        if snap.pdbs_generation != self.pdbs_generation {
            snap.pdbs = Arc::new(self.pdbs.values().cloned().collect());
            snap.pdbs_generation = self.pdbs_generation;
        }
        if snap.volumes_generation != self.volumes_generation {
            snap.volumes = self.volumes.clone();
            snap.volumes_generation = self.volumes_generation;
        }
        if snap.workloads_generation != self.workloads_generation {
            snap.workloads = self.workloads.clone();
            snap.workloads_generation = self.workloads_generation;
        }
        if snap.dra_generation != self.dra_generation {
            snap.dra = self.dra.clone();
            snap.dra_generation = self.dra_generation;
        }
        if snap.queues_generation != self.queues_generation {
            snap.queues = self.queues.clone();
            snap.queues_generation = self.queues_generation;
        }
    }

    fn rebuild_snapshot(&self, snap: &mut Snapshot) {
        // Interleave zones, as kube-scheduler's node tree does, so that a
        // partial search (percentageOfNodesToScore) sees every zone.
        type Zone<'a> = (Option<&'a String>, Option<&'a String>);
        let mut by_zone: BTreeMap<Zone, Vec<&Arc<NodeInfo>>> = BTreeMap::new();
        for info in self.nodes.values().filter(|n| n.has_node) {
            let labels = &info.node.labels;
            by_zone.entry((labels.get(LABEL_REGION), labels.get(LABEL_ZONE))).or_default().push(info);
        }
        for nodes in by_zone.values_mut() {
            nodes.sort_by(|a, b| a.name().cmp(b.name()));
        }
        let total: usize = by_zone.values().map(Vec::len).sum();
        let mut order = Vec::with_capacity(total);
        let mut round = 0;
        while order.len() < total {
            for nodes in by_zone.values() {
                if let Some(n) = nodes.get(round) {
                    order.push((*n).clone());
                }
            }
            round += 1;
        }
        snap.index = order.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
        snap.summaries = order.iter().map(|n| n.summary()).collect();
        snap.fact_counts = FactCounts::default();
        for s in &snap.summaries {
            snap.fact_counts.apply(s, 1);
        }
        snap.load = Load::default();
        snap.gpu_gaps = GapHistogram::default();
        snap.gpu_types = TypeCapacity::default();
        for n in &order {
            snap.count_node(n, 1);
        }
        snap.names = order.iter().map(|n| n.name().to_string()).collect();
        snap.nodes = order;
        snap.index_affinity();
        snap.namespaces = self.namespaces.clone();
        snap.namespaces_generation = self.namespaces_generation;
        self.update_pdbs(snap);
        snap.generation = self.generation;
        snap.node_set_generation = self.node_set_generation;
    }
}

/// Node names by snapshot position.
pub type NodeNames = Arc<[String]>;

/// Some of a snapshot's nodes (the feasible ones, for PreScore), or all.
#[derive(Debug, Clone, Copy)]
pub struct NodeList<'a> {
    snap: &'a Snapshot,
    /// Positions in the snapshot; None means every node.
    positions: Option<&'a [usize]>,
}

impl<'a> NodeList<'a> {
    /// The nodes of `snap` at `positions`.
    pub fn new(snap: &'a Snapshot, positions: &'a [usize]) -> Self {
        NodeList { snap, positions: Some(positions) }
    }

    /// The snapshot the nodes are in.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snap
    }

    // Called per node in the engine's hot loops, across the crate line.
    #[inline]
    pub fn len(&self) -> usize {
        self.positions.map_or(self.snap.nodes.len(), <[usize]>::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The snapshot position of the `i`-th node of the list.
    #[inline]
    pub fn position(&self, i: usize) -> usize {
        self.positions.map_or(i, |p| p[i])
    }

    #[inline]
    pub fn get(&self, i: usize) -> NodeView<'a> {
        self.snap.view(self.position(i))
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = NodeView<'a>> + 'a {
        let list = *self;
        (0..list.len()).map(move |i| list.get(i))
    }
}

/// An immutable view of the cluster for one scheduling cycle.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeInfo>>,
    /// `nodes[i].summary()`, contiguous: what the hot path reads first.
    summaries: Vec<NodeSummary>,
    /// Over `summaries`.
    fact_counts: FactCounts,
    /// The cluster's load over `nodes`, for policy switching.
    load: Load,
    /// The partly used GPUs over `nodes`, by free share.
    gpu_gaps: GapHistogram,
    gpu_types: TypeCapacity,
    /// Service stats by service identity (see [`ServiceStats`]).
    services: HashMap<String, Arc<ServiceStats>>,
    /// `nodes[i].name()`, shared with decision records: a record names its
    /// nodes by position without touching (or pinning) the NodeInfos.
    names: NodeNames,
    index: HashMap<String, usize>,
    with_affinity: Vec<usize>,
    with_required_anti_affinity: Vec<usize>,
    namespaces: Arc<HashMap<String, Labels>>,
    pdbs: Arc<Vec<Pdb>>,
    volumes: Arc<VolumeObjects>,
    workloads: Arc<WorkloadSelectors>,
    dra: Arc<DraObjects>,
    generation: u64,
    node_set_generation: u64,
    namespaces_generation: u64,
    pdbs_generation: u64,
    volumes_generation: u64,
    workloads_generation: u64,
    dra_generation: u64,
    queues: Arc<Queues>,
    queues_generation: u64,
    /// The typical GPU pod shapes (from the cache's `ShapeStats`).
    gpu_shapes: Arc<TypicalShapes>,
    /// The cache's shapes generation copied; None before the first update.
    shapes_generation: Option<u64>,
}

impl Snapshot {
    pub fn new() -> Self {
        Snapshot::default()
    }

    /// The cluster's GPU and CPU allocation.
    pub fn load(&self) -> &Load {
        &self.load
    }

    /// How many nodes have each policy fact.
    pub fn fact_counts(&self) -> &FactCounts {
        &self.fact_counts
    }

    /// The typical pod shapes GPU fragmentation is measured against.
    pub fn gpu_shapes(&self) -> &Arc<TypicalShapes> {
        &self.gpu_shapes
    }

    /// The cluster's partly used GPUs by free share (the gap balance's counts).
    pub fn gpu_gaps(&self) -> &GapHistogram {
        &self.gpu_gaps
    }

    /// Free and total GPUs per node type, kept with the changed nodes.
    /// Counts `info` in (`delta` 1) or out (-1) of the sums kept over the
    /// nodes: load, gaps between shares, free GPU per node type.
    fn count_node(&mut self, info: &NodeInfo, delta: i32) {
        self.load.apply(info, i64::from(delta));
        self.gpu_gaps.apply(&info.gpus, delta);
        if info.has_node {
            self.gpu_types.apply(info.gpu_type(), &info.gpus, i64::from(delta));
        }
    }

    pub fn gpu_types(&self) -> &TypeCapacity {
        &self.gpu_types
    }

    /// Every node, in the scheduler's search order.
    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    /// Every node's summary, by position in [`Snapshot::nodes`]: one
    /// contiguous array, for a plugin's pass over all nodes.
    pub fn summaries(&self) -> &[NodeSummary] {
        &self.summaries
    }

    /// Every node, as plugins see it.
    pub fn node_list(&self) -> NodeList<'_> {
        NodeList { snap: self, positions: None }
    }

    /// The nodes' names, by position; replaced (not changed) when the set
    /// of nodes changes.
    pub fn names(&self) -> &NodeNames {
        &self.names
    }

    /// The node at `i` of [`Snapshot::nodes`], as plugins see it.
    #[inline]
    pub fn view(&self, i: usize) -> NodeView<'_> {
        NodeView::new(self.summaries[i], &self.nodes[i])
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Nodes with at least one pod that has (anti-)affinity.
    pub fn nodes_with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_affinity.iter().map(|&i| &self.nodes[i])
    }

    /// Nodes with at least one pod that has required anti-affinity.
    pub fn nodes_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_required_anti_affinity.iter().map(|&i| &self.nodes[i])
    }

    /// Where the pods of `service` (from `facts::service_identity`) run.
    pub fn service(&self, service: &str) -> Option<&ServiceStats> {
        self.services.get(service).map(|s| &**s)
    }

    /// The PodDisruptionBudgets, for preemption.
    pub fn pdbs(&self) -> &[Pdb] {
        &self.pdbs
    }

    /// Claims, volumes, classes and CSINodes (with assumed bindings).
    pub fn volumes(&self) -> &VolumeObjects {
        &self.volumes
    }

    /// The same, shared, for plugin state that outlives the borrow.
    pub fn dra(&self) -> &Arc<DraObjects> {
        &self.dra
    }

    /// Queues (quotas) and what their pods use.
    pub fn queues(&self) -> &Arc<Queues> {
        &self.queues
    }

    /// Every namespace's labels.
    pub fn namespaces(&self) -> &HashMap<String, Labels> {
        &self.namespaces
    }

    pub fn volumes_arc(&self) -> &Arc<VolumeObjects> {
        &self.volumes
    }

    /// Services' and controllers' selectors (default spreading).
    pub fn workloads(&self) -> &WorkloadSelectors {
        &self.workloads
    }

    pub fn namespace_labels(&self, namespace: &str) -> Option<&Labels> {
        self.namespaces.get(namespace)
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn index_affinity(&mut self) {
        self.with_affinity = (0..self.nodes.len()).filter(|&i| !self.nodes[i].pods_with_affinity.is_empty()).collect();
        self.with_required_anti_affinity =
            (0..self.nodes.len()).filter(|&i| !self.nodes[i].pods_with_required_anti_affinity.is_empty()).collect();
    }

    /// A snapshot of just these nodes and pods, for tests and tools.
    pub fn from_parts(nodes: Vec<Node>, pods: Vec<PodRef>) -> Self {
        let mut cache = Cache::new();
        for n in nodes {
            cache.upsert_node(n);
        }
        for p in pods {
            // Pods without a node are not load; ignore duplicates in test input.
            let _ = cache.add_pod(p);
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pod;
    use crate::resources::Resources;

    fn node(name: &str, zone: &str) -> Node {
        let mut n = Node { name: name.into(), ..Default::default() };
        n.labels.insert(LABEL_ZONE.into(), zone.into());
        n.allocatable = Resources::new(4000, 1 << 30);
        n
    }

    fn pod(uid: &str, node: &str, cpu: i64) -> PodRef {
        Arc::new(Pod {
            uid: uid.into(),
            namespace: "default".into(),
            name: uid.into(),
            node_name: Some(node.into()),
            requests: Resources::new(cpu, 0),
            ..Default::default()
        })
    }

    #[test]
    fn snapshot_interleaves_zones_and_updates_incrementally() {
        let mut cache = Cache::new();
        for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")] {
            cache.upsert_node(node(n, z));
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let names: Vec<_> = snap.nodes().iter().map(|n| n.name().to_string()).collect();
        assert_eq!(names, ["a1", "b1", "c1", "a2"]);

        let before_b1 = snap.get("b1").unwrap().clone();
        cache.assume_pod(pod("p1", "a2", 500)).unwrap();
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.get("a2").unwrap().requested.milli_cpu, 500);
        // Unchanged nodes are the same allocation, not copies.
        assert!(Arc::ptr_eq(&before_b1, snap.get("b1").unwrap()));

        cache.forget_pod("p1").unwrap();
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.get("a2").unwrap().requested.milli_cpu, 0);
    }

    #[test]
    fn assume_confirm_forget() {
        let mut cache = Cache::new();
        cache.upsert_node(node("n1", "a"));
        cache.upsert_node(node("n2", "a"));
        cache.assume_pod(pod("p", "n1", 100)).unwrap();
        assert!(cache.is_assumed("p"));
        assert_eq!(cache.assume_pod(pod("p", "n1", 100)), Err(CacheError::PodExists("default/p".into())));
        // Confirmation lands on n2: the cache follows the API.
        cache.add_pod(pod("p", "n2", 100)).unwrap();
        assert!(!cache.is_assumed("p"));
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 0);
        assert_eq!(cache.node("n2").unwrap().requested.milli_cpu, 100);
        assert_eq!(cache.forget_pod("p"), Err(CacheError::NotAssumed("default/p".into())));
        cache.remove_pod("p").unwrap();
        assert_eq!(cache.pod_count(), 0);
    }

    /// kube-scheduler's assumed-pod expiry: only a pod whose binding
    /// finished expires, only after the TTL, and a confirmation, a
    /// deletion or a forget in time cancels it.
    #[test]
    fn assumed_pods_expire_only_after_their_binding_finished_and_the_ttl() {
        struct Case {
            name: &'static str,
            ttl: Millis,
            /// Binding finished at this time (None: still in flight).
            finished: Option<Millis>,
            /// Confirmed by the API (add_pod) before the cleanup.
            confirmed: bool,
            cleanup_at: Millis,
            expired: bool,
        }
        let cases = [
            Case {
                name: "binding in flight",
                ttl: 30,
                finished: None,
                confirmed: false,
                cleanup_at: 1_000,
                expired: false,
            },
            Case {
                name: "before the deadline",
                ttl: 30,
                finished: Some(100),
                confirmed: false,
                cleanup_at: 129,
                expired: false,
            },
            Case {
                name: "at the deadline",
                ttl: 30,
                finished: Some(100),
                confirmed: false,
                cleanup_at: 130,
                expired: true,
            },
            Case {
                name: "confirmed in time",
                ttl: 30,
                finished: Some(100),
                confirmed: true,
                cleanup_at: 1_000,
                expired: false,
            },
            Case {
                name: "ttl 0 never expires",
                ttl: 0,
                finished: Some(100),
                confirmed: false,
                cleanup_at: u64::MAX,
                expired: false,
            },
        ];
        for c in cases {
            let mut cache = Cache::new();
            cache.set_assumed_ttl(c.ttl);
            cache.upsert_node(node("n1", "a"));
            cache.assume_pod(pod("p", "n1", 100)).unwrap();
            if let Some(at) = c.finished {
                cache.finish_binding("p", at);
            }
            if c.confirmed {
                cache.add_pod(pod("p", "n1", 100)).unwrap();
            }
            let expired: Vec<String> = cache.cleanup_assumed_pods(c.cleanup_at).iter().map(|p| p.uid.clone()).collect();
            assert_eq!(expired.len(), usize::from(c.expired), "{}: {expired:?}", c.name);
            let held = cache.node("n1").unwrap().requested.milli_cpu;
            assert_eq!(held, if c.expired { 0 } else { 100 }, "{}", c.name);
            assert_eq!(cache.pod("p").is_none(), c.expired, "{}", c.name);
            let awaiting = c.finished.is_some() && c.ttl > 0 && !c.confirmed && !c.expired;
            assert_eq!(cache.awaiting_confirmation(), usize::from(awaiting), "{}", c.name);
        }
    }

    #[test]
    fn an_expired_pod_confirmed_late_is_added_again() {
        let mut cache = Cache::new();
        cache.set_assumed_ttl(10);
        cache.upsert_node(node("n1", "a"));
        cache.assume_pod(pod("p", "n1", 100)).unwrap();
        cache.assume_pod(pod("q", "n1", 50)).unwrap();
        cache.finish_binding("p", 0);
        cache.finish_binding("q", 5);
        // Forgotten before the deadline (binding failed after all): nothing to expire.
        cache.forget_pod("q").unwrap();
        assert_eq!(cache.cleanup_assumed_pods(100).len(), 1);
        cache.add_pod(pod("p", "n1", 100)).unwrap();
        assert!(!cache.is_assumed("p"));
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 100);
        assert!(cache.cleanup_assumed_pods(u64::MAX).is_empty());
    }

    #[test]
    fn pods_before_their_node_use_a_placeholder() {
        let mut cache = Cache::new();
        cache.add_pod(pod("p", "late", 300)).unwrap();
        assert!(cache.node("late").is_none());
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        assert!(snap.nodes().is_empty());
        cache.upsert_node(node("late", "a"));
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.get("late").unwrap().requested.milli_cpu, 300);
        cache.remove_node("late");
        cache.update_snapshot(&mut snap);
        assert!(snap.get("late").is_none());
        cache.remove_pod("p").unwrap();
        assert_eq!(cache.node_count(), 0);
    }
}

#[cfg(test)]
mod service_tests {
    use super::*;
    use crate::facts::LABEL_CLOUD;
    use crate::testing::{node, pod};

    /// Zones (sorted), private count, public count.
    type Stats = (Vec<(String, u32)>, u32, u32);

    fn stats(snap: &Snapshot, service: &str) -> Option<Stats> {
        snap.service(service).map(|s| {
            let mut zones: Vec<(String, u32)> = s.zones.iter().map(|(z, n)| (z.to_string(), *n)).collect();
            zones.sort();
            (zones, s.private, s.public)
        })
    }

    #[test]
    fn service_counts_follow_pods_and_nodes() {
        let mut cache = Cache::new();
        cache.upsert_node(node("a").zone("z1").label(LABEL_CLOUD, "private").build());
        cache.upsert_node(node("b").zone("z2").label(LABEL_CLOUD, "public").build());
        cache.upsert_node(node("c").build()); // no zone, no cloud
        let web = |uid: &str, n: &str| pod(uid).label("app", "web").node(n).arc();
        cache.add_pod(web("w1", "a")).unwrap();
        cache.assume_pod(web("w2", "a")).unwrap();
        cache.add_pod(web("w3", "b")).unwrap();
        cache.add_pod(web("w4", "c")).unwrap();
        cache.add_pod(pod("other").label("app", "web").namespace("shop").node("a").arc()).unwrap();
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let z = |v: &[(&str, u32)]| v.iter().map(|(z, n)| (z.to_string(), *n)).collect::<Vec<_>>();
        assert_eq!(stats(&snap, "default/web"), Some((z(&[("", 1), ("z1", 2), ("z2", 1)]), 2, 1)));
        assert_eq!(snap.service("default/web").unwrap().cloud(), Some(Cloud::Private));
        assert_eq!(stats(&snap, "shop/web"), Some((z(&[("z1", 1)]), 1, 0)));

        // A pod leaves; a node moves zone and cloud: its pods move with it.
        cache.forget_pod("w2").unwrap();
        cache.upsert_node(node("b").zone("z3").label(LABEL_CLOUD, "private").build());
        cache.update_snapshot(&mut snap);
        assert_eq!(stats(&snap, "default/web"), Some((z(&[("", 1), ("z1", 1), ("z3", 1)]), 2, 0)));

        // The last pod of a service gone: the service is gone, in the snapshot too.
        cache.remove_pod("other").unwrap();
        cache.update_snapshot(&mut snap);
        assert_eq!(stats(&snap, "shop/web"), None);

        // A fresh snapshot sees the same as the incrementally updated one.
        let mut fresh = Snapshot::new();
        cache.update_snapshot(&mut fresh);
        assert_eq!(stats(&fresh, "default/web"), stats(&snap, "default/web"));
    }

    #[test]
    fn gpu_gaps_follow_shares() {
        use crate::devices::{DeviceSet, GpuRequest};
        let mut cache = Cache::new();
        for n in ["a", "b"] {
            cache.upsert_node(node(n).resource(crate::facts::GPU_RESOURCE, 2).build());
        }
        let share = |uid: &str, n: &str, milli: u32, device: &str| {
            pod(uid).node(n).with(|p| {
                p.gpu = GpuRequest::share(milli, 0);
                p.gpu_devices = DeviceSet::parse(device).ok();
            })
        };
        cache.add_pod(share("s1", "a", 300, "0").arc()).unwrap();
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.gpu_gaps().count(700), 1);
        // Another share on a's device (700 → 400), one on b, one assumed.
        cache.add_pod(share("s2", "a", 300, "0").arc()).unwrap();
        cache.add_pod(share("s3", "b", 600, "1").arc()).unwrap();
        cache.assume_pod(share("s4", "b", 600, "0").arc()).unwrap();
        cache.update_snapshot(&mut snap);
        assert_eq!((snap.gpu_gaps().count(700), snap.gpu_gaps().count(400)), (0, 3));
        cache.remove_pod("s3").unwrap();
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.gpu_gaps().count(400), 2);
        // 4 GPUs less 0.3 + 0.3 (a) and 0.6 (b, assumed).
        assert_eq!(snap.gpu_types().free_total(), 4000 - 1200);
        let mut fresh = Snapshot::new();
        cache.update_snapshot(&mut fresh);
        assert_eq!(fresh.gpu_gaps(), snap.gpu_gaps());
        assert_eq!(fresh.gpu_types(), snap.gpu_types());
    }

    #[test]
    fn fact_counts_follow_node_updates() {
        use crate::facts::{ANNOTATION_TEMPERATURE, LABEL_MAINTENANCE};
        let mut cache = Cache::new();
        cache.upsert_node(node("a").label(LABEL_MAINTENANCE, "true").build());
        cache.upsert_node(node("b").label(LABEL_CLOUD, "public").annotation(ANNOTATION_TEMPERATURE, "50").build());
        cache.upsert_node(node("c").resource(crate::facts::GPU_RESOURCE, 4).build());
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let want = FactCounts { gpus: 1, maintenance: 1, cloud: 1, temperature: 1, ..FactCounts::default() };
        assert_eq!(*snap.fact_counts(), want);

        // Out of maintenance, cooled down (annotation gone), a GPU node gets a second GPU: an incremental update.
        cache.upsert_node(node("a").build());
        cache.upsert_node(node("b").label(LABEL_CLOUD, "public").build());
        cache.upsert_node(node("c").resource(crate::facts::GPU_RESOURCE, 8).build());
        cache.update_snapshot(&mut snap);
        let want = FactCounts { gpus: 1, cloud: 1, ..FactCounts::default() };
        assert_eq!(*snap.fact_counts(), want);
        let mut fresh = Snapshot::new();
        cache.update_snapshot(&mut fresh);
        assert_eq!(fresh.fact_counts(), snap.fact_counts());

        cache.remove_node("c");
        cache.update_snapshot(&mut snap);
        assert_eq!(snap.fact_counts().gpus, 0);
    }

    #[test]
    fn node_facts_are_read_once_per_update_and_warned() {
        let mut cache = Cache::new();
        let warnings = cache.upsert_node(node("a").annotation(crate::facts::ANNOTATION_TEMPERATURE, "hot").build());
        assert_eq!(warnings.len(), 1);
        let warnings = cache.upsert_node(
            node("a").annotation(crate::facts::ANNOTATION_TEMPERATURE, "71").label(LABEL_CLOUD, "public").build(),
        );
        assert!(warnings.is_empty());
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let s = snap.view(0).summary().to_owned();
        assert_eq!((s.temperature_celsius(), s.cloud), (Some(71.0), Some(Cloud::Public)));
    }

    #[test]
    fn provided_facts_survive_node_updates_and_reach_snapshots() {
        use crate::facts::provided::{FACT_TEMPERATURE, ProvidedFacts};
        let mut cache = Cache::new();
        let hot = ProvidedFacts {
            event_alert: Some(7_000),
            numbers: [(FACT_TEMPERATURE.to_string(), 93.0), ("power".to_string(), 410.0)].into(),
        };
        // Facts for a node not yet known are kept for it.
        assert!(!cache.set_provided_facts("a", hot.clone()));
        cache.upsert_node(node("a").annotation(crate::facts::ANNOTATION_TEMPERATURE, "40").build());
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let s = snap.view(0).summary().to_owned();
        assert_eq!((s.temperature_celsius(), s.last_hardware_alert()), (Some(93.0), Some(7_000)));
        assert_eq!(snap.view(0).facts.numbers.get("power"), Some(&410.0));
        assert_eq!(snap.fact_counts().hardware_alert, 1);
        assert!(!cache.set_provided_facts("a", hot), "the same facts change nothing");
        // The sources forget the node: the annotation's value is back.
        assert!(cache.set_provided_facts("a", ProvidedFacts::default()));
        cache.update_snapshot(&mut snap);
        let s = snap.view(0).summary().to_owned();
        assert_eq!((s.temperature_celsius(), s.last_hardware_alert()), (Some(40.0), None));
        assert_eq!(snap.fact_counts().hardware_alert, 0);
    }

    #[test]
    fn queue_use_follows_pods_and_their_namespaces_label() {
        use crate::devices::GpuRequest;
        use crate::facts::GPU_RESOURCE;
        use crate::queues::LABEL_QUEUE;
        let mut cache = Cache::new();
        cache.upsert_node(node("a").label(crate::facts::LABEL_GPU_MODEL, "a100").resource(GPU_RESOURCE, 8).build());
        let gpu = |uid: &str, ns: &str| pod(uid).namespace(ns).node("a").with(|p| p.gpu = GpuRequest::whole(2));
        let used = |c: &Cache, q: &str| c.queues().usage(q, GPU_RESOURCE);
        cache.upsert_namespace("ml", [(LABEL_QUEUE.to_string(), "team-a".to_string())].into());
        cache.assume_pod(Arc::new(gpu("p1", "ml").build())).unwrap();
        cache.add_pod(Arc::new(gpu("p2", "ml").label(LABEL_QUEUE, "team-b").build())).unwrap();
        assert_eq!((used(&cache, "team-a"), used(&cache, "team-b")), (2000, 2000), "the pod's own label wins");
        assert_eq!(cache.queues().usage("team-a", &crate::queues::model_key("a100")), 2000);
        // The namespace moves to another queue: so do its unlabelled pods.
        cache.upsert_namespace("ml", [(LABEL_QUEUE.to_string(), "team-c".to_string())].into());
        assert_eq!((used(&cache, "team-a"), used(&cache, "team-c"), used(&cache, "team-b")), (0, 2000, 2000));
        cache.forget_pod("p1").unwrap();
        cache.remove_pod("p2").unwrap();
        assert_eq!((used(&cache, "team-c"), used(&cache, "team-b")), (0, 0));
    }

    #[test]
    fn pod_shapes_are_counted_once() {
        use crate::devices::GpuRequest;
        let mut cache = Cache::new();
        cache.upsert_node(node("a").resource(crate::facts::GPU_RESOURCE, 8).build());
        let seen = |c: &Cache| c.shapes.seen();
        let gpu = |uid: &str| pod(uid).node("a").with(|p| p.gpu = GpuRequest::whole(1));
        // Queued (the scheduler observes it), assumed, confirmed: once.
        let queued = gpu("q").build();
        cache.observe_shape(&queued);
        cache.assume_pod(Arc::new(queued.clone())).unwrap();
        cache.add_pod(Arc::new(queued)).unwrap();
        assert_eq!(seen(&cache), 1);
        // Found bound (another scheduler's, or before a restart), then updated: once.
        cache.add_pod(gpu("b").arc()).unwrap();
        cache.update_pod(gpu("b").label("x", "y").arc()).unwrap();
        assert_eq!(seen(&cache), 2);
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        assert!(Arc::ptr_eq(snap.gpu_shapes(), cache.gpu_shapes()));
        // Two pods (the older faded a little) and the prior's whole GPU, of four.
        assert!((snap.gpu_shapes().shapes()[0].1 - 3.0 / 4.0).abs() < 1e-4);
    }
}
