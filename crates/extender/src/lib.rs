//! kube-scheduler's HTTP extender protocol, so that extenders written for
//! kube-scheduler plug into gpu-scheduler unchanged: the same configuration
//! (`extenders:` with urlPrefix, filterVerb, prioritizeVerb, bindVerb,
//! weight, nodeCacheCapable, managedResources, ignorable, httpTimeout,
//! enableHTTPS/tlsConfig) and the same JSON on the wire
//! (`k8s.io/kube-scheduler/extender/v1`: ExtenderArgs,
//! ExtenderFilterResult, HostPriorityList, ExtenderBindingArgs). Those Go
//! types carry no JSON tags, so their field names go out capitalised
//! (`Pod`, `NodeNames`, ...); answers are read with any capitalisation, as
//! Go's decoder does.
//!
//! Calls are blocking, with the configured timeout: the engine makes them
//! from its scheduling thread, inside a cycle, as kube-scheduler does.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine as _;
use engine::config::{ExtenderConfig, ExtenderTlsConfig};
use engine::extender::{Extender, ExtenderError, ExtenderFilterResult, MAX_EXTENDER_PRIORITY};
use engine::model::Pod;
use engine::node_info::NodeInfo;
use serde_json::{Map, Value, json};
use thiserror::Error;

/// A configuration that cannot become an extender (bad TLS material).
#[derive(Debug, Error)]
#[error("extenders[{index}].{field}: {message}")]
pub struct SetupError {
    pub index: usize,
    pub field: String,
    pub message: String,
}

/// Largest answer read from an extender (a NodeList of thousands of nodes fits).
const MAX_BODY: u64 = 256 << 20;

pub struct HttpExtender {
    /// The URL prefix, leaked once per configured extender (a handful per
    /// process) so that it can name score columns and metrics.
    name: &'static str,
    filter_verb: String,
    prioritize_verb: String,
    bind_verb: String,
    weight: i64,
    node_cache_capable: bool,
    managed: HashSet<String>,
    ignorable: bool,
    agent: ureq::Agent,
}

/// `name` as `&'static str` (what [`Extender::name`] returns), kept once
/// per distinct name: a configuration reloaded again and again re-uses it
/// instead of leaking a copy each time (the fuzzer's leak check found the
/// copies).
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// The configured extenders, in order.
pub fn from_config(configs: &[ExtenderConfig]) -> Result<Vec<Arc<dyn Extender>>, SetupError> {
    configs.iter().enumerate().map(|(i, c)| HttpExtender::new(i, c).map(|e| Arc::new(e) as Arc<dyn Extender>)).collect()
}

