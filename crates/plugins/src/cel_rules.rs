//! CelRules: a team's own filter and score rules, written in CEL (the
//! expression language Kubernetes uses for ValidatingAdmissionPolicy and
//! DRA selectors) in the plugin's args, with no code and no rebuild.
//!
//! ```yaml
//! pluginConfig:
//! - name: CelRules
//!   args:
//!     rules:
//!     - name: maintenance-mode
//!       filter: "node.labels[?'maintenance-mode'].orValue('') != 'true'"
//!       message: node is in maintenance mode
//!     - name: ssd-bonus
//!       score: "node.labels[?'disk-type'].orValue('') == 'ssd' ? 100 : 0"
//!       weight: 1
//! ```
//!
//! A `filter` rule must yield a bool: false rejects the node with the
//! rule's message. A `score` rule must yield a number, clamped to 0–100;
//! the plugin's score is the weighted mean of its score rules, and the
//! plugin's weight in the profile says how much that counts against the
//! other scores. Variables: `pod`, `node` and `now` (docs/EXTENDING.md has
//! every field). Rules are compiled once, when the config is loaded, and
//! tried against sample pods and nodes then, so that a syntax error or a
//! type error (comparing a string with a number, calling a function that
//! does not exist) is reported naming the rule, not found on the first
//! real node. A rule that fails on a real node (a missing map key, a
//! division by zero) rejects it (filter) or scores 0 (score), with the
//! error in the reason and in the explanation.
//!
//! Each node's CEL value is built once per node change and kept, so a
//! cycle only evaluates the rules; the pod's value is built once per cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use cel::common::types::CelInt;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Program, Value};
use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventResource, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Status,
};
use framework::model::{Labels, Pod};
use framework::node_info::NodeInfo;
use framework::registry::{ArgsError, decode_args};
use framework::resources::Resources;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "CelRules";

/// `CelRulesArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CelRulesArgs {
    #[serde(default)]
    pub rules: Vec<RuleArgs>,
}

/// One rule: a name and either a `filter` or a `score` expression.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleArgs {
    pub name: String,
    #[serde(default)]
    pub filter: Option<String>,
    /// The reason a node the filter rejects is given (default: `node(s)
    /// didn't satisfy rule NAME`).
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub score: Option<String>,
    /// The score rule's share among the plugin's score rules (default 1).
    #[serde(default)]
    pub weight: Option<f64>,
}

#[derive(Debug)]
enum Kind {
    Filter { reason: String },
    Score { weight: f64 },
}

#[derive(Debug)]
struct Rule {
    name: String,
    kind: Kind,
    program: Program,
}

/// A node's CEL value, and the cache generation it was built from.
#[derive(Debug)]
struct NodeValue {
    generation: u64,
    value: Box<dyn Val>,
}

pub struct CelRules {
    env: Arc<Env>,
    filters: Vec<Rule>,
    scores: Vec<Rule>,
    /// Sum of the score rules' weights.
    total_weight: f64,
    /// Node name → its value. Not per-pod state: a node's value depends
    /// only on the node, and is rebuilt when its generation changes.
    nodes: RwLock<HashMap<String, Arc<NodeValue>>>,
}

/// The pod's CEL value for this cycle.
struct PodValue(Box<dyn Val>);

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    Ok(Arc::new(CelRules::new(decode_args(args)?)?))
}

