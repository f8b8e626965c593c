//! PreScore, Score and NormalizeScore: the `ScheduleAnyway` constraints.
//! Fewer matching pods in a node's domains give a higher score.

use std::collections::HashMap;

use framework::cache::{NodeInfo, NodeList, NodeView};
use framework::framework::{CycleState, MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Status};
use framework::model::{LABEL_HOSTNAME, LabelSelector, Pod, UnsatisfiableAction};

use super::{InclusionNeeds, PodTopologySpread, count_matching, has_all_keys};

const MISSING_STATE: &str = "reading \"PreScorePodTopologySpread\" from cycleState: not found";
const MISALIGNED_SCORES: &str = "PodTopologySpread: NormalizeScore got a different node list than PreScore";

#[derive(Debug)]
struct ScoreConstraint {
    topology_key: String,
    max_skew: i32,
    selector: LabelSelector,
    /// Hostname constraints count the pods of the scored node itself, in
    /// Score, instead of per-domain totals.
    per_node: bool,
    /// Matching pods per domain of the candidate nodes.
    counts: HashMap<String, i64>,
    /// ln(domains + 2): keeps small topologies from being drowned by big ones.
    weight: f64,
}

/// The PreScore result, read by Score and NormalizeScore.
#[derive(Debug)]
pub(super) struct PreScoreState {
    constraints: Vec<ScoreConstraint>,
    /// Nodes without every topology key are not scored (explicit or List
    /// constraints); with System defaults they are.
    require_all_topologies: bool,
    /// Per node given to PreScore, in order: it lacks a topology key and
    /// gets 0 after normalisation.
    ignored: Vec<bool>,
}

impl PreScoreState {
    fn is_ignored(&self, info: &NodeInfo) -> bool {
        self.require_all_topologies
            && !has_all_keys(&info.node.labels, self.constraints.iter().map(|c| c.topology_key.as_str()))
    }
}

