//! PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, and
//! a pod's volumes, as the volume plugins read them.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::storage::v1 as storagev1;

use super::selectors::{label_selector, node_selector};
use super::{ConvertError, DEFAULT_NAMESPACE, invalid, non_empty, required, unsupported};
use crate::quantity::Quantity;
use crate::volumes::{
    ANNOTATION_SELECTED_NODE, AccessMode, Claim, ClaimRef, CsiNode, Disk, PodVolume, StorageClass, Volume,
};

const ACCESS_MODES: &[&str] = &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"];

fn access_modes(modes: Option<&Vec<String>>, path: &str) -> Result<Vec<AccessMode>, ConvertError> {
    modes
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| AccessMode::parse(m).ok_or_else(|| unsupported(format!("{path}[{i}]"), m, ACCESS_MODES)))
        .collect()
}

fn storage(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    path: &str,
) -> Result<i64, ConvertError> {
    match q {
        None => Ok(0),
        Some(q) => {
            Quantity::parse(&q.0).map(|q| q.value()).map_err(|e| invalid(path, format_args!("{:?}", q.0), e.reason))
        }
    }
}

/// Converts a PersistentVolumeClaim.
pub fn claim_from_k8s(c: &corev1::PersistentVolumeClaim) -> Result<Claim, ConvertError> {
    let meta = &c.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let spec = c.spec.as_ref();
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        Some(s) => Some(label_selector(s, "spec.selector")?),
        None => None,
    };
    Ok(Claim {
        uid: non_empty(meta.uid.as_ref()).unwrap_or_else(|| format!("{namespace}/{name}")),
        class: spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default(),
        volume_name: non_empty(spec.and_then(|s| s.volume_name.as_ref())),
        bound: c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
        access_modes: access_modes(spec.and_then(|s| s.access_modes.as_ref()), "spec.accessModes")?,
        request: storage(
            spec.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")),
            "spec.resources.requests.storage",
        )?,
        selector,
        selected_node: meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_SELECTED_NODE)).cloned(),
        terminating: meta.deletion_timestamp.is_some(),
        namespace,
        name,
    })
}

/// Converts a PersistentVolume.
pub fn volume_from_k8s(v: &corev1::PersistentVolume) -> Result<Volume, ConvertError> {
    let meta = &v.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let spec = v.spec.as_ref();
    let node_affinity = match spec.and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) {
        Some(sel) => Some(node_selector(sel, "spec.nodeAffinity.required")?),
        None => None,
    };
    let claim_ref = spec.and_then(|s| s.claim_ref.as_ref()).map(|r| ClaimRef {
        namespace: r.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
        name: r.name.clone().unwrap_or_default(),
        uid: r.uid.clone().unwrap_or_default(),
    });
    let disk = spec.and_then(|s| {
        if let Some(d) = &s.gce_persistent_disk {
            Some(Disk::GcePd { pd_name: d.pd_name.clone() })
        } else if let Some(d) = &s.aws_elastic_block_store {
            Some(Disk::AwsEbs { volume_id: d.volume_id.clone() })
        } else {
            s.iscsi.as_ref().map(|d| Disk::Iscsi { iqn: d.iqn.clone(), lun: d.lun })
        }
    });
    let phase = v.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(Volume {
        class: spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default(),
        capacity: storage(
            spec.and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")),
            "spec.capacity.storage",
        )?,
        access_modes: access_modes(spec.and_then(|s| s.access_modes.as_ref()), "spec.accessModes")?,
        node_affinity,
        claim_ref,
        labels: meta.labels.clone().unwrap_or_default(),
        csi: spec.and_then(|s| s.csi.as_ref()).map(|c| (c.driver.clone(), c.volume_handle.clone())),
        disk,
        // A volume without a status (a manifest) is taken as available.
        available: matches!(phase, None | Some("Available") | Some("Bound") | Some("Pending")),
        name,
    })
}

/// Converts a StorageClass.
pub fn class_from_k8s(c: &storagev1::StorageClass) -> Result<StorageClass, ConvertError> {
    let name = non_empty(c.metadata.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let wait_for_first_consumer = match c.volume_binding_mode.as_deref() {
        None | Some("Immediate") => false,
        Some("WaitForFirstConsumer") => true,
        Some(other) => {
            return Err(unsupported("volumeBindingMode", other, &["Immediate", "WaitForFirstConsumer"]));
        }
    };
    let allowed_topologies = c
        .allowed_topologies
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let path = format!("allowedTopologies[{i}]");
            // A topology term lists values per key: the same as a node
            // selector term of In requirements.
            let term = corev1::NodeSelectorTerm {
                match_expressions: Some(
                    t.match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| corev1::NodeSelectorRequirement {
                            key: e.key.clone(),
                            operator: "In".into(),
                            values: Some(e.values.clone()),
                        })
                        .collect(),
                ),
                match_fields: None,
            };
            node_selector(&corev1::NodeSelector { node_selector_terms: vec![term] }, &path)
                .map(|mut s| s.terms.remove(0))
        })
        .collect::<Result<_, _>>()?;
    Ok(StorageClass { name, provisioner: c.provisioner.clone(), wait_for_first_consumer, allowed_topologies })
}

