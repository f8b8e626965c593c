//! What the volume plugins share (VolumeBinding, VolumeRestrictions,
//! VolumeZone, NodeVolumeLimits): a pod's claims looked up in the
//! snapshot's volume objects, with kube's PreFilter errors, and the events
//! that can make a pod they rejected schedulable.

use framework::framework::{ClusterEvent, EventAction, EventResource, Status};
use framework::model::Pod;
use framework::volumes::{Claim, PodVolume, VolumeObjects};

/// A claim of the pod, or kube's reason it cannot be used.
pub fn pod_claim<'a>(volumes: &'a VolumeObjects, pod: &Pod, v: &PodVolume) -> Result<Option<&'a Claim>, Status> {
    let Some(name) = v.claim() else { return Ok(None) };
    match volumes.claim(&pod.namespace, name) {
        Some(c) if c.terminating => {
            Err(Status::unresolvable(format!("persistentvolumeclaim \"{name}\" is being deleted")))
        }
        Some(c) => Ok(Some(c)),
        None if matches!(v, PodVolume::Ephemeral { .. }) => Err(Status::unresolvable(format!(
            "waiting for ephemeral volume controller to create the persistentvolumeclaim \"{name}\""
        ))),
        None => Err(Status::unresolvable(format!("persistentvolumeclaim \"{name}\" not found"))),
    }
}

/// Whether the pod uses any claim (directly or as an ephemeral volume).
pub fn has_claims(pod: &Pod) -> bool {
    pod.volumes.iter().any(|v| v.claim().is_some())
}

/// The events a volume plugin's rejection may be undone by: claims,
/// volumes, classes and CSINodes added or changed, nodes added or
/// relabelled, pods leaving.
pub fn volume_events() -> Vec<ClusterEvent> {
    vec![
        ClusterEvent::new(EventResource::PersistentVolumeClaim, EventAction::Add),
        ClusterEvent::new(EventResource::PersistentVolumeClaim, EventAction::Update),
        ClusterEvent::new(EventResource::PersistentVolume, EventAction::Add),
        ClusterEvent::new(EventResource::PersistentVolume, EventAction::Update),
        ClusterEvent::any(EventResource::StorageClass),
        ClusterEvent::any(EventResource::CsiNode),
        ClusterEvent::new(EventResource::Node, EventAction::Add),
        ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
        ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
    ]
}
