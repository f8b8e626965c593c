//! The selectors of the objects that own or serve pods — Services,
//! ReplicaSets, StatefulSets, ReplicationControllers — as kube-scheduler's
//! `DefaultSelector` reads them: a pod's default spreading selector is the
//! union of the label selectors of the Services that select it, ANDed with
//! its controller's selector. Only selectors are kept.

use std::collections::HashMap;

use crate::model::{LabelSelector, Labels, Pod, Requirement, SelectorOp};

/// Kinds of controllers whose selector counts.
pub const CONTROLLER_KINDS: [&str; 3] = ["ReplicaSet", "StatefulSet", "ReplicationController"];

/// Services' and controllers' selectors.
#[derive(Debug, Clone, Default)]
pub struct WorkloadSelectors {
    /// Per namespace: (Service name, its selector map).
    services: HashMap<String, Vec<(String, Labels)>>,
    /// `KIND/NAMESPACE/NAME` → the controller's selector.
    controllers: HashMap<String, LabelSelector>,
}

impl WorkloadSelectors {
    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.controllers.is_empty()
    }

    /// A Service's selector (an empty one selects no pod, as in kube).
    pub fn upsert_service(&mut self, namespace: &str, name: &str, selector: Labels) {
        let list = self.services.entry(namespace.to_string()).or_default();
        list.retain(|(n, _)| n != name);
        list.push((name.to_string(), selector));
        list.sort();
    }

    pub fn remove_service(&mut self, namespace: &str, name: &str) {
        if let Some(list) = self.services.get_mut(namespace) {
            list.retain(|(n, _)| n != name);
            if list.is_empty() {
                self.services.remove(namespace);
            }
        }
    }

    pub fn upsert_controller(&mut self, kind: &str, namespace: &str, name: &str, selector: LabelSelector) {
        self.controllers.insert(format!("{kind}/{namespace}/{name}"), selector);
    }

    pub fn remove_controller(&mut self, kind: &str, namespace: &str, name: &str) {
        self.controllers.remove(&format!("{kind}/{namespace}/{name}"));
    }

    /// kube's `DefaultSelector` for `pod`: the selectors of the Services
    /// selecting it merged, and its controller's (the one it names, or the
    /// one a manifest's workload gave it) added; None when both are empty.
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let mut merged: Labels = Labels::new();
        for (_, sel) in self.services.get(&pod.namespace).into_iter().flatten() {
            if !sel.is_empty() && sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
                merged.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut requirements: Vec<Requirement> = merged
            .into_iter()
            .map(|(key, value)| Requirement { key, op: SelectorOp::In, values: vec![value] })
            .collect();
        let owner = pod.owner_selector.clone().or_else(|| {
            let (kind, name) = pod.owner.as_ref()?;
            self.controllers.get(&format!("{kind}/{}/{name}", pod.namespace)).cloned()
        });
        if let Some(owner) = owner {
            if owner.matches_nothing {
                return Some(owner);
            }
            requirements.extend(owner.requirements);
        }
        if requirements.is_empty() { None } else { Some(LabelSelector { requirements, matches_nothing: false }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    #[test]
    fn services_and_the_controller_make_the_default_selector() {
        let mut w = WorkloadSelectors::default();
        w.upsert_service("shop", "web", [("app".to_string(), "web".to_string())].into());
        w.upsert_service("shop", "all", Labels::new());
        w.upsert_service("shop", "api", [("app".to_string(), "api".to_string())].into());
        w.upsert_controller(
            "ReplicaSet",
            "shop",
            "web-abc",
            LabelSelector::from_match_labels([("pod-template-hash", "abc")]),
        );
        let web = pod("w").namespace("shop").label("app", "web").label("pod-template-hash", "abc");
        let owned = web.with(|p| p.owner = Some(("ReplicaSet".into(), "web-abc".into()))).build();
        let sel = w.default_selector(&owned).unwrap_or_default();
        let keys: Vec<&str> = sel.requirements.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["app", "pod-template-hash"], "the service's labels, then the owner's");
        // No service selects it and no owner: no default spreading.
        assert_eq!(w.default_selector(&pod("lone").namespace("shop").label("app", "batch").build()), None);
        w.remove_service("shop", "web");
        let sel = w.default_selector(&owned).unwrap_or_default();
        assert_eq!(sel.requirements.len(), 1);
    }
}
