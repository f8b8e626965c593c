//! PodTopologySpread: spreads the pods matched by a selector evenly over
//! topology domains (zones, nodes, ...), as kube-scheduler's plugin of the
//! same name.
//!
//! - PreFilter/Filter enforce the pod's `DoNotSchedule` constraints: placing
//!   the pod in a domain must not make that domain exceed the global minimum
//!   by more than `maxSkew` (the minimum counts as 0 while fewer than
//!   `minDomains` domains are eligible).
//! - PreScore/Score/NormalizeScore prefer, for `ScheduleAnyway` constraints,
//!   the nodes whose domains hold the fewest matching pods.
//! - A pod with no constraints of its own gets the plugin's default
//!   constraints (`defaultingType: System` or `List`), selecting the pods of
//!   its owning controller.
//!
//! A node takes part in a constraint's counts only when it has every
//! topology key of the pod's constraints and passes the constraint's
//! `nodeAffinityPolicy` (Honor: the pod's nodeSelector and required node
//! affinity) and `nodeTaintsPolicy` (Honor: its NoSchedule/NoExecute taints
//! are tolerated).

use std::sync::Arc;

use framework::framework::{
    ClusterEvent, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreScorePlugin, ScorePlugin,
};
use framework::model::{
    InclusionPolicy, LABEL_HOSTNAME, LABEL_ZONE, LabelSelector, Labels, Node, Pod, PodRef, TopologySpreadConstraint,
    UnsatisfiableAction,
};
use framework::registry::{ArgsError, decode_args};
use framework::selectors::WorkloadSelectors;
use serde::Deserialize;

use crate::helper::{find_untolerated_taint, is_do_not_schedule_taint, required_node_affinity_matches};

mod filtering;
mod scoring;

pub const NAME: &str = "PodTopologySpread";

/// Filter rejection when placing the pod would exceed a constraint's maxSkew.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter rejection when the node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// `defaultingType` values.
pub const SYSTEM_DEFAULTING: &str = "System";
pub const LIST_DEFAULTING: &str = "List";

// ------------------------------------------------------------------- args

/// kube-scheduler's `PodTopologySpreadArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods that define none; only with `defaultingType: List`.
    #[serde(default)]
    pub default_constraints: Vec<DefaultConstraintArgs>,
    /// `System` (the default) or `List`.
    #[serde(default)]
    pub defaulting_type: String,
}

