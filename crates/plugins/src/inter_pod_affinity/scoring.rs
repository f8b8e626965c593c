//! Preferred pod affinity and anti-affinity (and placed pods' terms toward
//! the incoming pod): PreScore sums weights per topology pair, Score adds
//! up the pairs a node lies in, NormalizeScore maps min..max onto 0..100.

use framework::cache::{NodeInfo, Snapshot};
use framework::framework::MAX_NODE_SCORE;
use framework::model::{Labels, Pod, PodRef, WeightedAffinityTerm};

use super::{InterPodAffinityArgs, NO_LABELS, TopologyCounts};

pub(super) const ERR_NO_PRE_SCORE_STATE: &str = "reading \"PreScoreInterPodAffinity\" from cycleState: not found";

/// Summed term weights per topology pair, for one incoming pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PreScoreState {
    scores: TopologyCounts,
}

impl PreScoreState {
    /// None when there is nothing to score (kube's Skip): the pod has no
    /// preferred terms and existing pods' terms are to be ignored, or no
    /// term of either side matched on a node carrying its topology key.
    pub(super) fn compute(args: &InterPodAffinityArgs, pod: &Pod, snapshot: &Snapshot) -> Option<PreScoreState> {
        let has_preferred = !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty();
        if args.ignore_preferred_terms_of_existing_pods && !has_preferred {
            return None;
        }
        let mut scorer = Scorer {
            args,
            pod,
            pod_ns_labels: snapshot.namespace_labels(&pod.namespace).unwrap_or(&NO_LABELS),
            snapshot,
            scores: TopologyCounts::default(),
        };
        if has_preferred {
            // The pod's own terms may match any pod in the cluster.
            for info in snapshot.nodes() {
                scorer.visit(info, &info.pods);
            }
        } else {
            // Only placed pods' terms can contribute.
            for info in snapshot.nodes_with_affinity() {
                scorer.visit(info, &info.pods_with_affinity);
            }
        }
        if scorer.scores.is_empty() {
            return None;
        }
        Some(PreScoreState { scores: scorer.scores })
    }

    /// The node's raw score: the weights of every domain it lies in
    /// (positive for affinity, negative for anti-affinity).
    pub(super) fn score(&self, node_labels: &Labels) -> i64 {
        self.scores.sum_on_node(node_labels)
    }

    /// kube's NormalizeScore: `100 * (s - min) / (max - min)`, truncated;
    /// all 0 when every node scored the same.
    pub(super) fn normalize(&self, scores: &mut [i64]) {
        if self.scores.is_empty() {
            return;
        }
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return;
        };
        let diff = max.saturating_sub(min);
        for s in scores.iter_mut() {
            *s = if diff > 0 { (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64 } else { 0 };
        }
    }
}

/// Accumulates the weights of one PreScore pass.
struct Scorer<'a> {
    args: &'a InterPodAffinityArgs,
    pod: &'a Pod,
    pod_ns_labels: &'a Labels,
    snapshot: &'a Snapshot,
    scores: TopologyCounts,
}

