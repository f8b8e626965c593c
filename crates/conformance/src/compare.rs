//! What agreeing means: both schedulers place the pod or neither does;
//! an unschedulable pod gets the same message from both; a placed pod's
//! node, as kube chose it, is one of the nodes with our top total (kube
//! breaks ties at random, so any of them may be its pick).
//!
//! A difference docs/POLICIES.md declares by design is its own verdict,
//! [`Verdict::ByDesign`], naming the policy: counted apart, never folded
//! into agreement silently.

use gpu_scheduler::engine::explain::Explanation;

/// One scheduler's decision, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Scheduled(String),
    /// The PodScheduled condition's message.
    Unschedulable(String),
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Scheduled(n) => write!(f, "scheduled to {n}"),
            Decision::Unschedulable(m) => write!(f, "unschedulable: {m}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agree,
    /// The messages differ only as docs/POLICIES.md says they do (the
    /// policy named).
    ByDesign(String),
    Disagree(String),
}

impl Verdict {
    /// Agreement, exact or by design: nothing to investigate.
    pub fn agrees(&self) -> bool {
        !matches!(self, Verdict::Disagree(_))
    }
}

/// The by-design difference of docs/POLICIES.md ("Conformance with
/// kube-scheduler"): kube's DynamicResources PostFilter words.
pub const DRA_POST_FILTER: &str = "by design (POLICIES.md, Conformance): kube's DynamicResources PostFilter words";

/// What kube's DynamicResources PostFilter (it runs before preemption)
/// adds to a message and we do not: its status for a pod with no claim
/// to deallocate, followed by preemption's words.
const DRA_NOTHING_TO_DEALLOCATE: [&str; 2] = ["no new claims to deallocate, ", "still not schedulable, "];
/// kube's DynamicResources PostFilter when its PreFilter never ran (an
/// earlier PreFilter rejected the pod): it reads the cycle state it never
/// wrote, fails with the state's "not found" error, and that error ends
/// PostFilter before preemption.
const DRA_STATE_NOT_FOUND: &str = ". not found";

/// Whether kube's message `kube` is ours, `ours`, but for the words of
/// kube's DynamicResources PostFilter.
fn differs_by_dra_post_filter(ours: &str, kube: &str) -> bool {
    for words in DRA_NOTHING_TO_DEALLOCATE {
        if let Some((head, tail)) = kube.split_once(&format!(". {words}"))
            && ours == format!("{head}. {tail}")
        {
            return true;
        }
    }
    // Preemption, had it run after the PreFilter rejection, would have
    // found every node unresolvable: that is what we say.
    if let Some(head) = kube.strip_suffix(DRA_STATE_NOT_FOUND)
        && let Some(n) = node_count_in(kube)
    {
        return ours
            == format!("{head}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.");
    }
    false
}

/// Our decision's top nodes: the feasible nodes with the highest total
/// (all feasible nodes when nothing was scored: a single feasible node).
pub fn top_nodes(e: &Explanation) -> Vec<String> {
    let feasible: Vec<_> = e.nodes.iter().filter(|n| n.verdict == "selected" || n.verdict == "feasible").collect();
    let best = feasible.iter().filter_map(|n| n.total).fold(f64::NEG_INFINITY, f64::max);
    let mut top: Vec<String> =
        feasible.iter().filter(|n| n.total.is_none_or(|t| (best - t).abs() < 1e-6)).map(|n| n.node.clone()).collect();
    top.sort();
    top
}

/// Compares our decision (and its explanation) with kube's.
pub fn compare(ours: &Decision, explanation: &Explanation, kube: &Decision) -> Verdict {
    match (ours, kube) {
        (Decision::Unschedulable(a), Decision::Unschedulable(b)) if a == b => Verdict::Agree,
        (Decision::Unschedulable(a), Decision::Unschedulable(b)) if differs_by_dra_post_filter(a, b) => {
            Verdict::ByDesign(DRA_POST_FILTER.into())
        }
        (Decision::Unschedulable(_), Decision::Unschedulable(_)) => Verdict::Disagree("different messages".into()),
        (Decision::Scheduled(_), Decision::Scheduled(k)) => {
            let top = top_nodes(explanation);
            if top.contains(k) {
                Verdict::Agree
            } else {
                Verdict::Disagree(format!("kube-scheduler chose {k}, not one of our top nodes {top:?}"))
            }
        }
        (Decision::Scheduled(_), Decision::Unschedulable(_)) => {
            Verdict::Disagree("we placed the pod, kube-scheduler did not".into())
        }
        (Decision::Unschedulable(_), Decision::Scheduled(_)) => {
            Verdict::Disagree("kube-scheduler placed the pod, we did not".into())
        }
    }
}

