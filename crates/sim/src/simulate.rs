//! Running the engine over manifests: nodes and bound pods become the
//! cluster, pending pods of our profiles are queued in input order, and the
//! same scheduler that `run` uses places them on a simulated clock.
//!
//! Every pod is converted before anything is scheduled, so input errors
//! come first. The loop is `schedule_one` → bind (in memory, never fails)
//! → `finish_binding` → the bound pod back through `on_pod_upsert`; when
//! nothing is active the clock jumps to the next backoff expiry, and the
//! run stops when only unschedulable pods remain. The full
//! `DecisionRecord` is kept only for the `--explain` pod.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use engine::algorithm::ExplainDetails;
use engine::cache::NodeInfo;
use engine::config::{ConfigError, Configuration};
use engine::convert;
use engine::explain::{DecisionRecord, Explanation};
use engine::extender::{Extender, sources_needed};
use engine::framework::{Binder, Status};
use engine::model::Pod;
use engine::profile::{DefaultPlugin, build_profiles};
use engine::registry::Registry;
use engine::scheduler::{CycleOutcome, ObjectChange, ReadOptions, Scheduler};
use engine::time::Millis;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use thiserror::Error;

use crate::manifests::{ManifestError, Manifests, Object, Source};
use crate::workloads::{self, ExpandedPod};

/// Errors retried more often than this end the pod's simulation: in a
/// cluster it would keep retrying, but no simulated event will fix it.
const MAX_ERROR_ATTEMPTS: u32 = 5;
/// The clock moves only to a backoff's end; with no pod bound, evicted or
/// dropped over this many moves or this much simulated time, nothing will
/// change (a gang short of members times out and waits again forever).
const IDLE_JUMPS: u32 = 1000;
const IDLE_TIME: Millis = 24 * 3600 * 1000;

#[derive(Debug, Error)]
pub enum SimError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Engine(String),
}

/// Simulation settings.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Seed for breaking score ties.
    pub seed: u64,
    /// The clock for time-dependent rules.
    pub now: jiff::Timestamp,
    /// Keep the full decision record of this pod (`NAMESPACE/NAME`); the
    /// others are dropped as soon as their summary is taken, since a
    /// record holds the cluster state it saw.
    pub explain: Option<String>,
    /// Extenders to call, as a live run would (`extenders:` of the config).
    pub extenders: Vec<Arc<dyn Extender>>,
}

/// Where one pending pod ended up.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// `NAMESPACE/NAME`.
    pub pod: String,
    pub uid: String,
    pub node: Option<String>,
    /// Why it is unplaced (kube-scheduler's message).
    pub reason: Option<String>,
    pub attempts: u32,
    /// Sequence number of the pod's last decision; placements are reported
    /// in this order (pods never decided, e.g. gated ones, last).
    pub decided: Option<usize>,
    pub priority: i32,
    /// The decision's winning total score, when scores were computed.
    pub score: Option<f64>,
}

/// A node's use after the simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    pub name: String,
    pub milli_cpu: (i64, i64),
    pub memory: (i64, i64),
    pub gpu: (i64, i64),
    /// GPU allocated (shares included) and the node's GPUs, thousandths.
    pub gpu_milli: (i64, i64),
    pub pods: (i64, i64),
}

/// A running pod evicted to make room for a pod of higher priority.
#[derive(Debug, Clone, PartialEq)]
pub struct Preemption {
    /// `NAMESPACE/NAME` of the victim.
    pub pod: String,
    pub node: String,
    /// `NAMESPACE/NAME` of the pod it made room for.
    pub by: String,
    /// The sequence number of the decision that preempted it (as
    /// `Placement::decided`): it was gone for every later decision.
    pub at: usize,
}

pub struct Simulation {
    pub placements: Vec<Placement>,
    /// Pods evicted by preemption, in order.
    pub preempted: Vec<Preemption>,
    pub nodes: Vec<NodeUsage>,
    /// Pods already bound in the input.
    pub existing_pods: usize,
    /// Pods for other schedulers, left alone.
    pub foreign_pods: usize,
    /// Objects of kinds that do not affect scheduling.
    pub ignored_objects: usize,
    /// The record of `SimOptions::explain`'s pod, if it was decided.
    pub record: Option<DecisionRecord>,
    /// Node values that could not be read (each once); the facts
    /// concerned were treated as absent.
    pub warnings: Vec<String>,
    pub now: jiff::Timestamp,
    pub seed: u64,
    /// GPUs over the cluster.
    pub gpu: GpuOutcome,
    /// What the spot rebalancer would do at `now` (`spotDrain`).
    pub spot_drain: engine::spot_drain::DrainPlan,
    /// Each change of a profile's `policySwitch` rule, with the number of
    /// decisions taken before it.
    pub policy_switches: Vec<(usize, engine::policy_switch::PolicySwitched)>,
}

