//! NodeName: a pod whose `spec.nodeName` is set before scheduling fits only
//! that node (kube-scheduler's `NodeName`). For the pending pods the engine
//! schedules `node_name` is normally `None`, and every node passes.

use std::sync::Arc;

use framework::cache::{NodeInfo, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, skip_if};

pub const NAME: &str = "NodeName";

pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeName;

/// Whether `pod` may run on `node` as far as `spec.nodeName` goes: an empty
/// or absent name fits everywhere.
pub fn fits(pod: &Pod, node: &NodeInfo) -> bool {
    match pod.node_name.as_deref() {
        None | Some("") => true,
        Some(name) => name == node.name(),
    }
}

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Only the named node appearing can help.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, EventAction::Add)]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeName {
    /// A pod without `spec.nodeName` (every pending pod, normally) fits
    /// every node: no need to ask each one.
    fn pre_filter(&self, _state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_if(pod.node_name.as_deref().unwrap_or("").is_empty()))
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        if fits(pod, node) { Status::success() } else { Status::unresolvable(ERR_REASON) }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(NodeName))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::testing::{node, pod};

    #[test]
    fn filter_table() {
        let cases = [
            ("no node name fits any node", None, "n1", true),
            ("empty node name fits any node", Some(""), "n1", true),
            ("matching name", Some("n1"), "n1", true),
            ("other name", Some("n2"), "n1", false),
            ("names compare exactly", Some("N1"), "n1", false),
        ];
        for (name, want_node, on, want) in cases {
            let p = pod("p").with(|p| p.node_name = want_node.map(str::to_string)).build();
            let info = NodeInfo::new(node(on).build());
            let s = NodeName.filter(&CycleState::new(), &p, &info.view());
            if want {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), ERR_REASON, "{name}");
            }
        }
    }

    #[test]
    fn pre_filter_skips_pods_without_a_node_name() {
        let snap = Snapshot::new();
        let run = |p: Pod| NodeName.pre_filter(&mut CycleState::new(), &p, &snap).1;
        assert!(run(pod("p").build()).is_skip());
        assert!(run(pod("p").with(|p| p.node_name = Some(String::new())).build()).is_skip());
        assert!(run(pod("p").with(|p| p.node_name = Some("n".into())).build()).is_success());
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_filter().is_some());
        assert!(new(Some(&serde_json::json!({"nodeName": "x"}))).is_err());
    }
}
