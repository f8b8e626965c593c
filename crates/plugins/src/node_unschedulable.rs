//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes no new
//! pods, unless the pod tolerates the `node.kubernetes.io/unschedulable`
//! `NoSchedule` taint (kube-scheduler's `NodeUnschedulable`).

use std::sync::{Arc, LazyLock};

use framework::cache::NodeView;
use framework::framework::{ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, Status};
use framework::model::{Pod, Taint, TaintEffect};
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, tolerations_tolerate_taint};

pub const NAME: &str = "NodeUnschedulable";

pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// Key of the taint the node lifecycle controller puts on cordoned nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The taint a pod must tolerate to land on a cordoned node. Built once so
/// that Filter allocates nothing.
static UNSCHEDULABLE_TAINT: LazyLock<Taint> = LazyLock::new(|| Taint {
    key: TAINT_NODE_UNSCHEDULABLE.to_string(),
    value: String::new(),
    effect: TaintEffect::NoSchedule,
});

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node added or uncordoned, or the pod gaining the toleration.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::Update),
            ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update),
        ]
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        if !node.summary().unschedulable || tolerations_tolerate_taint(&pod.tolerations, &UNSCHEDULABLE_TAINT) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(NodeUnschedulable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::NodeInfo;
    use framework::framework::Code;
    use framework::model::TolerationOp;
    use framework::testing::{node, pod};

    #[test]
    fn filter_table() {
        use TaintEffect::*;
        use TolerationOp::*;
        let key = TAINT_NODE_UNSCHEDULABLE;
        let cases = [
            ("schedulable node, no toleration", false, pod("p"), true),
            ("cordoned node, no toleration", true, pod("p"), false),
            ("cordoned node, exact toleration", true, pod("p").toleration(key, Exists, "", Some(NoSchedule)), true),
            ("toleration without effect covers NoSchedule", true, pod("p").toleration(key, Exists, "", None), true),
            (
                "Equal with empty value matches the valueless taint",
                true,
                pod("p").toleration(key, Equal, "", Some(NoSchedule)),
                true,
            ),
            ("Equal with a value does not", true, pod("p").toleration(key, Equal, "true", Some(NoSchedule)), false),
            ("empty key with Exists tolerates everything", true, pod("p").toleration("", Exists, "", None), true),
            ("wrong effect", true, pod("p").toleration(key, Exists, "", Some(NoExecute)), false),
            ("other key", true, pod("p").toleration("node.kubernetes.io/not-ready", Exists, "", None), false),
        ];
        for (name, cordoned, p, want) in cases {
            let mut n = node("n");
            if cordoned {
                n = n.unschedulable();
            }
            let info = NodeInfo::new(n.build());
            let s = NodeUnschedulable.filter(&CycleState::new(), &p.build(), &info.view());
            if want {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), ERR_REASON_UNSCHEDULABLE, "{name}");
            }
        }
    }

    #[test]
    fn a_taint_on_the_node_is_not_this_plugins_business() {
        // The taint itself is TaintToleration's; this plugin reads only spec.unschedulable.
        let n = node("n").taint(TAINT_NODE_UNSCHEDULABLE, "", TaintEffect::NoSchedule).build();
        let info = NodeInfo::new(n);
        assert!(NodeUnschedulable.filter(&CycleState::new(), &pod("p").build(), &info.view()).is_success());
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_filter().is_some());
        assert!(p.as_pre_filter().is_none());
    }
}
