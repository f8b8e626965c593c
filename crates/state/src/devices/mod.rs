//! GPUs as devices (docs/POLICIES.md, "Devices").
//!
//! A pod's GPU request is parsed once, when the pod is converted
//! ([`request`]): whole GPUs, a share of one GPU (thousandths of it and/or
//! MiB of its memory), MIG instances or time-sliced replicas, and the GPU
//! models it accepts. A node's GPUs are devices ([`node::NodeGpus`], kept in
//! its `NodeInfo` as pods come and go), each with its free share and free
//! memory. Which devices a pod got is written in the annotation
//! `gpu-scheduler.io/gpu-index` ([`index::DeviceSet`]) and read back, so
//! the accounting survives a restart.
//!
//! Fragmentation ([`frag`]) is measured as in the FGD paper against the
//! typical pod shapes ([`shapes`]), which the cache learns from the pods it
//! sees. The same measure scores nodes (the GpuFragmentation plugin) and
//! picks the devices inside the chosen node ([`choose_devices`]). The FGD
//! paper's own policy, kept as a reference, is [`fgd`]. Beside it: the
//! cluster's gaps ([`gaps`]), the per-node memo of the measure ([`memo`])
//! and the node types kept for pods that fit nothing else ([`kept`]).
//!
//! [`GpuPlacement`] is the profile's `gpuPlacement`. The scheduler gives an
//! assumed pod its devices ([`choose_devices`], or [`fgd::choose_devices`]
//! for `fgd`) from the snapshot its decision saw, by the measure and gap
//! balance GpuFragmentation left in the cycle state (FGD's rule on the
//! typical pods FgdScore left). This module knows no NodeInfo: the node's
//! side is its [`NodeGpus`] and the [`GpuState`] view of them.

pub mod fgd;
pub mod frag;
pub mod gaps;
pub mod kept;
pub mod memo;
pub mod node;
pub mod shapes;

use serde::{Deserialize, Serialize};

pub use frag::{Fragmentation, GpuState, choose_devices};
// A pod's GPU request and the device sets are part of the object model
// (the model crate); re-exported so the engine names them in one place.
pub use gpu_scheduler_model::gpu::{
    ANNOTATION_ALIBABA_GPU_COUNT, ANNOTATION_ALIBABA_GPU_MILLI, ANNOTATION_ALIBABA_GPU_MODEL, ANNOTATION_GPU_INDEX,
    ANNOTATION_GPU_MEMORY_MIB, ANNOTATION_GPU_MILLI, ClaimedGpus, DeviceSet, GPU_SHARED_RESOURCE, GpuKind, GpuModels,
    GpuRequest, LABEL_GPU_MEMORY, MAX_DEVICES, MAX_GPU_MEMORY_MIB, MIG_RESOURCE_PREFIX, MILLI_PER_GPU,
    gpu_memory_label, index, request,
};
pub use node::NodeGpus;
pub use shapes::{GpuShapesConfig, ShapeStats, TypicalShapes};

/// How GPU pods are placed, per profile (`gpuPlacement`): which score
/// plugin ranks the nodes and how devices are chosen inside the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GpuPlacement {
    /// Least fragmentation against the typical pod shapes (FGD's measure).
    #[default]
    Fragmentation,
    /// Best fit: the node and device with the least GPU left after the pod.
    Binpack,
    /// Worst fit: the node and device with the most GPU left after the pod.
    Spread,
    /// The FGD paper's policy as its simulator runs it (FgdScore, [`fgd`]):
    /// a reference to compare placements against.
    Fgd,
}

impl GpuPlacement {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuPlacement::Fragmentation => "fragmentation",
            GpuPlacement::Binpack => "binpack",
            GpuPlacement::Spread => "spread",
            GpuPlacement::Fgd => "fgd",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_names() {
        for (p, name) in [
            (GpuPlacement::Fragmentation, "fragmentation"),
            (GpuPlacement::Binpack, "binpack"),
            (GpuPlacement::Spread, "spread"),
            (GpuPlacement::Fgd, "fgd"),
        ] {
            assert_eq!(p.as_str(), name);
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(name));
        }
        assert_eq!(GpuPlacement::default(), GpuPlacement::Fragmentation);
    }

    #[test]
    fn memory_label() {
        let labels = |v: &str| crate::model::Labels::from([(LABEL_GPU_MEMORY.to_string(), v.to_string())]);
        assert_eq!(gpu_memory_label(&Default::default()), Ok(None));
        assert_eq!(gpu_memory_label(&labels("81920")), Ok(Some(81920)));
        for bad in ["0", "80G", "-1", ""] {
            assert!(gpu_memory_label(&labels(bad)).is_err(), "{bad:?}");
        }
    }
}
