//! The scheduling queue, as kube-scheduler's: an active heap ordered by the
//! QueueSort plugin, a backoff heap (1 s doubling to 10 s by default), and
//! an unschedulable pool that cluster events drain selectively (only for
//! pods rejected by a plugin interested in the event) and that is flushed
//! after 5 minutes (checked every 30 s). Time is passed in (milliseconds on
//! the caller's clock); the queue reads no clock.
//!
//! An unschedulable pod may carry a time at which its rejection lapses by
//! itself (`Status::retry_at`, e.g. NodeHealth's alert ageing out; the
//! earliest over the nodes): it is tried again then
//! ([`SchedulingQueue::add_unschedulable_until`]).
//! [`SchedulingQueue::next_backoff_expiry`] (backoffs and those timed
//! retries) lets a simulated clock jump ahead and tells `run` when to wake.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use crate::framework::{ClusterEvent, Plugin};
use crate::model::PodRef;
use crate::time::{MINUTE, Millis};

/// How long a pod may stay unschedulable before it is retried anyway.
pub const UNSCHEDULABLE_FLUSH_MS: Millis = 5 * MINUTE;

/// A pod waiting to be scheduled, with its queue bookkeeping.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub pod: PodRef,
    /// Arrival order, for FIFO among equal priorities.
    pub seq: u64,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When it was first added (for the scheduling latency SLI).
    pub first_seen: Millis,
    /// When it entered its current sub-queue (or last failed).
    pub timestamp: Millis,
    /// Plugins that rejected it in the last attempt; events those plugins
    /// registered move it back. Empty means any event (or an error).
    pub unschedulable_plugins: HashSet<&'static str>,
    /// Not retried before this time, whatever its attempts say (a gang
    /// backed off for its timeout).
    pub not_before: Millis,
    /// While unschedulable: retried at this time even without an event
    /// (a filter said when its verdict lapses, e.g. an alert ageing out).
    pub wake_at: Option<Millis>,
    /// The scheduling cycle of its last pop.
    cycle: u64,
}

struct Active {
    qp: QueuedPod,
    sorter: Arc<dyn Plugin>,
}

impl PartialEq for Active {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Active {}
impl PartialOrd for Active {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Active {
    // BinaryHeap pops the greatest: "greater" means "scheduled first".
    fn cmp(&self, other: &Self) -> Ordering {
        let Some(sort) = self.sorter.as_queue_sort() else {
            return other.qp.seq.cmp(&self.qp.seq);
        };
        if sort.less(&self.qp.pod, self.qp.seq, &other.qp.pod, other.qp.seq) {
            Ordering::Greater
        } else if sort.less(&other.qp.pod, other.qp.seq, &self.qp.pod, self.qp.seq) {
            Ordering::Less
        } else {
            other.qp.seq.cmp(&self.qp.seq)
        }
    }
}

/// Where a pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active,
    Backoff,
    Unschedulable,
    InFlight,
}

/// Counts per sub-queue, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLengths {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub in_flight: usize,
}

pub struct SchedulingQueue {
    sorter: Arc<dyn Plugin>,
    initial_backoff: Millis,
    max_backoff: Millis,
    active: BinaryHeap<Active>,
    /// (expiry, seq, uid); stale entries (pod moved or gone) are skipped.
    backoff: BinaryHeap<Reverse<(Millis, u64, String)>>,
    /// Every pod known to the queue that is not in the active heap's
    /// entries: backoff, unschedulable and in-flight pods.
    parked: HashMap<String, QueuedPod>,
    place: HashMap<String, Place>,
    /// The uids whose place is Unschedulable: events scan only these.
    unschedulable: HashSet<String>,
    seq: u64,
    cycle: u64,
    /// The cycle in which the last move request (cluster event) happened:
    /// a pod that failed in a cycle started before it retries with backoff
    /// instead of waiting for another event.
    move_request_cycle: u64,
    /// Last time the unschedulable pool was scanned for stale pods.
    last_leftover_scan: Millis,
    /// (wake_at, seq, uid) of unschedulable pods with a timed retry; stale
    /// entries are skipped as in `backoff`.
    wakeups: BinaryHeap<Reverse<(Millis, u64, String)>>,
    /// Pods a PreEnqueue plugin held back (scheduling gates), outside the
    /// queue until they change or the configuration does.
    gated: HashMap<String, PodRef>,
}

