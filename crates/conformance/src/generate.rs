//! Seeded scenario generation: the same seed gives the same scenario on
//! every machine (`StdRng` is ChaCha), and every object is one the API
//! server accepts.
//!
//! Shapes left out on purpose: container images on nodes (ImageLocality is
//! not in our kube-default profile; with no image on any node it scores 0
//! everywhere in kube too), DRA claims (not implemented yet), pod
//! priorities (a preemption would evict bound pods between the two runs),
//! Immediate claims that a volume could satisfy (the PV controller would
//! bind them while a run is under way), CSI attach limits (the control
//! plane has no CSI driver to report them).

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::scenario::{OUR_SCHEDULER, Scenario};

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// The extended resource nodes may offer and pods request.
pub const EXTENDED: &str = "example.com/accel";
/// A provisioner no controller serves: a claim of its class is never
/// provisioned, which is all a scheduler needs (it only picks the node).
pub const PROVISIONER: &str = "example.com/csi";
const ZONES: [&str; 3] = ["z1", "z2", "z3"];
const APPS: [&str; 3] = ["web", "db", "cache"];
const ROLES: [&str; 2] = ["front", "back"];
const VERSIONS: [&str; 2] = ["v1", "v2"];
const TEAMS: [&str; 2] = ["a", "b"];
const TAINT_KEYS: [&str; 3] = ["dedicated", "spot", "example.com/special"];
const TAINT_VALUES: [&str; 3] = ["", "gpu", "infra"];
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The scenario of `seed`; its objects' names start with `s` and the seed.
pub fn generate(seed: u64) -> Scenario {
    generate_named(seed, "s")
}

/// The scenario of `seed` with names starting with `prefix` and the seed
/// (a named case gets a prefix of its own, so that it never waits for the
/// same seed's generated objects to be deleted).
pub fn generate_named(seed: u64, prefix: &str) -> Scenario {
    Gen::new(seed, format!("{prefix}{seed}")).scenario()
}

/// Converts generated JSON into its API type; the generator only writes
/// fields of these types, so a failure is a bug in this file.
fn typed<T: DeserializeOwned>(v: Value) -> T {
    match serde_json::from_value(v.clone()) {
        Ok(t) => t,
        Err(e) => panic!("the generator wrote an object its type does not accept ({e}): {v}"),
    }
}

struct NodeShape {
    name: String,
    labels: BTreeMap<String, String>,
    /// (key, value, effect)
    taints: Vec<(String, String, String)>,
}

struct Gen {
    rng: StdRng,
    seed: u64,
    /// Every object's name starts with it.
    base: String,
    ns: String,
    other_ns: String,
    nodes: Vec<NodeShape>,
    /// Pod volumes of the pending pod, and claims/volumes/classes made for them.
    pending_volumes: Vec<Value>,
    bound_volumes: BTreeMap<usize, Vec<Value>>,
    claims: Vec<Value>,
    volumes: Vec<Value>,
    classes: Vec<Value>,
}

impl Gen {
    fn new(seed: u64, base: String) -> Gen {
        Gen {
            rng: StdRng::seed_from_u64(seed),
            seed,
            ns: base.clone(),
            other_ns: format!("{base}-o"),
            base,
            nodes: Vec::new(),
            pending_volumes: Vec::new(),
            bound_volumes: BTreeMap::new(),
            claims: Vec::new(),
            volumes: Vec::new(),
            classes: Vec::new(),
        }
    }

    fn p(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items.choose(&mut self.rng).copied().unwrap_or_else(|| panic!("pick from an empty list"))
    }

    fn pick_s(&mut self, items: &[&str]) -> String {
        self.pick(items).to_string()
    }

    fn range(&mut self, lo: usize, hi_inclusive: usize) -> usize {
        self.rng.random_range(lo..=hi_inclusive)
    }

