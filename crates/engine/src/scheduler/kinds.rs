//! The API kinds the scheduler reads, pods aside, each registered here
//! once: its API type, the [`ObjectChange`] an object of it makes, what its
//! deletion makes, whether a cluster may not serve it. The drivers iterate
//! [`visit_kinds`] and never name a kind: `run` watches each kind,
//! `simulate` reads each from manifests, `snapshot` lists each; all of them
//! hand the changes to [`Scheduler::apply`], which feeds the cache and the
//! events that may let pods in.
//!
//! Adding a kind: its conversion in `convert/`, the state it feeds (the
//! cache or a capability), and here a variant of [`ObjectChange`], an arm
//! of [`Scheduler::apply`], an impl of [`Kind`] and a line of
//! [`visit_kinds`].
//!
//! Pods keep their own entry points (`on_pod_upsert`, `on_pod_delete`,
//! `on_unassigned_pod_delete`): drivers track them between the calls.
//! Objects a simulation reads only to make pods (PriorityClasses,
//! workloads, ResourceClaimTemplates) are the simulator's input, not
//! cluster state the scheduler keeps.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1 as resourcev1;
use k8s_openapi::api::storage::v1 as storagev1;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Scheduler;
use crate::convert::{self, ConvertError, PodGroupObject, QueueObject};
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

/// An API kind the scheduler reads, registered in [`visit_kinds`].
pub trait Kind: 'static {
    /// The API type: k8s-openapi's, or our CRD's (kube-derive).
    type Object: Resource<DynamicType = (), Scope: Namespacing>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static;

    /// For a kind a cluster may not serve (a CRD, an API group left off):
    /// what is lost without it, said when it is missing. None: always served.
    const WHEN_MISSING: Option<&'static str> = None;

    /// Whether `snapshot` writes it. Controllers are not written: their
    /// pods are, and `simulate` would create them again.
    const IN_SNAPSHOT: bool = true;

    /// The change an object makes; an error names the field it cannot read.
    fn change(obj: &Self::Object, read: ReadOptions) -> Result<ObjectChange, ConvertError>;

    /// The change its deletion makes, by [`key`].
    fn deleted(key: String) -> Option<ObjectChange>;

    /// Clears what is no input before a snapshot is written (a status the
    /// scheduler writes, lists only the file's size notices).
    fn for_snapshot(_obj: &mut Self::Object) {}
}

/// How objects are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Keep a node's API object on it (extenders are sent it).
    pub keep_node_objects: bool,
}

/// Whether a kind's objects live in namespaces (from its API scope).
pub trait Namespacing {
    const NAMESPACED: bool;
}

impl Namespacing for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Namespacing for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The key an object is known by: its name, or `NAMESPACE/NAME` for a
/// namespaced kind (a manifest's missing namespace is `default`).
pub fn key<K: Kind>(obj: &K::Object) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    if <<K::Object as Resource>::Scope as Namespacing>::NAMESPACED {
        format!("{}/{name}", meta.namespace.as_deref().unwrap_or(convert::DEFAULT_NAMESPACE))
    } else {
        name.to_string()
    }
}

/// Something done once per registered kind (watching it, reading it from
/// a manifest, listing it).
pub trait KindVisitor {
    fn visit<K: Kind>(&mut self);
}

/// Every registered kind, in the order a snapshot writes them.
pub fn visit_kinds(v: &mut impl KindVisitor) {
    v.visit::<Namespaces>();
    v.visit::<Nodes>();
    v.visit::<PodDisruptionBudgets>();
    v.visit::<PersistentVolumeClaims>();
    v.visit::<PersistentVolumes>();
    v.visit::<StorageClasses>();
    v.visit::<CsiNodes>();
    v.visit::<Services>();
    v.visit::<ReplicaSets>();
    v.visit::<StatefulSets>();
    v.visit::<ReplicationControllers>();
    v.visit::<PodGroups>();
    v.visit::<Queues>();
    v.visit::<ResourceSlices>();
    v.visit::<DeviceClasses>();
    v.visit::<ResourceClaims>();
}

/// Namespaces: their labels, which queues and affinity namespace selectors read.
pub struct Namespaces;

impl Kind for Namespaces {
    type Object = corev1::Namespace;

    fn change(ns: &Self::Object, _: ReadOptions) -> Result<ObjectChange, ConvertError> {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let mut labels: Labels = ns.metadata.labels.clone().unwrap_or_default();
        // The API server sets it on every namespace; a manifest may not.
        labels.insert(convert::NAMESPACE_NAME_LABEL.into(), name.clone());
        Ok(ObjectChange::Namespace(name, labels))
    }

