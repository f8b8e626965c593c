//! NodeAffinity (kube-scheduler's plugin of that name):
//! - PreFilter: skips pods with neither `nodeSelector` nor required node
//!   affinity (unless the profile adds affinity); when every required term
//!   names nodes through a `metadata.name` `In` field expression, restricts
//!   the cycle to those nodes.
//! - Filter: the node must match the profile's `addedAffinity`, then the
//!   pod's `nodeSelector` AND its required affinity.
//! - Score: the sum of the weights of the preferred terms (the pod's and
//!   the added ones) the node matches, normalised so the best node gets 100.
//!
//! Args: `addedAffinity`, a `v1.NodeAffinity` applied to every pod of the
//! profile. It is decoded and compiled here by a small private compiler
//! (there is no shared k8s-openapi conversion in the engine yet).

use std::collections::HashSet;
use std::sync::Arc;

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use framework::model::{Node, NodeSelector, NodeSelectorTerm, Pod, PreferredSchedulingTerm, SelectorOp};
use framework::registry::{ArgsError, decode_args};
use serde::{Deserialize, Deserializer};

use crate::helper::{default_normalize_score, required_node_affinity_matches};

pub const NAME: &str = "NodeAffinity";

/// The pod's `nodeSelector` or required affinity does not match the node.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// The profile's `addedAffinity` does not match the node.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// Every required term names nodes, and together they name none.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The only field a node selector may match on.
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAffinity {
    /// `addedAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    added_required: Option<NodeSelector>,
    /// `addedAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    added_preferred: Vec<PreferredSchedulingTerm>,
}

impl NodeAffinity {
    /// A plugin enforcing `added_required` (if any) on every pod and adding
    /// `added_preferred` to every pod's preferences, as `addedAffinity` does.
    pub fn new(added_required: Option<NodeSelector>, added_preferred: Vec<PreferredSchedulingTerm>) -> Self {
        NodeAffinity { added_required, added_preferred }
    }

    /// Whether `node` passes the profile's added affinity and the pod's own.
    pub fn matches(&self, pod: &Pod, node: &Node) -> bool {
        self.added_required.as_ref().is_none_or(|s| s.matches(node)) && required_node_affinity_matches(pod, node)
    }
}

/// Nodes the required terms confine the pod to, as kube computes them:
/// `None` when some term does not name nodes (terms are ORed, so any node
/// may then fit); otherwise the union over terms of the intersection of
/// each term's `metadata.name In` values (possibly empty: a conflict).
fn required_node_names(required: &NodeSelector) -> Option<HashSet<String>> {
    let mut names: Option<HashSet<String>> = None;
    for term in &required.terms {
        let mut term_names: Option<HashSet<&str>> = None;
        for r in &term.match_fields {
            if r.key != OBJECT_NAME_FIELD || r.op != SelectorOp::In {
                continue;
            }
            let values: HashSet<&str> = r.values.iter().map(String::as_str).collect();
            // Expressions in a term are ANDed: intersect.
            term_names = Some(match term_names {
                None => values,
                Some(prev) => prev.intersection(&values).copied().collect(),
            });
        }
        let term_names = term_names?;
        names.get_or_insert_with(HashSet::new).extend(term_names.into_iter().map(str::to_string));
    }
    names
}

