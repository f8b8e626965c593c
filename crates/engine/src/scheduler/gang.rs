//! The gang cycle: a gang's pending members decided together, against one
//! snapshot, each member assumed before the next is tried, and all kept or
//! none (see [`crate::gang`]).
//!
//! When a popped pod's gang is short of minMember placed, its other pending
//! members are taken out of the queue and decided one after another (Reserve
//! and Permit included), within one topology domain at a time when the
//! group has a key. If fewer than the missing members fit, every assumption
//! is undone and each member fails with the gang's message. The outcomes
//! go to a ready queue that the next calls of `schedule_one` hand out, so
//! drivers see one outcome per call. The binding tasks share a `GangBind`:
//! after one member's binding fails, the members not yet bound are not
//! bound and go back to the queue with it.
//!
//! Members of a gang short of members wait (no event moves them; a new
//! member or a PodGroup change activates them), or back off for the group's
//! `scheduleTimeoutSeconds` once it has passed. A gang that does not fit
//! may preempt: a second pass runs PostFilter for each member that does not
//! fit and assumes it with its victims removed in thought; if every missing
//! member is placed that way, all is undone, each member fails nominated to
//! its node and the victims go to the caller with the first member's
//! outcome: for all members at once, or not at all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{CycleOutcome, Failure, GangBind, Scheduler};
use crate::algorithm::ScheduleError;
use crate::explain::{DecisionRecord, GangDecision, GangMember};
use crate::facts::GPU_RESOURCE;
use crate::framework::{ClusterEvent, CycleState, EventAction, EventResource, Restriction};
use crate::gang::{self, Domain, GANG, GangView, PodGroup};
use crate::model::{PodRef, PreemptionPolicy};
use crate::profile::Profile;
use crate::queue::QueuedPod;
use crate::resources::CPU;
use crate::time::{Millis, SECOND};

/// Gang members waiting for the rest of their gang are filed under this
/// name: no cluster event helps them, only a member arriving or their
/// PodGroup changing (which move them directly).
pub(super) const GANG_WAIT: &str = "GangWait";

/// The events registered for gang failures: [`GANG`] (the gang did not
/// fit as a whole: room freed or nodes added may help) and [`GANG_WAIT`].
pub(super) fn events() -> HashMap<&'static str, Vec<ClusterEvent>> {
    HashMap::from([
        (
            GANG,
            vec![
                ClusterEvent::any(EventResource::Node),
                ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ],
        ),
        (GANG_WAIT, Vec::new()),
    ])
}

/// A member placed (assumed, reserved, permitted) in a gang attempt.
struct Placed {
    qp: QueuedPod,
    pod: PodRef,
    node: String,
    state: CycleState,
    record: DecisionRecord,
}

/// A member that found no node in a gang attempt.
struct Unplaced {
    qp: QueuedPod,
    record: DecisionRecord,
    /// Why (kube's message for the member).
    message: String,
    plugins: HashSet<&'static str>,
}

/// One attempt's members: those placed, those not, and those not tried
/// because the gang could no longer reach its minimum.
#[derive(Default)]
struct Attempt {
    placed: Vec<Placed>,
    unplaced: Vec<Unplaced>,
    untried: Vec<QueuedPod>,
    domain: Option<String>,
    /// Pods a preempting attempt would evict, most important first per member.
    victims: Vec<PodRef>,
    /// The PostFilter plugin that chose the first member's victims.
    victims_chosen_by: Option<&'static str>,
    /// The victims taken out of the cache for the attempt, and whether
    /// each was assumed (to put them back as they were).
    removed: Vec<(PodRef, bool)>,
}

