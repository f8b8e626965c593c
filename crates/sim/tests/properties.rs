//! Property tests of `sim::simulate` over random clusters and pods, with
//! kube-scheduler's plugin set and with the shipped default policy. Every placement is checked by an oracle
//! written here, independently of the plugins: capacity is never exceeded,
//! each placement respects the pod's hard constraints, unplaced pods say
//! why (and really fit nowhere), and the same input and seed decide the
//! same way.

use std::collections::BTreeMap;

use engine::config::Configuration;
use gpu_scheduler_sim as sim;
use proptest::prelude::*;
use serde_json::{Value, json};
use sim::{Manifests, SimOptions, Simulation};

const SCHEDULER: &str = "gpu-scheduler";
const GPU: &str = "nvidia.com/gpu";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Label keys nodes may carry, with their possible values.
const LABELS: &[(&str, &[&str])] = &[
    ("topology.kubernetes.io/zone", &["z1", "z2", "z3"]),
    ("disk", &["ssd", "hdd"]),
    ("team", &["a", "b", "c"]),
    // Integers, for Gt and Lt.
    ("generation", &["1", "2", "3"]),
];

/// Node selector operators.
const OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

/// Taints nodes may carry: key, value, effect.
const TAINTS: &[(&str, &str, &str)] = &[
    ("dedicated", "gpu", "NoSchedule"),
    ("spot", "true", "NoSchedule"),
    ("evict", "", "NoExecute"),
    ("soft", "yes", "PreferNoSchedule"),
];

/// Tolerations pods may carry: key, operator, value, effect (None: unset).
type Tol = (Option<&'static str>, &'static str, Option<&'static str>, Option<&'static str>);
const TOLERATIONS: &[Tol] = &[
    (Some("dedicated"), "Equal", Some("gpu"), Some("NoSchedule")),
    (Some("dedicated"), "Exists", None, None),
    // Wrong value: does not tolerate spot=true.
    (Some("spot"), "Equal", Some("false"), Some("NoSchedule")),
    // Wrong effect: does not tolerate spot=true:NoSchedule.
    (Some("spot"), "Exists", None, Some("NoExecute")),
    // Equal with no effect: every effect of spot=true.
    (Some("spot"), "Equal", Some("true"), None),
    (Some("evict"), "Exists", None, Some("NoExecute")),
    (Some(UNSCHEDULABLE_TAINT), "Exists", None, Some("NoSchedule")),
    // Empty key with Exists: tolerates everything.
    (None, "Exists", None, None),
];

#[derive(Debug, Clone)]
struct GenNode {
    milli_cpu: i64,
    memory_mi: i64,
    ephemeral_gi: Option<i64>,
    pods: i64,
    gpus: Option<i64>,
    /// Per `LABELS` key: the value index, if the node has the label.
    labels: Vec<Option<usize>>,
    /// Indexes into `TAINTS`.
    taints: Vec<usize>,
    unschedulable: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct GenPort {
    port: i32,
    protocol: &'static str,
    host_ip: &'static str,
}

#[derive(Debug, Clone)]
struct GenContainer {
    milli_cpu: Option<i64>,
    memory_mi: Option<i64>,
    ephemeral_gi: Option<i64>,
    gpus: Option<i64>,
    /// GPUs given as a limit only (the request defaults to it).
    gpu_limit_only: bool,
    host_port: Option<GenPort>,
}

#[derive(Debug, Clone)]
struct GenExpr {
    key: usize,
    op: &'static str,
    values: Vec<String>,
}

/// A node selector term: expressions and the optional field requirement
/// (`metadata.name` In or NotIn one node), all ANDed. An empty term
/// matches no node.
#[derive(Debug, Clone)]
struct GenTerm {
    exprs: Vec<GenExpr>,
    /// (NotIn, node index modulo the node count).
    name_field: Option<(bool, usize)>,
}

#[derive(Debug, Clone)]
struct GenPod {
    containers: Vec<GenContainer>,
    init: Option<GenContainer>,
    /// The init container is a sidecar (`restartPolicy: Always`): it keeps
    /// running beside the app containers.
    sidecar: bool,
    /// (label key index, value index).
    node_selector: Vec<(usize, usize)>,
    /// Required node affinity: terms ORed.
    affinity: Option<Vec<GenTerm>>,
    /// Indexes into `TOLERATIONS`.
    tolerations: Vec<usize>,
    /// Pre-bound to this node (modulo the node count): existing load.
    bound: Option<usize>,
    priority: i32,
    namespace: &'static str,
    /// Pending for the default scheduler: not ours, so neither placed nor load.
    foreign: bool,
}

#[derive(Debug, Clone)]
struct Input {
    nodes: Vec<GenNode>,
    pods: Vec<GenPod>,
    seed: u64,
}

fn node_strategy() -> impl Strategy<Value = GenNode> {
    let labels: Vec<_> = LABELS.iter().map(|(_, vals)| prop::option::of(0..vals.len())).collect();
    let taints = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::sample::subsequence((0..TAINTS.len()).collect::<Vec<_>>(), 1..=2),
    ];
    (
        (1i64..=32).prop_map(|x| x * 500),
        (1i64..=32).prop_map(|x| x * 1024),
        prop::option::weighted(0.5, 10i64..=100),
        2i64..=12,
        prop::option::weighted(0.4, 1i64..=8),
        labels,
        taints,
        prop::bool::weighted(0.15),
    )
        .prop_map(|(milli_cpu, memory_mi, ephemeral_gi, pods, gpus, labels, taints, unschedulable)| GenNode {
            milli_cpu,
            memory_mi,
            ephemeral_gi,
            pods,
            gpus,
            labels,
            taints,
            unschedulable,
        })
}

