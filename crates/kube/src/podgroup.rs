//! PodGroups on a live cluster: the CRD's objects as a kube-rs resource
//! (k8s-openapi has no type for them), whether the API server serves them,
//! and the status patch the scheduler writes.

use std::collections::BTreeMap;

use engine::convert::{PodGroupObject, PodGroupSpec, pod_group_from_object};
use engine::gang::{API_GROUP, GangStatus, KIND, PodGroup};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const VERSION: &str = "v1alpha1";
pub const PLURAL: &str = "podgroups";

/// A PodGroup as the API serves it. Lenient where the manifests' reader is
/// strict: a field a newer CRD version adds must not stop the watch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupResource {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LiveSpec,
}

/// The CRD says int32, but an API server before Kubernetes 1.36 does not
/// enforce a CRD's `format: int32`: the numbers are read as i64 and checked
/// in `convert`, so one PodGroup out of range is ignored (and logged), not
/// an error of the whole list that would stop the PodGroup watch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i64>,
}

/// An int32 field of the CRD; the error names it.
fn int32(path: &str, v: Option<i64>) -> Result<Option<i32>, engine::convert::ConvertError> {
    v.map(|n| {
        i32::try_from(n).map_err(|_| engine::convert::ConvertError {
            path: path.to_string(),
            message: format!("Invalid value: {n}: must be an int32"),
        })
    })
    .transpose()
}

crd_resource!(PodGroupResource, NamespaceResourceScope, kind: KIND, group: API_GROUP, version: VERSION, plural: PLURAL);

impl PodGroupResource {
    /// The engine's PodGroup; errors name the field.
    pub fn convert(&self) -> Result<PodGroup, engine::convert::ConvertError> {
        let obj = PodGroupObject {
            api_version: None,
            kind: None,
            metadata: self.metadata.clone(),
            spec: PodGroupSpec {
                min_member: int32("spec.minMember", self.spec.min_member)?,
                min_resources: self.spec.min_resources.clone(),
                schedule_timeout_seconds: int32("spec.scheduleTimeoutSeconds", self.spec.schedule_timeout_seconds)?,
            },
            status: None,
        };
        pod_group_from_object(&obj)
    }
}

/// Whether the API server serves PodGroups (the CRD is installed).
pub async fn served(client: &kube::Client) -> bool {
    match client.list_api_group_resources(&format!("{API_GROUP}/{VERSION}")).await {
        Ok(list) => list.resources.iter().any(|r| r.name == PLURAL),
        Err(_) => false,
    }
}

/// The merge patch of a PodGroup's status (a CRD takes no strategic
/// merge; the status has no lists to merge).
pub fn status_patch(status: &GangStatus) -> serde_json::Value {
    let mut s = json!({
        "phase": status.phase.as_str(),
        "scheduled": status.scheduled,
        "running": status.running,
    });
    if let Some(t) = status.schedule_start.and_then(|ms| jiff::Timestamp::from_millisecond(ms as i64).ok()) {
        s["scheduleStartTime"] = json!(t.to_string());
    }
    json!({ "status": s })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::gang::GangPhase;
    use kube::Resource;

    #[test]
    fn live_objects_convert_leniently_and_the_status_patch_is_a_merge() {
        let v = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml", "uid": "u1"},
            "spec": {"minMember": 2, "minResources": {"nvidia.com/gpu": 16}, "futureField": true},
            "status": {"phase": "Pending"}
        });
        let r: PodGroupResource = serde_json::from_value(v).unwrap_or_default();
        let g = r.convert().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.key(), g.min_member, g.min_resources.get("nvidia.com/gpu")), ("ml/g".into(), 2, 16));
        assert_eq!(
            PodGroupResource::url_path(&(), Some("ml")),
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups"
        );
        let s = GangStatus { phase: GangPhase::Scheduled, scheduled: 4, running: 0, schedule_start: Some(0) };
        assert_eq!(
            status_patch(&s),
            json!({"status": {"phase": "Scheduled", "scheduled": 4, "running": 0, "scheduleStartTime": "1970-01-01T00:00:00Z"}})
        );
    }

    #[test]
    fn a_number_out_of_int32_is_the_podgroups_error_not_the_lists() {
        // Kubernetes 1.35 stores it: the CRD's int32 format is not enforced.
        let list = json!({"items": [
            {"metadata": {"name": "huge", "namespace": "ml"}, "spec": {"minMember": 3_000_000_000_i64}},
            {"metadata": {"name": "late", "namespace": "ml"}, "spec": {"minMember": 1, "scheduleTimeoutSeconds": -3_000_000_000_i64}},
            {"metadata": {"name": "fine", "namespace": "ml"}, "spec": {"minMember": 2}}
        ]});
        let items: Vec<PodGroupResource> = serde_json::from_value(list["items"].clone()).unwrap_or_default();
        assert_eq!(items.len(), 3, "every item reads");
        let errors: Vec<String> = items.iter().filter_map(|g| g.convert().err()).map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("spec.minMember") && errors[0].contains("int32"), "{errors:?}");
        assert!(errors[1].contains("spec.scheduleTimeoutSeconds"), "{errors:?}");
        assert!(items[2].convert().is_ok());
    }
}
