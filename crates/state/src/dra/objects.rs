//! The DRA objects the cache holds, with the allocations and reservations
//! decisions have assumed on top of them (kube's assume cache and
//! in-flight allocations for claims): a claim a decision allocated looks
//! allocated to the next decisions, so no device is given twice, until an
//! API version of the claim shows the allocation and the reservation. An
//! API version that does not yet (the finalizer written first, or another
//! writer's update) does not take the decision away.
//!
//! The slices are indexed by node, and a node's GPU slices give its device
//! layout (`DraObjects::gpu_layout`, for `NodeGpus`). Choosing devices is the
//! DynamicResources plugin's; this only holds what it chose.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::{ATTRIBUTE_MODEL, ATTRIBUTE_PRODUCT_NAME, ATTRIBUTE_TYPE, CAPACITY_MEMORY};
use super::{Allocation, Attribute, DeviceClass, DeviceId, NodeScope, PodAllocations, ResourceClaim, Slice};
use gpu_scheduler_model::gpu::MAX_DEVICES;

/// What one decision does to one claim, laid over the API's version of
/// it until that version shows it.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    pod_uid: String,
    /// The claim it was for (a claim created again is another).
    claim_uid: String,
    /// The allocation the decision made; None when it only reserves.
    allocation: Option<Allocation>,
    consumer: super::Consumer,
    /// The pod's binding finished (its writes were made).
    confirmed: bool,
}

/// A node's GPUs as its DRA slices publish them: devices of the GPU
/// drivers, in a stable order (a device's index in the node's GPU model).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuLayout {
    pub devices: Vec<DeviceId>,
    /// Memory of the smallest device, in MiB, when every device says.
    pub memory_mib: Option<u64>,
    /// The `model` attribute, or else `productName`, of the first device.
    pub model: Option<String>,
    /// Whether `model` is a product name (to read through the model table).
    pub model_is_product: bool,
}

/// Slices, classes and claims.
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    slices: HashMap<String, Arc<Slice>>,
    /// Slices local to each node (`nodeName`), by name.
    by_node: HashMap<String, BTreeSet<String>>,
    /// Slices not local to one node (a node selector, all nodes, or per
    /// device), by name.
    shared: BTreeSet<String>,
    classes: HashMap<String, Arc<DeviceClass>>,
    /// Claims as the API last gave them.
    api_claims: HashMap<String, Arc<ResourceClaim>>,
    /// Claims as decisions see them: the API's with the pending decisions.
    claims: HashMap<String, Arc<ResourceClaim>>,
    /// Claims allocated on each node (their allocation names one node).
    claims_by_node: HashMap<String, BTreeSet<String>>,
    /// Decisions the API's claims do not show yet, by claim key.
    pending: HashMap<String, Vec<Pending>>,
    /// Bumped when slices or classes change.
    devices_generation: u64,
    /// Drivers whose devices are GPUs (`nodeFacts.draGpuDrivers`).
    gpu_drivers: Vec<String>,
}

impl DraObjects {
    /// No objects; devices of `drivers` are GPUs.
    pub fn with_gpu_drivers(drivers: &[String]) -> Self {
        DraObjects { gpu_drivers: drivers.to_vec(), ..DraObjects::default() }
    }

    /// Whether `device` of `slice` is a whole GPU: of a GPU driver, with
    /// no `type` or `type: gpu` (a MIG slice is not).
    pub fn is_gpu(&self, slice: &Slice, device: &super::Device) -> bool {
        self.gpu_drivers.iter().any(|d| **d == *slice.driver)
            && match device.attribute(&slice.driver, ATTRIBUTE_TYPE) {
                None => true,
                Some(Attribute::String(t)) => t.eq_ignore_ascii_case("gpu"),
                Some(_) => false,
            }
    }

    /// Every whole GPU published, with its slice (current generations not
    /// told apart: for judging what a class selects).
    pub fn gpu_devices(&self) -> impl Iterator<Item = (&Arc<Slice>, &super::Device)> {
        self.slices
            .values()
            .filter(|s| !s.unsupported)
            .flat_map(|s| s.devices.iter().map(move |d| (s, d)))
            .filter(|(s, d)| self.is_gpu(s, d))
    }
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    pub fn class(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        self.classes.get(name)
    }

    /// Every slice, in no particular order.
    pub fn slices(&self) -> impl Iterator<Item = &Arc<Slice>> {
        self.slices.values()
    }