fn port_strategy() -> impl Strategy<Value = GenPort> {
    (
        prop::sample::select(vec![8080, 9090]),
        prop::sample::select(vec!["TCP", "UDP"]),
        prop::sample::select(vec!["", "127.0.0.1", "10.0.0.1"]),
    )
        .prop_map(|(port, protocol, host_ip)| GenPort { port, protocol, host_ip })
}

fn container_strategy() -> impl Strategy<Value = GenContainer> {
    (
        prop::option::weighted(0.8, (1i64..=40).prop_map(|x| x * 100)),
        prop::option::weighted(0.8, (1i64..=32).prop_map(|x| x * 256)),
        prop::option::weighted(0.15, 1i64..=20),
        prop::option::weighted(0.25, 1i64..=4),
        any::<bool>(),
        prop::option::weighted(0.15, port_strategy()),
    )
        .prop_map(|(milli_cpu, memory_mi, ephemeral_gi, gpus, gpu_limit_only, host_port)| GenContainer {
            milli_cpu,
            memory_mi,
            ephemeral_gi,
            gpus,
            gpu_limit_only,
            host_port,
        })
}

fn expr_strategy() -> impl Strategy<Value = GenExpr> {
    (0..LABELS.len(), prop::sample::select(OPS)).prop_flat_map(|(key, op)| {
        let vals = LABELS[key].1;
        let values: BoxedStrategy<Vec<String>> = match op {
            "In" | "NotIn" => prop::sample::subsequence(vals.to_vec(), 1..=vals.len())
                .prop_map(|v| v.into_iter().map(String::from).collect())
                .boxed(),
            "Gt" | "Lt" => (0..=4).prop_map(|i: i32| vec![i.to_string()]).boxed(),
            _ => Just(Vec::new()).boxed(),
        };
        values.prop_map(move |values| GenExpr { key, op, values })
    })
}

/// Name fields always name an existing node: naming none that exists
/// panics today (see `node_name_affinity_to_a_missing_node_leaves_the_pod_pending`
/// in scenarios.rs); widen the range once that is fixed.
fn term_strategy() -> impl Strategy<Value = GenTerm> {
    (prop::collection::vec(expr_strategy(), 0..=2), prop::option::weighted(0.2, (any::<bool>(), 0usize..30)))
        .prop_map(|(exprs, name_field)| GenTerm { exprs, name_field })
}

fn selector_entry() -> impl Strategy<Value = (usize, usize)> {
    (0..LABELS.len()).prop_flat_map(|k| (Just(k), 0..LABELS[k].1.len()))
}

fn pod_strategy() -> impl Strategy<Value = GenPod> {
    (
        prop::collection::vec(container_strategy(), 1..=2),
        prop::option::weighted(0.2, container_strategy()),
        prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(selector_entry(), 1..=2)],
        prop::option::weighted(0.3, prop::collection::vec(term_strategy(), 1..=2)),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::sample::subsequence((0..TOLERATIONS.len()).collect::<Vec<_>>(), 1..=3),
        ],
        prop::option::weighted(0.2, 0usize..30),
        prop::sample::select(vec![0, 10, 1000]),
        prop::sample::select(vec!["default", "team"]),
        (any::<bool>(), prop::bool::weighted(0.1)),
    )
        .prop_map(
            |(
                mut containers,
                mut init,
                node_selector,
                affinity,
                tolerations,
                bound,
                priority,
                namespace,
                (sidecar, foreign),
            )| {
                // A nodeSelector is a map: one value per key.
                let mut node_selector: Vec<(usize, usize)> = node_selector;
                node_selector.sort_by_key(|(k, _)| *k);
                node_selector.dedup_by_key(|(k, _)| *k);
                // The API rejects a pod whose own host ports clash; keep the first.
                let mut seen: Vec<GenPort> = Vec::new();
                for c in &mut containers {
                    if let Some(p) = c.host_port.take()
                        && !seen.iter().any(|s| ports_conflict(s, &p))
                    {
                        seen.push(p.clone());
                        c.host_port = Some(p);
                    }
                }
                if sidecar && let Some(i) = init.as_mut() {
                    // Whether sidecars' host ports are held is left out here.
                    i.host_port = None;
                }
                GenPod {
                    containers,
                    init,
                    sidecar,
                    node_selector,
                    affinity,
                    tolerations,
                    bound,
                    priority,
                    namespace,
                    foreign,
                }
            },
        )
}

