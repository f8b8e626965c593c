//! Small pieces several plugins share: kube-scheduler's default score
//! normalisation, taint checks, node-affinity matching, and the args decoder
//! for plugins that take none.

use framework::framework::{ClusterEvent, EventAction, EventResource, Status};
use framework::go_duration;
use framework::model::{Node, Pod, Taint, TaintEffect, Toleration};
use framework::registry::{ArgsError, decode_args};
use framework::time::Millis;
use serde::Deserialize;

/// Maps raw scores from `[0, max(scores)]` onto `[0, max_priority]`, as
/// kube-scheduler's `helper.DefaultNormalizeScore`. With `reverse`, a higher
/// raw score becomes a lower final one (`max_priority - scaled`). When every
/// score is 0 the scores stay 0, or all become `max_priority` if reversed.
/// Scores are assumed non-negative, as in kube-scheduler.
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let max = scores.iter().copied().fold(0, i64::max);
    if max == 0 {
        if reverse {
            scores.fill(max_priority);
        }
        return;
    }
    for s in scores.iter_mut() {
        // Widened only when the product overflows (128-bit division is a
        // library call); the quotient is at most `max_priority`, so
        // narrowing back is exact.
        let scaled = match max_priority.checked_mul(*s) {
            Some(p) => p / max,
            None => (i128::from(max_priority) * i128::from(*s) / i128::from(max)) as i64,
        };
        *s = if reverse { max_priority - scaled } else { scaled };
    }
}

/// Taints that keep pods off a node at filter time (kube's
/// `DoNotScheduleTaintsFilterFunc`): `NoSchedule` and `NoExecute`.
pub fn is_do_not_schedule_taint(taint: &Taint) -> bool {
    matches!(taint.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
}

/// Whether any of `tolerations` tolerates `taint` (`TolerationsTolerateTaint`).
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first taint accepted by `include` that no toleration tolerates
/// (`FindMatchingUntoleratedTaint`).
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    include: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().find(|t| include(t) && !tolerations_tolerate_taint(tolerations, t))
}