impl Scheduler {
    /// Schedules the gang `qp` belongs to. The gang is short of minMember
    /// placed (or its PodGroup is unknown); see [`crate::gang`]. The
    /// outcome of every member taken from the queue goes to `ready`.
    pub(super) fn schedule_gang(&mut self, profile: Arc<Profile>, qp: QueuedPod, view: GangView, now: Millis) {
        let Some(spec) = view.spec.clone() else {
            let message = format!("pod group {} not found", view.key);
            return self.gang_wait(&profile, qp, message, None, now);
        };
        if let Some(until) = view.backoff_until.filter(|t| now < *t) {
            let message = format!(
                "gang {}: backing off for {}s after waiting {}s for its members",
                view.key,
                (until - now).div_ceil(SECOND),
                spec.schedule_timeout.unwrap_or(0) / SECOND
            );
            return self.gang_wait(&profile, qp, message, Some(until), now);
        }
        if view.members() < spec.min_member {
            let message = format!("gang {}: {} of {} members pending", view.key, view.members(), spec.min_member);
            return match (spec.schedule_timeout, view.waiting_since) {
                (Some(timeout), Some(since)) if now >= since + timeout => {
                    // Waited long enough: the whole gang backs off for as
                    // long again, then a new wait starts.
                    self.gangs.back_off(&view.key, now + timeout);
                    let message = format!("{message}; timed out after {}s, backing off", timeout / SECOND);
                    let others: HashSet<String> = view.pending.iter().filter(|u| **u != qp.pod.uid).cloned().collect();
                    let mut members = vec![qp];
                    members.extend(self.queue.take(&others));
                    for m in members {
                        self.gang_wait(&profile, m, message.clone(), Some(now + timeout), now);
                    }
                }
                // Tried again when the wait times out, if no member comes first.
                (Some(timeout), Some(since)) => self.gang_wait(&profile, qp, message, Some(since + timeout), now),
                _ => self.gang_wait(&profile, qp, message, None, now),
            };
        }
        let others: HashSet<String> = view.pending.iter().filter(|u| **u != qp.pod.uid).cloned().collect();
        let mut members = vec![qp];
        members.extend(self.queue.take(&others));
        members.sort_by(|a, b| b.pod.priority.cmp(&a.pod.priority).then(a.seq.cmp(&b.seq)));
        let needed = view.needed() as usize;
        self.gangs.attempted(&view.key, now);
        self.cache.update_snapshot(&mut self.snapshot);
        let total_nodes = self.snapshot.nodes().len();

        if view.placed == 0
            && let Some(short) = self.min_resources_shortfall(&profile, &spec)
        {
            let message = format!("0/{total_nodes} nodes are available for gang {}: {short}", view.key);
            return self.gang_failed(&profile, &spec, view.placed, members, HashMap::new(), message, now);
        }

        let domains: Vec<Option<Domain>> = match &spec.topology_key {
            None => vec![None],
            Some(key) => {
                let (resource, amount) = gang_demand(&members, needed);
                let found = gang::domains(&self.snapshot, key, resource, amount);
                if found.is_empty() {
                    let message = format!(
                        "0/{total_nodes} nodes are available for gang {}: no {key} domain has {amount} free {resource}",
                        view.key
                    );
                    return self.gang_failed(&profile, &spec, view.placed, members, HashMap::new(), message, now);
                }
                found.into_iter().map(Some).collect()
            }
        };

        let mut best: Option<Attempt> = None;
        for domain in &domains {
            let attempt = self.try_gang(&profile, &spec, members, needed, domain.as_ref(), false, now);
            if attempt.placed.len() >= needed {
                return self.gang_placed(profile, &spec, view.placed, attempt, now);
            }
            members = self.undo(&profile, attempt, &mut best);
        }
        let best = best.unwrap_or_default();
        let fit = best.placed.len();
        let reason = best.unplaced.first().map_or_else(String::new, |u| strip_nodes_prefix(&u.message));
        let within = best.domain.as_ref().map_or_else(String::new, |d| format!(" in {d}"));
        let message = format!(
            "0/{total_nodes} nodes are available for gang {}: {fit} of {needed} members fit{within}; {reason}",
            view.key
        );

        // Preemption for the whole gang: every member placed, evicting
        // lower-priority pods where needed, or nothing evicted at all.
        let may_preempt = !profile.post_filter.is_empty()
            && members.iter().all(|m| m.pod.preemption_policy != PreemptionPolicy::Never);
        if may_preempt {
            let all_domains: Vec<Option<Domain>> = match &spec.topology_key {
                None => vec![None],
                Some(key) => gang::domains(&self.snapshot, key, CPU, 0).into_iter().map(Some).collect(),
            };
            for domain in &all_domains {
                let attempt = self.try_gang(&profile, &spec, members, needed, domain.as_ref(), true, now);
                if attempt.placed.len() >= needed && !attempt.victims.is_empty() {
                    return self.gang_preempting(&profile, &spec, view.placed, attempt, &message, now);
                }
                let mut scratch = None;
                members = self.undo(&profile, attempt, &mut scratch);
            }
        }
        let unplaced = best.unplaced.into_iter().map(|u| (u.qp.pod.uid.clone(), u)).collect();
        self.gang_failed(&profile, &spec, view.placed, members, unplaced, message, now)
    }