fn input_strategy(nodes: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Input> {
    (prop::collection::vec(node_strategy(), nodes), prop::collection::vec(pod_strategy(), 1..=40), any::<u64>())
        .prop_map(|(nodes, pods, seed)| Input { nodes, pods, seed })
}

// ------------------------------------------------------------------ oracle

/// Amounts the oracle tracks, in the units generated (milli-cpu, MiB, GiB, GPUs, pods).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Amounts {
    milli_cpu: i64,
    memory_mi: i64,
    ephemeral_gi: i64,
    gpus: i64,
    pods: i64,
}

impl Amounts {
    fn add(&mut self, o: &Amounts) {
        self.milli_cpu += o.milli_cpu;
        self.memory_mi += o.memory_mi;
        self.ephemeral_gi += o.ephemeral_gi;
        self.gpus += o.gpus;
        self.pods += o.pods;
    }

    fn sub(&mut self, o: &Amounts) {
        self.milli_cpu -= o.milli_cpu;
        self.memory_mi -= o.memory_mi;
        self.ephemeral_gi -= o.ephemeral_gi;
        self.gpus -= o.gpus;
        self.pods -= o.pods;
    }

    fn fits_within(&self, alloc: &Amounts) -> bool {
        self.milli_cpu <= alloc.milli_cpu
            && self.memory_mi <= alloc.memory_mi
            && self.ephemeral_gi <= alloc.ephemeral_gi
            && self.gpus <= alloc.gpus
            && self.pods <= alloc.pods
    }
}

fn allocatable(n: &GenNode) -> Amounts {
    Amounts {
        milli_cpu: n.milli_cpu,
        memory_mi: n.memory_mi,
        ephemeral_gi: n.ephemeral_gi.unwrap_or(0),
        gpus: n.gpus.unwrap_or(0),
        pods: n.pods,
    }
}

fn container_amounts(c: &GenContainer) -> Amounts {
    Amounts {
        milli_cpu: c.milli_cpu.unwrap_or(0),
        memory_mi: c.memory_mi.unwrap_or(0),
        ephemeral_gi: c.ephemeral_gi.unwrap_or(0),
        gpus: c.gpus.unwrap_or(0),
        pods: 0,
    }
}

/// The pod's effective requests: per resource, the larger of the app
/// containers' sum and the one init container, or their sum when the init
/// container is a sidecar; plus one pod.
fn pod_amounts(p: &GenPod) -> Amounts {
    let mut sum = Amounts::default();
    for c in &p.containers {
        sum.add(&container_amounts(c));
    }
    if let Some(init) = p.init.as_ref().filter(|_| p.sidecar) {
        sum.add(&container_amounts(init));
    } else if let Some(init) = &p.init {
        let i = container_amounts(init);
        sum.milli_cpu = sum.milli_cpu.max(i.milli_cpu);
        sum.memory_mi = sum.memory_mi.max(i.memory_mi);
        sum.ephemeral_gi = sum.ephemeral_gi.max(i.ephemeral_gi);
        sum.gpus = sum.gpus.max(i.gpus);
    }
    sum.pods = 1;
    sum
}

/// Host ports of app containers (init containers' ports are not held).
fn pod_ports(p: &GenPod) -> Vec<&GenPort> {
    p.containers.iter().filter_map(|c| c.host_port.as_ref()).collect()
}

fn ports_conflict(a: &GenPort, b: &GenPort) -> bool {
    let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
    a.port == b.port
        && a.protocol == b.protocol
        && (wildcard(a.host_ip) || wildcard(b.host_ip) || a.host_ip == b.host_ip)
}

fn node_label(n: &GenNode, key: usize) -> Option<&'static str> {
    n.labels[key].map(|v| LABELS[key].1[v])
}

fn tolerates(tol: &Tol, key: &str, value: &str, effect: &str) -> bool {
    let (t_key, op, t_value, t_effect) = *tol;
    if t_effect.is_some_and(|e| e != effect) {
        return false;
    }
    match t_key {
        None => op == "Exists",
        Some(k) if k != key => false,
        Some(_) => op == "Exists" || t_value.unwrap_or("") == value,
    }
}

fn pod_tolerates(p: &GenPod, key: &str, value: &str, effect: &str) -> bool {
    p.tolerations.iter().any(|&i| tolerates(&TOLERATIONS[i], key, value, effect))
}

