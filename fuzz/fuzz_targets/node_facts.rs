//! Node facts from labels, annotations and conditions (temperatures,
//! spot expiry, alerts, GPU product names, ...): never a panic, and every
//! warning quotes a key and value the node really has, so the Warning
//! Event points at the value to fix. The node then goes through the
//! cache into a snapshot, as a watch event would.

#![no_main]

use arbitrary::Arbitrary;
use engine::cache::{Cache, Snapshot};
use engine::facts::{self, FactsConfig, NodeFacts};
use engine::model::{LABEL_ZONE, Node, NodeCondition};
use gpu_scheduler_fuzz::Text;
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 9] = [
    facts::LABEL_GPU_MODEL,
    facts::LABEL_GPU_PRODUCT,
    facts::LABEL_CLOUD,
    facts::LABEL_DISK_TYPE,
    facts::LABEL_MAINTENANCE,
    facts::ANNOTATION_SPOT_EXPIRY,
    facts::ANNOTATION_LAST_ALERT,
    facts::ANNOTATION_TEMPERATURE,
    LABEL_ZONE,
];
const CONDITIONS: [&str; 2] = ["GpuXid", "Ready"];

#[derive(Debug, Arbitrary)]
struct Input {
    labels: Vec<(u8, Text)>,
    annotations: Vec<(u8, Text)>,
    conditions: Vec<(bool, bool, Option<u64>)>,
}

fuzz_target!(|input: Input| {
    let key = |i: u8| KEYS[usize::from(i) % KEYS.len()].to_string();
    let mut node = Node { name: "n".into(), ..Default::default() };
    node.labels = input.labels.into_iter().map(|(k, v)| (key(k), v.into_string())).collect();
    node.annotations = input.annotations.into_iter().map(|(k, v)| (key(k), v.into_string())).collect();
    node.conditions = input
        .conditions
        .into_iter()
        .map(|(gpu, status, last_transition)| NodeCondition {
            type_: CONDITIONS[usize::from(gpu)].into(),
            status,
            last_transition,
        })
        .collect();
    let cfg = FactsConfig { hardware_alert_conditions: vec!["GpuXid".into()], ..FactsConfig::default() };
    let (_, warnings) = NodeFacts::of(&node, &cfg);
    for w in &warnings {
        // A key may be both a label and an annotation: either must hold the value quoted.
        let has = |m: &engine::model::Labels| m.get(&w.key) == Some(&w.value);
        assert!(has(&node.labels) || has(&node.annotations), "warning about a value the node does not have: {w}");
        assert!(!w.message.is_empty(), "{w}");
    }
    let mut cache = Cache::with_facts(cfg);
    cache.upsert_node(node);
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap);
    assert_eq!(snap.nodes().len(), 1);
});
