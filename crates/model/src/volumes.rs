//! Volumes as the scheduler sees them (kube-scheduler's volume plugins:
//! VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits):
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes
//! ([`Claim`], [`Volume`], [`StorageClass`], [`CsiNode`]) and a pod's
//! [`PodVolume`]s, converted once when they arrive (`convert`), held by the
//! cache in the engine's `VolumeObjects` and handed to plugins through the
//! snapshot; and the bindings a decision assumes ([`PodVolumeBindings`],
//! left in the cycle state by VolumeBinding's Reserve for the scheduler to
//! assume and the binder to write) until the PV controller confirms them,
//! as kube's volume binder assumes them.

use crate::terms::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm};

/// `volume.kubernetes.io/selected-node`: set on a claim of a
/// `WaitForFirstConsumer` class to ask its provisioner for a volume there.
pub const ANNOTATION_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The provisioner of classes whose volumes are created by hand only.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// Labels a zonal volume carries (VolumeZone), current and legacy.
pub const ZONE_LABELS: [&str; 4] = [
    crate::terms::LABEL_ZONE,
    crate::terms::LABEL_REGION,
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
}

impl AccessMode {
    pub fn parse(s: &str) -> Option<AccessMode> {
        match s {
            "ReadWriteOnce" => Some(AccessMode::ReadWriteOnce),
            "ReadOnlyMany" => Some(AccessMode::ReadOnlyMany),
            "ReadWriteMany" => Some(AccessMode::ReadWriteMany),
            "ReadWriteOncePod" => Some(AccessMode::ReadWriteOncePod),
            _ => None,
        }
    }
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.storageClassName` ("" and absent both mean none here; the API
    /// server's default class is applied before the scheduler sees it).
    pub class: String,
    /// `spec.volumeName`: the volume it is bound (or pre-bound) to.
    pub volume_name: Option<String>,
    /// `status.phase` is Bound.
    pub bound: bool,
    pub access_modes: Vec<AccessMode>,
    /// `spec.resources.requests.storage` in bytes.
    pub request: i64,
    /// `spec.selector` over volumes' labels, if any.
    pub selector: Option<LabelSelector>,
    /// `volume.kubernetes.io/selected-node`, when a provisioning was asked.
    pub selected_node: Option<String>,
    pub terminating: bool,
}

impl Claim {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where a volume's claim reference points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    /// Empty for a volume pre-bound by name only.
    pub uid: String,
}

/// A disk that two pods on one node may not both mount read-write
/// (VolumeRestrictions' disk conflicts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    GcePd { pd_name: String },
    AwsEbs { volume_id: String },
    Rbd { monitors: Vec<String>, pool: String, image: String },
    Iscsi { iqn: String, lun: i32 },
}

/// A PersistentVolume.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub name: String,
    pub class: String,
    /// `spec.capacity.storage` in bytes.
    pub capacity: i64,
    pub access_modes: Vec<AccessMode>,
    pub node_affinity: Option<NodeSelector>,
    pub claim_ref: Option<ClaimRef>,
    pub labels: Labels,
    /// The CSI driver and volume handle, for attach limits.
    pub csi: Option<(String, String)>,
    pub disk: Option<Disk>,
    /// `status.phase` is Available (or Released volumes are not offered).
    pub available: bool,
}

/// A StorageClass.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageClass {
    pub name: String,
    pub provisioner: String,
    pub wait_for_first_consumer: bool,
    /// Where the provisioner may create volumes (empty: anywhere).
    pub allowed_topologies: Vec<NodeSelectorTerm>,
}

impl StorageClass {
    /// Whether volumes of this class can be created on demand.
    pub fn provisions(&self) -> bool {
        !self.provisioner.is_empty() && self.provisioner != NO_PROVISIONER
    }
}

/// A CSINode: how many volumes of each driver the node can attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiNode {
    pub node: String,
    /// Driver name → attach limit (`allocatable.count`), when set.
    pub limits: Vec<(String, i64)>,
}

/// A volume of a pod, as the volume plugins need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodVolume {
    /// `persistentVolumeClaim.claimName`.
    Claim { claim: String, read_only: bool },
    /// A generic ephemeral volume: its claim is named `POD-VOLUME`.
    Ephemeral { claim: String },
    /// An inline disk (VolumeRestrictions).
    Disk { disk: Disk, read_only: bool },
}

impl PodVolume {
    /// The claim this volume uses, if it uses one.
    pub fn claim(&self) -> Option<&str> {
        match self {
            PodVolume::Claim { claim, .. } | PodVolume::Ephemeral { claim } => Some(claim),
            PodVolume::Disk { .. } => None,
        }
    }
}

/// What a decision binds for a pod's unbound claims on the chosen node:
/// static volumes to bind, claims to provision there. VolumeBinding's
/// Reserve writes it into the cycle state; the scheduler assumes it in the
/// cache, the binder writes it to the API in PreBind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumeBindings {
    /// (claim `NAMESPACE/NAME`, volume name).
    pub static_bindings: Vec<(String, String)>,
    /// Claims (`NAMESPACE/NAME`) to provision on the node.
    pub provisionings: Vec<String>,
    pub node: String,
}

impl PodVolumeBindings {
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisionings.is_empty()
    }
}
