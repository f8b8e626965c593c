//! The volume objects the cache holds, with the bindings decisions have
//! assumed on top of them (kube's assume cache): a claim a decision bound
//! to a volume looks bound to the next decisions, so two pods never take
//! one volume, until the PV controller's own update arrives.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Claim, ClaimRef, CsiNode, PodVolumeBindings, StorageClass, Volume};

/// What an assumption changed, to undo it.
#[derive(Debug, Clone, PartialEq)]
pub struct AssumedBinding {
    pub bindings: PodVolumeBindings,
    /// The objects as they were before, by key.
    claims_before: Vec<(String, Arc<Claim>)>,
    volumes_before: Vec<(String, Arc<Volume>)>,
    /// The objects as assumed, to tell whether the API replaced them since.
    claims_after: Vec<(String, Arc<Claim>)>,
    volumes_after: Vec<(String, Arc<Volume>)>,
}

/// Claims, volumes, classes and CSINodes.
#[derive(Debug, Clone, Default)]
pub struct VolumeObjects {
    claims: HashMap<String, Arc<Claim>>,
    volumes: HashMap<String, Arc<Volume>>,
    classes: HashMap<String, Arc<StorageClass>>,
    csi_nodes: HashMap<String, Arc<CsiNode>>,
    /// Bindings of decisions not yet confirmed, by pod uid.
    assumed: HashMap<String, AssumedBinding>,
}

impl VolumeObjects {
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<Claim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    pub fn volume(&self, name: &str) -> Option<&Arc<Volume>> {
        self.volumes.get(name)
    }

    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    pub fn csi_node(&self, node: &str) -> Option<&Arc<CsiNode>> {
        self.csi_nodes.get(node)
    }

    /// Every volume, in no particular order.
    pub fn volumes(&self) -> impl Iterator<Item = &Arc<Volume>> {
        self.volumes.values()
    }

    /// Every claim, in no particular order.
    pub fn claims(&self) -> impl Iterator<Item = &Arc<Claim>> {
        self.claims.values()
    }

    pub fn upsert_claim(&mut self, claim: Claim) {
        self.claims.insert(claim.key(), Arc::new(claim));
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) {
        self.claims.remove(&format!("{namespace}/{name}"));
    }

    pub fn upsert_volume(&mut self, volume: Volume) {
        self.volumes.insert(volume.name.clone(), Arc::new(volume));
    }

    pub fn remove_volume(&mut self, name: &str) {
        self.volumes.remove(name);
    }

