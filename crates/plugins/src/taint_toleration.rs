//! TaintToleration (kube-scheduler's plugin of that name):
//! - Filter: every `NoSchedule` and `NoExecute` taint of the node must be
//!   tolerated by the pod.
//! - Score: the number of `PreferNoSchedule` taints the pod does not
//!   tolerate, normalised in reverse (fewer untolerated taints score higher).

use std::sync::Arc;

use framework::cache::{NodeInfo, NodeView};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, MAX_NODE_SCORE, Plugin, ScorePlugin, Status,
};
use framework::model::{Pod, TaintEffect};
use framework::registry::ArgsError;

use crate::helper::{
    decode_no_args, default_normalize_score, find_untolerated_taint, is_do_not_schedule_taint,
    tolerations_tolerate_taint,
};

pub const NAME: &str = "TaintToleration";

/// kube v1.35+ no longer names the taint in the status (taints may be
/// sensitive); the same constant message for every node.
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

#[derive(Debug, Default, Clone, Copy)]
pub struct TaintToleration;

/// The number of `PreferNoSchedule` taints of `node` that `pod` does not tolerate.
///
/// kube first keeps only the tolerations with no effect or
/// `PreferNoSchedule`; [`framework::model::Toleration::tolerates`] already
/// requires a matching effect, so checking all tolerations is the same and
/// needs no per-pod state (hence no PreScore).
pub fn count_intolerable_prefer_no_schedule(pod: &Pod, node: &NodeInfo) -> i64 {
    node.node
        .taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule && !tolerations_tolerate_taint(&pod.tolerations, t))
        .count() as i64
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node added or its taints changed, or the pod gaining tolerations.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateTaint),
            ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update),
        ]
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        if !node.summary().has_hard_taints {
            return Status::success();
        }
        match find_untolerated_taint(&node.node.taints, &pod.tolerations, is_do_not_schedule_taint) {
            None => Status::success(),
            Some(_) => Status::unresolvable(ERR_REASON_UNTOLERATED),
        }
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        if !node.summary().has_prefer_no_schedule_taints {
            return Ok(0);
        }
        Ok(count_intolerable_prefer_no_schedule(pod, node))
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(TaintToleration))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::model::TolerationOp;
    use framework::testing::{NodeBuilder, PodBuilder, node, pod};

    fn info(n: NodeBuilder) -> NodeInfo {
        NodeInfo::new(n.build())
    }

    #[test]
    fn filter_table() {
        use TaintEffect::*;
        use TolerationOp::*;
        let cases: Vec<(&str, NodeBuilder, PodBuilder, bool)> = vec![
            ("no taints", node("n"), pod("p"), true),
            ("NoSchedule untolerated", node("n").taint("dedicated", "gpu", NoSchedule), pod("p"), false),
            ("NoExecute untolerated", node("n").taint("dedicated", "gpu", NoExecute), pod("p"), false),
            ("PreferNoSchedule never filters", node("n").taint("dedicated", "gpu", PreferNoSchedule), pod("p"), true),
            (
                "Equal with matching value and effect",
                node("n").taint("dedicated", "gpu", NoSchedule),
                pod("p").toleration("dedicated", Equal, "gpu", Some(NoSchedule)),
                true,
            ),
            (
                "Equal with other value",
                node("n").taint("dedicated", "gpu", NoSchedule),
                pod("p").toleration("dedicated", Equal, "cpu", Some(NoSchedule)),
                false,
            ),
            (
                "Exists ignores the value",
                node("n").taint("dedicated", "gpu", NoSchedule),
                pod("p").toleration("dedicated", Exists, "", Some(NoSchedule)),
                true,
            ),
            (
                "empty effect tolerates every effect",
                node("n").taint("dedicated", "gpu", NoExecute),
                pod("p").toleration("dedicated", Equal, "gpu", None),
                true,
            ),
            (
                "effect must match when set",
                node("n").taint("dedicated", "gpu", NoExecute),
                pod("p").toleration("dedicated", Equal, "gpu", Some(NoSchedule)),
                false,
            ),
            (
                "empty key with Exists tolerates all taints",
                node("n").taint("a", "1", NoSchedule).taint("b", "2", NoExecute),
                pod("p").toleration("", Exists, "", None),
                true,
            ),
            (
                "empty key with Exists and an effect covers only that effect",
                node("n").taint("a", "1", NoSchedule).taint("b", "2", NoExecute),
                pod("p").toleration("", Exists, "", Some(NoSchedule)),
                false,
            ),
            (
                "every hard taint needs a toleration",
                node("n").taint("a", "1", NoSchedule).taint("b", "2", NoSchedule),
                pod("p").toleration("a", Exists, "", None),
                false,
            ),
            (
                "one toleration per taint is enough",
                node("n").taint("a", "1", NoSchedule).taint("b", "2", NoSchedule),
                pod("p").toleration("a", Exists, "", None).toleration("b", Equal, "2", None),
                true,
            ),
            (
                "empty taint value matches Equal with empty value",
                node("n").taint("node-role.kubernetes.io/control-plane", "", NoSchedule),
                pod("p").toleration("node-role.kubernetes.io/control-plane", Equal, "", Some(NoSchedule)),
                true,
            ),
        ];
        for (name, n, p, want) in cases {
            let s = TaintToleration.filter(&CycleState::new(), &p.build(), &info(n).view());
            if want {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), ERR_REASON_UNTOLERATED, "{name}");
            }
        }
    }

    #[test]
    fn score_and_normalize_table() {
        use TaintEffect::*;
        use TolerationOp::*;
        struct Case {
            name: &'static str,
            pod: PodBuilder,
            nodes: Vec<NodeBuilder>,
            raw: Vec<i64>,
            want: Vec<i64>,
        }
        let cases = vec![
            Case {
                name: "tolerated PreferNoSchedule taints do not count",
                pod: pod("p").toleration("foo", Equal, "bar", Some(PreferNoSchedule)).toleration(
                    "cpu-type",
                    Equal,
                    "arm64",
                    Some(PreferNoSchedule),
                ),
                nodes: vec![
                    node("n1").taint("foo", "bar", PreferNoSchedule),
                    node("n2").taint("cpu-type", "arm64", PreferNoSchedule),
                ],
                raw: vec![0, 0],
                want: vec![100, 100],
            },
            Case {
                name: "more untolerated taints score lower",
                pod: pod("p").toleration("foo", Equal, "bar", Some(PreferNoSchedule)),
                nodes: vec![
                    node("n1"),
                    node("n2").taint("cpu-type", "arm64", PreferNoSchedule),
                    node("n3").taint("cpu-type", "arm64", PreferNoSchedule).taint("disk-type", "ssd", PreferNoSchedule),
                ],
                raw: vec![0, 1, 2],
                want: vec![100, 50, 0],
            },
            Case {
                name: "only PreferNoSchedule taints are counted",
                pod: pod("p"),
                nodes: vec![
                    node("n1").taint("a", "1", NoSchedule),
                    node("n2").taint("b", "2", PreferNoSchedule),
                    node("n3").taint("c", "3", NoExecute),
                ],
                raw: vec![0, 1, 0],
                want: vec![100, 0, 100],
            },
            Case {
                name: "a NoSchedule toleration does not cover PreferNoSchedule",
                pod: pod("p").toleration("a", Exists, "", Some(NoSchedule)),
                nodes: vec![node("n1").taint("a", "1", PreferNoSchedule), node("n2")],
                raw: vec![1, 0],
                want: vec![0, 100],
            },
            Case {
                name: "a toleration without effect covers PreferNoSchedule",
                pod: pod("p").toleration("a", Exists, "", None),
                nodes: vec![node("n1").taint("a", "1", PreferNoSchedule), node("n2")],
                raw: vec![0, 0],
                want: vec![100, 100],
            },
            Case {
                name: "empty key Exists tolerates all soft taints",
                pod: pod("p").toleration("", Exists, "", Some(PreferNoSchedule)),
                nodes: vec![node("n1").taint("a", "1", PreferNoSchedule).taint("b", "", PreferNoSchedule)],
                raw: vec![0],
                want: vec![100],
            },
            Case {
                name: "reverse normalisation truncates like kube",
                pod: pod("p"),
                nodes: vec![
                    node("n1").taint("a", "", PreferNoSchedule).taint("b", "", PreferNoSchedule).taint(
                        "c",
                        "",
                        PreferNoSchedule,
                    ),
                    node("n2").taint("a", "", PreferNoSchedule),
                ],
                raw: vec![3, 1],
                want: vec![0, 67],
            },
        ];
        for c in cases {
            let p = c.pod.build();
            let state = CycleState::new();
            let mut scores: Vec<i64> =
                c.nodes.into_iter().map(|n| TaintToleration.score(&state, &p, &info(n).view()).unwrap()).collect();
            assert_eq!(scores, c.raw, "{}: raw", c.name);
            assert!(TaintToleration.has_normalize());
            assert!(TaintToleration.normalize(&state, &p, &mut scores).is_success());
            assert_eq!(scores, c.want, "{}: normalized", c.name);
        }
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_filter().is_some() && p.as_score().is_some());
        assert!(p.as_pre_score().is_none());
    }
}