impl CelRules {
    pub fn new(args: CelRulesArgs) -> Result<Self, ArgsError> {
        let env = Arc::new(env());
        let samples = Samples::new();
        let (mut filters, mut scores) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for (i, r) in args.rules.into_iter().enumerate() {
            let at = |field: &str| format!("rules[{i}].{field}");
            let name = r.name.trim().to_string();
            if name.is_empty() {
                return Err(ArgsError::new(at("name"), "must not be empty"));
            }
            if !seen.insert(name.clone()) {
                return Err(ArgsError::new(at("name"), format!("rule {name:?} is defined twice")));
            }
            let (field, source, kind) = match (r.filter, r.score) {
                (Some(f), None) => {
                    if r.weight.is_some() {
                        return Err(ArgsError::new(
                            at("weight"),
                            format!("rule {name:?}: a filter rule has no weight"),
                        ));
                    }
                    let reason = match r.message {
                        Some(m) if m.trim().is_empty() => {
                            return Err(ArgsError::new(at("message"), format!("rule {name:?}: must not be empty")));
                        }
                        Some(m) => m,
                        None => format!("node(s) didn't satisfy rule {name}"),
                    };
                    ("filter", f, Kind::Filter { reason })
                }
                (None, Some(s)) => {
                    if r.message.is_some() {
                        return Err(ArgsError::new(
                            at("message"),
                            format!("rule {name:?}: a score rule rejects nothing, so has no message"),
                        ));
                    }
                    let weight = r.weight.unwrap_or(1.0);
                    if !framework::bounds::WEIGHT.contains(weight) {
                        return Err(ArgsError::new(
                            at("weight"),
                            format!(
                                "rule {name:?}: must be in {}, got {}",
                                framework::bounds::WEIGHT,
                                framework::bounds::show(weight)
                            ),
                        ));
                    }
                    ("score", s, Kind::Score { weight })
                }
                (Some(_), Some(_)) => {
                    return Err(ArgsError::new(at("score"), format!("rule {name:?}: has both a filter and a score")));
                }
                (None, None) => {
                    return Err(ArgsError::new(at("filter"), format!("rule {name:?}: needs a filter or a score")));
                }
            };
            let program = compile(&env, &name, &source).map_err(|m| ArgsError::new(at(field), m))?;
            let rule = Rule { name, kind, program };
            samples.check(&env, &rule, &source).map_err(|m| ArgsError::new(at(field), m))?;
            match rule.kind {
                Kind::Filter { .. } => filters.push(rule),
                Kind::Score { .. } => scores.push(rule),
            }
        }
        let total_weight = scores
            .iter()
            .map(|r| match r.kind {
                Kind::Score { weight } => weight,
                Kind::Filter { .. } => 0.0,
            })
            .sum();
        Ok(CelRules { env, filters, scores, total_weight, nodes: RwLock::default() })
    }

    /// The node's value, from the cache when the node has not changed.
    fn node_value(&self, info: &NodeInfo) -> Arc<NodeValue> {
        let name = info.name();
        if let Some(v) = self.nodes.read().unwrap_or_else(|e| e.into_inner()).get(name)
            && v.generation == info.generation
            && info.generation != 0
        {
            return v.clone();
        }
        let v = Arc::new(NodeValue { generation: info.generation, value: node_value(info) });
        if info.generation != 0 {
            self.nodes.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), v.clone());
        }
        v
    }

    /// Keeps the pod's value for the cycle (once, whichever point comes
    /// first), and forgets nodes that left the cluster.
    fn prepare(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) {
        if state.read::<PodValue>().is_none() {
            state.write(PodValue(pod_value(pod)));
        }
        let limit = 2 * snap.nodes().len() + 64;
        if self.nodes.read().unwrap_or_else(|e| e.into_inner()).len() > limit {
            self.nodes.write().unwrap_or_else(|e| e.into_inner()).retain(|name, _| snap.position(name).is_some());
        }
    }

    /// Runs `f` with a CEL context holding the pod of `state`, `node` and
    /// `now`: built once per node and shared by all its rules.
    fn with_context<R>(&self, state: &CycleState, pod: &Pod, node: &NodeValue, f: impl FnOnce(&Context) -> R) -> R {
        let built;
        let pod_val: &dyn Val = match state.read::<PodValue>() {
            Some(p) => p.0.as_ref(),
            None => {
                built = pod_value(pod);
                built.as_ref()
            }
        };
        let vars = Vars { pod: pod_val, node: node.value.as_ref(), now: now_value(state) };
        f(&context(&self.env, &vars))
    }

    /// Each rule's value on `node`, for an explanation.
    pub fn values(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        let v = self.node_value(node.info());
        self.with_context(state, pod, &v, |ctx| {
            self.filters
                .iter()
                .chain(&self.scores)
                .map(|r| {
                    let shown = match r.program.execute(ctx) {
                        Ok(value) => match r.kind {
                            Kind::Filter { .. } => show(&value),
                            Kind::Score { weight } => format!("{} (weight {weight})", number(&value).map_or(0, clamp)),
                        },
                        Err(e) => format!("error: {e}"),
                    };
                    (r.name.clone(), shown)
                })
                .collect()
        })
    }
}