/// How often the unschedulable pool is scanned for pods past the flush interval.
const LEFTOVER_SCAN_MS: Millis = 30_000;

impl SchedulingQueue {
    pub fn new(sorter: Arc<dyn Plugin>, initial_backoff: Millis, max_backoff: Millis) -> Self {
        SchedulingQueue {
            sorter,
            initial_backoff,
            max_backoff,
            active: BinaryHeap::new(),
            backoff: BinaryHeap::new(),
            parked: HashMap::new(),
            place: HashMap::new(),
            unschedulable: HashSet::new(),
            seq: 0,
            cycle: 0,
            move_request_cycle: 0,
            last_leftover_scan: 0,
            wakeups: BinaryHeap::new(),
            gated: HashMap::new(),
        }
    }

    /// Records where a pod is (None: gone), keeping the unschedulable index.
    fn set_place(&mut self, uid: &str, place: Option<Place>) {
        let old = match place {
            Some(p) => self.place.insert(uid.to_string(), p),
            None => self.place.remove(uid),
        };
        match (old == Some(Place::Unschedulable), place == Some(Place::Unschedulable)) {
            (false, true) => {
                self.unschedulable.insert(uid.to_string());
            }
            (true, false) => {
                self.unschedulable.remove(uid);
            }
            _ => {}
        }
    }

    /// New backoff bounds (a reloaded configuration); pods already backing
    /// off keep their expiry.
    pub fn set_backoff(&mut self, initial: Millis, max: Millis) {
        self.initial_backoff = initial;
        self.max_backoff = max;
    }

    pub fn lengths(&self) -> QueueLengths {
        let mut l = QueueLengths { active: self.active.len(), ..Default::default() };
        for p in self.place.values() {
            match p {
                Place::Backoff => l.backoff += 1,
                Place::Unschedulable => l.unschedulable += 1,
                Place::InFlight => l.in_flight += 1,
                Place::Active => {}
            }
        }
        l
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.place.contains_key(uid)
    }

    pub fn is_empty(&self) -> bool {
        self.place.is_empty()
    }

    /// A pod a PreEnqueue plugin holds back: out of the queue, kept aside.
    pub fn gate(&mut self, pod: PodRef) {
        self.delete(&pod.uid);
        self.gated.insert(pod.uid.clone(), pod);
    }

    /// Pods held back by PreEnqueue plugins.
    pub fn gated_pods(&self) -> impl Iterator<Item = &PodRef> {
        self.gated.values()
    }

    /// Takes every gated pod, to be offered again.
    pub fn take_gated(&mut self) -> Vec<PodRef> {
        self.gated.drain().map(|(_, p)| p).collect()
    }

    /// A new pending pod (a gated one is no longer held back).
    pub fn add(&mut self, pod: PodRef, now: Millis) {
        self.gated.remove(&pod.uid);
        if self.place.contains_key(&pod.uid) {
            self.update(pod, now);
            return;
        }
        self.seq += 1;
        let qp = QueuedPod {
            pod,
            seq: self.seq,
            attempts: 0,
            first_seen: now,
            timestamp: now,
            unschedulable_plugins: HashSet::new(),
            not_before: 0,
            wake_at: None,
            cycle: 0,
        };
        self.push_active(qp);
    }

    fn push_active(&mut self, qp: QueuedPod) {
        self.set_place(&qp.pod.uid, Some(Place::Active));
        self.active.push(Active { qp, sorter: self.sorter.clone() });
    }

    /// A pending pod changed. In the active heap it is replaced lazily; a
    /// parked pod gets the new object and, if unschedulable, another try.
    pub fn update(&mut self, pod: PodRef, now: Millis) {
        match self.place.get(&pod.uid).copied() {
            None => self.add(pod, now),
            Some(Place::Active) => {
                let uid = pod.uid.clone();
                let mut entries = std::mem::take(&mut self.active).into_vec();
                if let Some(e) = entries.iter_mut().find(|e| e.qp.pod.uid == uid) {
                    e.qp.pod = pod;
                }
                self.active = entries.into();
            }
            Some(Place::Unschedulable) => {
                if let Some(mut qp) = self.parked.remove(&pod.uid) {
                    qp.pod = pod;
                    self.requeue(qp, now);
                }
            }
            Some(Place::Backoff) | Some(Place::InFlight) => {
                if let Some(qp) = self.parked.get_mut(&pod.uid) {
                    qp.pod = pod;
                }
            }
        }
    }