    /// Tries to place `members` (in order) within `domain`: each decided
    /// against the snapshot with the members before it assumed; with
    /// `preempt`, a member that does not fit takes its victims out.
    #[allow(clippy::too_many_arguments)]
    fn try_gang(
        &mut self,
        profile: &Arc<Profile>,
        spec: &PodGroup,
        members: Vec<QueuedPod>,
        needed: usize,
        domain: Option<&Domain>,
        preempt: bool,
        now: Millis,
    ) -> Attempt {
        let restriction = domain.map(|d| {
            let key = spec.topology_key.as_deref().unwrap_or_default();
            Restriction {
                positions: d.positions.clone(),
                plugin: GANG,
                reason: format!("node(s) outside the gang's {key}={} domain", d.value).into(),
            }
        });
        let total = members.len();
        let mut attempt = Attempt {
            domain: domain.map(|d| format!("{}={}", spec.topology_key.as_deref().unwrap_or_default(), d.value)),
            ..Attempt::default()
        };
        let group = spec.key();
        for qp in members {
            if total - attempt.unplaced.len() < needed {
                attempt.untried.push(qp); // the gang cannot reach its minimum any more
                continue;
            }
            self.cache.update_snapshot(&mut self.snapshot);
            let mut state = self.cycle_state(profile, &qp.pod, now);
            state.set_restriction(restriction.clone());
            // A member alone preempts nothing: the gang preempts for all
            // its members at once, or not at all.
            state.set_skip_post_filter(!preempt);
            let decision = self.algorithm.schedule(profile, &mut state, &qp.pod, &self.snapshot);
            let mut record = decision.record;
            let own = |v: &PodRef| v.group_key().as_deref() == Some(group.as_str());
            let result = match (decision.result, decision.nominated_node) {
                (Err(_), Some(node))
                    if preempt && !decision.victims.is_empty() && !decision.victims.iter().any(own) =>
                {
                    // Take the victims out (in thought) so the member fits
                    // there and the next members see the room it took.
                    for v in &decision.victims {
                        let assumed = self.cache.is_assumed(&v.uid);
                        if let Some(p) = self.cache.pod(&v.uid).cloned()
                            && self.cache.remove_pod(&v.uid).is_ok()
                        {
                            attempt.removed.push((p, assumed));
                        }
                    }
                    attempt.victims.extend(decision.victims);
                    attempt.victims_chosen_by = attempt.victims_chosen_by.or(decision.victims_chosen_by);
                    Ok(node)
                }
                (Ok(r), _) => Ok(r.node),
                (Err(e), _) => Err(e),
            };
            match result {
                Ok(node) => match self.reserve(profile, &qp.pod, &node, &mut state) {
                    Ok(pod) => attempt.placed.push(Placed { qp, pod, node, state, record }),
                    Err(status) => {
                        record.node = None;
                        let message = format!("running {} plugin: {}", status.plugin, status.message());
                        let plugins = [status.plugin].into_iter().filter(|p| !p.is_empty()).collect();
                        attempt.unplaced.push(Unplaced { qp, record, message, plugins });
                    }
                },
                Err(err) => {
                    let plugins = match &err {
                        ScheduleError::Unschedulable(fit) => fit.unschedulable_plugins(),
                        _ => HashSet::new(),
                    };
                    attempt.unplaced.push(Unplaced { qp, record, message: err.message(), plugins });
                }
            }
        }
        attempt
    }

