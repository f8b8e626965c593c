//! VolumeRestrictions (kube-scheduler's): a claim with the
//! `ReadWriteOncePod` access mode used by another pod keeps the pod out
//! (PreFilter, everywhere), and an inline disk (GCE PD, AWS EBS, RBD,
//! iSCSI) mounted by a pod on the node conflicts unless both are read-only
//! (AWS EBS: always).

use std::sync::Arc;

use engine::cache::{NodeView, Snapshot};
use engine::framework::{ClusterEvent, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};
use engine::model::Pod;
use engine::registry::ArgsError;
use engine::volumes::{AccessMode, Disk, PodVolume};

use crate::helper::decode_no_args;
use crate::volumes::{pod_claim, volume_events};

pub const NAME: &str = "VolumeRestrictions";

pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeRestrictions;

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(VolumeRestrictions))
}

/// The pod's inline disks, for Filter.
struct Disks(Vec<(Disk, bool)>);

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> Vec<ClusterEvent> {
        volume_events()
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

/// kube's `isVolumeConflict` for two inline disks.
fn conflict(a: &Disk, a_ro: bool, b: &Disk, b_ro: bool) -> bool {
    match (a, b) {
        (Disk::GcePd { pd_name: x }, Disk::GcePd { pd_name: y }) => x == y && !(a_ro && b_ro),
        (Disk::AwsEbs { volume_id: x }, Disk::AwsEbs { volume_id: y }) => x == y,
        (Disk::Rbd { monitors: m1, pool: p1, image: i1 }, Disk::Rbd { monitors: m2, pool: p2, image: i2 }) => {
            m1.iter().any(|m| m2.contains(m)) && p1 == p2 && i1 == i2 && !(a_ro && b_ro)
        }
        (Disk::Iscsi { iqn: x, .. }, Disk::Iscsi { iqn: y, .. }) => x == y && !(a_ro && b_ro),
        _ => false,
    }
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> (PreFilterResult, Status) {
        let objects = snap.volumes();
        let mut rwop: Vec<&str> = Vec::new();
        for v in &pod.volumes {
            // A missing claim is VolumeBinding's to report.
            if let Ok(Some(c)) = pod_claim(objects, pod, v)
                && c.access_modes.contains(&AccessMode::ReadWriteOncePod)
            {
                rwop.push(c.name.as_str());
            }
        }
        if !rwop.is_empty() {
            let in_use = snap.nodes().iter().flat_map(|n| n.pods.iter()).any(|other| {
                other.uid != pod.uid
                    && other.namespace == pod.namespace
                    && other.volumes.iter().any(|v| v.claim().is_some_and(|c| rwop.contains(&c)))
            });
            if in_use {
                return (PreFilterResult::default(), Status::unresolvable(ERR_REASON_RWOP_CONFLICT));
            }
        }
        let disks: Vec<(Disk, bool)> = pod
            .volumes
            .iter()
            .filter_map(|v| match v {
                PodVolume::Disk { disk, read_only } => Some((disk.clone(), *read_only)),
                _ => None,
            })
            .collect();
        if disks.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(Disks(disks));
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(Disks(disks)) = state.read::<Disks>() else {
            return Status::error("VolumeRestrictions: no PreFilter state");
        };
        for other in &node.pods {
            for v in &other.volumes {
                let PodVolume::Disk { disk, read_only } = v else { continue };
                if disks.iter().any(|(d, ro)| conflict(d, *ro, disk, *read_only)) {
                    return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
                }
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::testing::{node, pod};
    use engine::volumes::Claim;

    #[test]
    fn disk_conflicts_follow_kube() {
        let gce = |n: &str| Disk::GcePd { pd_name: n.into() };
        let ebs = |n: &str| Disk::AwsEbs { volume_id: n.into() };
        let rbd = |m: &[&str], img: &str| Disk::Rbd {
            monitors: m.iter().map(|s| s.to_string()).collect(),
            pool: "rbd".into(),
            image: img.into(),
        };
        // (a, a read-only, b, b read-only, conflict)
        let cases = [
            (gce("d"), false, gce("d"), false, true),
            (gce("d"), true, gce("d"), true, false),
            (gce("d"), false, gce("e"), false, false),
            (ebs("v"), true, ebs("v"), true, true),
            (rbd(&["m1", "m2"], "i"), false, rbd(&["m2"], "i"), false, true),
            (rbd(&["m1"], "i"), false, rbd(&["m2"], "i"), false, false),
            (gce("d"), false, ebs("d"), false, false),
        ];
        for (i, (a, ar, b, br, want)) in cases.iter().enumerate() {
            assert_eq!(conflict(a, *ar, b, *br), *want, "case {i}");
        }
    }

    #[test]
    fn a_read_write_once_pod_claim_in_use_keeps_the_pod_out() {
        let mut cache = engine::cache::Cache::new();
        cache.upsert_node(node("n1").build());
        cache.upsert_claim(Claim {
            namespace: "default".into(),
            name: "solo".into(),
            uid: "solo".into(),
            class: String::new(),
            volume_name: Some("pv".into()),
            bound: true,
            access_modes: vec![AccessMode::ReadWriteOncePod],
            request: 0,
            selector: None,
            selected_node: None,
            terminating: false,
        });
        let uses = |name: &str| {
            pod(name).with(|p| p.volumes.push(PodVolume::Claim { claim: "solo".into(), read_only: false }))
        };
        let disk = PodVolume::Disk { disk: Disk::GcePd { pd_name: "d".into() }, read_only: false };
        let with_disk = pod("holder").node("n1").with(|p| p.volumes.push(disk.clone()));
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &uses("first").build(), &snap);
        assert!(s.is_skip(), "unused: nothing to check per node");
        cache.add_pod(uses("first").node("n1").arc()).unwrap_or_else(|e| panic!("{e}"));
        cache.add_pod(with_disk.arc()).unwrap_or_else(|e| panic!("{e}"));
        cache.update_snapshot(&mut snap);
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &uses("second").build(), &snap);
        assert_eq!(
            (s.code, s.message()),
            (engine::framework::Code::UnschedulableAndUnresolvable, ERR_REASON_RWOP_CONFLICT.to_string())
        );
        let p = pod("p").with(|p| p.volumes.push(disk)).build();
        let mut state = CycleState::new();
        VolumeRestrictions.pre_filter(&mut state, &p, &snap);
        assert_eq!(VolumeRestrictions.filter(&state, &p, &snap.view(0)).message(), ERR_REASON_DISK_CONFLICT);
    }
}
