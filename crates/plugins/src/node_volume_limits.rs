//! NodeVolumeLimits: a node attaches at most so many volumes of each CSI
//! driver (its CSINode's `allocatable.count`); kube-scheduler's
//! `NodeVolumeLimits`. A pod's bound claims count by their volume's driver
//! and handle, unbound ones by their class's provisioner (the driver that
//! will create them); volumes already attached on the node count once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{ClusterEvent, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};
use framework::model::Pod;
use framework::registry::ArgsError;
use framework::volumes::VolumeObjects;

use crate::helper::decode_no_args;
use crate::volumes::{has_claims, volume_events};

pub const NAME: &str = "NodeVolumeLimits";

pub const ERR_REASON_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeVolumeLimits;

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(NodeVolumeLimits))
}

/// (driver, volume handle) of each CSI volume a pod uses.
fn csi_volumes(objects: &VolumeObjects, pod: &Pod) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for v in &pod.volumes {
        let Some(name) = v.claim() else { continue };
        let Some(claim) = objects.claim(&pod.namespace, name) else { continue };
        match claim.volume_name.as_deref().and_then(|pv| objects.volume(pv)) {
            Some(volume) => out.extend(volume.csi.clone()),
            None => {
                if let Some(class) = objects.class(&claim.class).filter(|c| c.provisions()) {
                    out.push((class.provisioner.clone(), format!("{}/{}", claim.namespace, claim.name)));
                }
            }
        }
    }
    out
}

/// The pod's CSI volumes and the objects to resolve the node's pods with.
struct NewVolumes {
    objects: Arc<VolumeObjects>,
    volumes: Vec<(String, String)>,
}

impl Plugin for NodeVolumeLimits {
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

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> (PreFilterResult, Status) {
        if !has_claims(pod) {
            return (PreFilterResult::default(), Status::skip());
        }
        let objects = snap.volumes_arc().clone();
        let volumes = csi_volumes(&objects, pod);
        if volumes.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(NewVolumes { objects, volumes });
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(new) = state.read::<NewVolumes>() else {
            return Status::error("NodeVolumeLimits: no PreFilter state");
        };
        let Some(csi) = new.objects.csi_node(node.name()) else { return Status::success() };
        if csi.limits.is_empty() {
            return Status::success();
        }
        let mut attached: HashMap<&str, HashSet<String>> = HashMap::new();
        for other in &node.pods {
            for (driver, handle) in csi_volumes(&new.objects, other) {
                if let Some((d, _)) = csi.limits.iter().find(|(d, _)| *d == driver) {
                    attached.entry(d.as_str()).or_default().insert(handle);
                }
            }
        }
        for (driver, handle) in &new.volumes {
            let Some((d, limit)) = csi.limits.iter().find(|(d, _)| d == driver) else { continue };
            let set = attached.entry(d.as_str()).or_default();
            set.insert(handle.clone());
            if set.len() as i64 > *limit {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::{node, pod};
    use framework::volumes::{AccessMode, Claim, CsiNode, PodVolume, Volume};

    fn claim_with_volume(cache: &mut framework::cache::Cache, name: &str, driver: &str) {
        cache.upsert_claim(Claim {
            namespace: "default".into(),
            name: name.into(),
            uid: name.into(),
            class: String::new(),
            volume_name: Some(format!("pv-{name}")),
            bound: true,
            access_modes: vec![AccessMode::ReadWriteOnce],
            request: 0,
            selector: None,
            selected_node: None,
            terminating: false,
        });
        cache.upsert_volume(Volume {
            name: format!("pv-{name}"),
            class: String::new(),
            capacity: 0,
            access_modes: vec![],
            node_affinity: None,
            claim_ref: None,
            labels: Default::default(),
            csi: Some((driver.into(), format!("handle-{name}"))),
            disk: None,
            available: true,
        });
    }

    fn using(name: &str, claims: &[&str]) -> framework::testing::PodBuilder {
        let mut p = pod(name);
        for c in claims {
            let c = c.to_string();
            p = p.with(|p| p.volumes.push(PodVolume::Claim { claim: c, read_only: false }));
        }
        p
    }

    #[test]
    fn attach_limits_count_distinct_volumes_per_driver() {
        let mut cache = framework::cache::Cache::new();
        cache.upsert_node(node("n1").build());
        cache.upsert_csi_node(CsiNode { node: "n1".into(), limits: vec![("ebs".into(), 2)] });
        for (c, d) in [("a", "ebs"), ("b", "ebs"), ("c", "ebs"), ("other", "nfs")] {
            claim_with_volume(&mut cache, c, d);
        }
        cache.add_pod(using("holder", &["a"]).node("n1").arc()).unwrap_or_else(|e| panic!("{e}"));
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        // (claims of the new pod, fits)
        let cases: [(&[&str], bool); 4] =
            [(&["b"], true), (&["b", "c"], false), (&["a", "b"], true), (&["other"], true)];
        for (claims, want) in cases {
            let p = using("p", claims).build();
            let mut state = CycleState::new();
            let (_, s) = NodeVolumeLimits.pre_filter(&mut state, &p, &snap);
            assert!(s.is_success(), "{claims:?}");
            assert_eq!(NodeVolumeLimits.filter(&state, &p, &snap.view(0)).is_success(), want, "{claims:?}");
        }
        let (_, s) = NodeVolumeLimits.pre_filter(&mut CycleState::new(), &pod("plain").build(), &snap);
        assert!(s.is_skip());
    }
}
