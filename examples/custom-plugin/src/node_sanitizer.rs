//! NodeSanitizer, in the spirit of the article's plugin of that name: a
//! team's own idea of which nodes are fit for work, read from what its CMDB
//! writes on the nodes.
//!
//! - Filter: a node must carry the label `example.com/cmdb-state` with the
//!   value `in-service` (args: `requiredState`); nodes being racked,
//!   repaired or retired are out.
//! - Score: the burn-in result the CMDB records in the annotation
//!   `example.com/burn-in-score` (0–100); nodes without one score 50, and
//!   a value that is not a number counts as none.

use std::sync::Arc;

use gpu_scheduler::engine::cache::NodeView;
use gpu_scheduler::engine::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, MAX_NODE_SCORE, Plugin, ScorePlugin, Status,
};
use gpu_scheduler::engine::model::Pod;
use gpu_scheduler::engine::registry::{ArgsError, decode_args};
use serde::Deserialize;

pub const NAME: &str = "NodeSanitizer";
pub const LABEL_STATE: &str = "example.com/cmdb-state";
pub const ANNOTATION_BURN_IN: &str = "example.com/burn-in-score";

/// `NodeSanitizerArgs`, from the profile's `pluginConfig`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeSanitizerArgs {
    #[serde(default = "in_service")]
    pub required_state: String,
}

fn in_service() -> String {
    "in-service".into()
}

impl Default for NodeSanitizerArgs {
    fn default() -> Self {
        NodeSanitizerArgs { required_state: in_service() }
    }
}

pub struct NodeSanitizer {
    required_state: String,
    /// Built once: a filter must not allocate for every rejected node.
    reason: String,
}

/// The factory the registry calls with the plugin's args.
pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: NodeSanitizerArgs = decode_args(args)?;
    if args.required_state.trim().is_empty() {
        return Err(ArgsError::new("requiredState", "must not be empty"));
    }
    let reason = format!("node(s) not {} in the CMDB", args.required_state);
    Ok(Arc::new(NodeSanitizer { required_state: args.required_state, reason }))
}

impl Plugin for NodeSanitizer {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node's labels changing can make it fit: retry the pods it rejected.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
        ]
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeSanitizer {
    fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        if node.node.labels.get(LABEL_STATE) == Some(&self.required_state) {
            Status::success()
        } else {
            Status::unschedulable(self.reason.clone())
        }
    }
}

impl ScorePlugin for NodeSanitizer {
    fn score(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let burn_in = node.node.annotations.get(ANNOTATION_BURN_IN).and_then(|v| v.trim().parse::<i64>().ok());
        Ok(burn_in.map_or(MAX_NODE_SCORE / 2, |s| s.clamp(0, MAX_NODE_SCORE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_scheduler::engine::testing::{node, pod};

    #[test]
    fn filter_and_score_table() {
        let plugin = new(None).unwrap();
        let cases = [
            ("in service, burnt in", Some("in-service"), Some("90"), true, 90),
            ("in service, no burn-in", Some("in-service"), None, true, 50),
            ("in service, garbage burn-in", Some("in-service"), Some("great"), true, 50),
            ("in service, out of range", Some("in-service"), Some("250"), true, 100),
            ("in repair", Some("repair"), Some("90"), false, 90),
            ("not in the CMDB", None, None, false, 50),
        ];
        for (name, state, burn_in, fits, score) in cases {
            let mut n = node("n");
            if let Some(s) = state {
                n = n.label(LABEL_STATE, s);
            }
            if let Some(b) = burn_in {
                n = n.annotation(ANNOTATION_BURN_IN, b);
            }
            let info = n.info();
            let (state, p) = (CycleState::new(), pod("p").build());
            let status = plugin.as_filter().unwrap().filter(&state, &p, &info.view());
            assert_eq!(status.is_success(), fits, "{name}: {status:?}");
            if !fits {
                assert_eq!(status.message(), "node(s) not in-service in the CMDB", "{name}");
            }
            assert_eq!(plugin.as_score().unwrap().score(&state, &p, &info.view()), Ok(score), "{name}");
        }
    }

    #[test]
    fn args() {
        let p = new(Some(&serde_json::json!({"requiredState": "production"}))).unwrap();
        let info = node("n").label(LABEL_STATE, "production").info();
        assert!(p.as_filter().unwrap().filter(&CycleState::new(), &pod("p").build(), &info.view()).is_success());
        for (bad, field) in
            [(serde_json::json!({"requiredState": " "}), "requiredState"), (serde_json::json!({"state": "x"}), "state")]
        {
            let Err(e) = new(Some(&bad)) else { panic!("{bad} accepted") };
            assert!(e.to_string().contains(field), "{e}");
        }
    }
}