/// The score of a domain holding `count` matching pods.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    // maxSkew - 1 waters the differences down: a higher maxSkew tolerates
    // more imbalance.
    count as f64 * weight + f64::from(max_skew - 1)
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let snapshot = nodes.snapshot();
        if snapshot.nodes().is_empty() {
            return Status::skip();
        }
        let constraints = self.constraints_for(pod, UnsatisfiableAction::ScheduleAnyway, snapshot.workloads());
        if constraints.is_empty() {
            return Status::skip();
        }
        // System defaults also spread over nodes lacking a zone label.
        let require_all = !pod.topology_spread_constraints.is_empty() || !self.system_defaulted;
        let keys = || constraints.iter().map(|c| c.topology_key.as_str());

        // The candidates make the domains (and the ignored list).
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        let mut ignored = Vec::with_capacity(nodes.len());
        for info in nodes.iter() {
            let labels = &info.node.labels;
            let skip = require_all && !has_all_keys(labels, keys());
            ignored.push(skip);
            if skip {
                continue;
            }
            for (c, domains) in constraints.iter().zip(counts.iter_mut()) {
                if c.topology_key == LABEL_HOSTNAME {
                    continue;
                }
                // Without the key (System defaults) the node joins the "" domain, as in kube.
                let value = labels.get(&c.topology_key).map_or("", String::as_str);
                if !domains.contains_key(value) {
                    domains.insert(value.to_string(), 0);
                }
            }
        }
        let scored_nodes = ignored.iter().filter(|i| !**i).count();

        // Every node of the cluster that passes the policies adds its
        // matching pods to the candidates' domains.
        let needs = InclusionNeeds::of(&constraints);
        for info in snapshot.nodes() {
            let node = &info.node;
            if require_all && !has_all_keys(&node.labels, keys()) {
                continue;
            }
            let inclusion = needs.check(pod, node);
            for (c, domains) in constraints.iter().zip(counts.iter_mut()) {
                if c.topology_key == LABEL_HOSTNAME || !inclusion.admits(c) {
                    continue;
                }
                let value = node.labels.get(&c.topology_key).map_or("", String::as_str);
                if let Some(total) = domains.get_mut(value) {
                    *total += count_matching(&info.pods, &c.selector, &pod.namespace);
                }
            }
        }

        let constraints = constraints
            .into_iter()
            .zip(counts)
            .map(|(c, counts)| {
                let per_node = c.topology_key == LABEL_HOSTNAME;
                let size = if per_node { scored_nodes } else { counts.len() };
                ScoreConstraint {
                    weight: ((size + 2) as f64).ln(),
                    topology_key: c.topology_key,
                    max_skew: c.max_skew,
                    selector: c.selector,
                    per_node,
                    counts,
                }
            })
            .collect();
        state.write(PreScoreState { constraints, require_all_topologies: require_all, ignored });
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    /// The weighted count of matching pods in the node's domains (lower is
    /// better; NormalizeScore reverses it).
    fn score(&self, state: &CycleState, pod: &Pod, info: &NodeView<'_>) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>() else {
            return Err(Status::error(MISSING_STATE));
        };
        if s.is_ignored(info) {
            return Ok(0);
        }
        let labels = &info.node.labels;
        let mut score = 0.0;
        for c in &s.constraints {
            let Some(value) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.per_node {
                count_matching(&info.pods, &c.selector, &pod.namespace)
            } else {
                c.counts.get(value.as_str()).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, c.weight);
        }
        Ok(score.round() as i64)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// Maps the least-loaded node to 100 and others in proportion:
    /// `100 * (max + min - score) / max`; ignored nodes get 0. `scores`
    /// must be in the order of the nodes given to PreScore.
    fn normalize(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let Some(s) = state.read::<PreScoreState>() else {
            return Status::error(MISSING_STATE);
        };
        if s.ignored.len() != scores.len() {
            return Status::error(MISALIGNED_SCORES);
        }
        let (mut min, mut max) = (i64::MAX, 0);
        for (score, _) in scores.iter().zip(&s.ignored).filter(|(_, ignored)| !**ignored) {
            min = min.min(*score);
            max = max.max(*score);
        }
        for (score, ignored) in scores.iter_mut().zip(&s.ignored) {
            *score = if *ignored {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *score) / max
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use framework::cache::{NodeList, Snapshot};
    use framework::model::{InclusionPolicy, LABEL_HOSTNAME, Node, PodRef, TaintEffect, TopologySpreadConstraint};
    use framework::testing::{node, pod};
    use serde_json::json;

    use super::super::testutil::*;
    use super::*;

    /// A node with only the hostname label.
    fn h(name: &str) -> Node {
        node(name).build()
    }

    /// A node with `zone` and hostname labels.
    fn z(name: &str, zone: &str) -> Node {
        node(name).label("zone", zone).build()
    }

    fn n(name: &str) -> Node {
        node(name).label("node", name).build()
    }

    fn without_hostname(mut n: Node) -> Node {
        n.labels.remove(LABEL_HOSTNAME);
        n
    }

    fn foo_on(name: &str, node_name: &str) -> PodRef {
        pod(name).label("foo", "").node(node_name).arc()
    }

    /// `count` pods labelled foo on `node_name`.
    fn foos(node_name: &str, count: usize) -> Vec<PodRef> {
        (0..count).map(|i| foo_on(&format!("p-{node_name}-{i}"), node_name)).collect()
    }

    fn policies(
        mut c: TopologySpreadConstraint,
        affinity: InclusionPolicy,
        taints: InclusionPolicy,
    ) -> TopologySpreadConstraint {
        c.node_affinity_policy = affinity;
        c.node_taints_policy = taints;
        c
    }

    struct Case {
        name: &'static str,
        pod: Pod,
        /// Candidates (passed filtering), in scoring order.
        nodes: Vec<Node>,
        /// Nodes that failed filtering but still hold pods that count.
        failed: Vec<Node>,
        pods: Vec<PodRef>,
        want: Vec<i64>,
    }

    /// PreScore over the candidates, Score each, NormalizeScore.
    fn run(pl: &PodTopologySpread, case: Case) -> Vec<i64> {
        let names: Vec<String> = case.nodes.iter().map(|n| n.name.clone()).collect();
        let all: Vec<Node> = case.nodes.into_iter().chain(case.failed).collect();
        let snap = Snapshot::from_parts(all, case.pods);
        let positions: Vec<usize> = names.iter().map(|n| snap.position(n).unwrap()).collect();
        let candidates = NodeList::new(&snap, &positions);
        let mut state = CycleState::new();
        let status = pl.pre_score(&mut state, &case.pod, candidates);
        assert!(status.is_success(), "{}: prescore {status:?}", case.name);
        let mut scores: Vec<i64> = candidates.iter().map(|node| pl.score(&state, &case.pod, &node).unwrap()).collect();
        assert!(pl.has_normalize());
        assert!(pl.normalize(&state, &case.pod, &mut scores).is_success());
        scores
    }

    #[test]
    fn scores_follow_kube() {
        let foo = || exists("foo");
        let p = || pod("p").label("foo", "");
        let owned = |b: framework::testing::PodBuilder| {
            b.with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("foo", "")])))
        };
        let four = || vec![h("node-a"), h("node-b"), h("node-c"), h("node-d")];
        let four_zoned =
            || vec![z("node-a", "zone1"), z("node-b", "zone1"), z("node-x", "zone2"), z("node-y", "zone2")];
        let tainted = |name: &str| {
            node(name)
                .label("node", name)
                .taint("node.kubernetes.io/unschedulable", "", TaintEffect::NoSchedule)
                .build()
        };
        let labelled_foo = |name: &str| node(name).label("node", name).label("foo", "").build();
        let cases = vec![
            Case {
                name: "one constraint on node, no existing pods",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), h("node-b")],
                failed: vec![],
                pods: vec![],
                want: vec![100, 100],
            },
            Case {
                name: "one constraint on node, only one node is candidate",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a")],
                failed: vec![h("node-b")],
                pods: [foos("node-a", 2), foos("node-b", 1)].concat(),
                want: vec![100],
            },
            Case {
                name: "one constraint on node, same number of matching pods",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), h("node-b")],
                failed: vec![],
                pods: [foos("node-a", 1), foos("node-b", 1)].concat(),
                want: vec![100, 100],
            },
            Case {
                name: "one constraint on node, 2/1/0/3",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: four(),
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)].concat(),
                want: vec![20, 60, 100, 0],
            },
            Case {
                name: "one constraint on node, nil selector",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, LabelSelector::nothing())).build(),
                nodes: four(),
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)].concat(),
                want: vec![100, 100, 100, 100],
            },
            Case {
                name: "one constraint on node, 2/1/0/3, maxSkew 2",
                pod: spread(p(), soft(2, LABEL_HOSTNAME, foo())).build(),
                nodes: four(),
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)].concat(),
                want: vec![33, 66, 100, 16],
            },
            Case {
                name: "one constraint on node, 4/3/2/1, maxSkew 3",
                pod: spread(p(), soft(3, LABEL_HOSTNAME, foo())).build(),
                nodes: four(),
                failed: vec![],
                pods: [foos("node-a", 4), foos("node-b", 3), foos("node-c", 2), foos("node-d", 1)].concat(),
                want: vec![44, 66, 77, 100],
            },
            Case {
                // Same scores as one hostname constraint: no node has a zone,
                // yet none is ignored.
                name: "system defaulting, nodes without zone, pods of the owner",
                pod: owned(p()).build(),
                nodes: four(),
                failed: vec![],
                pods: [foos("node-a", 4), foos("node-b", 3), foos("node-c", 2), foos("node-d", 1)].concat(),
                want: vec![44, 66, 77, 100],
            },
            Case {
                name: "one constraint on node, 4/2/1/~3~",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), h("node-b"), h("node-x")],
                failed: vec![h("node-y")],
                pods: [foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)].concat(),
                want: vec![33, 83, 100],
            },
            Case {
                name: "one constraint on node, 4/?2?/1/~3~: node-b lacks the key",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), without_hostname(node("node-b").label("n", "node-b").build()), h("node-x")],
                failed: vec![h("node-y")],
                pods: [foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)].concat(),
                want: vec![16, 0, 100],
            },
            Case {
                name: "one constraint on zone, 4/2/1/~3~",
                pod: spread(p(), soft(1, "zone", foo())).build(),
                nodes: vec![z("node-a", "zone1"), z("node-b", "zone1"), z("node-x", "zone2")],
                failed: vec![z("node-y", "zone2")],
                pods: [foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)].concat(),
                want: vec![75, 75, 100],
            },
            Case {
                name: "two constraints on zone and node, 2/~1~/2/~4~",
                pod: spread(spread(p(), soft(1, "zone", foo())), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![z("node-a", "zone1"), z("node-x", "zone2")],
                failed: vec![z("node-b", "zone1"), z("node-y", "zone2")],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-x", 2), foos("node-y", 4)].concat(),
                want: vec![100, 63],
            },
            Case {
                name: "two constraints on zone with different selectors",
                pod: spread(spread(p().label("bar", ""), soft(1, "zone", foo())), soft(1, "zone", exists("bar")))
                    .build(),
                nodes: vec![without_hostname(z("node-a", "zone1")), without_hostname(z("node-x", "zone2"))],
                failed: vec![without_hostname(z("node-b", "zone1")), without_hostname(z("node-y", "zone2"))],
                pods: vec![
                    pod("p-a1").label("foo", "").label("bar", "").node("node-a").arc(),
                    foo_on("p-a2", "node-a"),
                    pod("p-b1").label("foo", "").label("bar", "").node("node-b").arc(),
                    foo_on("p-y1", "node-y"),
                    pod("p-y2").label("foo", "").label("bar", "").node("node-y").arc(),
                    foo_on("p-y3", "node-y"),
                ],
                want: vec![85, 100],
            },
            Case {
                name: "zone and node constraints with different selectors",
                pod: spread(
                    spread(p().label("bar", ""), soft(1, "zone", foo())),
                    soft(1, LABEL_HOSTNAME, exists("bar")),
                )
                .build(),
                nodes: four_zoned(),
                failed: vec![],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    pod("p-b1").label("foo", "").label("bar", "").node("node-b").arc(),
                    foo_on("p-y1", "node-y"),
                    pod("p-y2").label("bar", "").node("node-y").arc(),
                ],
                want: vec![60, 20, 100, 60],
            },
            Case {
                name: "zone and node constraints with different selectors, some nodes without pods",
                pod: spread(
                    spread(p().label("bar", ""), soft(1, "zone", foo())),
                    soft(1, LABEL_HOSTNAME, exists("bar")),
                )
                .build(),
                nodes: four_zoned(),
                failed: vec![],
                pods: vec![
                    pod("p-b1").label("bar", "").node("node-b").arc(),
                    foo_on("p-x1", "node-x"),
                    pod("p-y1").label("foo", "").label("bar", "").node("node-y").arc(),
                ],
                want: vec![100, 60, 40, 0],
            },
            Case {
                name: "zone and node constraints with different selectors, 3 of 4 candidates",
                pod: spread(
                    spread(p().label("bar", ""), soft(1, "zone", foo())),
                    soft(1, LABEL_HOSTNAME, exists("bar")),
                )
                .build(),
                nodes: vec![z("node-a", "zone1"), z("node-b", "zone1"), z("node-x", "zone2")],
                failed: vec![z("node-y", "zone2")],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    pod("p-b1").label("foo", "").label("bar", "").node("node-b").arc(),
                    foo_on("p-y1", "node-y"),
                    pod("p-y2").label("bar", "").node("node-y").arc(),
                ],
                want: vec![50, 25, 100],
            },
            Case {
                name: "existing pods in a different namespace do not count",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), h("node-b")],
                failed: vec![],
                pods: vec![
                    pod("p-a1").namespace("ns1").label("foo", "").node("node-a").arc(),
                    foo_on("p-a2", "node-a"),
                    foo_on("p-b1", "node-b"),
                    foo_on("p-b2", "node-b"),
                ],
                want: vec![100, 33],
            },
            Case {
                name: "terminating pods are not counted",
                pod: spread(p(), soft(1, LABEL_HOSTNAME, foo())).build(),
                nodes: vec![h("node-a"), h("node-b")],
                failed: vec![],
                pods: vec![
                    pod("p-a").label("foo", "").node("node-a").with(|p| p.terminating = true).arc(),
                    foo_on("p-b", "node-b"),
                ],
                want: vec![100, 0],
            },
            Case {
                name: "minDomains has no effect on ScheduleAnyway",
                pod: spread(p(), TopologySpreadConstraint { min_domains: Some(10), ..soft(2, "node", foo()) }).build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 2), foos("node-c", 1)].concat(),
                want: vec![75, 75, 100],
            },
            Case {
                name: "nodeAffinityPolicy Honor with nodeSelector",
                pod: spread(p().node_selector("foo", ""), soft(1, "node", foo())).build(),
                nodes: vec![labelled_foo("node-a"), labelled_foo("node-b"), n("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![0, 33, 100],
            },
            Case {
                name: "nodeAffinityPolicy Ignore with nodeSelector",
                pod: spread(
                    p().node_selector("foo", ""),
                    policies(soft(1, "node", foo()), InclusionPolicy::Ignore, InclusionPolicy::Ignore),
                )
                .build(),
                nodes: vec![labelled_foo("node-a"), labelled_foo("node-b"), n("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![66, 100, 100],
            },
            Case {
                name: "nodeAffinityPolicy Honor with required node affinity",
                pod: spread(affinity_in(p(), "foo", &[""]), soft(1, "node", foo())).build(),
                nodes: vec![labelled_foo("node-a"), labelled_foo("node-b"), n("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![0, 33, 100],
            },
            Case {
                name: "nodeAffinityPolicy Ignore with required node affinity",
                pod: spread(
                    affinity_in(p(), "foo", &[""]),
                    policies(soft(1, "node", foo()), InclusionPolicy::Ignore, InclusionPolicy::Ignore),
                )
                .build(),
                nodes: vec![labelled_foo("node-a"), labelled_foo("node-b"), n("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![66, 100, 100],
            },
            Case {
                name: "nodeTaintsPolicy Honor",
                pod: spread(p(), policies(soft(1, "node", foo()), InclusionPolicy::Honor, InclusionPolicy::Honor))
                    .build(),
                nodes: vec![n("node-a"), n("node-b"), tainted("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![0, 33, 100],
            },
            Case {
                name: "nodeTaintsPolicy Ignore",
                pod: spread(p(), soft(1, "node", foo())).build(),
                nodes: vec![n("node-a"), n("node-b"), tainted("node-c")],
                failed: vec![],
                pods: [foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)].concat(),
                want: vec![66, 100, 100],
            },
            Case {
                // The selectors as conversion builds them from an empty
                // labelSelector plus matchLabelKeys [foo] / [bar].
                name: "matchLabelKeys merged into empty selectors",
                pod: spread(
                    spread(p().label("bar", ""), soft(1, "zone", LabelSelector::from_match_labels([("foo", "")]))),
                    soft(1, LABEL_HOSTNAME, LabelSelector::from_match_labels([("bar", "")])),
                )
                .build(),
                nodes: vec![z("node-a", "zone1"), z("node-b", "zone1"), z("node-c", "zone2"), z("node-d", "zone2")],
                failed: vec![],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    pod("p-b1").label("foo", "").label("bar", "").node("node-b").arc(),
                    foo_on("p-y1", "node-c"),
                    pod("p-y2").label("bar", "").node("node-c").arc(),
                ],
                want: vec![60, 20, 60, 100],
            },
        ];
        let system = plugin(json!({"defaultingType": "System"}));
        for case in cases {
            let (name, want) = (case.name, case.want.clone());
            assert_eq!(run(&system, case), want, "{name}");
        }
    }

    #[test]
    fn list_defaults_require_every_key() {
        // With List defaults (unlike System) a node missing a default key is
        // ignored and scores 0.
        let pl = plugin(json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
        ]}));
        let p = pod("p")
            .label("app", "web")
            .with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")])))
            .build();
        let web = |name: &str, node_name: &str| pod(name).label("app", "web").node(node_name).arc();
        let case = Case {
            name: "list defaults",
            pod: p,
            nodes: vec![z("a", "z1"), z("b", "z2"), h("c")],
            failed: vec![],
            pods: vec![web("w1", "a"), web("w2", "a"), web("w3", "c")],
            want: vec![],
        };
        assert_eq!(run(&pl, case), vec![0, 100, 0]);
    }

    #[test]
    fn prescore_skips() {
        let snap = Snapshot::from_parts(vec![h("a")], vec![]);
        let system = plugin(json!({}));
        let owned = pod("p").with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")])));
        let cases: Vec<(&str, Pod, bool)> = vec![
            ("no constraints, no owner", pod("p").build(), true),
            (
                "owner but only soft defaults",
                pod("p").with(|p| p.owner_selector = Some(LabelSelector::nothing())).build(),
                false,
            ),
            ("hard only, defaults not applied", spread(owned, hard(1, "zone", exists("app"))).build(), true),
            ("own soft constraint", spread(pod("p"), soft(1, "zone", exists("app"))).build(), false),
        ];
        for (name, p, want_skip) in cases {
            let mut state = CycleState::new();
            assert_eq!(system.pre_score(&mut state, &p, snap.node_list()).is_skip(), want_skip, "{name}");
        }
        // An empty cluster needs no scoring.
        let mut state = CycleState::new();
        let p = spread(pod("p"), soft(1, "zone", exists("app"))).build();
        assert!(system.pre_score(&mut state, &p, Snapshot::new().node_list()).is_skip());
    }

    #[test]
    fn score_and_normalize_need_prescore_state() {
        let pl = list_plugin();
        let snap = Snapshot::from_parts(vec![h("a")], vec![]);
        let state = CycleState::new();
        let p = pod("p").build();
        assert!(pl.score(&state, &p, &snap.nodes()[0].view()).is_err());
        assert!(!pl.normalize(&state, &p, &mut [0]).is_success());
    }

    #[test]
    fn normalize_maps_raw_scores() {
        let state_with = |ignored: Vec<bool>| {
            let mut s = CycleState::new();
            s.write(PreScoreState { constraints: vec![], require_all_topologies: true, ignored });
            s
        };
        let pl = list_plugin();
        let p = pod("p").build();
        // (name, raw scores, ignored, wanted)
        type NormCase = (&'static str, Vec<i64>, Vec<bool>, Vec<i64>);
        let cases: Vec<NormCase> = vec![
            ("all zero", vec![0, 0], vec![false, false], vec![100, 100]),
            ("min and max", vec![2, 4, 6], vec![false, false, false], vec![100, 66, 33]),
            (
                "ignored nodes score 0 and stay out of min/max",
                vec![0, 3, 9],
                vec![true, false, false],
                vec![0, 100, 33],
            ),
            ("only ignored", vec![5], vec![true], vec![0]),
        ];
        for (name, mut scores, ignored, want) in cases {
            assert!(pl.normalize(&state_with(ignored), &p, &mut scores).is_success(), "{name}");
            assert_eq!(scores, want, "{name}");
        }
        let mut scores = vec![1, 2];
        assert_eq!(pl.normalize(&state_with(vec![false]), &p, &mut scores).code, framework::framework::Code::Error);
    }
}