    fn scenario(mut self) -> Scenario {
        let namespaces = vec![
            typed(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.ns, "labels": {"team": "a"}}})),
            typed(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.other_ns, "labels": {"team": self.pick_s(&TEAMS)}}})),
        ];
        let n_nodes = *[1usize, 2, 3, 4, 4, 5, 5, 6, 6, 7, 8].choose(&mut self.rng).unwrap_or(&3);
        let nodes: Vec<Value> = (0..n_nodes).map(|i| self.node(i)).collect();
        let n_bound = self.range(0, (2 * n_nodes).min(10));
        if self.p(0.3) {
            self.volumes_for_pending(n_bound);
        }
        let bound: Vec<Value> = (0..n_bound).map(|j| self.bound_pod(j)).collect();
        let pending = self.pending_pod();
        let mut services = Vec::new();
        if self.p(0.15) {
            // kube's default spreading applies to pods a Service selects.
            let app = pending["metadata"]["labels"]["app"].as_str().unwrap_or("web").to_string();
            services.push(typed(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc", "namespace": self.ns},
                "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}})));
        }
        Scenario {
            name: format!("seed-{}", self.seed),
            namespaces,
            storage_classes: self.classes.drain(..).map(typed).collect(),
            volumes: self.volumes.drain(..).map(typed).collect(),
            claims: self.claims.drain(..).map(typed).collect(),
            nodes: nodes.into_iter().map(typed).collect(),
            services,
            bound_pods: bound.into_iter().map(typed).collect(),
            pending: typed(pending),
        }
    }

    fn node(&mut self, i: usize) -> Value {
        let name = format!("{}-n{i}", self.base);
        let mut labels = BTreeMap::new();
        if self.p(0.95) {
            labels.insert(HOSTNAME.to_string(), name.clone());
        }
        if self.p(0.85) {
            labels.insert(ZONE.to_string(), self.pick_s(&ZONES));
        }
        if self.p(0.6) {
            labels.insert("disk".to_string(), self.pick_s(&["ssd", "hdd"]));
        }
        if self.p(0.7) {
            labels.insert("tier".to_string(), self.range(1, 9).to_string());
        }
        if self.p(0.4) {
            labels.insert("team".to_string(), self.pick_s(&TEAMS));
        }
        let mut taints: Vec<(String, String, String)> = Vec::new();
        let n_taints = *[0usize, 0, 0, 0, 0, 0, 0, 1, 1, 2].choose(&mut self.rng).unwrap_or(&0);
        for _ in 0..n_taints {
            let t = (self.pick_s(&TAINT_KEYS), self.pick_s(&TAINT_VALUES), self.pick_s(&EFFECTS));
            // The API refuses two taints with the same key and effect.
            if !taints.iter().any(|(k, _, e)| *k == t.0 && *e == t.2) {
                taints.push(t);
            }
        }
        let mut allocatable = serde_json::Map::new();
        allocatable.insert("cpu".into(), json!(self.pick_s(&["1", "2", "4", "8", "1500m"])));
        allocatable.insert("memory".into(), json!(self.pick_s(&["2Gi", "4Gi", "8Gi", "16Gi"])));
        if self.p(0.85) {
            allocatable.insert("ephemeral-storage".into(), json!(self.pick_s(&["10Gi", "50Gi"])));
        }
        let pods = if self.p(0.15) { self.range(1, 4).to_string() } else { "110".to_string() };
        allocatable.insert("pods".into(), json!(pods));
        if self.p(0.5) {
            allocatable.insert(EXTENDED.into(), json!(self.range(1, 4).to_string()));
        }
        let mut spec = serde_json::Map::new();
        if !taints.is_empty() {
            let t: Vec<Value> = taints
                .iter()
                .map(|(k, v, e)| {
                    if v.is_empty() {
                        json!({"key": k, "effect": e})
                    } else {
                        json!({"key": k, "value": v, "effect": e})
                    }
                })
                .collect();
            spec.insert("taints".into(), json!(t));
        }
        if self.p(0.07) {
            spec.insert("unschedulable".into(), json!(true));
        }
        self.nodes.push(NodeShape { name: name.clone(), labels: labels.clone(), taints });
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"capacity": allocatable, "allocatable": allocatable}})
    }

    fn node_name(&mut self) -> String {
        let i = self.range(0, self.nodes.len() - 1);
        self.nodes[i].name.clone()
    }

    /// Labels of an existing or pending pod.
    fn pod_labels(&mut self, p_app: f64) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        if self.p(p_app) {
            labels.insert("app".to_string(), self.pick_s(&APPS));
        }
        if self.p(0.5) {
            labels.insert("role".to_string(), self.pick_s(&ROLES));
        }
        if self.p(0.4) {
            labels.insert("version".to_string(), self.pick_s(&VERSIONS));
        }
        labels
    }

    fn bound_pod(&mut self, j: usize) -> Value {
        let node = self.node_name();
        let ns = if self.p(0.8) { self.ns.clone() } else { self.other_ns.clone() };
        let labels = self.pod_labels(0.9);
        let mut requests = serde_json::Map::new();
        requests.insert("cpu".into(), json!(self.pick_s(&["100m", "250m", "500m", "1", "2"])));
        requests.insert("memory".into(), json!(self.pick_s(&["128Mi", "512Mi", "1Gi", "2Gi"])));
        if self.p(0.2) {
            requests.insert("ephemeral-storage".into(), json!(self.pick_s(&["1Gi", "8Gi"])));
        }
        let mut limits = serde_json::Map::new();
        if self.p(0.2) {
            let n = json!(self.range(1, 2).to_string());
            requests.insert(EXTENDED.into(), n.clone());
            limits.insert(EXTENDED.into(), n);
        }
        let mut container = json!({"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": resources(requests, limits)});
        if self.p(0.15) {
            container["ports"] = json!([self.host_port()]);
        }
        // Bound pods tolerate everything: the taint-eviction controller
        // would otherwise delete those on NoExecute nodes mid-scenario.
        let mut spec = json!({"nodeName": node, "containers": [container],
            "tolerations": [{"operator": "Exists"}]});
        let mut affinity = serde_json::Map::new();
        if self.p(0.12) {
            let term = self.affinity_term(false);
            affinity
                .insert("podAntiAffinity".into(), json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]}));
        }
        if self.p(0.1) {
            let kind = if self.p(0.5) { "podAffinity" } else { "podAntiAffinity" };
            let term = self.affinity_term(false);
            let weight = self.range(1, 100);
            let entry = affinity.entry(kind).or_insert_with(|| json!({}));
            entry["preferredDuringSchedulingIgnoredDuringExecution"] =
                json!([{"weight": weight, "podAffinityTerm": term}]);
        }
        if self.p(0.06) {
            // An existing pod's required affinity counts in scoring
            // (hardPodAffinityWeight).
            let term = self.affinity_term(false);
            let entry = affinity.entry("podAffinity").or_insert_with(|| json!({}));
            entry["requiredDuringSchedulingIgnoredDuringExecution"] = json!([term]);
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        if ns == self.ns
            && let Some(vols) = self.bound_volumes.remove(&j)
        {
            spec["volumes"] = json!(vols);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("b{j}"), "namespace": ns, "labels": labels},
            "spec": spec})
    }

    fn host_port(&mut self) -> Value {
        let port = *[8080, 9090].choose(&mut self.rng).unwrap_or(&8080);
        let protocol = self.pick_s(&["TCP", "TCP", "UDP"]);
        let mut p = json!({"containerPort": port, "hostPort": port, "protocol": protocol});
        if self.p(0.3) {
            p["hostIP"] = json!(self.pick_s(&["127.0.0.1", "0.0.0.0", "10.0.0.1"]));
        }
        p
    }

    fn label_selector(&mut self, own: &BTreeMap<String, String>) -> Value {
        if self.p(0.7) {
            let app = match own.get("app") {
                Some(a) if self.p(0.6) => a.clone(),
                _ => self.pick_s(&APPS),
            };
            let mut sel = json!({"matchLabels": {"app": app}});
            if self.p(0.2) {
                sel["matchLabels"]["role"] = json!(self.pick_s(&ROLES));
            }
            sel
        } else {
            let expr = match self.range(0, 3) {
                0 => json!({"key": "app", "operator": "In", "values": [self.pick_s(&APPS), self.pick_s(&APPS)]}),
                1 => json!({"key": "app", "operator": "NotIn", "values": [self.pick_s(&APPS)]}),
                2 => json!({"key": "role", "operator": "Exists"}),
                _ => json!({"key": "role", "operator": "DoesNotExist"}),
            };
            json!({"matchExpressions": [dedup_values(expr)]})
        }
    }

    fn topology_key(&mut self) -> String {
        self.pick_s(&[ZONE, ZONE, HOSTNAME, HOSTNAME, "disk"])
    }

    /// A pod (anti-)affinity term; `pending` adds the namespace and
    /// label-key options of the incoming pod.
    fn affinity_term(&mut self, pending: bool) -> Value {
        let own = BTreeMap::new();
        let sel = self.label_selector(&own);
        let mut term = json!({"labelSelector": sel, "topologyKey": self.topology_key()});
        if pending {
            match self.range(0, 9) {
                0 => term["namespaces"] = json!([self.other_ns]),
                1 => term["namespaces"] = json!([self.ns, self.other_ns]),
                2 => term["namespaceSelector"] = json!({}),
                3 => term["namespaceSelector"] = json!({"matchLabels": {"team": self.pick_s(&TEAMS)}}),
                _ => {}
            }
            let used: Vec<String> = sel_keys(&term["labelSelector"]);
            if self.p(0.15) && !used.iter().any(|k| k == "version") {
                let field = if self.p(0.5) { "matchLabelKeys" } else { "mismatchLabelKeys" };
                term[field] = json!(["version"]);
            }
        }
        term
    }

    fn node_selector_requirement(&mut self) -> Value {
        let r = match self.range(0, 9) {
            0 | 1 => json!({"key": ZONE, "operator": "In", "values": [self.pick_s(&ZONES), self.pick_s(&ZONES)]}),
            2 => json!({"key": ZONE, "operator": "NotIn", "values": [self.pick_s(&ZONES)]}),
            3 => json!({"key": "disk", "operator": self.pick_s(&["Exists", "DoesNotExist"])}),
            4 => json!({"key": "disk", "operator": "In", "values": [self.pick_s(&["ssd", "hdd"])]}),
            5 | 6 => {
                json!({"key": "tier", "operator": self.pick_s(&["Gt", "Lt"]), "values": [self.range(0, 9).to_string()]})
            }
            7 => json!({"key": "team", "operator": self.pick_s(&["In", "NotIn"]), "values": [self.pick_s(&TEAMS)]}),
            8 => {
                let n = self.node_name();
                json!({"key": HOSTNAME, "operator": self.pick_s(&["In", "NotIn"]), "values": [n]})
            }
            _ => json!({"key": "team", "operator": self.pick_s(&["Exists", "DoesNotExist"])}),
        };
        dedup_values(r)
    }

    fn node_selector_term(&mut self) -> Value {
        let mut term = serde_json::Map::new();
        let n_expr = if self.p(0.8) { self.range(1, 2) } else { 0 };
        let exprs: Vec<Value> = (0..n_expr).map(|_| self.node_selector_requirement()).collect();
        if !exprs.is_empty() {
            term.insert("matchExpressions".into(), json!(exprs));
        }
        if exprs.is_empty() || self.p(0.2) {
            // The API allows only metadata.name, In or NotIn, one value.
            let n = self.node_name();
            term.insert(
                "matchFields".into(),
                json!([{"key": "metadata.name", "operator": self.pick_s(&["In", "NotIn"]), "values": [n]}]),
            );
        }
        Value::Object(term)
    }

    fn requests(&mut self, big: bool) -> (serde_json::Map<String, Value>, serde_json::Map<String, Value>) {
        let mut requests = serde_json::Map::new();
        let mut limits = serde_json::Map::new();
        let cpus: &[&str] = if big { &["500m", "1", "2", "3"] } else { &["50m", "100m", "250m", "500m", "1", "1500m"] };
        let mems: &[&str] = if big { &["1Gi", "3Gi", "6Gi"] } else { &["64Mi", "256Mi", "1Gi", "2Gi", "4Gi"] };
        if self.p(0.8) {
            let cpu = json!(self.pick_s(cpus));
            // Limits alone: the API server copies them into requests.
            if self.p(0.1) {
                limits.insert("cpu".into(), cpu);
            } else {
                requests.insert("cpu".into(), cpu);
            }
        }
        if self.p(0.8) {
            requests.insert("memory".into(), json!(self.pick_s(mems)));
        }
        if self.p(0.08) {
            requests.insert("ephemeral-storage".into(), json!(self.pick_s(&["1Gi", "20Gi", "60Gi"])));
        }
        if self.p(0.1) {
            let n = json!(self.range(1, 3).to_string());
            requests.insert(EXTENDED.into(), n.clone());
            limits.insert(EXTENDED.into(), n);
        }
        (requests, limits)
    }

    fn container(&mut self, name: &str, big: bool) -> Value {
        let (requests, limits) = self.requests(big);
        json!({"name": name, "image": "registry.k8s.io/pause:3.10", "resources": resources(requests, limits)})
    }

    fn pending_pod(&mut self) -> Value {
        let labels = self.pod_labels(0.9);
        let n_containers = if self.p(0.7) { 1 } else { 2 };
        let mut containers: Vec<Value> = (0..n_containers).map(|i| self.container(&format!("c{i}"), false)).collect();
        if self.p(0.15) {
            containers[0]["ports"] = json!([self.host_port()]);
        }
        let mut spec = json!({"schedulerName": OUR_SCHEDULER, "containers": containers});
        let n_init = *[0usize, 0, 0, 1, 2].choose(&mut self.rng).unwrap_or(&0);
        if n_init > 0 {
            let init: Vec<Value> = (0..n_init)
                .map(|i| {
                    let sidecar = self.p(0.5);
                    let mut c = self.container(&format!("i{i}"), !sidecar);
                    if sidecar {
                        c["restartPolicy"] = json!("Always");
                    }
                    c
                })
                .collect();
            spec["initContainers"] = json!(init);
        }
        if self.p(0.2) {
            // Mostly a label some node has.
            let i = self.range(0, self.nodes.len() - 1);
            let labels: Vec<(String, String)> = self.nodes[i]
                .labels
                .iter()
                .filter(|(k, _)| *k != HOSTNAME)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let (k, v) = match labels.choose(&mut self.rng) {
                Some(kv) if self.p(0.8) => kv.clone(),
                _ => ("tier".to_string(), self.range(1, 9).to_string()),
            };
            spec["nodeSelector"] = json!({k: v});
        }
        let mut affinity = serde_json::Map::new();
        let mut node_affinity = serde_json::Map::new();
        if self.p(0.3) {
            let n = if self.p(0.7) { 1 } else { 2 };
            let terms: Vec<Value> = (0..n).map(|_| self.node_selector_term()).collect();
            node_affinity
                .insert("requiredDuringSchedulingIgnoredDuringExecution".into(), json!({"nodeSelectorTerms": terms}));
        }
        if self.p(0.3) {
            let n = self.range(1, 3);
            let terms: Vec<Value> = (0..n)
                .map(|_| {
                    let w = self.range(1, 100);
                    json!({"weight": w, "preference": self.node_selector_term()})
                })
                .collect();
            node_affinity.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), json!(terms));
        }
        if !node_affinity.is_empty() {
            affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
        }
        for kind in ["podAffinity", "podAntiAffinity"] {
            let mut a = serde_json::Map::new();
            if self.p(0.15) {
                let n = if self.p(0.8) { 1 } else { 2 };
                let terms: Vec<Value> = (0..n).map(|_| self.affinity_term(true)).collect();
                a.insert("requiredDuringSchedulingIgnoredDuringExecution".into(), json!(terms));
            }
            if self.p(0.15) {
                let n = self.range(1, 2);
                let terms: Vec<Value> = (0..n)
                    .map(|_| {
                        let w = self.range(1, 100);
                        json!({"weight": w, "podAffinityTerm": self.affinity_term(true)})
                    })
                    .collect();
                a.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), json!(terms));
            }
            if !a.is_empty() {
                affinity.insert(kind.into(), Value::Object(a));
            }
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        if self.p(0.5) {
            spec["tolerations"] = json!(self.tolerations());
        }
        if self.p(0.3) {
            spec["topologySpreadConstraints"] = json!(self.spread_constraints(&labels));
        }
        if !self.pending_volumes.is_empty() {
            spec["volumes"] = json!(std::mem::take(&mut self.pending_volumes));
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "incoming", "namespace": self.ns, "labels": labels},
            "spec": spec})
    }

    fn tolerations(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        let taints: Vec<(String, String, String)> = self.nodes.iter().flat_map(|n| n.taints.clone()).collect();
        let n = self.range(1, 3);
        for _ in 0..n {
            let t = match self.range(0, 9) {
                0 => json!({"operator": "Exists"}),
                1 => json!({"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}),
                2 => json!({"key": self.pick_s(&TAINT_KEYS), "operator": "Exists"}),
                _ => match taints.choose(&mut self.rng) {
                    Some((k, v, e)) => {
                        let effect = if self.p(0.3) { String::new() } else { e.clone() };
                        let mut t = if v.is_empty() || self.p(0.3) {
                            json!({"key": k, "operator": "Exists"})
                        } else {
                            // A wrong value sometimes: the toleration then does not match.
                            let value = if self.p(0.8) { v.clone() } else { self.pick_s(&TAINT_VALUES) };
                            json!({"key": k, "operator": "Equal", "value": value})
                        };
                        if !effect.is_empty() {
                            t["effect"] = json!(effect);
                        }
                        if effect == "NoExecute" && self.p(0.3) {
                            t["tolerationSeconds"] = json!(300);
                        }
                        t
                    }
                    None => json!({"key": self.pick_s(&TAINT_KEYS), "operator": "Exists"}),
                },
            };
            out.push(t);
        }
        out
    }

    fn spread_constraints(&mut self, labels: &BTreeMap<String, String>) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        let n = if self.p(0.75) { 1 } else { 2 };
        for _ in 0..n {
            let key = self.pick_s(&[ZONE, ZONE, HOSTNAME]);
            let hard = self.p(0.6);
            let when = if hard { "DoNotSchedule" } else { "ScheduleAnyway" };
            // The API refuses two constraints with the same key and action.
            if out.iter().any(|c| c["topologyKey"] == key.as_str() && c["whenUnsatisfiable"] == when) {
                continue;
            }
            let sel = self.label_selector(labels);
            let mut c = json!({"maxSkew": self.range(1, 3), "topologyKey": key,
                "whenUnsatisfiable": when, "labelSelector": sel});
            if hard && self.p(0.35) {
                c["minDomains"] = json!(self.range(1, 5));
            }
            if self.p(0.3) {
                c["nodeAffinityPolicy"] = json!(self.pick_s(&["Honor", "Ignore"]));
            }
            if self.p(0.3) {
                c["nodeTaintsPolicy"] = json!(self.pick_s(&["Honor", "Ignore"]));
            }
            if self.p(0.15) && !sel_keys(&c["labelSelector"]).iter().any(|k| k == "version") {
                c["matchLabelKeys"] = json!(["version"]);
            }
            out.push(c);
        }
        out
    }

    /// Claims for the pending pod (and volumes, classes, and bound pods
    /// sharing them), of one to two of the kinds a scheduler treats
    /// differently.
    fn volumes_for_pending(&mut self, n_bound: usize) {
        let n = if self.p(0.7) { 1 } else { 2 };
        for k in 0..n {
            let claim = format!("data{k}");
            self.pending_volumes.push(json!({"name": format!("v{k}"), "persistentVolumeClaim": {"claimName": claim}}));
            match self.range(0, 7) {
                0 | 1 => self.bound_claim(&claim, k, "ReadWriteOnce", true),
                2 => self.bound_claim(&claim, k, "ReadWriteOnce", false),
                3 | 4 => self.wait_for_consumer_static(&claim, k),
                5 => self.wait_for_consumer_provisioned(&claim, k),
                6 => {
                    // In use by a bound pod: ReadWriteOncePod refuses a second user.
                    let affinity = self.p(0.5);
                    self.bound_claim(&claim, k, "ReadWriteOncePod", affinity);
                    if n_bound > 0 {
                        let j = self.range(0, n_bound - 1);
                        self.bound_volumes
                            .entry(j)
                            .or_default()
                            .push(json!({"name": format!("v{k}"), "persistentVolumeClaim": {"claimName": claim}}));
                    }
                }
                _ => {
                    if self.p(0.5) {
                        // A class whose provisioner is never going to act:
                        // the claim stays unbound, an Immediate claim the pod waits for.
                        let class = format!("{}-immediate", self.base);
                        self.class(&class, PROVISIONER, "Immediate", None);
                        self.unbound_claim(&claim, &class, "1Gi");
                    }
                    // else: the claim does not exist.
                }
            }
        }
    }

    /// A claim of `class` not bound to any volume.
    fn unbound_claim(&mut self, claim: &str, class: &str, size: &str) {
        self.claims.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": self.ns},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}}}}));
    }

    fn class(&mut self, name: &str, provisioner: &str, mode: &str, zones: Option<Vec<String>>) {
        if self.classes.iter().any(|c| c["metadata"]["name"] == name) {
            return;
        }
        let mut c = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
        if let Some(z) = zones {
            c["allowedTopologies"] = json!([{"matchLabelExpressions": [{"key": ZONE, "values": z}]}]);
        }
        self.classes.push(c);
    }

    /// A node-affinity term for a volume: one node, or one or two zones.
    fn volume_affinity(&mut self) -> Value {
        if self.p(0.5) {
            let n = self.node_name();
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "In", "values": [n]}]}]}})
        } else {
            let z = dedup(vec![self.pick_s(&ZONES), self.pick_s(&ZONES)]);
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": z}]}]}})
        }
    }

    /// A claim bound to a volume (pre-bound both ways; the PV controller
    /// completes it before the pod arrives): node affinity on the volume,
    /// or (`affinity` false) the zone label VolumeZone reads.
    fn bound_claim(&mut self, claim: &str, k: usize, mode: &str, affinity: bool) {
        let pv = format!("{}-pv{k}", self.base);
        let mut spec = json!({"capacity": {"storage": "10Gi"}, "accessModes": [mode],
            "storageClassName": "", "claimRef": {"namespace": self.ns, "name": claim}});
        let mut labels = serde_json::Map::new();
        if affinity {
            spec["local"] = json!({"path": "/data"});
            spec["nodeAffinity"] = self.volume_affinity();
        } else {
            spec["hostPath"] = json!({"path": "/data"});
            labels.insert(ZONE.into(), json!(self.pick_s(&ZONES)));
        }
        self.volumes.push(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": labels}, "spec": spec}));
        self.claims.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": self.ns},
            "spec": {"storageClassName": "", "volumeName": pv, "accessModes": [mode],
                "resources": {"requests": {"storage": "5Gi"}}}}));
    }

    /// An unbound claim of a WaitForFirstConsumer class without a
    /// provisioner, and zero to three free local volumes of the class.
    fn wait_for_consumer_static(&mut self, claim: &str, k: usize) {
        let class = format!("{}-local", self.base);
        self.class(&class, "kubernetes.io/no-provisioner", "WaitForFirstConsumer", None);
        let n = self.range(0, 3);
        for i in 0..n {
            let size = self.pick_s(&["4Gi", "10Gi", "20Gi"]);
            let aff = self.volume_affinity();
            self.volumes.push(json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": format!("{}-free{k}-{i}", self.base)},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class, "local": {"path": "/data"}, "nodeAffinity": aff}}));
        }
        self.unbound_claim(claim, &class, "8Gi");
    }

    /// An unbound claim of a WaitForFirstConsumer class with a
    /// provisioner, maybe limited to some zones.
    fn wait_for_consumer_provisioned(&mut self, claim: &str, k: usize) {
        let zones = self.p(0.6).then(|| dedup(vec![self.pick_s(&ZONES), self.pick_s(&ZONES)]));
        let class = format!("{}-prov{k}", self.base);
        self.class(&class, PROVISIONER, "WaitForFirstConsumer", zones);
        self.unbound_claim(claim, &class, "8Gi");
    }
}

