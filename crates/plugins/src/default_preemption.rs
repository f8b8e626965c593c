//! DefaultPreemption: when no node fits a pod, find a node where evicting
//! pods of lower priority makes room, with kube-scheduler's semantics
//! (`framework/plugins/defaultpreemption` and `framework/preemption`):
//!
//! - only nodes rejected as `Unschedulable` (not `Unresolvable`) are
//!   candidates; pods with `preemptionPolicy: Never`, or nominated to a
//!   node where a lower-priority pod is still terminating, preempt nothing;
//! - per node: remove every pod of lower priority, check the pod fits, then
//!   give pods back, most important first (those whose eviction would
//!   violate a PodDisruptionBudget before the others), keeping each that
//!   still lets the pod fit — the fewest and least important victims;
//! - among candidates, kube's order: fewest budget violations, lowest
//!   highest victim priority, smallest sum of priorities, fewest victims,
//!   latest start of the highest-priority victims, then the first.
//!
//! Gang-aware: a victim that belongs to a gang takes its whole gang with it
//! (its members on other nodes too), so preemption never leaves a gang
//! below its minimum; a gang with a member of priority at or above the
//! preemptor's is not a victim at all.
//!
//! Candidates are searched from an offset derived from the pod (kube uses a
//! random one; this keeps decisions deterministic), in parallel batches,
//! until `max(minCandidateNodesPercentage % of the nodes,
//! minCandidateNodesAbsolute)` candidates without budget violation are found.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::cache::Snapshot;
use framework::disruption::{Pdb, split_by_violation};
use framework::framework::{
    ClusterEvent, Code, CycleState, Plugin, PostFilterContext, PostFilterPlugin, PostFilterResult, Status,
};
use framework::framework::{PreemptionCandidate, PreemptionRecord};
use framework::model::{Pod, PodRef, PreemptionPolicy};
use framework::registry::{ArgsError, decode_args};
use rayon::prelude::*;
use serde::Deserialize;

pub const NAME: &str = "DefaultPreemption";

const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DefaultPreemptionArgs {
    #[serde(default = "default_percentage")]
    pub min_candidate_nodes_percentage: i32,
    #[serde(default = "default_absolute")]
    pub min_candidate_nodes_absolute: i32,
}

fn default_percentage() -> i32 {
    10
}

