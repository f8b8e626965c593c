//! PodGroups (`scheduling.x-k8s.io/v1alpha1`, a CRD, so not in
//! k8s-openapi): the object's one definition, from which kube-derive makes
//! the kube-rs resource the live watch uses and the CRD's YAML in
//! deploy/crds (crates/engine/tests/crds.rs checks it), and its conversion
//! to [`PodGroup`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::resources::{parse_resource_list, to_resources};
use super::{ConvertError, DEFAULT_NAMESPACE, crd, int_or_string, invalid, non_empty, required};
use crate::gang::{ANNOTATION_TOPOLOGY_KEY, PodGroup};

/// What the gang needs; written by its owner.
// Unknown fields are accepted here, so that the live watch survives a field
// a newer CRD adds; `simulate` rejects them by a round trip
// (crates/sim/src/manifests.rs), as `kubectl apply`'s strict decoding does.
//
// The CRD says int32, but an API server before Kubernetes 1.36 does not
// enforce a CRD's `format: int32`: the numbers are read as i64 and checked
// by [`pod_group_from_object`], so one PodGroup out of range is skipped
// (and logged), not an error of the whole list that would stop the watch.
// Each `printcolumn(...)` names its own `type_`: not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.x-k8s.io",
    version = "v1alpha1",
    kind = "PodGroup",
    root = "PodGroupObject",
    namespaced,
    status = "PodGroupStatus",
    shortname = "pg",
    shortname = "pgs",
    derive = "Default",
    derive = "PartialEq",
    crates(kube_core = "::kube_core", k8s_openapi = "::k8s_openapi", schemars = "::schemars"),
    // Metadata and spec default when absent: see the `crd` module.
    attr = "cfg_attr(all(), serde(default), schemars(transform = crd::root))",
    annotation("api-approved.kubernetes.io", "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"),
    doc = "A gang of pods, joined by the pod label scheduling.x-k8s.io/pod-group (its value is the PodGroup's name, in the pod's namespace), that the scheduler places all together or not at all. gpu-scheduler also reads the annotation gpu-scheduler.io/topology-key: a node label key (for example topology.kubernetes.io/zone) whose one value, one domain, must hold every member.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Where the gang is, from Pending to Finished or Failed."
    ),
    printcolumn(
        name = "MinMember",
        type_ = "integer",
        json_path = ".spec.minMember",
        description = "Members placed together or not at all."
    ),
    printcolumn(
        name = "Scheduled",
        type_ = "integer",
        json_path = ".status.scheduled",
        description = "Members bound to a node."
    ),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.running", description = "Members in phase Running."),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(default, rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// How many members must be placeable at once before any is bound. Members beyond it join a running gang one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32", range(min = 1))]
    pub min_member: Option<i64>,
    /// The least the whole gang requests (cpu, memory, nvidia.com/gpu, ...); a gang whose minResources exceed the cluster's free capacity is turned down without trying its members.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crd::checked_quantities")]
    pub min_resources: Option<BTreeMap<String, serde_json::Value>>,
    /// How long the scheduler tries to place the gang before it backs the whole gang off and marks the PodGroup.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32")]
    pub schedule_timeout_seconds: Option<i64>,
}

/// What the scheduler last saw of the gang; written by the scheduler.
// scheduler-plugins' status, with `scheduled` and the phase `Scheduled`
// added. Not read by conversion; numbers are i64 as in the spec, so that
// another writer's out-of-range count does not stop the watch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Where the gang is: Pending, Scheduling, Scheduled, Running, Finished, Failed or Unknown (docs/POLICIES.md says when each holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        extend("enum" = ["Pending", "Scheduling", "Scheduled", "Running", "Finished", "Failed", "Unknown"])
    )]
    pub phase: Option<String>,
    /// The UID of the workload (Job, StatefulSet, ...) whose pods form the gang.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub occupied_by: Option<String>,
    /// Members bound to a node.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32")]
    pub scheduled: Option<i64>,
    /// Members in phase Running.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32")]
    pub running: Option<i64>,
    /// Members in phase Succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32")]
    pub succeeded: Option<i64>,
    /// Members in phase Failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i32")]
    pub failed: Option<i64>,
    /// When the scheduler began trying to place the gang.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub schedule_start_time: Option<String>,
}

/// An int32 field of the CRD, read as i64; the error names it.
fn int32(path: &str, v: Option<i64>) -> Result<Option<i32>, ConvertError> {
    v.map(|n| i32::try_from(n).map_err(|_| invalid(path, n, "must be an int32"))).transpose()
}

/// Converts a PodGroup; errors name the field.
pub fn pod_group_from_object(obj: &PodGroupObject) -> Result<PodGroup, ConvertError> {
    let meta = &obj.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let min_member = match int32("spec.minMember", obj.spec.min_member)? {
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
    let schedule_timeout = match int32("spec.scheduleTimeoutSeconds", obj.spec.schedule_timeout_seconds)? {
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
        // An unknown field is no error of the type, which the live watch
        // shares: `simulate` finds it (crates/sim/src/manifests.rs).
        let unknown: PodGroupObject = serde_yaml_ng::from_str("metadata: {name: g}\nspec: {minMembers: 2}\n").unwrap();
        assert_eq!(pod_group_from_object(&unknown).unwrap_err().path, "spec.minMember");
    }
}
