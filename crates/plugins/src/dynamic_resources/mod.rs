//! DynamicResources: a pod's ResourceClaims (`resource.k8s.io/v1`), with
//! kube-scheduler v1.36's semantics and messages
//! (`framework/plugins/dynamicresources`, structured parameters).
//!
//! - PreFilter: each claim the pod names must exist, not be deleting, and
//!   (when made from a template) be owned by the pod; an allocated claim
//!   must have room for the pod among its consumers; an unallocated one
//!   must not be in the middle of another pod's allocation, and its
//!   requests' device classes must exist. It also tells the GPU policies
//!   how many GPUs the claims ask for ([`ClaimedGpus`]), so that model
//!   preference, fragmentation and health apply to DRA GPUs too.
//! - Filter: an allocated claim's devices must be reachable from the node;
//!   the unallocated claims must all be allocatable there together
//!   ([`allocator`]), the allocations being kept for Reserve.
//! - Score: `firstAvailable` alternatives earlier in the list score more.
//! - Reserve: the node's allocations, and the pod as a consumer of every
//!   claim, go into the cycle state ([`PodAllocations`]); the engine
//!   assumes them in its cache (the next pods do not get the same devices)
//!   and forgets them if the binding fails.
//! - PreBind: the binder writes each claim's `status.allocation` and
//!   `reservedFor`; a later failure undoes it.

mod allocator;
mod cel;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::devices::{ClaimedGpus, GpuRequest};
use framework::dra::Allocation;
use framework::dra::{
    AllocationMode, ClaimDecision, Consumer, DeviceId, DraObjects, ExactRequest, FIRST_AVAILABLE_MAX, PodAllocations,
    ResourceClaim,
};
use framework::framework::{
    Binder, ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreBindPlugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ReservePlugin, ScorePlugin, Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

pub use allocator::Allocator;
pub use cel::DeviceCel;

use crate::helper::{decode_no_args, default_normalize_score, skip_if};

pub const NAME: &str = "DynamicResources";

pub const ERR_REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
pub const ERR_REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
pub const ERR_REASON_IN_USE: &str = "resourceclaim in use";

pub struct DynamicResources {
    cel: DeviceCel,
    /// Whether each class selects GPUs, by class and devices generation.
    gpu_classes: Mutex<(u64, HashMap<String, bool>)>,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(DynamicResources { cel: DeviceCel::new(), gpu_classes: Mutex::default() }))
}

/// The pod's claims, sorted out once per cycle.
struct PodClaims {
    objects: Arc<DraObjects>,
    /// Every claim of the pod, in its order.
    claims: Vec<Arc<ResourceClaim>>,
    /// Those not allocated yet (indices into `claims`).
    to_allocate: Vec<usize>,
    /// Devices allocated to any claim, when some are to be allocated.
    in_use: HashSet<DeviceId>,
    /// The allocations found on each node that passed, for Reserve.
    by_node: Mutex<HashMap<String, Vec<Allocation>>>,
}

