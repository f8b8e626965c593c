//! Binding through the API: `POST pods/NAME/binding` with the pod's UID,
//! so a pod deleted and re-created under the same name is never bound by
//! a decision taken for the old one. The API server refuses to bind a pod
//! twice (409), which with the UID makes double binding impossible.
//!
//! The GPU devices a pod was given go in the Binding's annotations
//! (`gpu-scheduler.io/gpu-index`): the API server copies a Binding's
//! annotations onto the pod as it binds it, so the device plugin and a
//! restarted scheduler read them from the pod, at no extra request.
//!
//! DRA claims are written before the binding (DynamicResources' PreBind),
//! as kube-scheduler writes them: the delete-protection finalizer first
//! when the decision allocates, then the status (allocation and the pod
//! among `reservedFor`), each an update guarded by the resourceVersion
//! and retried on a conflict, so a consumer another scheduler added in
//! the meantime is never lost.

use std::sync::Mutex;

use std::time::Duration;

use engine::devices::ANNOTATION_GPU_INDEX;
use engine::dra::{CLAIM_FINALIZER, ClaimDecision, PodAllocations};
use engine::framework::Binder;
use engine::model::Pod;
use engine::volumes::{ANNOTATION_SELECTED_NODE, PodVolumeBindings};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
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

/// `POST pods/NAME/binding`: [`Binder::bind`]'s call, also made directly
/// by the driver for a pod that needs nothing else (no blocking thread).
pub async fn post_binding(client: &Client, pod: &Pod, node: &str) -> (Result<(), String>, BindOutcome) {
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let body = binding(pod, node);
    match api.create_subresource::<_, serde_json::Value>("binding", &pod.name, &PostParams::default(), &body).await {
        Ok(_) => (Ok(()), BindOutcome::Bound),
        Err(kube::Error::Api(status)) => {
            let outcome = match status.code {
                404 => BindOutcome::PodGone,
                409 => BindOutcome::Conflict,
                _ => BindOutcome::Failed,
            };
            (Err(format!("binding rejected: {} ({})", status.message, status.code)), outcome)
        }
        Err(e) => (Err(format!("binding failed: {e}")), BindOutcome::Failed),
    }
}

impl Binder for ApiBinder {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String> {
        let (result, outcome) = self.runtime.block_on(post_binding(&self.client, pod, node));
        self.set(outcome);
        result
    }

    /// VolumeBinding's PreBind, as kube-scheduler's volume binder writes
    /// it: each static volume's `claimRef` (the PV controller then binds
    /// the claim), each claim to provision's selected node (its
    /// provisioner then creates the volume there); then a wait, polling,
    /// until every claim is Bound.
    fn bind_volumes(&self, pod: &Pod, bindings: &PodVolumeBindings, timeout_seconds: u64) -> Result<(), String> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &pod.namespace);
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let params = PatchParams::default();
        self.runtime.block_on(async {
            for (claim_key, volume) in &bindings.static_bindings {
                let (ns, name) = claim_key.split_once('/').unwrap_or(("", claim_key));
                let claim = claims.get(name).await.map_err(|e| format!("binding volumes: claim {claim_key}: {e}"))?;
                let patch = claim_ref_patch(ns, name, claim.metadata.uid.as_deref().unwrap_or_default());
                volumes
                    .patch(volume, &params, &Patch::Merge(patch))
                    .await
                    .map_err(|e| format!("binding volumes: volume {volume}: {e}"))?;
            }
            for claim_key in &bindings.provisionings {
                let (_, name) = claim_key.split_once('/').unwrap_or(("", claim_key));
                let patch = json!({"metadata": {"annotations": {ANNOTATION_SELECTED_NODE: bindings.node}}});
                claims
                    .patch(name, &params, &Patch::Merge(patch))
                    .await
                    .map_err(|e| format!("binding volumes: claim {claim_key}: {e}"))?;
            }
            let deadline = volume_deadline(tokio::time::Instant::now(), timeout_seconds);
            let keys = bindings.static_bindings.iter().map(|(c, _)| c).chain(&bindings.provisionings);
            for claim_key in keys {
                let (_, name) = claim_key.split_once('/').unwrap_or(("", claim_key));
                loop {
                    let claim = claims.get(name).await.map_err(|e| format!("binding volumes: claim {claim_key}: {e}"))?;
                    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
                        break;
                    }
                    if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                        return Err(format!(
                            "binding volumes: timed out after {timeout_seconds}s waiting for claim {claim_key} to be bound"
                        ));
                    }
                    tokio::time::sleep(VOLUME_POLL).await;
                }
            }
            Ok(())
        })
    }

    fn bind_claims(&self, pod: &Pod, claims: &PodAllocations) -> Result<(), String> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &pod.namespace);
        self.runtime.block_on(async {
            for d in &claims.claims {
                write_claim(&api, d).await.map_err(|e| format!("writing resource claims: {e}"))?;
            }
            Ok(())
        })
    }

    fn unbind_claims(&self, pod: &Pod, claims: &PodAllocations) -> Result<(), String> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &pod.namespace);
        self.runtime.block_on(async {
            let mut first_error = None;
            for d in claims.claims.iter().rev() {
                if let Err(e) = unwrite_claim(&api, d).await {
                    tracing::warn!(pod = %pod.key(), "undoing resource claims: {e}");
                    first_error.get_or_insert(e);
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }
}

/// Attempts at one claim update before giving up on conflicts.
const CLAIM_UPDATE_ATTEMPTS: usize = 5;

/// The consumer entry of a pod.
fn consumer(d: &ClaimDecision) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: d.consumer.resource.clone(),
        name: d.consumer.name.clone(),
        uid: d.consumer.uid.clone(),
    }
}