fn expr_matches(e: &GenExpr, n: &GenNode) -> bool {
    let label = node_label(n, e.key);
    let int = |s: &str| s.parse::<i64>().ok();
    match e.op {
        "In" => label.is_some_and(|v| e.values.iter().any(|x| x == v)),
        "NotIn" => label.is_none_or(|v| !e.values.iter().any(|x| x == v)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" => label.and_then(int).is_some_and(|v| v > int(&e.values[0]).unwrap()),
        "Lt" => label.and_then(int).is_some_and(|v| v < int(&e.values[0]).unwrap()),
        other => panic!("unknown operator {other}"),
    }
}

fn term_matches(t: &GenTerm, index: usize, n: &GenNode, node_count: usize) -> bool {
    if t.exprs.is_empty() && t.name_field.is_none() {
        return false;
    }
    let field_ok = t.name_field.is_none_or(|(not_in, i)| (i % node_count == index) != not_in);
    field_ok && t.exprs.iter().all(|e| expr_matches(e, n))
}

/// The hard, state-independent constraints: why `p` may not run on node
/// `index` of `node_count`.
fn static_violation(p: &GenPod, index: usize, n: &GenNode, node_count: usize) -> Option<String> {
    if n.unschedulable && !pod_tolerates(p, UNSCHEDULABLE_TAINT, "", "NoSchedule") {
        return Some("node is unschedulable and the pod does not tolerate it".into());
    }
    for &(k, v) in &p.node_selector {
        if node_label(n, k) != Some(LABELS[k].1[v]) {
            return Some(format!("nodeSelector {}={} not matched", LABELS[k].0, LABELS[k].1[v]));
        }
    }
    if let Some(terms) = &p.affinity
        && !terms.iter().any(|t| term_matches(t, index, n, node_count))
    {
        return Some("required node affinity not matched".into());
    }
    for &t in &n.taints {
        let (key, value, effect) = TAINTS[t];
        if (effect == "NoSchedule" || effect == "NoExecute") && !pod_tolerates(p, key, value, effect) {
            return Some(format!("untolerated taint {key}={value}:{effect}"));
        }
    }
    None
}

/// The reservation buffer's rule for GPU nodes: a pod may fill a
/// schedulable GPU node past the line while a tenth (rounded up) of the
/// schedulable GPU nodes keep the line without it. The generated nodes
/// have no GPU model: they are all one pool.
fn may_fill(load: &[Load], nodes: &[GenNode], idx: usize) -> bool {
    let gpu_node = |n: &GenNode| n.gpus.unwrap_or(0) > 0 && !n.unschedulable;
    if !gpu_node(&nodes[idx]) {
        return false;
    }
    let pool = nodes.iter().filter(|n| gpu_node(n)).count();
    let whole_others =
        nodes.iter().enumerate().filter(|(j, n)| *j != idx && gpu_node(n) && load[*j].within_line(n)).count();
    whole_others >= (pool * 10).div_ceil(100)
}

/// `Load::misfit_under` for node `idx` with the other nodes' loads.
fn misfit_at(load: &[Load], nodes: &[GenNode], idx: usize, p: &GenPod, profile: Profile) -> Option<String> {
    load[idx].misfit_under(p, &nodes[idx], profile, may_fill(load, nodes, idx))
}

/// Load of one node as the oracle sees it.
#[derive(Debug, Clone, Default)]
struct Load {
    used: Amounts,
    ports: Vec<GenPort>,
}

impl Load {
    /// Why `p` does not fit on top of this load, if it does not.
    fn misfit(&self, p: &GenPod, n: &GenNode) -> Option<String> {
        self.misfit_under(p, n, Profile::Standard, false)
    }

    /// Within the reservation buffer's line on cpu and memory.
    fn within_line(&self, n: &GenNode) -> bool {
        self.used.milli_cpu <= n.milli_cpu * 9 / 10 && (self.used.memory_mi << 20) <= (n.memory_mi << 20) * 9 / 10
    }

    /// As `misfit`, plus, for the policy profile, the reservation buffer:
    /// pods of priority ≤ 1,000,000 fill cpu and memory they request only
    /// to 90 % of allocatable, unless `may_fill` (the function).
    fn misfit_under(&self, p: &GenPod, n: &GenNode, profile: Profile, may_fill: bool) -> Option<String> {
        let mut after = self.used;
        let pod = pod_amounts(p);
        after.add(&pod);
        let alloc = allocatable(n);
        if !after.fits_within(&alloc) {
            return Some(format!("requests {after:?} exceed allocatable {alloc:?}"));
        }
        if profile == Profile::Policy && p.priority <= 1_000_000 && !may_fill {
            if pod.milli_cpu > 0 && after.milli_cpu > alloc.milli_cpu * 9 / 10 {
                return Some(format!("cpu {} over 90% of {}", after.milli_cpu, alloc.milli_cpu));
            }
            if pod.memory_mi > 0 && (after.memory_mi << 20) > (alloc.memory_mi << 20) * 9 / 10 {
                return Some(format!("memory {}Mi over 90% of {}Mi", after.memory_mi, alloc.memory_mi));
            }
        }
        for port in pod_ports(p) {
            if let Some(other) = self.ports.iter().find(|o| ports_conflict(port, o)) {
                return Some(format!("host port {port:?} conflicts with {other:?}"));
            }
        }
        None
    }

    /// A pod leaves (preempted).
    fn remove(&mut self, p: &GenPod) {
        self.used.sub(&pod_amounts(p));
        for port in pod_ports(p) {
            if let Some(i) = self.ports.iter().position(|o| o == port) {
                self.ports.swap_remove(i);
            }
        }
    }

    fn add(&mut self, p: &GenPod) {
        self.used.add(&pod_amounts(p));
        self.ports.extend(pod_ports(p).into_iter().cloned());
    }
}

// --------------------------------------------------------------- manifests

fn node_name(i: usize) -> String {
    format!("node-{i}")
}

fn node_json(i: usize, n: &GenNode) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(node_name(i)));
    for (k, v) in n.labels.iter().enumerate() {
        if let Some(v) = v {
            labels.insert(LABELS[k].0.into(), json!(LABELS[k].1[*v]));
        }
    }
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|&t| {
            let (key, value, effect) = TAINTS[t];
            json!({"key": key, "value": value, "effect": effect})
        })
        .collect();
    let mut alloc = json!({
        "cpu": format!("{}m", n.milli_cpu),
        "memory": format!("{}Mi", n.memory_mi),
        "pods": n.pods.to_string(),
    });
    if let Some(g) = n.gpus {
        alloc[GPU] = json!(g.to_string());
    }
    if let Some(e) = n.ephemeral_gi {
        alloc["ephemeral-storage"] = json!(format!("{e}Gi"));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name(i), "labels": labels},
        "spec": {"taints": taints, "unschedulable": n.unschedulable},
        "status": {"allocatable": alloc},
    })
}

