//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the scheduler
//! sees it: the devices drivers publish in ResourceSlices, DeviceClasses,
//! ResourceClaims with their allocation and consumers, and a pod's claims.
//! Converted once on arrival (`convert::dra`), held by the cache in
//! the engine's `DraObjects` with the allocations decisions have assumed, handed to
//! the DynamicResources plugin through the snapshot.
//!
//! The types: [`Slice`], [`Device`] (attributes, capacity, taints,
//! per-device node scope), [`DeviceClass`], [`ResourceClaim`] with its
//! requests (`exactly` or `firstAvailable`), constraints, allocation and
//! consumers, [`ClaimTemplate`], a pod's [`PodClaim`]s, and
//! [`PodAllocations`], what DynamicResources' Reserve leaves in the cycle
//! state for the scheduler to assume and the binder to write. The scheduler
//! does no allocation outside that plugin.
//!
//! GPUs published this way share the device model of the GPUs counted as
//! `nvidia.com/gpu` ([`crate::gpu`]): a node whose slices carry
//! devices of a GPU driver (`nodeFacts.draGpuDrivers`) lays its
//! `NodeGpus` (the engine's `devices`) out from them, allocated claims
//! take devices of it, and the GPU placement policies score such nodes as
//! any other. The GPUs a pod's claims ask for reach those policies as
//! `ClaimedGpus` in the cycle state (the engine's `CycleState::pod_gpu`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::quantity::Quantity;
use crate::terms::{NodeSelector, TaintEffect};

/// The finalizer the scheduler puts on a claim it allocates.
pub const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// At most this many consumers may reserve one claim.
pub const RESERVED_FOR_MAX: usize = 256;
/// At most this many devices in one allocation.
pub const ALLOCATION_RESULTS_MAX: usize = 32;
/// The score of a `firstAvailable` alternative: this less its position.
pub const FIRST_AVAILABLE_MAX: i64 = 8;
/// Attribute naming a GPU's model directly (`a100`).
pub const ATTRIBUTE_MODEL: &str = "model";
/// NVIDIA's DRA driver's product name (`NVIDIA A100-SXM4-40GB`), read
/// through `nodeFacts.gpuModels` as the node label of the same meaning.
pub const ATTRIBUTE_PRODUCT_NAME: &str = "productName";
/// NVIDIA's DRA driver's device type: `gpu` for a whole GPU, `mig` for a
/// MIG slice (not a device of the GPU model).
pub const ATTRIBUTE_TYPE: &str = "type";
/// Capacity holding a GPU's memory.
pub const CAPACITY_MEMORY: &str = "memory";

/// A device, named as allocations name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A device attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribute {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version (`1.2.3`), validated on conversion.
    Version(String),
}

/// A taint on a device: not allocated unless the request tolerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

/// A request's toleration of device taints (the node toleration's rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToleration {
    /// Empty with `exists`: every key.
    pub key: String,
    /// `Exists` (true) or `Equal`.
    pub exists: bool,
    pub value: String,
    /// None: every effect.
    pub effect: Option<TaintEffect>,
}

impl DeviceToleration {
    pub fn tolerates(&self, t: &DeviceTaint) -> bool {
        if self.effect.is_some_and(|e| e != t.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != t.key {
            return false;
        }
        self.exists || self.value == t.value
    }
}

/// Which nodes a slice's (or a device's) devices are reachable from.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeScope {
    /// `nodeName`: devices local to one node.
    Node(String),
    /// `nodeSelector`: network-attached devices of some nodes.
    Selector(NodeSelector),
    /// `allNodes`.
    All,
}

/// One device of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub name: String,
    /// Qualified attribute names as published: `model` (the driver's own
    /// domain) or `domain/name`.
    pub attributes: BTreeMap<String, Attribute>,
    pub capacity: BTreeMap<String, Quantity>,
    pub taints: Vec<DeviceTaint>,
    /// Where this device is reachable, when the slice sets
    /// `perDeviceNodeSelection`.
    pub scope: Option<NodeScope>,
    /// Devices with binding conditions wait for a feature not enabled here.
    pub has_binding_conditions: bool,
    /// Partitionable devices (`consumesCounters`), a feature not enabled here.
    pub consumes_counters: bool,
}

impl Device {
    /// The attribute named `name`, qualified (`domain/id`) or not; an
    /// unqualified name means the driver's own domain.
    pub fn attribute(&self, driver: &str, name: &str) -> Option<&Attribute> {
        if let Some(a) = self.attributes.get(name) {
            return Some(a);
        }
        match name.split_once('/') {
            Some((domain, id)) if domain == driver => self.attributes.get(id),
            Some(_) => None,
            None => self.attributes.get(&format!("{driver}/{name}")),
        }
    }
}

