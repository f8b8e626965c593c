//! NodeHealth: the article's hardware-alert rule (DESIGN.md §4). A node
//! whose last hardware alert is less than `window` (5 min) old is
//! unhealthy: it scores 0 instead of 100 (the article's −100 penalty, at
//! weight 1.0), or, with `mode: Filter`, is rejected outright. An alert
//! stamped in the future (clock skew between the monitor and us) counts as
//! recent: when in doubt, keep off the node.
//!
//! The alert time is a node fact: annotation
//! `gpu-scheduler.io/last-hardware-alert`, a configured node condition
//! (`nodeFacts.hardwareAlertConditions`), or in `run` a Warning Event on
//! the node with a configured reason (`nodeFacts.hardwareAlertEventReasons`);
//! the cycle's clock decides what
//! "recent" means, so simulate's `--now` replays a moment exactly.

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Status,
};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use framework::time::Millis;
use serde::Deserialize;

use crate::helper::{duration_ms, node_events, skip_if};

pub const NAME: &str = "NodeHealth";

/// Whether a recent alert lowers the score or rejects the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Mode {
    #[default]
    Score,
    Filter,
}

/// `NodeHealthArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeHealthArgs {
    /// How long an alert keeps a node unhealthy (Go duration).
    #[serde(default = "default_window")]
    pub window: String,
    #[serde(default)]
    pub mode: Mode,
}

fn default_window() -> String {
    "5m".into()
}

impl Default for NodeHealthArgs {
    fn default() -> Self {
        NodeHealthArgs { window: default_window(), mode: Mode::default() }
    }
}

#[derive(Debug, Clone)]
pub struct NodeHealth {
    window_ms: Millis,
    mode: Mode,
    reason: String,
}

impl NodeHealth {
    /// When the node's last alert ages out, if it has not yet.
    fn unhealthy_until(&self, state: &CycleState, node: &NodeView<'_>) -> Option<Millis> {
        let until = node.summary().last_hardware_alert()?.saturating_add(self.window_ms);
        (until >= state.now()).then_some(until)
    }

    fn unhealthy(&self, state: &CycleState, node: &NodeView<'_>) -> bool {
        self.unhealthy_until(state, node).is_some()
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: NodeHealthArgs = decode_args(args)?;
    let window_ms = duration_ms("window", &args.window)?;
    if window_ms == 0 {
        let longest = framework::go_duration::format(&framework::bounds::MAX_DURATION);
        return Err(ArgsError::new("window", format!("must be from 1ms to {longest}, got {:?}", args.window)));
    }
    Ok(Arc::new(NodeHealth {
        window_ms,
        mode: args.mode,
        reason: format!("node(s) had a hardware alert in the last {}", args.window),
    }))
}

impl Plugin for NodeHealth {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A new node, or an alert cleared (a node update). Alerts also age
    /// out with time alone: the filter's verdict says when, and the pod is
    /// retried then.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        node_events(&[EventAction::Add, EventAction::Update])
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        (self.mode == Mode::Filter).then_some(self as &dyn PreFilterPlugin)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        (self.mode == Mode::Filter).then_some(self as &dyn FilterPlugin)
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Skip when no node has ever had an alert: all are healthy.
fn skip_unless_alerted(snapshot: &Snapshot) -> Status {
    skip_if(snapshot.fact_counts().hardware_alert == 0)
}

impl PreFilterPlugin for NodeHealth {
    fn pre_filter(&self, _state: &mut CycleState, _pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_unless_alerted(snapshot))
    }
}

impl PreScorePlugin for NodeHealth {
    fn pre_score(&self, _state: &mut CycleState, _pod: &Pod, nodes: NodeList<'_>) -> Status {
        skip_unless_alerted(nodes.snapshot())
    }
}

impl FilterPlugin for NodeHealth {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        if let Some(until) = self.unhealthy_until(state, node) {
            // Retried when the alert ages out, not at the 5-minute flush.
            return Status::unschedulable(Cow::Owned(self.reason.clone())).with_retry_at(until.saturating_add(1));
        }
        Status::success()
    }
}