impl PodClaims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Allocation>>> {
        self.by_node.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn unresolvable(reason: String) -> (PreFilterResult, Status) {
    (PreFilterResult::default(), Status::unresolvable(reason))
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable),
            ClusterEvent::any(EventResource::ResourceClaim),
            ClusterEvent::any(EventResource::ResourceSlice),
            ClusterEvent::any(EventResource::DeviceClass),
            // A claim made for the pod is recorded in its status.
            ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update),
            // A pod that held a claim (or its devices) went away.
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
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

    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }

    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> (PreFilterResult, Status) {
        if pod.resource_claims.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        let objects = snap.dra().clone();
        let mut claims = Vec::new();
        for pc in &pod.resource_claims {
            let (name, owned) = match pod.claim_name(pc) {
                Ok(Some(n)) => n,
                Ok(None) => continue,
                Err(e) => return unresolvable(e),
            };
            let Some(claim) = objects.claim(&pod.namespace, name) else {
                return unresolvable(format!("resourceclaim.resource.k8s.io \"{name}\" not found"));
            };
            if claim.terminating {
                return unresolvable(format!("resourceclaim \"{name}\" is being deleted"));
            }
            if owned && claim.controller_uid.as_deref() != Some(pod.uid.as_str()) {
                return unresolvable(format!(
                    "ResourceClaim {}/{} was not created for Pod {}/{} (Pod is not owner)",
                    claim.namespace, claim.name, pod.namespace, pod.name
                ));
            }
            claims.push(claim.clone());
        }
        if claims.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        let mut to_allocate = Vec::new();
        for (i, claim) in claims.iter().enumerate() {
            if claim.allocation.is_some() {
                if !claim.can_be_reserved() && !claim.is_reserved_for(&pod.uid) {
                    return unresolvable(ERR_REASON_IN_USE.into());
                }
                continue;
            }
            if objects.allocation_in_flight(&claim.key(), &pod.uid) {
                return unresolvable(format!("resource claim {} is in the process of being allocated", claim.key()));
            }
            for r in &claim.requests {
                let named = r.exactly.iter().map(|e| (r.name.clone(), e));
                let subs = r.first_available.iter().map(|(s, e)| (format!("{}/{s}", r.name), e));
                for (name, e) in named.chain(subs) {
                    if objects.class(&e.class).is_none() {
                        return unresolvable(format!("request {name}: device class {} does not exist", e.class));
                    }
                }
            }
            to_allocate.push(i);
        }
        let in_use = if to_allocate.is_empty() { HashSet::new() } else { objects.allocated_devices() };
        let gpus = self.claimed_gpus(&objects, &claims, &to_allocate);
        if gpus > 0 {
            state.write(ClaimedGpus(GpuRequest::whole(gpus)));
        }
        state.write(PodClaims { objects, claims, to_allocate, in_use, by_node: Mutex::default() });
        (PreFilterResult::default(), Status::success())
    }
}

impl DynamicResources {
    /// How many whole GPUs the unallocated claims ask for: the devices of
    /// requests (first alternatives) whose class selects GPUs.
    fn claimed_gpus(&self, objects: &DraObjects, claims: &[Arc<ResourceClaim>], to_allocate: &[usize]) -> u32 {
        let mut n = 0u32;
        for &i in to_allocate {
            for r in &claims[i].requests {
                let first: Option<&ExactRequest> = r.exactly.as_ref().or(r.first_available.first().map(|(_, e)| e));
                if let Some(e) = first
                    && let AllocationMode::ExactCount(c) = e.mode
                    && self.selects_gpus(objects, &e.class)
                {
                    n = n.saturating_add(c);
                }
            }
        }
        n
    }

    /// Whether the class selects some published GPU (judged once per
    /// class while the slices and classes stay the same).
    fn selects_gpus(&self, objects: &DraObjects, class: &str) -> bool {
        let generation = objects.devices_generation();
        {
            let mut g = self.gpu_classes.lock().unwrap_or_else(|e| e.into_inner());
            if g.0 != generation {
                *g = (generation, HashMap::new());
            }
            if let Some(v) = g.1.get(class) {
                return *v;
            }
        }
        let Some(c) = objects.class(class) else { return false };
        let verdict = objects.gpu_devices().any(|(slice, device)| {
            let id =
                DeviceId { driver: slice.driver.clone(), pool: slice.pool.clone(), device: Arc::from(&*device.name) };
            c.selectors.iter().all(|expr| self.cel.matches(expr, &id, device, generation) == Ok(true))
        });
        let mut g = self.gpu_classes.lock().unwrap_or_else(|e| e.into_inner());
        if g.0 == generation {
            g.1.insert(class.to_string(), verdict);
        }
        verdict
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(pc) = state.read::<PodClaims>() else {
            return Status::error("DynamicResources: no PreFilter state");
        };
        let unavailable = pc.claims.iter().any(|c| {
            c.allocation.as_ref().and_then(|a| a.node_selector.as_ref()).is_some_and(|s| !s.matches(&node.node))
        });
        if unavailable {
            return Status::unresolvable(ERR_REASON_NOT_AVAILABLE);
        }
        if pc.to_allocate.is_empty() {
            return Status::success();
        }
        let claims: Vec<Arc<ResourceClaim>> = pc.to_allocate.iter().map(|&i| pc.claims[i].clone()).collect();
        match Allocator::new(&pc.objects, &self.cel, &pc.in_use).allocate(&node.node, &claims) {
            Ok(Some(allocations)) => {
                pc.lock().insert(node.name().to_string(), allocations);
                Status::success()
            }
            Ok(None) => Status::unresolvable(ERR_REASON_CANNOT_ALLOCATE),
            // Claims or classes that cannot be judged: an error, as in kube
            // (the pod is retried with backoff).
            Err(e) => Status::error(e),
        }
    }