fn container_json(name: String, c: &GenContainer) -> Value {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    if let Some(m) = c.milli_cpu {
        requests.insert("cpu".into(), json!(format!("{m}m")));
    }
    if let Some(m) = c.memory_mi {
        requests.insert("memory".into(), json!(format!("{m}Mi")));
    }
    if let Some(e) = c.ephemeral_gi {
        requests.insert("ephemeral-storage".into(), json!(format!("{e}Gi")));
    }
    if let Some(g) = c.gpus {
        // Extended resources: requests must equal limits; a limit alone implies the request.
        limits.insert(GPU.into(), json!(g.to_string()));
        if !c.gpu_limit_only {
            requests.insert(GPU.into(), json!(g.to_string()));
        }
    }
    let mut v =
        json!({"name": name, "image": "registry.example/app:1", "resources": {"requests": requests, "limits": limits}});
    if let Some(p) = &c.host_port {
        let mut port = json!({"containerPort": 80, "hostPort": p.port, "protocol": p.protocol});
        if !p.host_ip.is_empty() {
            port["hostIP"] = json!(p.host_ip);
        }
        v["ports"] = json!([port]);
    }
    v
}

fn pod_name(i: usize) -> String {
    format!("pod-{i}")
}

fn pod_json(i: usize, p: &GenPod, node: Option<String>, node_count: usize) -> Value {
    let containers: Vec<Value> =
        p.containers.iter().enumerate().map(|(k, c)| container_json(format!("c{k}"), c)).collect();
    let mut spec = json!({"priority": p.priority, "containers": containers});
    if !p.foreign {
        spec["schedulerName"] = json!(SCHEDULER);
    }
    if let Some(init) = &p.init {
        let mut c = container_json("init".into(), init);
        if p.sidecar {
            c["restartPolicy"] = json!("Always");
        }
        spec["initContainers"] = json!([c]);
    }
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    if !p.node_selector.is_empty() {
        let sel: serde_json::Map<String, Value> =
            p.node_selector.iter().map(|&(k, v)| (LABELS[k].0.to_string(), json!(LABELS[k].1[v]))).collect();
        spec["nodeSelector"] = Value::Object(sel);
    }
    if let Some(terms) = &p.affinity {
        let terms: Vec<Value> = terms
            .iter()
            .map(|t| {
                let mut term = json!({});
                if !t.exprs.is_empty() {
                    let exprs: Vec<Value> = t
                        .exprs
                        .iter()
                        .map(|e| {
                            let mut v = json!({"key": LABELS[e.key].0, "operator": e.op});
                            if !e.values.is_empty() {
                                v["values"] = json!(e.values);
                            }
                            v
                        })
                        .collect();
                    term["matchExpressions"] = json!(exprs);
                }
                if let Some((not_in, idx)) = t.name_field {
                    term["matchFields"] = json!([{
                        "key": "metadata.name",
                        "operator": if not_in { "NotIn" } else { "In" },
                        "values": [node_name(idx % node_count)],
                    }]);
                }
                term
            })
            .collect();
        spec["affinity"] =
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    }
    if !p.tolerations.is_empty() {
        let tols: Vec<Value> = p
            .tolerations
            .iter()
            .map(|&t| {
                let (key, op, value, effect) = TOLERATIONS[t];
                let mut v = json!({"operator": op});
                if let Some(k) = key {
                    v["key"] = json!(k);
                }
                if let Some(val) = value {
                    v["value"] = json!(val);
                }
                if let Some(e) = effect {
                    v["effect"] = json!(e);
                }
                v
            })
            .collect();
        spec["tolerations"] = json!(tols);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(i), "namespace": p.namespace},
        "spec": spec,
    })
}