    /// The pod was deleted or bound elsewhere.
    pub fn delete(&mut self, uid: &str) {
        self.gated.remove(uid);
        let old = self.place.get(uid).copied();
        self.set_place(uid, None);
        match old {
            Some(Place::Active) => {
                let entries = std::mem::take(&mut self.active).into_vec();
                self.active = entries.into_iter().filter(|e| e.qp.pod.uid != uid).collect();
            }
            Some(_) => {
                self.parked.remove(uid);
            }
            None => {}
        }
    }

    fn backoff_duration(&self, attempts: u32) -> Millis {
        let shift = attempts.saturating_sub(1).min(32);
        self.initial_backoff.saturating_mul(1u64 << shift).min(self.max_backoff)
    }

    fn backoff_expiry(&self, qp: &QueuedPod) -> Millis {
        qp.timestamp.saturating_add(self.backoff_duration(qp.attempts)).max(qp.not_before)
    }

    /// Moves pods whose backoff expired, and pods unschedulable for longer
    /// than the flush interval, to the active heap.
    pub fn flush(&mut self, now: Millis) {
        while let Some(Reverse((expiry, _, uid))) = self.backoff.peek().cloned() {
            if expiry > now {
                break;
            }
            self.backoff.pop();
            if self.place.get(&uid) == Some(&Place::Backoff)
                && let Some(qp) = self.parked.remove(&uid)
            {
                if self.backoff_expiry(&qp) <= now {
                    self.push_active(qp);
                } else {
                    // Re-parked since this entry was made; its own entry is later.
                    self.parked.insert(uid, qp);
                }
            }
        }
        while let Some(Reverse((at, _, uid))) = self.wakeups.peek().cloned() {
            if at > now {
                break;
            }
            self.wakeups.pop();
            if self.place.get(&uid) == Some(&Place::Unschedulable)
                && self.parked.get(&uid).is_some_and(|qp| qp.wake_at == Some(at))
                && let Some(qp) = self.parked.remove(&uid)
            {
                self.requeue(qp, now);
            }
        }
        // Scanning every parked pod per pop would be quadratic; like
        // kube-scheduler, look for leftovers periodically.
        if now < self.last_leftover_scan + LEFTOVER_SCAN_MS {
            return;
        }
        self.last_leftover_scan = now;
        let stale: Vec<String> = self
            .unschedulable
            .iter()
            .filter_map(|uid| self.parked.get(uid))
            .filter(|qp| now.saturating_sub(qp.timestamp) >= UNSCHEDULABLE_FLUSH_MS)
            .map(|qp| qp.pod.uid.clone())
            .collect();
        for uid in stale {
            if let Some(qp) = self.parked.remove(&uid) {
                self.requeue(qp, now);
            }
        }
    }

    /// The next pod to schedule, if any is active now.
    pub fn pop(&mut self, now: Millis) -> Option<QueuedPod> {
        self.flush(now);
        loop {
            let Active { mut qp, .. } = self.active.pop()?;
            if self.place.get(&qp.pod.uid) != Some(&Place::Active) {
                continue; // deleted while queued
            }
            self.cycle += 1;
            qp.attempts += 1;
            qp.cycle = self.cycle;
            self.set_place(&qp.pod.uid, Some(Place::InFlight));
            self.parked.insert(qp.pod.uid.clone(), qp.clone());
            return Some(qp);
        }
    }

    /// Takes these pods out of the queue wherever they wait, as `pop`
    /// does (attempt counted, in flight): the other members of a gang
    /// being scheduled together. Pods already in flight or unknown are
    /// skipped. One pass over the active heap for all of them.
    pub fn take(&mut self, uids: &HashSet<String>) -> Vec<QueuedPod> {
        let mut taken = Vec::with_capacity(uids.len());
        let in_active = uids.iter().any(|u| self.place.get(u) == Some(&Place::Active));
        if in_active {
            let entries = std::mem::take(&mut self.active).into_vec();
            let mut kept = Vec::with_capacity(entries.len());
            for e in entries {
                if uids.contains(&e.qp.pod.uid) && self.place.get(&e.qp.pod.uid) == Some(&Place::Active) {
                    taken.push(e.qp);
                } else {
                    kept.push(e);
                }
            }
            self.active = kept.into();
        }
        for uid in uids {
            if matches!(self.place.get(uid), Some(Place::Backoff | Place::Unschedulable))
                && let Some(qp) = self.parked.remove(uid)
            {
                taken.push(qp);
            }
        }
        for qp in &mut taken {
            self.cycle += 1;
            qp.attempts += 1;
            qp.cycle = self.cycle;
            self.set_place(&qp.pod.uid, Some(Place::InFlight));
            self.parked.insert(qp.pod.uid.clone(), qp.clone());
        }
        taken
    }

