//! GPU device input as it reaches the engine from pods and nodes: the
//! pod annotations `gpu-scheduler.io/gpu-milli`, `gpu-memory-mib`,
//! `gpu-index` (read back from bound pods after a restart) and the
//! openb/Alibaba forms, GPU, time-slice and MIG resources, and the node's
//! GPU count, memory and model labels (structured by `arbitrary`). The
//! objects go through conversion and a simulation with the default
//! profile: errors name their field, valid input never makes the engine
//! fail, and when the scheduler made every decision no node's GPUs are
//! given out beyond what it has.

#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use engine::devices::{
    ANNOTATION_ALIBABA_GPU_COUNT, ANNOTATION_ALIBABA_GPU_MILLI, ANNOTATION_ALIBABA_GPU_MODEL, ANNOTATION_GPU_INDEX,
    ANNOTATION_GPU_MEMORY_MIB, ANNOTATION_GPU_MILLI, GPU_SHARED_RESOURCE, LABEL_GPU_MEMORY,
};
use engine::facts::{GPU_RESOURCE, LABEL_GPU_MODEL, LABEL_GPU_PRODUCT};
use engine::scheduler::kinds::Nodes;
use gpu_scheduler_fuzz::Text;
use k8s_openapi::api::core::v1::{Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use libfuzzer_sys::fuzz_target;
use sim::manifests::{ClusterObject, Object, Source};

const POD_ANNOTATIONS: [&str; 6] = [
    ANNOTATION_GPU_MILLI,
    ANNOTATION_GPU_MEMORY_MIB,
    ANNOTATION_GPU_INDEX,
    ANNOTATION_ALIBABA_GPU_MILLI,
    ANNOTATION_ALIBABA_GPU_COUNT,
    ANNOTATION_ALIBABA_GPU_MODEL,
];
const RESOURCES: [&str; 5] =
    [GPU_RESOURCE, GPU_SHARED_RESOURCE, "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb", "cpu"];
const NODE_LABELS: [&str; 3] = [LABEL_GPU_MEMORY, LABEL_GPU_MODEL, LABEL_GPU_PRODUCT];
const MAX_PODS: usize = 8;

#[derive(Debug, Arbitrary)]
struct PodInput {
    /// Already bound to the node (existing load, its devices read back).
    bound: bool,
    annotations: Vec<(u8, Text)>,
    requests: Vec<(u8, Text)>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    labels: Vec<(u8, Text)>,
    /// The node's allocatable of each resource above, as text.
    allocatable: Vec<(u8, Text)>,
    pods: Vec<PodInput>,
}

fn pick<'a>(keys: &[&'a str], i: u8) -> &'a str {
    keys[usize::from(i) % keys.len()]
}

fn quantities(items: Vec<(u8, Text)>) -> BTreeMap<String, Quantity> {
    items.into_iter().map(|(k, v)| (pick(&RESOURCES, k).to_string(), Quantity(v.into_string()))).collect()
}

fn node(labels: Vec<(u8, Text)>, allocatable: Vec<(u8, Text)>) -> Node {
    let mut alloc = BTreeMap::from([
        ("cpu".to_string(), Quantity("64".into())),
        ("memory".to_string(), Quantity("256Gi".into())),
        ("pods".to_string(), Quantity("110".into())),
    ]);
    alloc.extend(quantities(allocatable));
    Node {
        metadata: ObjectMeta {
            name: Some("n0".into()),
            labels: Some(
                labels.into_iter().map(|(k, v)| (pick(&NODE_LABELS, k).to_string(), v.into_string())).collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
    }
}

fn pod(i: usize, p: PodInput) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("p{i}")),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{i}")),
            annotations: Some(
                p.annotations
                    .into_iter()
                    .map(|(k, v)| (pick(&POD_ANNOTATIONS, k).to_string(), v.into_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some("gpu-scheduler".into()),
            node_name: p.bound.then(|| "n0".to_string()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements { requests: Some(quantities(p.requests)), ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fuzz_target!(|input: Input| {
    if input.pods.len() > MAX_PODS {
        return;
    }
    let existing = input.pods.iter().any(|p| p.bound);
    let mut m = sim::Manifests::default();
    let source = |index| Source { file: "fuzz.yaml".into(), index };
    let node = ClusterObject::new::<Nodes>(node(input.labels, input.allocatable));
    m.objects.push((source(0), Object::Cluster(node)));
    for (i, p) in input.pods.into_iter().enumerate() {
        m.objects.push((source(i + 1), Object::Pod(Box::new(pod(i, p)))));
    }
    let cfg = engine::config::Configuration::default();
    let Some(sim) = gpu_scheduler_fuzz::simulate(&m, &cfg) else { return };
    for p in &sim.placements {
        if let Some(node) = &p.node {
            assert_eq!(node, "n0", "{} placed on unknown node", p.pod);
        }
    }
    if !existing {
        for n in &sim.nodes {
            assert!(n.gpu_milli.0 <= n.gpu_milli.1, "{}: {:?} GPU thousandths given out", n.name, n.gpu_milli);
            assert!(n.gpu.0 <= n.gpu.1, "{}: {:?} GPUs given out", n.name, n.gpu);
        }
    }
});
