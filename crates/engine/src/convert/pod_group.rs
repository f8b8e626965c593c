//! PodGroups (`scheduling.x-k8s.io/v1alpha1`, a CRD, so not in
//! k8s-openapi): the object as the API serves it, and its conversion to
//! [`PodGroup`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::resources::{parse_resource_list, to_resources};
use super::{ConvertError, DEFAULT_NAMESPACE, int_or_string, invalid, non_empty, required};
use crate::gang::{ANNOTATION_TOPOLOGY_KEY, PodGroup};

/// A PodGroup object. Unknown fields are errors, as `kubectl apply`'s
/// strict decoding makes them; the status is the scheduler's to write and
/// is not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodGroupObject {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    /// Quantities, as strings or plain numbers (the CRD's int-or-string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// Converts a PodGroup; errors name the field.
pub fn pod_group_from_object(obj: &PodGroupObject) -> Result<PodGroup, ConvertError> {
    let meta = &obj.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let min_member = match obj.spec.min_member {
        None => return Err(required("spec.minMember", "")),
        Some(n) if n < 1 => return Err(invalid("spec.minMember", n, "must be greater than or equal to 1")),
        Some(n) => n.unsigned_abs(),
    };
    let mut quantities: BTreeMap<String, K8sQuantity> = BTreeMap::new();
    for (res, v) in obj.spec.min_resources.iter().flatten() {
        let text = int_or_string(v, format!("spec.minResources.{res}"))?;
        quantities.insert(res.clone(), K8sQuantity(text));
    }
    let min_resources = to_resources(&parse_resource_list(Some(&quantities), "spec.minResources")?, false);
    let schedule_timeout = match obj.spec.schedule_timeout_seconds {
        None => None,
        Some(s) if s < 0 => {
            return Err(invalid("spec.scheduleTimeoutSeconds", s, "must be greater than or equal to 0"));
        }
        Some(s) => Some(u64::from(s.unsigned_abs()) * 1000),
    };
    let topology_key = match meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_TOPOLOGY_KEY)) {
        Some(k) if k.trim().is_empty() => {
            return Err(invalid(
                format!("metadata.annotations[{ANNOTATION_TOPOLOGY_KEY}]"),
                "\"\"",
                "must name a node label",
            ));
        }
        other => other.cloned(),
    };
    Ok(PodGroup { namespace, name, min_member, min_resources, schedule_timeout, topology_key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(yaml: &str) -> Result<PodGroup, ConvertError> {
        let obj: PodGroupObject = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        pod_group_from_object(&obj)
    }

    #[test]
    fn pod_groups_convert() {
        let g = convert(
            "metadata:\n  name: pretrain\n  namespace: ml\n  annotations: {gpu-scheduler.io/topology-key: topology.kubernetes.io/zone}\nspec:\n  minMember: 4\n  minResources: {nvidia.com/gpu: 32, cpu: \"64\", memory: 512Gi}\n  scheduleTimeoutSeconds: 60\n",
        )
        .unwrap();
        assert_eq!((g.key(), g.min_member, g.schedule_timeout), ("ml/pretrain".to_string(), 4, Some(60_000)));
        assert_eq!(
            (g.min_resources.get("nvidia.com/gpu"), g.min_resources.milli_cpu, g.min_resources.memory),
            (32, 64_000, 512 << 30)
        );
        assert_eq!(g.topology_key.as_deref(), Some("topology.kubernetes.io/zone"));
        let plain = convert("metadata: {name: g}\nspec: {minMember: 1}\n").unwrap();
        assert_eq!((plain.namespace.as_str(), plain.schedule_timeout, plain.topology_key), ("default", None, None));
        assert!(plain.min_resources.is_zero());
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("metadata: {name: g}\nspec: {}\n", "spec.minMember", "Required value"),
            (
                "metadata: {name: g}\nspec: {minMember: 0}\n",
                "spec.minMember",
                "Invalid value: 0: must be greater than or equal to 1",
            ),
            (
                "metadata: {name: g}\nspec: {minMember: 2, minResources: {cpu: lots}}\n",
                "spec.minResources.cpu",
                "Invalid value: \"lots\": unable to parse numeric part of quantity",
            ),
            (
                "metadata: {name: g}\nspec: {minMember: 2, scheduleTimeoutSeconds: -1}\n",
                "spec.scheduleTimeoutSeconds",
                "Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "metadata: {name: g, annotations: {gpu-scheduler.io/topology-key: \" \"}}\nspec: {minMember: 2}\n",
                "metadata.annotations[gpu-scheduler.io/topology-key]",
                "Invalid value: \"\": must name a node label",
            ),
            ("spec: {minMember: 2}\n", "metadata.name", "Required value"),
        ];
        for (yaml, path, message) in cases {
            let err = convert(yaml).expect_err(yaml);
            assert_eq!((err.path.as_str(), err.message.as_str()), (path, message), "{yaml}");
        }
        let unknown: Result<PodGroupObject, _> =
            serde_yaml_ng::from_str("metadata: {name: g}\nspec: {minMembers: 2}\n");
        assert!(unknown.unwrap_err().to_string().contains("unknown field `minMembers`"));
    }
}
