//! PreFilter and Filter: the `DoNotSchedule` constraints.

use std::collections::HashMap;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, Status};
use framework::model::{LABEL_HOSTNAME, Pod, UnsatisfiableAction};

use super::{
    ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, InclusionNeeds, PodTopologySpread,
    count_matching, has_all_keys,
};

const MISSING_STATE: &str = "reading \"PreFilterPodTopologySpread\" from cycleState: not found";

/// What Filter needs per constraint, computed once per cycle.
#[derive(Debug)]
struct FilterConstraint {
    topology_key: String,
    max_skew: i64,
    /// 1 when the incoming pod matches the constraint's own selector.
    self_match: i64,
    /// The global minimum used for the skew: the least count over the
    /// eligible domains, or 0 while there are fewer than minDomains of them.
    min_match: i64,
    /// Matching pods per eligible domain (topology value). Looked up with
    /// the node's label value as `&str`, so Filter does not allocate.
    counts: HashMap<String, i64>,
}

/// The PreFilter result, read by Filter.
#[derive(Debug)]
pub(super) struct PreFilterState {
    constraints: Vec<FilterConstraint>,
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let constraints = self.constraints_for(pod, UnsatisfiableAction::DoNotSchedule, snapshot.workloads());
        if constraints.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        let nodes = snapshot.nodes();
        let mut counts: Vec<HashMap<String, i64>> = constraints
            .iter()
            .map(|c| HashMap::with_capacity(if c.topology_key == LABEL_HOSTNAME { nodes.len() } else { 0 }))
            .collect();

        let needs = InclusionNeeds::of(&constraints);
        // One pass over the nodes: every eligible node makes its domain
        // exist (possibly with 0 pods) and adds its matching pods.
        for info in nodes {
            let node = &info.node;
            if !has_all_keys(&node.labels, constraints.iter().map(|c| c.topology_key.as_str())) {
                continue;
            }
            let inclusion = needs.check(pod, node);
            for (c, domains) in constraints.iter().zip(counts.iter_mut()) {
                if !inclusion.admits(c) {
                    continue;
                }
                let Some(value) = node.labels.get(&c.topology_key) else {
                    continue;
                };
                let n = count_matching(&info.pods, &c.selector, &pod.namespace);
                match domains.get_mut(value.as_str()) {
                    Some(total) => *total += n,
                    None => {
                        domains.insert(value.clone(), n);
                    }
                }
            }
        }