/// Whether `node` satisfies the pod's `nodeSelector` and its required node
/// affinity, ANDed (kube's `RequiredNodeAffinity.Match`). Allocation-free.
pub fn required_node_affinity_matches(pod: &Pod, node: &Node) -> bool {
    pod.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
        && pod.required_node_affinity.as_ref().is_none_or(|sel| sel.matches(node))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Decodes the args of a plugin that takes none: absent, `null` and `{}`
/// are accepted; any field is an error naming it.
pub fn decode_no_args(args: Option<&serde_json::Value>) -> Result<(), ArgsError> {
    decode_args::<NoArgs>(args).map(|_| ())
}

/// A Go duration (`30m`, `1h30m`) from a plugin's args, in milliseconds;
/// an error names `field`. At most Go's longest duration (the parser
/// refuses more), so far inside the engine's u64 milliseconds.
pub fn duration_ms(field: &str, value: &str) -> Result<Millis, ArgsError> {
    let d = go_duration::parse(value).map_err(|e| ArgsError::new(field, e))?;
    Ok(framework::bounds::millis(d))
}

/// `Skip` when `skip` holds, else success: what a PreFilter or PreScore
/// returns after deciding whether the pod needs the plugin at all.
pub fn skip_if(skip: bool) -> Status {
    if skip { Status::skip() } else { Status::success() }
}

/// Node events with the given actions: what may make a node that a
/// node-fact filter rejected acceptable.
pub fn node_events(actions: &[EventAction]) -> Vec<ClusterEvent> {
    actions.iter().map(|a| ClusterEvent::new(EventResource::Node, *a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::model::{NodeSelector, NodeSelectorTerm, Requirement, SelectorOp, TolerationOp};
    use framework::testing::{node, pod};

    #[test]
    fn normalize_score_table() {
        struct Case {
            name: &'static str,
            reverse: bool,
            scores: Vec<i64>,
            want: Vec<i64>,
        }
        let cases = [
            Case { name: "scaled to max", reverse: false, scores: vec![1, 2, 3, 4], want: vec![25, 50, 75, 100] },
            Case { name: "reversed", reverse: true, scores: vec![1, 2, 3, 4], want: vec![75, 50, 25, 0] },
            Case {
                name: "integer division truncates",
                reverse: false,
                scores: vec![1000, 10, 20, 30],
                want: vec![100, 1, 2, 3],
            },
            Case {
                name: "reversed truncation",
                reverse: true,
                scores: vec![1000, 10, 20, 30],
                want: vec![0, 99, 98, 97],
            },
            Case { name: "all zero stays zero", reverse: false, scores: vec![0, 0, 0], want: vec![0, 0, 0] },
            Case { name: "all zero reversed is max", reverse: true, scores: vec![0, 0, 0], want: vec![100, 100, 100] },
            Case { name: "empty", reverse: true, scores: vec![], want: vec![] },
            Case {
                name: "huge raw scores do not overflow",
                reverse: false,
                scores: vec![i64::MAX, i64::MAX / 2],
                want: vec![100, 49],
            },
        ];
        for c in cases {
            let mut s = c.scores.clone();
            default_normalize_score(100, c.reverse, &mut s);
            assert_eq!(s, c.want, "{}", c.name);
        }
    }

    #[test]
    fn untolerated_taint_respects_filter() {
        let n = node("n")
            .taint("soft", "", TaintEffect::PreferNoSchedule)
            .taint("hard", "v", TaintEffect::NoExecute)
            .build();
        let none: [Toleration; 0] = [];
        assert_eq!(
            find_untolerated_taint(&n.taints, &none, is_do_not_schedule_taint).map(|t| t.key.as_str()),
            Some("hard")
        );
        let p = pod("p").toleration("hard", TolerationOp::Exists, "", None).build();
        assert!(find_untolerated_taint(&n.taints, &p.tolerations, is_do_not_schedule_taint).is_none());
        assert!(find_untolerated_taint(&n.taints, &p.tolerations, |_| true).is_some());
    }

    #[test]
    fn required_affinity_ands_selector_and_terms() {
        let n = node("n").label("a", "1").label("b", "2").build();
        let term = |k: &str, v: &str| NodeSelectorTerm {
            match_expressions: vec![Requirement { key: k.into(), op: SelectorOp::In, values: vec![v.into()] }],
            match_fields: vec![],
        };
        let cases = [
            ("nothing required", pod("p").build(), true),
            ("selector matches", pod("p").node_selector("a", "1").build(), true),
            ("selector misses", pod("p").node_selector("a", "2").build(), false),
            (
                "selector and affinity both match",
                pod("p")
                    .node_selector("a", "1")
                    .with(|p| p.required_node_affinity = Some(NodeSelector { terms: vec![term("b", "2")] }))
                    .build(),
                true,
            ),
            (
                "affinity misses although selector matches",
                pod("p")
                    .node_selector("a", "1")
                    .with(|p| p.required_node_affinity = Some(NodeSelector { terms: vec![term("b", "3")] }))
                    .build(),
                false,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(required_node_affinity_matches(&p, &n), want, "{name}");
        }
    }

    #[test]
    fn durations_in_args() {
        assert_eq!(duration_ms("margin", "1m30s").unwrap(), 90_000);
        assert_eq!(duration_ms("margin", "500ms").unwrap(), 500);
        let e = duration_ms("margin", "soon").unwrap_err();
        assert_eq!(e.path, "margin");
    }

    #[test]
    fn no_args_accepts_only_nothing() {
        assert!(decode_no_args(None).is_ok());
        assert!(decode_no_args(Some(&serde_json::Value::Null)).is_ok());
        assert!(decode_no_args(Some(&serde_json::json!({}))).is_ok());
        let e = decode_no_args(Some(&serde_json::json!({"weight": 1}))).unwrap_err();
        assert!(e.message.contains("weight"), "{e}");
    }
}