    /// Takes a failed attempt back (un-assumes its members), keeps it in
    /// `best` if it placed the most members so far, and returns the members
    /// for the next attempt in their original order.
    fn undo(&mut self, profile: &Profile, mut attempt: Attempt, best: &mut Option<Attempt>) -> Vec<QueuedPod> {
        self.take_back(profile, &mut attempt);
        let mut members: Vec<QueuedPod> = attempt
            .placed
            .iter()
            .map(|p| p.qp.clone())
            .chain(attempt.unplaced.iter().map(|u| u.qp.clone()))
            .chain(attempt.untried.iter().cloned())
            .collect();
        members.sort_by(|a, b| b.pod.priority.cmp(&a.pod.priority).then(a.seq.cmp(&b.seq)));
        if best.as_ref().is_none_or(|b| attempt.placed.len() > b.placed.len()) {
            *best = Some(attempt);
        }
        members
    }

    /// Un-assumes an attempt's members and puts its victims back.
    fn take_back(&mut self, profile: &Profile, attempt: &mut Attempt) {
        for p in attempt.placed.iter_mut().rev() {
            self.unreserve(profile, &p.pod, &p.node, &mut p.state);
        }
        for (pod, assumed) in attempt.removed.drain(..) {
            let restored = if assumed { self.cache.assume_pod(pod) } else { self.cache.add_pod(pod) };
            // Each was taken out of the cache by this attempt, with its node
            // name, so it goes back in without a conflict.
            debug_assert!(restored.is_ok(), "a victim removed in this cycle: {restored:?}");
        }
    }

    /// The gang fits if its victims go: every member is nominated to its
    /// node and waits; the victims are handed to the caller with the first
    /// member's outcome, to evict once.
    fn gang_preempting(
        &mut self,
        profile: &Profile,
        spec: &PodGroup,
        placed_before: u32,
        mut attempt: Attempt,
        message: &str,
        now: Millis,
    ) {
        self.take_back(profile, &mut attempt);
        let decision = gang_decision(spec, placed_before, &attempt);
        let count = attempt.victims.len();
        let message = format!("{message} preemption: {count} pod(s) to evict to place the gang.");
        let mut victims = std::mem::take(&mut attempt.victims);
        let members: Vec<String> = attempt.placed.iter().map(|p| p.qp.pod.uid.clone()).collect();
        self.evictions.mark(&mut self.cache, &victims, &members, now);
        for p in attempt.placed {
            let mut qp = p.qp;
            self.nominate_in_flight(&mut qp, &p.node);
            let mut record = p.record;
            record.node = None;
            record.message = Some(message.clone());
            record.gang = Some(decision.clone());
            let failure = Failure {
                pod: qp.pod.clone(),
                record,
                message: message.clone(),
                unschedulable: true,
                nominated_node: Some(p.node),
                victims: std::mem::take(&mut victims),
                preemption_attempted: true,
                victims_chosen_by: attempt.victims_chosen_by,
            };
            self.queue.add_unschedulable(qp, [GANG].into(), now);
            self.decided.push_back(CycleOutcome::Failed(Box::new(failure)));
        }
        for u in attempt.unplaced {
            let mut record = u.record;
            record.gang = Some(decision.clone());
            let failure = Failure {
                pod: u.qp.pod.clone(),
                record,
                message: u.message,
                unschedulable: true,
                nominated_node: None,
                victims: Vec::new(),
                preemption_attempted: true,
                victims_chosen_by: None,
            };
            self.queue.add_unschedulable(u.qp, u.plugins, now);
            self.decided.push_back(CycleOutcome::Failed(Box::new(failure)));
        }
        for qp in attempt.untried {
            self.queue.add_unschedulable(qp, [GANG].into(), now);
        }
    }

