//! The resource model: what a pod requests and a node offers, in integer units
//! (milli-cpu, bytes, counts), as kube-scheduler's `framework.Resource`.
//! Extended resources (`nvidia.com/gpu`, hugepages, ...) sit in a small
//! name-sorted vector beside cpu and memory; amounts add, subtract and take
//! the maximum. The name classes are kube's (extended, hugepages, scalar),
//! and so are the non-zero request defaults scoring uses.

use std::sync::Arc;

/// Name of an extended or hugepages resource, e.g. `nvidia.com/gpu`.
/// Shared so that cloning a [`Resources`] does not copy the strings.
pub type ResourceName = Arc<str>;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// Requests a container without a cpu request counts as when spreading by
/// usage (kube-scheduler's `DefaultMilliCPURequest`): 100m.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The same for memory (`DefaultMemoryRequest`): 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The most of any resource one object holds here (a node's allocatable,
/// a pod's request), in the units below: 2^52, i.e. 4 PiB of memory or
/// 4.5 billion cores. The API server accepts more (up to 2^63 milli); such
/// an amount is held as this one, which no pod fits under and no request
/// comes close to, so it decides the same. Sums over 2,048 objects of
/// this size stay exact in i64; past that they saturate.
pub const MAX_AMOUNT: i64 = 1 << 52;

/// A bundle of resource amounts. Scalar (extended) resources are kept in a
/// small vector sorted by name: pods and nodes have few of them, and a
/// lookup by linear scan beats hashing at that size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Pod slots (`pods` in a node's allocatable); unused in pod requests.
    pub allowed_pod_number: i64,
    scalar: Vec<(ResourceName, i64)>,
}

impl Resources {
    pub fn new(milli_cpu: i64, memory: i64) -> Self {
        Resources { milli_cpu, memory, ..Default::default() }
    }

    /// The amount of a named resource; 0 when absent.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar(name),
        }
    }

    /// Sets a named resource (standard or scalar).
    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.milli_cpu = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            PODS => self.allowed_pod_number = value,
            _ => match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(i) => self.scalar[i].1 = value,
                Err(i) => self.scalar.insert(i, (Arc::from(name), value)),
            },
        }
    }

    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar.iter().find(|(n, _)| &**n == name).map_or(0, |(_, v)| *v)
    }

    /// Extended resources with their amounts, sorted by name.
    pub fn scalars(&self) -> &[(ResourceName, i64)] {
        &self.scalar
    }

    /// Adds `other` into `self` (used for sums of containers and of pods
    /// on a node). Saturates: amounts are at most [`MAX_AMOUNT`] each, so
    /// only thousands of the largest objects reach the bound.
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_add(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.saturating_add(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            let cur = self.scalar(name);
            self.set(name, cur.saturating_add(*v));
        }
    }

    /// Subtracts `other` from `self` (a pod leaving a node); saturates as
    /// [`Resources::add`].
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_sub(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.saturating_sub(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            let cur = self.scalar(name);
            self.set(name, cur.saturating_sub(*v));
        }
    }

    /// Raises each amount of `self` to at least that of `other`
    /// (init containers run one at a time, so the pod needs the largest).
    pub fn set_max(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            if *v > self.scalar(name) {
                self.set(name, *v);
            }
        }
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.allowed_pod_number == 0
            && self.scalar.iter().all(|(_, v)| *v == 0)
    }
}

/// Whether a resource name is an extended resource in Kubernetes' sense:
/// a domain-prefixed name outside `kubernetes.io/` and not `requests.*`.
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    name.contains('/')
}

/// Native resources are unprefixed or in the `kubernetes.io/` domain.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Hugepages (`hugepages-2Mi`) are scalar resources too.
pub fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Resources the scheduler accounts as scalars: extended, hugepages and
/// attachable-volume resources.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || is_hugepages(name) || name.starts_with("attachable-volumes-")
}

/// Pod-level non-zero request defaults, as kube-scheduler's
/// `GetNonzeroRequests`: applied per container by conversion; this helper
/// gives the default for a container with no request.
pub fn non_zero_defaults(milli_cpu: i64, memory: i64) -> (i64, i64) {
    (
        if milli_cpu == 0 { DEFAULT_MILLI_CPU_REQUEST } else { milli_cpu },
        if memory == 0 { DEFAULT_MEMORY_REQUEST } else { memory },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sub_max_over_scalars() {
        let mut a = Resources::new(100, 1000);
        let mut b = Resources::new(50, 3000);
        b.set("nvidia.com/gpu", 2);
        a.add(&b);
        assert_eq!((a.milli_cpu, a.memory, a.get("nvidia.com/gpu")), (150, 4000, 2));
        a.sub(&b);
        assert_eq!(a.get("nvidia.com/gpu"), 0);
        let mut m = Resources::new(200, 10);
        m.set_max(&b);
        assert_eq!((m.milli_cpu, m.memory, m.get("nvidia.com/gpu")), (200, 3000, 2));
    }

    #[test]
    fn resource_name_classes() {
        for (name, extended, scalar) in [
            ("nvidia.com/gpu", true, true),
            ("example.com/foo", true, true),
            ("cpu", false, false),
            ("kubernetes.io/foo", false, false),
            ("hugepages-2Mi", false, true),
            ("requests.nvidia.com/gpu", false, false),
        ] {
            assert_eq!(is_extended_resource_name(name), extended, "{name}");
            assert_eq!(is_scalar_resource_name(name), scalar, "{name}");
        }
    }
}
