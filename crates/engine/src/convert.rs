//! Builds the engine's [`model::Pod`] and [`model::Node`] from k8s-openapi
//! objects, once, when they enter the cache: requests are aggregated,
//! selectors compiled and validated, so the hot path never re-parses.
//!
//! The rules follow kube-scheduler v1.36 (`k8s.io/component-helpers/resource`
//! `PodRequests`, the scheduler's `PodInfo.CalculateResource`, and the
//! selector parsing of `component-helpers/scheduling/corev1/nodeaffinity`).
//! Manifests given to the simulator have not been through the API server,
//! so the API defaults the scheduler relies on are applied here too:
//! container requests default to limits, pod-level requests to pod-level
//! limits, `hostPort` to `containerPort` under `hostNetwork`, allocatable to
//! capacity, and `matchLabelKeys` merged into selectors. Objects that did
//! come from the API server are unaffected by these (already defaulted).
//! Invalid fields are errors naming the field path, worded like the API's
//! field errors.

use std::collections::BTreeMap;
use std::fmt::Display;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use thiserror::Error;

use crate::model::{
    self, AffinityTerm, HostPort, InclusionPolicy, NodeSelector, NodeSelectorTerm, PreferredSchedulingTerm,
    Requirement, SelectorOp, Taint, TaintEffect, Toleration, TolerationOp, TopologySpreadConstraint,
    UnsatisfiableAction, WeightedAffinityTerm,
};
use crate::quantity::Quantity;
use crate::resources::{
    self, CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, EPHEMERAL_STORAGE, MEMORY, PODS, Resources,
};

/// `metadata.namespace` when a manifest leaves it out.
pub const DEFAULT_NAMESPACE: &str = "default";
/// `spec.schedulerName` when a manifest leaves it out.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// Priorities of the two built-in priority classes, used when a pod names
/// the class but `spec.priority` was not resolved by the API server.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
pub const SYSTEM_NODE_CRITICAL_PRIORITY: i32 = 2_000_001_000;
pub const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
pub const SYSTEM_CLUSTER_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// A field of the object that cannot be converted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{path}: {message}")]
pub struct ConvertError {
    /// Field path inside the object, e.g. `spec.containers[1].resources.requests.cpu`.
    pub path: String,
    pub message: String,
}

// ------------------------------------------------------------ field errors
// Worded as apimachinery's `field.Error` bodies so users see familiar text.

fn required(path: impl Into<String>, detail: &str) -> ConvertError {
    let message = if detail.is_empty() { "Required value".to_string() } else { format!("Required value: {detail}") };
    ConvertError { path: path.into(), message }
}

/// `bad` is already rendered (quoted string, number or JSON).
fn invalid(path: impl Into<String>, bad: impl Display, detail: &str) -> ConvertError {
    ConvertError { path: path.into(), message: format!("Invalid value: {bad}: {detail}") }
}

fn unsupported(path: impl Into<String>, bad: &str, supported: &[&str]) -> ConvertError {
    let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    ConvertError { path: path.into(), message: format!("Unsupported value: {bad:?}: supported values: {list}") }
}

/// A list of values as the API renders it in errors (JSON; `null` when unset).
fn json_values(values: Option<&Vec<String>>) -> String {
    serde_json::to_string(&values).unwrap_or_else(|_| "null".to_string())
}

// ----------------------------------------------------------- resource lists

/// Resource name to amount. Presence matters as in Go's `ResourceList`: a
/// request set to 0 is not "missing" for the non-zero defaults.
type ResourceList = BTreeMap<String, Quantity>;

fn parse_resource_list(list: Option<&BTreeMap<String, K8sQuantity>>, path: &str) -> Result<ResourceList, ConvertError> {
    let mut out = ResourceList::new();
    for (name, q) in list.into_iter().flatten() {
        let parsed = Quantity::parse(&q.0)
            .map_err(|e| invalid(format!("{path}.{name}"), format_args!("{:?}", q.0), e.reason))?;
        out.insert(name.clone(), parsed);
    }
    Ok(out)
}

fn add_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        let sum = into.get(name).copied().unwrap_or_default().saturating_add(*q);
        into.insert(name.clone(), sum);
    }
}

fn max_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        if into.get(name).is_none_or(|cur| q > cur) {
            into.insert(name.clone(), *q);
        }
    }
}

/// Go's `applyNonMissing`: a copy of `list` where each resource of
/// `non_missing` that `list` lacks takes the default.
fn with_non_missing(list: &ResourceList, non_missing: &ResourceList) -> ResourceList {
    let mut out = list.clone();
    for (name, q) in non_missing {
        out.entry(name.clone()).or_insert(*q);
    }
    out
}

/// Converts to the engine's integer units: cpu in milli, memory and
/// ephemeral storage in bytes, extended/hugepages resources as counts.
/// `pods` only when `with_pods` (node allocatable); other names are ignored.
fn to_resources(list: &ResourceList, with_pods: bool) -> Resources {
    let mut r = Resources::default();
    for (name, q) in list {
        match name.as_str() {
            CPU => r.milli_cpu = q.milli_value(),
            MEMORY => r.memory = q.value(),
            EPHEMERAL_STORAGE => r.ephemeral_storage = q.value(),
            PODS if with_pods => r.allowed_pod_number = q.value(),
            n if resources::is_scalar_resource_name(n) => r.set(n, q.value()),
            _ => {}
        }
    }
    r
}

/// Pod-level resources (`spec.resources`) may set cpu, memory and hugepages.
fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || resources::is_hugepages(name)
}

// -------------------------------------------------------- request math

struct InitContainer {
    requests: ResourceList,
    /// `restartPolicy: Always`: a sidecar that keeps running beside the app.
    sidecar: bool,
}

/// The requests of every container, parsed once.
struct ContainerRequests {
    app: Vec<ResourceList>,
    init: Vec<InitContainer>,
}

/// A container's requests with the API's defaulting: a resource with a
/// limit but no request requests its limit.
fn container_requests(c: &corev1::Container, path: &str) -> Result<ResourceList, ConvertError> {
    let res = c.resources.as_ref();
    let mut requests =
        parse_resource_list(res.and_then(|r| r.requests.as_ref()), &format!("{path}.resources.requests"))?;
    let limits = parse_resource_list(res.and_then(|r| r.limits.as_ref()), &format!("{path}.resources.limits"))?;
    for (name, q) in limits {
        requests.entry(name).or_insert(q);
    }
    Ok(requests)
}