impl HttpExtender {
    pub fn new(index: usize, c: &ExtenderConfig) -> Result<Self, SetupError> {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(c.http_timeout))
            // Statuses are errors of ours, with the body in the message.
            .http_status_as_error(false);
        if c.enable_https {
            config = config.tls_config(tls(index, c.tls_config.as_ref())?);
        }
        let agent = ureq::Agent::new_with_config(config.build());
        let name = intern(c.url_prefix.trim_end_matches('/'));
        Ok(HttpExtender {
            name,
            filter_verb: c.filter_verb.trim_matches('/').to_string(),
            prioritize_verb: c.prioritize_verb.trim_matches('/').to_string(),
            bind_verb: c.bind_verb.trim_matches('/').to_string(),
            weight: c.weight,
            node_cache_capable: c.node_cache_capable,
            managed: c.managed_resources.iter().map(|r| r.name.clone()).collect(),
            ignorable: c.ignorable,
            agent,
        })
    }

    fn error(&self, message: impl Into<String>) -> ExtenderError {
        ExtenderError { extender: self.name.to_string(), message: message.into() }
    }

    /// POSTs `body` to `urlPrefix/verb` and returns the answer's text.
    fn send(&self, verb: &str, body: &Value) -> Result<String, ExtenderError> {
        let url = format!("{}/{verb}", self.name);
        let bytes = serde_json::to_vec(body).map_err(|e| self.error(e.to_string()))?;
        let mut resp = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(&bytes[..])
            .map_err(|e| self.error(format!("{verb}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| self.error(format!("{verb}: reading the answer: {e}")))?;
        if status != 200 {
            return Err(self.error(format!("{verb}: HTTP {status}: {}", text.trim())));
        }
        Ok(text)
    }

    /// ExtenderArgs: the pod, and the nodes whole or by name.
    fn args(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Value {
        let names: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
        let (list, names) = if self.node_cache_capable {
            (Value::Null, json!(names))
        } else {
            let items: Vec<Value> = nodes.iter().map(|n| node_json(n)).collect();
            (json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}), Value::Null)
        };
        json!({"Pod": pod_json(pod), "Nodes": list, "NodeNames": names})
    }
}

impl Extender for HttpExtender {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Without managedResources every pod; otherwise pods whose containers
    /// request or limit one of them (kube's `IsInterested`).
    fn is_interested(&self, pod: &Pod) -> bool {
        if self.managed.is_empty() {
            return true;
        }
        if pod.requests.scalars().iter().any(|(name, _)| self.managed.contains(name.as_ref())) {
            return true;
        }
        // Limits only (no request) are in the API object, when kept.
        pod.source.as_deref().is_some_and(|src| {
            ["containers", "initContainers"].iter().any(|k| {
                src["spec"][k].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        ["requests", "limits"].iter().any(|r| {
                            c["resources"][r].as_object().is_some_and(|m| m.keys().any(|n| self.managed.contains(n)))
                        })
                    })
                })
            })
        })
    }

    fn is_ignorable(&self) -> bool {
        self.ignorable
    }

    fn has_filter(&self) -> bool {
        !self.filter_verb.is_empty()
    }

    fn has_prioritize(&self) -> bool {
        !self.prioritize_verb.is_empty()
    }

    fn is_binder(&self) -> bool {
        !self.bind_verb.is_empty()
    }

    fn weight(&self) -> i64 {
        self.weight
    }

    fn needs_node_objects(&self) -> bool {
        !self.node_cache_capable && (self.has_filter() || self.has_prioritize())
    }

    fn filter(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Result<ExtenderFilterResult, ExtenderError> {
        let answer = self.send(&self.filter_verb, &self.args(pod, nodes))?;
        decode_filter(&answer, self.node_cache_capable).map_err(|e| self.error(format!("{}: {e}", self.filter_verb)))
    }

    fn prioritize(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Result<Vec<(String, i64)>, ExtenderError> {
        let answer = self.send(&self.prioritize_verb, &self.args(pod, nodes))?;
        decode_prioritize(&answer).map_err(|e| self.error(format!("{}: {e}", self.prioritize_verb)))
    }

    fn bind(&self, pod: &Pod, node: &str) -> Result<(), ExtenderError> {
        let args = json!({"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node});
        let answer = self.send(&self.bind_verb, &args)?;
        decode_bind(&answer).map_err(|e| self.error(format!("{}: {e}", self.bind_verb)))
    }
}

/// An extender's answer to the filter verb (`ExtenderFilterResult`): the
/// nodes that passed (by name when the extender is nodeCacheCapable, else
/// as a NodeList) and those it rejected; its `Error` field is an error.
pub fn decode_filter(text: &str, node_cache_capable: bool) -> Result<ExtenderFilterResult, String> {
    let answer = json_answer(text)?;
    let error = field(&answer, "error").and_then(Value::as_str).unwrap_or_default();
    if !error.is_empty() {
        return Err(error.to_string());
    }
    let passed: Vec<String> = match (field(&answer, "nodenames"), field(&answer, "nodes")) {
        (Some(Value::Array(names)), _) if node_cache_capable => {
            names.iter().filter_map(|n| n.as_str().map(String::from)).collect()
        }
        (_, Some(list)) if !list.is_null() => field(list, "items")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(|n| n["metadata"]["name"].as_str().map(String::from)).collect())
            .unwrap_or_default(),
        // Neither: no node passed.
        _ => Vec::new(),
    };
    Ok(ExtenderFilterResult {
        passed,
        failed: failed_map(field(&answer, "failednodes")),
        failed_and_unresolvable: failed_map(field(&answer, "failedandunresolvablenodes")),
    })
}

/// An extender's answer to the prioritize verb (`HostPriorityList`):
/// host and score pairs; entries without both are skipped. A score that
/// is not an integer from 0 to 10 (`MaxExtenderPriority`) makes the whole
/// answer an error: the extender is broken, its other scores are suspect.
pub fn decode_prioritize(text: &str) -> Result<Vec<(String, i64)>, String> {
    let Value::Array(list) = json_answer(text)? else {
        return Err("the answer is not a HostPriorityList".into());
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, h) in list.iter().enumerate() {
        let (Some(host), Some(score)) = (field(h, "host").and_then(Value::as_str), field(h, "score")) else {
            continue;
        };
        // -0 (and 0.0) is zero, though serde_json reads it as a float.
        let as_int = score.as_i64().or_else(|| score.as_f64().filter(|f| *f == 0.0).map(|_| 0));
        let score = as_int.filter(|s| (0..=MAX_EXTENDER_PRIORITY).contains(s)).ok_or_else(|| {
            format!("[{i}] (host {host:?}): Score must be an integer from 0 to {MAX_EXTENDER_PRIORITY}, got {score}")
        })?;
        out.push((host.to_string(), score));
    }
    Ok(out)
}

/// An extender's answer to the bind verb (`ExtenderBindingResult`): its
/// `Error` field, if not empty, is an error.
pub fn decode_bind(text: &str) -> Result<(), String> {
    match field(&json_answer(text)?, "error").and_then(Value::as_str) {
        Some(e) if !e.is_empty() => Err(e.to_string()),
        _ => Ok(()),
    }
}

fn json_answer(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("the answer is not JSON: {e}"))
}

/// A field of a Go-encoded object, matched without regard to case, as
/// `encoding/json` matches them.
fn field<'a>(v: &'a Value, lower: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(lower)).map(|(_, v)| v)
}