    /// Moves these unschedulable pods back to the active queue (or to
    /// backoff while it lasts): an event only they care about, such as a
    /// new member of their gang.
    pub fn activate(&mut self, uids: &[String], now: Millis) {
        for uid in uids {
            if self.place.get(uid) == Some(&Place::Unschedulable)
                && let Some(qp) = self.parked.remove(uid)
            {
                self.requeue(qp, now);
            }
        }
    }

    /// Moves these unschedulable pods straight to the active queue, their
    /// backoff waived (kube-scheduler's `Activate`): what they waited for
    /// (their preemption's victims gone) happened.
    pub fn activate_now(&mut self, uids: &[String]) {
        for uid in uids {
            if self.place.get(uid) == Some(&Place::Unschedulable)
                && let Some(qp) = self.parked.remove(uid)
            {
                self.push_active(qp);
            }
        }
    }

    /// The object of a pod waiting in backoff, unschedulable or in flight.
    pub fn parked_pod(&self, uid: &str) -> Option<&PodRef> {
        self.parked.get(uid).map(|qp| &qp.pod)
    }

    /// Retries the in-flight pod no earlier than `until` (a gang backed
    /// off for its timeout).
    pub fn add_backoff_until(&mut self, mut qp: QueuedPod, until: Millis, now: Millis) {
        if !self.place.contains_key(&qp.pod.uid) {
            return; // deleted meanwhile
        }
        qp.timestamp = now;
        qp.not_before = until;
        self.push_backoff(qp);
    }

    /// Replaces the object of a pod in flight (its nomination changed in
    /// the cycle), so that the attempt's outcome keeps the change.
    pub fn update_in_flight(&mut self, pod: PodRef) {
        if self.place.get(&pod.uid) == Some(&Place::InFlight)
            && let Some(qp) = self.parked.get_mut(&pod.uid)
        {
            qp.pod = pod;
        }
    }

    /// The in-flight pod was placed (assumed): it leaves the queue.
    pub fn done(&mut self, uid: &str) {
        if self.place.get(uid) == Some(&Place::InFlight) {
            self.set_place(uid, None);
            self.parked.remove(uid);
        }
    }

    /// The in-flight pod could not be placed. `plugins` rejected it; with
    /// none (an error), it retries after backoff. If a cluster event came
    /// while it was being scheduled it also retries after backoff, since
    /// that event may have been the one it needed.
    pub fn add_unschedulable(&mut self, qp: QueuedPod, plugins: HashSet<&'static str>, now: Millis) {
        self.add_unschedulable_until(qp, plugins, None, now);
    }

    /// Like [`Self::add_unschedulable`], and retried at `wake_at` at the
    /// latest (None: only on an event or the periodic flush).
    pub fn add_unschedulable_until(
        &mut self,
        mut qp: QueuedPod,
        plugins: HashSet<&'static str>,
        wake_at: Option<Millis>,
        now: Millis,
    ) {
        if !self.place.contains_key(&qp.pod.uid) {
            return; // deleted meanwhile
        }
        if let Some(current) = self.parked.get(&qp.pod.uid) {
            qp.pod = current.pod.clone(); // keep updates that arrived in flight
        }
        qp.timestamp = now;
        qp.unschedulable_plugins = plugins;
        qp.wake_at = None;
        if qp.unschedulable_plugins.is_empty() || self.move_request_cycle >= qp.cycle {
            self.push_backoff(qp);
        } else {
            if let Some(at) = wake_at {
                qp.wake_at = Some(at);
                self.wakeups.push(Reverse((at, qp.seq, qp.pod.uid.clone())));
            }
            self.set_place(&qp.pod.uid, Some(Place::Unschedulable));
            self.parked.insert(qp.pod.uid.clone(), qp);
        }
    }