fn preferred_score(terms: &[PreferredSchedulingTerm], node: &Node) -> i64 {
    terms.iter().filter(|t| t.term.matches(node)).map(|t| i64::from(t.weight)).sum()
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node added or relabelled may match the pod's selector.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
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

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, _state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        // The pod's selector and affinity were compiled when it entered the
        // cache; Filter reads them from the pod, so there is no state to write.
        let Some(required) = pod.required_node_affinity.as_ref() else {
            if self.added_required.is_none() && pod.node_selector.is_empty() {
                return (PreFilterResult::default(), Status::skip());
            }
            return (PreFilterResult::default(), Status::success());
        };
        match required_node_names(required) {
            Some(names) if names.is_empty() => (PreFilterResult::default(), Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => (PreFilterResult { node_names: Some(names) }, Status::success()),
            None => (PreFilterResult::default(), Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        if self.added_required.as_ref().is_some_and(|s| !s.matches(&node.node)) {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        if required_node_affinity_matches(pod, &node.node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(&self, _state: &mut CycleState, pod: &Pod, _nodes: NodeList<'_>) -> Status {
        if pod.preferred_node_affinity.is_empty() && self.added_preferred.is_empty() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        Ok(preferred_score(&self.added_preferred, &node.node)
            + preferred_score(&pod.preferred_node_affinity, &node.node))
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

// ------------------------------------------------------------------- args

/// `NodeAffinityArgs`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeAffinityArgs {
    #[serde(default)]
    added_affinity: Option<ApiNodeAffinity>,
}

/// `v1.NodeAffinity` in the API's JSON shape.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiNodeAffinity {
    #[serde(default)]
    required_during_scheduling_ignored_during_execution: Option<ApiNodeSelector>,
    #[serde(default, deserialize_with = "null_as_default")]
    preferred_during_scheduling_ignored_during_execution: Vec<ApiPreferredTerm>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiNodeSelector {
    #[serde(default, deserialize_with = "null_as_default")]
    node_selector_terms: Vec<ApiTerm>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiTerm {
    #[serde(default, deserialize_with = "null_as_default")]
    match_expressions: Vec<ApiRequirement>,
    #[serde(default, deserialize_with = "null_as_default")]
    match_fields: Vec<ApiRequirement>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiRequirement {
    key: String,
    operator: String,
    #[serde(default, deserialize_with = "null_as_default")]
    values: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiPreferredTerm {
    weight: i32,
    preference: ApiTerm,
}

/// Go decodes `null` lists as empty; so do we.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

const REQUIRED_PATH: &str = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED_PATH: &str = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution";

/// Compiles `addedAffinity`, validating as kube's `ValidateNodeAffinityArgs`
/// does (selector requirements as `labels.NewRequirement` checks them).
fn compile_added(a: ApiNodeAffinity) -> Result<NodeAffinity, ArgsError> {
    let added_required = match a.required_during_scheduling_ignored_during_execution {
        None => None,
        Some(sel) => {
            let mut terms = Vec::with_capacity(sel.node_selector_terms.len());
            for (i, t) in sel.node_selector_terms.into_iter().enumerate() {
                terms.push(compile_term(t, &format!("{REQUIRED_PATH}.nodeSelectorTerms[{i}]"))?);
            }
            Some(NodeSelector { terms })
        }
    };
    let mut added_preferred = Vec::new();
    for (i, p) in a.preferred_during_scheduling_ignored_during_execution.into_iter().enumerate() {
        // A pod's own preferred terms weigh 1 to 100 (the API server's rule); a
        // negative one would make the summed score negative, which no
        // normalisation accepts.
        ArgsError::check(format!("{PREFERRED_PATH}[{i}].weight"), framework::bounds::int(p.weight, 0, 100))?;
        let term = compile_term(p.preference, &format!("{PREFERRED_PATH}[{i}].preference"))?;
        // kube drops zero-weight and empty terms: they can never add to a score.
        if p.weight != 0 && !(term.match_expressions.is_empty() && term.match_fields.is_empty()) {
            added_preferred.push(PreferredSchedulingTerm { weight: p.weight, term });
        }
    }
    Ok(NodeAffinity::new(added_required, added_preferred))
}

fn compile_term(t: ApiTerm, path: &str) -> Result<NodeSelectorTerm, ArgsError> {
    let mut term = NodeSelectorTerm::default();
    for (i, r) in t.match_expressions.into_iter().enumerate() {
        term.match_expressions.push(compile_label_requirement(r, &format!("{path}.matchExpressions[{i}]"))?);
    }
    for (i, r) in t.match_fields.into_iter().enumerate() {
        term.match_fields.push(compile_field_requirement(r, &format!("{path}.matchFields[{i}]"))?);
    }
    Ok(term)
}

fn parse_op(op: &str, path: &str) -> Result<SelectorOp, ArgsError> {
    Ok(match op {
        "In" => SelectorOp::In,
        "NotIn" => SelectorOp::NotIn,
        "Exists" => SelectorOp::Exists,
        "DoesNotExist" => SelectorOp::DoesNotExist,
        "Gt" => SelectorOp::Gt,
        "Lt" => SelectorOp::Lt,
        other => {
            return Err(ArgsError::new(
                format!("{path}.operator"),
                format!(
                    "unsupported operator {other:?}: supported values: \"In\", \"NotIn\", \"Exists\", \
                     \"DoesNotExist\", \"Gt\", \"Lt\""
                ),
            ));
        }
    })
}

fn compile_label_requirement(r: ApiRequirement, path: &str) -> Result<framework::model::Requirement, ArgsError> {
    let op = parse_op(&r.operator, path)?;
    if let Err(m) = validate_qualified_name(&r.key) {
        return Err(ArgsError::new(format!("{path}.key"), format!("invalid label key {:?}: {m}", r.key)));
    }
    let values_path = format!("{path}.values");
    match op {
        SelectorOp::In | SelectorOp::NotIn if r.values.is_empty() => {
            return Err(ArgsError::new(values_path, "for 'In', 'NotIn' operators, values set can't be empty"));
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !r.values.is_empty() => {
            return Err(ArgsError::new(values_path, "values set must be empty for exists and does not exist"));
        }
        SelectorOp::Gt | SelectorOp::Lt => {
            if r.values.len() != 1 {
                return Err(ArgsError::new(values_path, "for 'Gt', 'Lt' operators, exactly one value is required"));
            }
            if r.values[0].parse::<i64>().is_err() {
                return Err(ArgsError::new(
                    format!("{values_path}[0]"),
                    format!("for 'Gt', 'Lt' operators, the value must be an integer, not {:?}", r.values[0]),
                ));
            }
        }
        _ => {}
    }
    for (i, v) in r.values.iter().enumerate() {
        if let Err(m) = validate_label_value(v) {
            return Err(ArgsError::new(format!("{values_path}[{i}]"), format!("invalid label value {v:?}: {m}")));
        }
    }
    Ok(framework::model::Requirement { key: r.key, op, values: r.values })
}

/// Field requirements: only `metadata.name`, with `In` or `NotIn` and
/// exactly one value (kube accepts other keys in args but they never
/// match a node; we reject them so the mistake is seen).
fn compile_field_requirement(r: ApiRequirement, path: &str) -> Result<framework::model::Requirement, ArgsError> {
    if r.key != OBJECT_NAME_FIELD {
        return Err(ArgsError::new(
            format!("{path}.key"),
            format!("unsupported field {:?}: only {OBJECT_NAME_FIELD:?} is supported", r.key),
        ));
    }
    let op = match r.operator.as_str() {
        "In" => SelectorOp::In,
        "NotIn" => SelectorOp::NotIn,
        other => {
            return Err(ArgsError::new(
                format!("{path}.operator"),
                format!("unsupported operator {other:?}: supported values: \"In\", \"NotIn\""),
            ));
        }
    };
    if r.values.len() != 1 {
        return Err(ArgsError::new(format!("{path}.values"), "must have one element"));
    }
    Ok(framework::model::Requirement { key: r.key, op, values: r.values })
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn validate_name_part(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        return Err("name part must be non-empty");
    }
    if s.len() > 63 {
        return Err("name part must be no more than 63 characters");
    }
    let ok_inner = s.chars().all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'));
    let ok_ends = s.starts_with(is_alnum) && s.ends_with(is_alnum);
    if ok_inner && ok_ends {
        Ok(())
    } else {
        Err(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        )
    }
}

/// A DNS-1123 subdomain: lower-case labels joined by dots, at most 253 characters.
fn validate_dns_subdomain(s: &str) -> Result<(), &'static str> {
    if s.len() > 253 {
        return Err("prefix part must be no more than 253 characters");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.split('.').all(label_ok) { Ok(()) } else { Err("prefix part must be a lowercase RFC 1123 subdomain") }
}

/// A label key: `[prefix/]name`.
fn validate_qualified_name(key: &str) -> Result<(), &'static str> {
    match key.split_once('/') {
        None => validate_name_part(key),
        Some((prefix, name)) => {
            if name.contains('/') {
                return Err("a qualified name must consist of an optional prefix and a name separated by '/'");
            }
            if prefix.is_empty() {
                return Err("prefix part must be non-empty");
            }
            validate_dns_subdomain(prefix)?;
            validate_name_part(name)
        }
    }
}

/// A label value: empty, or a name part.
fn validate_label_value(v: &str) -> Result<(), &'static str> {
    if v.is_empty() { Ok(()) } else { validate_name_part(v) }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: NodeAffinityArgs = decode_args(args)?;
    let plugin = match args.added_affinity {
        None => NodeAffinity::default(),
        Some(a) => compile_added(a)?,
    };
    Ok(Arc::new(plugin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::NodeInfo;
    use framework::framework::Code;
    use framework::model::Requirement;
    use framework::testing::{NodeBuilder, PodBuilder, node, pod};
    use serde_json::json;

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|s| s.to_string()).collect() }
    }

    fn exprs(rs: Vec<Requirement>) -> NodeSelectorTerm {
        NodeSelectorTerm { match_expressions: rs, match_fields: vec![] }
    }

    fn fields(rs: Vec<Requirement>) -> NodeSelectorTerm {
        NodeSelectorTerm { match_expressions: vec![], match_fields: rs }
    }

    fn required(terms: Vec<NodeSelectorTerm>) -> impl FnOnce(&mut Pod) {
        move |p: &mut Pod| p.required_node_affinity = Some(NodeSelector { terms })
    }

    fn preferred(terms: Vec<(i32, NodeSelectorTerm)>) -> impl FnOnce(&mut Pod) {
        move |p: &mut Pod| {
            p.preferred_node_affinity =
                terms.into_iter().map(|(weight, term)| PreferredSchedulingTerm { weight, term }).collect()
        }
    }

    fn info(n: NodeBuilder) -> NodeInfo {
        NodeInfo::new(n.build())
    }

    fn plugin(args: serde_json::Value) -> NodeAffinity {
        let NodeAffinityArgs { added_affinity } = decode_args(Some(&args)).unwrap();
        compile_added(added_affinity.unwrap_or_default()).unwrap()
    }

    /// Runs PreFilter and (unless it skipped or rejected) Filter.
    fn run_filter(pl: &NodeAffinity, p: &Pod, n: &NodeInfo) -> Status {
        let snap = Snapshot::new();
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, p, &snap);
        if s.is_skip() {
            return Status::success();
        }
        if !s.is_success() {
            return s;
        }
        pl.filter(&state, p, &n.view())
    }

    #[test]
    fn filter_table() {
        use SelectorOp::*;
        let cases: Vec<(&str, PodBuilder, NodeBuilder, Option<&str>)> = vec![
            ("no selector, no affinity", pod("p"), node("n").label("foo", "bar"), None),
            ("nodeSelector missing label", pod("p").node_selector("foo", "bar"), node("n"), Some(ERR_REASON_POD)),
            ("nodeSelector matches", pod("p").node_selector("foo", "bar"), node("n").label("foo", "bar"), None),
            (
                "nodeSelector value differs",
                pod("p").node_selector("foo", "bar"),
                node("n").label("foo", "baz"),
                Some(ERR_REASON_POD),
            ),
            (
                "every nodeSelector label must match",
                pod("p").node_selector("foo", "bar").node_selector("baz", "qux"),
                node("n").label("foo", "bar"),
                Some(ERR_REASON_POD),
            ),
            (
                "empty nodeSelectorTerms match nothing",
                pod("p").with(required(vec![])),
                node("n").label("foo", "bar"),
                Some(ERR_REASON_POD),
            ),
            (
                "an empty term matches nothing",
                pod("p").with(required(vec![NodeSelectorTerm::default()])),
                node("n").label("foo", "bar"),
                Some(ERR_REASON_POD),
            ),
            (
                "an empty term ORed with a matching one",
                pod("p").with(required(vec![NodeSelectorTerm::default(), exprs(vec![req("foo", Exists, &[])])])),
                node("n").label("foo", "bar"),
                None,
            ),
            (
                "In matches",
                pod("p").with(required(vec![exprs(vec![req("foo", In, &["value1", "bar"])])])),
                node("n").label("foo", "bar"),
                None,
            ),
            (
                "In misses",
                pod("p").with(required(vec![exprs(vec![req("foo", In, &["value1"])])])),
                node("n").label("foo", "bar"),
                Some(ERR_REASON_POD),
            ),
            (
                "NotIn on an absent key matches",
                pod("p").with(required(vec![exprs(vec![req("foo", NotIn, &["bar"])])])),
                node("n"),
                None,
            ),
            (
                "DoesNotExist",
                pod("p").with(required(vec![exprs(vec![req("foo", DoesNotExist, &[])])])),
                node("n").label("foo", "bar"),
                Some(ERR_REASON_POD),
            ),
            (
                "Gt compares integers",
                pod("p").with(required(vec![exprs(vec![req("gpus", Gt, &["4"])])])),
                node("n").label("gpus", "8"),
                None,
            ),
            (
                "Gt is strict",
                pod("p").with(required(vec![exprs(vec![req("gpus", Gt, &["8"])])])),
                node("n").label("gpus", "8"),
                Some(ERR_REASON_POD),
            ),
            (
                "Lt with a non-integer label never matches",
                pod("p").with(required(vec![exprs(vec![req("gpus", Lt, &["8"])])])),
                node("n").label("gpus", "many"),
                Some(ERR_REASON_POD),
            ),
            (
                "expressions in a term are ANDed",
                pod("p").with(required(vec![exprs(vec![req("foo", Exists, &[]), req("zone", In, &["a"])])])),
                node("n").label("foo", "bar").label("zone", "b"),
                Some(ERR_REASON_POD),
            ),
            (
                "terms are ORed",
                pod("p")
                    .with(required(vec![exprs(vec![req("zone", In, &["a"])]), exprs(vec![req("zone", In, &["b"])])])),
                node("n").label("zone", "b"),
                None,
            ),
            (
                "nodeSelector and affinity are ANDed",
                pod("p").node_selector("foo", "bar").with(required(vec![exprs(vec![req("zone", In, &["a"])])])),
                node("n").label("zone", "a"),
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields on metadata.name",
                pod("p").with(required(vec![fields(vec![req(OBJECT_NAME_FIELD, In, &["n"])])])),
                node("n"),
                None,
            ),
            (
                "matchFields on another name",
                pod("p").with(required(vec![fields(vec![req(OBJECT_NAME_FIELD, In, &["m"])])])),
                node("n"),
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields NotIn",
                pod("p").with(required(vec![fields(vec![req(OBJECT_NAME_FIELD, NotIn, &["n"])])])),
                node("n"),
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields and matchExpressions in one term are ANDed",
                pod("p").with(required(vec![NodeSelectorTerm {
                    match_expressions: vec![req("foo", In, &["bar"])],
                    match_fields: vec![req(OBJECT_NAME_FIELD, In, &["n"])],
                }])),
                node("n").label("foo", "baz"),
                Some(ERR_REASON_POD),
            ),
            (
                "name terms with an empty intersection conflict",
                pod("p").with(required(vec![fields(vec![
                    req(OBJECT_NAME_FIELD, In, &["n"]),
                    req(OBJECT_NAME_FIELD, In, &["m"]),
                ])])),
                node("n"),
                Some(ERR_REASON_CONFLICT),
            ),
        ];
        let pl = NodeAffinity::default();
        for (name, p, n, want) in cases {
            let s = run_filter(&pl, &p.build(), &info(n));
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(reason) => {
                    assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), reason, "{name}");
                }
            }
        }
    }

    #[test]
    fn added_affinity_is_enforced_first() {
        let pl = plugin(json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["foo"]}]}]
        }}}));
        let cases: Vec<(&str, PodBuilder, NodeBuilder, Option<&str>)> = vec![
            ("pod without affinity, node matches", pod("p"), node("n").label("zone", "foo"), None),
            (
                "pod without affinity, node does not match",
                pod("p"),
                node("n").label("zone", "bar"),
                Some(ERR_REASON_ENFORCED),
            ),
            ("both must match", pod("p").node_selector("x", "y"), node("n").label("zone", "foo"), Some(ERR_REASON_POD)),
            (
                "added affinity reported before the pod's",
                pod("p").node_selector("x", "y"),
                node("n"),
                Some(ERR_REASON_ENFORCED),
            ),
            ("both match", pod("p").node_selector("x", "y"), node("n").label("zone", "foo").label("x", "y"), None),
        ];
        for (name, p, n, want) in cases {
            let p = p.build();
            // The added affinity alone keeps PreFilter from skipping.
            let (_, pre) = pl.pre_filter(&mut CycleState::new(), &p, &Snapshot::new());
            assert!(pre.is_success(), "{name}: {pre:?}");
            let n = info(n);
            let s = run_filter(&pl, &p, &n);
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(reason) => {
                    assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), reason, "{name}");
                }
            }
            assert_eq!(pl.matches(&p, &n.node), want.is_none(), "{name}: matches");
        }
    }

    #[test]
    fn pre_filter_table() {
        use SelectorOp::*;
        let names = |ns: &[&str]| Some(ns.iter().map(|s| s.to_string()).collect::<HashSet<_>>());
        let name_in = |ns: &[&str]| req(OBJECT_NAME_FIELD, In, ns);
        let cases: Vec<(&str, PodBuilder, Code, Option<HashSet<String>>)> = vec![
            ("nothing to do", pod("p"), Code::Skip, None),
            ("nodeSelector only", pod("p").node_selector("a", "b"), Code::Success, None),
            ("empty terms", pod("p").with(required(vec![])), Code::Success, None),
            (
                "label terms only",
                pod("p").with(required(vec![exprs(vec![req("a", Exists, &[])])])),
                Code::Success,
                None,
            ),
            (
                "one term naming nodes",
                pod("p").with(required(vec![fields(vec![name_in(&["n1", "n2"])])])),
                Code::Success,
                names(&["n1", "n2"]),
            ),
            (
                "names intersect within a term",
                pod("p").with(required(vec![fields(vec![name_in(&["n1", "n2"]), name_in(&["n2", "n3"])])])),
                Code::Success,
                names(&["n2"]),
            ),
            (
                "names unite across terms",
                pod("p").with(required(vec![fields(vec![name_in(&["n1"])]), fields(vec![name_in(&["n2"])])])),
                Code::Success,
                names(&["n1", "n2"]),
            ),
            (
                "a term without names lets any node through",
                pod("p").with(required(vec![fields(vec![name_in(&["n1"])]), exprs(vec![req("a", Exists, &[])])])),
                Code::Success,
                None,
            ),
            (
                "NotIn does not name nodes",
                pod("p").with(required(vec![fields(vec![req(OBJECT_NAME_FIELD, NotIn, &["n1"])])])),
                Code::Success,
                None,
            ),
            (
                "label expressions beside names keep the names",
                pod("p").with(required(vec![NodeSelectorTerm {
                    match_expressions: vec![req("a", Exists, &[])],
                    match_fields: vec![name_in(&["n1"])],
                }])),
                Code::Success,
                names(&["n1"]),
            ),
            (
                "every term empty after intersection",
                pod("p").with(required(vec![
                    fields(vec![name_in(&["n1"]), name_in(&["n2"])]),
                    fields(vec![name_in(&["n3"]), name_in(&["n4"])]),
                ])),
                Code::UnschedulableAndUnresolvable,
                None,
            ),
            (
                "one empty term among naming terms is fine",
                pod("p").with(required(vec![
                    fields(vec![name_in(&["n1"]), name_in(&["n2"])]),
                    fields(vec![name_in(&["n3"])]),
                ])),
                Code::Success,
                names(&["n3"]),
            ),
        ];
        let pl = NodeAffinity::default();
        for (name, p, code, want_names) in cases {
            let (res, s) = pl.pre_filter(&mut CycleState::new(), &p.build(), &Snapshot::new());
            assert_eq!(s.code, code, "{name}: {s:?}");
            assert_eq!(res.node_names, want_names, "{name}");
            if code == Code::UnschedulableAndUnresolvable {
                assert_eq!(s.message(), ERR_REASON_CONFLICT, "{name}");
            }
        }
    }

    #[test]
    fn score_table() {
        use SelectorOp::*;
        let prefs = || {
            preferred(vec![
                (2, exprs(vec![req("foo", In, &["bar"])])),
                (4, exprs(vec![req("key", In, &["value"])])),
                (5, exprs(vec![req("az", In, &["az1"]), req("key", Exists, &[])])),
            ])
        };
        struct Case {
            name: &'static str,
            pl: NodeAffinity,
            pod: PodBuilder,
            nodes: Vec<NodeBuilder>,
            skip: bool,
            raw: Vec<i64>,
            want: Vec<i64>,
        }
        let cases = vec![
            Case {
                name: "no preferences: PreScore skips",
                pl: NodeAffinity::default(),
                pod: pod("p"),
                nodes: vec![],
                skip: true,
                raw: vec![],
                want: vec![],
            },
            Case {
                name: "no node matches",
                pl: NodeAffinity::default(),
                pod: pod("p").with(prefs()),
                nodes: vec![node("n1"), node("n2").label("foo", "baz")],
                skip: false,
                raw: vec![0, 0],
                want: vec![0, 0],
            },
            Case {
                name: "weights of matching terms add up; best node gets 100",
                pl: NodeAffinity::default(),
                pod: pod("p").with(prefs()),
                nodes: vec![
                    node("n1").label("foo", "bar"),
                    node("n2").label("key", "value").label("az", "az1"),
                    node("n3").label("foo", "bar").label("key", "value").label("az", "az1"),
                ],
                skip: false,
                raw: vec![2, 9, 11],
                want: vec![18, 81, 100],
            },
            Case {
                name: "an empty preferred term never matches",
                pl: NodeAffinity::default(),
                pod: pod("p").with(preferred(vec![(10, NodeSelectorTerm::default())])),
                nodes: vec![node("n1").label("foo", "bar")],
                skip: false,
                raw: vec![0],
                want: vec![0],
            },
            Case {
                name: "matchFields in a preference",
                pl: NodeAffinity::default(),
                pod: pod("p").with(preferred(vec![(7, fields(vec![req(OBJECT_NAME_FIELD, In, &["n2"])]))])),
                nodes: vec![node("n1"), node("n2")],
                skip: false,
                raw: vec![0, 7],
                want: vec![0, 100],
            },
            Case {
                name: "added preferences score pods without their own",
                pl: plugin(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}}
                ]}})),
                pod: pod("p"),
                nodes: vec![node("n1").label("foo", "bar"), node("n2")],
                skip: false,
                raw: vec![5, 0],
                want: vec![100, 0],
            },
            Case {
                name: "added and pod preferences add up",
                pl: plugin(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
                ]}})),
                pod: pod("p").with(prefs()),
                nodes: vec![
                    node("n1").label("zone", "a"),
                    node("n2").label("foo", "bar"),
                    node("n3").label("foo", "bar").label("zone", "a"),
                ],
                skip: false,
                raw: vec![3, 2, 5],
                want: vec![60, 40, 100],
            },
        ];
        for c in cases {
            let p = c.pod.build();
            let mut state = CycleState::new();
            let s = c.pl.pre_score(&mut state, &p, Snapshot::new().node_list());
            assert_eq!(s.is_skip(), c.skip, "{}: {s:?}", c.name);
            if c.skip {
                continue;
            }
            let mut scores: Vec<i64> =
                c.nodes.into_iter().map(|n| c.pl.score(&state, &p, &info(n).view()).unwrap()).collect();
            assert_eq!(scores, c.raw, "{}: raw", c.name);
            assert!(c.pl.normalize(&state, &p, &mut scores).is_success());
            assert_eq!(scores, c.want, "{}: normalized", c.name);
        }
    }

    #[test]
    fn args_table() {
        let ok = |v: serde_json::Value| new(Some(&v)).map(|_| ());
        let err_path = |v: serde_json::Value| new(Some(&v)).err().map(|e| e.path);
        let req = |e: serde_json::Value| json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [e]}]}}});
        let field = |e: serde_json::Value| json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [e]}]}}});
        let rp = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";

        assert!(new(None).is_ok());
        assert!(ok(json!({})).is_ok());
        assert!(ok(json!({"addedAffinity": null})).is_ok());
        assert!(ok(req(json!({"key": "example.com/zone", "operator": "In", "values": ["a", ""]}))).is_ok());
        assert!(ok(req(json!({"key": "gpus", "operator": "Gt", "values": ["3"]}))).is_ok());
        assert!(ok(req(json!({"key": "gpus", "operator": "Exists", "values": null}))).is_ok());
        assert!(ok(field(json!({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}))).is_ok());

        let cases: Vec<(&str, serde_json::Value, String)> = vec![
            ("unknown top-level field", json!({"addedAfinity": {}}), "addedAfinity".into()),
            (
                "unknown nested field",
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"terms": []}}}),
                "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.terms".into(),
            ),
            (
                "bad operator",
                req(json!({"key": "a", "operator": "Equals", "values": ["b"]})),
                format!("{rp}.matchExpressions[0].operator"),
            ),
            (
                "In without values",
                req(json!({"key": "a", "operator": "In"})),
                format!("{rp}.matchExpressions[0].values"),
            ),
            (
                "Exists with values",
                req(json!({"key": "a", "operator": "Exists", "values": ["b"]})),
                format!("{rp}.matchExpressions[0].values"),
            ),
            (
                "Gt with two values",
                req(json!({"key": "a", "operator": "Gt", "values": ["1", "2"]})),
                format!("{rp}.matchExpressions[0].values"),
            ),
            (
                "Lt with a non-integer",
                req(json!({"key": "a", "operator": "Lt", "values": ["ten"]})),
                format!("{rp}.matchExpressions[0].values[0]"),
            ),
            (
                // Values must also be valid label values, so kube rejects negative bounds.
                "Gt with a negative value",
                req(json!({"key": "a", "operator": "Gt", "values": ["-3"]})),
                format!("{rp}.matchExpressions[0].values[0]"),
            ),
            (
                "invalid key",
                req(json!({"key": "-bad", "operator": "Exists"})),
                format!("{rp}.matchExpressions[0].key"),
            ),
            (
                "invalid key prefix",
                req(json!({"key": "Example.com/zone", "operator": "Exists"})),
                format!("{rp}.matchExpressions[0].key"),
            ),
            (
                "invalid value",
                req(json!({"key": "a", "operator": "In", "values": ["has space"]})),
                format!("{rp}.matchExpressions[0].values[0]"),
            ),
            (
                "field other than metadata.name",
                field(json!({"key": "spec.unschedulable", "operator": "In", "values": ["true"]})),
                format!("{rp}.matchFields[0].key"),
            ),
            (
                "field with Exists",
                field(json!({"key": "metadata.name", "operator": "Exists"})),
                format!("{rp}.matchFields[0].operator"),
            ),
            (
                "field with two values",
                field(json!({"key": "metadata.name", "operator": "In", "values": ["a", "b"]})),
                format!("{rp}.matchFields[0].values"),
            ),
            (
                "bad preferred term",
                json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}}
                ]}}),
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values[0]"
                    .into(),
            ),
            (
                "weight of the wrong type",
                json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": "high", "preference": {}}
                ]}}),
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight".into(),
            ),
        ];
        for (name, v, path) in cases {
            assert_eq!(err_path(v), Some(path), "{name}");
        }
    }

    #[test]
    fn added_preferred_drops_useless_terms() {
        let pl = plugin(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
            {"weight": 3, "preference": {}},
            {"weight": 4, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
        ]}}));
        assert_eq!(pl.added_preferred.len(), 1);
        assert_eq!(pl.added_preferred[0].weight, 4);
        assert!(pl.added_required.is_none());
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_pre_filter().is_some());
        assert!(p.as_filter().is_some());
        assert!(p.as_pre_score().is_some());
        assert!(p.as_score().is_some_and(|s| s.has_normalize()));
    }
}