impl Plugin for CelRules {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A rule may read anything about a node or the pods on it.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::any(EventResource::Node),
            ClusterEvent::any(EventResource::AssignedPod),
            ClusterEvent::any(EventResource::UnscheduledPod),
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

impl PreFilterPlugin for CelRules {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        if self.filters.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        self.prepare(state, pod, snapshot);
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for CelRules {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        let v = self.node_value(node.info());
        self.with_context(state, pod, &v, |ctx| {
            for r in &self.filters {
                let Kind::Filter { reason } = &r.kind else { continue };
                match r.program.execute(ctx) {
                    Ok(Value::Bool(true)) => {}
                    Ok(Value::Bool(false)) => return Status::unschedulable(reason.clone()),
                    Ok(other) => {
                        return Status::unschedulable(format!(
                            "rule {} gave {} instead of a bool",
                            r.name,
                            show(&other)
                        ));
                    }
                    Err(e) => return Status::unschedulable(format!("rule {} failed: {e}", r.name)),
                }
            }
            Status::success()
        })
    }

    fn explain(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        if self.filters.is_empty() { Vec::new() } else { self.values(state, pod, node) }
    }
}

impl PreScorePlugin for CelRules {
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        if self.scores.is_empty() {
            return Status::skip();
        }
        self.prepare(state, pod, nodes.snapshot());
        Status::success()
    }
}

impl ScorePlugin for CelRules {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        if self.scores.is_empty() {
            return Ok(0);
        }
        let v = self.node_value(node.info());
        let sum: f64 = self.with_context(state, pod, &v, |ctx| {
            self.scores
                .iter()
                .map(|r| {
                    let Kind::Score { weight } = r.kind else { return 0.0 };
                    // A rule that fails on this node scores 0 here (the
                    // explanation shows why); it does not fail the cycle.
                    let s = r.program.execute(ctx).ok().as_ref().and_then(number).map_or(0, clamp);
                    s as f64 * weight
                })
                .sum()
        });
        Ok((sum / self.total_weight).round() as i64)
    }

    fn explain(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Vec<(String, String)> {
        // With filter rules, the filter's explanation already shows every rule.
        if self.filters.is_empty() { self.values(state, pod, node) } else { Vec::new() }
    }
}

/// CEL's standard library and its string extension (`lowerAscii`,
/// `split`, ...), with optional values (`m[?k].orValue(d)`).
fn env() -> Env {
    let mut env = Env::stdlib().with_optional_support(true);
    // The extension only adds functions; it cannot clash with the stdlib.
    let _ = env.add_extension(cel::extensions::strings);
    env
}

fn compile(env: &Env, name: &str, source: &str) -> Result<Program, String> {
    env.compile(source).map_err(|errors| {
        let first = errors.errors.first();
        let (line, column) = first.map_or((1, 1), |e| e.pos);
        let msg = first.map_or_else(|| errors.to_string(), |e| e.msg.clone());
        format!("rule {name:?}: syntax error at line {line}, column {column}: {msg}")
    })
}

/// A context resolving `pod`, `node` and `now` from `vars`.
fn context<'v>(env: &Arc<Env>, vars: &'v Vars<'_>) -> Context<'v, 'v> {
    let mut ctx = Context::with_env(env.clone());
    ctx.set_variable_resolver(vars);
    ctx
}

/// The variables of one evaluation, borrowed: nothing is copied per call.
struct Vars<'a> {
    pod: &'a dyn Val,
    node: &'a dyn Val,
    now: CelInt,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        match variable {
            "pod" => Some(CowVal::Borrowed(self.pod)),
            "node" => Some(CowVal::Borrowed(self.node)),
            "now" => Some(CowVal::Borrowed(&self.now)),
            _ => None,
        }
    }
}

/// `now`: seconds since the epoch, the cycle's clock.
fn now_value(state: &CycleState) -> CelInt {
    CelInt::from((state.now() / 1000) as i64)
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) if f.is_finite() => Some(*f),
        _ => None,
    }
}

fn clamp(x: f64) -> i64 {
    x.round().clamp(0.0, MAX_NODE_SCORE as f64) as i64
}

fn show(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::String(s) => format!("{:?}", s.as_str()),
        Value::Null => "null".into(),
        other => format!("{other:?}"),
    }
}

// ------------------------------------------------------------- the values