/// What became of the cluster's GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuOutcome {
    /// Thousandths of a GPU over all nodes.
    pub capacity_milli: i64,
    /// Allocated at the end (existing pods included).
    pub allocated_milli: i64,
    /// After each pod's first decision, in scheduling order: the GPU the
    /// pending pods decided so far asked for and the GPU allocated, in
    /// thousandths (the first point is the existing pods' allocation).
    pub curve: Vec<(i64, i64)>,
    /// The fragmentation figure at the end (share of the free GPU no
    /// typical pod shape can use).
    pub fragmentation: f64,
    /// GPU pods placed, and those on a model their workload class prefers
    /// (GpuModel's preferences in the pod's profile).
    pub gpu_pods_placed: usize,
    pub on_preferred_model: usize,
}

/// Counts GPU allocation as pods are decided.
struct GpuTally {
    /// GpuModel's preferences by schedulerName.
    models: HashMap<String, plugins::gpu_model::GpuModel>,
    /// GPU asked by each pending pod, by UID.
    asked: HashMap<String, i64>,
    outcome: GpuOutcome,
}

impl GpuTally {
    fn new(cfg: &Configuration, sched: &Scheduler, asked: HashMap<String, i64>) -> Result<GpuTally, SimError> {
        let mut models = HashMap::new();
        for (i, p) in cfg.profiles.iter().enumerate() {
            let args = p.plugin_config.iter().find(|c| c.name == plugins::gpu_model::NAME).map(|c| &c.args);
            let model = plugins::gpu_model::GpuModel::from_args(args).map_err(|e| {
                SimError::Config(ConfigError::new(format!("profiles[{i}].pluginConfig.GpuModel.{}", e.path), e.message))
            })?;
            models.insert(p.scheduler_name.clone(), model);
        }
        let (capacity_milli, allocated_milli) =
            sched.cache().node_infos().filter(|n| n.has_node).fold((0, 0), |(c, a), n| {
                let cap = n.gpus.count() as i64 * i64::from(engine::devices::MILLI_PER_GPU);
                (c + cap, a + cap - n.gpus.free_total())
            });
        let outcome =
            GpuOutcome { capacity_milli, allocated_milli, curve: vec![(0, allocated_milli)], ..Default::default() };
        Ok(GpuTally { models, asked, outcome })
    }

    /// A pod's decision: `first` when it is its first; `placed` with the
    /// node when it landed.
    fn decided(&mut self, uid: &str, first: bool, placed: Option<(&Pod, &str)>, sched: &Scheduler) {
        let asked = self.asked.get(uid).copied().unwrap_or(0);
        let o = &mut self.outcome;
        let (arrived, mut allocated) = o.curve.last().copied().unwrap_or_default();
        if let Some((pod, node)) = placed {
            allocated += asked;
            if pod.gpu.wants_gpu() {
                o.gpu_pods_placed += 1;
                let model = sched.cache().node(node).and_then(|n| n.facts.gpu_model.clone());
                let preferred = self.models.get(&pod.scheduler_name).map(|m| m.preferred(pod));
                if model.is_some_and(|m| preferred.is_some_and(|p| p.contains(&m))) {
                    o.on_preferred_model += 1;
                }
            }
        }
        if first || placed.is_some() {
            o.curve.push((arrived + if first { asked } else { 0 }, allocated));
        }
    }

    fn finish(mut self, sched: &Scheduler, nodes: &[NodeUsage]) -> GpuOutcome {
        self.outcome.allocated_milli = nodes.iter().map(|n| n.gpu_milli.0).sum();
        let infos = nodes.iter().filter_map(|n| sched.cache().node(&n.name)).map(|n| n.as_ref());
        self.outcome.fragmentation =
            engine::node_info::cluster_fragmentation(infos, sched.cache().gpu_shapes()).ratio();
        self.outcome
    }
}

