//! Required pod affinity and anti-affinity: PreFilter counts, Filter checks.

use framework::cache::Snapshot;
use framework::framework::Status;
use framework::model::{Labels, Pod};

use super::{NO_LABELS, TopologyCounts, matches_all_terms};

/// A placed pod's required anti-affinity term matches the incoming pod, in
/// the node's domain.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// The node's domain holds no pod matching all the pod's affinity terms.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// The node's domain holds a pod matching one of the pod's anti-affinity terms.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";

pub(super) const ERR_NO_PRE_FILTER_STATE: &str = "reading \"PreFilterInterPodAffinity\" from cycleState: not found";

/// What PreFilter learns of the cluster for one incoming pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PreFilterState {
    /// Per topology pair: terms of placed pods' required anti-affinity that
    /// match the incoming pod.
    existing_anti_affinity: TopologyCounts,
    /// Per topology pair: placed pods matching all the incoming pod's
    /// required affinity terms (one entry per term's key).
    affinity: TopologyCounts,
    /// Per topology pair: placed pods matching one of the incoming pod's
    /// required anti-affinity terms (one entry per matching term).
    anti_affinity: TopologyCounts,
    /// The incoming pod matches all its own affinity terms: it may start a
    /// group where no pod matches yet.
    matches_own_affinity: bool,
}

impl PreFilterState {
    /// None when the plugin has nothing to check for this pod (kube's Skip):
    /// no required terms of its own and no placed pod's anti-affinity
    /// against it.
    pub(super) fn compute(pod: &Pod, snapshot: &Snapshot) -> Option<PreFilterState> {
        let mut s = PreFilterState::default();

        // (a) Placed pods' required anti-affinity against the incoming pod.
        let own_ns_labels = snapshot.namespace_labels(&pod.namespace);
        let incoming_ns = Some(own_ns_labels.unwrap_or(&NO_LABELS));
        for info in snapshot.nodes_with_required_anti_affinity() {
            if !info.has_node {
                continue;
            }
            let node_labels = &info.node.labels;
            for existing in &info.pods_with_required_anti_affinity {
                for term in &existing.pod_anti_affinity.required {
                    if term.matches(pod, incoming_ns) {
                        s.existing_anti_affinity.add_on_node(node_labels, &term.topology_key, 1);
                    }
                }
            }
        }

        // (b), (c) The incoming pod's own required terms against every placed pod.
        let affinity_terms = &pod.pod_affinity.required;
        let anti_terms = &pod.pod_anti_affinity.required;
        if affinity_terms.is_empty() && anti_terms.is_empty() {
            if s.existing_anti_affinity.is_empty() {
                return None;
            }
            return Some(s);
        }
        for info in snapshot.nodes() {
            if !info.has_node {
                continue;
            }
            let node_labels = &info.node.labels;
            for existing in &info.pods {
                let ns_labels = snapshot.namespace_labels(&existing.namespace);
                if matches_all_terms(affinity_terms, existing, ns_labels) {
                    for term in affinity_terms {
                        s.affinity.add_on_node(node_labels, &term.topology_key, 1);
                    }
                }
                for term in anti_terms {
                    if term.matches(existing, ns_labels) {
                        s.anti_affinity.add_on_node(node_labels, &term.topology_key, 1);
                    }
                }
            }
        }
        s.matches_own_affinity = matches_all_terms(affinity_terms, pod, own_ns_labels);
        Some(s)
    }

