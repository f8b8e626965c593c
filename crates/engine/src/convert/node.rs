//! Nodes.

use k8s_openapi::api::core::v1 as corev1;

use super::resources::{parse_resource_list, to_resources};
use super::scheduling::taint;
use super::{ConvertError, non_empty, required};
use crate::model;

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
    use super::super::testing::GI;
    use super::*;
    use crate::model::{Taint, TaintEffect};

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