/// One `v1.TopologySpreadConstraint` of `defaultConstraints`. Its selector
/// is deduced per pod, so `labelSelector` must be absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DefaultConstraintArgs {
    #[serde(default)]
    pub max_skew: i32,
    #[serde(default)]
    pub topology_key: String,
    #[serde(default)]
    pub when_unsatisfiable: String,
    /// Only decoded to be rejected with kube's error.
    #[serde(default)]
    pub label_selector: Option<serde_json::Value>,
    #[serde(default)]
    pub min_domains: Option<i32>,
    #[serde(default)]
    pub node_affinity_policy: Option<PolicyArg>,
    #[serde(default)]
    pub node_taints_policy: Option<PolicyArg>,
    /// Accepted as kube does; without effect, since the owner's selector
    /// replaces the constraint's selector.
    #[serde(default)]
    pub match_label_keys: Vec<String>,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` as written in args.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum PolicyArg {
    Honor,
    Ignore,
}

impl From<PolicyArg> for InclusionPolicy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::Honor => InclusionPolicy::Honor,
            PolicyArg::Ignore => InclusionPolicy::Ignore,
        }
    }
}

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

fn parse_action(s: &str) -> Option<UnsatisfiableAction> {
    match s {
        DO_NOT_SCHEDULE => Some(UnsatisfiableAction::DoNotSchedule),
        SCHEDULE_ANYWAY => Some(UnsatisfiableAction::ScheduleAnyway),
        _ => None,
    }
}

impl PodTopologySpreadArgs {
    /// kube's `ValidatePodTopologySpreadArgs`; returns the first problem.
    pub fn validate(&self) -> Result<(), ArgsError> {
        match self.defaulting_type.as_str() {
            // An empty type defaults to System.
            "" | SYSTEM_DEFAULTING => {
                if !self.default_constraints.is_empty() {
                    return Err(ArgsError::new(
                        "defaultingType",
                        "Invalid value: \"System\": when .defaultConstraints are not empty",
                    ));
                }
            }
            LIST_DEFAULTING => {}
            other => {
                return Err(ArgsError::new(
                    "defaultingType",
                    format!("Unsupported value: {other:?}: supported values: \"System\", \"List\""),
                ));
            }
        }
        for (i, c) in self.default_constraints.iter().enumerate() {
            let path = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                return Err(ArgsError::new(
                    format!("{path}.maxSkew"),
                    format!("Invalid value: {}: not in valid range (0, inf)", c.max_skew),
                ));
            }
            if c.topology_key.is_empty() {
                return Err(ArgsError::new(format!("{path}.topologyKey"), "Required value: can not be empty"));
            }
            if let Some(problem) = qualified_name_problem(&c.topology_key) {
                return Err(ArgsError::new(
                    format!("{path}.topologyKey"),
                    format!("Invalid value: {:?}: {problem}", c.topology_key),
                ));
            }
            if c.when_unsatisfiable.is_empty() {
                return Err(ArgsError::new(format!("{path}.whenUnsatisfiable"), "Required value: can not be empty"));
            }
            if parse_action(&c.when_unsatisfiable).is_none() {
                return Err(ArgsError::new(
                    format!("{path}.whenUnsatisfiable"),
                    format!(
                        "Unsupported value: {:?}: supported values: \"{DO_NOT_SCHEDULE}\", \"{SCHEDULE_ANYWAY}\"",
                        c.when_unsatisfiable
                    ),
                ));
            }
            if c.label_selector.is_some() {
                return Err(ArgsError::new(
                    format!("{path}.labelSelector"),
                    "Forbidden: constraint must not define a selector, as they deduced for each pod",
                ));
            }
            let repeated = self.default_constraints[..i]
                .iter()
                .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
            if repeated {
                return Err(ArgsError::new(
                    path,
                    format!("Duplicate value: \"{{{}, {}}}\"", c.topology_key, c.when_unsatisfiable),
                ));
            }
        }
        Ok(())
    }
}

/// Why `v` is not a qualified name (`[prefix/]name`, as label keys), in
/// apimachinery's words; None when it is one.
fn qualified_name_problem(v: &str) -> Option<String> {
    const NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
         and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
         validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let (prefix, name) = match v.split_once('/') {
        None => (None, v),
        Some((_, rest)) if rest.contains('/') => {
            return Some(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                 end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
                    .into(),
            );
        }
        Some((p, n)) => (Some(p), n),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if p.len() > 253 {
            return Some("prefix part must be no more than 253 characters".into());
        }
        let label_ok = |l: &str| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&c| c.is_ascii_digit() || c.is_ascii_lowercase() || c == b'-')
        };
        if !p.split('.').all(label_ok) {
            return Some(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
                 '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                 used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                    .into(),
            );
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    let b = name.as_bytes();
    let ok = b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        return Some(NAME_MSG.into());
    }
    None
}

// ----------------------------------------------------------------- plugin

/// The plugin. Holds the default constraints (selectors filled in per pod
/// from `Pod::owner_selector`).
#[derive(Debug, Clone)]
pub struct PodTopologySpread {
    default_constraints: Vec<TopologySpreadConstraint>,
    /// `defaultingType: System`: scoring then also spreads over nodes that
    /// lack a zone label (kube only requires all keys for explicit rules).
    system_defaulted: bool,
}

/// kube's system defaults: hostname maxSkew 3 and zone maxSkew 5, both
/// ScheduleAnyway, in kube's order.
fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_ZONE, 5)]
        .into_iter()
        .map(|(key, max_skew)| TopologySpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: UnsatisfiableAction::ScheduleAnyway,
            selector: LabelSelector::everything(),
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        })
        .collect()
}

impl PodTopologySpread {
    /// Validates the args and builds the plugin.
    pub fn from_args(args: &PodTopologySpreadArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        if args.defaulting_type.is_empty() || args.defaulting_type == SYSTEM_DEFAULTING {
            return Ok(PodTopologySpread { default_constraints: system_default_constraints(), system_defaulted: true });
        }
        let mut defaults = Vec::with_capacity(args.default_constraints.len());
        for (i, c) in args.default_constraints.iter().enumerate() {
            let when_unsatisfiable = parse_action(&c.when_unsatisfiable).ok_or_else(|| {
                ArgsError::new(format!("defaultConstraints[{i}].whenUnsatisfiable"), "Unsupported value")
            })?;
            defaults.push(TopologySpreadConstraint {
                max_skew: c.max_skew,
                topology_key: c.topology_key.clone(),
                when_unsatisfiable,
                selector: LabelSelector::everything(),
                min_domains: c.min_domains,
                node_affinity_policy: c.node_affinity_policy.map_or(InclusionPolicy::Honor, Into::into),
                node_taints_policy: c.node_taints_policy.map_or(InclusionPolicy::Ignore, Into::into),
            });
        }
        Ok(PodTopologySpread { default_constraints: defaults, system_defaulted: false })
    }

    /// The pod's constraints for `action`: its own when it has any (of
    /// either action), else the defaults with kube's default selector (the
    /// Services selecting it and its controller's selector; no defaults
    /// when there is none).
    fn constraints_for(
        &self,
        pod: &Pod,
        action: UnsatisfiableAction,
        workloads: &WorkloadSelectors,
    ) -> Vec<TopologySpreadConstraint> {
        if !pod.topology_spread_constraints.is_empty() {
            return pod
                .topology_spread_constraints
                .iter()
                .filter(|c| c.when_unsatisfiable == action)
                .cloned()
                .collect();
        }
        let Some(selector) = workloads.default_selector(pod) else {
            return Vec::new();
        };
        self.default_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .map(|c| TopologySpreadConstraint { selector: selector.clone(), ..c.clone() })
            .collect()
    }
}

/// Registry factory.
pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: PodTopologySpreadArgs = decode_args(args)?;
    Ok(Arc::new(PodTopologySpread::from_args(&args)?))
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    /// As kube (with queueing hints): bound pods coming, going or changing
    /// labels change the counts; the pending pod's own labels or
    /// tolerations change its selectors or the eligible nodes; nodes
    /// appearing, leaving or changing labels or taints change the domains.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        use EventAction::*;
        use EventResource::*;
        vec![
            ClusterEvent::new(AssignedPod, Add),
            ClusterEvent::new(AssignedPod, UpdateLabel),
            ClusterEvent::new(AssignedPod, Delete),
            ClusterEvent::new(UnscheduledPod, UpdateLabel),
            ClusterEvent::new(UnscheduledPod, Update),
            ClusterEvent::new(Node, Add),
            ClusterEvent::new(Node, Delete),
            ClusterEvent::new(Node, UpdateLabel),
            ClusterEvent::new(Node, UpdateTaint),
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

// ---------------------------------------------------------------- helpers

/// Whether the node has every topology key in `keys`.
fn has_all_keys<'a>(labels: &Labels, mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.all(|k| labels.contains_key(k))
}

/// Which inclusion checks any of a pod's constraints asks for, found once
/// per cycle so that nodes are not checked for nothing.
#[derive(Debug, Clone, Copy)]
struct InclusionNeeds {
    affinity: bool,
    taints: bool,
}

impl InclusionNeeds {
    fn of(constraints: &[TopologySpreadConstraint]) -> Self {
        InclusionNeeds {
            affinity: constraints.iter().any(|c| c.node_affinity_policy == InclusionPolicy::Honor),
            taints: constraints.iter().any(|c| c.node_taints_policy == InclusionPolicy::Honor),
        }
    }

    /// The node's standing under the policies, shared by the constraints.
    fn check(self, pod: &Pod, node: &Node) -> NodeInclusion {
        NodeInclusion {
            affinity: !self.affinity || required_node_affinity_matches(pod, node),
            taints: !self.taints
                || find_untolerated_taint(&node.taints, &pod.tolerations, is_do_not_schedule_taint).is_none(),
        }
    }
}

/// Whether a node passes the pod's node affinity and tolerates its hard taints.
#[derive(Debug, Clone, Copy)]
struct NodeInclusion {
    affinity: bool,
    taints: bool,
}

impl NodeInclusion {
    /// Whether the node counts for `c` under its inclusion policies.
    fn admits(self, c: &TopologySpreadConstraint) -> bool {
        (c.node_affinity_policy == InclusionPolicy::Ignore || self.affinity)
            && (c.node_taints_policy == InclusionPolicy::Ignore || self.taints)
    }
}

/// Pods of `namespace` on a node that `selector` matches, skipping pods
/// being deleted. An empty selector counts nothing, as in kube.
fn count_matching(pods: &[PodRef], selector: &LabelSelector, namespace: &str) -> i64 {
    if selector.is_empty() {
        return 0;
    }
    pods.iter().filter(|p| !p.terminating && p.namespace == namespace && selector.matches(&p.labels)).count() as i64
}

#[cfg(test)]
pub(super) mod testutil {
    //! Builders shared by the filtering and scoring tests.
    use super::*;
    use framework::model::{NodeSelector, NodeSelectorTerm, Requirement, SelectorOp};
    use framework::testing::PodBuilder;

    pub fn exists(key: &str) -> LabelSelector {
        LabelSelector {
            requirements: vec![Requirement { key: key.into(), op: SelectorOp::Exists, values: vec![] }],
            matches_nothing: false,
        }
    }

    pub fn constraint(
        max_skew: i32,
        key: &str,
        action: UnsatisfiableAction,
        selector: LabelSelector,
    ) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: action,
            selector,
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        }
    }

    pub fn hard(max_skew: i32, key: &str, selector: LabelSelector) -> TopologySpreadConstraint {
        constraint(max_skew, key, UnsatisfiableAction::DoNotSchedule, selector)
    }

    pub fn soft(max_skew: i32, key: &str, selector: LabelSelector) -> TopologySpreadConstraint {
        constraint(max_skew, key, UnsatisfiableAction::ScheduleAnyway, selector)
    }

    /// Adds a spread constraint to a pod.
    pub fn spread(b: PodBuilder, c: TopologySpreadConstraint) -> PodBuilder {
        b.with(|p| p.topology_spread_constraints.push(c))
    }

    /// Required node affinity `key In values`.
    pub fn affinity_in(b: PodBuilder, key: &str, values: &[&str]) -> PodBuilder {
        affinity(b, key, SelectorOp::In, values)
    }

    /// Required node affinity with one expression.
    pub fn affinity(b: PodBuilder, key: &str, op: SelectorOp, values: &[&str]) -> PodBuilder {
        let term = NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: key.into(),
                op,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            match_fields: vec![],
        };
        b.with(|p| p.required_node_affinity = Some(NodeSelector { terms: vec![term] }))
    }

    pub fn plugin(args: serde_json::Value) -> PodTopologySpread {
        let args: PodTopologySpreadArgs = decode_args(Some(&args)).unwrap();
        PodTopologySpread::from_args(&args).unwrap()
    }

    /// A plugin with no default constraints.
    pub fn list_plugin() -> PodTopologySpread {
        plugin(serde_json::json!({"defaultingType": "List"}))
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn args_validation() {
        let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
            ("no args means System", serde_json::Value::Null, None),
            ("system", json!({"defaultingType": "System"}), None),
            ("list without constraints", json!({"defaultingType": "List"}), None),
            (
                "valid list",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                     "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "minDomains": 2},
                ]}),
                None,
            ),
            ("unknown defaulting type", json!({"defaultingType": "unknown"}), Some("defaultingType")),
            (
                "system with constraints",
                json!({"defaultingType": "System", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "key", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultingType"),
            ),
            (
                "constraints with defaulted type",
                json!({"defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "key", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultingType"),
            ),
            (
                "maxSkew below one",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": -1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultConstraints[0].maxSkew"),
            ),
            (
                "maxSkew missing",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultConstraints[0].maxSkew"),
            ),
            (
                "empty topology key",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultConstraints[0].topologyKey"),
            ),
            (
                "invalid topology key",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "Bad_Prefix/zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultConstraints[0].topologyKey"),
            ),
            (
                "empty whenUnsatisfiable",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": ""}]}),
                Some("defaultConstraints[0].whenUnsatisfiable"),
            ),
            (
                "unknown whenUnsatisfiable",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "unknown action"}]}),
                Some("defaultConstraints[0].whenUnsatisfiable"),
            ),
            (
                "duplicated constraints",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("defaultConstraints[1]"),
            ),
            (
                "label selector present",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "key", "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"a": "b"}}}]}),
                Some("defaultConstraints[0].labelSelector"),
            ),
            (
                "bad policy value",
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "key", "whenUnsatisfiable": "DoNotSchedule",
                     "nodeTaintsPolicy": "Sometimes"}]}),
                Some("defaultConstraints[0].nodeTaintsPolicy"),
            ),
            ("unknown field", json!({"defaultingType": "List", "bogus": 1}), Some("bogus")),
            ("wrong type", json!({"defaultConstraints": 3}), Some("defaultConstraints")),
        ];
        for (name, args, want_path) in cases {
            let got = new(Some(&args));
            match (want_path, got) {
                (None, Ok(p)) => assert_eq!(p.name(), NAME, "{name}"),
                (Some(path), Err(e)) => assert_eq!(e.path, path, "{name}: {e}"),
                (None, Err(e)) => panic!("{name}: unexpected error {e}"),
                (Some(path), Ok(_)) => panic!("{name}: expected an error at {path}"),
            }
        }
    }

    #[test]
    fn args_error_messages_follow_kube() {
        let cases = [
            (
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]}),
                "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]}),
                "defaultConstraints[1]: Duplicate value: \"{node, DoNotSchedule}\"",
            ),
            (
                json!({"defaultingType": "Other"}),
                "defaultingType: Unsupported value: \"Other\": supported values: \"System\", \"List\"",
            ),
        ];
        for (args, want) in cases {
            let err = new(Some(&args)).err().map(|e| e.to_string());
            assert_eq!(err.as_deref(), Some(want));
        }
    }

    #[test]
    fn qualified_names() {
        let long = "x".repeat(64);
        for (key, ok) in [
            ("zone", true),
            ("topology.kubernetes.io/zone", true),
            ("a-b_c.d", true),
            ("/zone", false),
            ("a/b/c", false),
            ("-zone", false),
            ("Example.com/zone", false),
            ("example.com/", false),
            (long.as_str(), false),
        ] {
            assert_eq!(qualified_name_problem(key).is_none(), ok, "{key}");
        }
    }

    #[test]
    fn defaults_apply_only_to_owned_pods_without_constraints() {
        let system = plugin(json!({}));
        let list = plugin(json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor"},
            {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
        ]}));
        let owned = framework::testing::pod("p")
            .label("app", "web")
            .with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")])))
            .build();
        let orphan = framework::testing::pod("p").label("app", "web").build();
        let own_soft = spread(
            framework::testing::pod("p")
                .label("app", "web")
                .with(|p| p.owner_selector = Some(LabelSelector::from_match_labels([("app", "web")]))),
            soft(1, "rack", exists("app")),
        )
        .build();
        let empty_owner =
            framework::testing::pod("p").with(|p| p.owner_selector = Some(LabelSelector::everything())).build();

        use UnsatisfiableAction::*;
        let keys = |pl: &PodTopologySpread, pod: &Pod, action| -> Vec<(String, i32)> {
            pl.constraints_for(pod, action, &WorkloadSelectors::default())
                .into_iter()
                .map(|c| (c.topology_key, c.max_skew))
                .collect()
        };
        let s = |k: &str, n: i32| (k.to_string(), n);
        // (name, plugin, pod, action, wanted (key, maxSkew) list)
        type Case<'a> = (&'a str, &'a PodTopologySpread, &'a Pod, UnsatisfiableAction, Vec<(String, i32)>);
        let cases: Vec<Case> = vec![
            ("system soft", &system, &owned, ScheduleAnyway, vec![s(LABEL_HOSTNAME, 3), s(LABEL_ZONE, 5)]),
            ("system hard", &system, &owned, DoNotSchedule, vec![]),
            ("no owner", &system, &orphan, ScheduleAnyway, vec![]),
            ("empty owner selector", &system, &empty_owner, ScheduleAnyway, vec![]),
            ("own constraints win", &system, &own_soft, ScheduleAnyway, vec![s("rack", 1)]),
            ("own soft only, no hard", &list, &own_soft, DoNotSchedule, vec![]),
            ("list hard", &list, &owned, DoNotSchedule, vec![s("zone", 1)]),
            ("list soft", &list, &owned, ScheduleAnyway, vec![s("node", 2)]),
        ];
        for (name, pl, pod, action, want) in cases {
            assert_eq!(keys(pl, pod, action), want, "{name}");
        }
        // Defaults take the owner's selector and the configured policies.
        let c = &list.constraints_for(&owned, DoNotSchedule, &WorkloadSelectors::default())[0];
        assert_eq!(c.selector, LabelSelector::from_match_labels([("app", "web")]));
        assert_eq!(c.node_taints_policy, InclusionPolicy::Honor);
        assert_eq!(c.node_affinity_policy, InclusionPolicy::Honor);
    }

    #[test]
    fn registers_kube_events() {
        let pl = list_plugin();
        let events = pl.events_to_register();
        use EventAction::*;
        use EventResource::*;
        for (happened, want) in [
            (ClusterEvent::new(AssignedPod, Add), true),
            (ClusterEvent::new(AssignedPod, Delete), true),
            (ClusterEvent::new(AssignedPod, UpdateLabel), true),
            (ClusterEvent::new(AssignedPod, UpdateAllocatable), false),
            (ClusterEvent::new(Node, Add), true),
            (ClusterEvent::new(Node, Delete), true),
            (ClusterEvent::new(Node, UpdateLabel), true),
            (ClusterEvent::new(Node, UpdateTaint), true),
            (ClusterEvent::new(Node, UpdateAllocatable), false),
            (ClusterEvent::new(Namespace, Add), false),
        ] {
            assert_eq!(events.iter().any(|e| happened.triggers(e)), want, "{happened:?}");
        }
        assert!(pl.as_pre_filter().is_some() && pl.as_filter().is_some());
        assert!(pl.as_pre_score().is_some() && pl.as_score().is_some());
    }
}