/// `pod` as rules see it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodVar<'a> {
    name: &'a str,
    namespace: &'a str,
    labels: &'a Labels,
    annotations: &'a Labels,
    priority: i64,
    requests: BTreeMap<String, i64>,
}

/// `node` as rules see it: the node, what its pods request, and its facts
/// (DESIGN.md §4), each fact only when the node has it (`has(node.zone)`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeVar<'a> {
    name: &'a str,
    labels: &'a Labels,
    annotations: &'a Labels,
    taints: Vec<TaintVar<'a>>,
    unschedulable: bool,
    allocatable: BTreeMap<String, i64>,
    requested: BTreeMap<String, i64>,
    free: BTreeMap<String, i64>,
    pod_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cloud: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disk_type: Option<&'a str>,
    maintenance: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// Seconds since the epoch, like `now`.
    #[serde(skip_serializing_if = "Option::is_none")]
    spot_expiry: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_alert: Option<i64>,
    /// Numbers from monitoring (`nodeFacts.prometheus`), by fact name:
    /// `has(node.facts.gpu_util)`, `node.facts.gpu_util`.
    facts: &'a BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct TaintVar<'a> {
    key: &'a str,
    value: &'a str,
    effect: &'static str,
}

/// Amounts as integers in the unit the scheduler counts them in: cpu in
/// millicores, memory and storage in bytes, anything else as a count.
fn amounts(r: &Resources, with_pods: bool) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    m.insert("cpu".to_string(), r.milli_cpu);
    m.insert("memory".to_string(), r.memory);
    m.insert("ephemeral-storage".to_string(), r.ephemeral_storage);
    if with_pods {
        m.insert("pods".to_string(), r.allowed_pod_number);
    }
    for (name, v) in r.scalars() {
        m.insert(name.to_string(), *v);
    }
    m
}

fn to_val<T: Serialize>(v: &T) -> Box<dyn Val> {
    // Our own plain structs of strings, numbers and maps: serialising them
    // cannot fail, but a failure must not crash a scheduler either.
    let value = cel::to_value(v).unwrap_or(Value::Null);
    value.try_into().unwrap_or_else(|_| -> Box<dyn Val> { Box::new(cel::common::types::CelNull) })
}

fn pod_value(pod: &Pod) -> Box<dyn Val> {
    to_val(&PodVar {
        name: &pod.name,
        namespace: &pod.namespace,
        labels: &pod.labels,
        annotations: &pod.annotations,
        priority: i64::from(pod.priority),
        requests: amounts(&pod.requests, false),
    })
}

fn node_value(info: &NodeInfo) -> Box<dyn Val> {
    let n = &info.node;
    let f = &info.facts;
    let allocatable = amounts(&n.allocatable, true);
    let mut requested = amounts(&info.requested, false);
    requested.insert("pods".to_string(), info.pods.len() as i64);
    let free = allocatable.iter().map(|(k, a)| (k.clone(), a - requested.get(k).copied().unwrap_or(0))).collect();
    let secs = |ms: u64| (ms / 1000) as i64;
    to_val(&NodeVar {
        name: &n.name,
        labels: &n.labels,
        annotations: &n.annotations,
        taints: n.taints.iter().map(|t| TaintVar { key: &t.key, value: &t.value, effect: t.effect.as_str() }).collect(),
        unschedulable: n.unschedulable,
        allocatable,
        requested,
        free,
        pod_count: info.pods.len() as i64,
        zone: f.zone.as_deref(),
        gpu_model: f.gpu_model.as_deref(),
        cloud: f.cloud.map(|c| c.as_str()),
        disk_type: f.disk_type.as_deref(),
        maintenance: f.maintenance,
        temperature: f.temperature_celsius,
        spot_expiry: f.spot_expiry.map(secs),
        last_alert: f.last_hardware_alert.map(secs),
        facts: &f.numbers,
    })
}

// ------------------------------------------------------ checks at load time

/// A pod and two nodes to try each rule on when it is loaded: one node
/// with every field and fact, one with none, so that both sides of the
/// usual `has(...)` guards run.
struct Samples {
    pod: Box<dyn Val>,
    nodes: [Box<dyn Val>; 2],
}