impl Scorer<'_> {
    fn visit(&mut self, info: &NodeInfo, pods: &[PodRef]) {
        let node_labels = &info.node.labels;
        // A node without labels is in no topology domain.
        if !info.has_node || node_labels.is_empty() {
            return;
        }
        for existing in pods {
            self.process_existing_pod(existing, node_labels);
        }
    }

    fn process_existing_pod(&mut self, existing: &Pod, node_labels: &Labels) {
        let pod = self.pod;
        // The incoming pod's preferred terms, matched against the placed pod.
        if !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty() {
            let existing_ns = self.snapshot.namespace_labels(&existing.namespace);
            self.add_matching(&pod.pod_affinity.preferred, existing, existing_ns, node_labels, 1);
            self.add_matching(&pod.pod_anti_affinity.preferred, existing, existing_ns, node_labels, -1);
        }

        // The placed pod's terms, matched against the incoming pod.
        let incoming_ns = Some(self.pod_ns_labels);
        let hard_weight = self.args.hard_pod_affinity_weight;
        if hard_weight > 0 {
            for term in &existing.pod_affinity.required {
                if term.matches(pod, incoming_ns) {
                    self.scores.add_on_node(node_labels, &term.topology_key, i64::from(hard_weight));
                }
            }
        }
        self.add_matching(&existing.pod_affinity.preferred, pod, incoming_ns, node_labels, 1);
        self.add_matching(&existing.pod_anti_affinity.preferred, pod, incoming_ns, node_labels, -1);
    }

    /// Adds `sign * weight` of each term that `target` matches, in the
    /// domain of the node the term's owner (or the matched pod) is on.
    fn add_matching(
        &mut self,
        terms: &[WeightedAffinityTerm],
        target: &Pod,
        target_ns_labels: Option<&Labels>,
        node_labels: &Labels,
        sign: i64,
    ) {
        for wt in terms {
            if wt.term.matches(target, target_ns_labels) {
                self.scores.add_on_node(node_labels, &wt.term.topology_key, sign * i64::from(wt.weight));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{InterPodAffinity, InterPodAffinityArgs};
    use super::*;
    use framework::cache::NodeList;
    use framework::framework::{Code, CycleState, PreScorePlugin, ScorePlugin};
    use framework::model::{LABEL_HOSTNAME, Node};
    use framework::testing::{PodBuilder, node, pod};

    struct Case {
        name: &'static str,
        pod: Pod,
        nodes: Vec<Node>,
        pods: Vec<PodRef>,
        namespaces: &'static [(&'static str, &'static [(&'static str, &'static str)])],
        args: InterPodAffinityArgs,
        /// PreScore returns Skip (every node then scores 0).
        skip: bool,
        /// Normalized score per node, in this order.
        want: Vec<(&'static str, i64)>,
    }

    fn run(c: &Case) {
        let snap = snapshot(c.nodes.clone(), c.pods.clone(), c.namespaces);
        let pl = InterPodAffinity::with_args(c.args).unwrap();
        let mut state = CycleState::new();
        let status = pl.pre_score(&mut state, &c.pod, snap.node_list());
        assert_eq!(status.is_skip(), c.skip, "{}: prescore {status:?}", c.name);
        assert!(status.is_skip() || status.is_success(), "{}: {status:?}", c.name);
        let mut scores: Vec<i64> =
            c.want
                .iter()
                .map(|(name, _)| {
                    if status.is_skip() {
                        0
                    } else {
                        pl.score(&state, &c.pod, &snap.get(name).unwrap().view()).unwrap()
                    }
                })
                .collect();
        if !status.is_skip() {
            assert!(pl.normalize(&state, &c.pod, &mut scores).is_success());
        }
        let got: Vec<(&str, i64)> = c.want.iter().map(|(n, _)| *n).zip(scores).collect();
        assert_eq!(got, c.want, "{}", c.name);
    }

    fn args(hard: i32, ignore: bool) -> InterPodAffinityArgs {
        InterPodAffinityArgs { hard_pod_affinity_weight: hard, ignore_preferred_terms_of_existing_pods: ignore }
    }

    /// kube's fixture: machine1 in region China, machine2 in India,
    /// machine3 with only an `az` label.
    fn machines() -> Vec<Node> {
        vec![
            node("machine1").label("region", "China").build(),
            node("machine2").label("region", "India").build(),
            node("machine3").label("az", "az1").build(),
        ]
    }

    fn on(node: &str, name: &str, lbl: &[(&str, &str)]) -> PodBuilder {
        let mut b = pod(name).node(node);
        for (k, v) in lbl {
            b = b.label(k, v);
        }
        b
    }

    fn region(pairs: &[(&str, &str)]) -> framework::model::AffinityTerm {
        term("region", labels(pairs))
    }

    fn prefer(p: PodBuilder, terms: Vec<WeightedAffinityTerm>) -> PodBuilder {
        p.with(|p| p.pod_affinity.preferred = terms)
    }

    fn prefer_anti(p: PodBuilder, terms: Vec<WeightedAffinityTerm>) -> PodBuilder {
        p.with(|p| p.pod_anti_affinity.preferred = terms)
    }

    fn m(a: i64, b: i64, c: i64) -> Vec<(&'static str, i64)> {
        vec![("machine1", a), ("machine2", b), ("machine3", c)]
    }

    fn cases() -> Vec<Case> {
        let s1 = || pod("incoming").label("security", "S1");
        let d = args(1, false);
        vec![
            Case {
                name: "no affinity anywhere: skipped",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "affinity: the matching pod's region scores highest",
                pod: prefer(pod("incoming"), vec![weighted(5, region(&[("security", "S1")]))]).build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[("security", "S1")]).arc(),
                    on("machine2", "p2", &[("security", "S2")]).arc(),
                    on("machine3", "p3", &[("security", "S1")]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(100, 0, 0),
            },
            Case {
                name: "affinity: every node of the region scores the same",
                pod: prefer(pod("incoming"), vec![weighted(5, region(&[("security", "S1")]))]).build(),
                nodes: vec![
                    node("machine1").label("region", "China").build(),
                    node("machine2").label("region", "China").label("az", "az1").build(),
                    node("machine3").label("region", "India").build(),
                ],
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(100, 100, 0),
            },
            Case {
                name: "affinity: weights of several terms add up",
                pod: prefer(
                    pod("incoming"),
                    vec![weighted(8, region(&[("security", "S1")])), weighted(2, region(&[("security", "S2")]))],
                )
                .build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[("security", "S1")]).arc(),
                    on("machine2", "p2", &[("security", "S1")]).arc(),
                    on("machine2", "p3", &[("security", "S2")]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(80, 100, 0),
            },
            Case {
                name: "anti-affinity: nodes away from the matching pod score highest",
                pod: prefer_anti(pod("incoming"), vec![weighted(5, region(&[("security", "S1")]))]).build(),
                nodes: machines(),
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(0, 100, 100),
            },
            Case {
                name: "affinity and anti-affinity together, truncated",
                pod: prefer_anti(
                    prefer(pod("incoming"), vec![weighted(8, region(&[("security", "S1")]))]),
                    vec![weighted(5, region(&[("security", "S2")]))],
                )
                .build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[("security", "S1")]).arc(),
                    on("machine2", "p2", &[("security", "S2")]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                // raw 8, -5, 0: (0 + 5) / 13 = 38.46
                want: m(100, 0, 38),
            },
            Case {
                name: "preferred term in another namespace matches nothing: skipped",
                pod: prefer(
                    pod("incoming"),
                    vec![weighted(5, term_in(&["other"], "region", labels(&[("security", "S1")])))],
                )
                .build(),
                nodes: machines(),
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "preferred term's namespaceSelector matches the pod's namespace",
                pod: prefer(
                    pod("incoming"),
                    vec![weighted(
                        5,
                        term_ns_selector(&[], labels(&[("team", "a")]), "region", labels(&[("security", "S1")])),
                    )],
                )
                .build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[("security", "S1")]).namespace("team-a").arc(),
                    on("machine2", "p2", &[("security", "S1")]).namespace("team-b").arc(),
                ],
                namespaces: &[("team-a", &[("team", "a")]), ("team-b", &[("team", "b")])],
                args: d,
                skip: false,
                want: m(100, 0, 0),
            },
            Case {
                name: "term on a key no node has: skipped",
                pod: prefer(pod("incoming"), vec![weighted(5, term("rack", labels(&[("security", "S1")])))]).build(),
                nodes: machines(),
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "hostname topology: only the matching pod's node",
                pod: prefer(pod("incoming"), vec![weighted(3, term(LABEL_HOSTNAME, labels(&[("app", "web")])))])
                    .build(),
                nodes: machines(),
                pods: vec![on("machine2", "w", &[("app", "web")]).arc()],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(0, 100, 0),
            },
            Case {
                name: "symmetry: existing pod's preferred affinity toward the pod",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    prefer(on("machine1", "p1", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                    on("machine2", "p2", &[("security", "S1")]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(100, 0, 0),
            },
            Case {
                name: "symmetry: existing pod's preferred anti-affinity toward the pod",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    prefer_anti(on("machine1", "p1", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(0, 100, 100),
            },
            Case {
                name: "symmetry: existing pod's preferred term not matching the pod: skipped",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![prefer(on("machine1", "p1", &[]), vec![weighted(5, region(&[("security", "S2")]))]).arc()],
                namespaces: &[],
                args: d,
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "symmetry: existing pod's term selects the pod's namespace by labels",
                pod: s1().namespace("team-a").build(),
                nodes: machines(),
                pods: vec![
                    prefer(
                        on("machine2", "p1", &[]),
                        vec![weighted(
                            5,
                            term_ns_selector(&[], labels(&[("team", "a")]), "region", labels(&[("security", "S1")])),
                        )],
                    )
                    .arc(),
                ],
                namespaces: &[("team-a", &[("team", "a")])],
                args: d,
                skip: false,
                want: m(0, 100, 0),
            },
            Case {
                name: "symmetry: existing pod's required affinity, default hardPodAffinityWeight",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[])
                        .with(|p| p.pod_affinity.required = vec![region(&[("security", "S1")])])
                        .arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(100, 0, 0),
            },
            Case {
                name: "symmetry: hardPodAffinityWeight 0 ignores required terms: skipped",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[])
                        .with(|p| p.pod_affinity.required = vec![region(&[("security", "S1")])])
                        .arc(),
                ],
                namespaces: &[],
                args: args(0, false),
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "symmetry: hardPodAffinityWeight 1 against a preferred anti-affinity of 5",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[])
                        .with(|p| p.pod_affinity.required = vec![region(&[("security", "S1")])])
                        .arc(),
                    prefer_anti(on("machine2", "p2", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                ],
                namespaces: &[],
                args: d,
                skip: false,
                // raw 1, -5, 0: (0 + 5) / 6 = 83.3
                want: m(100, 0, 83),
            },
            Case {
                name: "symmetry: hardPodAffinityWeight 10 against a preferred anti-affinity of 5",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    on("machine1", "p1", &[])
                        .with(|p| p.pod_affinity.required = vec![region(&[("security", "S1")])])
                        .arc(),
                    prefer_anti(on("machine2", "p2", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                ],
                namespaces: &[],
                args: args(10, false),
                skip: false,
                // raw 10, -5, 0: (0 + 5) / 15 = 33.3
                want: m(100, 0, 33),
            },
            Case {
                name: "ignorePreferredTermsOfExistingPods: pod without preferred terms is skipped",
                pod: s1().build(),
                nodes: machines(),
                pods: vec![
                    prefer(on("machine1", "p1", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                    on("machine2", "p2", &[])
                        .with(|p| p.pod_affinity.required = vec![region(&[("security", "S1")])])
                        .arc(),
                ],
                namespaces: &[],
                args: args(1, true),
                skip: true,
                want: m(0, 0, 0),
            },
            Case {
                name: "ignorePreferredTermsOfExistingPods: existing terms still count with the pod's own",
                pod: prefer(s1(), vec![weighted(2, region(&[("app", "db")]))]).build(),
                nodes: machines(),
                pods: vec![
                    prefer(on("machine1", "p1", &[]), vec![weighted(5, region(&[("security", "S1")]))]).arc(),
                    on("machine2", "db", &[("app", "db")]).arc(),
                ],
                namespaces: &[],
                args: args(1, true),
                skip: false,
                // raw 5, 2, 0
                want: m(100, 40, 0),
            },
            Case {
                name: "matches that cancel out still leave the state: all equal, all 0",
                pod: prefer_anti(
                    prefer(pod("incoming"), vec![weighted(5, region(&[("security", "S1")]))]),
                    vec![weighted(5, region(&[("security", "S1")]))],
                )
                .build(),
                nodes: machines(),
                pods: vec![on("machine1", "p1", &[("security", "S1")]).arc()],
                namespaces: &[],
                args: d,
                skip: false,
                want: m(0, 0, 0),
            },
        ]
    }

    #[test]
    fn preferred_affinity_scores() {
        for c in cases() {
            run(&c);
        }
    }

    #[test]
    fn normalize_table() {
        let state = PreScoreState {
            scores: {
                let mut t = TopologyCounts::default();
                t.add("zone", "a", 1);
                t
            },
        };
        for (name, raw, want) in [
            ("min-max", vec![-5, 0, 10], vec![0, 33, 100]),
            ("all positive: the lowest becomes 0", vec![2, 4, 6], vec![0, 50, 100]),
            ("all equal", vec![3, 3, 3], vec![0, 0, 0]),
            ("all negative", vec![-10, -4, -1], vec![0, 66, 100]),
            ("empty", vec![], vec![]),
        ] {
            let mut s = raw.clone();
            state.normalize(&mut s);
            assert_eq!(s, want, "{name}");
        }
        // Nothing recorded: scores are left as they are.
        let mut s = vec![0, 0];
        PreScoreState::default().normalize(&mut s);
        assert_eq!(s, vec![0, 0]);
    }

    #[test]
    fn score_without_pre_score_state_is_an_error() {
        let pl = InterPodAffinity::default();
        let snap = snapshot(machines(), vec![], &[]);
        let p = pod("p").build();
        let err = pl.score(&CycleState::new(), &p, &snap.get("machine1").unwrap().view()).unwrap_err();
        assert_eq!(err.code, Code::Error);
        let mut scores = vec![0, 0];
        assert!(pl.normalize(&CycleState::new(), &p, &mut scores).is_success());
        // PreScore over no feasible node has nothing to do.
        assert!(pl.pre_score(&mut CycleState::new(), &p, NodeList::new(&snap, &[])).is_skip());
    }
}
