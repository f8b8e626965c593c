//! The terms pods and nodes carry: labels and label selectors, node
//! selectors, taints and tolerations, host ports, affinity and topology
//! spread. Matching a term against a Pod or a Node is defined beside those
//! (`model`), so this module knows neither.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

/// Label key of the node name, set by the kubelet and used as a topology key.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";

// ---------------------------------------------------------------- selectors

/// Operator of a label-selector or node-selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label value, as an integer, is greater.
    Gt,
    /// Node selectors only: the label value, as an integer, is less.
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    /// Evaluates the requirement against the value of its key (None: key absent).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self.op {
            SelectorOp::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            SelectorOp::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                // Validation guarantees one integer value; anything else never matches.
                let (Some(v), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                let (Ok(v), Ok(bound)) = (v.parse::<i64>(), bound.parse::<i64>()) else {
                    return false;
                };
                if self.op == SelectorOp::Gt { v > bound } else { v < bound }
            }
        }
    }
}

/// A compiled `metav1.LabelSelector`: requirements ANDed. An empty selector
/// matches everything; `LabelSelector::nothing()` (a nil selector in an
/// affinity term) matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
    pub matches_nothing: bool,
}

impl LabelSelector {
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    pub fn nothing() -> Self {
        LabelSelector { requirements: Vec::new(), matches_nothing: true }
    }

    pub fn from_match_labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelector {
            requirements: pairs
                .into_iter()
                .map(|(k, v)| Requirement { key: k.into(), op: SelectorOp::In, values: vec![v.into()] })
                .collect(),
            matches_nothing: false,
        }
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        !self.matches_nothing && self.requirements.is_empty()
    }
}

/// One `nodeSelectorTerm`: expressions on labels and fields, ANDed. A term
/// with neither matches no node (Kubernetes' rule).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    /// Only `metadata.name` is a supported field.
    pub match_fields: Vec<Requirement>,
}

/// A `nodeSelector` (the affinity kind): terms ORed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredSchedulingTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

// ------------------------------------------------------------ taints, ports

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOp {
    Equal,
    Exists,
}

/// A toleration. An empty key with `Exists` tolerates every taint; no
/// effect tolerates every effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    pub key: String,
    pub op: TolerationOp,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// `v1.Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.op {
            TolerationOp::Exists => true,
            TolerationOp::Equal => self.value == taint.value,
        }
    }
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub protocol: String,
    /// Empty or `0.0.0.0` means every address.
    pub host_ip: String,
    pub port: i32,
}

// ---------------------------------------------------------- inter-pod terms

/// A compiled `PodAffinityTerm`: the namespaces it looks in, the selector
/// (with `matchLabelKeys`/`mismatchLabelKeys` already merged) and the
/// topology key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Explicit namespaces; when both this is empty and there is no
    /// namespace selector, the term means the pod's own namespace (already
    /// filled in by conversion).
    pub namespaces: Vec<String>,
    /// `namespaceSelector`: None means no selector; an empty selector means
    /// all namespaces.
    pub namespace_selector: Option<LabelSelector>,
    pub selector: LabelSelector,
    pub topology_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    pub weight: i32,
    pub term: AffinityTerm,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAffinity {
    pub required: Vec<AffinityTerm>,
    pub preferred: Vec<WeightedAffinityTerm>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

// ---------------------------------------------------------- topology spread

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsatisfiableAction {
    DoNotSchedule,
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: UnsatisfiableAction,
    /// The label selector with `matchLabelKeys` already merged in.
    pub selector: LabelSelector,
    pub min_domains: Option<i32>,
    /// Default Honor.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: InclusionPolicy,
}
