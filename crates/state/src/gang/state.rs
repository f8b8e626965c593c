//! What the scheduler knows of each gang besides its placed members (those
//! the cache counts): the PodGroup spec, the members waiting in the queue,
//! since when the gang has waited, and the status last reported.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::{GangStatus, PodGroup};
use crate::time::Millis;

#[derive(Debug, Default)]
struct Group {
    spec: Option<Arc<PodGroup>>,
    /// Members in the scheduling queue, by uid (ordered, for a stable
    /// member order in gang cycles).
    pending: BTreeSet<String>,
    /// When a member was first seen pending while the gang was short of
    /// minMember placed; the timeout counts from here.
    waiting_since: Option<Millis>,
    /// The first gang cycle (`status.scheduleStartTime`).
    schedule_start: Option<Millis>,
    /// After a timeout, no member is tried before this time.
    backoff_until: Option<Millis>,
    /// The status last handed out for writing, to write only changes.
    reported: Option<GangStatus>,
    /// Something that the status depends on changed since it was reported.
    dirty: bool,
}

/// The gangs, by `NAMESPACE/NAME`.
#[derive(Debug, Default)]
pub struct Gangs {
    groups: HashMap<String, Group>,
    /// The gang of each member in the queue, by uid.
    member_of: HashMap<String, String>,
}

/// A gang at the start of a cycle.
#[derive(Debug, Clone)]
pub struct GangView {
    pub key: String,
    pub spec: Option<Arc<PodGroup>>,
    /// Members bound or assumed.
    pub placed: u32,
    /// Members in the queue (the one being scheduled included).
    pub pending: Vec<String>,
    pub waiting_since: Option<Millis>,
    /// Set while the gang is backed off after a timeout.
    pub backoff_until: Option<Millis>,
}

impl GangView {
    /// Members still to place before the gang reaches minMember (0 when
    /// it has: later members join like ordinary pods).
    pub fn needed(&self) -> u32 {
        self.spec.as_ref().map_or(0, |s| s.min_member.saturating_sub(self.placed))
    }

    /// Members that exist: placed and pending.
    pub fn members(&self) -> u32 {
        self.placed + u32::try_from(self.pending.len()).unwrap_or(u32::MAX)
    }
}

impl Gangs {
    fn group(&mut self, key: &str) -> &mut Group {
        self.groups.entry(key.to_string()).or_default()
    }

    /// Drops a group nobody refers to any more.
    fn prune(&mut self, key: &str) {
        if self.groups.get(key).is_some_and(|g| g.spec.is_none() && g.pending.is_empty()) {
            self.groups.remove(key);
        }
    }

    /// A PodGroup was added or changed; returns whether its spec changed.
    pub fn upsert(&mut self, group: PodGroup) -> bool {
        let g = self.group(&group.key());
        let changed = g.spec.as_deref() != Some(&group);
        g.spec = Some(Arc::new(group));
        g.dirty = true;
        changed
    }

    /// A PodGroup was deleted: its members wait for it to come back, as
    /// members of an unknown group do.
    pub fn remove(&mut self, key: &str) {
        if let Some(g) = self.groups.get_mut(key) {
            g.spec = None;
            g.reported = None;
        }
        self.prune(key);
    }

    pub fn spec(&self, key: &str) -> Option<&Arc<PodGroup>> {
        self.groups.get(key).and_then(|g| g.spec.as_ref())
    }

    /// Every known PodGroup.
    pub fn specs(&self) -> impl Iterator<Item = &Arc<PodGroup>> {
        self.groups.values().filter_map(|g| g.spec.as_ref())
    }

    /// A member entered the queue. `placed` is how many members the cache
    /// holds: the wait for members counts only while the gang is short.
    pub fn add_pending(&mut self, key: &str, uid: &str, placed: u32, now: Millis) {
        let g = self.group(key);
        g.pending.insert(uid.to_string());
        let short = g.spec.as_ref().is_none_or(|s| placed < s.min_member);
        if short && g.waiting_since.is_none() {
            g.waiting_since = Some(now);
        }
        self.member_of.insert(uid.to_string(), key.to_string());
    }

    /// Pod `uid` left the queue: if it was a gang's member, the gang no
    /// longer counts it. Every pod passes here; the map is checked for
    /// emptiness before the uid is hashed.
    pub fn left_queue(&mut self, uid: &str) {
        if !self.member_of.is_empty()
            && let Some(key) = self.member_of.remove(uid)
        {
            self.remove_pending(&key, uid);
        }
    }