/// A container's `resources`, without empty maps.
fn resources(requests: serde_json::Map<String, Value>, limits: serde_json::Map<String, Value>) -> Value {
    let mut r = serde_json::Map::new();
    if !requests.is_empty() {
        r.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        r.insert("limits".into(), Value::Object(limits));
    }
    Value::Object(r)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// A requirement's values without repeats (the API accepts repeats, but
/// they only make the YAML longer).
fn dedup_values(mut r: Value) -> Value {
    if let Some(vals) = r.get("values").and_then(Value::as_array) {
        let v: Vec<String> = vals.iter().filter_map(Value::as_str).map(str::to_string).collect();
        r["values"] = json!(dedup(v));
    }
    r
}

/// The label keys a selector names.
fn sel_keys(sel: &Value) -> Vec<String> {
    let mut keys: Vec<String> = sel["matchLabels"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        keys.extend(e["key"].as_str().map(str::to_string));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_scenario_and_seeds_differ() {
        assert_eq!(generate(7), generate(7));
        assert_ne!(generate(7), generate(8));
    }

    #[test]
    fn every_node_name_a_scenario_refers_to_is_its_own() {
        for seed in 0..300 {
            let s = generate(seed);
            let names: Vec<String> = s.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
            for p in &s.bound_pods {
                let n = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                assert!(names.contains(&n), "seed {seed}: {n} is not a node of the scenario");
            }
            assert!(names.iter().all(|n| n.starts_with(&format!("s{seed}-"))), "seed {seed}: {names:?}");
        }
    }

    /// The generator reaches every shape it is meant to cover within a
    /// CI-sized run (a share under 1 % here would go untested in CI).
    #[test]
    fn a_few_hundred_seeds_cover_every_shape() {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let n = 400;
        for seed in 0..n {
            let y = generate(seed).to_yaml().unwrap_or_default();
            for (shape, needle) in [
                ("init container", "initContainers"),
                ("sidecar", "restartPolicy: Always"),
                ("nodeSelector", "nodeSelector"),
                (
                    "required node affinity",
                    "requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms",
                ),
                ("preferred node affinity", "preference:"),
                ("Gt/Lt", "operator: Gt"),
                ("DoesNotExist", "operator: DoesNotExist"),
                ("matchFields", "matchFields"),
                ("toleration", "tolerations"),
                ("NoExecute taint", "effect: NoExecute"),
                ("PreferNoSchedule taint", "effect: PreferNoSchedule"),
                ("unschedulable node", "unschedulable: true"),
                ("hostPort", "hostPort"),
                ("spread", "topologySpreadConstraints"),
                ("minDomains", "minDomains"),
                ("nodeAffinityPolicy", "nodeAffinityPolicy"),
                ("nodeTaintsPolicy", "nodeTaintsPolicy"),
                ("pod affinity", "podAffinity"),
                ("pod anti-affinity", "podAntiAffinity"),
                ("namespaceSelector", "namespaceSelector"),
                ("matchLabelKeys", "matchLabelKeys"),
                ("mismatchLabelKeys", "mismatchLabelKeys"),
                ("extended resource", EXTENDED),
                ("claim", "persistentVolumeClaim"),
                ("WaitForFirstConsumer", "WaitForFirstConsumer"),
                ("allowedTopologies", "allowedTopologies"),
                ("ReadWriteOncePod", "ReadWriteOncePod"),
                ("Immediate", "volumeBindingMode: Immediate"),
                ("Service", "kind: Service"),
            ] {
                if y.contains(needle) {
                    *seen.entry(shape).or_default() += 1;
                }
            }
        }
        let rare: Vec<_> = seen.iter().filter(|(_, c)| **c < (n / 100) as usize).collect();
        assert!(seen.len() == 29 && rare.is_empty(), "shapes seen: {seen:?}");
    }
}
