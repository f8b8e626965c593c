//! A node's GPUs as devices: each one's free share (thousandths) and free
//! memory, kept by its `NodeInfo` as pods are added and removed, never
//! recounted. Each GPU pod's allocation is recorded, so removing a pod
//! gives back exactly what it took, also on a cloned NodeInfo.

use std::sync::Arc;

use super::index::DeviceSet;
use super::request::GpuKind;
use super::{MAX_DEVICES, MILLI_PER_GPU, gpu_memory_label};
use crate::facts::GPU_RESOURCE;
use crate::model::{Node, Pod};

/// The GPU devices of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeGpus {
    /// Free thousandths per device; below 0 when pods bound by others
    /// over-commit a device.
    free_milli: Vec<i32>,
    /// Free MiB per device; empty when the node does not say its GPU memory.
    free_memory: Vec<i64>,
    /// MiB per device, from the node label `nvidia.com/gpu.memory`.
    memory_mib: Option<u64>,
    allocations: Vec<Allocation>,
    /// Laid out from the node's DRA slices, not from its allocatable.
    from_dra: bool,
}

/// What one pod took.
#[derive(Debug, Clone, PartialEq)]
struct Allocation {
    uid: Arc<str>,
    devices: DeviceSet,
    milli: i32,
    memory_mib: i64,
}

impl NodeGpus {
    /// The devices of `node` (allocatable `nvidia.com/gpu`, memory from
    /// its label), all free.
    pub fn of(node: &Node) -> NodeGpus {
        let count = node.allocatable.scalar(GPU_RESOURCE).clamp(0, MAX_DEVICES as i64) as usize;
        NodeGpus::new(count, gpu_memory_label(&node.labels).ok().flatten())
    }

    /// `count` free devices of `memory_mib` each (None: unknown).
    pub fn new(count: usize, memory_mib: Option<u64>) -> NodeGpus {
        let count = count.min(MAX_DEVICES);
        NodeGpus {
            free_milli: vec![MILLI_PER_GPU as i32; count],
            free_memory: memory_mib.map_or_else(Vec::new, |m| vec![m as i64; count]),
            memory_mib,
            allocations: Vec::new(),
            from_dra: false,
        }
    }

    /// `count` free devices published through DRA (see [`crate::dra`]):
    /// the node's allocatable does not change them.
    pub fn dra(count: usize, memory_mib: Option<u64>) -> NodeGpus {
        NodeGpus { from_dra: true, ..NodeGpus::new(count, memory_mib) }
    }

    pub fn is_dra(&self) -> bool {
        self.from_dra
    }

    /// Marks whole `devices` taken by `holder` (a DRA claim's uid): what
    /// an allocated claim takes, once however many pods share it.
    pub fn hold(&mut self, holder: &str, devices: DeviceSet) {
        let devices = devices.below(self.count());
        let memory = self.memory_mib.map_or(0, |m| m as i64);
        for i in devices.iter() {
            self.free_milli[i] -= MILLI_PER_GPU as i32;
            if let Some(m) = self.free_memory.get_mut(i) {
                *m -= memory;
            }
        }
        self.allocations.push(Allocation {
            uid: Arc::from(holder),
            devices,
            milli: MILLI_PER_GPU as i32,
            memory_mib: memory,
        });
    }

    /// Whether `node` has other devices than these (count or memory).
    pub fn differs_from(&self, node: &Node) -> bool {
        if self.from_dra {
            return false;
        }
        let count = node.allocatable.scalar(GPU_RESOURCE).clamp(0, MAX_DEVICES as i64) as usize;
        count != self.count() || gpu_memory_label(&node.labels).ok().flatten() != self.memory_mib
    }

    pub fn count(&self) -> usize {
        self.free_milli.len()
    }

    pub fn memory_mib(&self) -> Option<u64> {
        self.memory_mib
    }

    /// Free thousandths per device (below 0 when over-committed).
    pub fn free_milli(&self) -> &[i32] {
        &self.free_milli
    }

    /// Free MiB per device; empty when memory is unknown.
    pub fn free_memory(&self) -> &[i64] {
        &self.free_memory
    }

    /// Whether device `i` is untouched.
    pub fn is_free(&self, i: usize) -> bool {
        self.free_milli[i] >= MILLI_PER_GPU as i32 && self.memory_mib.is_none_or(|m| self.free_memory[i] >= m as i64)
    }

    /// Devices no pod uses.
    pub fn free_devices(&self) -> usize {
        (0..self.count()).filter(|&i| self.is_free(i)).count()
    }

    /// Thousandths free over all devices.
    pub fn free_total(&self) -> i64 {
        self.free_milli.iter().map(|&f| i64::from(f.max(0))).sum()
    }

    /// The devices `uid` took, if it holds any here.
    pub fn devices_of(&self, uid: &str) -> Option<DeviceSet> {
        self.allocations.iter().find(|a| &*a.uid == uid).map(|a| a.devices)
    }

