//! One scheduling decision: PreFilter → Filter (parallel over nodes, a
//! sampled share of them) → PostFilter when nothing fits → PreScore →
//! Score → NormalizeScore → weighted sum → select (ties broken from the
//! seeded random source). Pure: everything it reads is passed in.
//!
//! - PreFilter may narrow the candidates or skip a plugin's Filter. The
//!   nominated node is tried first; then Filter runs over a rotating window
//!   of the snapshot, resumed where the last cycle stopped, until
//!   `numFeasibleNodesToFind` feasible nodes are found (kube's adaptive
//!   `percentageOfNodesToScore`). Nodes a filter marked `Fallback` are kept
//!   aside and used only if no node passed outright (else recorded as
//!   rejected). Extenders then filter the feasible nodes.
//! - Filter and Score run on rayon over chunks of about two tasks per
//!   thread (finer splitting buys nothing: nodes cost the same); under 64
//!   nodes the work stays on the calling thread. Feasible and rejected
//!   nodes are kept as snapshot positions and scores in one node-major
//!   matrix, so no reference count is touched per node.
//! - A single feasible node is taken without scoring, as in kube. Otherwise
//!   the highest total wins, ties by reservoir sampling from the seeded
//!   `StdRng`, or with the profile's `tieBreak: nodeOrder` to the node first
//!   in an order hashed from its name and the seed (the FGD reference's).
//! - It fills the `DecisionRecord` as it goes, and for an explained
//!   decision ([`ExplainDetails`]) asks the plugins' details on each
//!   feasible node after the decision.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::cache::{NodeList, Snapshot};
use crate::config::TieBreak;
use crate::explain::{DecisionRecord, Detail, FitError, ScoreColumn};
use crate::extender::{Extender, ExtenderError, MAX_EXTENDER_PRIORITY};
use crate::framework::{
    Code, CycleState, FilterPlugin, MAX_NODE_SCORE, MIN_NODE_SCORE, PostFilterContext, ScorePlugin, Status,
    filter_with_nominated, run_filters,
};
use crate::instrument::{Instrument, Span};
use crate::model::Pod;
use crate::node_info::NodeInfo;
use crate::profile::Profile;

/// Below this many nodes, kube-scheduler evaluates all of them.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never drops below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;
/// Work smaller than this runs on the calling thread: handing it to the
/// thread pool would cost more than it saves.
const PARALLEL_THRESHOLD: usize = 64;

/// Nodes per parallel task for `len` nodes: about two tasks per thread.
/// Finer splitting buys no balance (every node costs about the same) and
/// pays for each extra task in wake-ups and stealing.
fn task_len(len: usize) -> usize {
    (len / (2 * rayon::current_num_threads())).max(PARALLEL_THRESHOLD / 2)
}

/// kube-scheduler's `numFeasibleNodesToFind`: how many feasible nodes to
/// look for before scoring. `percentage` 0 means adaptive (50% minus 1% per
/// 125 nodes, at least 5%); at least 100 nodes; 100 means all.
pub fn num_feasible_nodes_to_find(percentage: u32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100 {
        return num_all_nodes;
    }
    let pct = if percentage == 0 {
        (50usize.saturating_sub(num_all_nodes / 125)).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    } else {
        percentage as usize
    };
    (num_all_nodes * pct / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// A successful decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    pub node: String,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
}

#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// The cluster has no nodes.
    NoNodes,
    /// No node fits; the message is kube-scheduler's.
    Unschedulable(Box<FitError>),
    /// A plugin failed; the pod is retried with backoff.
    Internal(Status),
}

impl ScheduleError {
    pub fn message(&self) -> String {
        match self {
            ScheduleError::NoNodes => "no nodes available to schedule pods".into(),
            ScheduleError::Unschedulable(fit) => fit.message(),
            ScheduleError::Internal(s) => format!("running {} plugin: {}", s.plugin, s.message()),
        }
    }
}

/// The decision-making state that lives across cycles: where the last
/// partial search stopped, and the random source for tie-breaking.
pub struct Algorithm {
    percentage_of_nodes_to_score: u32,
    next_start_node_index: usize,
    rng: StdRng,
    /// The seed, for `tieBreak: nodeOrder`'s order (drawing it from `rng`
    /// would change the random ties of every other profile).
    seed: u64,
    /// Times extension points for metrics, when the caller wants them.
    instrument: Option<Arc<dyn Instrument>>,
    explain_details: ExplainDetails,
    /// Called after the filters and the scores, in order.
    extenders: Vec<Arc<dyn Extender>>,
}

/// Which decisions collect plugins' details (see [`crate::explain::Detail`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExplainDetails {
    #[default]
    None,
    All,
    /// Only the pod with this `NAMESPACE/NAME`.
    Pod(String),
}

