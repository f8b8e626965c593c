//! PodDisruptionBudgets, as preemption reads them: which pods a budget
//! covers and how many of them may be disrupted now. Preemption prefers
//! victims whose eviction violates no budget (kube-scheduler's
//! `filterPodsWithPDBViolation`, here [`split_by_violation`]).
//!
//! The number allowed is the budget's `status.disruptionsAllowed` when the
//! disruption controller has written one, else derived from the spec.

use crate::model::{LabelSelector, Pod, PodRef};

/// How many pods may be unavailable, or must stay available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Count(i32),
    /// A percentage of the pods the budget covers (rounded up, as the
    /// disruption controller does).
    Percent(i32),
}

impl Budget {
    fn of(self, pods: i32) -> i32 {
        match self {
            Budget::Count(n) => n,
            Budget::Percent(p) => {
                let n = i64::from(p) * i64::from(pods);
                i32::try_from((n + 99) / 100).unwrap_or(i32::MAX)
            }
        }
    }
}

/// A PodDisruptionBudget (`policy/v1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    /// A nil selector matches no pod; an empty one every pod of the namespace.
    pub selector: LabelSelector,
    pub min_available: Option<Budget>,
    pub max_unavailable: Option<Budget>,
    /// `status.disruptionsAllowed`, when the disruption controller has
    /// written it (a live cluster); otherwise derived from the spec.
    pub status_allowed: Option<i32>,
    /// `status.disruptedPods`: evictions already counted against the budget.
    pub disrupted_pods: Vec<String>,
}

impl Pdb {
    pub fn covers(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace && self.selector.matches(&pod.labels)
    }

    /// Disruptions allowed now. Without a status (manifests given to the
    /// simulator), from the spec with `healthy` covered pods, every one
    /// of them taken as expected: the controller's formula when no pod is
    /// missing.
    pub fn allowed(&self, healthy: i32) -> i32 {
        if let Some(a) = self.status_allowed {
            return a;
        }
        match (self.min_available, self.max_unavailable) {
            (Some(min), _) => healthy - min.of(healthy),
            (None, Some(max)) => max.of(healthy),
            // Neither set: the API defaults to minAvailable 1.
            (None, None) => healthy - 1,
        }
        .max(0)
    }
}

/// Splits `pods` (in the order given, most important first) into those
/// whose eviction, together with the ones before them, would violate a
/// budget, and the others. `healthy(pdb)` counts the pods a budget covers,
/// for budgets without a status.
pub fn split_by_violation(pdbs: &[Pdb], pods: &[PodRef], healthy: &dyn Fn(&Pdb) -> i32) -> (Vec<PodRef>, Vec<PodRef>) {
    let mut allowed: Vec<Option<i32>> = vec![None; pdbs.len()];
    let (mut violating, mut ok) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violates = false;
        for (i, pdb) in pdbs.iter().enumerate() {
            if !pdb.covers(pod) || pdb.disrupted_pods.iter().any(|n| *n == pod.name) {
                continue;
            }
            let left = allowed[i].get_or_insert_with(|| pdb.allowed(healthy(pdb)));
            *left -= 1;
            if *left < 0 {
                violates = true;
            }
        }
        if violates { violating.push(pod.clone()) } else { ok.push(pod.clone()) }
    }
    (violating, ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    fn pdb(min: Option<Budget>, max: Option<Budget>, status: Option<i32>) -> Pdb {
        Pdb {
            namespace: "default".into(),
            name: "b".into(),
            selector: LabelSelector::from_match_labels([("app", "web")]),
            min_available: min,
            max_unavailable: max,
            status_allowed: status,
            disrupted_pods: vec![],
        }
    }

    #[test]
    fn allowed_from_status_or_spec() {
        use Budget::*;
        // (pdb, healthy, allowed)
        let cases = [
            (pdb(None, None, Some(2)), 10, 2),
            (pdb(Some(Count(3)), None, None), 4, 1),
            (pdb(Some(Count(5)), None, None), 4, 0),
            (pdb(Some(Percent(50)), None, None), 5, 2), // 3 must stay
            (pdb(None, Some(Count(1)), None), 4, 1),
            (pdb(None, Some(Percent(30)), None), 5, 2), // 1.5 rounds up
            (pdb(None, None, None), 3, 2),
        ];
        for (i, (p, healthy, want)) in cases.iter().enumerate() {
            assert_eq!(p.allowed(*healthy), *want, "case {i}");
        }
    }

    #[test]
    fn victims_past_the_budget_violate_it() {
        let web = |n: &str| pod(n).label("app", "web").arc();
        let pods = [web("w1"), pod("other").arc(), web("w2"), web("w3")];
        let mut b = pdb(None, None, Some(1));
        let (violating, ok) = split_by_violation(std::slice::from_ref(&b), &pods, &|_| 0);
        let names = |v: &[PodRef]| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            (names(&violating), names(&ok)),
            (vec!["w2".to_string(), "w3".into()], vec!["w1".into(), "other".into()])
        );
        // A pod already counted as disrupted costs nothing more.
        b.disrupted_pods = vec!["w1".into()];
        let (violating, _) = split_by_violation(&[b], &pods, &|_| 0);
        assert_eq!(names(&violating), ["w3"]);
    }
}
