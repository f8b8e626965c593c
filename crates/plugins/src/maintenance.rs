//! Maintenance: a node labelled `maintenance-mode=true` takes no new pods
//! (the article's maintenance filter, DESIGN.md §4). Pods already there
//! stay; draining them is the operator's business. An unreadable value of
//! the label counts as maintenance (the facts reader warns once), so a typo
//! never sends work to a node being serviced.

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::{decode_no_args, node_events, skip_if};

pub const NAME: &str = "Maintenance";

pub const ERR_REASON_MAINTENANCE: &str = "node(s) in maintenance mode";

#[derive(Debug, Default, Clone, Copy)]
pub struct Maintenance;

impl Plugin for Maintenance {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Only a node's labels change whether it is in maintenance.
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

impl PreFilterPlugin for Maintenance {
    /// No node in maintenance: nothing to check per node.
    fn pre_filter(&self, _state: &mut CycleState, _pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_if(snapshot.fact_counts().maintenance == 0))
    }
}

impl FilterPlugin for Maintenance {
    fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        if node.summary().maintenance {
            // Waiting for other pods to leave does not help: unresolvable.
            return Status::unresolvable(ERR_REASON_MAINTENANCE);
        }
        Status::success()
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(Maintenance))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::LABEL_MAINTENANCE;
    use framework::framework::Code;
    use framework::testing::{node, pod};

    #[test]
    fn filter_table() {
        let cases = [
            ("no label", None, true),
            ("true", Some("true"), false),
            ("false", Some("false"), true),
            ("unreadable value is treated as maintenance", Some("yes"), false),
        ];
        for (name, label, fits) in cases {
            let mut n = node("n");
            if let Some(v) = label {
                n = n.label(LABEL_MAINTENANCE, v);
            }
            let info = n.info();
            let s = Maintenance.filter(&CycleState::new(), &pod("p").build(), &info.view());
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(
                    (s.code, s.message()),
                    (Code::UnschedulableAndUnresolvable, ERR_REASON_MAINTENANCE.into()),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn pre_filter_skips_when_no_node_is_in_maintenance() {
        let p = pod("p").build();
        let skip = |nodes| Maintenance.pre_filter(&mut CycleState::new(), &p, &Snapshot::from_parts(nodes, vec![])).1;
        assert!(skip(vec![node("a").build()]).is_skip());
        assert!(skip(vec![node("a").build(), node("b").label(LABEL_MAINTENANCE, "true").build()]).is_success());
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"x": 1}))).is_err());
    }
}
