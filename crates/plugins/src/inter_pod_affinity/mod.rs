//! InterPodAffinity: required pod affinity and anti-affinity as a filter,
//! preferred ones as a score, with kube-scheduler's semantics
//! (`pkg/scheduler/framework/plugins/interpodaffinity`, v1.36).
//!
//! Both directions count: the incoming pod's terms matched against the
//! pods already placed, and the placed pods' terms matched against the
//! incoming pod (symmetry). PreFilter and PreScore walk the cluster once per
//! pod and fold the matches into counts per topology pair; Filter and Score
//! then only look up the node's label values in those counts.
//!
//! Namespace selectors: a term of the incoming pod matches a placed pod when
//! that pod's namespace is known and its labels match (kube lists the
//! matching namespaces); a placed pod's term is matched against the incoming
//! pod's namespace labels, an unknown namespace counting as having none.

mod filtering;
mod scoring;

use std::collections::HashMap;
use std::sync::Arc;

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Status,
};
use framework::model::{AffinityTerm, Labels, Pod};
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

pub use filtering::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
};

pub const NAME: &str = "InterPodAffinity";

/// Default weight of a placed pod's required affinity term toward the
/// incoming pod, in scoring (kube's `hardPodAffinityWeight` default).
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;
pub const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

/// The plugin's args, defaulted and validated (`InterPodAffinityArgs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterPodAffinityArgs {
    /// Score weight of a placed pod's required affinity term that matches
    /// the incoming pod; 0 turns that symmetry off.
    pub hard_pod_affinity_weight: i32,
    /// When the incoming pod has no preferred terms, ignore the placed pods'
    /// preferred terms (and skip scoring altogether).
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

/// The args as written; absent or `null` fields take the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    #[serde(default)]
    hard_pod_affinity_weight: Option<i32>,
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: Option<bool>,
}

impl InterPodAffinityArgs {
    /// Decodes and validates kube-style args (`None` or `null`: defaults).
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, ArgsError> {
        let raw: RawArgs = decode_args(args)?;
        let defaults = InterPodAffinityArgs::default();
        let args = InterPodAffinityArgs {
            hard_pod_affinity_weight: raw.hard_pod_affinity_weight.unwrap_or(defaults.hard_pod_affinity_weight),
            ignore_preferred_terms_of_existing_pods: raw
                .ignore_preferred_terms_of_existing_pods
                .unwrap_or(defaults.ignore_preferred_terms_of_existing_pods),
        };
        args.validate()?;
        Ok(args)
    }

    /// kube's `ValidateInterPodAffinityArgs`.
    pub fn validate(&self) -> Result<(), ArgsError> {
        let w = self.hard_pod_affinity_weight;
        if !(MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
            return Err(ArgsError::new(
                "hardPodAffinityWeight",
                format!(
                    "Invalid value: {w}: not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
                ),
            ));
        }
        Ok(())
    }
}

/// The InterPodAffinity plugin: PreFilter, Filter, PreScore, Score and
/// NormalizeScore.
#[derive(Debug, Clone, Default)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
}

impl InterPodAffinity {
    /// A plugin with validated args.
    pub fn with_args(args: InterPodAffinityArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        Ok(InterPodAffinity { args })
    }

    pub fn args(&self) -> &InterPodAffinityArgs {
        &self.args
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args = InterPodAffinityArgs::decode(args)?;
    Ok(Arc::new(InterPodAffinity::with_args(args)?))
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    /// As kube (with queueing hints): a placed pod added (it may satisfy an
    /// affinity term), deleted (it may have blocked by anti-affinity) or
    /// relabelled; a node added or relabelled (topology values).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Add),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::UpdateLabel),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        match filtering::PreFilterState::compute(pod, snapshot) {
            Some(s) => {
                state.write(s);
                (PreFilterResult::default(), Status::success())
            }
            None => (PreFilterResult::default(), Status::skip()),
        }
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        match state.read::<filtering::PreFilterState>() {
            Some(s) => s.filter(pod, &node.node.labels),
            None => Status::error(filtering::ERR_NO_PRE_FILTER_STATE),
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let snapshot = nodes.snapshot();
        if nodes.is_empty() {
            return Status::skip();
        }
        match scoring::PreScoreState::compute(&self.args, pod, snapshot) {
            Some(s) => {
                state.write(s);
                Status::success()
            }
            None => Status::skip(),
        }
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        match state.read::<scoring::PreScoreState>() {
            Some(s) => Ok(s.score(&node.node.labels)),
            None => Err(Status::error(scoring::ERR_NO_PRE_SCORE_STATE)),
        }
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        // Without state (PreScore skipped) every raw score is 0: nothing to do.
        if let Some(s) = state.read::<scoring::PreScoreState>() {
            s.normalize(scores);
        }
        Status::success()
    }
}