/// Outcome of one decision, with its record.
pub struct Decision {
    pub result: Result<ScheduleResult, ScheduleError>,
    pub record: DecisionRecord,
    /// Set when a PostFilter plugin nominated a node.
    pub nominated_node: Option<String>,
    /// The pods to evict for the nominated node (preemption).
    pub victims: Vec<crate::model::PodRef>,
    /// Whether a PostFilter plugin ran (kube's preemption attempts).
    pub post_filter_ran: bool,
    /// The PostFilter plugin that chose the victims (preemption, or a
    /// queue's reclaim), when one did.
    pub victims_chosen_by: Option<&'static str>,
}

impl Algorithm {
    pub fn new(percentage_of_nodes_to_score: u32, seed: u64) -> Self {
        Algorithm {
            percentage_of_nodes_to_score,
            next_start_node_index: 0,
            rng: StdRng::seed_from_u64(seed),
            seed,
            instrument: None,
            explain_details: ExplainDetails::None,
            extenders: Vec::new(),
        }
    }

    pub fn set_percentage_of_nodes_to_score(&mut self, pct: u32) {
        self.percentage_of_nodes_to_score = pct;
    }

    pub fn set_extenders(&mut self, extenders: Vec<Arc<dyn Extender>>) {
        self.extenders = extenders;
    }

    pub fn set_explain_details(&mut self, which: ExplainDetails) {
        self.explain_details = which;
    }

    /// Each interested extender's filter, in order, on what is still
    /// feasible. A failure skips an ignorable extender and fails the cycle
    /// otherwise (the pod is retried after its backoff), as in kube.
    fn extender_filters(
        &self,
        pod: &Pod,
        snap: &Snapshot,
        feasible: &mut Vec<usize>,
        rejected: &mut Vec<(usize, Status)>,
    ) -> Result<(), ScheduleError> {
        for ext in &self.extenders {
            if feasible.is_empty() {
                break;
            }
            if !ext.has_filter() || !ext.is_interested(pod) {
                continue;
            }
            let infos: Vec<&NodeInfo> = feasible.iter().map(|&i| snap.nodes()[i].as_ref()).collect();
            let sent: std::collections::HashSet<&str> = infos.iter().map(|i| i.name()).collect();
            let result = ext.filter(pod, &infos).and_then(|r| {
                // An extender may only remove nodes.
                match r.passed.iter().find(|n| !sent.contains(n.as_str())) {
                    Some(n) => Err(ExtenderError {
                        extender: ext.name().to_string(),
                        message: format!("claims a filtered node {n:?} which is not found in the input node list"),
                    }),
                    None => Ok(r),
                }
            });
            let r = match result {
                Ok(r) => r,
                Err(e) => {
                    if let Some(i) = &self.instrument {
                        i.extender_error(ext.name(), "filter", ext.is_ignorable());
                    }
                    if ext.is_ignorable() {
                        continue;
                    }
                    return Err(ScheduleError::Internal(Status::error(e.to_string()).with_plugin(ext.name())));
                }
            };
            let passed: std::collections::HashSet<&str> = r.passed.iter().map(String::as_str).collect();
            let by_name = |list: &[(String, String)]| -> HashMap<String, String> { list.iter().cloned().collect() };
            let (unresolvable, failed) = (by_name(&r.failed_and_unresolvable), by_name(&r.failed));
            let reason = |name: &str| {
                if let Some(m) = unresolvable.get(name) {
                    Status::unresolvable(m.clone())
                } else if let Some(m) = failed.get(name) {
                    Status::unschedulable(m.clone())
                } else {
                    Status::unschedulable(format!("node(s) were filtered out by extender {}", ext.name()))
                }
            };
            let mut kept = Vec::with_capacity(passed.len());
            for &i in feasible.iter() {
                let name = snap.nodes()[i].name();
                if passed.contains(name) {
                    kept.push(i);
                } else {
                    rejected.push((i, reason(name).with_plugin(ext.name())));
                }
            }
            *feasible = kept;
        }
        Ok(())
    }