impl ScorePlugin for NodeHealth {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        Ok(if self.unhealthy(state, node) { 0 } else { MAX_NODE_SCORE })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::{ANNOTATION_LAST_ALERT, parse_time};
    use framework::framework::Code;
    use framework::testing::{node, pod};

    const NOW: &str = "2026-01-01T12:00:00Z";

    /// (name, alert annotation, unhealthy)
    const CASES: &[(&str, Option<&str>, bool)] = &[
        ("no alert", None, false),
        ("2 min ago", Some("2026-01-01T11:58:00Z"), true),
        ("exactly 5 min ago", Some("2026-01-01T11:55:00Z"), true),
        ("5 min and 1 s ago", Some("2026-01-01T11:54:59Z"), false),
        ("10 min ago", Some("2026-01-01T11:50:00Z"), false),
        ("1 min in the future", Some("2026-01-01T12:01:00Z"), true),
        ("malformed is no alert", Some("yesterday"), false),
    ];

    #[test]
    fn both_modes_table() {
        let state = CycleState::at(parse_time(NOW).unwrap());
        let score = new(None).unwrap();
        let filter = new(Some(&serde_json::json!({"mode": "Filter"}))).unwrap();
        assert!(score.as_filter().is_none(), "Score mode does not filter");
        for (name, alert, unhealthy) in CASES {
            let mut n = node("n");
            if let Some(a) = alert {
                n = n.annotation(ANNOTATION_LAST_ALERT, a);
            }
            let info = n.info();
            let p = pod("p").build();
            let want = if *unhealthy { 0 } else { 100 };
            assert_eq!(score.as_score().unwrap().score(&state, &p, &info.view()), Ok(want), "{name}: score");
            assert_eq!(
                filter.as_score().unwrap().score(&state, &p, &info.view()),
                Ok(want),
                "{name}: filter-mode score"
            );
            let s = filter.as_filter().unwrap().filter(&state, &p, &info.view());
            if *unhealthy {
                assert_eq!(s.code, Code::Unschedulable, "{name}");
                let alert = parse_time(alert.unwrap()).unwrap();
                assert_eq!(s.retry_at, Some(alert + 5 * 60_000 + 1), "{name}: retried as the alert ages out");
                assert_eq!(s.message(), "node(s) had a hardware alert in the last 5m", "{name}");
            } else {
                assert!(s.is_success(), "{name}: {s:?}");
            }
        }
    }

    #[test]
    fn skips_when_no_node_has_an_alert() {
        let p = new(Some(&serde_json::json!({"mode": "Filter"}))).unwrap();
        let pod = pod("p").build();
        let alerted = node("b").annotation(ANNOTATION_LAST_ALERT, "2020-01-01T00:00:00Z").build();
        for (nodes, skip) in [(vec![node("a").build()], true), (vec![node("a").build(), alerted], false)] {
            let snap = Snapshot::from_parts(nodes, vec![]);
            let pf = p.as_pre_filter().unwrap().pre_filter(&mut CycleState::new(), &pod, &snap).1;
            let ps = p.as_pre_score().unwrap().pre_score(&mut CycleState::new(), &pod, snap.node_list());
            assert_eq!((pf.is_skip(), ps.is_skip()), (skip, skip));
        }
        assert!(new(None).unwrap().as_pre_filter().is_none(), "Score mode has no PreFilter");
    }

    #[test]
    fn args() {
        let p = new(Some(&serde_json::json!({"window": "15m", "mode": "Filter"}))).unwrap();
        let info = node("n").annotation(ANNOTATION_LAST_ALERT, "2026-01-01T11:50:00Z").info();
        let state = CycleState::at(parse_time(NOW).unwrap());
        let s = p.as_filter().unwrap().filter(&state, &pod("p").build(), &info.view());
        assert_eq!(s.message(), "node(s) had a hardware alert in the last 15m");
        for (args, field) in [
            (serde_json::json!({"window": "0s"}), "window"),
            (serde_json::json!({"window": "five"}), "window"),
            (serde_json::json!({"mode": "Hard"}), "mode"),
            (serde_json::json!({"penalty": 100}), "penalty"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