    /// The gang fits: its members' bindings are handed out, one per call
    /// of `schedule_one`, all sharing one [`GangBind`].
    fn gang_placed(
        &mut self,
        profile: Arc<Profile>,
        spec: &PodGroup,
        placed_before: u32,
        attempt: Attempt,
        now: Millis,
    ) {
        let key = spec.key();
        let decision = gang_decision(spec, placed_before, &attempt);
        let bind = Arc::new(GangBind::new(key.clone()));
        for p in attempt.placed {
            self.queue.done(&p.qp.pod.uid);
            self.left_queue(&p.qp.pod.uid);
            let mut record = p.record;
            record.gang = Some(decision.clone());
            let task = self.binding_task(profile.clone(), p.pod, p.node, p.state, record, p.qp, Some(bind.clone()));
            self.decided.push_back(CycleOutcome::Assumed(Box::new(task)));
        }
        self.gangs.placed(&key);
        // Members beyond the minimum that did not fit wait as ordinary
        // pods would: the gang runs without them for now.
        for u in attempt.unplaced {
            let mut record = u.record;
            record.gang = Some(decision.clone());
            let failure = Failure {
                pod: u.qp.pod.clone(),
                record,
                message: u.message,
                unschedulable: true,
                nominated_node: None,
                victims: Vec::new(),
                preemption_attempted: false,
                victims_chosen_by: None,
            };
            self.queue.add_unschedulable(u.qp, u.plugins, now);
            self.decided.push_back(CycleOutcome::Failed(Box::new(failure)));
        }
        for qp in attempt.untried {
            self.queue.add_unschedulable(qp, [GANG].into(), now);
        }
    }

    /// The gang does not fit: every member fails with `message` and waits
    /// for an event that may help any of them.
    #[allow(clippy::too_many_arguments)]
    fn gang_failed(
        &mut self,
        profile: &Profile,
        spec: &PodGroup,
        placed_before: u32,
        members: Vec<QueuedPod>,
        mut unplaced: HashMap<String, Unplaced>,
        message: String,
        now: Millis,
    ) {
        let mut plugins: HashSet<&'static str> = unplaced.values().flat_map(|u| u.plugins.iter().copied()).collect();
        plugins.insert(GANG);
        let mut decision = GangDecision {
            group: spec.key(),
            min_member: spec.min_member,
            placed_before,
            domain: None,
            members: Vec::new(),
        };
        decision.members = members
            .iter()
            .map(|m| GangMember {
                pod: m.pod.key(),
                node: None,
                reason: unplaced.get(&m.pod.uid).map(|u| u.message.clone()),
            })
            .collect();
        // A starving gang holds a node for each member that found none,
        // counting its wait from its earliest member.
        let since = members.iter().map(|m| m.first_seen).min().unwrap_or(now);
        for m in &members {
            if let Some(u) = unplaced.get(&m.pod.uid) {
                self.unschedulable(profile, &m.pod, since, &u.record.rejected, now);
            }
        }
        for qp in members {
            let mut record = unplaced.remove(&qp.pod.uid).map(|u| u.record).unwrap_or_else(|| DecisionRecord {
                pod: qp.pod.key(),
                profile: profile.scheduler_name.clone(),
                policy: profile.policy_rule.clone(),
                total_nodes: self.snapshot.nodes().len(),
                nodes: self.snapshot.names().clone(),
                ..Default::default()
            });
            record.node = None;
            record.message = Some(message.clone());
            record.gang = Some(decision.clone());
            let failure = Failure {
                pod: qp.pod.clone(),
                record,
                message: message.clone(),
                unschedulable: true,
                nominated_node: None,
                victims: Vec::new(),
                preemption_attempted: false,
                victims_chosen_by: None,
            };
            self.queue.add_unschedulable(qp, plugins.clone(), now);
            self.decided.push_back(CycleOutcome::Failed(Box::new(failure)));
        }
    }