    /// Takes what `pod` asks for: the devices it carries
    /// (`Pod::gpu_devices`, chosen when it was assumed or read from its
    /// annotation), or else a best fit. Pods without device requests take
    /// nothing.
    pub fn add_pod(&mut self, pod: &Pod) {
        let (want, milli, memory) = match pod.gpu.kind {
            GpuKind::Whole { count } => (count as usize, MILLI_PER_GPU as i32, self.memory_mib.map_or(0, |m| m as i64)),
            GpuKind::Share { milli, memory_mib } => (1, milli as i32, memory_mib as i64),
            GpuKind::None | GpuKind::Slices { .. } => return,
        };
        let devices = match pod.gpu_devices.map(|d| d.below(self.count())) {
            Some(d) if !d.is_empty() => d,
            _ => self.best_fit(want, milli, memory),
        };
        for i in devices.iter() {
            self.free_milli[i] -= milli;
            if let Some(m) = self.free_memory.get_mut(i) {
                *m -= memory;
            }
        }
        self.allocations.push(Allocation { uid: Arc::from(pod.uid.as_str()), devices, milli, memory_mib: memory });
    }

    /// Gives back what the pod `uid` took; false if it took nothing here.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(at) = self.allocations.iter().position(|a| &*a.uid == uid) else { return false };
        let a = self.allocations.swap_remove(at);
        for i in a.devices.iter() {
            self.free_milli[i] += a.milli;
            if let Some(m) = self.free_memory.get_mut(i) {
                *m += a.memory_mib;
            }
        }
        true
    }

    /// Devices for a pod that carries none (bound by another scheduler, or
    /// before devices were tracked): the `want` fitting devices with the
    /// least free, lowest index first; if too few fit, the freest.
    fn best_fit(&self, want: usize, milli: i32, memory: i64) -> DeviceSet {
        let mut order: Vec<usize> = (0..self.count()).collect();
        let fits = |i: usize| self.free_milli[i] >= milli && self.free_memory.get(i).is_none_or(|&m| m >= memory);
        order.sort_by_key(|&i| (!fits(i), if fits(i) { self.free_milli[i] } else { -self.free_milli[i] }, i));
        order.into_iter().take(want).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::request::GpuRequest;
    use crate::testing::pod;

    fn gpu_pod(uid: &str, gpu: GpuRequest, devices: Option<&str>) -> Pod {
        pod(uid)
            .with(|p| {
                p.gpu = gpu;
                p.gpu_devices = devices.map(|d| DeviceSet::parse(d).unwrap());
            })
            .build()
    }

    #[test]
    fn pods_take_and_give_back_exactly() {
        let mut g = NodeGpus::new(4, Some(16_000));
        // (pod, request, carried devices, free milli after, free memory after)
        type Step<'a> = (&'a str, GpuRequest, Option<&'a str>, [i32; 4], [i64; 4]);
        let steps: Vec<Step> = vec![
            ("a", GpuRequest::whole(2), Some("2-3"), [1000, 1000, 0, 0], [16_000, 16_000, 0, 0]),
            ("b", GpuRequest::share(300, 4_000), Some("1"), [1000, 700, 0, 0], [16_000, 12_000, 0, 0]),
            // No devices carried: best fit puts the share beside b.
            ("c", GpuRequest::share(500, 0), None, [1000, 200, 0, 0], [16_000, 12_000, 0, 0]),
            ("d", GpuRequest::whole(1), None, [0, 200, 0, 0], [0, 12_000, 0, 0]),
            // Over-committed by someone else: counted anyway, below zero.
            ("e", GpuRequest::share(400, 0), Some("1"), [0, -200, 0, 0], [0, 12_000, 0, 0]),
            ("cpu", GpuRequest::default(), None, [0, -200, 0, 0], [0, 12_000, 0, 0]),
        ];
        for (uid, gpu, devices, milli, memory) in &steps {
            g.add_pod(&gpu_pod(uid, gpu.clone(), *devices));
            assert_eq!((g.free_milli(), g.free_memory()), (&milli[..], &memory[..]), "after adding {uid}");
        }
        assert_eq!(g.devices_of("c").map(|d| d.to_string()), Some("1".into()));
        assert_eq!(g.devices_of("d").map(|d| d.to_string()), Some("0".into()));
        assert_eq!(g.free_total(), 0, "over-committed devices count as empty");
        let snapshot = g.clone();
        for uid in ["e", "a", "c", "b", "d"] {
            assert!(g.remove_pod(uid), "{uid}");
        }
        assert!(!g.remove_pod("cpu"), "took nothing");
        assert_eq!(g, NodeGpus::new(4, Some(16_000)), "everything given back");
        // The clone is untouched, and removing from it is exact too.
        let mut c = snapshot;
        assert!(c.remove_pod("a"));
        assert_eq!(c.free_milli(), [0, -200, 1000, 1000]);
    }

    #[test]
    fn devices_past_the_count_are_ignored_and_too_few_free_take_the_freest() {
        let mut g = NodeGpus::new(2, None);
        g.add_pod(&gpu_pod("a", GpuRequest::whole(1), Some("5")));
        assert_eq!(g.free_milli(), [0, 1000], "index 5 does not exist: best fit instead");
        g.add_pod(&gpu_pod("b", GpuRequest::share(600, 0), None));
        g.add_pod(&gpu_pod("c", GpuRequest::whole(2), None));
        assert_eq!(g.free_milli(), [-1000, -600], "no fit: the freest devices");
        assert_eq!((g.free_devices(), g.is_free(0)), (0, false));
        assert!(g.free_memory().is_empty());
    }
}