    fn deleted(_: String) -> Option<ObjectChange> {
        // Kept only for selectors; a deleted namespace has no pods left to match.
        None
    }
}

/// Nodes.
pub struct Nodes;

impl Kind for Nodes {
    type Object = corev1::Node;

    fn change(n: &Self::Object, read: ReadOptions) -> Result<ObjectChange, ConvertError> {
        let mut node = convert::node_from_k8s(n)?;
        if read.keep_node_objects {
            node.source = serde_json::to_value(n).ok().map(std::sync::Arc::new);
        }
        Ok(ObjectChange::Node(Box::new(node)))
    }

    fn deleted(key: String) -> Option<ObjectChange> {
        Some(ObjectChange::NodeDeleted(key))
    }

    fn for_snapshot(n: &mut Self::Object) {
        if let Some(status) = &mut n.status {
            status.images = None;
        }
    }
}

/// The cluster kinds whose change is their converted object, boxed, and
/// whose deletion is named by key.
macro_rules! converted_kind {
    ($(#[$doc:meta])* $name:ident, $object:ty, $convert:path, $variant:ident, $deleted:ident
        $(, missing: $missing:expr)? $(, status: $status:ident)?) => {
        $(#[$doc])*
        pub struct $name;

        impl Kind for $name {
            type Object = $object;
            $(const WHEN_MISSING: Option<&'static str> = Some($missing);)?

            fn change(obj: &Self::Object, _: ReadOptions) -> Result<ObjectChange, ConvertError> {
                Ok(ObjectChange::$variant(Box::new($convert(obj)?)))
            }

            fn deleted(key: String) -> Option<ObjectChange> {
                Some(ObjectChange::$deleted(key))
            }

            $(fn for_snapshot(obj: &mut Self::Object) {
                // The scheduler's to write, not an input.
                obj.$status = None;
            })?
        }
    };
}

converted_kind!(
    /// PodDisruptionBudgets, which preemption respects.
    PodDisruptionBudgets, PodDisruptionBudget, convert::pdb_from_k8s, Pdb, PdbDeleted
);
converted_kind!(
    /// PersistentVolumeClaims.
    PersistentVolumeClaims, corev1::PersistentVolumeClaim, convert::claim_from_k8s, Claim, ClaimDeleted
);
converted_kind!(
    /// PersistentVolumes.
    PersistentVolumes, corev1::PersistentVolume, convert::volume_from_k8s, Volume, VolumeDeleted
);
converted_kind!(
    /// StorageClasses.
    StorageClasses, storagev1::StorageClass, convert::class_from_k8s, StorageClass, StorageClassDeleted
);
converted_kind!(
    /// CSINodes: each node's attachable volume limits.
    CsiNodes, storagev1::CSINode, convert::csi_node_from_k8s, CsiNode, CsiNodeDeleted
);
converted_kind!(
    /// Resource slices (DRA).
    ResourceSlices, resourcev1::ResourceSlice, convert::slice_from_k8s, Slice, SliceDeleted,
    missing: "pods with resource claims wait (resource.k8s.io/v1 not served)"
);
converted_kind!(
    /// Device classes (DRA).
    DeviceClasses, resourcev1::DeviceClass, convert::device_class_from_k8s, DeviceClass, DeviceClassDeleted,
    missing: "pods with resource claims wait (resource.k8s.io/v1 not served)"
);
converted_kind!(
    /// Resource claims (DRA).
    ResourceClaims, resourcev1::ResourceClaim, convert::resource_claim_from_k8s, ResourceClaim, ResourceClaimDeleted,
    missing: "pods with resource claims wait (resource.k8s.io/v1 not served)"
);

converted_kind!(
    /// PodGroups (scheduler-plugins' CRD): gangs.
    PodGroups, PodGroupObject, convert::pod_group_from_object, PodGroup, PodGroupDeleted,
    missing: "gang members wait for their group; install deploy/crds/ and restart to schedule gangs",
    status: status
);
converted_kind!(
    /// Queues (our CRD): quotas.
    Queues, QueueObject, convert::queue_from_object, Queue, QueueDeleted,
    missing: "pods naming a queue wait for it; install deploy/crds/ and restart to use queues",
    status: status
);

/// Services: their selectors, for default spreading.
pub struct Services;

impl Kind for Services {
    type Object = corev1::Service;

    fn change(svc: &Self::Object, _: ReadOptions) -> Result<ObjectChange, ConvertError> {
        let selector = svc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        Ok(ObjectChange::Service(key::<Self>(svc), Some(selector)))
    }

    fn deleted(key: String) -> Option<ObjectChange> {
        Some(ObjectChange::Service(key, None))
    }
}

/// The controllers whose selectors default spreading reads.
macro_rules! controller_kind {
    ($(#[$doc:meta])* $name:ident, $object:ty, $kind:literal, |$obj:ident| $selector:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl Kind for $name {
            type Object = $object;
            const IN_SNAPSHOT: bool = false;

            fn change($obj: &Self::Object, _: ReadOptions) -> Result<ObjectChange, ConvertError> {
                let selector: Option<Result<LabelSelector, ConvertError>> = $selector;
                Ok(ObjectChange::Controller($kind, key::<Self>($obj), selector.transpose()?))
            }

            fn deleted(key: String) -> Option<ObjectChange> {
                Some(ObjectChange::Controller($kind, key, None))
            }
        }
    };
}

controller_kind!(
    /// ReplicaSets.
    ReplicaSets, ReplicaSet, "ReplicaSet",
    |rs| rs.spec.as_ref().map(|s| convert::label_selector(&s.selector, "spec.selector"))
);
controller_kind!(
    /// StatefulSets.
    StatefulSets, StatefulSet, "StatefulSet",
    |ss| ss.spec.as_ref().map(|s| convert::label_selector(&s.selector, "spec.selector"))
);
controller_kind!(
    /// ReplicationControllers (a map of labels for a selector).
    ReplicationControllers, corev1::ReplicationController, "ReplicationController",
    |rc| {
        let map = rc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        Some(Ok(LabelSelector::from_match_labels(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))))
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registered kind's name, API version, whether namespaced.
    struct Listed(Vec<(String, String, bool)>);

    impl KindVisitor for Listed {
        fn visit<K: Kind>(&mut self) {
            let namespaced = <<K::Object as Resource>::Scope as Namespacing>::NAMESPACED;
            self.0.push((K::Object::kind(&()).into_owned(), K::Object::api_version(&()).into_owned(), namespaced));
        }
    }

    #[test]
    fn kinds_are_registered_once_with_their_scope() {
        let mut listed = Listed(Vec::new());
        visit_kinds(&mut listed);
        let mut names: Vec<&str> = listed.0.iter().map(|(k, _, _)| k.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a kind registered twice: {:?}", listed.0);
        let scope = |kind: &str| listed.0.iter().find(|(k, _, _)| k == kind).map(|(_, v, n)| (v.as_str(), *n));
        let cases = [
            ("Node", Some(("v1", false))),
            ("Namespace", Some(("v1", false))),
            ("PodGroup", Some(("scheduling.x-k8s.io/v1alpha1", true))),
            ("Queue", Some(("gpu-scheduler.io/v1alpha1", false))),
            ("ResourceClaim", Some(("resource.k8s.io/v1", true))),
            ("PodDisruptionBudget", Some(("policy/v1", true))),
            ("Pod", None), // pods have their own entry points
        ];
        for (kind, want) in cases {
            assert_eq!(scope(kind), want, "{kind}");
        }
    }

    #[test]
    fn keys_and_deletions() {
        let pvc: corev1::PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key::<PersistentVolumeClaims>(&pvc), "default/data");
        let node: corev1::Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n1", "namespace": "ignored"}}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key::<Nodes>(&node), "n1");
        assert!(matches!(Nodes::deleted("n1".into()), Some(ObjectChange::NodeDeleted(n)) if n == "n1"));
        assert!(Namespaces::deleted("ns".into()).is_none());
        assert!(matches!(
            ReplicaSets::deleted("ns/rs".into()),
            Some(ObjectChange::Controller("ReplicaSet", k, None)) if k == "ns/rs"
        ));
    }

    #[test]
    fn a_namespace_carries_its_name_label_as_the_api_server_sets_it() {
        let ns: corev1::Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "team-a", "labels": {"tier": "gpu"}}}))
                .unwrap_or_else(|e| panic!("{e}"));
        let Ok(ObjectChange::Namespace(name, labels)) = Namespaces::change(&ns, ReadOptions::default()) else {
            panic!("not a namespace change");
        };
        assert_eq!(name, "team-a");
        assert_eq!(labels.get(convert::NAMESPACE_NAME_LABEL).map(String::as_str), Some("team-a"));
        assert_eq!(labels.get("tier").map(String::as_str), Some("gpu"));
    }
}