    /// Retries a pod after backoff (binding failed, internal error).
    pub fn add_backoff(&mut self, mut qp: QueuedPod, now: Millis) {
        qp.timestamp = now;
        self.push_backoff(qp);
    }

    fn push_backoff(&mut self, qp: QueuedPod) {
        let expiry = self.backoff_expiry(&qp);
        self.backoff.push(Reverse((expiry, qp.seq, qp.pod.uid.clone())));
        self.set_place(&qp.pod.uid, Some(Place::Backoff));
        self.parked.insert(qp.pod.uid.clone(), qp);
    }

    /// To backoff if still backing off, else active.
    fn requeue(&mut self, qp: QueuedPod, now: Millis) {
        if self.backoff_expiry(&qp) > now {
            self.push_backoff(qp);
        } else {
            self.push_active(qp);
        }
    }

    /// A cluster event: unschedulable pods that a plugin interested in it
    /// rejected are moved back (`interested(plugin, event)`).
    pub fn on_event(&mut self, event: ClusterEvent, now: Millis, interested: &dyn Fn(&str, &ClusterEvent) -> bool) {
        self.move_request_cycle = self.cycle;
        let movable: Vec<String> = self
            .unschedulable
            .iter()
            .filter_map(|uid| self.parked.get(uid))
            .filter(|qp| {
                qp.unschedulable_plugins.is_empty() || qp.unschedulable_plugins.iter().any(|p| interested(p, &event))
            })
            .map(|qp| qp.pod.uid.clone())
            .collect();
        for uid in movable {
            if let Some(qp) = self.parked.remove(&uid) {
                self.requeue(qp, now);
            }
        }
    }

    /// When the next pod in backoff, or the next unschedulable pod with a
    /// timed retry, becomes due: for a simulated clock to jump to, and for
    /// `run` to wake up at. (Other unschedulable pods wait for events, or
    /// the 5-minute flush.)
    pub fn next_backoff_expiry(&self) -> Option<Millis> {
        let backoff = self
            .parked
            .values()
            .filter(|qp| self.place.get(&qp.pod.uid) == Some(&Place::Backoff))
            .map(|qp| self.backoff_expiry(qp))
            .min();
        let wakeup = self
            .wakeups
            .iter()
            .filter(|Reverse((at, _, uid))| {
                self.place.get(uid) == Some(&Place::Unschedulable)
                    && self.parked.get(uid).is_some_and(|qp| qp.wake_at == Some(*at))
            })
            .map(|Reverse((at, _, _))| *at)
            .min();
        backoff.into_iter().chain(wakeup).min()
    }

    /// Pods currently unschedulable (for reports).
    pub fn unschedulable_pods(&self) -> Vec<&QueuedPod> {
        self.unschedulable.iter().filter_map(|uid| self.parked.get(uid)).collect()
    }

    /// Pods known to the queue but not in flight: active, backoff, unschedulable.
    pub fn pending_pods(&self) -> Vec<PodRef> {
        let mut v: Vec<PodRef> = self.active.iter().map(|a| a.qp.pod.clone()).collect();
        v.extend(
            self.parked
                .values()
                .filter(|qp| self.place.get(&qp.pod.uid) != Some(&Place::InFlight))
                .map(|qp| qp.pod.clone()),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{EventAction, EventResource, QueueSortPlugin};
    use crate::model::Pod;
    use crate::testing::pod;

    struct ByPriority;
    impl Plugin for ByPriority {
        fn name(&self) -> &'static str {
            "ByPriority"
        }
        fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
            Some(self)
        }
    }
    impl QueueSortPlugin for ByPriority {
        fn less(&self, a: &Pod, a_seq: u64, b: &Pod, b_seq: u64) -> bool {
            a.priority > b.priority || (a.priority == b.priority && a_seq < b_seq)
        }
    }

    fn queue() -> SchedulingQueue {
        SchedulingQueue::new(Arc::new(ByPriority), 1000, 10_000)
    }

    #[test]
    fn active_orders_by_priority_then_arrival() {
        let mut q = queue();
        q.add(pod("low").priority(1).arc(), 0);
        q.add(pod("high").priority(10).arc(), 0);
        q.add(pod("low2").priority(1).arc(), 0);
        let order: Vec<_> = std::iter::from_fn(|| q.pop(0).map(|qp| qp.pod.name.clone())).collect();
        assert_eq!(order, ["high", "low", "low2"]);
    }

