//! A pod's GPU request as the object model holds it ([`request`]) and the
//! sets of devices a pod was given ([`index`]); the accounting of a node's
//! devices and the placement measures are the engine's (`devices`). The
//! resource, label and annotation names of GPU requests are the constants
//! here.

pub mod index;
pub mod request;

pub use index::DeviceSet;
pub use request::{ClaimedGpus, GpuKind, GpuModels, GpuRequest};

/// Whole GPUs as the NVIDIA device plugin advertises them.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// A pod's share of one GPU, in thousandths of it (1–1000).
pub const ANNOTATION_GPU_MILLI: &str = "gpu-scheduler.io/gpu-milli";
/// A pod's share of one GPU, in MiB of its memory.
pub const ANNOTATION_GPU_MEMORY_MIB: &str = "gpu-scheduler.io/gpu-memory-mib";
/// The devices a pod was given, written at bind time (`0`, `2-3`, `0,2`).
pub const ANNOTATION_GPU_INDEX: &str = "gpu-scheduler.io/gpu-index";
/// The openb / Alibaba GPU-share forms of the same requests.
pub const ANNOTATION_ALIBABA_GPU_MILLI: &str = "alibabacloud.com/gpu-milli";
pub const ANNOTATION_ALIBABA_GPU_COUNT: &str = "alibabacloud.com/gpu-count";
/// The GPU models a pod accepts, `|`-separated (`V100M16|V100M32`).
pub const ANNOTATION_ALIBABA_GPU_MODEL: &str = "alibabacloud.com/gpu-card-model";
/// Node label with each GPU's memory in MiB (set by GPU feature discovery).
pub const LABEL_GPU_MEMORY: &str = "nvidia.com/gpu.memory";
/// Time-sliced GPUs as the NVIDIA device plugin advertises them with
/// `renameByDefault`.
pub const GPU_SHARED_RESOURCE: &str = "nvidia.com/gpu.shared";
/// MIG instances: `nvidia.com/mig-<g>g.<m>gb` (the mixed strategy).
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
/// One GPU in thousandths.
pub const MILLI_PER_GPU: u32 = 1000;
/// Devices modelled per node: [`DeviceSet`] is a 64-bit set.
pub const MAX_DEVICES: usize = 64;

/// The most GPU memory a label or an annotation may give, in MiB: 4 PiB,
/// far past any GPU, and small enough that a node's sums over its pods
/// and devices, in thousandths of a device, stay inside i64.
pub const MAX_GPU_MEMORY_MIB: u64 = 1 << 32;

/// Reads the node label [`LABEL_GPU_MEMORY`]: MiB per GPU, if set.
pub fn gpu_memory_label(labels: &crate::terms::Labels) -> Result<Option<u64>, String> {
    match labels.get(LABEL_GPU_MEMORY) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(m) if (1..=MAX_GPU_MEMORY_MIB).contains(&m) => Ok(Some(m)),
            _ => Err(format!("must be an integer from 1 to {MAX_GPU_MEMORY_MIB} (MiB per GPU)")),
        },
    }
}
