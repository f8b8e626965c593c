//! VolumeRestrictions (kube-scheduler's): a claim with the
//! `ReadWriteOncePod` access mode used by another pod keeps the pod off
//! every node (Filter, Unschedulable: preemption may free the claim on
//! the node of the pod using it), and an inline disk (GCE PD, AWS EBS,
//! RBD, iSCSI) mounted by a pod on the node conflicts unless both are
//! read-only (AWS EBS: always).

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{ClusterEvent, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};
use framework::model::Pod;
use framework::registry::ArgsError;
use framework::volumes::{AccessMode, Disk, PodVolume};

use crate::helper::decode_no_args;
use crate::volumes::{pod_claim, volume_events};

pub const NAME: &str = "VolumeRestrictions";

pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_REASON_RWOP_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeRestrictions;

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(VolumeRestrictions))
}

/// What Filter checks: the pod's inline disks, and its ReadWriteOncePod
/// claims that other pods use with the nodes of those pods.
struct State {
    disks: Vec<(Disk, bool)>,
    /// (claim, node of a pod using it)
    rwop_in_use: Vec<(String, String)>,
}

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
        let mut rwop_in_use = Vec::new();
        // Every node's pods are looked at only for a pod with such a claim.
        for n in snap.nodes().iter().filter(|_| !rwop.is_empty()) {
            for other in n.pods.iter().filter(|o| o.uid != pod.uid && o.namespace == pod.namespace) {
                for c in other.volumes.iter().filter_map(PodVolume::claim).filter(|c| rwop.contains(c)) {
                    rwop_in_use.push((c.to_string(), n.name().to_string()));
                }
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
        if disks.is_empty() && rwop_in_use.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(State { disks, rwop_in_use });
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(State { disks, rwop_in_use }) = state.read::<State>() else {
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
        // kube counts the claims in use in PreFilter and takes a victim's
        // claims off the count: a claim stays in use unless its users were
        // all on this node and are gone from it (evicted in thought).
        let in_use = rwop_in_use.iter().any(|(claim, user_node)| {
            user_node != node.name()
                || node.pods.iter().any(|p| {
                    p.namespace == pod.namespace && p.volumes.iter().any(|v| v.claim() == Some(claim.as_str()))
                })
        });
        if in_use {
            return Status::unschedulable(ERR_REASON_RWOP_CONFLICT);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::{node, pod};
    use framework::volumes::Claim;

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

    /// kube 1.36: the claim in use fails every node in Filter (not
    /// PreFilter) as Unschedulable, so preemption can free it, but only on
    /// the node of the pod using it (conformance seed 57).
    #[test]
    fn a_read_write_once_pod_claim_in_use_fails_every_node_but_a_victims_own() {
        let mut cache = framework::cache::Cache::new();
        for n in ["n1", "n2"] {
            cache.upsert_node(node(n).build());
        }
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
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &uses("first").build(), &snap);
        assert!(s.is_skip(), "unused: nothing to check per node");
        cache.add_pod(uses("first").node("n1").arc()).unwrap_or_else(|e| panic!("{e}"));
        cache.update_snapshot(&mut snap);
        let second = uses("second").build();
        let mut state = CycleState::new();
        let (_, s) = VolumeRestrictions.pre_filter(&mut state, &second, &snap);
        assert!(s.is_success(), "{s:?}");
        let n1 = snap.nodes().iter().position(|n| n.name() == "n1").unwrap_or_default();
        let n2 = 1 - n1;
        let mut n1_without_user = (*snap.nodes()[n1]).clone();
        n1_without_user.remove_pod(&uses("first").build().uid);
        let without = n1_without_user.view();
        // (node, fits)
        let cases = [(snap.view(n1), false), (snap.view(n2), false), (without, true)];
        for (i, (view, fits)) in cases.iter().enumerate() {
            let s = VolumeRestrictions.filter(&state, &second, view);
            if *fits {
                assert!(s.is_success(), "case {i}: {s:?}");
            } else {
                assert_eq!(
                    (s.code, s.message()),
                    (framework::framework::Code::Unschedulable, ERR_REASON_RWOP_CONFLICT.to_string()),
                    "case {i}"
                );
            }
        }
    }

    #[test]
    fn an_inline_disk_in_use_conflicts() {
        let mut cache = framework::cache::Cache::new();
        cache.upsert_node(node("n1").build());
        let disk = PodVolume::Disk { disk: Disk::GcePd { pd_name: "d".into() }, read_only: false };
        let with_disk = pod("holder").node("n1").with(|p| p.volumes.push(disk.clone()));
        cache.add_pod(with_disk.arc()).unwrap_or_else(|e| panic!("{e}"));
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let p = pod("p").with(|p| p.volumes.push(disk)).build();
        let mut state = CycleState::new();
        VolumeRestrictions.pre_filter(&mut state, &p, &snap);
        assert_eq!(VolumeRestrictions.filter(&state, &p, &snap.view(0)).message(), ERR_REASON_DISK_CONFLICT);
    }
}