impl Samples {
    fn new() -> Self {
        let labels: Labels = [("app", "sample"), ("topology.kubernetes.io/zone", "zone-a"), ("disk-type", "ssd")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let annotations: Labels =
            [("sample", "yes")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let none = Labels::new();
        let sample_facts: BTreeMap<String, f64> = [("temperature".to_string(), 70.0)].into();
        let no_facts = BTreeMap::new();
        let mut requests = Resources::new(1000, 1 << 30);
        requests.set(framework::facts::GPU_RESOURCE, 1);
        let pod = to_val(&PodVar {
            name: "sample",
            namespace: "default",
            labels: &labels,
            annotations: &annotations,
            priority: 0,
            requests: amounts(&requests, false),
        });
        let mut allocatable = Resources::new(8000, 64 << 30);
        allocatable.allowed_pod_number = 110;
        allocatable.set(framework::facts::GPU_RESOURCE, 8);
        let full = NodeVar {
            name: "full",
            labels: &labels,
            annotations: &annotations,
            taints: vec![TaintVar { key: "dedicated", value: "training", effect: "NoSchedule" }],
            unschedulable: false,
            allocatable: amounts(&allocatable, true),
            requested: amounts(&requests, true),
            free: amounts(&allocatable, true),
            pod_count: 1,
            zone: Some("zone-a"),
            gpu_model: Some("a100"),
            cloud: Some("private"),
            disk_type: Some("ssd"),
            maintenance: false,
            temperature: Some(70.0),
            spot_expiry: Some(1_900_000_000),
            last_alert: Some(1_700_000_000),
            facts: &sample_facts,
        };
        let empty = NodeVar {
            name: "empty",
            labels: &none,
            annotations: &none,
            taints: Vec::new(),
            unschedulable: false,
            allocatable: amounts(&Resources::default(), true),
            requested: amounts(&Resources::default(), true),
            free: amounts(&Resources::default(), true),
            pod_count: 0,
            zone: None,
            gpu_model: None,
            cloud: None,
            disk_type: None,
            maintenance: false,
            temperature: None,
            spot_expiry: None,
            last_alert: None,
            facts: &no_facts,
        };
        Samples { pod, nodes: [to_val(&full), to_val(&empty)] }
    }

    /// Runs `rule` on the samples: a type error, or a result of the wrong
    /// type, is an error naming the rule. Errors that depend on the data
    /// (a missing key, a division by zero) are not: real nodes may differ.
    fn check(&self, env: &Arc<Env>, rule: &Rule, source: &str) -> Result<(), String> {
        for node in &self.nodes {
            let vars = Vars { pod: self.pod.as_ref(), node: node.as_ref(), now: CelInt::from(1_800_000_000) };
            match rule.program.execute(&context(env, &vars)) {
                Ok(v) => {
                    let ok = match rule.kind {
                        Kind::Filter { .. } => matches!(v, Value::Bool(_)),
                        Kind::Score { .. } => number(&v).is_some(),
                    };
                    if !ok {
                        let want = if matches!(rule.kind, Kind::Filter { .. }) { "a bool" } else { "a number" };
                        return Err(format!("rule {:?}: gives {} where {want} is needed", rule.name, show(&v)));
                    }
                }
                Err(e) if depends_on_data(&e) => {}
                Err(e) => {
                    let at = match &e {
                        ExecutionError::UndeclaredReference(name) => {
                            position(source, name).map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default()
                        }
                        _ => String::new(),
                    };
                    let hint = match &e {
                        ExecutionError::UndeclaredReference(_) => " (the variables are pod, node and now)",
                        _ => "",
                    };
                    return Err(format!("rule {:?}: type error{at}: {e}{hint}", rule.name));
                }
            }
        }
        Ok(())
    }
}

fn depends_on_data(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::NoSuchKey(_)
            | ExecutionError::IndexOutOfBounds(_)
            | ExecutionError::DivisionByZero(_)
            | ExecutionError::RemainderByZero(_)
            | ExecutionError::Overflow(..)
            | ExecutionError::FunctionError { .. }
            | ExecutionError::DuplicateKey(_)
    )
}

/// Line and column (from 1) of the first `word` in `source` standing alone.
fn position(source: &str, word: &str) -> Option<(usize, usize)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for (l, line) in source.lines().enumerate() {
        for (c, _) in line.match_indices(word) {
            let before = line[..c].chars().next_back();
            let after = line[c + word.len()..].chars().next();
            if !before.is_some_and(|b| ident(b) || b == '.') && !after.is_some_and(ident) {
                return Some((l + 1, line[..c].chars().count() + 1));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::{ANNOTATION_SPOT_EXPIRY, ANNOTATION_TEMPERATURE, LABEL_DISK_TYPE, LABEL_GPU_MODEL};
    use framework::testing::{node, pod};
    use serde_json::json;

    fn rules(rules: serde_json::Value) -> Result<Arc<dyn Plugin>, ArgsError> {
        new(Some(&json!({ "rules": rules })))
    }

    fn filter_one(plugin: &Arc<dyn Plugin>, p: &Pod, info: &NodeInfo, now_s: u64) -> Status {
        let mut state = CycleState::at(now_s * 1000);
        let snap = Snapshot::from_parts(vec![info.node.clone()], vec![]);
        let _ = plugin.as_pre_filter().unwrap().pre_filter(&mut state, p, &snap);
        plugin.as_filter().unwrap().filter(&state, p, &info.view())
    }

    fn score_one(plugin: &Arc<dyn Plugin>, p: &Pod, info: &NodeInfo) -> i64 {
        let state = CycleState::at(0);
        plugin.as_score().unwrap().score(&state, p, &info.view()).unwrap()
    }

    #[test]
    fn filter_table() {
        let gpu_pod = pod("train").label("gpu-scheduler.io/workload", "training").resource("nvidia.com/gpu", 2).build();
        let web = pod("web").req(500, 1 << 30).build();
        let cases: Vec<(&str, &str, NodeInfo, &Pod, bool)> = vec![
            (
                "maintenance label rejects",
                "node.labels[?'maintenance-mode'].orValue('') != 'true'",
                node("n").label("maintenance-mode", "true").info(),
                &web,
                false,
            ),
            (
                "no maintenance label passes",
                "node.labels[?'maintenance-mode'].orValue('') != 'true'",
                node("n").info(),
                &web,
                true,
            ),
            (
                "facts: a100 for training",
                "!(pod.labels[?'gpu-scheduler.io/workload'].orValue('') == 'training') || node.gpuModel == 'a100'",
                node("n").label(LABEL_GPU_MODEL, "A100").info(),
                &gpu_pod,
                true,
            ),
            (
                "free extended resources",
                "node.free[?'nvidia.com/gpu'].orValue(0) >= pod.requests[?'nvidia.com/gpu'].orValue(0)",
                node("n").resource("nvidia.com/gpu", 1).info(),
                &gpu_pod,
                false,
            ),
            (
                "free extended resources, enough",
                "node.free[?'nvidia.com/gpu'].orValue(0) >= pod.requests[?'nvidia.com/gpu'].orValue(0)",
                node("n").resource("nvidia.com/gpu", 8).info(),
                &gpu_pod,
                true,
            ),
            (
                "temperature, a double",
                "!has(node.temperature) || node.temperature < 80.0",
                node("n").annotation(ANNOTATION_TEMPERATURE, "85").info(),
                &web,
                false,
            ),
            ("temperature absent", "!has(node.temperature) || node.temperature < 80.0", node("n").info(), &web, true),
            (
                "spot expiry against now (in seconds)",
                "!has(node.spotExpiry) || node.spotExpiry - now > 1800",
                node("n").annotation(ANNOTATION_SPOT_EXPIRY, "2030-01-01T00:20:00Z").info(),
                &web,
                false,
            ),
            (
                "taints are a list of maps",
                "!node.taints.exists(t, t.key == 'dedicated' && t.effect == 'NoSchedule')",
                node("n").taint("dedicated", "training", framework::model::TaintEffect::NoSchedule).info(),
                &web,
                false,
            ),
            (
                "pod namespace and priority",
                "pod.namespace == 'default' && pod.priority == 0",
                node("n").info(),
                &web,
                true,
            ),
            (
                "a provided fact",
                "!has(node.facts.gpu_util) || node.facts.gpu_util < 0.9",
                node("n").info_with(|i| i.facts.numbers.insert("gpu_util".into(), 0.95)),
                &web,
                false,
            ),
            (
                "a provided fact, absent",
                "!has(node.facts.gpu_util) || node.facts.gpu_util < 0.9",
                node("n").info(),
                &web,
                true,
            ),
            ("string functions", "node.name.startsWith('gpu-')", node("gpu-1").info(), &web, true),
            ("regex", "node.name.matches('^cpu-[0-9]+$')", node("gpu-1").info(), &web, false),
        ];
        // 2030-01-01T00:00:00Z: the spot node expires 20 minutes later.
        let now = 1_893_456_000;
        for (name, expr, info, p, want) in cases {
            let plugin = rules(json!([{ "name": "r", "filter": expr, "message": "nope" }]))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let status = filter_one(&plugin, p, &info, now);
            assert_eq!(status.is_success(), want, "{name}: {status:?}");
            if !want {
                assert_eq!(status.message(), "nope", "{name}");
            }
        }
    }

    #[test]
    fn first_failing_rule_names_itself() {
        let plugin = rules(json!([
            { "name": "always", "filter": "true" },
            { "name": "no-gpu-nodes", "filter": "!has(node.gpuModel)" },
        ]))
        .unwrap();
        let s = filter_one(&plugin, &pod("p").build(), &node("n").label(LABEL_GPU_MODEL, "t4").info(), 0);
        assert_eq!(s.message(), "node(s) didn't satisfy rule no-gpu-nodes");
    }

    #[test]
    fn a_rule_failing_on_a_node_rejects_it_with_the_error() {
        let plugin = rules(json!([{ "name": "pool", "filter": "node.labels['pool'] == 'a'" }])).unwrap();
        let s = filter_one(&plugin, &pod("p").build(), &node("n").info(), 0);
        assert!(s.is_rejected());
        assert!(s.message().starts_with("rule pool failed: No such key"), "{}", s.message());
        let s = filter_one(&plugin, &pod("p").build(), &node("n").label("pool", "a").info(), 0);
        assert!(s.is_success());
    }

    #[test]
    fn score_table() {
        let ssd = "node.labels[?'disk-type'].orValue('') == 'ssd' ? 100 : 0";
        let cases = [
            ("ssd node", json!([{ "name": "ssd", "score": ssd }]), node("n").label(LABEL_DISK_TYPE, "ssd").info(), 100),
            ("hdd node", json!([{ "name": "ssd", "score": ssd }]), node("n").label(LABEL_DISK_TYPE, "hdd").info(), 0),
            ("clamped above", json!([{ "name": "big", "score": "250" }]), node("n").info(), 100),
            ("clamped below", json!([{ "name": "neg", "score": "-3.5" }]), node("n").info(), 0),
            ("doubles round", json!([{ "name": "d", "score": "41.6" }]), node("n").info(), 42),
            (
                "weighted mean: 100 × 3 + 0 × 1",
                json!([{ "name": "ssd", "score": ssd, "weight": 3 }, { "name": "zero", "score": "0" }]),
                node("n").label(LABEL_DISK_TYPE, "ssd").info(),
                75,
            ),
            ("error scores 0", json!([{ "name": "e", "score": "int(node.labels['missing'])" }]), node("n").info(), 0),
            (
                "free cpu in millicores",
                json!([{ "name": "cpu", "score": "node.free['cpu'] / 40" }]),
                node("n").capacity(4000, 1 << 34).info(),
                100,
            ),
        ];
        for (name, r, info, want) in cases {
            let plugin = rules(r).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(score_one(&plugin, &pod("p").build(), &info), want, "{name}");
        }
    }

    #[test]
    fn bad_rules_are_rejected_at_load_naming_rule_and_field() {
        let cases = [
            (
                json!([{ "name": "a", "filter": "node.labels[" }]),
                "rules[0].filter",
                "rule \"a\": syntax error at line 1, column",
            ),
            (json!([{ "name": "b", "filter": "nod.name == 'x'" }]), "rules[0].filter", "line 1, column 1"),
            (json!([{ "name": "c", "filter": "node.name + 1 == 'x'" }]), "rules[0].filter", "rule \"c\": type error"),
            (json!([{ "name": "d", "filter": "node.name" }]), "rules[0].filter", "where a bool is needed"),
            (json!([{ "name": "e", "score": "node.name" }]), "rules[0].score", "where a number is needed"),
            (json!([{ "name": "f", "filter": "size(node.name, 2) > 0" }]), "rules[0].filter", "rule \"f\": type error"),
            (json!([{ "name": "g", "filter": "true" }, { "name": "g", "score": "1" }]), "rules[1].name", "twice"),
            (json!([{ "name": "h", "filter": "true", "score": "1" }]), "rules[0].score", "both"),
            (json!([{ "name": "i" }]), "rules[0].filter", "needs a filter or a score"),
            (json!([{ "name": "j", "score": "1", "weight": 0 }]), "rules[0].weight", "must be in (0, 2147483647]"),
            (json!([{ "name": "k", "filter": "true", "weight": 2 }]), "rules[0].weight", "no weight"),
            (json!([{ "name": "l", "score": "1", "message": "m" }]), "rules[0].message", "no message"),
            (json!([{ "name": " ", "filter": "true" }]), "rules[0].name", "empty"),
            (json!([{ "name": "m", "filtre": "true" }]), "rules[0]", "filtre"),
        ];
        for (r, path, msg) in cases {
            let Err(e) = rules(r.clone()) else { panic!("{r} accepted") };
            assert!(e.path.starts_with(path), "{r}: path {:?}, want {path}", e.path);
            assert!(e.to_string().contains(msg), "{r}: {e}");
        }
    }

    #[test]
    fn guarded_rules_load() {
        // Rules that fail only on some nodes (a missing label) are not type
        // errors: they load.
        for expr in ["node.labels['pool'] == 'a'", "node.temperature < 80.0", "1 / node.free['nvidia.com/gpu'] > 0"] {
            assert!(rules(json!([{ "name": "r", "filter": expr }])).is_ok(), "{expr}");
        }
    }

    #[test]
    fn skips_points_without_rules() {
        let only_filters = rules(json!([{ "name": "r", "filter": "true" }])).unwrap();
        let snap = Snapshot::from_parts(vec![node("n").build()], vec![]);
        let p = pod("p").build();
        assert!(only_filters.as_pre_score().unwrap().pre_score(&mut CycleState::new(), &p, snap.node_list()).is_skip());
        let only_scores = rules(json!([{ "name": "r", "score": "1" }])).unwrap();
        assert!(only_scores.as_pre_filter().unwrap().pre_filter(&mut CycleState::new(), &p, &snap).1.is_skip());
    }

    #[test]
    fn node_values_follow_node_changes() {
        let plugin = CelRules::new(
            serde_json::from_value(json!({ "rules": [{ "name": "pods", "score": "node.podCount * 10" }] })).unwrap(),
        )
        .unwrap();
        let mut info = node("n").info();
        info.generation = 1;
        let p = pod("p").build();
        let s = |info: &NodeInfo| plugin.as_score().unwrap().score(&CycleState::new(), &p, &info.view()).unwrap();
        assert_eq!(s(&info), 0);
        info.add_pod(pod("a").node("n").arc());
        info.add_pod(pod("b").node("n").arc());
        // Same generation: the kept value is used.
        assert_eq!(s(&info), 0);
        info.generation = 2;
        assert_eq!(s(&info), 20);
    }

    #[test]
    fn explain_shows_every_rule() {
        let plugin = CelRules::new(
            serde_json::from_value(json!({ "rules": [
                { "name": "not-hot", "filter": "!has(node.temperature) || node.temperature < 90.0" },
                { "name": "ssd", "score": "node.labels[?'disk-type'].orValue('') == 'ssd' ? 100 : 0", "weight": 2 },
                { "name": "pool", "score": "node.labels['pool'] == 'a' ? 100 : 0" },
            ]}))
            .unwrap(),
        )
        .unwrap();
        let info = node("n").label(LABEL_DISK_TYPE, "ssd").annotation(ANNOTATION_TEMPERATURE, "70").info();
        let got = plugin.values(&CycleState::new(), &pod("p").build(), &info.view());
        assert_eq!(got[0], ("not-hot".to_string(), "true".to_string()));
        assert_eq!(got[1], ("ssd".to_string(), "100 (weight 2)".to_string()));
        assert_eq!(got[2].0, "pool");
        assert!(got[2].1.starts_with("error: No such key"), "{}", got[2].1);
    }

    #[test]
    fn position_finds_whole_words() {
        assert_eq!(position("nodes.x && nod.y", "nod"), Some((1, 12)));
        assert_eq!(position("a &&\n  b.c || c", "c"), Some((2, 10)));
        assert_eq!(position("x", "y"), None);
    }
}