    /// A member left the queue (placed, deleted, or bound elsewhere).
    pub fn remove_pending(&mut self, key: &str, uid: &str) {
        if let Some(g) = self.groups.get_mut(key) {
            g.pending.remove(uid);
            g.dirty = true;
        }
        self.prune(key);
    }

    /// The gang reached minMember: its wait is over.
    pub fn placed(&mut self, key: &str) {
        if let Some(g) = self.groups.get_mut(key) {
            g.waiting_since = None;
            g.dirty = true;
        }
    }

    /// A gang cycle ran (the first sets `scheduleStartTime`).
    pub fn attempted(&mut self, key: &str, now: Millis) {
        let g = self.group(key);
        g.schedule_start.get_or_insert(now);
        g.dirty = true;
    }

    /// The status of a placed or removed member may have changed.
    pub fn touch(&mut self, key: &str) {
        if let Some(g) = self.groups.get_mut(key) {
            g.dirty = true;
        }
    }

    /// The gang as a cycle sees it; `placed` comes from the cache.
    pub fn view(&self, key: &str, placed: u32) -> GangView {
        let g = self.groups.get(key);
        GangView {
            key: key.to_string(),
            spec: g.and_then(|g| g.spec.clone()),
            placed,
            pending: g.map(|g| g.pending.iter().cloned().collect()).unwrap_or_default(),
            waiting_since: g.and_then(|g| g.waiting_since),
            backoff_until: g.and_then(|g| g.backoff_until),
        }
    }

    /// The gang timed out waiting: no member is tried before `until`,
    /// when a new wait starts.
    pub fn back_off(&mut self, key: &str, until: Millis) {
        if let Some(g) = self.groups.get_mut(key) {
            g.backoff_until = Some(until);
            g.waiting_since = Some(until);
            g.dirty = true;
        }
    }

    /// The statuses that changed since last taken, for the driver to
    /// write; `counts(key)` gives (placed, running) from the cache.
    pub fn take_statuses(&mut self, counts: impl Fn(&str) -> (u32, u32)) -> Vec<(Arc<PodGroup>, GangStatus)> {
        let mut out = Vec::new();
        for (key, g) in &mut self.groups {
            if !std::mem::take(&mut g.dirty) {
                continue;
            }
            let Some(spec) = &g.spec else { continue };
            let (placed, running) = counts(key);
            let status = GangStatus::of(spec, placed, running, g.schedule_start);
            if g.reported.as_ref() != Some(&status) {
                g.reported = Some(status.clone());
                out.push((spec.clone(), status));
            }
        }
        out.sort_by_key(|(g, _)| g.key());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gang::GangPhase;
    use crate::resources::Resources;

    fn group(min: u32) -> PodGroup {
        PodGroup {
            namespace: "ml".into(),
            name: "g".into(),
            min_member: min,
            min_resources: Resources::default(),
            schedule_timeout: None,
            topology_key: None,
        }
    }

    #[test]
    fn members_wait_counts_and_statuses() {
        let mut gangs = Gangs::default();
        gangs.add_pending("ml/g", "a", 0, 10);
        let v = gangs.view("ml/g", 0);
        assert!(v.spec.is_none(), "members may come before their group");
        assert_eq!((v.pending.len(), v.waiting_since), (1, Some(10)));

        assert!(gangs.upsert(group(3)));
        assert!(!gangs.upsert(group(3)), "the same spec is no change");
        gangs.add_pending("ml/g", "b", 0, 20);
        let v = gangs.view("ml/g", 1);
        assert_eq!((v.needed(), v.members(), v.waiting_since), (2, 3, Some(10)));

        let first = gangs.take_statuses(|_| (0, 0));
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].1.phase, GangPhase::Pending);
        gangs.touch("ml/g");
        assert!(gangs.take_statuses(|_| (0, 0)).is_empty(), "unchanged status is not written again");

        gangs.remove_pending("ml/g", "a");
        gangs.remove_pending("ml/g", "b");
        gangs.placed("ml/g");
        let next = gangs.take_statuses(|_| (3, 0));
        assert_eq!(next[0].1.phase, GangPhase::Scheduled);
        assert_eq!(gangs.view("ml/g", 3).waiting_since, None);

        gangs.remove("ml/g");
        assert!(gangs.groups.is_empty(), "a deleted group without members is forgotten");
    }
}
