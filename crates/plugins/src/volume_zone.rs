//! VolumeZone: a pod whose bound volumes carry zone or region labels runs
//! only on nodes of those zones (kube-scheduler's `VolumeZone`). A label
//! value may list several zones separated by `__` (the legacy form). A
//! node with no zone or region label at all fits (kube's single-zone
//! cluster case), and a volume's beta label is matched against a node's
//! GA label when the node lacks the beta one. Unbound claims are
//! VolumeBinding's business.

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{ClusterEvent, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Status};
use framework::model::Pod;
use framework::registry::ArgsError;
use framework::volumes::ZONE_LABELS;

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
        // A node without topology labels: a single-zone cluster, as kube
        // reads it (conformance case volume-zone-node-without-zone).
        if !ZONE_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Status::success();
        }
        let fits = required.iter().all(|(key, values)| {
            labels.get(*key).or_else(|| labels.get(ga_label(key))).is_some_and(|v| values.iter().any(|z| z == v))
        });
        if fits { Status::success() } else { Status::unresolvable(ERR_REASON_CONFLICT) }
    }
}

/// The GA form of a beta zone or region label (other keys as they are).
fn ga_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => framework::model::LABEL_ZONE,
        "failure-domain.beta.kubernetes.io/region" => framework::model::LABEL_REGION,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::model::LABEL_ZONE;
    use framework::testing::{node, pod};
    use framework::volumes::{AccessMode, Claim, PodVolume, Volume};

    #[test]
    fn bound_volumes_keep_the_pod_in_their_zones() {
        let mut cache = framework::cache::Cache::new();
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
        // (claims, nodes that fit); x has no zone label: it fits, as in
        // kube (a single-zone cluster's nodes may have none).
        let cases: [(&[&str], &[&str]); 3] =
            [(&["two"], &["a", "b", "x"]), (&["one", "two"], &["a", "x"]), (&[], &["a", "b", "c", "x"])];
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

    /// A volume's beta zone label matches a node's GA one (kube's
    /// translateToGALabel).
    #[test]
    fn a_beta_zone_label_matches_the_ga_one() {
        let mut cache = framework::cache::Cache::new();
        for (n, zone) in [("a", "z1"), ("b", "z2")] {
            cache.upsert_node(node(n).zone(zone).build());
        }
        cache.upsert_claim(Claim {
            namespace: "default".into(),
            name: "c".into(),
            uid: "c".into(),
            class: String::new(),
            volume_name: Some("pv".into()),
            bound: true,
            access_modes: vec![AccessMode::ReadWriteOnce],
            request: 0,
            selector: None,
            selected_node: None,
            terminating: false,
        });
        cache.upsert_volume(Volume {
            name: "pv".into(),
            class: String::new(),
            capacity: 0,
            access_modes: vec![],
            node_affinity: None,
            claim_ref: None,
            labels: [("failure-domain.beta.kubernetes.io/zone".to_string(), "z1".to_string())].into(),
            csi: None,
            disk: None,
            available: true,
        });
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let p = pod("p").with(|p| p.volumes.push(PodVolume::Claim { claim: "c".into(), read_only: false })).build();
        let mut state = CycleState::new();
        VolumeZone.pre_filter(&mut state, &p, &snap);
        let fits: Vec<bool> = ["a", "b"]
            .iter()
            .map(|n| VolumeZone.filter(&state, &p, &snap.view(snap.position(n).unwrap_or(0))).is_success())
            .collect();
        assert_eq!(fits, [true, false]);
    }
}