/// The scenario as the simulator and the oracle see it.
struct Scenario {
    /// Multi-document YAML (JSON documents are YAML).
    text: String,
    /// Per node: the load of the pre-bound pods.
    existing: Vec<Load>,
    /// Pending pods by `NAMESPACE/NAME`.
    pending: BTreeMap<String, GenPod>,
    /// Pre-bound pods by `NAMESPACE/NAME`, with their node's index.
    bound: BTreeMap<String, (usize, GenPod)>,
}

/// Writes the manifests. A pre-bound pod is kept only where it fits (as
/// the kubelet would admit it), so that the cluster starts within capacity.
fn build(input: &Input) -> Scenario {
    let mut docs: Vec<String> = input.nodes.iter().enumerate().map(|(i, n)| node_json(i, n).to_string()).collect();
    let mut existing = vec![Load::default(); input.nodes.len()];
    let mut pending = BTreeMap::new();
    let mut bound = BTreeMap::new();
    for (i, p) in input.pods.iter().enumerate() {
        let node = match p.bound {
            Some(b) => {
                let idx = b % input.nodes.len();
                if existing[idx].misfit(p, &input.nodes[idx]).is_some() {
                    continue;
                }
                existing[idx].add(p);
                bound.insert(format!("{}/{}", p.namespace, pod_name(i)), (idx, p.clone()));
                Some(node_name(idx))
            }
            None => {
                if !p.foreign {
                    pending.insert(format!("{}/{}", p.namespace, pod_name(i)), p.clone());
                }
                None
            }
        };
        docs.push(pod_json(i, p, node, input.nodes.len()).to_string());
    }
    Scenario { text: docs.join("\n---\n"), existing, pending, bound }
}

/// Which default plugin set a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    /// kube-scheduler's plugins and weights.
    Standard,
    /// The shipped default: the seed's policy. The generated clusters carry
    /// no cloud, maintenance, spot or temperature facts, so of its filters
    /// only the reservation buffer can reject a node the standard set takes.
    Policy,
}

fn run(text: &str, seed: u64, profile: Profile) -> Simulation {
    let mut manifests = Manifests::default();
    manifests.add_str("generated.yaml", text).unwrap_or_else(|e| panic!("generated manifests rejected: {e}\n{text}"));
    let opts = SimOptions { seed, now: "2026-01-01T00:00:00Z".parse().unwrap(), explain: None, extenders: Vec::new() };
    sim::simulate(
        &manifests,
        &Configuration::default(),
        &plugins::registry(),
        &match profile {
            Profile::Standard => plugins::standard_plugins(),
            Profile::Policy => plugins::default_plugins(),
        },
        &opts,
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("simulate failed: {e}"))
}

fn summary(sim: &Simulation) -> Vec<(String, Option<String>, Option<String>)> {
    sim.placements.iter().map(|p| (p.pod.clone(), p.node.clone(), p.reason.clone())).collect()
}

fn node_index(name: &str) -> usize {
    name.strip_prefix("node-").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("unknown node {name}"))
}

fn check(input: &Input) -> Result<(), TestCaseError> {
    check_under(input, Profile::Standard)?;
    check_under(input, Profile::Policy)
}