    /// A member that waits for the rest of its gang (or for its PodGroup):
    /// it takes no resources; `until` backs it off past a timeout.
    fn gang_wait(&mut self, profile: &Profile, qp: QueuedPod, message: String, until: Option<Millis>, now: Millis) {
        let record = DecisionRecord {
            pod: qp.pod.key(),
            profile: profile.scheduler_name.clone(),
            policy: profile.policy_rule.clone(),
            message: Some(message.clone()),
            ..Default::default()
        };
        let pod = qp.pod.clone();
        match until {
            Some(t) => self.queue.add_backoff_until(qp, t, now),
            None => self.queue.add_unschedulable(qp, [GANG_WAIT].into(), now),
        }
        let failure = Failure {
            pod,
            record,
            message,
            unschedulable: true,
            nominated_node: None,
            victims: Vec::new(),
            preemption_attempted: false,
            victims_chosen_by: None,
        };
        self.decided.push_back(CycleOutcome::Failed(Box::new(failure)));
    }

    /// What of the gang's minResources the free capacity of the profile's
    /// nodes cannot hold, if anything (coscheduling's PreFilter check).
    fn min_resources_shortfall(&self, profile: &Profile, spec: &PodGroup) -> Option<String> {
        let want = &spec.min_resources;
        if want.is_zero() {
            return None;
        }
        // Only the resources named: a sum per resource over the nodes.
        let mut named: Vec<(&str, i64, i64)> = vec![(CPU, want.milli_cpu, 0), ("memory", want.memory, 0)];
        named.retain(|(_, need, _)| *need > 0);
        named.extend(want.scalars().iter().filter(|(_, need)| *need > 0).map(|(name, need)| (&**name, *need, 0)));
        for info in self.snapshot.nodes() {
            if profile.node_selector.as_ref().is_some_and(|s| !s.matches(&info.node.labels)) {
                continue;
            }
            for (name, _, free) in &mut named {
                *free += info.free(name).max(0);
            }
        }
        let short: Vec<String> = named
            .iter()
            .filter(|(_, need, free)| need > free)
            .map(|(name, need, free)| format!("{name} {need} needed, {free} free"))
            .collect();
        (!short.is_empty()).then(|| format!("minResources exceed the cluster's free capacity ({})", short.join(", ")))
    }
}

/// The resource a gang's domains are compared by (GPUs for a GPU gang,
/// else cpu) and how much of it the first `needed` members request.
fn gang_demand(members: &[QueuedPod], needed: usize) -> (&'static str, i64) {
    let gpus: i64 = members.iter().take(needed).map(|m| m.pod.requests.scalar(GPU_RESOURCE)).sum();
    if gpus > 0 {
        (GPU_RESOURCE, gpus)
    } else {
        (CPU, members.iter().take(needed).map(|m| m.pod.requests.milli_cpu).sum())
    }
}

fn gang_decision(spec: &PodGroup, placed_before: u32, attempt: &Attempt) -> GangDecision {
    let placed =
        attempt.placed.iter().map(|p| GangMember { pod: p.qp.pod.key(), node: Some(p.node.clone()), reason: None });
    let unplaced = attempt.unplaced.iter().map(|u| GangMember {
        pod: u.qp.pod.key(),
        node: None,
        reason: Some(u.message.clone()),
    });
    GangDecision {
        group: spec.key(),
        min_member: spec.min_member,
        placed_before,
        domain: attempt.domain.clone(),
        members: placed.chain(unplaced).collect(),
    }
}

/// "0/5 nodes are available: 3 Insufficient cpu." → "3 Insufficient cpu."
fn strip_nodes_prefix(message: &str) -> String {
    match message.split_once(" nodes are available: ") {
        Some((_, rest)) => rest.to_string(),
        None => message.to_string(),
    }
}