/// Writes one claim decision: the finalizer (when allocating), then the
/// allocation and the pod as a consumer.
async fn write_claim(api: &Api<ResourceClaim>, d: &ClaimDecision) -> Result<(), String> {
    let key = d.key();
    let fail = |e: kube::Error| format!("claim {key}: {e}");
    for _ in 0..CLAIM_UPDATE_ATTEMPTS {
        let mut claim = api.get(&d.name).await.map_err(fail)?;
        if claim.metadata.uid.as_deref() != Some(d.uid.as_str()) {
            return Err(format!("claim {key}: UID changed: it was deleted and created again"));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("claim {key}: being deleted"));
        }
        let status = claim.status.get_or_insert_with(ResourceClaimStatus::default);
        let reserved = status.reserved_for.get_or_insert_with(Vec::new);
        let already = reserved.iter().any(|c| c.uid == d.consumer.uid);
        if let Some(ours) = &d.allocation {
            if status.allocation.is_some() {
                if !already {
                    return Err(format!("claim {key}: allocated by someone else in the meantime"));
                }
                return Ok(());
            }
            let finalizers = claim.metadata.finalizers.get_or_insert_with(Vec::new);
            if !finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
                finalizers.push(CLAIM_FINALIZER.to_string());
                match api.replace(&d.name, &PostParams::default(), &claim).await {
                    Ok(_) => continue, // again with the new version
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(fail(e)),
                }
            }
            let status = claim.status.get_or_insert_with(ResourceClaimStatus::default);
            status.allocation = Some(engine::convert::allocation_to_k8s(ours));
            status.reserved_for.get_or_insert_with(Vec::new).push(consumer(d));
        } else {
            if already {
                return Ok(());
            }
            if status.allocation.is_none() {
                return Err(format!("claim {key}: deallocated in the meantime"));
            }
            reserved.push(consumer(d));
        }
        match api.replace_status(&d.name, &PostParams::default(), &claim).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    Err(format!("claim {key}: still conflicting after {CLAIM_UPDATE_ATTEMPTS} attempts"))
}

/// Undoes one claim decision: the pod out of `reservedFor`, and, when the
/// decision allocated and no one else uses the claim, the allocation and
/// the finalizer.
async fn unwrite_claim(api: &Api<ResourceClaim>, d: &ClaimDecision) -> Result<(), String> {
    let key = d.key();
    let fail = |e: kube::Error| format!("claim {key}: {e}");
    for _ in 0..CLAIM_UPDATE_ATTEMPTS {
        let mut claim = match api.get(&d.name).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(fail(e)),
        };
        if claim.metadata.uid.as_deref() != Some(d.uid.as_str()) {
            return Ok(());
        }
        let status = claim.status.get_or_insert_with(ResourceClaimStatus::default);
        let reserved = status.reserved_for.get_or_insert_with(Vec::new);
        let before = reserved.len();
        reserved.retain(|c| c.uid != d.consumer.uid);
        let deallocate = d.allocation.is_some() && reserved.is_empty() && status.allocation.is_some();
        if deallocate {
            status.allocation = None;
        } else if reserved.len() == before {
            return Ok(());
        }
        match api.replace_status(&d.name, &PostParams::default(), &claim).await {
            Ok(updated) if deallocate => {
                let mut claim = updated;
                if let Some(f) = claim.metadata.finalizers.as_mut() {
                    f.retain(|f| f != CLAIM_FINALIZER);
                }
                // A conflict here leaves the finalizer; the claim's owner
                // removing it is harmless.
                let _ = api.replace(&d.name, &PostParams::default(), &claim).await;
                return Ok(());
            }
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    Err(format!("claim {key}: still conflicting after {CLAIM_UPDATE_ATTEMPTS} attempts"))
}

/// How often PreBind looks whether the PV controller bound the claims.
const VOLUME_POLL: Duration = Duration::from_millis(500);

/// When PreBind stops waiting for the claims: `timeout_seconds` from
/// `now`, or never when that is past what the clock can hold (the plugin
/// refuses more than Go's longest duration; this is public).
fn volume_deadline(now: tokio::time::Instant, timeout_seconds: u64) -> Option<tokio::time::Instant> {
    now.checked_add(Duration::from_secs(timeout_seconds))
}

/// The PV patch that hands a static volume to a claim, as kube's binder
/// writes it (the annotation tells the PV controller the binding is the
/// scheduler's, not a user's pre-binding).
pub fn claim_ref_patch(namespace: &str, name: &str, uid: &str) -> serde_json::Value {
    json!({
        "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": name, "uid": uid}}
    })
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

    /// The review's case: a huge bindTimeoutSeconds overflowed the clock.
    #[test]
    fn a_volume_deadline_past_the_clock_is_never() {
        let now = tokio::time::Instant::now();
        assert!(volume_deadline(now, 600).is_some_and(|d| d > now));
        for secs in [engine::config::MAX_SECONDS, i64::MAX as u64, u64::MAX] {
            // Go's longest duration still fits the clock; past it, no deadline (no panic).
            let d = volume_deadline(now, secs);
            assert!(d.is_none_or(|d| d > now), "{secs}");
        }
        assert_eq!(volume_deadline(now, u64::MAX), None);
    }

    #[test]
    fn the_binding_carries_the_gpu_devices() {
        let pod =
            engine::testing::pod("p").with(|p| p.gpu_devices = engine::devices::DeviceSet::parse("2-3").ok()).build();
        let b = serde_json::to_value(binding(&pod, "n1")).unwrap_or_default();
        assert_eq!(b["metadata"]["annotations"], serde_json::json!({"gpu-scheduler.io/gpu-index": "2-3"}));
    }
}