fn default_absolute() -> i32 {
    100
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: default_percentage(),
            min_candidate_nodes_absolute: default_absolute(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct DefaultPreemption {
    percentage: usize,
    absolute: usize,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: DefaultPreemptionArgs = decode_args(args)?;
    let (pct, abs) = (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute);
    if !(0..=100).contains(&pct) {
        return Err(ArgsError::new("minCandidateNodesPercentage", "not in valid range [0, 100]"));
    }
    if abs < 0 {
        return Err(ArgsError::new("minCandidateNodesAbsolute", "not in valid range [0, inf)"));
    }
    if pct == 0 && abs == 0 {
        return Err(ArgsError::new(
            "minCandidateNodesAbsolute",
            "cannot be zero at the same time as minCandidateNodesPercentage",
        ));
    }
    Ok(Arc::new(DefaultPreemption { percentage: pct.unsigned_abs() as usize, absolute: abs.unsigned_abs() as usize }))
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }

    /// PostFilter rejects no node: nothing to requeue for.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
}

/// A way to make room on one node.
#[derive(Debug, Clone)]
struct Candidate {
    position: usize,
    /// Most important first.
    victims: Vec<PodRef>,
    pdb_violations: usize,
}

impl Candidate {
    fn highest_priority(&self) -> i32 {
        self.victims.first().map_or(i32::MIN, |p| p.priority)
    }

    /// Sum of priorities, each shifted to be non-negative (kube's offset).
    fn priority_sum(&self) -> i64 {
        self.victims.iter().map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1).sum()
    }

    /// The earliest start among the highest-priority victims; a victim
    /// without a start time counts as just started.
    fn earliest_start_of_highest(&self) -> u64 {
        let top = self.highest_priority();
        self.victims
            .iter()
            .filter(|p| p.priority == top)
            .map(|p| p.start_time.unwrap_or(u64::MAX))
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// Pods a victim takes with it: itself, or its whole gang.
#[derive(Debug, Clone)]
struct Unit {
    /// Its pods on the node being tried.
    here: Vec<PodRef>,
    /// Its pods elsewhere (gang members on other nodes).
    elsewhere: Vec<PodRef>,
}

impl Unit {
    fn pods(&self) -> impl Iterator<Item = &PodRef> {
        self.here.iter().chain(&self.elsewhere)
    }

    fn priority(&self) -> i32 {
        self.pods().map(|p| p.priority).max().unwrap_or(i32::MIN)
    }

    fn start(&self) -> u64 {
        self.pods().map(|p| p.start_time.unwrap_or(u64::MAX)).min().unwrap_or(u64::MAX)
    }
}

/// What one preemption needs to know about the cluster beyond the node:
/// gang members by group, and the pods each budget covers.
struct Cluster<'a> {
    snapshot: &'a Snapshot,
    /// Bound members of each gang that has one, by `NAMESPACE/GROUP`.
    gangs: HashMap<String, Vec<PodRef>>,
    healthy: HashMap<(String, String), i32>,
}

impl<'a> Cluster<'a> {
    fn of(snapshot: &'a Snapshot) -> Self {
        let mut gangs: HashMap<String, Vec<PodRef>> = HashMap::new();
        let mut healthy: HashMap<(String, String), i32> = HashMap::new();
        let pdbs = snapshot.pdbs();
        for info in snapshot.nodes() {
            for p in &info.pods {
                if let Some(key) = p.group_key() {
                    gangs.entry(key).or_default().push(p.clone());
                }
                for pdb in pdbs.iter().filter(|b| b.status_allowed.is_none() && b.covers(p)) {
                    *healthy.entry((pdb.namespace.clone(), pdb.name.clone())).or_default() += 1;
                }
            }
        }
        Cluster { snapshot, gangs, healthy }
    }

    fn healthy(&self, pdb: &Pdb) -> i32 {
        self.healthy.get(&(pdb.namespace.clone(), pdb.name.clone())).copied().unwrap_or(0)
    }

    /// The units of lower priority than `pod` on the node at `position`;
    /// a gang with any member at or above the pod's priority is left out.
    fn units(&self, pod: &Pod, position: usize) -> Vec<Unit> {
        let info = &self.snapshot.nodes()[position];
        let mut gangs_here: BTreeMap<String, Unit> = BTreeMap::new();
        let mut units = Vec::new();
        for p in info.pods.iter().filter(|p| p.priority < pod.priority) {
            match p.group_key() {
                None => units.push(Unit { here: vec![p.clone()], elsewhere: Vec::new() }),
                Some(key) => gangs_here
                    .entry(key)
                    .or_insert_with(|| Unit { here: Vec::new(), elsewhere: Vec::new() })
                    .here
                    .push(p.clone()),
            }
        }
        for (key, mut unit) in gangs_here {
            let members = self.gangs.get(&key).map_or(&[][..], Vec::as_slice);
            if members.iter().any(|m| m.priority >= pod.priority) {
                continue;
            }
            unit.elsewhere = members.iter().filter(|m| m.node_name.as_deref() != Some(info.name())).cloned().collect();
            units.push(unit);
        }
        units
    }
}

impl DefaultPreemption {
    /// How many candidates to look for among `potential` nodes.
    fn num_candidates(&self, potential: usize) -> usize {
        (potential * self.percentage / 100).max(self.absolute).min(potential)
    }

    /// kube's `SelectVictimsOnNode`, by units (see [`Unit`]).
    fn select_victims(
        &self,
        ctx: &PostFilterContext<'_>,
        state: &CycleState,
        pod: &Pod,
        cluster: &Cluster<'_>,
        position: usize,
    ) -> Result<Candidate, Status> {
        let mut units = cluster.units(pod, position);
        if units.is_empty() {
            return Err(Status::unresolvable(NO_VICTIMS));
        }
        let mut node = (*ctx.snapshot.nodes()[position]).clone();
        for u in &units {
            for p in &u.here {
                node.remove_pod(&p.uid);
            }
        }
        ctx.filter(state, pod, position, &node)?;
        // Most important first: higher priority, then earlier start.
        units.sort_by(|a, b| b.priority().cmp(&a.priority()).then(a.start().cmp(&b.start())));
        let flat: Vec<PodRef> = units.iter().flat_map(|u| u.pods().cloned()).collect();
        let (violating, _) = split_by_violation(ctx.snapshot.pdbs(), &flat, &|pdb| cluster.healthy(pdb));
        let violates = |p: &PodRef| violating.iter().any(|v| v.uid == p.uid);
        let (bad, good): (Vec<Unit>, Vec<Unit>) = units.into_iter().partition(|u| u.pods().any(violates));
        let mut victims: Vec<(Unit, bool)> = Vec::new();
        for (unit, is_bad) in bad.into_iter().map(|u| (u, true)).chain(good.into_iter().map(|u| (u, false))) {
            for p in &unit.here {
                node.add_pod(p.clone());
            }
            if ctx.filter(state, pod, position, &node).is_err() {
                for p in &unit.here {
                    node.remove_pod(&p.uid);
                }
                victims.push((unit, is_bad));
            }
        }
        let pdb_violations =
            victims.iter().filter(|(_, bad)| *bad).map(|(u, _)| u.pods().filter(|p| violates(p)).count()).sum();
        let mut victims: Vec<PodRef> =
            victims.into_iter().flat_map(|(u, _)| u.pods().cloned().collect::<Vec<_>>()).collect();
        victims.sort_by(|a, b| {
            b.priority.cmp(&a.priority).then(a.start_time.unwrap_or(u64::MAX).cmp(&b.start_time.unwrap_or(u64::MAX)))
        });
        Ok(Candidate { position, victims, pdb_violations })
    }
}

/// kube's `pickOneNodeForPreemption`.
fn pick(candidates: &[Candidate]) -> Option<&Candidate> {
    if let Some(free) = candidates.iter().find(|c| c.victims.is_empty()) {
        return Some(free);
    }
    candidates.iter().min_by(|a, b| {
        a.pdb_violations
            .cmp(&b.pdb_violations)
            .then(a.highest_priority().cmp(&b.highest_priority()))
            .then(a.priority_sum().cmp(&b.priority_sum()))
            .then(a.victims.len().cmp(&b.victims.len()))
            .then(b.earliest_start_of_highest().cmp(&a.earliest_start_of_highest()))
            .then(a.position.cmp(&b.position))
    })
}

/// "preemption: 0/N nodes are available: ..." with each node's reason.
fn no_candidates(total: usize, reasons: &[Cow<'static, str>]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r.as_ref()).or_default() += 1;
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!("preemption: 0/{total} nodes are available: {}.", parts.join(", "))
}

/// A stable per-pod starting point for the candidate search.
fn offset(pod: &Pod, len: usize) -> usize {
    let h = pod.uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    if len == 0 { 0 } else { (h % len as u64) as usize }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(&self, ctx: &PostFilterContext<'_>, state: &CycleState, pod: &Pod) -> PostFilterResult {
        if pod.preemption_policy == PreemptionPolicy::Never {
            return PostFilterResult::unschedulable("preemption: not eligible due to preemptionPolicy=Never.");
        }
        let snap = ctx.snapshot;
        if let Some(info) = pod.nominated_node_name.as_deref().and_then(|n| snap.get(n))
            && info.pods.iter().any(|p| p.terminating && p.priority < pod.priority)
        {
            return PostFilterResult::unschedulable(
                "preemption: not eligible due to a terminating pod on the nominated node.",
            );
        }
        let total = snap.nodes().len();
        let potential: Vec<usize> =
            ctx.rejected.iter().filter(|(_, s)| s.code == Code::Unschedulable).map(|(i, _)| *i).collect();
        let mut reasons: Vec<Cow<'static, str>> = Vec::new();
        reasons.extend(
            ctx.rejected.iter().filter(|(_, s)| s.code != Code::Unschedulable).map(|_| Cow::Borrowed(NOT_HELPFUL)),
        );
        let cluster = Cluster::of(snap);
        let want = self.num_candidates(potential.len());
        let start = offset(pod, potential.len());
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut done = 0;
        let batch = want.max(64);
        while done < potential.len() && candidates.iter().filter(|c| c.pdb_violations == 0).count() < want {
            let len = batch.min(potential.len() - done);
            let results: Vec<Result<Candidate, Status>> = (0..len)
                .into_par_iter()
                .map(|k| {
                    let position = potential[(start + done + k) % potential.len()];
                    self.select_victims(ctx, state, pod, &cluster, position)
                })
                .collect();
            for r in results {
                match r {
                    Ok(c) => candidates.push(c),
                    Err(s) => reasons.extend(s.reasons),
                }
            }
            done += len;
        }
        candidates.sort_by_key(|c| c.position);
        let record = |chosen: Option<&Candidate>| PreemptionRecord {
            candidates: candidates
                .iter()
                .map(|c| PreemptionCandidate {
                    node: snap.names()[c.position].clone(),
                    victims: c.victims.iter().map(|p| p.key()).collect(),
                    pdb_violations: c.pdb_violations,
                    highest_priority: c.highest_priority(),
                })
                .collect(),
            chosen: chosen.map(|c| snap.names()[c.position].clone()),
        };
        match pick(&candidates) {
            Some(best) => PostFilterResult {
                nominated_node: Some(snap.names()[best.position].clone()),
                victims: best.victims.clone(),
                status: Status::success(),
                record: Some(record(Some(best))),
            },
            None => {
                // Nodes no filter saw (narrowed by PreFilter) cannot be helped.
                reasons.resize(reasons.len().max(total), Cow::Borrowed(NOT_HELPFUL));
                let mut r = PostFilterResult::unschedulable(no_candidates(total, &reasons));
                r.record = Some(record(None));
                r
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::disruption::Budget;
    use framework::framework::FilterPlugin;
    use framework::model::{LabelSelector, Node};
    use framework::testing::{node, pod};

    const GIB: i64 = 1 << 30;

    /// Preempts for `preemptor` on `nodes` with NodeResourcesFit as the
    /// only filter; every node that rejects the pod is a potential node.
    fn preempt(nodes: Vec<Node>, pods: Vec<PodRef>, pdbs: Vec<Pdb>, preemptor: &Pod) -> PostFilterResult {
        let mut cache = framework::cache::Cache::new();
        for n in nodes {
            cache.upsert_node(n);
        }
        for p in pods {
            cache.add_pod(p).unwrap_or_else(|e| panic!("{e}"));
        }
        for b in pdbs {
            cache.upsert_pdb(b);
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let fit = crate::node_resources_fit::new(None).unwrap_or_else(|e| panic!("{e}"));
        let mut state = CycleState::new();
        let (_, s) = fit
            .as_pre_filter()
            .map(|p| p.pre_filter(&mut state, preemptor, &snap))
            .unwrap_or_else(|| panic!("no prefilter"));
        assert!(s.is_success());
        let filter: &dyn FilterPlugin = fit.as_filter().unwrap_or_else(|| panic!("no filter"));
        let filters = [("NodeResourcesFit", filter)];
        let rejected: Vec<(usize, Status)> = (0..snap.nodes().len())
            .filter_map(|i| {
                framework::framework::run_filters(&filters, &state, preemptor, &snap.view(i)).err().map(|s| (i, s))
            })
            .collect();
        let ctx = PostFilterContext { snapshot: &snap, rejected: &rejected, filters: &filters };
        let plugin = DefaultPreemption { percentage: 10, absolute: 100 };
        plugin.post_filter(&ctx, &state, preemptor)
    }

    fn n(name: &str, cpu: i64) -> Node {
        node(name).capacity(cpu * 1000, 64 * GIB).build()
    }

    fn running(name: &str, on: &str, cpu: i64, priority: i32) -> PodRef {
        pod(name).node(on).req(cpu * 1000, GIB).priority(priority).arc()
    }

    fn victims(r: &PostFilterResult) -> Vec<&str> {
        r.victims.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn chooses_the_node_and_the_victims_kube_would() {
        let high = pod("high").req(2000, GIB).priority(10).build();
        // (case, nodes, pods, expected node, expected victims)
        type Case = (&'static str, Vec<Node>, Vec<PodRef>, &'static str, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (
                "lowest highest-priority victim",
                vec![n("n1", 2), n("n2", 2)],
                vec![running("p5", "n1", 2, 5), running("p1", "n2", 2, 1)],
                "n2",
                vec!["p1"],
            ),
            (
                "smallest priority sum",
                vec![n("n1", 2), n("n2", 2)],
                vec![running("a", "n1", 1, 1), running("b", "n1", 1, 1), running("c", "n2", 2, 1)],
                "n2",
                vec!["c"],
            ),
            (
                "the most important pods are given back",
                vec![n("n1", 4)],
                vec![running("a", "n1", 1, 1), running("b", "n1", 1, 2), running("c", "n1", 2, 3)],
                "n1",
                vec!["b", "a"],
            ),
            (
                "later start of the highest-priority victims wins a tie",
                vec![n("n1", 2), n("n2", 2)],
                vec![
                    pod("old").node("n1").req(2000, GIB).priority(1).with(|p| p.start_time = Some(1_000)).arc(),
                    pod("new").node("n2").req(2000, GIB).priority(1).with(|p| p.start_time = Some(9_000)).arc(),
                ],
                "n2",
                vec!["new"],
            ),
        ];
        for (name, nodes, pods, want_node, want_victims) in cases {
            let r = preempt(nodes, pods, vec![], &high);
            assert!(r.status.is_success(), "{name}: {:?}", r.status);
            assert_eq!(r.nominated_node.as_deref(), Some(want_node), "{name}");
            assert_eq!(victims(&r), want_victims, "{name}");
        }
    }

    #[test]
    fn pods_of_equal_or_higher_priority_are_never_victims() {
        let high = pod("high").req(2000, GIB).priority(10).build();
        let r = preempt(vec![n("n1", 2)], vec![running("peer", "n1", 2, 10)], vec![], &high);
        assert_eq!(r.nominated_node, None);
        assert_eq!(
            r.status.message(),
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
        // Even with every lower pod gone the pod would not fit: that node's reason.
        let r =
            preempt(vec![n("n1", 4)], vec![running("peer", "n1", 3, 10), running("low", "n1", 1, 1)], vec![], &high);
        assert_eq!(r.status.message(), "preemption: 0/1 nodes are available: 1 Insufficient cpu.");
        // A pod larger than the node: preemption cannot help there (kube
        // marks such a shortage unresolvable).
        let huge = pod("huge").req(3000, GIB).priority(10).build();
        let r = preempt(vec![n("n1", 2)], vec![running("low", "n1", 2, 1)], vec![], &huge);
        assert_eq!(
            r.status.message(),
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn never_preempts_with_preemption_policy_never() {
        let meek =
            pod("meek").req(2000, GIB).priority(10).with(|p| p.preemption_policy = PreemptionPolicy::Never).build();
        let r = preempt(vec![n("n1", 2)], vec![running("low", "n1", 2, 1)], vec![], &meek);
        assert!(r.victims.is_empty());
        assert_eq!(r.status.message(), "preemption: not eligible due to preemptionPolicy=Never.");
    }

    #[test]
    fn a_budget_is_violated_only_when_no_node_avoids_it() {
        let high = pod("high").req(2000, GIB).priority(10).build();
        let web = |name: &str, on: &str| pod(name).node(on).req(2000, GIB).priority(1).label("app", "web").arc();
        let pdb = Pdb {
            namespace: "default".into(),
            name: "web".into(),
            selector: LabelSelector::from_match_labels([("app", "web")]),
            min_available: Some(Budget::Count(1)),
            max_unavailable: None,
            status_allowed: None,
            disrupted_pods: vec![],
        };
        // The web pod is the budget's only pod: evicting it violates it.
        let r = preempt(
            vec![n("n1", 2), n("n2", 2)],
            vec![web("w1", "n1"), running("batch", "n2", 2, 5)],
            vec![pdb.clone()],
            &high,
        );
        assert_eq!((r.nominated_node.as_deref(), victims(&r)), (Some("n2"), vec!["batch"]));
        let rec = r.record.unwrap_or_default();
        assert_eq!(
            rec.candidates.iter().map(|c| (c.node.as_str(), c.pdb_violations)).collect::<Vec<_>>(),
            [("n1", 1), ("n2", 0)]
        );
        // With no other way, the budget gives.
        let r = preempt(vec![n("n1", 2)], vec![web("w1", "n1")], vec![pdb], &high);
        assert_eq!(victims(&r), ["w1"]);
    }

    #[test]
    fn a_gang_goes_whole_or_not_at_all() {
        let high = pod("high").req(2000, GIB).priority(10).build();
        let member = |name: &str, on: &str, priority: i32| {
            pod(name).node(on).req(2000, GIB).priority(priority).with(|p| p.pod_group = Some("g".into())).arc()
        };
        let r =
            preempt(vec![n("n1", 2), n("n2", 2)], vec![member("g-0", "n1", 1), member("g-1", "n2", 1)], vec![], &high);
        assert_eq!(victims(&r), ["g-0", "g-1"], "the member on the other node goes too");
        // A gang with a member the preemptor may not evict is no victim.
        let r =
            preempt(vec![n("n1", 2), n("n2", 2)], vec![member("g-0", "n1", 1), member("g-1", "n2", 20)], vec![], &high);
        assert!(r.victims.is_empty());
        assert_eq!(
            r.status.message(),
            "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn args_are_checked() {
        let cases = [
            (serde_json::json!({"minCandidateNodesPercentage": 101}), "minCandidateNodesPercentage"),
            (serde_json::json!({"minCandidateNodesAbsolute": -1}), "minCandidateNodesAbsolute"),
            (
                serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
                "minCandidateNodesAbsolute",
            ),
            (serde_json::json!({"minCandidates": 1}), "minCandidates"),
        ];
        for (args, path) in cases {
            assert_eq!(new(Some(&args)).err().map(|e| e.path), Some(path.to_string()), "{args}");
        }
        assert!(new(None).is_ok());
    }
}
