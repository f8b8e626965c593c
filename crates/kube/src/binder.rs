//! Binding through the API: `POST pods/NAME/binding` with the pod's UID,
//! so a pod deleted and re-created under the same name is never bound by
//! a decision taken for the old one. The API server refuses to bind a pod
//! twice (409), which with the UID makes double binding impossible.
//!
//! The GPU devices a pod was given go in the Binding's annotations
//! (`gpu-scheduler.io/gpu-index`): the API server copies a Binding's
//! annotations onto the pod as it binds it, so the device plugin and a
//! restarted scheduler read them from the pod, at no extra request.

use std::sync::Mutex;

use engine::devices::ANNOTATION_GPU_INDEX;
use engine::framework::Binder;
use engine::model::Pod;
use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::runtime::Handle;

/// How a binding call ended, as far as the scheduler cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindOutcome {
    Bound,
    /// 404: the pod is gone; drop it.
    PodGone,
    /// 409: already bound, or a new pod under the same name; forget the
    /// assumption (the watch reports where it is bound).
    Conflict,
    /// Other refusals and transport errors: forget the assumption and let
    /// the queue retry.
    Failed,
}

/// A [`Binder`] for one binding task. It runs on a blocking thread (the
/// engine's Bind plugins are synchronous) and waits for the call on the
/// runtime; it remembers how the call ended.
pub struct ApiBinder {
    client: Client,
    runtime: Handle,
    outcome: Mutex<Option<BindOutcome>>,
}

impl ApiBinder {
    pub fn new(client: Client, runtime: Handle) -> ApiBinder {
        ApiBinder { client, runtime, outcome: Mutex::new(None) }
    }

    /// The outcome of the last call, if a Bind plugin called it.
    pub fn outcome(&self) -> Option<BindOutcome> {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, o: BindOutcome) {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(o);
    }
}

/// The Binding object kube-scheduler posts, with the pod's GPU devices.
pub fn binding(pod: &Pod, node: &str) -> Binding {
    let annotations =
        pod.gpu_devices.map(|d| std::collections::BTreeMap::from([(ANNOTATION_GPU_INDEX.to_string(), d.to_string())]));
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            annotations,
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    }
}

impl Binder for ApiBinder {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String> {
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let body = binding(pod, node);
        let result = self.runtime.block_on(api.create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name,
            &PostParams::default(),
            &body,
        ));
        match result {
            Ok(_) => {
                self.set(BindOutcome::Bound);
                Ok(())
            }
            Err(kube::Error::Api(status)) => {
                self.set(match status.code {
                    404 => BindOutcome::PodGone,
                    409 => BindOutcome::Conflict,
                    _ => BindOutcome::Failed,
                });
                Err(format!("binding rejected: {} ({})", status.message, status.code))
            }
            Err(e) => {
                self.set(BindOutcome::Failed);
                Err(format!("binding failed: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_names_the_pod_by_uid_and_the_node() {
        let pod = engine::testing::pod("p").build();
        let b = serde_json::to_value(binding(&pod, "n1")).unwrap_or_default();
        assert_eq!(b["metadata"]["name"], "p");
        assert_eq!(b["metadata"]["uid"], serde_json::Value::String(pod.uid.clone()));
        assert_eq!(b["target"], serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "n1"}));
        assert!(b["metadata"].get("annotations").is_none(), "no devices, no annotation");
    }

    #[test]
    fn the_binding_carries_the_gpu_devices() {
        let pod =
            engine::testing::pod("p").with(|p| p.gpu_devices = engine::devices::DeviceSet::parse("2-3").ok()).build();
        let b = serde_json::to_value(binding(&pod, "n1")).unwrap_or_default();
        assert_eq!(b["metadata"]["annotations"], serde_json::json!({"gpu-scheduler.io/gpu-index": "2-3"}));
    }
}
