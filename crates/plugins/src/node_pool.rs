//! NodePool: a profile's `nodeSelector` (DESIGN.md §3–§4) is the pool of
//! nodes its pods may use: `scheduler-group=gpu` for a scheduler that owns
//! the GPU nodes, `scheduler-canary=enabled` for the article's canary. The
//! selector lives on the profile, not in this plugin's args, so that one
//! place says which nodes a profile owns; the framework hands it to the
//! cycle.

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, node_events};

pub const NAME: &str = "NodePool";

pub const ERR_REASON_OUTSIDE_POOL: &str = "node(s) outside this profile's node pool";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodePool;

impl Plugin for NodePool {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node joining the pool: added, or relabelled.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        node_events(&[EventAction::Add, EventAction::UpdateLabel, EventAction::Update])
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodePool {
    /// A profile without a node selector may use every node: skip Filter.
    fn pre_filter(&self, state: &mut CycleState, _pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let status = match state.node_selector() {
            Some(sel) if !sel.is_empty() => Status::success(),
            _ => Status::skip(),
        };
        (PreFilterResult::default(), status)
    }
}

impl FilterPlugin for NodePool {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        match state.node_selector() {
            Some(sel) if !sel.matches(&node.node.labels) => Status::unresolvable(ERR_REASON_OUTSIDE_POOL),
            _ => Status::success(),
        }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(NodePool))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::model::{LabelSelector, Requirement, SelectorOp};
    use framework::testing::{node, pod};

    fn state(sel: Option<LabelSelector>) -> CycleState {
        let mut s = CycleState::new();
        s.set_node_selector(sel.map(Arc::new));
        s
    }

    #[test]
    fn filter_table() {
        let canary = || LabelSelector::from_match_labels([("scheduler-canary", "enabled")]);
        let not_canary = || LabelSelector {
            requirements: vec![Requirement {
                key: "scheduler-canary".into(),
                op: SelectorOp::DoesNotExist,
                values: vec![],
            }],
            matches_nothing: false,
        };
        let cases = [
            ("no selector: every node", None, None, true),
            ("empty selector: every node", Some(LabelSelector::everything()), None, true),
            ("matching label", Some(canary()), Some("enabled"), true),
            ("other value", Some(canary()), Some("disabled"), false),
            ("label absent", Some(canary()), None, false),
            ("DoesNotExist keeps canary nodes out", Some(not_canary()), Some("enabled"), false),
            ("DoesNotExist takes the rest", Some(not_canary()), None, true),
        ];
        for (name, sel, label, fits) in cases {
            let mut n = node("n");
            if let Some(v) = label {
                n = n.label("scheduler-canary", v);
            }
            let info = n.info();
            let s = state(sel);
            let v = NodePool.filter(&s, &pod("p").build(), &info.view());
            if fits {
                assert!(v.is_success(), "{name}: {v:?}");
            } else {
                assert_eq!((v.code, v.message()), (Code::UnschedulableAndUnresolvable, ERR_REASON_OUTSIDE_POOL.into()));
            }
        }
    }

    #[test]
    fn pre_filter_skips_without_a_pool() {
        let snap = Snapshot::new();
        let p = pod("p").build();
        assert!(NodePool.pre_filter(&mut state(None), &p, &snap).1.is_skip());
        assert!(NodePool.pre_filter(&mut state(Some(LabelSelector::everything())), &p, &snap).1.is_skip());
        let sel = LabelSelector::from_match_labels([("scheduler-group", "gpu")]);
        assert!(NodePool.pre_filter(&mut state(Some(sel)), &p, &snap).1.is_success());
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"nodeSelector": {}}))).is_err());
    }
}