    /// Every claim, in no particular order.
    pub fn claims(&self) -> impl Iterator<Item = &Arc<ResourceClaim>> {
        self.claims.values()
    }

    /// Changes when a slice or class does: what device matching depends on.
    pub fn devices_generation(&self) -> u64 {
        self.devices_generation
    }

    pub fn is_empty(&self) -> bool {
        self.slices.is_empty() && self.claims.is_empty() && self.classes.is_empty()
    }

    /// Adds or replaces a slice; returns the nodes whose local devices changed.
    pub fn upsert_slice(&mut self, slice: Slice) -> Vec<String> {
        let mut nodes = self.remove_slice(&slice.name);
        match &slice.scope {
            Some(NodeScope::Node(n)) => {
                self.by_node.entry(n.clone()).or_default().insert(slice.name.clone());
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
            _ => {
                self.shared.insert(slice.name.clone());
            }
        }
        self.slices.insert(slice.name.clone(), Arc::new(slice));
        self.devices_generation += 1;
        nodes
    }

    /// Removes a slice; returns the node it was local to, if any.
    pub fn remove_slice(&mut self, name: &str) -> Vec<String> {
        let Some(old) = self.slices.remove(name) else { return Vec::new() };
        self.devices_generation += 1;
        match &old.scope {
            Some(NodeScope::Node(n)) => {
                if let Some(set) = self.by_node.get_mut(n) {
                    set.remove(name);
                    if set.is_empty() {
                        self.by_node.remove(n);
                    }
                }
                vec![n.clone()]
            }
            _ => {
                self.shared.remove(name);
                Vec::new()
            }
        }
    }

    /// The slices whose devices `node` may reach: those local to it, and
    /// the shared ones whose scope admits it (per-device scopes are left
    /// to the caller), sorted by name.
    pub fn slices_for(&self, node: &crate::model::Node) -> Vec<&Arc<Slice>> {
        let local = self.by_node.get(&node.name).into_iter().flatten();
        let mut out: Vec<&Arc<Slice>> = local
            .chain(self.shared.iter())
            .filter_map(|n| self.slices.get(n))
            .filter(|s| s.scope.as_ref().is_none_or(|scope| scope.matches(node)))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    pub fn upsert_class(&mut self, class: DeviceClass) {
        self.classes.insert(class.name.clone(), Arc::new(class));
        self.devices_generation += 1;
    }

    pub fn remove_class(&mut self, name: &str) {
        if self.classes.remove(name).is_some() {
            self.devices_generation += 1;
        }
    }

    /// Adds or replaces a claim as the API gives it; decisions it shows
    /// are no longer pending. Returns the nodes whose allocated devices
    /// changed.
    pub fn upsert_claim(&mut self, claim: ResourceClaim) -> Vec<String> {
        let key = claim.key();
        if let Some(list) = self.pending.get_mut(&key) {
            let shown = |p: &Pending| {
                claim.uid != p.claim_uid
                    || (claim.is_reserved_for(&p.consumer.uid)
                        && (p.allocation.is_none() || claim.allocation.is_some()))
            };
            list.retain(|p| !shown(p));
            if list.is_empty() {
                self.pending.remove(&key);
            }
        }
        self.api_claims.insert(key.clone(), Arc::new(claim));
        self.refresh_claim(&key)
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) -> Vec<String> {
        let key = format!("{namespace}/{name}");
        self.api_claims.remove(&key);
        self.pending.remove(&key);
        self.refresh_claim(&key)
    }

    /// Recomputes the claim decisions see from the API's version and the
    /// pending decisions; returns the nodes whose allocated devices changed.
    fn refresh_claim(&mut self, key: &str) -> Vec<String> {
        let mut nodes = Vec::new();
        if let Some(old) = self.claims.remove(key) {
            self.unindex(key, &old, &mut nodes);
        }
        let Some(api) = self.api_claims.get(key) else { return nodes };
        let pending = self.pending.get(key).map(Vec::as_slice).unwrap_or_default();
        let claim = if pending.is_empty() {
            api.clone()
        } else {
            let mut c = (**api).clone();
            for p in pending {
                if c.allocation.is_none() {
                    c.allocation = p.allocation.clone();
                }
                if !c.is_reserved_for(&p.consumer.uid) {
                    c.reserved_for.push(p.consumer.clone());
                }
            }
            Arc::new(c)
        };
        if let Some(n) = claim.allocation.as_ref().and_then(Allocation::node_name) {
            self.claims_by_node.entry(n.to_string()).or_default().insert(key.to_string());
            if !nodes.iter().any(|x| x == n) {
                nodes.push(n.to_string());
            }
        }
        self.claims.insert(key.to_string(), claim);
        nodes
    }

    fn unindex(&mut self, key: &str, old: &ResourceClaim, nodes: &mut Vec<String>) {
        if let Some(n) = old.allocation.as_ref().and_then(Allocation::node_name) {
            if let Some(set) = self.claims_by_node.get_mut(n) {
                set.remove(key);
                if set.is_empty() {
                    self.claims_by_node.remove(n);
                }
            }
            nodes.push(n.to_string());
        }
    }

    /// Devices allocated to claims (assumed allocations included), except
    /// those given with admin access, which do not take a device.
    pub fn allocated_devices(&self) -> HashSet<DeviceId> {
        self.claims
            .values()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| a.devices.iter())
            .filter(|d| !d.admin_access)
            .map(|d| d.id.clone())
            .collect()
    }

    /// Whether a decision for another pod than `pod_uid` allocated this
    /// claim and its binding has not finished: kube makes the pod wait.
    pub fn allocation_in_flight(&self, key: &str, pod_uid: &str) -> bool {
        self.pending
            .get(key)
            .is_some_and(|list| list.iter().any(|p| p.pod_uid != pod_uid && p.allocation.is_some() && !p.confirmed))
    }

    /// Applies a decision: each claim gets its allocation (when the
    /// decision made one) and the pod as a consumer. Missing claims are
    /// left out. Returns the nodes whose allocated devices changed.
    pub fn assume(&mut self, pod_uid: &str, decisions: &PodAllocations) -> Vec<String> {
        let mut nodes = Vec::new();
        for d in &decisions.claims {
            let key = d.key();
            let Some(api) = self.api_claims.get(&key) else { continue };
            if api.uid != d.uid {
                continue;
            }
            let allocation = if api.allocation.is_none() { d.allocation.clone() } else { None };
            self.pending.entry(key.clone()).or_default().push(Pending {
                pod_uid: pod_uid.to_string(),
                claim_uid: d.uid.clone(),
                allocation,
                consumer: d.consumer.clone(),
                confirmed: false,
            });
            for n in self.refresh_claim(&key) {
                if !nodes.contains(&n) {
                    nodes.push(n);
                }
            }
        }
        nodes
    }

    /// Undoes a decision (its binding failed). Returns the nodes concerned.
    pub fn forget(&mut self, pod_uid: &str) -> Vec<String> {
        let keys: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, list)| list.iter().any(|p| p.pod_uid == pod_uid))
            .map(|(k, _)| k.clone())
            .collect();
        let mut nodes = Vec::new();
        for key in keys {
            if let Some(list) = self.pending.get_mut(&key) {
                list.retain(|p| p.pod_uid != pod_uid);
                if list.is_empty() {
                    self.pending.remove(&key);
                }
            }
            nodes.extend(self.refresh_claim(&key));
        }
        nodes
    }

    /// The decision was written: it stands until the API's versions show it.
    pub fn confirm(&mut self, pod_uid: &str) {
        for p in self.pending.values_mut().flatten().filter(|p| p.pod_uid == pod_uid) {
            p.confirmed = true;
        }
    }

    /// Whether a decision of this pod is pending and not confirmed.
    pub fn has_assumed(&self, pod_uid: &str) -> bool {
        self.pending.values().flatten().any(|p| p.pod_uid == pod_uid && !p.confirmed)
    }

    /// The GPUs `node`'s local slices publish through one of `drivers`:
    /// the current generation of each pool, devices that are whole GPUs
    /// (no `type`, or `type: gpu`), at most [`MAX_DEVICES`].
    pub fn gpu_layout(&self, node: &str) -> Option<GpuLayout> {
        let names = self.by_node.get(node)?;
        let slices: Vec<&Arc<Slice>> = names
            .iter()
            .filter_map(|n| self.slices.get(n))
            .filter(|s| !s.unsupported && self.gpu_drivers.iter().any(|d| **d == *s.driver))
            .collect();
        let newest = |s: &Slice| {
            slices.iter().filter(|o| o.driver == s.driver && o.pool == s.pool).all(|o| o.generation <= s.generation)
        };
        let mut devices = Vec::new();
        for s in slices.iter().filter(|s| newest(s)) {
            for d in &s.devices {
                if self.is_gpu(s, d) {
                    devices.push((
                        DeviceId { driver: s.driver.clone(), pool: s.pool.clone(), device: Arc::from(d.name.as_str()) },
                        s,
                        d,
                    ));
                }
            }
        }
        if devices.is_empty() {
            return None;
        }
        devices.sort_by(|a, b| a.0.cmp(&b.0));
        devices.truncate(MAX_DEVICES);
        let memory = |(_, s, d): &(DeviceId, &&Arc<Slice>, &super::Device)| {
            d.capacity
                .get(CAPACITY_MEMORY)
                .or_else(|| d.capacity.get(&format!("{}/{CAPACITY_MEMORY}", s.driver)))
                .map(|q| (q.value() / (1 << 20)).max(0) as u64)
        };
        let memory_mib = devices.iter().map(memory).collect::<Option<Vec<u64>>>().and_then(|m| m.into_iter().min());
        let (first_slice, first) = (devices[0].1, devices[0].2);
        let text = |name| match first.attribute(&first_slice.driver, name) {
            Some(Attribute::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            _ => None,
        };
        let (model, model_is_product) = match text(ATTRIBUTE_MODEL) {
            Some(m) => (Some(m.to_ascii_lowercase()), false),
            None => (text(ATTRIBUTE_PRODUCT_NAME), true),
        };
        Some(GpuLayout { devices: devices.into_iter().map(|d| d.0).collect(), memory_mib, model, model_is_product })
    }

    /// Claims whose allocation is on `node`, with the allocation.
    pub fn claims_on(&self, node: &str) -> impl Iterator<Item = &Arc<ResourceClaim>> {
        self.claims_by_node.get(node).into_iter().flatten().filter_map(|k| self.claims.get(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::{AllocatedDevice, ClaimDecision, Consumer, Device};
    use crate::model::{NodeSelector, NodeSelectorTerm, Requirement, SelectorOp};
    use crate::quantity::Quantity;

    fn gpu(name: &str, model: &str) -> Device {
        Device {
            name: name.into(),
            attributes: [("model".to_string(), Attribute::String(model.into()))].into(),
            capacity: [("memory".to_string(), Quantity::parse("40Gi").unwrap())].into(),
            taints: vec![],
            scope: None,
            has_binding_conditions: false,
            consumes_counters: false,
        }
    }

    fn slice(name: &str, node: &str, generation: i64, devices: Vec<Device>) -> Slice {
        Slice {
            name: name.into(),
            driver: Arc::from("gpu.nvidia.com"),
            pool: Arc::from(node),
            generation,
            slice_count: 1,
            scope: Some(NodeScope::Node(node.into())),
            devices,
            unsupported: false,
        }
    }

    fn id(pool: &str, device: &str) -> DeviceId {
        DeviceId { driver: Arc::from("gpu.nvidia.com"), pool: Arc::from(pool), device: Arc::from(device) }
    }

    fn on_node(node: &str) -> Option<NodeSelector> {
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

    fn claim(name: &str) -> ResourceClaim {
        ResourceClaim {
            namespace: "ml".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            requests: vec![],
            constraints: vec![],
            config: vec![],
            allocation: None,
            reserved_for: vec![],
            terminating: false,
            controller_uid: None,
            has_finalizer: false,
        }
    }

    fn allocation(node: &str, device: &str) -> Allocation {
        Allocation {
            devices: vec![AllocatedDevice {
                request: "gpu".into(),
                id: id(node, device),
                admin_access: false,
                tolerations: vec![],
            }],
            config: vec![],
            node_selector: on_node(node),
        }
    }

    #[test]
    fn gpu_layout_reads_the_newest_generation_in_device_order() {
        let mut o = DraObjects::with_gpu_drivers(&["gpu.nvidia.com".into()]);
        assert_eq!(o.upsert_slice(slice("old", "n1", 1, vec![gpu("gpu-9", "t4")])), vec!["n1".to_string()]);
        o.upsert_slice(slice("s", "n1", 2, vec![gpu("gpu-1", "a100"), gpu("gpu-0", "a100")]));
        let mut mig = gpu("mig-0", "a100");
        mig.attributes.insert("type".into(), Attribute::String("mig".into()));
        let mut m = slice("m", "n1", 2, vec![mig]);
        m.pool = Arc::from("n1-mig");
        o.upsert_slice(m);
        let l = o.gpu_layout("n1").unwrap();
        assert_eq!(l.devices, vec![id("n1", "gpu-0"), id("n1", "gpu-1")]);
        assert_eq!((l.memory_mib, l.model.as_deref(), l.model_is_product), (Some(40 * 1024), Some("a100"), false));
        let mut amd = DraObjects::with_gpu_drivers(&["gpu.amd.com".into()]);
        amd.upsert_slice(slice("s", "n1", 2, vec![gpu("gpu-0", "a100")]));
        assert!(amd.gpu_layout("n1").is_none(), "not a GPU driver here");
        assert!(o.gpu_layout("n2").is_none());
        assert_eq!(o.remove_slice("s"), vec!["n1".to_string()]);
        assert_eq!(o.gpu_layout("n1").unwrap().devices, vec![id("n1", "gpu-9")]);
    }

    #[test]
    fn assumed_allocations_show_until_forgotten_or_replaced() {
        let mut o = DraObjects::default();
        o.upsert_claim(claim("a"));
        let consumer = |uid: &str| Consumer {
            api_group: String::new(),
            resource: "pods".into(),
            name: uid.into(),
            uid: uid.into(),
        };
        let decide = |uid: &str, allocation: Option<Allocation>| PodAllocations {
            claims: vec![ClaimDecision {
                namespace: "ml".into(),
                name: "a".into(),
                uid: "uid-a".into(),
                allocation,
                consumer: consumer(uid),
            }],
        };
        let nodes = o.assume("p", &decide("p", Some(allocation("n1", "gpu-0"))));
        assert_eq!(nodes, vec!["n1".to_string()]);
        assert_eq!(o.allocated_devices(), [id("n1", "gpu-0")].into());
        assert!(o.claim("ml", "a").is_some_and(|c| c.is_reserved_for("p")));
        assert!(o.allocation_in_flight("ml/a", "q"), "another pod waits for the allocation");
        assert!(!o.allocation_in_flight("ml/a", "p"));
        assert_eq!(o.claims_on("n1").count(), 1);
        assert_eq!(o.forget("p"), vec!["n1".to_string()]);
        assert!(o.allocated_devices().is_empty());
        assert!(o.claim("ml", "a").is_some_and(|c| c.reserved_for.is_empty()));
        assert_eq!(o.claims_on("n1").count(), 0);

        // The API's update wins over what forgetting would restore, and
        // ends the wait of other pods.
        o.assume("p", &decide("p", Some(allocation("n1", "gpu-0"))));
        let mut written = claim("a");
        written.allocation = Some(allocation("n1", "gpu-0"));
        written.reserved_for.push(consumer("p"));
        o.upsert_claim(written);
        assert!(!o.allocation_in_flight("ml/a", "q"));
        o.forget("p");
        assert_eq!(o.allocated_devices(), [id("n1", "gpu-0")].into());

        // A second pod of a shared claim only reserves it.
        o.assume("q", &decide("q", None));
        assert_eq!(o.claim("ml", "a").map(|c| c.reserved_for.len()), Some(2));
        assert!(!o.allocation_in_flight("ml/a", "r"), "nothing allocated by q");
        o.confirm("q");
        assert!(!o.has_assumed("q"));
        assert_eq!(o.remove_claim("ml", "a"), vec!["n1".to_string()]);

        // An API version that does not show the decision yet (the
        // finalizer written first) does not take it away, before or after
        // the binding finished: the device is not given twice.
        o.upsert_claim(claim("a"));
        o.assume("p", &decide("p", Some(allocation("n1", "gpu-0"))));
        let mut finalized = claim("a");
        finalized.has_finalizer = true;
        o.upsert_claim(finalized.clone());
        assert_eq!(o.allocated_devices(), [id("n1", "gpu-0")].into());
        o.confirm("p");
        assert!(!o.allocation_in_flight("ml/a", "q"), "written: no longer in flight");
        o.upsert_claim(finalized.clone());
        assert_eq!(o.allocated_devices(), [id("n1", "gpu-0")].into());
        assert!(o.claim("ml", "a").is_some_and(|c| c.is_reserved_for("p")));
        // The claim deleted and made again: the decision was for the old one.
        let mut again = claim("a");
        again.uid = "uid-a2".into();
        o.upsert_claim(again);
        assert!(o.allocated_devices().is_empty());
    }
}