fn check_under(input: &Input, profile: Profile) -> Result<(), TestCaseError> {
    let scenario = build(input);
    let sim = run(&scenario.text, input.seed, profile);

    // Every pending pod of ours is reported exactly once.
    let mut reported: Vec<&str> = sim.placements.iter().map(|p| p.pod.as_str()).collect();
    reported.sort_unstable();
    let expected: Vec<&str> = scenario.pending.keys().map(String::as_str).collect();
    prop_assert_eq!(reported, expected, "placements must list each pending pod once");
    prop_assert_eq!(sim.existing_pods, scenario.existing.iter().map(|l| l.used.pods as usize).sum::<usize>());
    prop_assert_eq!(sim.foreign_pods, input.pods.iter().filter(|p| p.foreign && p.bound.is_none()).count());

    // Preemption: victims only of lower priority than the pod they made
    // room for, and each evicted once.
    let priority_of = |key: &str| {
        scenario.pending.get(key).map(|p| p.priority).or_else(|| scenario.bound.get(key).map(|(_, p)| p.priority))
    };
    let mut evicted = std::collections::BTreeSet::new();
    for v in &sim.preempted {
        prop_assert!(evicted.insert(v.pod.clone()), "{} preempted twice", v.pod);
        let (victim, by) = (priority_of(&v.pod), priority_of(&v.by));
        prop_assert!(victim < by, "{} (priority {victim:?}) preempted for {} (priority {by:?})", v.pod, v.by);
    }

    let mut load = scenario.existing.clone();
    let mut preemptions = sim.preempted.iter().peekable();
    for p in &sim.placements {
        let pod = &scenario.pending[&p.pod];
        // Pods preempted by earlier decisions are gone for this one (a
        // pending pod placed then preempted is reported unplaced, so it
        // never counted).
        while let Some(v) = preemptions.next_if(|v| p.decided.is_some_and(|d| v.at < d)) {
            if let Some((idx, victim)) = scenario.bound.get(&v.pod) {
                load[*idx].remove(victim);
            }
        }
        match &p.node {
            Some(node) => {
                let idx = node_index(node);
                let n = &input.nodes[idx];
                // (b) hard constraints of the placement.
                if let Some(why) = static_violation(pod, idx, n, input.nodes.len()) {
                    prop_assert!(false, "{} placed on {}: {}", p.pod, node, why);
                }
                // (a) capacity, and (b) host ports, against what the node held at that point.
                if let Some(why) = misfit_at(&load, &input.nodes, idx, pod, profile) {
                    prop_assert!(false, "{} placed on {}: {}", p.pod, node, why);
                }
                load[idx].add(pod);
                prop_assert!(p.reason.is_none(), "{} placed but has reason {:?}", p.pod, p.reason);
            }
            None => {
                // (c) an unplaced pod says why, in kube-scheduler's format
                // (or that it was preempted).
                let reason = p.reason.as_deref().unwrap_or("");
                let preempted = reason.starts_with("preempted by ") && evicted.contains(&p.pod);
                prop_assert!(reason.starts_with("0/") || preempted, "{} unplaced with reason {:?}", p.pod, reason);
            }
        }
    }
    for v in preemptions {
        if let Some((idx, victim)) = scenario.bound.get(&v.pod) {
            load[*idx].remove(victim);
        }
    }
    // (a) final sums within allocatable, per node.
    for (i, n) in input.nodes.iter().enumerate() {
        prop_assert!(load[i].used.fits_within(&allocatable(n)), "node-{i}: {:?} > {:?}", load[i].used, allocatable(n));
    }
    // Nodes only fill up and no constraint here depends on other pods'
    // labels, so an unplaced pod must not fit any node at the end either.
    for p in sim.placements.iter().filter(|p| p.node.is_none() && !evicted.contains(&p.pod)) {
        let pod = &scenario.pending[&p.pod];
        for (i, n) in input.nodes.iter().enumerate() {
            let fits = static_violation(pod, i, n, input.nodes.len()).is_none()
                && misfit_at(&load, &input.nodes, i, pod, profile).is_none();
            prop_assert!(!fits, "{} unplaced ({:?}) but fits node-{}", p.pod, p.reason, i);
        }
    }
    // The simulator's own accounting agrees with the oracle's.
    for usage in &sim.nodes {
        let l = &load[node_index(&usage.name)].used;
        prop_assert_eq!(usage.milli_cpu.0, l.milli_cpu, "{} cpu", usage.name);
        prop_assert_eq!(usage.memory.0, l.memory_mi << 20, "{} memory", usage.name);
        prop_assert_eq!(usage.gpu.0, l.gpus, "{} gpus", usage.name);
        prop_assert_eq!(usage.pods.0, l.pods, "{} pods", usage.name);
    }
    // (d) determinism: same text, same seed, same decisions.
    let again = run(&scenario.text, input.seed, profile);
    prop_assert_eq!(summary(&sim), summary(&again), "same input and seed must give the same placements");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn placements_respect_capacity_and_constraints(input in input_strategy(2..=30)) {
        check(&input)?;
    }
}

proptest! {
    // Over 100 nodes the search stops after a share of feasible nodes
    // (percentageOfNodesToScore) and resumes where it left off: the same
    // properties must hold.
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn large_clusters_searched_partially_keep_the_properties(input in input_strategy(110..=160)) {
        check(&input)?;
    }
}

