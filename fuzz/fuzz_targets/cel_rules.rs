//! CEL rules in the CelRules plugin's args: compiled and type-checked by
//! the plugin's factory (as check-config does), errors naming the rule;
//! rules that compile are then run in a small simulation, where a failing
//! evaluation rejects (filter) or scores 0, never panics.

#![no_main]

use libfuzzer_sys::fuzz_target;

/// Two nodes and two pods, with labels, annotations and GPUs for the
/// rules to read.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: a, labels: {team: ml, rack: r1, gpu-model: a100}, annotations: {note: "x"}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}}
---
apiVersion: v1
kind: Node
metadata: {name: b, labels: {team: web}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml, labels: {team: ml}, annotations: {a: b}}
spec:
  schedulerName: gpu-scheduler
  priority: 5
  containers: [{name: c, image: i, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: q}
spec:
  schedulerName: gpu-scheduler
  containers: [{name: c, image: i}]
"#;

// The input is `FILTER\0SCORE[\0MESSAGE]`: text, so seeds are readable.
fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    if text.len() > 2048 {
        return;
    }
    let mut parts = text.split('\0');
    let (filter, score, message) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next());
    let mut rules = Vec::new();
    if !filter.is_empty() {
        let mut r = serde_json::json!({"name": "f", "filter": filter});
        if let Some(m) = message {
            r["message"] = m.into();
        }
        rules.push(r);
    }
    if !score.is_empty() {
        rules.push(serde_json::json!({"name": "s", "score": score, "weight": 2}));
    }
    let args = serde_json::json!({ "rules": rules });
    let registry = plugins::registry();
    let Some(factory) = registry.get(plugins::cel_rules::NAME) else { panic!("CelRules is not registered") };
    if let Err(e) = factory(Some(&args)) {
        assert!(e.path.starts_with("rules["), "error names no rule: {e}");
        return;
    }
    let mut cfg = engine::config::Configuration::default();
    let Some(profile) = cfg.profiles.first_mut() else { return };
    profile
        .plugins
        .multi_point
        .enabled
        .push(engine::config::PluginRef { name: plugins::cel_rules::NAME.into(), weight: Some(5.0) });
    profile.plugin_config.push(engine::config::PluginConfig { name: plugins::cel_rules::NAME.into(), args });
    let mut m = sim::Manifests::default();
    if let Err(e) = m.add_str("cluster.yaml", CLUSTER) {
        panic!("the fixed cluster does not read: {e}");
    }
    gpu_scheduler_fuzz::simulate(&m, &cfg);
});
