//! Gangs: pods that must run together or not at all (distributed training).
//!
//! The API is scheduler-plugins' coscheduling one, which training operators
//! already speak: a `PodGroup` (`scheduling.x-k8s.io/v1alpha1`) with
//! `minMember`, `minResources` and `scheduleTimeoutSeconds`, and pods joined
//! to it by the label `scheduling.x-k8s.io/pod-group`. Unlike coscheduling,
//! which reserves members one cycle at a time and holds them in Permit, a
//! gang here is placed in one cycle (the scheduler's gang cycle): each
//! member is decided against the snapshot with the members before it
//! assumed, and all are kept or none. Two gangs therefore never each hold
//! part of the cluster waiting for the rest.
//!
//! This module keeps what the scheduler knows of the groups ([`Gangs`]):
//! their specs, which members are pending, since when the gang has waited,
//! and the status to report. [`domains`] groups nodes by a gang's topology
//! key; `status` derives the PodGroup status the driver writes.
//!
//! A group's topology key is its annotation `gpu-scheduler.io/topology-key`
//! ([`ANNOTATION_TOPOLOGY_KEY`]). State only: the gang cycle itself is the
//! scheduler's (`scheduler/gang.rs`).

mod domains;
mod state;
mod status;

pub use domains::{Domain, domains};
pub use state::{GangView, Gangs};
pub use status::{GangPhase, GangStatus};

use crate::resources::Resources;
use crate::time::Millis;

/// The pod label that joins a pod to a PodGroup in its namespace.
pub const LABEL_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// PodGroup annotation: place every member within one domain of this
/// node label (a zone, a rack) when one domain can hold the gang.
pub const ANNOTATION_TOPOLOGY_KEY: &str = "gpu-scheduler.io/topology-key";
pub const API_GROUP: &str = "scheduling.x-k8s.io";
pub const API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";
pub const KIND: &str = "PodGroup";
/// The name gang failures are filed under, so that the events that can
/// help a gang (a member arriving, a PodGroup changing, room freed) move
/// its members back to the active queue.
pub const GANG: &str = "Gang";

/// A PodGroup as the scheduler needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    pub namespace: String,
    pub name: String,
    /// Members that must be placed together before any binds.
    pub min_member: u32,
    /// What the gang needs in all; checked against the cluster's free
    /// capacity before any member is tried (zero: no check).
    pub min_resources: Resources,
    /// How long the gang may wait for its members before it is backed off.
    pub schedule_timeout: Option<Millis>,
    /// See [`ANNOTATION_TOPOLOGY_KEY`].
    pub topology_key: Option<String>,
}

impl PodGroup {
    /// `NAMESPACE/NAME`, the key pods refer to it by ([`crate::model::Pod::group_key`]).
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