/// The oracle itself, on hand-made cases, so a wrong oracle cannot pass
/// the property vacuously.
#[test]
fn oracle_sanity() {
    let expr = |key, op, values: &[&str]| GenExpr { key, op, values: values.iter().map(|v| v.to_string()).collect() };
    let term = |exprs| GenTerm { exprs, name_field: None };
    let node = GenNode {
        milli_cpu: 2000,
        memory_mi: 4096,
        ephemeral_gi: None,
        pods: 2,
        gpus: None,
        labels: vec![Some(0), None, None, Some(1)],
        taints: vec![1],
        unschedulable: true,
    };
    let c = |cpu, port: Option<GenPort>| GenContainer {
        milli_cpu: Some(cpu),
        memory_mi: None,
        ephemeral_gi: None,
        gpus: None,
        gpu_limit_only: false,
        host_port: port,
    };
    let mut pod = GenPod {
        containers: vec![c(500, None), c(500, None)],
        init: Some(c(1500, None)),
        sidecar: false,
        node_selector: vec![(0, 0)],
        affinity: Some(vec![term(vec![expr(1, "NotIn", &["ssd"])])]),
        tolerations: vec![],
        bound: None,
        priority: 0,
        namespace: "default",
        foreign: false,
    };
    assert_eq!(pod_amounts(&pod).milli_cpu, 1500, "init container peak");
    assert_eq!(pod_amounts(&GenPod { sidecar: true, ..pod.clone() }).milli_cpu, 2500, "sidecar runs beside");
    assert!(static_violation(&pod, 0, &node, 1).unwrap().contains("unschedulable"));
    pod.tolerations = vec![6];
    assert!(static_violation(&pod, 0, &node, 1).unwrap().contains("spot"));
    pod.tolerations = vec![6, 3];
    assert!(static_violation(&pod, 0, &node, 1).unwrap().contains("spot"), "wrong effect does not tolerate");
    pod.tolerations = vec![6, 4];
    assert_eq!(static_violation(&pod, 0, &node, 1), None);
    pod.tolerations = vec![7];
    assert_eq!(static_violation(&pod, 0, &node, 1), None, "empty key Exists tolerates all");
    pod.node_selector = vec![(0, 1)];
    assert!(static_violation(&pod, 0, &node, 1).is_some());
    pod.node_selector = vec![];
    pod.affinity = Some(vec![term(vec![expr(0, "In", &["z2", "z3"])])]);
    assert!(static_violation(&pod, 0, &node, 1).is_some());
    pod.affinity = Some(vec![term(vec![expr(0, "In", &["z2", "z3"])]), term(vec![expr(2, "NotIn", &["a"])])]);
    assert_eq!(static_violation(&pod, 0, &node, 1), None, "terms are ORed; NotIn matches an absent label");
    // Node: zone z1, generation 2, no disk or team label.
    let cases: &[(&str, Vec<GenExpr>, bool)] = &[
        ("exists", vec![expr(0, "Exists", &[])], true),
        ("exists, absent", vec![expr(1, "Exists", &[])], false),
        ("does not exist", vec![expr(1, "DoesNotExist", &[])], true),
        ("does not exist, present", vec![expr(0, "DoesNotExist", &[])], false),
        ("gt", vec![expr(3, "Gt", &["1"])], true),
        ("gt, equal", vec![expr(3, "Gt", &["2"])], false),
        ("lt", vec![expr(3, "Lt", &["3"])], true),
        ("lt, absent label", vec![expr(2, "Lt", &["3"])], false),
        ("gt, non-integer label", vec![expr(0, "Gt", &["0"])], false),
        ("and", vec![expr(0, "In", &["z1"]), expr(3, "Lt", &["2"])], false),
        ("empty term", vec![], false),
    ];
    for (name, exprs, want) in cases {
        pod.affinity = Some(vec![term(exprs.clone())]);
        assert_eq!(static_violation(&pod, 0, &node, 1).is_none(), *want, "{name}");
    }
    let by_name = |not_in, i| Some(vec![GenTerm { exprs: vec![], name_field: Some((not_in, i)) }]);
    pod.affinity = by_name(false, 3);
    assert_eq!(static_violation(&pod, 1, &node, 2), None, "3 % 2 == 1");
    assert!(static_violation(&pod, 0, &node, 2).is_some());
    pod.affinity = by_name(true, 3);
    assert!(static_violation(&pod, 1, &node, 2).is_some());
    pod.affinity = None;

    let mut load = Load::default();
    assert_eq!(load.misfit(&pod, &node), None);
    load.add(&pod);
    assert!(load.misfit(&pod, &node).is_some(), "3000m > 2000m");
    let port = |ip| Some(GenPort { port: 8080, protocol: "TCP", host_ip: ip });
    let small = |p| GenPod { containers: vec![c(100, p)], init: None, ..pod.clone() };
    let mut load = Load::default();
    load.add(&small(port("127.0.0.1")));
    assert_eq!(load.misfit(&small(port("10.0.0.1")), &node), None, "different host IPs");
    assert!(load.misfit(&small(port("")), &node).is_some(), "wildcard conflicts");
    load.add(&small(None));
    assert!(load.misfit(&small(None), &node).unwrap().contains("exceed"), "pod count");
}