/// The N of kube's "0/N nodes are available" message.
pub fn node_count_in(message: &str) -> Option<usize> {
    message.strip_prefix("0/")?.split_once(' ')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_scheduler::engine::explain::NodeVerdict;

    fn explanation(nodes: &[(&str, &str, Option<f64>)]) -> Explanation {
        Explanation {
            pod: "ns/p".into(),
            profile: "gpu-scheduler".into(),
            policy: None,
            node: None,
            message: None,
            total_nodes: nodes.len(),
            evaluated_nodes: nodes.len(),
            feasible_nodes: 0,
            nodes: nodes
                .iter()
                .map(|(n, v, t)| NodeVerdict {
                    node: n.to_string(),
                    verdict: v.to_string(),
                    plugin: None,
                    reasons: Vec::new(),
                    scores: Vec::new(),
                    total: *t,
                    details: Vec::new(),
                })
                .collect(),
            gang: None,
            preemption: None,
        }
    }

    #[test]
    fn verdicts() {
        let scored = explanation(&[
            ("a", "selected", Some(300.0)),
            ("b", "feasible", Some(300.0)),
            ("c", "feasible", Some(299.0)),
            ("d", "rejected", None),
        ]);
        let single = explanation(&[("a", "selected", None), ("d", "rejected", None)]);
        let none = explanation(&[("d", "rejected", None)]);
        let s = |n: &str| Decision::Scheduled(n.into());
        let u = |m: &str| Decision::Unschedulable(m.into());
        for (name, ours, e, kube, agree) in [
            ("kube took our pick", s("a"), &scored, s("a"), true),
            ("kube took the other top node", s("a"), &scored, s("b"), true),
            ("kube took a lower node", s("a"), &scored, s("c"), false),
            ("kube took a rejected node", s("a"), &scored, s("d"), false),
            ("one feasible node, not scored", s("a"), &single, s("a"), true),
            ("same message", u("0/1 nodes are available: x."), &none, u("0/1 nodes are available: x."), true),
            ("other message", u("0/1 nodes are available: x."), &none, u("0/1 nodes are available: y."), false),
            ("we placed, kube did not", s("a"), &single, u("m"), false),
            ("kube placed, we did not", u("m"), &none, s("d"), false),
        ] {
            assert_eq!(compare(&ours, e, &kube) == Verdict::Agree, agree, "{name}");
        }
    }

    /// kube's DynamicResources PostFilter words are a named by-design
    /// difference, exactly those words and nothing else.
    #[test]
    fn dra_post_filter_words_are_by_design() {
        let none = explanation(&[("d", "rejected", None)]);
        let u = |m: &str| Decision::Unschedulable(m.into());
        let ours = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
        let by_design = Verdict::ByDesign(DRA_POST_FILTER.into());
        let missing = "0/1 nodes are available: persistentvolumeclaim \"d\" not found.";
        let ours_missing =
            format!("{missing} preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.");
        for (name, ours, kube, want) in [
            (
                "nothing to deallocate",
                ours.to_string(),
                "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
                by_design.clone(),
            ),
            (
                "other words besides",
                ours.to_string(),
                "0/2 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
                Verdict::Disagree("different messages".into()),
            ),
            (
                "state not found",
                ours_missing.clone(),
                "0/1 nodes are available: persistentvolumeclaim \"d\" not found. not found",
                by_design.clone(),
            ),
            (
                "state not found, other reason",
                ours_missing,
                "0/1 nodes are available: persistentvolumeclaim \"e\" not found. not found",
                Verdict::Disagree("different messages".into()),
            ),
        ] {
            assert_eq!(compare(&u(&ours), &none, &u(kube)), want, "{name}");
            assert_eq!(want.agrees(), name == "nothing to deallocate" || name == "state not found", "{name}");
        }
    }

    #[test]
    fn node_count_of_a_message() {
        for (m, want) in [
            ("0/5 nodes are available: 5 Insufficient cpu.", Some(5)),
            ("0/12 nodes are available: ...", Some(12)),
            ("persistentvolumeclaim \"x\" not found", None),
        ] {
            assert_eq!(node_count_in(m), want, "{m}");
        }
    }
}