        let constraints = constraints
            .into_iter()
            .zip(counts)
            .map(|(c, counts)| {
                let min_domains = c.min_domains.unwrap_or(1);
                // kube starts its critical paths at MaxInt32: with no domain
                // and minDomains <= 0 every node passes.
                let least = counts.values().copied().min().unwrap_or(i64::from(i32::MAX));
                let min_match = if (counts.len() as i64) < i64::from(min_domains) { 0 } else { least };
                FilterConstraint {
                    self_match: i64::from(c.selector.matches(&pod.labels)),
                    topology_key: c.topology_key,
                    max_skew: i64::from(c.max_skew),
                    min_match,
                    counts,
                }
            })
            .collect();
        state.write(PreFilterState { constraints });
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error(MISSING_STATE);
        };
        let labels = &node.node.labels;
        for c in &s.constraints {
            let Some(value) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let matched = c.counts.get(value.as_str()).copied().unwrap_or(0);
            if matched + c.self_match - c.min_match > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use framework::framework::Code;
    use framework::model::{LabelSelector, Node, PodRef, SelectorOp, TaintEffect, TolerationOp};
    use framework::testing::{node, pod};

    use super::super::testutil::*;
    use super::super::{InclusionPolicy, PodTopologySpread};
    use super::*;

    use Code::{Success as OK, Unschedulable as NO, UnschedulableAndUnresolvable as NEVER};

    /// Nodes labelled `zone` and `node` (and hostname), as kube's tests.
    fn zn(name: &str, zone: &str) -> Node {
        node(name).label("zone", zone).label("node", name).build()
    }

    fn n(name: &str) -> Node {
        node(name).label("node", name).build()
    }

    fn foo_on(name: &str, node_name: &str) -> PodRef {
        pod(name).label("foo", "").node(node_name).arc()
    }

    fn four_nodes() -> Vec<Node> {
        vec![zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
    }

    /// 2/1/0/3 matching pods on node-a/b/x/y.
    fn spread_2_1_0_3() -> Vec<PodRef> {
        vec![
            foo_on("p-a1", "node-a"),
            foo_on("p-a2", "node-a"),
            foo_on("p-b1", "node-b"),
            foo_on("p-y1", "node-y"),
            foo_on("p-y2", "node-y"),
            foo_on("p-y3", "node-y"),
        ]
    }

    fn with_min_domains(
        mut c: framework::model::TopologySpreadConstraint,
        m: i32,
    ) -> framework::model::TopologySpreadConstraint {
        c.min_domains = Some(m);
        c
    }

    fn with_policies(
        mut c: framework::model::TopologySpreadConstraint,
        affinity: InclusionPolicy,
        taints: InclusionPolicy,
    ) -> framework::model::TopologySpreadConstraint {
        c.node_affinity_policy = affinity;
        c.node_taints_policy = taints;
        c
    }

    /// Runs PreFilter then Filter on every node; returns the codes in node order.
    fn run(pl: &PodTopologySpread, pod: &Pod, nodes: Vec<Node>, pods: Vec<PodRef>) -> Vec<(String, Code)> {
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let snap = Snapshot::from_parts(nodes, pods);
        let mut state = CycleState::new();
        let (res, status) = pl.pre_filter(&mut state, pod, &snap);
        assert!(res.node_names.is_none());
        assert!(status.is_success(), "prefilter: {status:?}");
        names
            .into_iter()
            .map(|name| {
                let code = pl.filter(&state, pod, &snap.get(&name).unwrap().view()).code;
                (name, code)
            })
            .collect()
    }

    struct Case {
        name: &'static str,
        pod: Pod,
        nodes: Vec<Node>,
        pods: Vec<PodRef>,
        want: Vec<Code>,
    }

    #[test]
    fn single_and_multiple_constraints() {
        let foo = || exists("foo");
        let p = || pod("p").label("foo", "");
        let tainted = |name: &str| {
            node(name)
                .label("node", name)
                .taint("node.kubernetes.io/unschedulable", "", TaintEffect::NoSchedule)
                .build()
        };
        let cases = vec![
            Case {
                name: "no existing pods",
                pod: spread(p(), hard(1, "zone", foo())).build(),
                nodes: four_nodes(),
                pods: vec![],
                want: vec![OK, OK, OK, OK],
            },
            Case {
                name: "no existing pods, incoming pod doesn't match itself",
                pod: spread(p(), hard(1, "zone", exists("bar"))).build(),
                nodes: four_nodes(),
                pods: vec![],
                want: vec![OK, OK, OK, OK],
            },
            Case {
                name: "existing pods in a different namespace do not count",
                pod: spread(p(), hard(1, "zone", foo())).build(),
                nodes: four_nodes(),
                pods: vec![
                    pod("p-a1").namespace("ns1").node("node-a").label("foo", "").arc(),
                    pod("p-b1").namespace("ns2").node("node-a").label("foo", "").arc(),
                    foo_on("p-x1", "node-x"),
                    foo_on("p-y1", "node-y"),
                ],
                want: vec![OK, OK, NO, NO],
            },
            Case {
                name: "existing pods do not match a nil selector",
                pod: spread(p(), hard(1, "zone", LabelSelector::nothing())).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-x1", "node-x"), foo_on("p-y1", "node-y")],
                want: vec![OK, OK, OK, OK],
            },
            Case {
                // kube counts nothing for an empty selector, though the
                // incoming pod matches it itself.
                name: "an empty selector counts no pod",
                pod: spread(p(), hard(1, "zone", LabelSelector::everything())).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-x1", "node-x"), foo_on("p-y1", "node-y"), foo_on("p-y2", "node-y")],
                want: vec![OK, OK, OK, OK],
            },
            Case {
                name: "pods spread across zones as 3/3, all nodes fit",
                pod: spread(p(), hard(1, "zone", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![OK, OK, OK, OK],
            },
            Case {
                name: "zones as 1/2 because node-b lacks the zone label",
                pod: spread(p(), hard(1, "zone", foo())).build(),
                nodes: vec![
                    zn("node-a", "zone1"),
                    node("node-b").label("zon", "zone1").label("node", "node-b").build(),
                    zn("node-x", "zone2"),
                    zn("node-y", "zone2"),
                ],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    foo_on("p-b1", "node-b"),
                    foo_on("p-x1", "node-x"),
                    foo_on("p-y1", "node-y"),
                ],
                want: vec![OK, NEVER, NO, NO],
            },
            Case {
                name: "no node has the label 'rack'",
                pod: spread(p(), hard(1, "rack", foo())).build(),
                nodes: vec![zn("node-a", "zone1"), zn("node-x", "zone2")],
                pods: vec![],
                want: vec![NEVER, NEVER],
            },
            Case {
                name: "nodes as 2/1/0/3, only node-x fits",
                pod: spread(p(), hard(1, "node", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "nodes as 2/1/0/3, maxSkew 2: node-b and node-x fit",
                pod: spread(p(), hard(2, "node", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![NO, OK, OK, NO],
            },
            Case {
                name: "nodes as 2/1/0/3, the pod doesn't match itself",
                pod: spread(pod("p").label("bar", ""), hard(1, "node", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![NO, OK, OK, NO],
            },
            Case {
                // Only node-a and node-y count (2/~1~/~0~/3); node-b and
                // node-x are left to NodeAffinity.
                name: "required node affinity limits the domains: node-a fits",
                pod: spread(affinity_in(p(), "node", &["node-a", "node-y"]), hard(1, "node", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![OK, OK, OK, NO],
            },
            Case {
                name: "terminating pods are not counted",
                pod: spread(p(), hard(1, "node", foo())).build(),
                nodes: vec![n("node-a"), n("node-b")],
                pods: vec![
                    pod("p-a").node("node-a").label("foo", "").with(|p| p.terminating = true).arc(),
                    foo_on("p-b", "node-b"),
                ],
                want: vec![OK, NO],
            },
            Case {
                // node-b does not count: zones as 0/~2~/0/1, global min 0;
                // node-b itself is left to NodeAffinity.
                name: "required node affinity NotIn: zones as 0/~2~/0/1",
                pod: spread(affinity(p(), "node", SelectorOp::NotIn, &["node-b"]), hard(1, "zone", foo())).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-b1", "node-b"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![OK, OK, NO, NO],
            },
            Case {
                name: "nodeSelector limits the domains to zone2",
                pod: spread(p().node_selector("zone", "zone2"), hard(1, "zone", foo())).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-b1", "node-b"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                // zone2 is the only domain (min 1); zone1's pods are not counted.
                want: vec![OK, OK, OK, OK],
            },
            Case {
                name: "nodes as 2/2/1 maxSkew 2, fewer domains than minDomains: only node-c fits",
                pod: spread(p(), with_min_domains(hard(2, "node", foo()), 4)).build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-c")],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    foo_on("p-a2", "node-a"),
                    foo_on("p-b1", "node-b"),
                    foo_on("p-b2", "node-b"),
                    foo_on("p-c1", "node-c"),
                ],
                want: vec![NO, NO, OK],
            },
            Case {
                name: "nodes as 2/2/1 maxSkew 2, more domains than minDomains: all fit",
                pod: spread(p(), with_min_domains(hard(2, "node", foo()), 2)).build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-c")],
                pods: vec![
                    foo_on("p-a1", "node-a"),
                    foo_on("p-a2", "node-a"),
                    foo_on("p-b1", "node-b"),
                    foo_on("p-b2", "node-b"),
                    foo_on("p-c1", "node-c"),
                ],
                want: vec![OK, OK, OK],
            },
            Case {
                name: "zones as 2/1 maxSkew 2, fewer domains than minDomains: zone2 fits",
                pod: spread(p(), with_min_domains(hard(2, "zone", foo()), 3)).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, OK],
            },
            Case {
                name: "zones as 2/1 maxSkew 2, enough domains: all fit",
                pod: spread(p(), with_min_domains(hard(2, "zone", foo()), 1)).build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![OK, OK, OK, OK],
            },
            Case {
                // 1/1/0/~1~: node-y does not match the nodeSelector.
                name: "nodeAffinityPolicy Honor with nodeSelector",
                pod: spread(p().node_selector("foo", ""), hard(1, "node", foo())).build(),
                nodes: vec![
                    node("node-a").label("node", "node-a").label("foo", "").build(),
                    node("node-b").label("node", "node-b").label("foo", "").build(),
                    node("node-x").label("node", "node-x").label("foo", "").build(),
                    n("node-y"),
                ],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, OK],
            },
            Case {
                name: "nodeAffinityPolicy Ignore with nodeSelector",
                pod: spread(
                    p().node_selector("foo", ""),
                    with_policies(hard(1, "node", foo()), InclusionPolicy::Ignore, InclusionPolicy::Ignore),
                )
                .build(),
                nodes: vec![
                    node("node-a").label("node", "node-a").label("foo", "").build(),
                    node("node-b").label("node", "node-b").label("foo", "").build(),
                    node("node-x").label("node", "node-x").label("foo", "").build(),
                    n("node-y"),
                ],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "nodeAffinityPolicy Honor with required node affinity",
                pod: spread(affinity_in(p(), "foo", &[""]), hard(1, "node", foo())).build(),
                nodes: vec![
                    node("node-a").label("node", "node-a").label("foo", "").build(),
                    node("node-b").label("node", "node-b").label("foo", "").build(),
                    node("node-x").label("node", "node-x").label("foo", "").build(),
                    n("node-y"),
                ],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, OK],
            },
            Case {
                name: "nodeAffinityPolicy Ignore with required node affinity",
                pod: spread(
                    affinity_in(p(), "foo", &[""]),
                    with_policies(hard(1, "node", foo()), InclusionPolicy::Ignore, InclusionPolicy::Ignore),
                )
                .build(),
                nodes: vec![
                    node("node-a").label("node", "node-a").label("foo", "").build(),
                    node("node-b").label("node", "node-b").label("foo", "").build(),
                    node("node-x").label("node", "node-x").label("foo", "").build(),
                    n("node-y"),
                ],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "nodeTaintsPolicy Honor: the tainted node is no domain",
                pod: spread(p(), with_policies(hard(1, "node", foo()), InclusionPolicy::Honor, InclusionPolicy::Honor))
                    .build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-x"), tainted("node-y")],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, OK],
            },
            Case {
                name: "nodeTaintsPolicy Honor with a toleration: the node counts",
                pod: spread(
                    p().toleration("node.kubernetes.io/unschedulable", TolerationOp::Exists, "", None),
                    with_policies(hard(1, "node", foo()), InclusionPolicy::Honor, InclusionPolicy::Honor),
                )
                .build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-x"), tainted("node-y")],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "nodeTaintsPolicy Ignore (default): the tainted node counts",
                pod: spread(p(), hard(1, "node", foo())).build(),
                nodes: vec![n("node-a"), n("node-b"), n("node-x"), tainted("node-y")],
                pods: vec![foo_on("p-b1", "node-a"), foo_on("p-b2", "node-b"), foo_on("p-y1", "node-y")],
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "PreferNoSchedule taints never exclude a node",
                pod: spread(p(), with_policies(hard(1, "node", foo()), InclusionPolicy::Honor, InclusionPolicy::Honor))
                    .build(),
                nodes: vec![
                    n("node-a"),
                    node("node-b").label("node", "node-b").taint("k", "v", TaintEffect::PreferNoSchedule).build(),
                ],
                pods: vec![foo_on("p-a1", "node-a")],
                want: vec![NO, OK],
            },
            Case {
                // Conversion merges matchLabelKeys (here pod-template-hash)
                // into the selector: pods of the old revision do not count.
                name: "matchLabelKeys: the merged selector ignores other revisions",
                pod: spread(
                    p().label("hash", "v2"),
                    hard(
                        1,
                        "node",
                        LabelSelector {
                            requirements: [
                                exists("foo").requirements,
                                LabelSelector::from_match_labels([("hash", "v2")]).requirements,
                            ]
                            .concat(),
                            matches_nothing: false,
                        },
                    ),
                )
                .build(),
                nodes: vec![n("node-a"), n("node-b")],
                pods: vec![
                    pod("old-1").label("foo", "").label("hash", "v1").node("node-a").arc(),
                    pod("old-2").label("foo", "").label("hash", "v1").node("node-a").arc(),
                    pod("new-1").label("foo", "").label("hash", "v2").node("node-b").arc(),
                ],
                want: vec![OK, NO],
            },
            Case {
                name: "two constraints on zone and node, spreads [3/3, 2/1/0/3]",
                pod: spread(spread(p(), hard(1, "zone", foo())), hard(1, "node", foo())).build(),
                nodes: four_nodes(),
                pods: spread_2_1_0_3(),
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "two constraints on zone and node, spreads [3/4, 2/1/0/4]: nothing fits",
                pod: spread(spread(p(), hard(1, "zone", foo())), hard(1, "node", foo())).build(),
                nodes: four_nodes(),
                pods: [spread_2_1_0_3(), vec![foo_on("p-y4", "node-y")]].concat(),
                want: vec![NO, NO, NO, NO],
            },
            Case {
                name: "constraints with different selectors, spreads [1/0, 1/0/0/1]",
                pod: spread(spread(p().label("bar", ""), hard(1, "zone", foo())), hard(1, "node", exists("bar")))
                    .build(),
                nodes: four_nodes(),
                pods: vec![foo_on("p-a1", "node-a"), pod("p-y1").label("bar", "").node("node-y").arc()],
                want: vec![NO, NO, OK, NO],
            },
            Case {
                name: "a node lacking the second key is unresolvable before any skew",
                pod: spread(spread(p(), hard(1, "zone", foo())), hard(1, "node", foo())).build(),
                nodes: vec![zn("node-a", "zone1"), node("node-b").label("zone", "zone2").build()],
                pods: vec![],
                want: vec![OK, NEVER],
            },
        ];
        for case in cases {
            let got = run(&list_plugin(), &case.pod, case.nodes, case.pods);
            let got: Vec<Code> = got.into_iter().map(|(_, c)| c).collect();
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn reasons_are_kube_wording() {
        let pl = list_plugin();
        let p = spread(pod("p").label("foo", ""), hard(1, "zone", exists("foo"))).build();
        let snap = Snapshot::from_parts(vec![zn("a", "z1"), zn("b", "z2"), n("c")], vec![foo_on("p1", "a")]);
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
        let a = pl.filter(&state, &p, &snap.get("a").unwrap().view());
        assert_eq!(a, Status::unschedulable("node(s) didn't match pod topology spread constraints"));
        let c = pl.filter(&state, &p, &snap.get("c").unwrap().view());
        assert_eq!(
            c,
            Status::unresolvable("node(s) didn't match pod topology spread constraints (missing required label)")
        );
        assert!(pl.filter(&state, &p, &snap.get("b").unwrap().view()).is_success());
        // Filter without PreFilter is an internal error, not a rejection.
        assert_eq!(pl.filter(&CycleState::new(), &p, &snap.get("b").unwrap().view()).code, Code::Error);
    }

    #[test]
    fn prefilter_skips_pods_without_hard_constraints() {
        let snap = Snapshot::from_parts(vec![zn("a", "z1")], vec![]);
        let owned = |b: framework::testing::PodBuilder| {
            b.with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")])))
        };
        let list_hard = super::super::testutil::plugin(serde_json::json!({
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        }));
        let system = super::super::testutil::plugin(serde_json::json!({}));
        let cases: Vec<(&str, &PodTopologySpread, Pod, bool)> = vec![
            ("no constraints", &system, pod("p").build(), true),
            ("soft only", &system, spread(pod("p"), soft(1, "zone", exists("foo"))).build(), true),
            ("system defaults are soft", &system, owned(pod("p").label("app", "web")).build(), true),
            ("hard list default, owned pod", &list_hard, owned(pod("p").label("app", "web")).build(), false),
            ("hard list default, pod without owner", &list_hard, pod("p").label("app", "web").build(), true),
            (
                "own soft constraint hides the hard default",
                &list_hard,
                spread(owned(pod("p").label("app", "web")), soft(1, "zone", exists("app"))).build(),
                true,
            ),
            ("own hard constraint", &system, spread(pod("p"), hard(1, "zone", exists("foo"))).build(), false),
        ];
        for (name, pl, p, want_skip) in cases {
            let mut state = CycleState::new();
            let (_, status) = pl.pre_filter(&mut state, &p, &snap);
            assert_eq!(status.is_skip(), want_skip, "{name}: {status:?}");
            assert_eq!(state.read::<PreFilterState>().is_some(), !want_skip, "{name}");
        }
    }

    #[test]
    fn default_hard_constraint_uses_owner_selector() {
        let pl = super::super::testutil::plugin(serde_json::json!({
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        }));
        let web = |name: &str, node_name: &str| pod(name).label("app", "web").node(node_name).arc();
        let p = pod("p")
            .label("app", "web")
            .with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")])))
            .build();
        let got = run(&pl, &p, four_nodes(), vec![web("w1", "node-a"), web("w2", "node-b"), foo_on("f", "node-x")]);
        let codes: Vec<Code> = got.into_iter().map(|(_, c)| c).collect();
        assert_eq!(codes, vec![NO, NO, OK, OK]);
    }

    #[test]
    fn state_counts_domains_over_eligible_nodes() {
        // Domains exist for eligible nodes even with no matching pod; the
        // global minimum is taken over them.
        let pl = list_plugin();
        let p = spread(pod("p").label("foo", "").node_selector("pool", "x"), hard(1, "zone", exists("foo"))).build();
        let nodes = vec![
            node("a").label("zone", "z1").label("pool", "x").build(),
            node("b").label("zone", "z2").label("pool", "x").build(),
            node("c").label("zone", "z3").build(),
        ];
        let snap = Snapshot::from_parts(nodes, vec![foo_on("p1", "a"), foo_on("p2", "c")]);
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
        let s = state.read::<PreFilterState>().unwrap();
        let c = &s.constraints[0];
        let mut domains: Vec<(&str, i64)> = c.counts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        domains.sort();
        assert_eq!(domains, vec![("z1", 1), ("z2", 0)]);
        assert_eq!((c.min_match, c.self_match, c.max_skew), (0, 1, 1));
    }
}
