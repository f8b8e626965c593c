//! VolumeZone: a pod whose bound volumes carry zone or region labels runs
//! only on nodes of those zones (kube-scheduler's `VolumeZone`). A label
//! value may list several zones separated by `__` (the legacy form).
//! Unbound claims are VolumeBinding's business.

use std::sync::Arc;

use engine::cache::{NodeView, Snapshot};
use engine::framework::{ClusterEvent, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};
use engine::model::Pod;
use engine::registry::ArgsError;
use engine::volumes::ZONE_LABELS;

use crate::helper::decode_no_args;
use crate::volumes::{pod_claim, volume_events};

pub const NAME: &str = "VolumeZone";

pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeZone;

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(VolumeZone))
}

/// The zone labels the pod's volumes require: (key, allowed values).
struct Required(Vec<(&'static str, Vec<String>)>);

impl Plugin for VolumeZone {
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

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> (PreFilterResult, Status) {
        let objects = snap.volumes();
        let mut required: Vec<(&'static str, Vec<String>)> = Vec::new();
        for v in &pod.volumes {
            let claim = match pod_claim(objects, pod, v) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(s) => return (PreFilterResult::default(), s),
            };
            let Some(volume) = claim.volume_name.as_deref().and_then(|n| objects.volume(n)) else { continue };
            for key in ZONE_LABELS {
                if let Some(value) = volume.labels.get(key) {
                    required.push((key, value.split("__").map(str::to_string).collect()));
                }
            }
        }
        if required.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(Required(required));
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(Required(required)) = state.read::<Required>() else {
            return Status::error("VolumeZone: no PreFilter state");
        };
        let labels = &node.node.labels;
        let fits = required.iter().all(|(key, values)| labels.get(*key).is_some_and(|v| values.iter().any(|z| z == v)));
        if fits { Status::success() } else { Status::unresolvable(ERR_REASON_CONFLICT) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::model::LABEL_ZONE;
    use engine::testing::{node, pod};
    use engine::volumes::{AccessMode, Claim, PodVolume, Volume};

    #[test]
    fn bound_volumes_keep_the_pod_in_their_zones() {
        let mut cache = engine::cache::Cache::new();
        for (n, zone) in [("a", "z1"), ("b", "z2"), ("c", "z3"), ("x", "")] {
            let mut b = node(n);
            if !zone.is_empty() {
                b = b.zone(zone);
            }
            cache.upsert_node(b.build());
        }
        let mut claim = |name: &str, zones: &str| {
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
                labels: [(LABEL_ZONE.to_string(), zones.to_string())].into(),
                csi: None,
                disk: None,
                available: true,
            });
        };
        claim("one", "z1");
        claim("two", "z1__z2");
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let with = |claims: &[&str]| {
            let mut p = pod("p");
            for c in claims {
                let c = c.to_string();
                p = p.with(|p| p.volumes.push(PodVolume::Claim { claim: c, read_only: false }));
            }
            p.build()
        };
        // (claims, nodes that fit)
        let cases: [(&[&str], &[&str]); 3] =
            [(&["two"], &["a", "b"]), (&["one", "two"], &["a"]), (&[], &["a", "b", "c", "x"])];
        for (claims, want) in cases {
            let p = with(claims);
            let mut state = CycleState::new();
            let (_, s) = VolumeZone.pre_filter(&mut state, &p, &snap);
            let mut fits: Vec<String> = (0..snap.nodes().len())
                .filter(|&i| s.is_skip() || VolumeZone.filter(&state, &p, &snap.view(i)).is_success())
                .map(|i| snap.names()[i].clone())
                .collect();
            fits.sort();
            assert_eq!(fits, want, "{claims:?}");
        }
        let p = with(&["one"]);
        let mut state = CycleState::new();
        VolumeZone.pre_filter(&mut state, &p, &snap);
        let i = snap.position("b").unwrap_or(0);
        assert_eq!(VolumeZone.filter(&state, &p, &snap.view(i)).message(), ERR_REASON_CONFLICT);
    }
}