fn is_sidecar(c: &corev1::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

impl ContainerRequests {
    fn parse(spec: &corev1::PodSpec) -> Result<Self, ConvertError> {
        let app = spec
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| container_requests(c, &format!("spec.containers[{i}]")))
            .collect::<Result<_, _>>()?;
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                Ok(InitContainer {
                    requests: container_requests(c, &format!("spec.initContainers[{i}]"))?,
                    sidecar: is_sidecar(c),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ContainerRequests { app, init })
    }

    /// The sidecar-aware aggregate (KEP-753), per resource: the larger of
    /// the app containers plus all sidecars, and the peak over init
    /// containers of each one's request plus the sidecars started before it.
    fn aggregate(&self, non_missing: &ResourceList) -> ResourceList {
        let mut total = ResourceList::new();
        for c in &self.app {
            add_list(&mut total, &with_non_missing(c, non_missing));
        }
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for ic in &self.init {
            let req = with_non_missing(&ic.requests, non_missing);
            if ic.sidecar {
                add_list(&mut total, &req);
                add_list(&mut sidecars, &req);
                max_list(&mut init_peak, &sidecars);
            } else {
                let mut running = req;
                add_list(&mut running, &sidecars);
                max_list(&mut init_peak, &running);
            }
        }
        max_list(&mut total, &init_peak);
        total
    }

    /// Go's `PodRequests`: the aggregate, with pod-level requests replacing
    /// the resources they set, plus overhead.
    fn pod_requests(
        &self,
        pod_level: Option<&ResourceList>,
        overhead: &ResourceList,
        non_missing: &ResourceList,
    ) -> ResourceList {
        let mut reqs = self.aggregate(non_missing);
        for (name, q) in pod_level.into_iter().flatten() {
            reqs.insert(name.clone(), *q);
        }
        add_list(&mut reqs, overhead);
        reqs
    }
}

/// Effective pod-level requests with the API's defaulting (KEP-2837): when
/// pod-level limits are set, a missing pod-level cpu/memory request takes
/// the containers' aggregate, else the pod-level limit. None when no
/// supported resource is requested at pod level.
fn pod_level_requests(
    spec: &corev1::PodSpec,
    containers: &ContainerRequests,
) -> Result<Option<ResourceList>, ConvertError> {
    let Some(res) = spec.resources.as_ref() else {
        return Ok(None);
    };
    let mut reqs = parse_resource_list(res.requests.as_ref(), "spec.resources.requests")?;
    let limits = parse_resource_list(res.limits.as_ref(), "spec.resources.limits")?;
    if !limits.is_empty() {
        // Only overcommittable resources (cpu, memory) default from containers.
        for (name, q) in containers.aggregate(&ResourceList::new()) {
            if (name == CPU || name == MEMORY) && !reqs.contains_key(&name) {
                reqs.insert(name, q);
            }
        }
        for (name, q) in limits {
            if is_supported_pod_level_resource(&name) {
                reqs.entry(name).or_insert(q);
            }
        }
    }
    reqs.retain(|name, _| is_supported_pod_level_resource(name));
    Ok((!reqs.is_empty()).then_some(reqs))
}

/// Requests and the non-zero cpu/memory used for scoring, as
/// `PodInfo.CalculateResource`.
fn pod_resources(spec: &corev1::PodSpec) -> Result<(Resources, i64, i64), ConvertError> {
    let containers = ContainerRequests::parse(spec)?;
    let pod_level = pod_level_requests(spec, &containers)?;
    let overhead = parse_resource_list(spec.overhead.as_ref(), "spec.overhead")?;
    let requests = containers.pod_requests(pod_level.as_ref(), &overhead, &ResourceList::new());

    // Containers without a cpu (memory) request count as 100m (200Mi); with
    // pod-level requests set, only for a resource requested nowhere.
    let mut non_missing = ResourceList::new();
    if pod_level.is_none() || !requests.contains_key(CPU) {
        non_missing.insert(CPU.to_string(), Quantity::from_milli(DEFAULT_MILLI_CPU_REQUEST));
    }
    if pod_level.is_none() || !requests.contains_key(MEMORY) {
        non_missing.insert(MEMORY.to_string(), Quantity::from_value(DEFAULT_MEMORY_REQUEST));
    }
    let non_zero = if non_missing.is_empty() {
        requests.clone()
    } else {
        containers.pod_requests(pod_level.as_ref(), &overhead, &non_missing)
    };
    let non_zero_cpu = non_zero.get(CPU).map_or(0, Quantity::milli_value);
    let non_zero_mem = non_zero.get(MEMORY).map_or(0, Quantity::value);
    Ok((to_resources(&requests, false), non_zero_cpu, non_zero_mem))
}

/// Host ports of app containers and sidecars (kube-scheduler counts both
/// since v1.34), with `hostNetwork` defaulting `hostPort` to `containerPort`.
fn host_ports(spec: &corev1::PodSpec) -> Vec<HostPort> {
    let host_network = spec.host_network.unwrap_or(false);
    let sidecars = spec.init_containers.iter().flatten().filter(|c| is_sidecar(c));
    let mut out = Vec::new();
    for c in spec.containers.iter().chain(sidecars) {
        for p in c.ports.iter().flatten() {
            let mut port = p.host_port.unwrap_or(0);
            if host_network && port == 0 {
                port = p.container_port;
            }
            if port <= 0 {
                continue;
            }
            let protocol = p.protocol.as_deref().filter(|s| !s.is_empty()).unwrap_or("TCP");
            out.push(HostPort { protocol: protocol.to_string(), host_ip: p.host_ip.clone().unwrap_or_default(), port });
        }
    }
    out
}

// ---------------------------------------------------------------- selectors

const NODE_SELECTOR_OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const LABEL_SELECTOR_OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

fn selector_op(op: &str, allowed: &[&str], path: &str) -> Result<SelectorOp, ConvertError> {
    let parsed = match op {
        "In" => SelectorOp::In,
        "NotIn" => SelectorOp::NotIn,
        "Exists" => SelectorOp::Exists,
        "DoesNotExist" => SelectorOp::DoesNotExist,
        "Gt" => SelectorOp::Gt,
        "Lt" => SelectorOp::Lt,
        _ => return Err(unsupported(format!("{path}.operator"), op, allowed)),
    };
    if !allowed.contains(&op) {
        return Err(unsupported(format!("{path}.operator"), op, allowed));
    }
    Ok(parsed)
}

/// `labels.NewRequirement`'s checks on the values of a requirement at `path`.
fn requirement(
    key: &str,
    op: SelectorOp,
    values: Option<&Vec<String>>,
    path: &str,
) -> Result<Requirement, ConvertError> {
    let vals = values.map_or(&[][..], Vec::as_slice);
    let values_path = || format!("{path}.values");
    match op {
        SelectorOp::In | SelectorOp::NotIn if vals.is_empty() => {
            return Err(invalid(
                values_path(),
                json_values(values),
                "for 'in', 'notin' operators, values set can't be empty",
            ));
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !vals.is_empty() => {
            return Err(invalid(
                values_path(),
                json_values(values),
                "values set must be empty for exists and does not exist",
            ));
        }
        SelectorOp::Gt | SelectorOp::Lt => {
            if vals.len() != 1 {
                return Err(invalid(
                    values_path(),
                    json_values(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            if vals[0].parse::<i64>().is_err() {
                return Err(invalid(
                    format!("{path}.values[0]"),
                    format_args!("{:?}", vals[0]),
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
        _ => {}
    }
    Ok(Requirement { key: key.to_string(), op, values: vals.to_vec() })
}

/// Compiles a `metav1.LabelSelector` found at `path` (e.g.
/// `spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector`).
/// An empty selector matches everything; callers map an absent one to
/// [`model::LabelSelector::nothing`] where Kubernetes does.
pub fn label_selector(sel: &metav1::LabelSelector, path: &str) -> Result<model::LabelSelector, ConvertError> {
    let mut requirements = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        requirements.push(Requirement { key: k.clone(), op: SelectorOp::In, values: vec![v.clone()] });
    }
    for (i, expr) in sel.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = selector_op(&expr.operator, LABEL_SELECTOR_OPS, &p)?;
        requirements.push(requirement(&expr.key, op, expr.values.as_ref(), &p)?);
    }
    Ok(model::LabelSelector { requirements, matches_nothing: false })
}

/// A selector that may be absent: absent matches nothing.
fn optional_selector(sel: Option<&metav1::LabelSelector>, path: &str) -> Result<model::LabelSelector, ConvertError> {
    match sel {
        Some(s) => label_selector(s, path),
        None => Ok(model::LabelSelector::nothing()),
    }
}

fn node_selector_term(term: &corev1::NodeSelectorTerm, path: &str) -> Result<NodeSelectorTerm, ConvertError> {
    let mut out = NodeSelectorTerm::default();
    for (i, expr) in term.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = selector_op(&expr.operator, NODE_SELECTOR_OPS, &p)?;
        out.match_expressions.push(requirement(&expr.key, op, expr.values.as_ref(), &p)?);
    }
    for (i, expr) in term.match_fields.iter().flatten().enumerate() {
        let p = format!("{path}.matchFields[{i}]");
        if expr.key != "metadata.name" {
            return Err(unsupported(format!("{p}.key"), &expr.key, &["metadata.name"]));
        }
        let op = selector_op(&expr.operator, &["In", "NotIn"], &p)?;
        let vals = expr.values.as_deref().unwrap_or_default();
        if vals.len() != 1 {
            return Err(invalid(format!("{p}.values"), json_values(expr.values.as_ref()), "must have one element"));
        }
        out.match_fields.push(Requirement { key: expr.key.clone(), op, values: vals.to_vec() });
    }
    Ok(out)
}

fn weight(w: i32, path: &str) -> Result<i32, ConvertError> {
    if !(1..=100).contains(&w) {
        return Err(invalid(format!("{path}.weight"), w, "must be in the range 1-100"));
    }
    Ok(w)
}

fn node_affinity(
    na: &corev1::NodeAffinity,
) -> Result<(Option<NodeSelector>, Vec<PreferredSchedulingTerm>), ConvertError> {
    const BASE: &str = "spec.affinity.nodeAffinity";
    let required = match na.required_during_scheduling_ignored_during_execution.as_ref() {
        None => None,
        Some(ns) => {
            let path = format!("{BASE}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if ns.node_selector_terms.is_empty() {
                return Err(required(path, "must have at least one node selector term"));
            }
            let terms = ns
                .node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| node_selector_term(t, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?;
            Some(NodeSelector { terms })
        }
    };
    let mut preferred = Vec::new();
    for (i, t) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        let path = format!("{BASE}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        preferred.push(PreferredSchedulingTerm {
            weight: weight(t.weight, &path)?,
            term: node_selector_term(&t.preference, &format!("{path}.preference"))?,
        });
    }
    Ok((required, preferred))
}

/// A `PodAffinityTerm` of a pod in `namespace` with `labels`, as the
/// scheduler's `newAffinityTerm` after the API server merged
/// `matchLabelKeys` (`key In [value]`) and `mismatchLabelKeys` (`key NotIn
/// [value]`) for the keys the pod has.
fn affinity_term(
    term: &corev1::PodAffinityTerm,
    namespace: &str,
    labels: &model::Labels,
    path: &str,
) -> Result<AffinityTerm, ConvertError> {
    if term.topology_key.is_empty() {
        return Err(required(format!("{path}.topologyKey"), "can not be empty"));
    }
    let mut selector = optional_selector(term.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    if term.label_selector.is_some() {
        let merged = [(&term.match_label_keys, SelectorOp::In), (&term.mismatch_label_keys, SelectorOp::NotIn)];
        for (keys, op) in merged {
            for key in keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    selector.requirements.push(Requirement { key: key.clone(), op, values: vec![v.clone()] });
                }
            }
        }
    }
    let namespace_selector = term
        .namespace_selector
        .as_ref()
        .map(|s| label_selector(s, &format!("{path}.namespaceSelector")))
        .transpose()?;
    let mut namespaces = term.namespaces.clone().unwrap_or_default();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace.to_string());
    }
    Ok(AffinityTerm { namespaces, namespace_selector, selector, topology_key: term.topology_key.clone() })
}

fn pod_affinity_terms(
    required: Option<&Vec<corev1::PodAffinityTerm>>,
    preferred: Option<&Vec<corev1::WeightedPodAffinityTerm>>,
    namespace: &str,
    labels: &model::Labels,
    base: &str,
) -> Result<model::PodAffinity, ConvertError> {
    let mut out = model::PodAffinity::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let path = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.required.push(affinity_term(t, namespace, labels, &path)?);
    }
    for (i, t) in preferred.into_iter().flatten().enumerate() {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.preferred.push(WeightedAffinityTerm {
            weight: weight(t.weight, &path)?,
            term: affinity_term(&t.pod_affinity_term, namespace, labels, &format!("{path}.podAffinityTerm"))?,
        });
    }
    Ok(out)
}

// --------------------------------------------------------- taints, tolerations

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn taint_effect(effect: &str) -> Option<TaintEffect> {
    match effect {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn toleration(t: &corev1::Toleration, path: &str) -> Result<Toleration, ConvertError> {
    let key = t.key.clone().unwrap_or_default();
    let value = t.value.clone().unwrap_or_default();
    let op_str = t.operator.as_deref().unwrap_or("");
    let op = match op_str {
        "" | "Equal" => TolerationOp::Equal,
        "Exists" => TolerationOp::Exists,
        other => {
            return Err(unsupported(format!("{path}.operator"), other, &["Equal", "Exists"]));
        }
    };
    if key.is_empty() && op != TolerationOp::Exists {
        return Err(invalid(
            format!("{path}.operator"),
            format_args!("{op_str:?}"),
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    if op == TolerationOp::Exists && !value.is_empty() {
        let rendered = serde_json::to_string(t).unwrap_or_default();
        return Err(invalid(format!("{path}.operator"), rendered, "value must be empty when `operator` is 'Exists'"));
    }
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(taint_effect(e).ok_or_else(|| unsupported(format!("{path}.effect"), e, TAINT_EFFECTS))?),
    };
    if t.toleration_seconds.is_some() && effect != Some(TaintEffect::NoExecute) {
        return Err(invalid(
            format!("{path}.effect"),
            format_args!("{:?}", t.effect.as_deref().unwrap_or("")),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
    Ok(Toleration { key, op, value, effect })
}

fn taint(t: &corev1::Taint, path: &str) -> Result<Taint, ConvertError> {
    if t.key.is_empty() {
        return Err(required(format!("{path}.key"), ""));
    }
    if t.effect.is_empty() {
        return Err(required(format!("{path}.effect"), ""));
    }
    let effect =
        taint_effect(&t.effect).ok_or_else(|| unsupported(format!("{path}.effect"), &t.effect, TAINT_EFFECTS))?;
    Ok(Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect })
}

// ------------------------------------------------------------ spread

fn inclusion_policy(v: Option<&str>, default: InclusionPolicy, path: &str) -> Result<InclusionPolicy, ConvertError> {
    match v {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(unsupported(path, other, &["Honor", "Ignore"])),
    }
}

fn spread_constraint(
    c: &corev1::TopologySpreadConstraint,
    labels: &model::Labels,
    path: &str,
) -> Result<TopologySpreadConstraint, ConvertError> {
    if c.max_skew <= 0 {
        return Err(invalid(format!("{path}.maxSkew"), c.max_skew, "must be greater than zero"));
    }
    if c.topology_key.is_empty() {
        return Err(required(format!("{path}.topologyKey"), "can not be empty"));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => UnsatisfiableAction::DoNotSchedule,
        "ScheduleAnyway" => UnsatisfiableAction::ScheduleAnyway,
        other => {
            return Err(unsupported(format!("{path}.whenUnsatisfiable"), other, &["DoNotSchedule", "ScheduleAnyway"]));
        }
    };
    if let Some(min) = c.min_domains {
        if min <= 0 {
            return Err(invalid(format!("{path}.minDomains"), min, "must be greater than zero"));
        }
        if when_unsatisfiable != UnsatisfiableAction::DoNotSchedule {
            return Err(invalid(
                format!("{path}.minDomains"),
                min,
                &format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {}", c.when_unsatisfiable),
            ));
        }
    }
    let mut selector = optional_selector(c.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    for key in c.match_label_keys.iter().flatten() {
        if let Some(v) = labels.get(key) {
            selector.requirements.push(Requirement { key: key.clone(), op: SelectorOp::In, values: vec![v.clone()] });
        }
    }
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
            &format!("{path}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
            &format!("{path}.nodeTaintsPolicy"),
        )?,
    })
}

// -------------------------------------------------------------- objects

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// Converts a Pod (see the module docs for the defaults applied).
pub fn pod_from_k8s(p: &corev1::Pod) -> Result<model::Pod, ConvertError> {
    let meta = &p.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let labels = meta.labels.clone().unwrap_or_default();
    let uid = non_empty(meta.uid.as_ref()).unwrap_or_else(|| format!("{namespace}/{name}"));

    let empty_spec = corev1::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty_spec);

    let priority = spec.priority.unwrap_or(match spec.priority_class_name.as_deref() {
        Some(SYSTEM_NODE_CRITICAL) => SYSTEM_NODE_CRITICAL_PRIORITY,
        Some(SYSTEM_CLUSTER_CRITICAL) => SYSTEM_CLUSTER_CRITICAL_PRIORITY,
        _ => 0,
    });
    let (requests, non_zero_milli_cpu, non_zero_memory) = pod_resources(spec)?;

    let affinity = spec.affinity.as_ref();
    let (required_node_affinity, preferred_node_affinity) = match affinity.and_then(|a| a.node_affinity.as_ref()) {
        Some(na) => node_affinity(na)?,
        None => (None, Vec::new()),
    };
    let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
    let pod_affinity = pod_affinity_terms(
        pa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
        pa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        &namespace,
        &labels,
        "spec.affinity.podAffinity",
    )?;
    let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let pod_anti_affinity = pod_affinity_terms(
        paa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
        paa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        &namespace,
        &labels,
        "spec.affinity.podAntiAffinity",
    )?;

    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    let topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| spread_constraint(c, &labels, &format!("spec.topologySpreadConstraints[{i}]")))
        .collect::<Result<_, _>>()?;

    Ok(model::Pod {
        uid,
        scheduler_name: non_empty(spec.scheduler_name.as_ref()).unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string()),
        priority,
        node_name: non_empty(spec.node_name.as_ref()),
        nominated_node_name: non_empty(p.status.as_ref().and_then(|s| s.nominated_node_name.as_ref())),
        requests,
        non_zero_milli_cpu,
        non_zero_memory,
        host_ports: host_ports(spec),
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required_node_affinity,
        preferred_node_affinity,
        tolerations,
        pod_affinity,
        pod_anti_affinity,
        topology_spread_constraints,
        owner_selector: None,
        terminating: meta.deletion_timestamp.is_some(),
        scheduling_gates: spec.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect(),
        annotations: meta.annotations.clone().unwrap_or_default(),
        labels,
        namespace,
        name,
        source: None,
    })
}

/// Converts a Node: allocatable from `status.allocatable`, or from
/// `status.capacity` when allocatable is absent (the API's default).
pub fn node_from_k8s(n: &corev1::Node) -> Result<model::Node, ConvertError> {
    let meta = &n.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let spec = n.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.taints[{i}]")))
        .collect::<Result<_, _>>()?;
    let status = n.status.as_ref();
    let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(a) => parse_resource_list(Some(a), "status.allocatable")?,
        None => parse_resource_list(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?,
    };
    Ok(model::Node {
        name,
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        allocatable: to_resources(&allocatable, true),
        conditions: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| model::NodeCondition {
                type_: c.type_.clone(),
                status: c.status == "True",
                last_transition: c.last_transition_time.as_ref().and_then(|t| u64::try_from(t.0.as_millisecond()).ok()),
            })
            .collect(),
        source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: i64 = 1 << 20;
    const GI: i64 = 1 << 30;

    fn pod(yaml: &str) -> corev1::Pod {
        serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("bad test yaml: {e}\n{yaml}"))
    }

    fn convert(yaml: &str) -> model::Pod {
        pod_from_k8s(&pod(yaml)).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
    }

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|s| s.to_string()).collect() }
    }

    /// A pod spec made of containers given as `(kind, cpu, memory)`, where
    /// kind is `app`, `init` or `sidecar` and "" leaves the request unset.
    fn containers_yaml(containers: &[(&str, &str, &str)]) -> String {
        let mut app = String::new();
        let mut init = String::new();
        for (i, (kind, cpu, mem)) in containers.iter().enumerate() {
            let mut c = format!("  - name: c{i}\n");
            if *kind == "sidecar" {
                c.push_str("    restartPolicy: Always\n");
            }
            if !cpu.is_empty() || !mem.is_empty() {
                c.push_str("    resources:\n      requests:\n");
                if !cpu.is_empty() {
                    c.push_str(&format!("        cpu: \"{cpu}\"\n"));
                }
                if !mem.is_empty() {
                    c.push_str(&format!("        memory: \"{mem}\"\n"));
                }
            }
            if *kind == "app" { app.push_str(&c) } else { init.push_str(&c) }
        }
        let mut y = String::from("metadata: {name: p}\nspec:\n");
        if !init.is_empty() {
            y.push_str(&format!("  initContainers:\n{init}"));
        }
        if app.is_empty() {
            y.push_str("  containers: []\n");
        } else {
            y.push_str(&format!("  containers:\n{app}"));
        }
        y
    }

    #[test]
    fn effective_requests_with_init_and_sidecar_containers() {
        // (name, containers, want milli-cpu, want memory)
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>, i64, i64);
        let cases: Vec<Case> = vec![
            ("app containers sum", vec![("app", "100m", "100Mi"), ("app", "200m", "50Mi")], 300, 150 * MI),
            (
                "init larger than app wins per resource",
                vec![("init", "1", "10Mi"), ("app", "500m", "500Mi")],
                1000,
                500 * MI,
            ),
            (
                "docs: highest init request is the effective init request",
                vec![("init", "2", ""), ("init", "1", ""), ("app", "1", ""), ("app", "500m", "")],
                2000,
                0,
            ),
            (
                "sidecar before a bigger init container adds to it",
                vec![("sidecar", "100m", "64Mi"), ("init", "500m", "256Mi"), ("app", "200m", "128Mi")],
                600,
                320 * MI,
            ),
            (
                "sidecar after an init container does not add to it",
                vec![("init", "500m", "256Mi"), ("sidecar", "100m", "64Mi"), ("app", "200m", "128Mi")],
                500,
                256 * MI,
            ),
            (
                "app plus all sidecars beats the init peak",
                vec![("sidecar", "300m", ""), ("init", "100m", ""), ("sidecar", "300m", ""), ("app", "500m", "")],
                1100,
                0,
            ),
            (
                "sidecars accumulate for later init containers",
                vec![
                    ("sidecar", "100m", ""),
                    ("init", "500m", ""),
                    ("sidecar", "200m", ""),
                    ("init", "100m", ""),
                    ("app", "100m", ""),
                ],
                600,
                0,
            ),
            ("sidecar only pod", vec![("sidecar", "250m", "1Gi")], 250, GI),
            ("no requests", vec![("app", "", ""), ("init", "", "")], 0, 0),
            ("exact sum of fractions", vec![("app", "0.5m", "0.5"), ("app", "0.5m", "0.5")], 1, 1),
        ];
        for (name, containers, cpu, mem) in cases {
            let p = convert(&containers_yaml(&containers));
            assert_eq!((p.requests.milli_cpu, p.requests.memory), (cpu, mem), "{name}");
        }
    }

    #[test]
    fn overhead_limits_defaulting_and_resource_names() {
        let cases: &[(&str, &str, Resources)] = &[
            (
                "overhead is added",
                r#"
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  containers:
  - name: a
    resources: {requests: {cpu: 100m, memory: 100Mi}}
"#,
                Resources::new(350, 220 * MI),
            ),
            (
                "limits stand in for missing requests",
                r#"
spec:
  containers:
  - name: a
    resources: {limits: {cpu: "1", memory: 1Gi}}
  - name: b
    resources: {requests: {cpu: 250m}, limits: {cpu: "2", memory: 512Mi}}
"#,
                Resources::new(1250, GI + 512 * MI),
            ),
            (
                "init container limits defaulted too",
                r#"
spec:
  initContainers:
  - name: i
    resources: {limits: {cpu: "3"}}
  containers:
  - name: a
    resources: {requests: {cpu: "1"}}
"#,
                Resources::new(3000, 0),
            ),
            (
                "extended, hugepages and ephemeral storage; unknown names ignored",
                r#"
spec:
  initContainers:
  - name: i
    resources: {limits: {nvidia.com/gpu: "2"}}
  containers:
  - name: a
    resources:
      limits: {nvidia.com/gpu: "1", hugepages-2Mi: 4Mi}
      requests: {ephemeral-storage: 1Gi, foo: "3", pods: "1"}
"#,
                {
                    let mut r = Resources::default();
                    r.ephemeral_storage = GI;
                    r.set("nvidia.com/gpu", 2);
                    r.set("hugepages-2Mi", 4 * MI);
                    r
                },
            ),
        ];
        for (name, yaml, want) in cases {
            let y = format!("metadata: {{name: p}}\n{yaml}");
            assert_eq!(&convert(&y).requests, want, "{name}");
        }
    }

    #[test]
    fn pod_level_resources() {
        // (name, yaml, want cpu, want memory, want non-zero cpu, non-zero memory)
        let cases: &[(&str, &str, i64, i64, i64, i64)] = &[
            (
                "pod-level requests replace container sums",
                r#"
spec:
  resources: {requests: {cpu: "1", memory: 1Gi}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m, memory: 100Mi}}}
  - {name: b}
"#,
                1000,
                GI,
                1000,
                GI,
            ),
            (
                "pod-level cpu only: memory from containers, defaulted where requested nowhere",
                r#"
spec:
  resources: {requests: {cpu: 500m}}
  containers:
  - {name: a}
  - {name: b}
"#,
                500,
                0,
                500,
                400 * MI,
            ),
            (
                "pod-level limits default pod-level requests",
                r#"
spec:
  resources: {limits: {cpu: "2", memory: 1Gi}}
  containers:
  - {name: a, resources: {requests: {memory: 100Mi}}}
"#,
                2000,
                100 * MI,
                2000,
                100 * MI,
            ),
            (
                "overhead still added",
                r#"
spec:
  overhead: {cpu: 100m}
  resources: {requests: {cpu: "1", memory: 1Gi}}
  containers:
  - {name: a}
"#,
                1100,
                GI,
                1100,
                GI,
            ),
        ];
        for (name, yaml, cpu, mem, nz_cpu, nz_mem) in cases {
            let p = convert(&format!("metadata: {{name: p}}\n{yaml}"));
            assert_eq!(
                (p.requests.milli_cpu, p.requests.memory, p.non_zero_milli_cpu, p.non_zero_memory),
                (*cpu, *mem, *nz_cpu, *nz_mem),
                "{name}"
            );
        }
    }

    #[test]
    fn non_zero_requests() {
        const DEF_MEM: i64 = DEFAULT_MEMORY_REQUEST;
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>, i64, i64);
        let cases: Vec<Case> = vec![
            ("no requests: defaults", vec![("app", "", "")], 100, DEF_MEM),
            ("defaults per container", vec![("app", "", ""), ("app", "", "")], 200, 2 * DEF_MEM),
            ("set requests kept", vec![("app", "250m", "1Gi")], 250, GI),
            ("explicit zero is not missing", vec![("app", "0", "")], 0, DEF_MEM),
            ("mixed", vec![("app", "50m", ""), ("app", "", "1Gi")], 150, DEF_MEM + GI),
            (
                "init container without requests counts the default",
                vec![("init", "", ""), ("app", "50m", "10Mi")],
                100,
                DEF_MEM,
            ),
            ("sidecars get defaults and add", vec![("sidecar", "", ""), ("app", "", "")], 200, 2 * DEF_MEM),
        ];
        for (name, containers, cpu, mem) in cases {
            let p = convert(&containers_yaml(&containers));
            assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (cpu, mem), "{name}");
        }
        // Overhead adds to the non-zero amounts too.
        let p = convert("metadata: {name: p}\nspec:\n  overhead: {cpu: 10m, memory: 1Mi}\n  containers: [{name: a}]\n");
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (110, DEF_MEM + MI));
    }

    #[test]
    fn metadata_defaults_and_priority() {
        let p = convert("metadata: {name: web}\nspec: {containers: []}\n");
        assert_eq!(p.namespace, "default");
        assert_eq!(p.uid, "default/web");
        assert_eq!(p.scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!((p.node_name.clone(), p.nominated_node_name.clone()), (None, None));
        assert!(!p.terminating);
        assert_eq!(p.priority, 0);

        let p = convert(
            r#"
metadata:
  name: web
  namespace: prod
  uid: abc-123
  labels: {app: web}
  annotations: {a: b}
  deletionTimestamp: "2024-01-01T00:00:00Z"
spec:
  schedulerName: gpu-scheduler
  nodeName: n1
  priorityClassName: system-node-critical
  schedulingGates: [{name: g1}, {name: g2}]
  nodeSelector: {disk: ssd}
  containers: []
status:
  nominatedNodeName: n2
"#,
        );
        assert_eq!((p.namespace.as_str(), p.uid.as_str(), p.name.as_str()), ("prod", "abc-123", "web"));
        assert_eq!(p.scheduler_name, "gpu-scheduler");
        assert_eq!(p.node_name.as_deref(), Some("n1"));
        assert_eq!(p.nominated_node_name.as_deref(), Some("n2"));
        assert!(p.terminating);
        assert_eq!(p.priority, SYSTEM_NODE_CRITICAL_PRIORITY);
        assert_eq!(p.scheduling_gates, vec!["g1", "g2"]);
        assert_eq!(p.node_selector.get("disk").map(String::as_str), Some("ssd"));
        assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(p.annotations.get("a").map(String::as_str), Some("b"));

        for (class, prio, want) in [
            ("system-cluster-critical", None, SYSTEM_CLUSTER_CRITICAL_PRIORITY),
            ("system-node-critical", Some(7), 7),
            ("custom", None, 0),
        ] {
            let prio = prio.map_or(String::new(), |p: i32| format!(", priority: {p}"));
            let p = convert(&format!(
                "metadata: {{name: p}}\nspec: {{containers: [], priorityClassName: {class}{prio}}}\n"
            ));
            assert_eq!(p.priority, want, "{class}");
        }
    }

    #[test]
    fn host_ports_from_containers_and_sidecars() {
        let p = convert(
            r#"
metadata: {name: p}
spec:
  initContainers:
  - name: sidecar
    restartPolicy: Always
    ports: [{containerPort: 9090, hostPort: 9090, protocol: UDP}]
  - name: init
    ports: [{containerPort: 7070, hostPort: 7070}]
  containers:
  - name: a
    ports:
    - {containerPort: 80, hostPort: 8080, hostIP: 10.0.0.1}
    - {containerPort: 81}
"#,
        );
        let want = vec![
            HostPort { protocol: "TCP".into(), host_ip: "10.0.0.1".into(), port: 8080 },
            HostPort { protocol: "UDP".into(), host_ip: String::new(), port: 9090 },
        ];
        assert_eq!(p.host_ports, want);

        let p = convert(
            "metadata: {name: p}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: a, ports: [{containerPort: 53, protocol: UDP}]}\n",
        );
        assert_eq!(p.host_ports, vec![HostPort { protocol: "UDP".into(), host_ip: String::new(), port: 53 }]);
    }

    #[test]
    fn tolerations_and_node_affinity() {
        let p = convert(
            r#"
metadata: {name: p}
spec:
  containers: []
  tolerations:
  - {key: k, value: v}
  - {operator: Exists}
  - {key: gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          - {key: cores, operator: Gt, values: ["8"]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [bad]}
        - matchExpressions:
          - {key: spot, operator: DoesNotExist}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions:
          - {key: disk, operator: Exists}
"#,
        );
        assert_eq!(
            p.tolerations,
            vec![
                Toleration { key: "k".into(), op: TolerationOp::Equal, value: "v".into(), effect: None },
                Toleration { key: String::new(), op: TolerationOp::Exists, value: String::new(), effect: None },
                Toleration {
                    key: "gpu".into(),
                    op: TolerationOp::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoExecute)
                },
            ]
        );
        let want = NodeSelector {
            terms: vec![
                NodeSelectorTerm {
                    match_expressions: vec![
                        req("zone", SelectorOp::In, &["a", "b"]),
                        req("cores", SelectorOp::Gt, &["8"]),
                    ],
                    match_fields: vec![req("metadata.name", SelectorOp::NotIn, &["bad"])],
                },
                NodeSelectorTerm {
                    match_expressions: vec![req("spot", SelectorOp::DoesNotExist, &[])],
                    match_fields: vec![],
                },
            ],
        };
        assert_eq!(p.required_node_affinity, Some(want));
        assert_eq!(
            p.preferred_node_affinity,
            vec![PreferredSchedulingTerm {
                weight: 10,
                term: NodeSelectorTerm {
                    match_expressions: vec![req("disk", SelectorOp::Exists, &[])],
                    match_fields: vec![]
                },
            }]
        );
    }

    #[test]
    fn pod_affinity_terms_compile() {
        let p = convert(
            r#"
metadata:
  name: p
  namespace: team
  labels: {app: web, tenant: a, version: v2}
spec:
  containers: []
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: zone
        labelSelector: {matchLabels: {app: web}}
        matchLabelKeys: [version, missing]
      - topologyKey: zone
        namespaceSelector: {}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          namespaces: [other]
          namespaceSelector: {matchLabels: {env: prod}}
          labelSelector:
            matchExpressions: [{key: app, operator: NotIn, values: [db]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app: web}}
        mismatchLabelKeys: [tenant]
"#,
        );
        let aff = &p.pod_affinity;
        assert_eq!(
            aff.required[0],
            AffinityTerm {
                namespaces: vec!["team".into()],
                namespace_selector: None,
                selector: model::LabelSelector {
                    requirements: vec![req("app", SelectorOp::In, &["web"]), req("version", SelectorOp::In, &["v2"])],
                    matches_nothing: false,
                },
                topology_key: "zone".into(),
            },
            "matchLabelKeys merged for keys the pod has; own namespace by default"
        );
        assert_eq!(aff.required[1].namespaces, Vec::<String>::new(), "namespaceSelector given: no default namespace");
        assert_eq!(aff.required[1].namespace_selector, Some(model::LabelSelector::everything()));
        assert_eq!(aff.required[1].selector, model::LabelSelector::nothing(), "absent labelSelector matches nothing");
        let pref = &aff.preferred[0];
        assert_eq!(pref.weight, 50);
        assert_eq!(pref.term.namespaces, vec!["other".to_string()]);
        assert_eq!(pref.term.namespace_selector, Some(model::LabelSelector::from_match_labels([("env", "prod")])));
        assert_eq!(pref.term.selector.requirements, vec![req("app", SelectorOp::NotIn, &["db"])]);
        assert_eq!(pref.term.topology_key, "kubernetes.io/hostname");

        let anti = &p.pod_anti_affinity.required[0];
        assert_eq!(
            anti.selector.requirements,
            vec![req("app", SelectorOp::In, &["web"]), req("tenant", SelectorOp::NotIn, &["a"])]
        );
        assert!(p.has_required_anti_affinity() && p.has_affinity());
    }

    #[test]
    fn topology_spread_constraints_compile() {
        let p = convert(
            r#"
metadata:
  name: p
  labels: {app: web, pod-template-hash: abc}
spec:
  containers: []
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 3
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [pod-template-hash, absent]
  - maxSkew: 2
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
"#,
        );
        let c = &p.topology_spread_constraints;
        assert_eq!(
            c[0],
            TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: UnsatisfiableAction::DoNotSchedule,
                selector: model::LabelSelector {
                    requirements: vec![
                        req("app", SelectorOp::In, &["web"]),
                        req("pod-template-hash", SelectorOp::In, &["abc"])
                    ],
                    matches_nothing: false,
                },
                min_domains: Some(3),
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            }
        );
        assert_eq!(c[1].when_unsatisfiable, UnsatisfiableAction::ScheduleAnyway);
        assert_eq!(c[1].selector, model::LabelSelector::nothing());
        assert_eq!(
            (c[1].node_affinity_policy, c[1].node_taints_policy),
            (InclusionPolicy::Ignore, InclusionPolicy::Honor)
        );
    }

    #[test]
    fn label_selector_compiles_and_validates() {
        let sel: metav1::LabelSelector = serde_yaml_ng::from_str(
            "matchLabels: {a: b}\nmatchExpressions:\n- {key: c, operator: Exists}\n- {key: d, operator: In, values: [x, y]}\n",
        )
        .unwrap();
        let got = label_selector(&sel, "sel").unwrap();
        assert_eq!(
            got.requirements,
            vec![
                req("a", SelectorOp::In, &["b"]),
                req("c", SelectorOp::Exists, &[]),
                req("d", SelectorOp::In, &["x", "y"])
            ]
        );
        assert_eq!(
            label_selector(&metav1::LabelSelector::default(), "sel").unwrap(),
            model::LabelSelector::everything()
        );

        let cases: &[(&str, &str, &str)] = &[
            (
                "{key: c, operator: In}",
                "sel.matchExpressions[0].values",
                "Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "{key: c, operator: NotIn, values: []}",
                "sel.matchExpressions[0].values",
                "Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "{key: c, operator: Exists, values: [x]}",
                "sel.matchExpressions[0].values",
                "Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
            (
                "{key: c, operator: DoesNotExist, values: [x]}",
                "sel.matchExpressions[0].values",
                "Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
            (
                "{key: c, operator: Gt, values: [\"1\"]}",
                "sel.matchExpressions[0].operator",
                "Unsupported value: \"Gt\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
            ),
        ];
        for (expr, path, message) in cases {
            let sel: metav1::LabelSelector = serde_yaml_ng::from_str(&format!("matchExpressions: [{expr}]")).unwrap();
            let err = label_selector(&sel, "sel").expect_err(expr);
            assert_eq!((err.path.as_str(), err.message.as_str()), (*path, *message), "{expr}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        const NA: &str =
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
        let node_affinity = |expr: &str| {
            format!(
                "spec:\n  containers: []\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - {expr}\n"
            )
        };
        let cases: Vec<(&str, String, String, &str)> = vec![
            (
                "bad cpu quantity",
                "spec:\n  containers:\n  - {name: a}\n  - {name: b, resources: {requests: {cpu: abc}}}\n".into(),
                "spec.containers[1].resources.requests.cpu".into(),
                "Invalid value: \"abc\": unable to parse numeric part of quantity",
            ),
            (
                "bad init limit",
                "spec:\n  initContainers: [{name: i, resources: {limits: {memory: 1Qi}}}]\n  containers: []\n".into(),
                "spec.initContainers[0].resources.limits.memory".into(),
                "Invalid value: \"1Qi\": unable to parse quantity's suffix",
            ),
            (
                "bad overhead",
                "spec:\n  overhead: {cpu: \"\"}\n  containers: []\n".into(),
                "spec.overhead.cpu".into(),
                "Invalid value: \"\": empty string",
            ),
            (
                "bad pod-level request",
                "spec:\n  resources: {requests: {memory: Mi}}\n  containers: []\n".into(),
                "spec.resources.requests.memory".into(),
                "Invalid value: \"Mi\": unable to parse numeric part of quantity",
            ),
            (
                "bad node affinity operator",
                node_affinity("matchExpressions: [{key: k, operator: Foo, values: [a]}]"),
                format!("{NA}.matchExpressions[0].operator"),
                "Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
            ),
            (
                "Gt with a non-integer",
                node_affinity("matchExpressions: [{key: k, operator: Gt, values: [abc]}]"),
                format!("{NA}.matchExpressions[0].values[0]"),
                "Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "Lt with two values",
                node_affinity("matchExpressions: [{key: k, operator: Lt, values: [\"1\", \"2\"]}]"),
                format!("{NA}.matchExpressions[0].values"),
                "Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required",
            ),
            (
                "matchFields on an unsupported field",
                node_affinity("matchFields: [{key: metadata.uid, operator: In, values: [a]}]"),
                format!("{NA}.matchFields[0].key"),
                "Unsupported value: \"metadata.uid\": supported values: \"metadata.name\"",
            ),
            (
                "matchFields with two values",
                node_affinity("matchFields: [{key: metadata.name, operator: In, values: [a, b]}]"),
                format!("{NA}.matchFields[0].values"),
                "Invalid value: [\"a\",\"b\"]: must have one element",
            ),
            (
                "no node selector terms",
                "spec:\n  containers: []\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}\n".into(),
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms".into(),
                "Required value: must have at least one node selector term",
            ),
            (
                "preferred weight out of range",
                "spec:\n  containers: []\n  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {}}]}}\n".into(),
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight".into(),
                "Invalid value: 0: must be in the range 1-100",
            ),
            (
                "pod affinity In without values",
                "spec:\n  containers: []\n  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: z, labelSelector: {matchExpressions: [{key: a, operator: In}]}}]}}\n".into(),
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values".into(),
                "Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "anti-affinity without topology key",
                "spec:\n  containers: []\n  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: \"\"}}]}}\n".into(),
                "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey".into(),
                "Required value: can not be empty",
            ),
            (
                "bad toleration effect",
                "spec:\n  containers: []\n  tolerations: [{key: k, effect: NoRun}]\n".into(),
                "spec.tolerations[0].effect".into(),
                "Unsupported value: \"NoRun\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ),
            (
                "bad toleration operator",
                "spec:\n  containers: []\n  tolerations: [{key: k, operator: Lt, value: \"1\"}]\n".into(),
                "spec.tolerations[0].operator".into(),
                "Unsupported value: \"Lt\": supported values: \"Equal\", \"Exists\"",
            ),
            (
                "empty toleration key needs Exists",
                "spec:\n  containers: []\n  tolerations: [{value: v}]\n".into(),
                "spec.tolerations[0].operator".into(),
                "Invalid value: \"\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ),
            (
                "tolerationSeconds needs NoExecute",
                "spec:\n  containers: []\n  tolerations: [{key: k, effect: NoSchedule, tolerationSeconds: 5}]\n".into(),
                "spec.tolerations[0].effect".into(),
                "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
            ),
            (
                "zero maxSkew",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]\n".into(),
                "spec.topologySpreadConstraints[0].maxSkew".into(),
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "minDomains with ScheduleAnyway",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, minDomains: 2, topologyKey: z, whenUnsatisfiable: ScheduleAnyway}]\n".into(),
                "spec.topologySpreadConstraints[0].minDomains".into(),
                "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
            ),
            (
                "zero minDomains",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, minDomains: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]\n".into(),
                "spec.topologySpreadConstraints[0].minDomains".into(),
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "bad whenUnsatisfiable",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: Never}]\n".into(),
                "spec.topologySpreadConstraints[0].whenUnsatisfiable".into(),
                "Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            ),
            (
                "bad nodeTaintsPolicy",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Maybe}]\n".into(),
                "spec.topologySpreadConstraints[0].nodeTaintsPolicy".into(),
                "Unsupported value: \"Maybe\": supported values: \"Honor\", \"Ignore\"",
            ),
        ];
        for (name, spec, path, message) in cases {
            let y = format!("metadata: {{name: p}}\n{spec}");
            let err = pod_from_k8s(&pod(&y)).expect_err(name);
            assert_eq!((err.path.as_str(), err.message.as_str()), (path.as_str(), message), "{name}");
            assert_eq!(err.to_string(), format!("{path}: {message}"));
        }
        let err = pod_from_k8s(&pod("spec: {containers: []}")).unwrap_err();
        assert_eq!(err.to_string(), "metadata.name: Required value");
    }

    fn node(yaml: &str) -> Result<model::Node, ConvertError> {
        let n: corev1::Node = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        node_from_k8s(&n)
    }

    #[test]
    fn nodes_convert() {
        let n = node(
            r#"
metadata:
  name: n1
  labels: {gpu-model: a100}
  annotations: {x: y}
spec:
  unschedulable: true
  taints:
  - {key: gpu, value: "true", effect: NoSchedule}
  - {key: maint, effect: PreferNoSchedule}
status:
  capacity: {cpu: "64", memory: 512Gi, pods: "250"}
  allocatable: {cpu: 63500m, memory: 500Gi, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 100Gi, hugepages-1Gi: "0"}
"#,
        )
        .unwrap();
        assert_eq!(n.name, "n1");
        assert!(n.unschedulable);
        assert_eq!(n.labels.get("gpu-model").map(String::as_str), Some("a100"));
        assert_eq!(n.annotations.get("x").map(String::as_str), Some("y"));
        assert_eq!(
            n.taints,
            vec![
                Taint { key: "gpu".into(), value: "true".into(), effect: TaintEffect::NoSchedule },
                Taint { key: "maint".into(), value: String::new(), effect: TaintEffect::PreferNoSchedule },
            ]
        );
        let a = &n.allocatable;
        assert_eq!((a.milli_cpu, a.memory, a.allowed_pod_number), (63_500, 500 * GI, 110));
        assert_eq!((a.get("nvidia.com/gpu"), a.ephemeral_storage, a.get("hugepages-1Gi")), (8, 100 * GI, 0));

        // Capacity stands in for a missing allocatable.
        let n = node("metadata: {name: n2}\nstatus: {capacity: {cpu: \"4\", memory: 8Gi, pods: \"10\"}}\n").unwrap();
        assert_eq!(
            (n.allocatable.milli_cpu, n.allocatable.memory, n.allocatable.allowed_pod_number),
            (4000, 8 * GI, 10)
        );
        assert!(!n.unschedulable && n.taints.is_empty());

        let cases: &[(&str, &str, &str)] = &[
            (
                "metadata: {name: n}\nspec: {taints: [{key: k, effect: Never}]}\n",
                "spec.taints[0].effect",
                "Unsupported value: \"Never\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ),
            (
                "metadata: {name: n}\nspec: {taints: [{key: k, effect: \"\"}]}\n",
                "spec.taints[0].effect",
                "Required value",
            ),
            (
                "metadata: {name: n}\nstatus: {allocatable: {cpu: 1x}}\n",
                "status.allocatable.cpu",
                "Invalid value: \"1x\": unable to parse quantity's suffix",
            ),
            (
                "metadata: {name: n}\nstatus: {capacity: {memory: \" 1\"}}\n",
                "status.capacity.memory",
                "Invalid value: \" 1\": unable to parse numeric part of quantity",
            ),
            ("metadata: {}\n", "metadata.name", "Required value"),
        ];
        for (yaml, path, message) in cases {
            let err = node(yaml).expect_err(yaml);
            assert_eq!((err.path.as_str(), err.message.as_str()), (*path, *message), "{yaml}");
        }
    }
}
