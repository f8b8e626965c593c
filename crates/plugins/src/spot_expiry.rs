//! SpotExpiry: a spot (preemptible) node announces when it will be taken
//! back in the annotation `gpu-scheduler.io/spot-expiry` (RFC 3339, set by
//! the cloud's node agent or an operator). Within `margin` of that time
//! (30 min by default) it takes no new pods: a pod started there would be
//! killed before doing useful work. The clock is the cycle's (`--now` in
//! simulate), never the wall clock read here.

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status,
};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::{duration_ms, node_events, skip_if};

pub const NAME: &str = "SpotExpiry";

/// `SpotExpiryArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpotExpiryArgs {
    /// How long before the expiry a node stops taking pods (Go duration).
    #[serde(default = "default_margin")]
    pub margin: String,
}

fn default_margin() -> String {
    "30m".into()
}

impl Default for SpotExpiryArgs {
    fn default() -> Self {
        SpotExpiryArgs { margin: default_margin() }
    }
}

#[derive(Debug)]
pub struct SpotExpiry {
    margin_ms: u64,
    reason: String,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: SpotExpiryArgs = decode_args(args)?;
    Ok(Arc::new(SpotExpiry {
        margin_ms: duration_ms("margin", &args.margin)?,
        reason: format!("node(s) spot instance expiring within {}", args.margin),
    }))
}

impl Plugin for SpotExpiry {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A new node, or a node whose expiry moved (its annotations changed).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        node_events(&[EventAction::Add, EventAction::Update])
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for SpotExpiry {
    /// No node announces an expiry: nothing to check per node.
    fn pre_filter(&self, _state: &mut CycleState, _pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_if(snapshot.fact_counts().spot_expiry == 0))
    }
}

impl FilterPlugin for SpotExpiry {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        match node.summary().spot_expiry() {
            // Time only brings the expiry closer: unresolvable.
            Some(expiry) if state.now().saturating_add(self.margin_ms) >= expiry => {
                Status::unresolvable(Cow::Owned(self.reason.clone()))
            }
            _ => Status::success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::{ANNOTATION_SPOT_EXPIRY, parse_time};
    use framework::framework::Code;
    use framework::testing::{node, pod};

    const NOW: &str = "2026-01-01T12:00:00Z";

    #[test]
    fn filter_table() {
        let cases = [
            ("no annotation", None, true),
            ("expires in 2 h", Some("2026-01-01T14:00:00Z"), true),
            ("expires in 31 min", Some("2026-01-01T12:31:00Z"), true),
            ("expires in exactly 30 min", Some("2026-01-01T12:30:00Z"), false),
            ("expires in 20 min", Some("2026-01-01T12:20:00Z"), false),
            ("already expired", Some("2026-01-01T11:00:00Z"), false),
            ("offsets are honoured: 12:20 UTC", Some("2026-01-01T13:20:00+01:00"), false),
            ("malformed expiry is no expiry", Some("tomorrow"), true),
        ];
        let p = new(None).unwrap();
        let state = CycleState::at(parse_time(NOW).unwrap());
        for (name, expiry, fits) in cases {
            let mut n = node("n");
            if let Some(e) = expiry {
                n = n.annotation(ANNOTATION_SPOT_EXPIRY, e);
            }
            let info = n.info();
            let s = p.as_filter().unwrap().filter(&state, &pod("p").build(), &info.view());
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), "node(s) spot instance expiring within 30m", "{name}");
            }
        }
    }

    #[test]
    fn pre_filter_skips_without_spot_nodes() {
        let p = new(None).unwrap();
        let pf = p.as_pre_filter().unwrap();
        let run =
            |nodes| pf.pre_filter(&mut CycleState::new(), &pod("p").build(), &Snapshot::from_parts(nodes, vec![])).1;
        assert!(run(vec![node("a").build()]).is_skip());
        let spot = node("b").annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T14:00:00Z").build();
        assert!(run(vec![node("a").build(), spot]).is_success());
    }

    #[test]
    fn args() {
        let p = new(Some(&serde_json::json!({"margin": "2h"}))).unwrap();
        let info = node("n").annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T13:30:00Z").info();
        let s =
            p.as_filter().unwrap().filter(&CycleState::at(parse_time(NOW).unwrap()), &pod("p").build(), &info.view());
        assert_eq!(s.message(), "node(s) spot instance expiring within 2h");
        for (args, field) in [
            (serde_json::json!({"margin": "soon"}), "margin"),
            (serde_json::json!({"margin": 30}), "margin"),
            (serde_json::json!({"window": "5m"}), "window"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