/// A ResourceSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub name: String,
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub generation: i64,
    /// How many slices the pool has in this generation.
    pub slice_count: i64,
    /// None with `perDeviceNodeSelection` (each device says).
    pub scope: Option<NodeScope>,
    pub devices: Vec<Device>,
    /// Slices of features not enabled here (shared counters) are ignored.
    pub unsupported: bool,
}

/// Configuration handed to the driver with an allocation, as given.
pub type DeviceConfig = Arc<serde_json::Value>;

/// A DeviceClass.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceClass {
    pub name: String,
    /// CEL expressions every device of the class satisfies.
    pub selectors: Vec<String>,
    pub config: Vec<DeviceConfig>,
}

/// How many devices a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode {
    ExactCount(u32),
    All,
}

/// A request for devices of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactRequest {
    pub class: String,
    pub selectors: Vec<String>,
    pub mode: AllocationMode,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
}

/// One request of a claim: exactly one kind of device, or the first of
/// several alternatives that can be had (`firstAvailable`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRequest {
    pub name: String,
    pub exactly: Option<ExactRequest>,
    /// (subrequest name, request), in order of preference.
    pub first_available: Vec<(String, ExactRequest)>,
}

/// `matchAttribute`: the devices of the named requests (all, if none
/// named) share the attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub requests: Vec<String>,
    pub match_attribute: String,
}

/// A device an allocation gives, for the request it satisfies (`req` or
/// `req/sub`).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatedDevice {
    pub request: String,
    pub id: DeviceId,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
}

/// Where a configuration of an allocation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    Class,
    Claim,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AllocationConfig {
    pub source: ConfigSource,
    pub requests: Vec<String>,
    pub config: DeviceConfig,
}

/// A claim's `status.allocation`.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub devices: Vec<AllocatedDevice>,
    pub config: Vec<AllocationConfig>,
    /// Nodes the devices are reachable from; None: every node.
    pub node_selector: Option<NodeSelector>,
}

/// An entry of a claim's `status.reservedFor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    pub api_group: String,
    pub resource: String,
    pub name: String,
    pub uid: String,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub requests: Vec<DeviceRequest>,
    pub constraints: Vec<Constraint>,
    /// `spec.devices.config`: (requests, configuration).
    pub config: Vec<(Vec<String>, DeviceConfig)>,
    pub allocation: Option<Allocation>,
    pub reserved_for: Vec<Consumer>,
    pub terminating: bool,
    /// UID of the controlling owner (the pod a template's claim was made for).
    pub controller_uid: Option<String>,
    pub has_finalizer: bool,
}

impl ResourceClaim {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_reserved_for(&self, uid: &str) -> bool {
        self.reserved_for.iter().any(|c| c.uid == uid)
    }

    /// Whether another consumer may reserve it.
    pub fn can_be_reserved(&self) -> bool {
        self.reserved_for.len() < RESERVED_FOR_MAX
    }
}

/// A ResourceClaimTemplate: the claim spec a pod's claim is made from
/// (by the controller-manager; by `simulate` when simulating).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimTemplate {
    pub namespace: String,
    pub name: String,
    pub requests: Vec<DeviceRequest>,
    pub constraints: Vec<Constraint>,
    pub config: Vec<(Vec<String>, DeviceConfig)>,
}

/// What a decision does to one of the pod's claims: allocates it (when
/// not allocated yet) and reserves it for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimDecision {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The allocation made for it; None when it was allocated already.
    pub allocation: Option<Allocation>,
    pub consumer: Consumer,
}

impl ClaimDecision {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// What DynamicResources's Reserve decided for a pod's claims, kept in
/// the cycle state: the scheduler assumes it in the cache (the next pods
/// see the devices taken), the binder writes it in PreBind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodAllocations {
    pub claims: Vec<ClaimDecision>,
}

impl PodAllocations {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

/// Where a pod's claim comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSource {
    /// `resourceClaimName`: an existing claim, possibly shared.
    Claim(String),
    /// `resourceClaimTemplateName`: a claim made for this pod.
    Template(String),
}

/// An entry of a pod's `spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub source: ClaimSource,
}

impl Allocation {
    /// The one node the allocation is on, when its selector names one by
    /// `metadata.name` (node-local devices).
    pub fn node_name(&self) -> Option<&str> {
        let sel = self.node_selector.as_ref()?;
        let [term] = sel.terms.as_slice() else { return None };
        let [field] = term.match_fields.as_slice() else { return None };
        match (field.key.as_str(), field.op, field.values.as_slice()) {
            ("metadata.name", crate::terms::SelectorOp::In, [n]) if term.match_expressions.is_empty() => Some(n),
            _ => None,
        }
    }
}
