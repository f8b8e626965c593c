//! The profiles a scheduler runs and how a pod finds its own: by
//! schedulerName, then the first matching `podSelector` (canary profiles);
//! the pods that name one of ours but no podSelector takes, for a new
//! configuration to claim; and each profile as its `policySwitch` rule in
//! force makes it, with the changes of rule kept for the driver.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Pod, PodRef};
use crate::node_info::Load;
use crate::policy_switch::PolicySwitched;
use crate::profile::Profile;

#[derive(Debug)]
pub(super) struct Profiles {
    list: Vec<Arc<Profile>>,
    /// Profile indices by schedulerName, in configuration order.
    by_name: HashMap<String, Vec<usize>>,
    /// The `policySwitch` rule active per profile, if any.
    active: Vec<Option<usize>>,
    /// Rule changes not yet taken by the driver.
    switches: Vec<PolicySwitched>,
    /// Pending pods naming one of our schedulerNames that no profile's
    /// podSelector takes (another scheduler's canary): a reconfiguration
    /// may make them ours.
    unclaimed: HashMap<String, PodRef>,
}

impl Profiles {
    pub(super) fn new(list: Vec<Arc<Profile>>) -> Self {
        let active = vec![None; list.len()];
        Profiles { by_name: by_name(&list), list, active, switches: Vec::new(), unclaimed: HashMap::new() }
    }

    pub(super) fn list(&self) -> &[Arc<Profile>] {
        &self.list
    }

    /// Whether some profile has this schedulerName.
    pub(super) fn has_name(&self, scheduler_name: &str) -> bool {
        self.by_name.contains_key(scheduler_name)
    }

    pub(super) fn index_for(&self, pod: &Pod) -> Option<usize> {
        self.by_name
            .get(&pod.scheduler_name)?
            .iter()
            .copied()
            .find(|&i| self.list[i].pod_selector.as_ref().is_none_or(|s| s.matches(&pod.labels)))
    }

    pub(super) fn for_pod(&self, pod: &Pod) -> Option<&Arc<Profile>> {
        self.index_for(pod).map(|i| &self.list[i])
    }

    /// Keeps a pending pod no profile takes if it names one of ours.
    pub(super) fn set_aside(&mut self, pod: PodRef) {
        if self.has_name(&pod.scheduler_name) {
            self.unclaimed.insert(pod.uid.clone(), pod);
        }
    }

    /// The pod is taken by a profile, or gone.
    pub(super) fn forget(&mut self, uid: &str) {
        self.unclaimed.remove(uid);
    }

    /// Takes the pods set aside, to be offered again.
    pub(super) fn take_unclaimed(&mut self) -> Vec<PodRef> {
        self.unclaimed.drain().map(|(_, p)| p).collect()
    }

    /// Swaps in reloaded profiles; an active rule stays active if the new
    /// profile has a rule of its name.
    pub(super) fn replace(&mut self, list: Vec<Arc<Profile>>) {
        let active_names: Vec<Option<String>> = self
            .list
            .iter()
            .zip(&self.active)
            .map(|(p, a)| Some(p.policy_switch.as_ref()?.config.rules.get((*a)?)?.name.clone()))
            .collect();
        self.active = list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = active_names.get(i)?.as_ref()?;
                p.policy_switch.as_ref()?.config.rules.iter().position(|r| &r.name == name)
            })
            .collect();
        self.by_name = by_name(&list);
        self.list = list;
    }

    /// Profile `i` as its `policySwitch` rules make it under `load`; a
    /// change of the active rule is recorded for [`Self::take_switches`].
    pub(super) fn switched(&mut self, i: usize, load: &Load) -> Arc<Profile> {
        let profile = &self.list[i];
        let Some(ps) = &profile.policy_switch else { return profile.clone() };
        let before = self.active[i];
        let after = ps.config.next(before, load);
        if after != before {
            let decided_by = after.or(before).and_then(|k| ps.config.rules.get(k));
            if let Some(rule) = decided_by {
                let name = |k: Option<usize>| k.and_then(|k| ps.config.rules.get(k)).map(|r| r.name.clone());
                self.switches.push(PolicySwitched {
                    scheduler_name: profile.scheduler_name.clone(),
                    profile: i,
                    from: name(before),
                    to: name(after),
                    metric: rule.when.metric,
                    value: load.percent(rule.when.metric).unwrap_or(0.0),
                });
            }
            self.active[i] = after;
        }
        match after.and_then(|k| ps.variants.get(k)) {
            Some(variant) => variant.clone(),
            None => profile.clone(),
        }
    }

    pub(super) fn take_switches(&mut self) -> Vec<PolicySwitched> {
        std::mem::take(&mut self.switches)
    }

    /// The active rule of each profile that has rules: (schedulerName,
    /// profile index, rule name or None).
    pub(super) fn active(&self) -> Vec<(&str, usize, Option<&str>)> {
        self.list
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let ps = p.policy_switch.as_ref()?;
                let rule = self.active[i].and_then(|k| ps.config.rules.get(k)).map(|r| r.name.as_str());
                Some((p.scheduler_name.as_str(), i, rule))
            })
            .collect()
    }
}

/// Profile indices by schedulerName, in configuration order.
fn by_name(profiles: &[Arc<Profile>]) -> HashMap<String, Vec<usize>> {
    let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, p) in profiles.iter().enumerate() {
        by_name.entry(p.scheduler_name.clone()).or_default().push(i);
    }
    by_name
}