    #[test]
    fn backoff_doubles_to_the_cap() {
        let q = queue();
        let got: Vec<_> = (1..=6).map(|a| q.backoff_duration(a)).collect();
        assert_eq!(got, [1000, 2000, 4000, 8000, 10_000, 10_000]);
    }

    #[test]
    fn unschedulable_moves_on_interesting_events_only() {
        let mut q = queue();
        q.add(pod("p").arc(), 0);
        let qp = q.pop(0).unwrap();
        q.add_unschedulable(qp, ["NodeResourcesFit"].into(), 0);
        assert_eq!(q.lengths().unschedulable, 1);
        let interested = |plugin: &str, e: &ClusterEvent| {
            plugin == "NodeResourcesFit" && e.triggers(&ClusterEvent::any(EventResource::Node))
        };
        q.on_event(ClusterEvent::new(EventResource::Namespace, EventAction::Add), 500, &interested);
        assert_eq!(q.lengths().unschedulable, 1);
        q.on_event(ClusterEvent::new(EventResource::Node, EventAction::Add), 500, &interested);
        // Still within its 1 s backoff: parked in backoff, then active after it.
        assert_eq!(q.lengths().backoff, 1);
        assert!(q.pop(999).is_none());
        assert_eq!(q.next_backoff_expiry(), Some(1000));
        assert_eq!(q.pop(1000).map(|qp| qp.attempts), Some(2));
    }

    #[test]
    fn event_during_flight_sends_failure_to_backoff() {
        let mut q = queue();
        q.add(pod("p").arc(), 0);
        let qp = q.pop(0).unwrap();
        q.on_event(ClusterEvent::new(EventResource::Node, EventAction::Add), 0, &|_, _| true);
        q.add_unschedulable(qp, ["X"].into(), 0);
        assert_eq!(q.lengths().backoff, 1);
    }

    #[test]
    fn unschedulable_flushed_after_five_minutes_at_the_next_scan() {
        let mut q = queue();
        q.add(pod("p").arc(), 0);
        let qp = q.pop(0).unwrap();
        q.add_unschedulable(qp, ["X"].into(), 0);
        assert!(q.pop(UNSCHEDULABLE_FLUSH_MS - 1).is_none());
        // Checked every 30 s, as kube-scheduler does.
        assert!(q.pop(UNSCHEDULABLE_FLUSH_MS - 1 + LEFTOVER_SCAN_MS).is_some());
    }

    #[test]
    fn a_timed_retry_wakes_an_unschedulable_pod_once() {
        let mut q = queue();
        q.add(pod("p").arc(), 0);
        let qp = q.pop(0).unwrap();
        q.add_unschedulable_until(qp, ["NodeHealth"].into(), Some(20_000), 0);
        assert_eq!(q.next_backoff_expiry(), Some(20_000), "run wakes up for it");
        assert!(q.pop(19_999).is_none());
        let qp = q.pop(20_000).expect("retried when its verdict lapses, not after 5 minutes");
        // Failing again without a time: it waits for events or the flush.
        q.add_unschedulable(qp, ["NodeHealth"].into(), 20_000);
        assert_eq!(q.next_backoff_expiry(), None);
        assert!(q.pop(40_000).is_none(), "the old wake-up is stale");
        // An event before the time moves it; the wake-up is then stale too.
        let qp = q.pop(20_000 + UNSCHEDULABLE_FLUSH_MS).unwrap();
        q.add_unschedulable_until(qp, ["NodeHealth"].into(), Some(400_000), 330_000);
        q.on_event(ClusterEvent::new(EventResource::Node, EventAction::Update), 340_000, &|_, _| true);
        let qp = q.pop(350_000).unwrap();
        q.add_unschedulable(qp, ["NodeHealth"].into(), 350_000);
        assert!(q.pop(400_000).is_none());
    }

    #[test]
    fn delete_removes_everywhere() {
        let mut q = queue();
        q.add(pod("a").arc(), 0);
        q.add(pod("b").arc(), 0);
        q.delete("a");
        assert_eq!(q.pop(0).map(|qp| qp.pod.name.clone()), Some("b".into()));
        q.delete("b");
        assert!(q.is_empty());
    }
}