// ------------------------------------------------------------------ shared

/// Labels of a namespace the cache does not know: none, as kube's
/// `GetNamespaceLabelsSnapshot` assumes.
static NO_LABELS: Labels = Labels::new();

/// Whether `pod` matches every term (false for no terms), as kube's
/// `podMatchesAllAffinityTerms`.
fn matches_all_terms(terms: &[AffinityTerm], pod: &Pod, ns_labels: Option<&Labels>) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, ns_labels))
}

/// Counts (or score weights) per topology pair `(key, value)`, nested by key
/// so that Filter and Score look a node's label value up by `&str` without
/// building a pair. Topology keys are few, so the outer level is a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TopologyCounts {
    by_key: Vec<(String, HashMap<String, i64>)>,
}

impl TopologyCounts {
    fn add(&mut self, key: &str, value: &str, delta: i64) {
        let i = match self.by_key.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.by_key.push((key.to_string(), HashMap::new()));
                self.by_key.len() - 1
            }
        };
        let values = &mut self.by_key[i].1;
        match values.get_mut(value) {
            Some(c) => *c += delta,
            None => {
                values.insert(value.to_string(), delta);
            }
        }
    }

    /// Adds `delta` to the pair of `key` and the node's value for it; a node
    /// without the label is in no domain of that key.
    fn add_on_node(&mut self, node_labels: &Labels, key: &str, delta: i64) {
        if let Some(value) = node_labels.get(key) {
            self.add(key, value, delta);
        }
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.by_key.iter().find(|(k, _)| k == key).and_then(|(_, values)| values.get(value)).copied().unwrap_or(0)
    }

    /// No pair was ever recorded.
    fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Whether a node with `labels` lies in a domain with a positive count.
    fn any_positive_on_node(&self, labels: &Labels) -> bool {
        self.by_key
            .iter()
            .any(|(key, values)| labels.get(key).and_then(|v| values.get(v.as_str())).is_some_and(|&c| c > 0))
    }

    /// Sum of the counts of every domain a node with `labels` lies in.
    fn sum_on_node(&self, labels: &Labels) -> i64 {
        self.by_key.iter().filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v.as_str()))).sum()
    }
}

#[cfg(test)]
mod test_support {
    //! Terse builders for affinity terms and snapshots with namespaces.

    use framework::cache::{Cache, Snapshot};
    use framework::model::{AffinityTerm, LabelSelector, Node, PodRef, Requirement, SelectorOp, WeightedAffinityTerm};

    pub fn labels(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector::from_match_labels(pairs.iter().copied())
    }