impl Simulation {
    /// The explanation of the last decision for the pod named in `SimOptions::explain`.
    pub fn explanation(&self) -> Option<Explanation> {
        self.record.as_ref().map(DecisionRecord::explain)
    }
}

/// The simulated API: bindings always succeed.
struct SimBinder;

impl Binder for SimBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// A pod of the input with its provenance.
struct InputPod {
    source: Source,
    /// Prefix of field paths in errors (`spec.template.` for workloads).
    path: &'static str,
    pod: K8sPod,
    owner_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// The object errors should name: the pod, or the workload it came from.
    object: Option<String>,
}

/// Simulates scheduling `manifests` with `cfg`. `progress(done, total)`
/// is called as pending pods are decided.
pub fn simulate(
    manifests: &Manifests,
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
    opts: &SimOptions,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<Simulation, SimError> {
    in_pool(|| simulate_in_pool(manifests, cfg, registry, defaults, opts, progress))
}

/// Runs `f` on a pool thread, so the engine's parallel filtering and
/// scoring split work inside the pool instead of handing every cycle
/// over from an outside thread and waiting for it.
pub(crate) fn in_pool<T: Send>(f: impl FnOnce() -> Result<T, SimError> + Send) -> Result<T, SimError> {
    let pool = rayon::ThreadPoolBuilder::new().build().map_err(|e| SimError::Engine(e.to_string()))?;
    pool.install(f)
}

fn simulate_in_pool(
    manifests: &Manifests,
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
    opts: &SimOptions,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<Simulation, SimError> {
    let profiles = build_profiles(cfg, registry, defaults)?;
    let mut sched = Scheduler::new(cfg, profiles, opts.seed).map_err(|e| SimError::Engine(e.to_string()))?;
    if let Some(pod) = &opts.explain {
        sched.set_explain_details(ExplainDetails::Pod(pod.clone()));
    }
    sched.set_extenders(opts.extenders.clone());
    let (keep_pods, keep_nodes) = sources_needed(&opts.extenders);
    let read = ReadOptions { keep_node_objects: keep_nodes };
    let mut now: Millis = u64::try_from(opts.now.as_millisecond()).unwrap_or(0);
    // Kinds no part of the scheduler reads: said, never dropped silently.
    let mut warnings: Vec<String> = manifests
        .ignored
        .iter()
        .map(|(source, label)| format!("{source} ({label}): not a kind gpu-scheduler reads; ignored"))
        .collect();

    let mut priority_classes: HashMap<String, i32> = HashMap::new();
    let mut global_default: Option<i32> = None;
    let mut pods: Vec<InputPod> = Vec::new();
    // Each registered kind's objects by key, with where each was defined.
    let mut defined: HashMap<(String, String), Source> = HashMap::new();
    let mut namespaces: HashSet<String> = HashSet::new();
    let mut claim_templates: HashMap<String, engine::dra::ClaimTemplate> = HashMap::new();
    for (source, obj) in &manifests.objects {
        let field_err = |object: String, path: String, message: String| {
            SimError::Manifest(ManifestError::Field { at: source.clone(), object, path, message })
        };
        match obj {
            Object::Cluster(o) => {
                let label = format!("{} {}", o.kind(), o.key());
                let change = o.change(read).map_err(|e| field_err(label.clone(), e.path, e.message))?;
                if let Some(first) = defined.insert((o.kind(), o.key()), source.clone()) {
                    return Err(field_err(
                        label,
                        "metadata.name".into(),
                        format!("duplicate {} (first defined in {first})", o.kind()),
                    ));
                }
                if let ObjectChange::Namespace(name, _) = &change {
                    namespaces.insert(name.clone());
                }
                sched.apply(change, now);
                warnings.extend(sched.take_warnings().iter().map(ToString::to_string));
            }
            Object::PriorityClass(pc) => {
                let name = pc.metadata.name.clone().unwrap_or_default();
                priority_classes.insert(name, pc.value.unwrap_or(0));
                if pc.global_default == Some(true) {
                    global_default = Some(pc.value.unwrap_or(0));
                }
            }
            Object::Pod(p) => pods.push(InputPod {
                source: source.clone(),
                path: "",
                pod: (**p).clone(),
                owner_selector: None,
                object: None,
            }),
            Object::Deployment(d) => {
                let label = workload_label("Deployment", &d.metadata);
                push_expanded(&mut pods, source, label, workloads::expand_deployment(d))
            }
            Object::ReplicaSet(rs) => {
                let label = workload_label("ReplicaSet", &rs.metadata);
                push_expanded(&mut pods, source, label, workloads::expand_replica_set(rs))
            }
            Object::StatefulSet(ss) => {
                let label = workload_label("StatefulSet", &ss.metadata);
                push_expanded(&mut pods, source, label, workloads::expand_stateful_set(ss))
            }
            Object::Job(j) => {
                let label = workload_label("Job", &j.metadata);
                push_expanded(&mut pods, source, label, workloads::expand_job(j))
            }
            Object::ResourceClaimTemplate(t) => {
                let template = convert::claim_template_from_k8s(t).map_err(|e| {
                    field_err(
                        format!("ResourceClaimTemplate {}", t.metadata.name.as_deref().unwrap_or("")),
                        e.path,
                        e.message,
                    )
                })?;
                claim_templates.insert(format!("{}/{}", template.namespace, template.name), template);
            }
        }
    }

    // Convert every pod first, so errors come before any scheduling.
    let mut converted: Vec<Pod> = Vec::with_capacity(pods.len());
    let mut seen: HashMap<String, Source> = HashMap::new();
    for input in &mut pods {
        let key = format!(
            "{}/{}",
            input.pod.metadata.namespace.as_deref().unwrap_or("default"),
            input.pod.metadata.name.as_deref().unwrap_or("")
        );
        let err = |path: String, message: String| {
            SimError::Manifest(ManifestError::Field {
                at: input.source.clone(),
                object: input.object.clone().unwrap_or_else(|| format!("Pod {key}")),
                path,
                message,
            })
        };
        if let Some(first) = seen.insert(key.clone(), input.source.clone()) {
            return Err(err("metadata.name".into(), format!("duplicate pod (first defined in {first})")));
        }
        if let Some(spec) = input.pod.spec.as_mut()
            && spec.priority.is_none()
        {
            match spec.priority_class_name.as_deref() {
                Some(class) if !class.is_empty() => {
                    if let Some(v) = priority_classes.get(class) {
                        spec.priority = Some(*v);
                    } else if !class.starts_with("system-") {
                        return Err(err(
                            format!("{}spec.priorityClassName", input.path),
                            format!("no PriorityClass named {class:?}"),
                        ));
                    }
                }
                _ => spec.priority = global_default,
            }
        }
        let mut pod =
            convert::pod_from_k8s(&input.pod).map_err(|e| err(format!("{}{}", input.path, e.path), e.message))?;
        if keep_pods {
            pod.source = serde_json::to_value(&input.pod).ok().map(Arc::new);
        }
        if let Some(sel) = &input.owner_selector {
            pod.owner_selector =
                Some(convert::label_selector(sel, "spec.selector").map_err(|e| err(e.path, e.message))?);
        }
        for claim in claims_from_templates(&mut pod, &claim_templates)
            .map_err(|(path, message)| err(format!("{}{path}", input.path), message))?
        {
            sched.apply(ObjectChange::ResourceClaim(Box::new(claim)), now);
        }
        converted.push(pod);
    }

    // Pods imply their namespaces, as a cluster would have them.
    for pod in &converted {
        if namespaces.insert(pod.namespace.clone()) {
            let labels = [(convert::NAMESPACE_NAME_LABEL.to_string(), pod.namespace.clone())].into();
            sched.apply(ObjectChange::Namespace(pod.namespace.clone(), labels), now);
        }
    }

    let mut existing_pods = 0;
    let mut foreign_pods = 0;
    let mut order: Vec<String> = Vec::new();
    let mut placements: HashMap<String, Placement> = HashMap::new();
    let (bound, pending): (Vec<Pod>, Vec<Pod>) = converted.into_iter().partition(|p| p.node_name.is_some());
    for pod in bound {
        existing_pods += 1;
        sched.on_pod_upsert(pod, now);
    }
    let mut asked: HashMap<String, i64> = HashMap::new();
    for pod in pending {
        if !sched.responsible_for(&pod) {
            foreign_pods += 1;
            continue;
        }
        order.push(pod.uid.clone());
        asked.insert(pod.uid.clone(), pod.gpu.total_milli() as i64);
        placements.insert(
            pod.uid.clone(),
            Placement {
                pod: pod.key(),
                uid: pod.uid.clone(),
                node: None,
                reason: None,
                attempts: 0,
                decided: None,
                priority: pod.priority,
                score: None,
            },
        );
        sched.on_pod_upsert(pod, now);
    }

    let total = order.len();
    let mut gpu = GpuTally::new(cfg, &sched, asked)?;
    // Pods decided at least once, for progress: derived from `Placement::decided`.
    let mut done = 0usize;
    let mut decisions = 0usize;
    let mut kept: Option<DecisionRecord> = None;
    let mut preempted: Vec<Preemption> = Vec::new();
    let mut keep = |record: DecisionRecord| {
        if opts.explain.as_deref() == Some(record.pod.as_str()) {
            kept = Some(record);
        }
    };
    let (mut idle_jumps, mut idle_since) = (0u32, now);
    let mut policy_switches = Vec::new();
    loop {
        let outcome = sched.schedule_one(now);
        policy_switches.extend(sched.take_policy_switches().into_iter().map(|s| (decisions, s)));
        let Some(outcome) = outcome else {
            match sched.queue().next_backoff_expiry() {
                Some(t) if idle_jumps < IDLE_JUMPS && t.saturating_sub(idle_since) <= IDLE_TIME => {
                    now = now.max(t);
                    idle_jumps += 1;
                    continue;
                }
                _ => break,
            }
        };
        let mut progressed = false;
        match outcome {
            CycleOutcome::Assumed(mut task) => {
                let status: Status = task.bind(&SimBinder);
                let bound = (*task.pod).clone();
                let uid = bound.uid.clone();
                let node = task.node.clone();
                let score = best_score(&task.record);
                let record = std::mem::take(&mut task.record);
                let ok = status.is_success();
                sched.finish_binding(*task, &status, now);
                decisions += 1;
                if let Some(p) = placements.get_mut(&uid) {
                    p.attempts += 1;
                    done += usize::from(p.decided.is_none());
                    gpu.decided(&uid, p.decided.is_none(), ok.then_some((&bound, node.as_str())), &sched);
                    p.decided = Some(decisions);
                    if ok {
                        p.node = Some(node);
                        p.reason = None;
                        p.score = score;
                    } else {
                        p.reason = Some(format!("binding failed: {}", status.message()));
                    }
                }
                keep(record);
                if ok {
                    sched.on_pod_upsert(bound, now);
                    progressed = true;
                }
            }
            CycleOutcome::Failed(f) => {
                let uid = f.pod.uid.clone();
                decisions += 1;
                progressed |= !f.victims.is_empty();
                // Victims go at once: the simulated cluster has no grace period.
                for v in &f.victims {
                    let node = v.node_name.clone().unwrap_or_default();
                    preempted.push(Preemption { pod: v.key(), node: node.clone(), by: f.pod.key(), at: decisions });
                    if let Some(p) = placements.get_mut(&v.uid) {
                        p.node = None;
                        p.score = None;
                        p.reason = Some(format!("preempted by {} on {node}", f.pod.key()));
                    }
                    sched.on_pod_delete(&v.uid, now);
                }
                if let Some(p) = placements.get_mut(&uid) {
                    p.attempts += 1;
                    done += usize::from(p.decided.is_none());
                    gpu.decided(&uid, p.decided.is_none(), None, &sched);
                    p.decided = Some(decisions);
                    p.reason = Some(f.message.clone());
                    if !f.unschedulable && p.attempts >= MAX_ERROR_ATTEMPTS {
                        sched.on_pod_delete(&uid, now);
                        progressed = true;
                    }
                }
                keep(f.record);
            }
        }
        if progressed {
            (idle_jumps, idle_since) = (0, now);
        }
        progress(done, total);
    }
    for pod in sched.gated_pods() {
        if let Some(p) = placements.get_mut(&pod.uid) {
            p.reason = Some(format!(
                "Scheduling is blocked due to non-empty scheduling gates: {}",
                pod.scheduling_gates.join(", ")
            ));
        }
    }

    let nodes = usage(&sched);
    let gpu = gpu.finish(&sched, &nodes);
    // What the spot rebalancer would do at --now, on the cluster as placed.
    let start: Millis = u64::try_from(opts.now.as_millisecond()).unwrap_or(0);
    let spot_drain = engine::spot_drain::plan(sched.cache(), &cfg.spot_drain, start);
    let mut placements: Vec<Placement> = order.iter().filter_map(|uid| placements.remove(uid)).collect();
    placements.sort_by_key(|p| p.decided.unwrap_or(usize::MAX));
    Ok(Simulation {
        placements,
        preempted,
        nodes,
        existing_pods,
        foreign_pods,
        ignored_objects: manifests.ignored.len(),
        record: kept,
        warnings,
        now: opts.now,
        seed: opts.seed,
        gpu,
        spot_drain,
        policy_switches,
    })
}

fn workload_label(kind: &str, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!("{kind} {}/{}", meta.namespace.as_deref().unwrap_or("default"), meta.name.as_deref().unwrap_or(""))
}

fn push_expanded(pods: &mut Vec<InputPod>, source: &Source, object: String, expanded: Vec<ExpandedPod>) {
    pods.extend(expanded.into_iter().map(|e| InputPod {
        source: source.clone(),
        path: if e.template_path == "spec.template" { "spec.template." } else { "" },
        pod: e.pod,
        owner_selector: e.owner_selector,
        object: Some(object.clone()),
    }));
}

fn best_score(record: &DecisionRecord) -> Option<f64> {
    let node = record.node.as_deref()?;
    let i = record.feasible_names().position(|n| n == node)?;
    record.totals.get(i).copied()
}

const GPU: &str = "nvidia.com/gpu";

fn usage(sched: &Scheduler) -> Vec<NodeUsage> {
    let mut snap = engine::cache::Snapshot::new();
    sched.cache().update_snapshot(&mut snap);
    let mut by_name: BTreeMap<&str, &Arc<NodeInfo>> = BTreeMap::new();
    for n in snap.nodes() {
        by_name.insert(n.name(), n);
    }
    by_name
        .values()
        .map(|n| {
            let a = &n.node.allocatable;
            let r = &n.requested;
            NodeUsage {
                name: n.name().to_string(),
                milli_cpu: (r.milli_cpu, a.milli_cpu),
                memory: (r.memory, a.memory),
                gpu: (r.get(GPU), a.get(GPU)),
                gpu_milli: (n.gpus.count() as i64 * 1000 - n.gpus.free_total(), n.gpus.count() as i64 * 1000),
                pods: (n.pods.len() as i64, a.allowed_pod_number),
            }
        })
        .collect()
}

/// The claims the controller-manager would make for `pod` from its
/// templates (`<pod>-<claim>`, owned by the pod), recorded in the pod's
/// status as the controller records them. A template that does not exist
/// is an error naming the pod's field.
fn claims_from_templates(
    pod: &mut Pod,
    templates: &HashMap<String, engine::dra::ClaimTemplate>,
) -> Result<Vec<engine::dra::ResourceClaim>, (String, String)> {
    let mut out = Vec::new();
    let mut made = Vec::new();
    for (i, pc) in pod.resource_claims.iter().enumerate() {
        let engine::dra::ClaimSource::Template(t) = &pc.source else { continue };
        if pod.claim_statuses.iter().any(|(n, _)| *n == pc.name) {
            continue;
        }
        let Some(template) = templates.get(&format!("{}/{t}", pod.namespace)) else {
            return Err((
                format!("spec.resourceClaims[{i}].resourceClaimTemplateName"),
                format!("no ResourceClaimTemplate named {t:?} in namespace {:?}", pod.namespace),
            ));
        };
        let name = format!("{}-{}", pod.name, pc.name);
        made.push((pc.name.clone(), Some(name.clone())));
        out.push(engine::dra::ResourceClaim {
            namespace: pod.namespace.clone(),
            name: name.clone(),
            uid: format!("{}-{}", pod.uid, pc.name),
            requests: template.requests.clone(),
            constraints: template.constraints.clone(),
            config: template.config.clone(),
            allocation: None,
            reserved_for: Vec::new(),
            terminating: false,
            controller_uid: Some(pod.uid.clone()),
            has_finalizer: false,
        });
    }
    pod.claim_statuses.extend(made);
    Ok(out)
}
