//! Every cluster object a scheduler reads (pods aside) as one type, and
//! the one place that applies a change of it: drivers (`run`'s watches,
//! `simulate`'s manifests, `replay`'s trace) convert what they read into an
//! [`ObjectChange`] and hand it to [`Scheduler::apply`], so a new kind is
//! a variant here and an arm of `apply`, not a dispatch in each driver.
//! Pods keep their own entry points (`on_pod_upsert`, `on_pod_delete`,
//! `on_unassigned_pod_delete`): drivers track them between the calls.

use super::Scheduler;
use crate::disruption::Pdb;
use crate::dra::{DeviceClass, ResourceClaim, Slice};
use crate::gang::PodGroup;
use crate::model::{LabelSelector, Labels, Node};
use crate::queues::Queue;
use crate::time::Millis;
use crate::volumes::{Claim, CsiNode, StorageClass, Volume};

/// An object added or changed, or deleted (by name, or `NAMESPACE/NAME`
/// for namespaced kinds).
#[derive(Debug, Clone)]
pub enum ObjectChange {
    Node(Box<Node>),
    NodeDeleted(String),
    /// A namespace's labels (queues and affinity namespace selectors read them).
    Namespace(String, Labels),
    PodGroup(Box<PodGroup>),
    PodGroupDeleted(String),
    Queue(Box<Queue>),
    QueueDeleted(String),
    Pdb(Box<Pdb>),
    PdbDeleted(String),
    Claim(Box<Claim>),
    ClaimDeleted(String),
    Volume(Box<Volume>),
    VolumeDeleted(String),
    StorageClass(Box<StorageClass>),
    StorageClassDeleted(String),
    CsiNode(Box<CsiNode>),
    CsiNodeDeleted(String),
    /// A Service's selector (None: deleted), for default spreading.
    Service(String, Option<Labels>),
    /// A controller's selector: kind, `NAMESPACE/NAME`, selector (None:
    /// deleted), for default spreading.
    Controller(&'static str, String, Option<LabelSelector>),
    Slice(Box<Slice>),
    SliceDeleted(String),
    DeviceClass(Box<DeviceClass>),
    DeviceClassDeleted(String),
    ResourceClaim(Box<ResourceClaim>),
    ResourceClaimDeleted(String),
}

/// `NAMESPACE/NAME` split (a key without `/` is a name in no namespace).
fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

impl Scheduler {
    /// Applies a change of a cluster object: the cache, the events that
    /// may let pods in, and what else the kind feeds.
    pub fn apply(&mut self, change: ObjectChange, now: Millis) {
        match change {
            ObjectChange::Node(n) => self.on_node_upsert(*n, now),
            ObjectChange::NodeDeleted(name) => self.on_node_delete(&name, now),
            ObjectChange::Namespace(name, labels) => self.on_namespace(&name, labels, now),
            ObjectChange::PodGroup(g) => self.on_pod_group_upsert(*g, now),
            ObjectChange::PodGroupDeleted(key) => {
                let (ns, name) = split(&key);
                self.on_pod_group_delete(ns, name);
            }
            ObjectChange::Queue(q) => self.on_queue_upsert(*q, now),
            ObjectChange::QueueDeleted(name) => self.on_queue_delete(&name, now),
            ObjectChange::Pdb(b) => self.on_pdb_upsert(*b),
            ObjectChange::PdbDeleted(key) => {
                let (ns, name) = split(&key);
                self.on_pdb_delete(ns, name);
            }
            ObjectChange::Claim(c) => self.on_claim_upsert(*c, now),
            ObjectChange::ClaimDeleted(key) => {
                let (ns, name) = split(&key);
                self.on_claim_delete(ns, name, now);
            }
            ObjectChange::Volume(v) => self.on_volume_upsert(*v, now),
            ObjectChange::VolumeDeleted(name) => self.on_volume_delete(&name, now),
            ObjectChange::StorageClass(c) => self.on_storage_class_upsert(*c, now),
            ObjectChange::StorageClassDeleted(name) => self.on_storage_class_delete(&name, now),
            ObjectChange::CsiNode(c) => self.on_csi_node_upsert(*c, now),
            ObjectChange::CsiNodeDeleted(name) => self.on_csi_node_delete(&name, now),
            ObjectChange::Service(key, selector) => {
                let (ns, name) = split(&key);
                self.on_service(ns, name, selector);
            }
            ObjectChange::Controller(kind, key, selector) => {
                let (ns, name) = split(&key);
                self.on_controller(kind, ns, name, selector);
            }
            ObjectChange::Slice(s) => self.on_slice_upsert(*s, now),
            ObjectChange::SliceDeleted(name) => self.on_slice_delete(&name, now),
            ObjectChange::DeviceClass(c) => self.on_device_class_upsert(*c, now),
            ObjectChange::DeviceClassDeleted(name) => self.on_device_class_delete(&name, now),
            ObjectChange::ResourceClaim(c) => self.on_resource_claim_upsert(*c, now),
            ObjectChange::ResourceClaimDeleted(key) => {
                let (ns, name) = split(&key);
                self.on_resource_claim_delete(ns, name, now);
            }
        }
    }
}