    pub fn expr(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|v| v.to_string()).collect() }
    }

    pub fn exprs(reqs: Vec<Requirement>) -> LabelSelector {
        LabelSelector { requirements: reqs, matches_nothing: false }
    }

    /// A term over the pods of namespace `default` (a term without
    /// namespaces or selector means the owner's namespace).
    pub fn term(topology_key: &str, selector: LabelSelector) -> AffinityTerm {
        term_in(&["default"], topology_key, selector)
    }

    pub fn term_in(namespaces: &[&str], topology_key: &str, selector: LabelSelector) -> AffinityTerm {
        AffinityTerm {
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            namespace_selector: None,
            selector,
            topology_key: topology_key.into(),
        }
    }

    /// A term with a namespace selector and the given explicit namespaces.
    pub fn term_ns_selector(
        namespaces: &[&str],
        ns_selector: LabelSelector,
        topology_key: &str,
        selector: LabelSelector,
    ) -> AffinityTerm {
        AffinityTerm { namespace_selector: Some(ns_selector), ..term_in(namespaces, topology_key, selector) }
    }

    pub fn weighted(weight: i32, term: AffinityTerm) -> WeightedAffinityTerm {
        WeightedAffinityTerm { weight, term }
    }

    /// A snapshot of the nodes and pods, with the namespaces' labels.
    pub fn snapshot(nodes: Vec<Node>, pods: Vec<PodRef>, namespaces: &[(&str, &[(&str, &str)])]) -> Snapshot {
        let mut cache = Cache::new();
        for n in nodes {
            cache.upsert_node(n);
        }
        for p in pods {
            cache.add_pod(p).unwrap();
        }
        for (ns, l) in namespaces {
            let l = l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            cache.upsert_namespace(ns, l);
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::{EventAction, EventResource};

    #[test]
    fn args_table() {
        struct Case {
            name: &'static str,
            args: Option<serde_json::Value>,
            want: Result<InterPodAffinityArgs, (&'static str, &'static str)>,
        }
        let ok = |w, ignore| {
            Ok(InterPodAffinityArgs { hard_pod_affinity_weight: w, ignore_preferred_terms_of_existing_pods: ignore })
        };
        let cases = [
            Case { name: "absent: defaults", args: None, want: ok(1, false) },
            Case { name: "null: defaults", args: Some(serde_json::Value::Null), want: ok(1, false) },
            Case { name: "empty: defaults", args: Some(serde_json::json!({})), want: ok(1, false) },
            Case {
                name: "explicit zero weight is kept",
                args: Some(serde_json::json!({"hardPodAffinityWeight": 0})),
                want: ok(0, false),
            },
            Case {
                name: "both set",
                args: Some(serde_json::json!({
                    "hardPodAffinityWeight": 100,
                    "ignorePreferredTermsOfExistingPods": true
                })),
                want: ok(100, true),
            },
            Case {
                name: "null field defaults",
                args: Some(serde_json::json!({"hardPodAffinityWeight": null})),
                want: ok(1, false),
            },
            Case {
                name: "weight above range",
                args: Some(serde_json::json!({"hardPodAffinityWeight": 101})),
                want: Err(("hardPodAffinityWeight", "Invalid value: 101: not in valid range [0, 100]")),
            },
            Case {
                name: "negative weight",
                args: Some(serde_json::json!({"hardPodAffinityWeight": -1})),
                want: Err(("hardPodAffinityWeight", "Invalid value: -1: not in valid range [0, 100]")),
            },
            Case {
                name: "wrong type names the field",
                args: Some(serde_json::json!({"ignorePreferredTermsOfExistingPods": "yes"})),
                want: Err(("ignorePreferredTermsOfExistingPods", "")),
            },
            Case {
                name: "unknown field",
                args: Some(serde_json::json!({"hardPodAffinityWeigh": 1})),
                want: Err(("hardPodAffinityWeigh", "unknown field")),
            },
        ];
        for c in cases {
            let got = InterPodAffinityArgs::decode(c.args.as_ref());
            match (got, c.want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{}", c.name),
                (Err(e), Err((path, msg))) => {
                    assert_eq!(e.path, path, "{}: {e}", c.name);
                    assert!(e.message.contains(msg), "{}: {e}", c.name);
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", c.name),
            }
        }
        assert!(new(Some(&serde_json::json!({"hardPodAffinityWeight": 7}))).is_ok());
        assert!(new(Some(&serde_json::json!({"hardPodAffinityWeight": 700}))).is_err());
    }

    #[test]
    fn plugin_serves_filter_and_score_points() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_pre_filter().is_some());
        assert!(p.as_filter().is_some());
        assert!(p.as_pre_score().is_some());
        assert!(p.as_score().is_some_and(|s| s.has_normalize()));
        assert!(p.as_queue_sort().is_none());
        assert!(p.as_post_filter().is_none());
        let events = p.events_to_register();
        for (resource, action, want) in [
            (EventResource::AssignedPod, EventAction::Add, true),
            (EventResource::AssignedPod, EventAction::Delete, true),
            (EventResource::AssignedPod, EventAction::UpdateLabel, true),
            (EventResource::AssignedPod, EventAction::UpdateAllocatable, false),
            (EventResource::Node, EventAction::Add, true),
            (EventResource::Node, EventAction::UpdateLabel, true),
            (EventResource::Node, EventAction::UpdateTaint, false),
            (EventResource::Node, EventAction::Delete, false),
            (EventResource::UnscheduledPod, EventAction::UpdateLabel, false),
        ] {
            let happened = ClusterEvent::new(resource, action);
            assert_eq!(events.iter().any(|e| happened.triggers(e)), want, "{resource:?} {action:?}");
        }
    }

    #[test]
    fn topology_counts_lookup() {
        let mut c = TopologyCounts::default();
        assert!(c.is_empty());
        c.add("zone", "a", 2);
        c.add("zone", "a", -1);
        c.add("zone", "b", 0);
        c.add("host", "h1", -3);
        assert_eq!(c.get("zone", "a"), 1);
        assert_eq!(c.get("zone", "c"), 0);
        assert_eq!(c.get("rack", "a"), 0);
        let node: Labels =
            [("zone", "a"), ("host", "h1")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(c.sum_on_node(&node), -2);
        assert!(c.any_positive_on_node(&node));
        let other: Labels = [("zone".to_string(), "b".to_string())].into();
        assert!(!c.any_positive_on_node(&other));
        assert_eq!(c.sum_on_node(&Labels::new()), 0);
    }
}