/// Converts a CSINode.
pub fn csi_node_from_k8s(c: &storagev1::CSINode) -> Result<CsiNode, ConvertError> {
    let node = non_empty(c.metadata.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let limits = c
        .spec
        .drivers
        .iter()
        .filter_map(|d| d.allocatable.as_ref().and_then(|a| a.count).map(|n| (d.name.clone(), i64::from(n))))
        .collect();
    Ok(CsiNode { node, limits })
}

/// The volumes of a pod that the volume plugins care about.
pub(super) fn pod_volumes(pod_name: &str, spec: &corev1::PodSpec) -> Vec<PodVolume> {
    let mut out = Vec::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.persistent_volume_claim {
            out.push(PodVolume::Claim { claim: c.claim_name.clone(), read_only: c.read_only.unwrap_or(false) });
        } else if v.ephemeral.is_some() {
            out.push(PodVolume::Ephemeral { claim: format!("{pod_name}-{}", v.name) });
        } else if let Some(d) = &v.gce_persistent_disk {
            out.push(PodVolume::Disk {
                disk: Disk::GcePd { pd_name: d.pd_name.clone() },
                read_only: d.read_only.unwrap_or(false),
            });
        } else if let Some(d) = &v.aws_elastic_block_store {
            out.push(PodVolume::Disk {
                disk: Disk::AwsEbs { volume_id: d.volume_id.clone() },
                read_only: d.read_only.unwrap_or(false),
            });
        } else if let Some(d) = &v.rbd {
            out.push(PodVolume::Disk {
                disk: Disk::Rbd {
                    monitors: d.monitors.clone(),
                    pool: d.pool.clone().unwrap_or_else(|| "rbd".into()),
                    image: d.image.clone(),
                },
                read_only: d.read_only.unwrap_or(false),
            });
        } else if let Some(d) = &v.iscsi {
            out.push(PodVolume::Disk {
                disk: Disk::Iscsi { iqn: d.iqn.clone(), lun: d.lun },
                read_only: d.read_only.unwrap_or(false),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> T {
        serde_yaml_ng::from_str(s).unwrap_or_else(|e| panic!("{e}\n{s}"))
    }

    #[test]
    fn claims_volumes_classes_and_csi_nodes_convert() {
        let c = claim_from_k8s(&yaml(
            "metadata: {name: data, namespace: ml, uid: u1, annotations: {volume.kubernetes.io/selected-node: n1}}\nspec: {storageClassName: local, accessModes: [ReadWriteOncePod], resources: {requests: {storage: 10Gi}}, selector: {matchLabels: {tier: fast}}}\nstatus: {phase: Pending}\n",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.key(), c.class.as_str(), c.request, c.bound), ("ml/data".to_string(), "local", 10 << 30, false));
        assert_eq!((c.access_modes, c.selected_node.as_deref()), (vec![AccessMode::ReadWriteOncePod], Some("n1")));
        assert!(c.selector.is_some());

        let v = volume_from_k8s(&yaml(
            "metadata: {name: pv1, labels: {topology.kubernetes.io/zone: z1}}\nspec:\n  storageClassName: local\n  capacity: {storage: 100Gi}\n  accessModes: [ReadWriteOnce]\n  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}\n  claimRef: {namespace: ml, name: data}\n  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n1]}]}]}}\nstatus: {phase: Available}\n",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((v.capacity, v.csi.clone().map(|c| c.0)), (100 << 30, Some("ebs.csi.aws.com".to_string())));
        assert_eq!(v.claim_ref.map(|r| r.name).as_deref(), Some("data"));
        assert!(v.node_affinity.is_some() && v.available);

        let sc = class_from_k8s(&yaml(
            "metadata: {name: local}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [z1]}]}]\n",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(sc.wait_for_first_consumer && !sc.provisions());
        assert_eq!(sc.allowed_topologies.len(), 1);

        let csi = csi_node_from_k8s(&yaml(
            "metadata: {name: n1}\nspec: {drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}, {name: other, nodeID: x}]}\n",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(csi.limits, [("ebs.csi.aws.com".to_string(), 25)]);
    }

    #[test]
    fn errors_name_the_field() {
        let cases: [(&str, Result<(), ConvertError>, &str); 3] = [
            (
                "claim access mode",
                claim_from_k8s(&yaml("metadata: {name: c}\nspec: {accessModes: [ReadWriteSometimes]}\n")).map(|_| ()),
                "spec.accessModes[0]",
            ),
            (
                "volume capacity",
                volume_from_k8s(&yaml("metadata: {name: v}\nspec: {capacity: {storage: lots}}\n")).map(|_| ()),
                "spec.capacity.storage",
            ),
            (
                "class binding mode",
                class_from_k8s(&yaml("metadata: {name: s}\nprovisioner: x\nvolumeBindingMode: Lazy\n")).map(|_| ()),
                "volumeBindingMode",
            ),
        ];
        for (name, result, path) in cases {
            assert_eq!(result.err().map(|e| e.path).as_deref(), Some(path), "{name}");
        }
    }
}