    /// kube's order: the pod's affinity (unresolvable: preemption cannot add
    /// pods), its anti-affinity, then the placed pods' anti-affinity.
    pub(super) fn filter(&self, pod: &Pod, node_labels: &Labels) -> Status {
        if !self.satisfies_pod_affinity(pod, node_labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !self.satisfies_pod_anti_affinity(pod, node_labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if self.existing_anti_affinity.any_positive_on_node(node_labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }

    fn satisfies_pod_affinity(&self, pod: &Pod, node_labels: &Labels) -> bool {
        let mut pods_exist = true;
        for term in &pod.pod_affinity.required {
            // The node must carry every topology key, even for a first pod.
            let Some(value) = node_labels.get(&term.topology_key) else {
                return false;
            };
            if self.affinity.get(&term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group with affinity to itself: allowed when no
        // pod anywhere matches the terms and the pod matches them itself.
        pods_exist || (self.affinity.is_empty() && self.matches_own_affinity)
    }

    fn satisfies_pod_anti_affinity(&self, pod: &Pod, node_labels: &Labels) -> bool {
        if self.anti_affinity.is_empty() {
            return true;
        }
        !pod.pod_anti_affinity.required.iter().any(|term| {
            node_labels
                .get(&term.topology_key)
                .is_some_and(|value| self.anti_affinity.get(&term.topology_key, value) > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::InterPodAffinity;
    use super::super::test_support::*;
    use super::*;
    use framework::framework::{Code, CycleState, FilterPlugin, PreFilterPlugin};
    use framework::model::{AffinityTerm, LABEL_HOSTNAME, LabelSelector, Node, PodRef, SelectorOp};
    use framework::testing::{PodBuilder, node, pod};

    type Verdict = Option<(Code, &'static str)>;

    const AFF: Verdict = Some((Code::UnschedulableAndUnresolvable, ERR_REASON_AFFINITY_RULES_NOT_MATCH));
    const ANTI: Verdict = Some((Code::Unschedulable, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH));
    const EXISTING: Verdict = Some((Code::Unschedulable, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH));

    struct Case {
        name: &'static str,
        pod: Pod,
        nodes: Vec<Node>,
        pods: Vec<PodRef>,
        namespaces: &'static [(&'static str, &'static [(&'static str, &'static str)])],
        /// PreFilter returns Skip.
        skip: bool,
        /// Verdict per node name (None: fits).
        want: Vec<(&'static str, Verdict)>,
    }

    /// Runs PreFilter, then Filter on each node unless skipped.
    fn run(c: &Case) {
        let snap = snapshot(c.nodes.clone(), c.pods.clone(), c.namespaces);
        let pl = InterPodAffinity::default();
        let mut state = CycleState::new();
        let (result, status) = pl.pre_filter(&mut state, &c.pod, &snap);
        assert!(result.node_names.is_none(), "{}", c.name);
        assert_eq!(status.is_skip(), c.skip, "{}: prefilter {status:?}", c.name);
        assert!(status.is_skip() || status.is_success(), "{}: {status:?}", c.name);
        for (name, want) in &c.want {
            let info = snap.get(name).unwrap();
            let got = if status.is_skip() {
                None
            } else {
                let st = pl.filter(&state, &c.pod, &info.view());
                if st.is_success() {
                    None
                } else {
                    assert_eq!(st.reasons.len(), 1, "{}: {st:?}", c.name);
                    Some((st.code, st.reasons[0].to_string()))
                }
            };
            let want = want.map(|(code, r)| (code, r.to_string()));
            assert_eq!(got, want, "{}: node {name}", c.name);
        }
    }

    fn with_affinity(p: PodBuilder, terms: Vec<AffinityTerm>) -> PodBuilder {
        p.with(|p| p.pod_affinity.required = terms)
    }

    fn with_anti(p: PodBuilder, terms: Vec<AffinityTerm>) -> PodBuilder {
        p.with(|p| p.pod_anti_affinity.required = terms)
    }

    /// kube's single-node fixture: one node in region r1, zone z11.
    fn node1() -> Vec<Node> {
        vec![node("node1").label("region", "r1").label("zone", "z11").build()]
    }

    fn on_node1(labels: &[(&str, &str)]) -> PodRef {
        let mut b = pod("existing").node("node1");
        for (k, v) in labels {
            b = b.label(k, v);
        }
        b.arc()
    }

    fn single_node_cases() -> Vec<Case> {
        let svc = || pod("incoming").label("security", "S1");
        vec![
            Case {
                name: "no required terms and no existing pods: skipped",
                pod: svc().build(),
                nodes: node1(),
                pods: vec![],
                namespaces: &[],
                skip: true,
                want: vec![("node1", None)],
            },
            Case {
                name: "no required terms, existing pod without anti-affinity: skipped",
                pod: svc().build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: true,
                want: vec![("node1", None)],
            },
            Case {
                name: "affinity In matches the existing pod",
                pod: with_affinity(
                    svc(),
                    vec![term("region", exprs(vec![expr("service", SelectorOp::In, &["securityscan", "value2"])]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "affinity term in another namespace does not match",
                pod: with_affinity(
                    svc(),
                    vec![term_in(&["DiffNameSpace"], "region", labels(&[("service", "securityscan")]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "affinity selector does not match the existing pod",
                pod: with_affinity(
                    svc(),
                    vec![term("region", exprs(vec![expr("service", SelectorOp::In, &["antivirusscan", "value2"])]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "several terms with different operators all match",
                pod: with_affinity(
                    svc(),
                    vec![
                        term(
                            "region",
                            exprs(vec![
                                expr("service", SelectorOp::Exists, &[]),
                                expr("wrongkey", SelectorOp::DoesNotExist, &[]),
                            ]),
                        ),
                        term(
                            "region",
                            exprs(vec![
                                expr("service", SelectorOp::In, &["securityscan"]),
                                expr("service", SelectorOp::NotIn, &["WrongValue"]),
                            ]),
                        ),
                    ],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "match expressions are ANDed: one fails",
                pod: with_affinity(
                    svc(),
                    vec![term(
                        "region",
                        exprs(vec![
                            expr("service", SelectorOp::Exists, &[]),
                            expr("wrongkey", SelectorOp::DoesNotExist, &[]),
                            expr("service", SelectorOp::In, &["WrongValue"]),
                        ]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "affinity and anti-affinity both satisfied",
                pod: with_anti(
                    with_affinity(svc(), vec![term("region", labels(&[("service", "securityscan")]))]),
                    vec![term("zone", labels(&[("service", "antivirusscan")]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "affinity satisfied, anti-affinity violated in the same zone",
                pod: with_anti(
                    with_affinity(svc(), vec![term("region", labels(&[("service", "securityscan")]))]),
                    vec![term("zone", labels(&[("service", "securityscan")]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", ANTI)],
            },
            Case {
                name: "affinity checked before anti-affinity",
                pod: with_anti(
                    with_affinity(svc(), vec![term("region", labels(&[("service", "nothing")]))]),
                    vec![term("zone", labels(&[("service", "securityscan")]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "anti-affinity on a topology key the node lacks is satisfied",
                pod: with_anti(svc(), vec![term("rack", labels(&[("service", "securityscan")]))]).build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "symmetry: existing pod's anti-affinity matches the pod",
                pod: svc().build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| p.pod_anti_affinity.required = vec![term("zone", labels(&[("security", "S1")]))])
                        .arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("node1", EXISTING)],
            },
            Case {
                name: "symmetry: existing pod's anti-affinity (NotIn) does not match the pod",
                pod: svc().build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| {
                            p.pod_anti_affinity.required =
                                vec![term("zone", exprs(vec![expr("security", SelectorOp::NotIn, &["S1"])]))]
                        })
                        .arc(),
                ],
                namespaces: &[],
                skip: true,
                want: vec![("node1", None)],
            },
            Case {
                name: "symmetry: existing pod's anti-affinity on a key its node lacks is ignored",
                pod: svc().build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| p.pod_anti_affinity.required = vec![term("rack", labels(&[("security", "S1")]))])
                        .arc(),
                ],
                namespaces: &[],
                skip: true,
                want: vec![("node1", None)],
            },
            Case {
                name: "pod's own anti-affinity satisfied, existing pod's violated",
                pod: with_anti(svc(), vec![term("zone", labels(&[("service", "antivirusscan")]))]).build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .label("service", "securityscan")
                        .with(|p| p.pod_anti_affinity.required = vec![term("zone", labels(&[("security", "S1")]))])
                        .arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("node1", EXISTING)],
            },
            Case {
                name: "pod's own anti-affinity checked before existing pods'",
                pod: with_anti(svc(), vec![term("zone", labels(&[("service", "securityscan")]))]).build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .label("service", "securityscan")
                        .with(|p| p.pod_anti_affinity.required = vec![term("zone", labels(&[("security", "S1")]))])
                        .arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("node1", ANTI)],
            },
            Case {
                name: "pod matching none of its own terms is not a first pod",
                pod: with_affinity(
                    pod("incoming").label("service", "securityscan"),
                    vec![term("region", exprs(vec![expr("service", SelectorOp::NotIn, &["securityscan"])]))],
                )
                .build(),
                nodes: node1(),
                pods: vec![on_node1(&[("service", "securityscan")])],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "namespaceSelector matches the existing pod's namespace",
                pod: with_affinity(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        labels(&[("team", "team1")]),
                        "region",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("subteam").node("node1").label("service", "securityscan").arc()],
                namespaces: &[("subteam", &[("team", "team1")])],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "namespaceSelector does not match the existing pod's namespace",
                pod: with_affinity(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        labels(&[("team", "team1")]),
                        "region",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("subteam").node("node1").label("service", "securityscan").arc()],
                namespaces: &[("subteam", &[("team", "team2")])],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "namespaceSelector on an unknown namespace matches nothing",
                pod: with_affinity(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        exprs(vec![expr("team", SelectorOp::DoesNotExist, &[])]),
                        "region",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("unknown").node("node1").label("service", "securityscan").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("node1", AFF)],
            },
            Case {
                name: "empty namespaceSelector matches every namespace",
                pod: with_affinity(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        LabelSelector::everything(),
                        "region",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("anywhere").node("node1").label("service", "securityscan").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "namespaces and namespaceSelector are ORed",
                pod: with_affinity(
                    svc(),
                    vec![term_ns_selector(
                        &["subteam"],
                        labels(&[("team", "team1")]),
                        "region",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("subteam").node("node1").label("service", "securityscan").arc()],
                namespaces: &[("subteam", &[("team", "team2")])],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "anti-affinity with namespaceSelector matching the existing pod",
                pod: with_anti(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        labels(&[("team", "team1")]),
                        "zone",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("subteam").node("node1").label("service", "securityscan").arc()],
                namespaces: &[("subteam", &[("team", "team1")])],
                skip: false,
                want: vec![("node1", ANTI)],
            },
            Case {
                name: "anti-affinity with namespaceSelector not matching the existing pod",
                pod: with_anti(
                    svc(),
                    vec![term_ns_selector(
                        &[],
                        labels(&[("team", "team1")]),
                        "zone",
                        labels(&[("service", "securityscan")]),
                    )],
                )
                .build(),
                nodes: node1(),
                pods: vec![pod("existing").namespace("subteam").node("node1").label("service", "securityscan").arc()],
                namespaces: &[("subteam", &[("team", "team2")])],
                skip: false,
                want: vec![("node1", None)],
            },
            Case {
                name: "existing pod's anti-affinity selects the pod's namespace by labels",
                pod: svc().namespace("incoming-ns").build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| {
                            p.pod_anti_affinity.required = vec![term_ns_selector(
                                &[],
                                labels(&[("team", "team1")]),
                                "zone",
                                labels(&[("security", "S1")]),
                            )]
                        })
                        .arc(),
                ],
                namespaces: &[("incoming-ns", &[("team", "team1")])],
                skip: false,
                want: vec![("node1", EXISTING)],
            },
            Case {
                name: "existing pod's anti-affinity in another namespace does not match the pod",
                pod: svc().namespace("incoming-ns").build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| p.pod_anti_affinity.required = vec![term("zone", labels(&[("security", "S1")]))])
                        .arc(),
                ],
                namespaces: &[],
                skip: true,
                want: vec![("node1", None)],
            },
            Case {
                name: "unknown namespace of the pod has no labels for existing pods' selectors",
                pod: svc().namespace("unknown").build(),
                nodes: node1(),
                pods: vec![
                    pod("existing")
                        .node("node1")
                        .with(|p| {
                            p.pod_anti_affinity.required = vec![term_ns_selector(
                                &[],
                                exprs(vec![expr("team", SelectorOp::NotIn, &["team1"])]),
                                "zone",
                                labels(&[("security", "S1")]),
                            )]
                        })
                        .arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("node1", EXISTING)],
            },
        ]
    }

    #[test]
    fn required_affinity_single_node() {
        for c in single_node_cases() {
            run(&c);
        }
    }

    fn zone_nodes() -> Vec<Node> {
        vec![node("n1").zone("z1").build(), node("n2").zone("z1").build(), node("n3").zone("z2").build()]
    }

    fn multi_node_cases() -> Vec<Case> {
        let web = || pod("incoming").label("app", "web");
        let zone_web = || term("topology.kubernetes.io/zone", labels(&[("app", "web")]));
        vec![
            Case {
                name: "affinity admits every node of the matching pod's zone",
                pod: with_affinity(pod("incoming"), vec![zone_web()]).build(),
                nodes: zone_nodes(),
                pods: vec![pod("w").node("n1").label("app", "web").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", None), ("n2", None), ("n3", AFF)],
            },
            Case {
                name: "first pod of a group may go anywhere with the topology key",
                pod: with_affinity(web(), vec![zone_web()]).build(),
                nodes: {
                    let mut n = zone_nodes();
                    n.push(node("nozone").build());
                    n
                },
                pods: vec![pod("other").node("n1").label("app", "db").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", None), ("n2", None), ("n3", None), ("nozone", AFF)],
            },
            Case {
                name: "first-pod rule needs the pod to match its own terms",
                pod: with_affinity(pod("incoming").label("app", "db"), vec![zone_web()]).build(),
                nodes: zone_nodes(),
                pods: vec![],
                namespaces: &[],
                skip: false,
                want: vec![("n1", AFF), ("n2", AFF), ("n3", AFF)],
            },
            Case {
                name: "first-pod rule needs the pod to match all its terms",
                pod: with_affinity(web(), vec![zone_web(), term(LABEL_HOSTNAME, labels(&[("tier", "front")]))]).build(),
                nodes: zone_nodes(),
                pods: vec![],
                namespaces: &[],
                skip: false,
                want: vec![("n1", AFF), ("n2", AFF), ("n3", AFF)],
            },
            Case {
                name: "first-pod rule ends once a matching pod exists anywhere",
                pod: with_affinity(web(), vec![zone_web()]).build(),
                nodes: zone_nodes(),
                pods: vec![pod("w").node("n3").label("app", "web").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", AFF), ("n2", AFF), ("n3", None)],
            },
            Case {
                name: "a pod matching only some terms does not satisfy affinity",
                pod: with_affinity(
                    pod("incoming"),
                    vec![zone_web(), term(LABEL_HOSTNAME, labels(&[("tier", "front")]))],
                )
                .build(),
                nodes: zone_nodes(),
                pods: vec![
                    pod("w").node("n1").label("app", "web").arc(),
                    pod("f").node("n1").label("tier", "front").arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("n1", AFF), ("n2", AFF), ("n3", AFF)],
            },
            Case {
                name: "one pod matching all terms satisfies each in its own domain",
                pod: with_affinity(
                    pod("incoming"),
                    vec![zone_web(), term(LABEL_HOSTNAME, labels(&[("tier", "front")]))],
                )
                .build(),
                nodes: zone_nodes(),
                pods: vec![pod("wf").node("n1").label("app", "web").label("tier", "front").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", None), ("n2", AFF), ("n3", AFF)],
            },
            Case {
                name: "anti-affinity in the same zone",
                pod: with_anti(pod("incoming"), vec![zone_web()]).build(),
                nodes: zone_nodes(),
                pods: vec![pod("w").node("n1").label("app", "web").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", ANTI), ("n2", ANTI), ("n3", None)],
            },
            Case {
                name: "anti-affinity matches when any term matches",
                pod: with_anti(
                    pod("incoming"),
                    vec![
                        term(LABEL_HOSTNAME, labels(&[("app", "db")])),
                        term(LABEL_HOSTNAME, labels(&[("app", "web")])),
                    ],
                )
                .build(),
                nodes: zone_nodes(),
                pods: vec![pod("w").node("n1").label("app", "web").arc(), pod("d").node("n3").label("app", "db").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", ANTI), ("n2", None), ("n3", ANTI)],
            },
            Case {
                name: "existing pod's anti-affinity blocks its whole zone",
                pod: web().build(),
                nodes: zone_nodes(),
                pods: vec![pod("guard").node("n2").with(|p| p.pod_anti_affinity.required = vec![zone_web()]).arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", EXISTING), ("n2", EXISTING), ("n3", None)],
            },
            Case {
                name: "existing pods' anti-affinity per term: hostname and zone",
                pod: web().build(),
                nodes: {
                    let mut n = zone_nodes();
                    n.push(node("n4").zone("z2").build());
                    n
                },
                pods: vec![
                    pod("host-guard")
                        .node("n3")
                        .with(|p| p.pod_anti_affinity.required = vec![term(LABEL_HOSTNAME, labels(&[("app", "web")]))])
                        .arc(),
                    pod("zone-guard")
                        .node("n1")
                        .with(|p| {
                            p.pod_anti_affinity.required =
                                vec![term(LABEL_HOSTNAME, labels(&[("app", "db")])), zone_web()]
                        })
                        .arc(),
                ],
                namespaces: &[],
                skip: false,
                want: vec![("n1", EXISTING), ("n2", EXISTING), ("n3", EXISTING), ("n4", None)],
            },
            Case {
                name: "self anti-affinity spreads a group one per host",
                pod: with_anti(web(), vec![term(LABEL_HOSTNAME, labels(&[("app", "web")]))]).build(),
                nodes: zone_nodes(),
                pods: vec![pod("w").node("n2").label("app", "web").arc()],
                namespaces: &[],
                skip: false,
                want: vec![("n1", None), ("n2", ANTI), ("n3", None)],
            },
        ]
    }

    #[test]
    fn required_affinity_multiple_nodes() {
        for c in multi_node_cases() {
            run(&c);
        }
    }

    #[test]
    fn filter_without_pre_filter_state_is_an_error() {
        let pl = InterPodAffinity::default();
        let snap = snapshot(node1(), vec![], &[]);
        let st = pl.filter(&CycleState::new(), &pod("p").build(), &snap.get("node1").unwrap().view());
        assert_eq!(st.code, Code::Error);
    }

    #[test]
    fn filter_success_does_not_allocate_reasons() {
        // A passing node returns the allocation-free success status.
        let c = &multi_node_cases()[0];
        let snap = snapshot(c.nodes.clone(), c.pods.clone(), c.namespaces);
        let pl = InterPodAffinity::default();
        let mut state = CycleState::new();
        pl.pre_filter(&mut state, &c.pod, &snap);
        let st = pl.filter(&state, &c.pod, &snap.get("n1").unwrap().view());
        assert!(st.is_success() && st.reasons.capacity() == 0);
    }
}