    fn explain(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        let Some(pc) = state.read::<PodClaims>() else { return Vec::new() };
        let found = pc.lock();
        let Some(allocations) = found.get(node.name()) else { return Vec::new() };
        pc.to_allocate
            .iter()
            .zip(allocations)
            .map(|(&i, a)| {
                let devices: Vec<String> = a.devices.iter().map(|d| format!("{}={}", d.request, d.id)).collect();
                (format!("claim {}", pc.claims[i].name), devices.join(", "))
            })
            .collect()
    }
}

impl PreScorePlugin for DynamicResources {
    /// Only claims with `firstAvailable` requests score: every other pod
    /// (most, and all without claims) skips scoring on every node.
    fn pre_score(&self, state: &mut CycleState, _pod: &Pod, _nodes: NodeList<'_>) -> Status {
        let scores = state
            .read::<PodClaims>()
            .is_some_and(|pc| pc.claims.iter().any(|c| c.requests.iter().any(|r| !r.first_available.is_empty())));
        skip_if(!scores)
    }
}

impl ScorePlugin for DynamicResources {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(pc) = state.read::<PodClaims>() else { return Ok(0) };
        let found = pc.lock();
        let mut new = pc.to_allocate.iter().zip(found.get(node.name()).into_iter().flatten());
        let mut score = 0;
        for (i, claim) in pc.claims.iter().enumerate() {
            let allocation = match &claim.allocation {
                Some(a) => a,
                None => match new.find(|(j, _)| **j == i) {
                    Some((_, a)) => a,
                    None => continue,
                },
            };
            for r in claim.requests.iter().filter(|r| r.exactly.is_none()) {
                for (pos, (sub, _)) in r.first_available.iter().enumerate() {
                    let name = format!("{}/{sub}", r.name);
                    if allocation.devices.iter().any(|d| d.request == name) {
                        score += FIRST_AVAILABLE_MAX - pos as i64;
                    }
                }
            }
        }
        Ok(score)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        default_normalize_score(framework::framework::MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, pod: &Pod, node: &str) -> Status {
        let Some(pc) = state.read::<PodClaims>() else { return Status::success() };
        let allocations = if pc.to_allocate.is_empty() {
            Vec::new()
        } else {
            match pc.lock().remove(node) {
                Some(a) => a,
                // Filter allocated on every node it passed.
                None => return Status::error(format!("claim allocation not found for node {node}")),
            }
        };
        let mut new = pc.to_allocate.iter().copied().zip(allocations);
        let mut decisions = PodAllocations::default();
        for (i, claim) in pc.claims.iter().enumerate() {
            let allocation = if claim.allocation.is_some() { None } else { new.find(|(j, _)| *j == i).map(|(_, a)| a) };
            if allocation.is_none() && claim.is_reserved_for(&pod.uid) {
                continue;
            }
            decisions.claims.push(ClaimDecision {
                namespace: claim.namespace.clone(),
                name: claim.name.clone(),
                uid: claim.uid.clone(),
                allocation,
                consumer: Consumer::pod(pod),
            });
        }
        state.write(decisions);
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: &str) {
        // The engine forgets the assumed claims with the pod.
        state.write(PodAllocations::default());
    }
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &Pod, _node: &str) -> Status {
        match state.read::<PodAllocations>() {
            Some(a) if !a.is_empty() => Status::success(),
            _ => Status::skip(),
        }
    }

    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, _node: &str, binder: &dyn Binder) -> Status {
        let Some(a) = state.read::<PodAllocations>().filter(|a| !a.is_empty()) else {
            return Status::success();
        };
        match binder.bind_claims(pod, a) {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }

    fn undo_pre_bind(&self, state: &mut CycleState, pod: &Pod, _node: &str, binder: &dyn Binder) {
        if let Some(a) = state.read::<PodAllocations>().filter(|a| !a.is_empty()) {
            // The binder logs a failure; the claims' owner (the
            // controller-manager or the user) is left to clean up.
            let _ = binder.unbind_claims(pod, a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Cache;
    use framework::dra::{
        AllocatedDevice, Attribute, ClaimSource, Constraint, Device, DeviceClass, DeviceRequest, DeviceTaint,
        DeviceToleration, NodeScope, PodClaim, Slice,
    };
    use framework::model::{NodeSelector, NodeSelectorTerm, Requirement, SelectorOp, TaintEffect};
    use framework::quantity::Quantity;
    use framework::testing::{node, pod};

    const DRIVER: &str = "gpu.nvidia.com";

    fn gpu(name: &str, model: &str) -> Device {
        Device {
            name: name.into(),
            attributes: [("model".to_string(), Attribute::String(model.into()))].into(),
            capacity: [("memory".to_string(), Quantity::parse("40Gi").expect("quantity"))].into(),
            taints: vec![],
            scope: None,
            has_binding_conditions: false,
            consumes_counters: false,
        }
    }

    fn slice(node: &str, devices: Vec<Device>) -> Slice {
        Slice {
            name: format!("{node}-gpus"),
            driver: Arc::from(DRIVER),
            pool: Arc::from(node),
            generation: 1,
            slice_count: 1,
            scope: Some(NodeScope::Node(node.into())),
            devices,
            unsupported: false,
        }
    }

    fn class(name: &str, selector: &str) -> DeviceClass {
        DeviceClass { name: name.into(), selectors: vec![selector.into()], config: vec![] }
    }

    fn exact(class: &str, mode: AllocationMode) -> ExactRequest {
        ExactRequest { class: class.into(), selectors: vec![], mode, admin_access: false, tolerations: vec![] }
    }

    fn request(name: &str, class: &str, count: u32) -> DeviceRequest {
        DeviceRequest {
            name: name.into(),
            exactly: Some(exact(class, AllocationMode::ExactCount(count))),
            first_available: vec![],
        }
    }

    fn claim(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
        ResourceClaim {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            requests,
            constraints: vec![],
            config: vec![],
            allocation: None,
            reserved_for: vec![],
            terminating: false,
            controller_uid: None,
            has_finalizer: false,
        }
    }

    fn on(node: &str) -> Option<NodeSelector> {
        Some(NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![],
                match_fields: vec![Requirement {
                    key: "metadata.name".into(),
                    op: SelectorOp::In,
                    values: vec![node.into()],
                }],
            }],
        })
    }

    fn allocated(mut c: ResourceClaim, node: &str, devices: &[&str]) -> ResourceClaim {
        c.allocation = Some(Allocation {
            devices: devices
                .iter()
                .map(|d| AllocatedDevice {
                    request: "gpu".into(),
                    id: DeviceId { driver: Arc::from(DRIVER), pool: Arc::from(node), device: Arc::from(*d) },
                    admin_access: false,
                    tolerations: vec![],
                })
                .collect(),
            config: vec![],
            node_selector: on(node),
        });
        c
    }

    /// n1 has two A100s, n2 two T4s; classes `gpu` (any) and `a100`.
    fn cluster(extra: impl FnOnce(&mut Cache)) -> Cache {
        let mut cache = Cache::new();
        cache.upsert_node(node("n1").build());
        cache.upsert_node(node("n2").build());
        cache.upsert_slice(slice("n1", vec![gpu("gpu-0", "a100"), gpu("gpu-1", "a100")]));
        cache.upsert_slice(slice("n2", vec![gpu("gpu-0", "t4"), gpu("gpu-1", "t4")]));
        cache.upsert_device_class(class("gpu", "device.driver == 'gpu.nvidia.com'"));
        cache.upsert_device_class(class("a100", "device.attributes['gpu.nvidia.com'].model == 'a100'"));
        extra(&mut cache);
        cache
    }

    struct Outcome {
        /// "prefilter: ..." or one verdict per node ("ok" or the reason).
        verdicts: Vec<String>,
        scores: Vec<i64>,
        /// Devices Reserve gave on the first node that passed.
        reserved: Vec<String>,
        claimed_gpus: Option<GpuRequest>,
    }

    fn run(cache: &Cache, p: &Pod) -> Outcome {
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let plugin = DynamicResources { cel: DeviceCel::new(), gpu_classes: Mutex::default() };
        let mut state = CycleState::new();
        let (_, s) = plugin.pre_filter(&mut state, p, &snap);
        if !s.is_success() {
            let verdict = if s.is_skip() { "skip".to_string() } else { format!("prefilter: {}", s.message()) };
            return Outcome { verdicts: vec![verdict], scores: vec![], reserved: vec![], claimed_gpus: None };
        }
        let claimed_gpus = state.read::<ClaimedGpus>().map(|c| c.0.clone());
        let n = snap.names().len();
        let statuses: Vec<Status> = (0..n).map(|i| plugin.filter(&state, p, &snap.view(i))).collect();
        let verdicts = statuses.iter().map(|s| if s.is_success() { "ok".to_string() } else { s.message() }).collect();
        // Scores only when PreScore does not skip, as the engine does.
        let scores = if plugin.pre_score(&mut state, p, snap.node_list()).is_skip() {
            Vec::new()
        } else {
            (0..n)
                .filter(|i| statuses[*i].is_success())
                .map(|i| plugin.score(&state, p, &snap.view(i)).unwrap_or(-1))
                .collect()
        };
        let mut reserved = Vec::new();
        if let Some(i) = (0..n).find(|i| statuses[*i].is_success()) {
            let name = snap.names()[i].clone();
            assert!(plugin.reserve(&mut state, p, &name).is_success());
            for d in &state.read::<PodAllocations>().expect("reserved").claims {
                assert_eq!(d.consumer.uid, p.uid);
                for dev in d.allocation.iter().flat_map(|a| a.devices.iter()) {
                    reserved.push(format!("{}:{}", dev.request, dev.id));
                }
            }
        }
        Outcome { verdicts, scores, reserved, claimed_gpus }
    }

    fn with_claims(names: &[&str]) -> Pod {
        let mut p = pod("p");
        for n in names {
            let n = n.to_string();
            p = p.with(|p| p.resource_claims.push(PodClaim { name: n.clone(), source: ClaimSource::Claim(n) }));
        }
        p.build()
    }

    #[test]
    fn claims_are_allocated_as_kube_does() {
        const CANNOT: &str = ERR_REASON_CANNOT_ALLOCATE;
        let first_available = DeviceRequest {
            name: "r".into(),
            exactly: None,
            first_available: vec![
                ("big".into(), exact("a100", AllocationMode::ExactCount(2))),
                ("small".into(), exact("gpu", AllocationMode::ExactCount(1))),
            ],
        };
        let mut tainted = gpu("gpu-0", "a100");
        tainted.taints.push(DeviceTaint { key: "broken".into(), value: "".into(), effect: TaintEffect::NoSchedule });
        let mut tolerating = request("gpu", "a100", 2);
        if let Some(e) = tolerating.exactly.as_mut() {
            e.tolerations.push(DeviceToleration { key: "broken".into(), exists: true, value: "".into(), effect: None });
        }
        let mut matched = claim("c", vec![request("a", "a100", 1), request("b", "gpu", 1)]);
        matched.constraints.push(Constraint { requests: vec![], match_attribute: format!("{DRIVER}/model") });
        let mut bad_selector = request("gpu", "gpu", 1);
        if let Some(e) = bad_selector.exactly.as_mut() {
            e.selectors.push("device.attributes['gpu.nvidia.com'].nope == 1".into());
        }
        type Setup = Box<dyn FnOnce(&mut Cache)>;
        let cases: Vec<(&str, Setup, &[&str], &[&str])> = vec![
            (
                "one A100: only n1",
                Box::new(|c| c.upsert_resource_claim(claim("c", vec![request("gpu", "a100", 1)]))),
                &["ok", CANNOT],
                &["gpu:gpu.nvidia.com/n1/gpu-0"],
            ),
            (
                "two of any GPU: both nodes",
                Box::new(|c| c.upsert_resource_claim(claim("c", vec![request("gpu", "gpu", 2)]))),
                &["ok", "ok"],
                &["gpu:gpu.nvidia.com/n1/gpu-0", "gpu:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "three GPUs: no node has them",
                Box::new(|c| c.upsert_resource_claim(claim("c", vec![request("gpu", "gpu", 3)]))),
                &[CANNOT, CANNOT],
                &[],
            ),
            (
                "all A100s: n1's two",
                Box::new(|c| {
                    let mut r = request("gpu", "a100", 0);
                    r.exactly = Some(exact("a100", AllocationMode::All));
                    c.upsert_resource_claim(claim("c", vec![r]))
                }),
                &["ok", CANNOT],
                &["gpu:gpu.nvidia.com/n1/gpu-0", "gpu:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "first available: two A100s on n1, else one GPU",
                Box::new(move |c| c.upsert_resource_claim(claim("c", vec![first_available]))),
                &["ok", "ok"],
                &["r/big:gpu.nvidia.com/n1/gpu-0", "r/big:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "matchAttribute model: both devices A100s",
                Box::new(move |c| c.upsert_resource_claim(matched)),
                &["ok", CANNOT],
                &["a:gpu.nvidia.com/n1/gpu-0", "b:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "a tainted device is not given",
                Box::new(move |c| {
                    c.upsert_slice(slice("n1", vec![tainted.clone(), gpu("gpu-1", "a100")]));
                    c.upsert_resource_claim(claim("c", vec![request("gpu", "a100", 2)]))
                }),
                &[CANNOT, CANNOT],
                &[],
            ),
            (
                "unless tolerated",
                Box::new(move |c| {
                    let mut t = gpu("gpu-0", "a100");
                    t.taints.push(DeviceTaint {
                        key: "broken".into(),
                        value: "".into(),
                        effect: TaintEffect::NoSchedule,
                    });
                    c.upsert_slice(slice("n1", vec![t, gpu("gpu-1", "a100")]));
                    c.upsert_resource_claim(claim("c", vec![tolerating]))
                }),
                &["ok", CANNOT],
                &["gpu:gpu.nvidia.com/n1/gpu-0", "gpu:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "a device another claim holds is not given",
                Box::new(|c| {
                    c.upsert_resource_claim(allocated(claim("other", vec![]), "n1", &["gpu-0"]));
                    c.upsert_resource_claim(claim("c", vec![request("gpu", "a100", 1)]))
                }),
                &["ok", CANNOT],
                &["gpu:gpu.nvidia.com/n1/gpu-1"],
            ),
            (
                "an allocated claim: only its node",
                Box::new(|c| c.upsert_resource_claim(allocated(claim("c", vec![]), "n2", &["gpu-0"]))),
                &[ERR_REASON_NOT_AVAILABLE, "ok"],
                &[],
            ),
            (
                "a class missing",
                Box::new(|c| c.upsert_resource_claim(claim("c", vec![request("gpu", "nope", 1)]))),
                &["prefilter: request gpu: device class nope does not exist"],
                &[],
            ),
            (
                "a selector that fails at run time is an error",
                Box::new(move |c| c.upsert_resource_claim(claim("c", vec![bad_selector]))),
                &["claim default/c: selector #0: CEL runtime error", "claim default/c: selector #0: CEL runtime error"],
                &[],
            ),
            ("the claim missing", Box::new(|_| {}), &["prefilter: resourceclaim.resource.k8s.io \"c\" not found"], &[]),
            (
                "the claim deleting",
                Box::new(|c| {
                    let mut cl = claim("c", vec![request("gpu", "gpu", 1)]);
                    cl.terminating = true;
                    c.upsert_resource_claim(cl)
                }),
                &["prefilter: resourceclaim \"c\" is being deleted"],
                &[],
            ),
            (
                "the claim reserved by as many pods as it may be",
                Box::new(|c| {
                    let mut cl = allocated(claim("c", vec![]), "n1", &["gpu-0"]);
                    cl.reserved_for = (0..framework::dra::RESERVED_FOR_MAX)
                        .map(|i| Consumer {
                            api_group: String::new(),
                            resource: "pods".into(),
                            name: format!("x{i}"),
                            uid: format!("x{i}"),
                        })
                        .collect();
                    c.upsert_resource_claim(cl)
                }),
                &["prefilter: resourceclaim in use"],
                &[],
            ),
        ];
        for (name, setup, want, reserved) in cases {
            let cache = cluster(setup);
            let out = run(&cache, &with_claims(&["c"]));
            let got: Vec<&str> = out.verdicts.iter().map(String::as_str).collect();
            assert_eq!(got.len(), want.len(), "{name}: {got:?}");
            for (g, w) in got.iter().zip(want.iter()) {
                assert!(g.starts_with(w), "{name}: got {got:?}, want {want:?}");
            }
            assert_eq!(out.reserved, reserved.to_vec(), "{name}");
        }
    }

    #[test]
    fn earlier_alternatives_score_more() {
        let r = DeviceRequest {
            name: "r".into(),
            exactly: None,
            first_available: vec![
                ("a100".into(), exact("a100", AllocationMode::ExactCount(1))),
                ("any".into(), exact("gpu", AllocationMode::ExactCount(1))),
            ],
        };
        let cache = cluster(|c| c.upsert_resource_claim(claim("c", vec![r])));
        let out = run(&cache, &with_claims(&["c"]));
        assert_eq!(out.scores, vec![FIRST_AVAILABLE_MAX, FIRST_AVAILABLE_MAX - 1]);
        // Without alternatives there is nothing to score: skipped.
        let plain = cluster(|c| c.upsert_resource_claim(claim("c", vec![request("gpu", "gpu", 1)])));
        assert_eq!(run(&plain, &with_claims(&["c"])).scores, Vec::<i64>::new());
    }

    #[test]
    fn gpu_policies_see_the_gpus_claims_ask_for() {
        let cache = cluster(|c| {
            c.upsert_slice(Slice {
                name: "nics".into(),
                driver: Arc::from("nic.example.com"),
                pool: Arc::from("n1-nics"),
                ..slice("n1", vec![gpu("eth0", "x")])
            });
            c.upsert_device_class(class("nic", "device.driver == 'nic.example.com'"));
            c.upsert_resource_claim(claim("c", vec![request("gpu", "a100", 2), request("nic", "nic", 1)]));
        });
        let out = run(&cache, &with_claims(&["c"]));
        assert_eq!(out.claimed_gpus, Some(GpuRequest::whole(2)), "the NIC is not a GPU");
        let none = cluster(|c| c.upsert_resource_claim(allocated(claim("c", vec![]), "n1", &["gpu-0"])));
        assert_eq!(run(&none, &with_claims(&["c"])).claimed_gpus, None, "an allocated claim asks for nothing new");
    }

    #[test]
    fn template_claims_must_exist_and_belong_to_the_pod() {
        let templated = |status: Option<Option<&str>>| {
            pod("p")
                .with(|p| {
                    p.resource_claims.push(PodClaim { name: "gpu".into(), source: ClaimSource::Template("t".into()) });
                    if let Some(s) = status {
                        p.claim_statuses.push(("gpu".into(), s.map(str::to_string)));
                    }
                })
                .build()
        };
        let mut owned = claim("p-gpu", vec![request("gpu", "gpu", 1)]);
        owned.controller_uid = Some("p".into());
        let mut foreign = claim("q-gpu", vec![request("gpu", "gpu", 1)]);
        foreign.controller_uid = Some("q".into());
        let cache = cluster(|c| {
            c.upsert_resource_claim(owned);
            c.upsert_resource_claim(foreign);
        });
        let cases: &[(Option<Option<&str>>, &str)] = &[
            (None, "prefilter: pod \"default/p\": ResourceClaim not created yet"),
            (Some(None), "skip"),
            (Some(Some("p-gpu")), "ok"),
            (
                Some(Some("q-gpu")),
                "prefilter: ResourceClaim default/q-gpu was not created for Pod default/p (Pod is not owner)",
            ),
        ];
        for (status, want) in cases {
            let out = run(&cache, &templated(*status));
            assert_eq!(out.verdicts[0], *want, "{status:?}");
        }
    }

    #[test]
    fn pods_without_claims_are_skipped() {
        let cache = cluster(|_| {});
        assert_eq!(run(&cache, &pod("p").build()).verdicts, vec!["skip".to_string()]);
    }
}
