//! The nominator, as kube-scheduler's: pending pods nominated to a node (by
//! a preemption here, or as the API says), which every later cycle leaves
//! room for there, and the preemption that nominated each, kept for the
//! explanation of the decision that finally places the pod.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::explain::PreemptionRecord;
use crate::framework::Nominated;
use crate::model::PodRef;

#[derive(Debug, Default)]
pub(super) struct Nominator {
    /// Nominated pods by uid: the node and the pod.
    nominations: HashMap<String, (String, PodRef)>,
    preemptions: HashMap<String, PreemptionRecord>,
}

impl Nominator {
    /// Records the pod's nomination (or its absence).
    pub(super) fn record(&mut self, pod: &PodRef) {
        match &pod.nominated_node_name {
            Some(node) => {
                self.nominations.insert(pod.uid.clone(), (node.clone(), pod.clone()));
            }
            None if !self.nominations.is_empty() => {
                self.nominations.remove(&pod.uid);
            }
            None => {}
        }
    }

    /// The pod left the queue: no longer nominated.
    pub(super) fn forget(&mut self, uid: &str) {
        if !self.nominations.is_empty() {
            self.nominations.remove(uid);
            self.preemptions.remove(uid);
        }
    }

    /// The nominations by snapshot position, for a cycle (None when there
    /// are none, the usual case).
    pub(super) fn for_cycle(&self, snapshot: &Snapshot) -> Option<Arc<Nominated>> {
        if self.nominations.is_empty() {
            return None;
        }
        let mut by_position: HashMap<usize, Vec<PodRef>> = HashMap::new();
        for (node, pod) in self.nominations.values() {
            if let Some(i) = snapshot.position(node) {
                by_position.entry(i).or_default().push(pod.clone());
            }
        }
        Some(Arc::new(Nominated::new(by_position)))
    }

    pub(super) fn pods(&self) -> impl Iterator<Item = (&str, &PodRef)> {
        self.nominations.values().map(|(n, p)| (n.as_str(), p))
    }

    pub(super) fn record_preemption(&mut self, uid: &str, record: PreemptionRecord) {
        self.preemptions.insert(uid.to_string(), record);
    }

    /// The preemption that nominated pod `uid`, if one did.
    pub(super) fn preemption(&self, uid: &str) -> Option<&PreemptionRecord> {
        if self.preemptions.is_empty() { None } else { self.preemptions.get(uid) }
    }
}