    /// Each interested extender's priorities (0-10) × its weight × 10,
    /// added to the totals and recorded as a column of their own. A failed
    /// call is skipped, as kube-scheduler does: other scores still decide.
    fn extender_scores(
        &self,
        pod: &Pod,
        snap: &Snapshot,
        feasible: &[usize],
        columns: &mut Vec<ScoreColumn>,
        totals: &mut [f64],
    ) {
        let infos: Vec<&NodeInfo> = feasible.iter().map(|&i| snap.nodes()[i].as_ref()).collect();
        for ext in &self.extenders {
            if !ext.has_prioritize() || !ext.is_interested(pod) {
                continue;
            }
            let scores = match ext.prioritize(pod, &infos) {
                Ok(s) => s,
                Err(_) => {
                    if let Some(i) = &self.instrument {
                        i.extender_error(ext.name(), "prioritize", true);
                    }
                    continue;
                }
            };
            let by_name: HashMap<&str, i64> = scores.iter().map(|(n, s)| (n.as_str(), *s)).collect();
            let raw: Vec<i64> = infos
                .iter()
                .map(|i| by_name.get(i.name()).copied().unwrap_or(0).clamp(0, MAX_EXTENDER_PRIORITY))
                .collect();
            let weight = (ext.weight() * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY)) as f64;
            for (t, r) in totals.iter_mut().zip(&raw) {
                *t += *r as f64 * weight;
            }
            columns.push(ScoreColumn { plugin: ext.name(), weight, normalized: raw.clone(), raw });
        }
    }

    fn explains(&self, pod_key: &str) -> bool {
        match &self.explain_details {
            ExplainDetails::None => false,
            ExplainDetails::All => true,
            ExplainDetails::Pod(key) => key == pod_key,
        }
    }

    pub fn set_instrument(&mut self, instrument: Arc<dyn Instrument>) {
        self.instrument = Some(instrument);
    }

    /// Decides where `pod` goes. `state` is the cycle state the later
    /// stages (Reserve, Permit, Bind) will see.
    pub fn schedule(&mut self, profile: &Profile, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> Decision {
        let mut record = DecisionRecord {
            pod: pod.key(),
            profile: profile.scheduler_name.clone(),
            policy: profile.policy_rule.clone(),
            total_nodes: snap.nodes().len(),
            nodes: snap.names().clone(),
            ..Default::default()
        };
        let mut skipped: Vec<&'static str> = Vec::new();
        let result = self.decide(profile, state, pod, snap, &mut record, &mut skipped);
        let (mut nominated_node, mut victims, mut post_filter_ran) = (None, Vec::new(), false);
        let mut victims_chosen_by = None;
        let result = match result {
            Err(ScheduleError::Unschedulable(mut fit)) if !state.skips_post_filter() => {
                let filters = filter_list(profile, &skipped);
                let ctx = PostFilterContext { snapshot: snap, rejected: &fit.rejected, filters: &filters };
                for p in &profile.post_filter {
                    let Some(pf) = p.as_post_filter() else { continue };
                    let r = pf.post_filter(&ctx, state, pod);
                    post_filter_ran = true;
                    if !r.status.reasons.is_empty() {
                        fit.post_filter_msg = Some(r.status.message());
                    }
                    if r.record.is_some() {
                        record.preemption = r.record;
                    }
                    if r.status.is_success() || r.status.code == Code::UnschedulableAndUnresolvable {
                        nominated_node = r.nominated_node;
                        victims = r.victims;
                        victims_chosen_by = (!victims.is_empty()).then(|| p.name());
                        break;
                    }
                }
                record.rejected = fit.rejected.clone();
                Err(ScheduleError::Unschedulable(fit))
            }
            Err(ScheduleError::Unschedulable(fit)) => {
                record.rejected = fit.rejected.clone();
                Err(ScheduleError::Unschedulable(fit))
            }
            other => other,
        };
        match &result {
            Ok(r) => record.node = Some(r.node.clone()),
            Err(e) => record.message = Some(e.message()),
        }
        Decision { result, record, nominated_node, victims, post_filter_ran, victims_chosen_by }
    }

    fn decide(
        &mut self,
        profile: &Profile,
        state: &mut CycleState,
        pod: &Pod,
        snap: &Snapshot,
        record: &mut DecisionRecord,
        skipped: &mut Vec<&'static str>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let all = snap.nodes();
        if all.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let instrument = self.instrument.clone();
        let instrument = instrument.as_ref();
        let profile_name = profile.scheduler_name.as_str();
        let pre_filter_span = Span::start(instrument);

        // PreFilter: per-pod state, and possibly a narrowed node set.
        let mut only: Option<std::collections::HashSet<String>> = None;
        // PreFilter plugins that narrowed the candidates, named in the
        // message for the nodes they left out, as kube-scheduler does.
        let mut narrowed_by: Vec<&'static str> = Vec::new();
        for p in &profile.pre_filter {
            let Some(pf) = p.as_pre_filter() else { continue };
            let span = Span::start(instrument);
            let (res, status) = pf.pre_filter(state, pod, snap);
            span.plugin(p.name(), "PreFilter", status.code);
            if !matches!(status.code, Code::Success | Code::Skip) {
                pre_filter_span.point("PreFilter", status.code, profile_name);
            }
            let status = status.with_plugin(p.name());
            match status.code {
                Code::Success => {}
                Code::Skip => {
                    skipped.push(p.name());
                    continue;
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    record.pre_filter_rejection = Some(status.clone());
                    return Err(ScheduleError::Unschedulable(Box::new(FitError {
                        num_all_nodes: all.len(),
                        pre_filter: Some(status),
                        rejected: Vec::new(),
                        absent: Vec::new(),
                        post_filter_msg: None,
                    })));
                }
                _ => return Err(ScheduleError::Internal(status)),
            }
            if let Some(names) = res.node_names {
                narrowed_by.push(p.name());
                only = Some(match only {
                    Some(prev) => prev.intersection(&names).cloned().collect(),
                    None => names,
                });
            }
        }
        pre_filter_span.point("PreFilter", Code::Success, profile_name);
        let filter_span = Span::start(instrument);
        let filters = filter_list(profile, skipped);

        // Nodes are handled by their position in the snapshot: the hot path
        // then reads the contiguous summaries and touches no reference count.
        // The nominated node (a previous PostFilter's choice) is tried first.
        let mut feasible: Vec<usize> = Vec::new();
        let mut rejected: Vec<(usize, Status)> = Vec::new();
        let nominated = pod.nominated_node_name.as_deref().and_then(|n| snap.position(n));
        let allowed = |i: &usize| state.restriction().is_none_or(|r| r.positions.binary_search(i).is_ok());
        if let Some(i) = nominated.filter(allowed) {
            match filter_with_nominated(&filters, state, pod, i, &snap.nodes()[i]) {
                Ok(()) => feasible.push(i),
                Err(s) if s.code == Code::Error => return Err(ScheduleError::Internal(s)),
                Err(_) => {} // rejected or only a fallback: search as usual
            }
        }

        let mut absent: Vec<(usize, Status)> = Vec::new();
        if feasible.is_empty() {
            let mut narrowed: Option<Vec<usize>> = only.as_ref().map(|names| {
                let mut positions: Vec<usize> = names.iter().filter_map(|n| snap.position(n)).collect();
                positions.sort_unstable(); // search order, not the set's
                positions
            });
            if let Some(n) = &narrowed
                && n.len() < all.len()
            {
                narrowed_by.sort_unstable();
                let message = format!("node(s) didn't satisfy plugin(s) [{}]", narrowed_by.join(" "));
                let plugin = narrowed_by.first().copied().unwrap_or("PreFilter");
                absent.push((all.len() - n.len(), Status::unresolvable(message).with_plugin(plugin)));
            }
            if let Some(r) = state.restriction() {
                let before = narrowed.as_ref().map_or(all.len(), Vec::len);
                let kept: Vec<usize> = match &narrowed {
                    Some(n) => n.iter().copied().filter(|i| r.positions.binary_search(i).is_ok()).collect(),
                    None => r.positions.to_vec(),
                };
                if kept.len() < before {
                    let status = Status::unresolvable(r.reason.to_string()).with_plugin(r.plugin);
                    absent.push((before - kept.len(), status));
                }
                narrowed = Some(kept);
            }
            let candidates = match &narrowed {
                Some(positions) => NodeList::new(snap, positions),
                None => snap.node_list(),
            };
            let pct = profile.percentage_of_nodes_to_score.unwrap_or(self.percentage_of_nodes_to_score);
            let want = num_feasible_nodes_to_find(pct, candidates.len());
            let mut fallback: Vec<(usize, Status)> = Vec::new();
            let processed = self
                .find_feasible(&filters, state, pod, candidates, want, &mut feasible, &mut rejected, &mut fallback)
                .inspect_err(|_| filter_span.point("Filter", Code::Error, profile_name))?;
            record.evaluated_nodes = processed;
            // Fallback nodes are used only when nothing else fits.
            if feasible.is_empty() {
                feasible.extend(fallback.iter().map(|(i, _)| *i));
            } else {
                rejected.extend(fallback);
            }
        } else {
            record.evaluated_nodes = 1;
        }

        // Extenders see only the nodes every filter plugin passed.
        if !feasible.is_empty() && !self.extenders.is_empty() {
            self.extender_filters(pod, snap, &mut feasible, &mut rejected)
                .inspect_err(|_| filter_span.point("Filter", Code::Error, profile_name))?;
        }
        let filter_code = if feasible.is_empty() { Code::Unschedulable } else { Code::Success };
        filter_span.point("Filter", filter_code, profile_name);
        if feasible.is_empty() {
            return Err(ScheduleError::Unschedulable(Box::new(FitError {
                num_all_nodes: all.len(),
                pre_filter: None,
                rejected,
                absent,
                post_filter_msg: None,
            })));
        }
        record.rejected = rejected;
        let feasible_count = feasible.len();
        if feasible_count == 1 {
            let node = all[feasible[0]].name().to_string();
            if self.explains(&record.pod) {
                record.details = details(profile, &filters, state, pod, NodeList::new(snap, &feasible));
            }
            record.feasible = feasible;
            return Ok(ScheduleResult { node, evaluated_nodes: record.evaluated_nodes, feasible_nodes: 1 });
        }

        let (mut columns, mut totals) = score_nodes(profile, state, pod, NodeList::new(snap, &feasible), instrument)?;
        if !self.extenders.is_empty() {
            self.extender_scores(pod, snap, &feasible, &mut columns, &mut totals);
        }
        let best = match profile.tie_break {
            TieBreak::Random => self.select_host(&totals),
            TieBreak::NodeOrder => select_in_order(&totals, |i| all[feasible[i]].name(), self.seed),
        };
        let node = all[feasible[best]].name().to_string();
        if self.explains(&record.pod) {
            record.details = details(profile, &filters, state, pod, NodeList::new(snap, &feasible));
        }
        record.feasible = feasible;
        record.columns = columns;
        record.totals = totals;
        Ok(ScheduleResult { node, evaluated_nodes: record.evaluated_nodes, feasible_nodes: feasible_count })
    }

    /// Filters `nodes` starting where the previous search stopped, in
    /// chunks run in parallel, until `want` feasible nodes are found or all
    /// were seen. Returns how many nodes were processed.
    #[allow(clippy::too_many_arguments)]
    fn find_feasible(
        &mut self,
        filters: &[(&'static str, &dyn FilterPlugin)],
        state: &CycleState,
        pod: &Pod,
        nodes: NodeList,
        want: usize,
        feasible: &mut Vec<usize>,
        rejected: &mut Vec<(usize, Status)>,
        fallback: &mut Vec<(usize, Status)>,
    ) -> Result<usize, ScheduleError> {
        let n = nodes.len();
        if n == 0 {
            return Ok(0); // PreFilter narrowed the candidates to nodes that do not exist
        }
        let start = self.next_start_node_index % n;
        if filters.is_empty() {
            let take = want.min(n);
            feasible.extend((0..take).map(|i| nodes.position((start + i) % n)));
            self.next_start_node_index = (start + take) % n;
            return Ok(take);
        }
        // Chunks a little larger than what is wanted: most nodes pass in a
        // healthy cluster, so one chunk usually suffices. Later chunks are
        // sized by the pass rate seen so far: a fixed size would filter
        // hundreds of nodes in parallel to find the last few.
        let found_before = feasible.len();
        let special = state.nominated().is_some() || !state.holds().is_empty();
        let mut chunk = (want + want / 4).max(PARALLEL_THRESHOLD).min(n);
        let mut processed = 0;
        let mut verdicts: Vec<Result<(), Status>> = Vec::with_capacity(chunk);
        'chunks: while processed < n {
            if processed > 0 {
                let found = (feasible.len() - found_before).max(1);
                let missing = want.saturating_sub(feasible.len());
                let needed = missing * processed / found;
                chunk = (needed + needed / 4).max(PARALLEL_THRESHOLD);
            }
            let len = chunk.min(n - processed);
            let at = |i: usize| nodes.position((start + processed + i) % n);
            let check = |i: usize| run_filters(filters, state, pod, &nodes.get((start + processed + i) % n));
            verdicts.clear();
            if len < PARALLEL_THRESHOLD {
                verdicts.extend((0..len).map(check));
            } else {
                (0..len).into_par_iter().with_min_len(task_len(len)).map(check).collect_into_vec(&mut verdicts);
            }
            // The few nodes with pods nominated there or held (by the
            // starvation guard or a forecast) are decided again, outside
            // the hot loop.
            if special {
                for (i, v) in verdicts.iter_mut().enumerate() {
                    let k = (start + processed + i) % n;
                    if v.is_ok() && needs_second_look(state, pod, nodes.position(k), nodes.get(k).name()) {
                        *v = filter_with_nominated(filters, state, pod, nodes.position(k), nodes.get(k).info());
                    }
                }
            }
            for (i, v) in verdicts.drain(..).enumerate() {
                match v {
                    Ok(()) => {
                        feasible.push(at(i));
                        if feasible.len() >= want {
                            processed += i + 1;
                            break 'chunks;
                        }
                    }
                    Err(s) if s.code == Code::Error => return Err(ScheduleError::Internal(s)),
                    Err(s) if s.code == Code::Fallback => fallback.push((at(i), s)),
                    Err(s) => rejected.push((at(i), s)),
                }
            }
            processed += len;
        }
        self.next_start_node_index = (start + processed) % n;
        Ok(processed)
    }

    /// Highest total wins; ties are broken uniformly at random (reservoir
    /// sampling over the tied nodes, as kube-scheduler's selectHost).
    fn select_host(&mut self, totals: &[f64]) -> usize {
        let mut best = 0;
        let mut ties = 0u32;
        for (i, &t) in totals.iter().enumerate() {
            if i == 0 || t > totals[best] {
                best = i;
                ties = 1;
            } else if t == totals[best] {
                ties += 1;
                if self.rng.random_range(0..ties) == 0 {
                    best = i;
                }
            }
        }
        best
    }
}

/// Highest total wins; ties go to the node first in a fixed order drawn
/// from `seed` (`tieBreak: nodeOrder`): each node's place is a hash of its
/// name and the seed, so the order is the same for every decision, as a
/// seeded permutation of the nodes would be, and nodes added later take
/// their place in it.
fn select_in_order<'a>(totals: &[f64], name: impl Fn(usize) -> &'a str, seed: u64) -> usize {
    let mut best: Option<(usize, (u64, &str))> = None;
    for (i, &t) in totals.iter().enumerate() {
        let key = (node_rank(name(i), seed), name(i));
        let better = match best {
            None => true,
            Some((b, k)) => t > totals[b] || (t == totals[b] && key < k),
        };
        if better {
            best = Some((i, key));
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// A node's place in the seeded order: FNV-1a over the name, mixed with
/// the seed by splitmix64's finaliser (stable across platforms and runs).
fn node_rank(name: &str, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether the node at `position` has pods nominated there that `pod`
/// must leave room for, or a hold that keeps `pod` off.
fn needs_second_look(state: &CycleState, pod: &Pod, position: usize, name: &str) -> bool {
    state.nominated().is_some_and(|n| n.for_pod(position, pod).next().is_some())
        || state.holds().iter().any(|h| h.blocks(name, pod))
}

/// The profile's filters, less those whose PreFilter skipped the cycle.
fn filter_list<'a>(profile: &'a Profile, skipped: &[&'static str]) -> Vec<(&'static str, &'a dyn FilterPlugin)> {
    profile
        .filter
        .iter()
        .filter(|p| !skipped.contains(&p.name()))
        .filter_map(|p| p.as_filter().map(|f| (p.name(), f)))
        .collect()
}

type Scores = (Vec<ScoreColumn>, Vec<f64>);

/// Each plugin's details on each feasible node, for an explanation.
fn details(
    profile: &Profile,
    filters: &[(&'static str, &dyn FilterPlugin)],
    state: &CycleState,
    pod: &Pod,
    nodes: NodeList<'_>,
) -> Vec<Vec<Detail>> {
    nodes
        .iter()
        .map(|node| {
            let from_filters = filters.iter().map(|(name, f)| (*name, f.explain(state, pod, &node)));
            let from_scores = profile
                .score
                .iter()
                .filter_map(|(p, _)| p.as_score().map(|s| (p.name(), s.explain(state, pod, &node))));
            from_filters
                .chain(from_scores)
                .flat_map(|(plugin, pairs)| {
                    pairs.into_iter().map(move |(name, value)| Detail { plugin: plugin.to_string(), name, value })
                })
                .collect()
        })
        .collect()
}

/// PreScore, Score (parallel over nodes), NormalizeScore and the weighted
/// sum, over the feasible nodes.
fn score_nodes(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    nodes: NodeList,
    instrument: Option<&Arc<dyn Instrument>>,
) -> Result<Scores, ScheduleError> {
    let name = profile.scheduler_name.as_str();
    let pre_score_span = Span::start(instrument);
    let mut skipped: Vec<&'static str> = Vec::new();
    for p in &profile.pre_score {
        let Some(ps) = p.as_pre_score() else { continue };
        let span = Span::start(instrument);
        let s = ps.pre_score(state, pod, nodes).with_plugin(p.name());
        span.plugin(p.name(), "PreScore", s.code);
        match s.code {
            Code::Success => {}
            Code::Skip => skipped.push(p.name()),
            _ => {
                pre_score_span.point("PreScore", s.code, name);
                return Err(ScheduleError::Internal(s));
            }
        }
    }
    pre_score_span.point("PreScore", Code::Success, name);
    let score_span = Span::start(instrument);
    let result = score_and_normalize(profile, state, pod, nodes, &skipped, instrument);
    score_span.point("Score", if result.is_ok() { Code::Success } else { Code::Error }, name);
    result
}

/// Score (parallel over nodes), NormalizeScore and the weighted sum.
fn score_and_normalize(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    nodes: NodeList,
    skipped: &[&'static str],
    instrument: Option<&Arc<dyn Instrument>>,
) -> Result<Scores, ScheduleError> {
    let scorers: Vec<(&'static str, &dyn ScorePlugin, f64)> = profile
        .score
        .iter()
        .filter(|(p, _)| !skipped.contains(&p.name()))
        .filter_map(|(p, w)| p.as_score().map(|s| (p.name(), s, *w)))
        .collect();
    let np = scorers.len();
    let mut totals = vec![0.0; nodes.len()];
    if np == 0 {
        return Ok((Vec::new(), totals));
    }
    // Node-major matrix so that each node's scores are one contiguous chunk.
    let mut matrix = vec![0i64; nodes.len() * np];
    let score_row = |(row, i): (&mut [i64], usize)| -> Result<(), Status> {
        let node = nodes.get(i);
        for (k, (name, s, _)) in scorers.iter().enumerate() {
            row[k] = s.score(state, pod, &node).map_err(|e| e.with_plugin(name))?;
        }
        Ok(())
    };
    if nodes.len() < PARALLEL_THRESHOLD {
        matrix.chunks_mut(np).zip(0..nodes.len()).try_for_each(score_row)
    } else {
        matrix.par_chunks_mut(np).with_min_len(task_len(nodes.len())).zip(0..nodes.len()).try_for_each(score_row)
    }
    .map_err(ScheduleError::Internal)?;

    let mut columns = Vec::with_capacity(np);
    for (k, (name, s, weight)) in scorers.iter().enumerate() {
        let raw: Vec<i64> = matrix.iter().skip(k).step_by(np).copied().collect();
        let mut normalized = raw.clone();
        if s.has_normalize() {
            let span = Span::start(instrument);
            let st = s.normalize(state, pod, &mut normalized).with_plugin(name);
            span.plugin(name, "NormalizeScore", st.code);
            if !st.is_success() {
                return Err(ScheduleError::Internal(st));
            }
        }
        if let Some(bad) = normalized.iter().find(|v| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(*v)) {
            return Err(ScheduleError::Internal(
                Status::error(format!("plugin {name} returned an invalid score {bad}, should be in [0, 100]"))
                    .with_plugin(name),
            ));
        }
        for (t, v) in totals.iter_mut().zip(&normalized) {
            *t += *v as f64 * weight;
        }
        columns.push(ScoreColumn { plugin: name, weight: *weight, raw, normalized });
    }
    Ok((columns, totals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::NodeView;
    use crate::framework::{FilterPlugin, Plugin, QueueSortPlugin};
    use crate::testing::{node, pod};
    use std::sync::Arc;

    /// Nodes named `pub*` fit only as a fallback, `bad*` never.
    struct Tiers;
    impl Plugin for Tiers {
        fn name(&self) -> &'static str {
            "Tiers"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
        fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
            Some(self)
        }
    }
    impl FilterPlugin for Tiers {
        fn filter(&self, _: &CycleState, _: &Pod, node: &NodeView<'_>) -> Status {
            match node.name() {
                n if n.starts_with("pub") => Status::fallback("held back"),
                n if n.starts_with("bad") => Status::unschedulable("bad node"),
                _ => Status::success(),
            }
        }
    }
    impl QueueSortPlugin for Tiers {
        fn less(&self, _: &Pod, a: u64, _: &Pod, b: u64) -> bool {
            a < b
        }
    }

    /// A profile whose only filter (and queue sort) is [`Tiers`].
    fn tiers_profile(percentage_of_nodes_to_score: Option<u32>) -> Profile {
        let tiers: Arc<dyn Plugin> = Arc::new(Tiers);
        Profile {
            scheduler_name: "s".into(),
            percentage_of_nodes_to_score,
            pod_selector: None,
            node_selector: None,
            starvation: None,
            pre_enqueue: vec![],
            queue_sort: tiers.clone(),
            pre_filter: vec![],
            filter: vec![tiers],
            post_filter: vec![],
            pre_score: vec![],
            score: vec![],
            reserve: vec![],
            permit: vec![],
            pre_bind: vec![],
            bind: vec![],
            post_bind: vec![],
            gpu_placement: Default::default(),
            tie_break: Default::default(),
            policy_switch: None,
            policy_rule: None,
        }
    }

    /// `tieBreak: nodeOrder`: the best total first, then the node first in
    /// the seed's order, the same for every decision.
    #[test]
    fn node_order_ties_are_fixed_by_the_seed() {
        let names: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
        let rank = |i: usize, seed: u64| node_rank(&names[i], seed);
        let first = |candidates: &[usize], seed: u64| *candidates.iter().min_by_key(|&&i| rank(i, seed)).unwrap();
        // (totals, the candidates for the pick)
        let cases: Vec<(Vec<f64>, Vec<usize>)> = vec![
            (vec![0.0; 20], (0..20).collect()),
            ((0..20).map(|i| if i % 3 == 0 { 2.0 } else { 1.0 }).collect(), (0..20).step_by(3).collect()),
            ((0..20).map(|i| if i == 7 { 5.0 } else { 1.0 }).collect(), vec![7]),
        ];
        for seed in [1, 42, 43] {
            for (totals, candidates) in &cases {
                let got = select_in_order(totals, |i| names[i].as_str(), seed);
                assert_eq!(got, first(candidates, seed), "seed {seed}, {candidates:?}");
            }
        }
        let picks: std::collections::BTreeSet<usize> =
            (0..16).map(|seed| select_in_order(&[0.0; 20], |i| names[i].as_str(), seed)).collect();
        assert!(picks.len() > 4, "the order depends on the seed: {picks:?}");
        // Through a decision: every node ties (no score plugin); the same
        // node wins every time, as under no other tie-break.
        let mut profile = tiers_profile(None);
        profile.tie_break = TieBreak::NodeOrder;
        let snap = Snapshot::from_parts(names.iter().map(|n| node(n).build()).collect(), vec![]);
        let mut algo = Algorithm::new(100, 42);
        let want = names[first(&(0..20).collect::<Vec<_>>(), 42)].clone();
        for _ in 0..5 {
            let d = algo.schedule(&profile, &mut CycleState::new(), &pod("p").build(), &snap);
            assert_eq!(d.result.map(|r| r.node).ok(), Some(want.clone()));
        }
    }

    #[test]
    fn fallback_nodes_are_used_only_when_nothing_else_fits() {
        let profile = tiers_profile(None);
        // (nodes, expected feasible, expected held back or rejected count, outcome)
        let cases: [(&[&str], &[&str], usize, bool); 4] = [
            (&["priv1", "pub1", "bad1"], &["priv1"], 2, true),
            (&["pub1", "pub2", "bad1"], &["pub1", "pub2"], 1, true),
            (&["bad1", "bad2"], &[], 2, false),
            (&["pub1"], &["pub1"], 0, true),
        ];
        for (nodes, want_feasible, want_rejected, ok) in cases {
            let snap = Snapshot::from_parts(nodes.iter().map(|n| node(n).build()).collect(), vec![]);
            let mut algo = Algorithm::new(100, 1);
            let d = algo.schedule(&profile, &mut CycleState::new(), &pod("p").build(), &snap);
            let mut feasible: Vec<&str> = d.record.feasible_names().collect();
            feasible.sort();
            assert_eq!(feasible, want_feasible, "{nodes:?}");
            assert_eq!(d.record.rejected.len(), want_rejected, "{nodes:?}");
            assert_eq!(d.result.is_ok(), ok, "{nodes:?}");
            if let Err(e) = &d.result {
                assert_eq!(e.message(), "0/2 nodes are available: 2 bad node.");
            }
        }
    }

    /// A partial search where few nodes pass stops at the node that
    /// completes the count, however the chunks are sized, and the next
    /// search starts after it.
    #[test]
    fn a_partial_search_stops_where_the_count_is_reached() {
        let profile = tiers_profile(Some(10));
        // 2,000 nodes, one in five passes; 10 % means 200 to find.
        let names: Vec<String> =
            (0..2000).map(|i| if i % 5 == 0 { format!("ok{i:04}") } else { format!("bad{i:04}") }).collect();
        // A zone each keeps the search order that of the names' numbers.
        let nodes = names.iter().map(|n| node(n).zone(&format!("z{}", &n[n.len() - 4..])).build()).collect();
        let snap = Snapshot::from_parts(nodes, vec![]);
        let mut algo = Algorithm::new(0, 1);
        let mut last_evaluated = 0;
        for round in 0..3 {
            let d = algo.schedule(&profile, &mut CycleState::new(), &pod("p").build(), &snap);
            assert_eq!(d.record.feasible_names().count(), 200, "round {round}");
            // Exactly up to the 200th passing node: 199 × 5 + 1 nodes when
            // the search starts on a passing node, a few more otherwise.
            let evaluated = d.record.evaluated_nodes;
            assert!((996..=1000).contains(&evaluated), "round {round}: {evaluated}");
            assert_eq!(d.record.rejected.len(), evaluated - 200, "round {round}");
            last_evaluated += evaluated;
        }
        assert_eq!(algo.next_start_node_index, last_evaluated % 2000, "resumes after the last node seen");
    }

    #[test]
    fn feasible_nodes_to_find_matches_kube() {
        // (percentage, nodes, expected)
        let cases = [
            (0, 50, 50),
            (0, 99, 99),
            (0, 100, 100),     // 49% of 100 = 49 → at least 100
            (0, 500, 230),     // 50 - 4 = 46%
            (0, 1000, 420),    // 42%
            (0, 5000, 500),    // 10%
            (0, 6000, 300),    // 50 - 48 = 2% → 5%
            (0, 15000, 750),   // 5%
            (100, 5000, 5000), // all
            (30, 1000, 300),
            (1, 1000, 100), // at least 100
        ];
        for (pct, nodes, want) in cases {
            assert_eq!(num_feasible_nodes_to_find(pct, nodes), want, "pct={pct} nodes={nodes}");
        }
    }
}
