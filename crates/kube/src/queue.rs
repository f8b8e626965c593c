//! Queues on a live cluster: the CRD's objects (`gpu-scheduler.io/
//! v1alpha1` `Queue`, cluster-scoped) as a kube-rs resource, and whether
//! the API server serves them.

use std::collections::BTreeMap;

use engine::convert::{QueueObject, QueueSpec, queue_from_object};
use engine::queues::{KIND, Queue};
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "gpu-scheduler.io";
pub const VERSION: &str = "v1alpha1";
pub const PLURAL: &str = "queues";

/// A Queue as the API serves it; lenient where the manifests' reader is
/// strict, so that a field a newer CRD adds does not stop the watch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueResource {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LiveSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<bool>,
}

crd_resource!(QueueResource, ClusterResourceScope, kind: KIND, group: GROUP, version: VERSION, plural: PLURAL);

impl QueueResource {
    /// The engine's Queue; errors name the field.
    pub fn convert(&self) -> Result<Queue, engine::convert::ConvertError> {
        let s = &self.spec;
        let obj = QueueObject {
            api_version: None,
            kind: None,
            metadata: self.metadata.clone(),
            spec: QueueSpec {
                parent: s.parent.clone(),
                quota: s.quota.clone(),
                borrowing_limit: s.borrowing_limit.clone(),
                lending_limit: s.lending_limit.clone(),
                weight: s.weight.clone(),
                reclaim: s.reclaim,
            },
            status: None,
        };
        queue_from_object(&obj)
    }
}

/// Whether the API server serves Queues (the CRD is installed).
pub async fn served(client: &kube::Client) -> bool {
    match client.list_api_group_resources(&format!("{GROUP}/{VERSION}")).await {
        Ok(list) => list.resources.iter().any(|r| r.name == PLURAL),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    #[test]
    fn live_queues_convert_leniently() {
        let v = json!({
            "apiVersion": "gpu-scheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a", "uid": "u1"},
            "spec": {"parent": "root", "quota": {"nvidia.com/gpu": 8}, "weight": 2, "futureField": true},
            "status": {"admitted": 3}
        });
        let r: QueueResource = serde_json::from_value(v).unwrap_or_default();
        let q = r.convert().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (q.name.as_str(), q.parent.as_deref(), q.quota.get("nvidia.com/gpu"), q.weight),
            ("team-a", Some("root"), Some(&8000), 2.0)
        );
        assert_eq!(QueueResource::url_path(&(), None), "/apis/gpu-scheduler.io/v1alpha1/queues");
        assert_eq!(engine::queues::API_VERSION, format!("{GROUP}/{VERSION}"));
    }
}
