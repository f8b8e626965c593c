//! GpuDeviceFit: a pod's GPU request against the node's devices
//! (docs/POLICIES.md, "Devices"). Whole GPUs need that many fully free
//! devices; a share needs one device with enough free share (thousandths)
//! and memory; a pod naming GPU models (`alibabacloud.com/gpu-card-model`)
//! fits only nodes of one of them. NodeResourcesFit still counts
//! `nvidia.com/gpu` as kube-scheduler does; this filter sees what a count
//! cannot: eight 10 % shares leave no device free for a whole-GPU pod.
//! MIG instances and time-sliced GPUs are extended resources whose counts
//! NodeResourcesFit checks; only their model constraint is checked here.

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::devices::frag::fits;
use framework::devices::{GpuKind, GpuRequest};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "GpuDeviceFit";

pub const ERR_REASON_MODEL: &str = "node(s) didn't have a GPU model the pod accepts";
pub const ERR_REASON_WHOLE: &str = "node(s) didn't have enough free GPU devices";
pub const ERR_REASON_SHARE: &str = "node(s) didn't have a GPU with enough free share";
pub const ERR_REASON_MEMORY_UNKNOWN: &str = "node(s) didn't report their GPU memory (label nvidia.com/gpu.memory)";

#[derive(Debug, Default, Clone, Copy)]
pub struct GpuDeviceFit;

impl Plugin for GpuDeviceFit {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Devices come free when pods leave; nodes with (other) GPUs may come.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for GpuDeviceFit {
    /// Pods that take no device and name no model have nothing to check.
    fn pre_filter(&self, _state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_if(!pod.gpu.wants_devices() && pod.gpu.models.is_none()))
    }
}

impl FilterPlugin for GpuDeviceFit {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        let gpu: &GpuRequest = &pod.gpu;
        if gpu.models.is_some() && !gpu.accepts_model(node.facts.gpu_model.as_deref()) {
            return Status::unresolvable(ERR_REASON_MODEL);
        }
        if !gpu.wants_devices() {
            return Status::success();
        }
        if !node.summary().has_gpus {
            return Status::unschedulable(reason(gpu));
        }
        if let GpuKind::Share { memory_mib, .. } = gpu.kind
            && memory_mib > 0
            && node.gpus.memory_mib().is_none()
        {
            return Status::unresolvable(ERR_REASON_MEMORY_UNKNOWN);
        }
        if fits(&node.gpu_state(), gpu) { Status::success() } else { Status::unschedulable(reason(gpu)) }
    }
}

fn reason(gpu: &GpuRequest) -> &'static str {
    if matches!(gpu.kind, GpuKind::Share { .. }) { ERR_REASON_SHARE } else { ERR_REASON_WHOLE }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(GpuDeviceFit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::devices::{DeviceSet, LABEL_GPU_MEMORY};
    use framework::facts::{GPU_RESOURCE, LABEL_GPU_MODEL};
    use framework::framework::Code;
    use framework::node_info::NodeInfo;
    use framework::testing::{node, pod};

    /// A 4-GPU a100 node (16 GiB each) holding a whole GPU on device 0 and
    /// a 600 share on device 1.
    fn busy_node(memory: bool) -> NodeInfo {
        let mut n = node("n").resource(GPU_RESOURCE, 4).label(LABEL_GPU_MODEL, "a100");
        if memory {
            n = n.label(LABEL_GPU_MEMORY, "16384");
        }
        let mut info = n.info();
        let placed = |uid: &str, gpu: GpuRequest, d: &str| {
            pod(uid).node("n").with(|p| (p.gpu, p.gpu_devices) = (gpu, DeviceSet::parse(d).ok())).arc()
        };
        info.add_pod(placed("a", GpuRequest::whole(1), "0"));
        info.add_pod(placed("b", GpuRequest::share(600, 8192), "1"));
        info
    }

    #[test]
    fn filter_table() {
        // (case, request, node has memory label, code, reason)
        let cases: Vec<(&str, GpuRequest, bool, Code, &str)> = vec![
            ("two whole GPUs: devices 2 and 3", GpuRequest::whole(2), true, Code::Success, ""),
            ("three whole GPUs: device 1 is shared", GpuRequest::whole(3), true, Code::Unschedulable, ERR_REASON_WHOLE),
            ("a 400 share beside the 600", GpuRequest::share(400, 0), true, Code::Success, ""),
            ("a 400 share with 8 GiB", GpuRequest::share(400, 8192), true, Code::Success, ""),
            ("memory only, 16 GiB: a free device", GpuRequest::share(0, 16384), true, Code::Success, ""),
            (
                "memory asked, no memory label",
                GpuRequest::share(0, 1024),
                false,
                Code::UnschedulableAndUnresolvable,
                ERR_REASON_MEMORY_UNKNOWN,
            ),
            ("the model it accepts", GpuRequest::whole(1).with_models(&["A100", "h100"]), true, Code::Success, ""),
            (
                "another model",
                GpuRequest::whole(1).with_models(&["t4"]),
                true,
                Code::UnschedulableAndUnresolvable,
                ERR_REASON_MODEL,
            ),
            (
                "a model and no GPU asked",
                GpuRequest::default().with_models(&["t4"]),
                true,
                Code::UnschedulableAndUnresolvable,
                ERR_REASON_MODEL,
            ),
        ];
        for (name, gpu, memory, code, reason) in cases {
            let info = busy_node(memory);
            let p = pod("p").with(|p| p.gpu = gpu).build();
            let s = GpuDeviceFit.filter(&CycleState::new(), &p, &info.view());
            assert_eq!((s.code, s.message()), (code, reason.to_string()), "{name}");
        }
        // Every device holds some share: no share of 500 fits anywhere.
        let mut full = node("f").resource(GPU_RESOURCE, 2).info();
        for (uid, d) in [("x", "0"), ("y", "1")] {
            full.add_pod(
                pod(uid)
                    .node("f")
                    .with(|p| (p.gpu, p.gpu_devices) = (GpuRequest::share(600, 0), DeviceSet::parse(d).ok()))
                    .arc(),
            );
        }
        let p = pod("p").with(|p| p.gpu = GpuRequest::share(500, 0)).build();
        let s = GpuDeviceFit.filter(&CycleState::new(), &p, &full.view());
        assert_eq!((s.code, s.message()), (Code::Unschedulable, ERR_REASON_SHARE.to_string()));
        let cpu_node = node("c").info();
        let s = GpuDeviceFit.filter(&CycleState::new(), &p, &cpu_node.view());
        assert_eq!((s.code, s.message()), (Code::Unschedulable, ERR_REASON_SHARE.to_string()), "a node without GPUs");
    }

    #[test]
    fn pre_filter_skips_pods_without_devices_or_models() {
        let snap = Snapshot::from_parts(vec![node("n").build()], vec![]);
        let pre = |gpu: GpuRequest| {
            GpuDeviceFit.pre_filter(&mut CycleState::new(), &pod("p").with(|p| p.gpu = gpu).build(), &snap).1.code
        };
        assert_eq!(pre(GpuRequest::default()), Code::Skip);
        assert_eq!(pre(GpuRequest::whole(1)), Code::Success);
        assert_eq!(pre(GpuRequest::share(100, 0)), Code::Success);
        assert_eq!(pre(GpuRequest::default().with_models(&["t4"])), Code::Success);
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"x": 1}))).is_err());
    }
}
