//! Queues on a live cluster: whether the API server serves them. The
//! CRD's objects (`gpu-scheduler.io/v1alpha1` `Queue`, cluster-scoped) are
//! `engine::convert::QueueObject`, a kube-rs resource by kube-derive,
//! lenient so that a field a newer CRD adds does not stop the watch.

use engine::convert::QueueObject;
use kube::Resource;

/// Whether the API server serves Queues (the CRD is installed).
pub async fn served(client: &kube::Client) -> bool {
    match client.list_api_group_resources(&QueueObject::api_version(&())).await {
        Ok(list) => list.resources.iter().any(|r| r.name == QueueObject::plural(&())),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::convert::queue_from_object;
    use serde_json::json;

    #[test]
    fn live_queues_convert_leniently() {
        let v = json!({
            "apiVersion": "gpu-scheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a", "uid": "u1"},
            "spec": {"parent": "root", "quota": {"nvidia.com/gpu": 8}, "weight": 2, "futureField": true},
            "status": {"admitted": 3}
        });
        let r: QueueObject = serde_json::from_value(v).unwrap_or_default();
        let q = queue_from_object(&r).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (q.name.as_str(), q.parent.as_deref(), q.quota.get("nvidia.com/gpu"), q.weight),
            ("team-a", Some("root"), Some(&8000), 2.0)
        );
        assert_eq!(QueueObject::url_path(&(), None), "/apis/gpu-scheduler.io/v1alpha1/queues");
        assert_eq!(engine::queues::API_VERSION, QueueObject::api_version(&()));
        assert_eq!(engine::queues::KIND, QueueObject::kind(&()));
    }
}