    pub fn upsert_class(&mut self, class: StorageClass) {
        self.classes.insert(class.name.clone(), Arc::new(class));
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn upsert_csi_node(&mut self, csi: CsiNode) {
        self.csi_nodes.insert(csi.node.clone(), Arc::new(csi));
    }

    pub fn remove_csi_node(&mut self, node: &str) {
        self.csi_nodes.remove(node);
    }

    /// Applies a decision's bindings: each static volume claimed by its
    /// claim (and the claim pointing at it), each claim to provision
    /// marked with the node. Missing objects are left out.
    pub fn assume(&mut self, pod_uid: &str, bindings: &PodVolumeBindings) {
        let mut a = AssumedBinding {
            bindings: bindings.clone(),
            claims_before: Vec::new(),
            volumes_before: Vec::new(),
            claims_after: Vec::new(),
            volumes_after: Vec::new(),
        };
        for (claim_key, volume_name) in &bindings.static_bindings {
            let (Some(claim), Some(volume)) = (self.claims.get(claim_key), self.volumes.get(volume_name)) else {
                continue;
            };
            let mut v = (**volume).clone();
            v.claim_ref =
                Some(ClaimRef { namespace: claim.namespace.clone(), name: claim.name.clone(), uid: claim.uid.clone() });
            let mut c = (**claim).clone();
            c.volume_name = Some(volume_name.clone());
            a.claims_before.push((claim_key.clone(), claim.clone()));
            a.volumes_before.push((volume_name.clone(), volume.clone()));
            let (c, v) = (Arc::new(c), Arc::new(v));
            a.claims_after.push((claim_key.clone(), c.clone()));
            a.volumes_after.push((volume_name.clone(), v.clone()));
            self.claims.insert(claim_key.clone(), c);
            self.volumes.insert(volume_name.clone(), v);
        }
        for claim_key in &bindings.provisionings {
            let Some(claim) = self.claims.get(claim_key) else { continue };
            let mut c = (**claim).clone();
            c.selected_node = Some(bindings.node.clone());
            a.claims_before.push((claim_key.clone(), claim.clone()));
            let c = Arc::new(c);
            a.claims_after.push((claim_key.clone(), c.clone()));
            self.claims.insert(claim_key.clone(), c);
        }
        self.assumed.insert(pod_uid.to_string(), a);
    }

    /// Undoes a decision's bindings (its binding failed). Objects the API
    /// replaced since are the API's and stay.
    pub fn forget(&mut self, pod_uid: &str) {
        let Some(a) = self.assumed.remove(pod_uid) else { return };
        for ((key, before), (_, after)) in a.claims_before.into_iter().zip(a.claims_after) {
            if self.claims.get(&key).is_some_and(|now| Arc::ptr_eq(now, &after)) {
                self.claims.insert(key, before);
            }
        }
        for ((key, before), (_, after)) in a.volumes_before.into_iter().zip(a.volumes_after) {
            if self.volumes.get(&key).is_some_and(|now| Arc::ptr_eq(now, &after)) {
                self.volumes.insert(key, before);
            }
        }
    }

    /// The decision's bindings were written: they stand until the API's
    /// own versions of the objects replace them.
    pub fn confirm(&mut self, pod_uid: &str) {
        self.assumed.remove(pod_uid);
    }

    /// The bindings assumed for a pod, if any.
    pub fn assumed(&self, pod_uid: &str) -> Option<&AssumedBinding> {
        self.assumed.get(pod_uid)
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.volumes.is_empty() && self.csi_nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volumes::AccessMode;

    fn claim(name: &str) -> Claim {
        Claim {
            namespace: "ml".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            class: "local".into(),
            volume_name: None,
            bound: false,
            access_modes: vec![AccessMode::ReadWriteOnce],
            request: 1 << 30,
            selector: None,
            selected_node: None,
            terminating: false,
        }
    }

    fn volume(name: &str) -> Volume {
        Volume {
            name: name.into(),
            class: "local".into(),
            capacity: 10 << 30,
            access_modes: vec![AccessMode::ReadWriteOnce],
            node_affinity: None,
            claim_ref: None,
            labels: Default::default(),
            csi: None,
            disk: None,
            available: true,
        }
    }

    #[test]
    fn assumed_bindings_show_until_forgotten_or_replaced() {
        let mut o = VolumeObjects::default();
        o.upsert_claim(claim("data"));
        o.upsert_claim(claim("scratch"));
        o.upsert_volume(volume("pv1"));
        let b = PodVolumeBindings {
            static_bindings: vec![("ml/data".into(), "pv1".into())],
            provisionings: vec!["ml/scratch".into()],
            node: "n1".into(),
        };
        o.assume("pod", &b);
        assert_eq!(o.claim("ml", "data").and_then(|c| c.volume_name.clone()).as_deref(), Some("pv1"));
        assert_eq!(o.volume("pv1").and_then(|v| v.claim_ref.clone()).map(|r| r.name).as_deref(), Some("data"));
        assert_eq!(o.claim("ml", "scratch").and_then(|c| c.selected_node.clone()).as_deref(), Some("n1"));
        o.forget("pod");
        assert_eq!(o.claim("ml", "data").and_then(|c| c.volume_name.clone()), None);
        assert!(o.volume("pv1").is_some_and(|v| v.claim_ref.is_none()));

        // The API's update wins over what forgetting would restore.
        o.assume("pod", &b);
        let mut bound = claim("data");
        bound.volume_name = Some("pv1".into());
        bound.bound = true;
        o.upsert_claim(bound);
        o.forget("pod");
        assert!(o.claim("ml", "data").is_some_and(|c| c.bound));
        assert!(o.volume("pv1").is_some_and(|v| v.claim_ref.is_none()), "the volume was still ours to restore");
        o.assume("pod2", &b);
        o.confirm("pod2");
        assert!(o.assumed("pod2").is_none());
        assert!(o.claim("ml", "scratch").is_some_and(|c| c.selected_node.as_deref() == Some("n1")));
    }
}