fn failed_map(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// The pod as the API server gave it, or, when it was not kept (no
/// extender asked for whole objects when it arrived), what the scheduler
/// knows of it in the same shape.
pub fn pod_json(pod: &Pod) -> Value {
    if let Some(src) = &pod.source {
        return (**src).clone();
    }
    let mut requests = Map::new();
    requests.insert("cpu".into(), json!(format!("{}m", pod.requests.milli_cpu)));
    requests.insert("memory".into(), json!(pod.requests.memory.to_string()));
    for (name, v) in pod.requests.scalars() {
        requests.insert(name.to_string(), json!(v.to_string()));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                     "labels": pod.labels, "annotations": pod.annotations},
        "spec": {"schedulerName": pod.scheduler_name, "priority": pod.priority, "nodeSelector": pod.node_selector,
                 "containers": [{"name": "requests", "resources": {"requests": requests}}]},
    })
}

/// The node as the API server gave it, or its name, labels, annotations,
/// taints and allocatable in the same shape.
pub fn node_json(info: &NodeInfo) -> Value {
    let n = &info.node;
    if let Some(src) = &n.source {
        return (**src).clone();
    }
    let mut allocatable = Map::new();
    allocatable.insert("cpu".into(), json!(format!("{}m", n.allocatable.milli_cpu)));
    allocatable.insert("memory".into(), json!(n.allocatable.memory.to_string()));
    allocatable.insert("pods".into(), json!(n.allocatable.allowed_pod_number.to_string()));
    for (name, v) in n.allocatable.scalars() {
        allocatable.insert(name.to_string(), json!(v.to_string()));
    }
    let taints: Vec<Value> =
        n.taints.iter().map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()})).collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n.name, "labels": n.labels, "annotations": n.annotations},
        "spec": {"unschedulable": n.unschedulable, "taints": taints},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    })
}

fn tls(index: usize, c: Option<&ExtenderTlsConfig>) -> Result<ureq::tls::TlsConfig, SetupError> {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
    let err = |field: &str, message: String| SetupError { index, field: format!("tlsConfig.{field}"), message };
    let mut b = TlsConfig::builder();
    let Some(c) = c else { return Ok(b.build()) };
    if !c.server_name.is_empty() {
        return Err(err("serverName", "is not supported: use a urlPrefix whose host the certificate names".into()));
    }
    // PEM from a file, or inline as base64 (kube's []byte fields).
    let pem = |file: &str, data: &str, field: &str| -> Result<Option<Vec<u8>>, SetupError> {
        if !data.is_empty() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| err(field, format!("not base64: {e}")))?;
            return Ok(Some(bytes));
        }
        if !file.is_empty() {
            let file_field = field.replace("Data", "File");
            return std::fs::read(file).map(Some).map_err(|e| err(&file_field, format!("{file}: {e}")));
        }
        Ok(None)
    };
    if let Some(ca) = pem(&c.ca_file, &c.ca_data, "caData")? {
        let cert = Certificate::from_pem(&ca).map_err(|e| err("caData", e.to_string()))?;
        b = b.root_certs(RootCerts::new_with_certs(&[cert]));
    }
    match (pem(&c.cert_file, &c.cert_data, "certData")?, pem(&c.key_file, &c.key_data, "keyData")?) {
        (Some(cert), Some(key)) => {
            let cert = Certificate::from_pem(&cert).map_err(|e| err("certData", e.to_string()))?;
            let key = PrivateKey::from_pem(&key).map_err(|e| err("keyData", e.to_string()))?;
            b = b.client_cert(Some(ClientCert::new_with_certs(&[cert], key)));
        }
        (None, None) => {}
        (Some(_), None) => return Err(err("keyData", "a client certificate needs its key".into())),
        (None, Some(_)) => return Err(err("certData", "a client key needs its certificate".into())),
    }
    Ok(b.disable_verification(c.insecure).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_kept_once_however_often_it_is_configured() {
        let a = intern("http://x:1/scheduler");
        let b = intern(&String::from("http://x:1/scheduler"));
        assert!(std::ptr::eq(a, b), "the second configuration re-uses the first's name");
        assert_eq!(intern("http://y:1"), "http://y:1");
    }
}
