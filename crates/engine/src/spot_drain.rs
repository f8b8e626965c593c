//! Spot draining, the article's cost scenario: what the rebalancer does
//! to spot nodes whose expiry (`gpu-scheduler.io/spot-expiry`) is within
//! the window. Pure: [`plan`] looks at the cache at a given time and says
//! which nodes to taint or untaint and which pods to evict, in order
//! ([`DrainPlan`], with the pods kept and why), and [`take_batch`] takes one
//! interval's evictions within the allowance; `run` carries the plan out
//! (leader only, through the Eviction API, a few pods at a time, so
//! PodDisruptionBudgets are the API server's to enforce) and `simulate`
//! prints it for `--now`.
//!
//! The rules: a node is drained only inside the window; it is tainted
//! `gpu-scheduler.io/spot-expiring:NoSchedule` first (so no scheduler puts
//! new pods there) and its pods are evicted only once the taint is on; the
//! taint comes off when the expiry moves out of the window (or goes).
//! DaemonSet and mirror pods and pods annotated
//! `gpu-scheduler.io/do-not-evict` stay; a gang's members go together or
//! not at all.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cache::Cache;
use crate::model::{PodRef, Taint, TaintEffect};
use crate::time::Millis;
use gpu_scheduler_model::field::ConfigError;
use gpu_scheduler_model::go_duration;

/// The taint put on draining nodes.
pub const TAINT_SPOT_EXPIRING: &str = "gpu-scheduler.io/spot-expiring";
/// A pod annotation that keeps the rebalancer from evicting it (any value
/// but `false`).
pub const ANNOTATION_DO_NOT_EVICT: &str = "gpu-scheduler.io/do-not-evict";
/// The annotation of static pods' mirrors, which the API cannot evict.
pub const ANNOTATION_MIRROR: &str = "kubernetes.io/config.mirror";

/// The `spotDrain` section of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpotDrainConfig {
    /// Run the rebalancer (leader only). Off by default: it evicts pods.
    #[serde(default)]
    pub enabled: bool,
    /// Only report (log, metric) what would be tainted and evicted.
    #[serde(default)]
    pub dry_run: bool,
    /// How long before a spot node's expiry it is drained.
    #[serde(default = "default_window", with = "go_duration")]
    pub window: Duration,
    /// How often the rebalancer looks.
    #[serde(default = "default_interval", with = "go_duration")]
    pub interval: Duration,
    /// Evictions in flight at once, and started per interval, at most (a
    /// gang larger than this goes alone in an interval of its own).
    #[serde(default = "default_max_evictions")]
    pub max_evictions: u32,
}

fn default_window() -> Duration {
    Duration::from_secs(30 * 60)
}
fn default_interval() -> Duration {
    Duration::from_secs(30)
}
fn default_max_evictions() -> u32 {
    2
}

impl Default for SpotDrainConfig {
    fn default() -> Self {
        SpotDrainConfig {
            enabled: false,
            dry_run: false,
            window: default_window(),
            interval: default_interval(),
            max_evictions: default_max_evictions(),
        }
    }
}

impl SpotDrainConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        use crate::bounds::{MAX_DURATION, duration, int};
        for (field, d) in [("window", self.window), ("interval", self.interval)] {
            ConfigError::check(format!("{path}.{field}"), duration(d, crate::bounds::MIN_DURATION, MAX_DURATION))?;
        }
        ConfigError::check(format!("{path}.maxEvictions"), int(self.max_evictions, 1, u32::MAX))?;
        Ok(())
    }

    fn window_ms(&self) -> Millis {
        Millis::try_from(self.window.as_millis()).unwrap_or(Millis::MAX)
    }
}

/// The taint the rebalancer puts on a draining node.
pub fn spot_taint() -> Taint {
    Taint { key: TAINT_SPOT_EXPIRING.into(), value: String::new(), effect: TaintEffect::NoSchedule }
}

/// Whether `taints` hold the rebalancer's taint.
pub fn has_spot_taint(taints: &[Taint]) -> bool {
    taints.iter().any(|t| t.key == TAINT_SPOT_EXPIRING && t.effect == TaintEffect::NoSchedule)
}

/// A spot node inside the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainingNode {
    pub node: String,
    pub expiry: Millis,
    /// Whether the taint is on (evictions start only then).
    pub tainted: bool,
    /// Pods still to evict there.
    pub to_evict: usize,
}

/// Why a pod on a draining node stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    DaemonSet,
    Mirror,
    DoNotEvict,
    /// Another member of its gang must stay, so the whole gang stays.
    Gang {
        gang: String,
        member: String,
        why: Box<Kept>,
    },
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kept::DaemonSet => write!(f, "a DaemonSet's pod"),
            Kept::Mirror => write!(f, "a static pod's mirror"),
            Kept::DoNotEvict => write!(f, "annotated {ANNOTATION_DO_NOT_EVICT}"),
            Kept::Gang { gang, member, why } => write!(f, "gang {gang} stays whole: its member {member} is {why}"),
        }
    }
}

/// Pods evicted together: one pod, or every member of a gang.
#[derive(Debug, Clone)]
pub struct Eviction {
    pub pods: Vec<PodRef>,
    /// `NAMESPACE/NAME` of the gang, when it is one.
    pub gang: Option<String>,
    /// The draining node that causes it, and its expiry.
    pub node: String,
    pub expiry: Millis,
    /// Whether that node's taint is on: evictions wait for it.
    pub ready: bool,
}

/// What the rebalancer would do now.
#[derive(Debug, Clone, Default)]
pub struct DrainPlan {
    /// Spot nodes inside the window, soonest expiry first.
    pub draining: Vec<DrainingNode>,
    /// Nodes to taint (inside the window, not yet tainted).
    pub taint: Vec<String>,
    /// Nodes whose taint should come off (expiry moved out of the window
    /// or gone).
    pub untaint: Vec<String>,
    /// Evictions in the order to make them: pods of draining nodes, soonest
    /// expiry first, then lowest priority first (those of nodes not yet
    /// tainted wait: not `ready`).
    pub evict: Vec<Eviction>,
    /// Pods on draining nodes that stay, with why.
    pub kept: Vec<(PodRef, Kept)>,
}

fn own_reason(pod: &PodRef) -> Option<Kept> {
    if pod.owner.as_ref().is_some_and(|(kind, _)| kind == "DaemonSet") {
        return Some(Kept::DaemonSet);
    }
    if pod.annotations.contains_key(ANNOTATION_MIRROR) {
        return Some(Kept::Mirror);
    }
    if pod.annotations.get(ANNOTATION_DO_NOT_EVICT).is_some_and(|v| v.trim() != "false") {
        return Some(Kept::DoNotEvict);
    }
    None
}

/// The plan at `now`. Pods being deleted already, and pods whose binding
/// is still in flight, are left alone.
pub fn plan(cache: &Cache, cfg: &SpotDrainConfig, now: Millis) -> DrainPlan {
    let window = cfg.window_ms();
    let mut out = DrainPlan::default();
    let mut draining: Vec<(Millis, &str, bool, &[PodRef])> = Vec::new();
    for info in cache.node_infos().filter(|i| i.has_node) {
        let tainted = has_spot_taint(&info.node.taints);
        match info.facts.spot_expiry {
            Some(expiry) if expiry.saturating_sub(now) <= window => {
                draining.push((expiry, info.node.name.as_str(), tainted, info.pods.as_slice()));
                if !tainted {
                    out.taint.push(info.node.name.clone());
                }
            }
            _ if tainted => out.untaint.push(info.node.name.clone()),
            _ => {}
        }
    }
    draining.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    out.untaint.sort();
    let evictable = |p: &PodRef| !p.terminating && !cache.is_assumed(&p.uid);

    // Gangs on draining nodes: every member the cache holds, wherever it runs.
    let gangs_needed: std::collections::HashSet<String> =
        draining.iter().flat_map(|(_, _, _, pods)| pods.iter()).filter_map(|p| p.group_key()).collect();
    let mut members: BTreeMap<String, Vec<PodRef>> = BTreeMap::new();
    if !gangs_needed.is_empty() {
        for info in cache.node_infos() {
            for p in &info.pods {
                if let Some(k) = p.group_key().filter(|k| gangs_needed.contains(k))
                    && evictable(p)
                {
                    members.entry(k).or_default().push(p.clone());
                }
            }
        }
    }
    for pods in members.values_mut() {
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }
    let gang_kept: HashMap<&String, Kept> = members
        .iter()
        .filter_map(|(gang, pods)| {
            pods.iter()
                .find_map(|p| {
                    own_reason(p).map(|why| Kept::Gang { gang: gang.clone(), member: p.key(), why: Box::new(why) })
                })
                .map(|k| (gang, k))
        })
        .collect();

    let mut gangs_done = std::collections::HashSet::new();
    for (expiry, node, tainted, pods) in draining {
        let mut pods: Vec<&PodRef> = pods.iter().filter(|p| evictable(p)).collect();
        pods.sort_by(|a, b| (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name)));
        let mut to_evict = 0;
        for p in pods {
            let gang = p.group_key();
            let why = match &gang {
                Some(g) => gang_kept.get(g).cloned(),
                None => own_reason(p),
            };
            if let Some(why) = why {
                out.kept.push((p.clone(), why));
                continue;
            }
            to_evict += 1;
            let (pods, gang) = match gang {
                Some(g) if gangs_done.insert(g.clone()) => (members.get(&g).cloned().unwrap_or_default(), Some(g)),
                Some(_) => continue, // the whole gang is on the list already
                None => (vec![p.clone()], None),
            };
            out.evict.push(Eviction { pods, gang, node: node.to_string(), expiry, ready: tainted });
        }
        out.draining.push(DrainingNode { node: node.to_string(), expiry, tainted, to_evict });
    }
    out
}

/// Takes the ready evictions from `plan` in order for one interval: at
/// most `budget` pods, except that a unit larger than the whole allowance
/// goes alone when nothing else is in flight. Units for which `skip` holds
/// (evicted a moment ago, not yet seen terminating) are passed over.
pub fn take_batch(
    evict: &[Eviction],
    budget: usize,
    allowance: usize,
    in_flight: usize,
    skip: impl Fn(&Eviction) -> bool,
) -> Vec<&Eviction> {
    let mut left = budget;
    let mut out = Vec::new();
    for e in evict.iter().filter(|e| e.ready && !skip(e)) {
        let n = e.pods.len();
        if n <= left {
            left -= n;
            out.push(e);
        } else if n > allowance && in_flight == 0 && out.is_empty() {
            out.push(e);
            break;
        } else {
            break; // keep the order: the next unit waits for its turn
        }
        if left == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::facts::ANNOTATION_SPOT_EXPIRY;
    use crate::testing::{node, pod};

    const NOW: &str = "2026-01-01T12:00:00Z";

    fn at(s: &str) -> Millis {
        crate::facts::parse_time(s).unwrap()
    }

    fn cluster() -> Cache {
        let mut c = Cache::new();
        // s1 expires in 10 min and is tainted; s2 in 20 min, not tainted;
        // s3 in 2 h (outside), tainted by an earlier window; n4 on demand.
        c.upsert_node(
            node("s1")
                .annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T12:10:00Z")
                .taint(TAINT_SPOT_EXPIRING, "", TaintEffect::NoSchedule)
                .build(),
        );
        c.upsert_node(node("s2").annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T12:20:00Z").build());
        c.upsert_node(
            node("s3")
                .annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T14:00:00Z")
                .taint(TAINT_SPOT_EXPIRING, "", TaintEffect::NoSchedule)
                .build(),
        );
        c.upsert_node(node("n4").build());
        let add = |c: &mut Cache, p: crate::testing::PodBuilder| c.add_pod(Arc::new(p.build())).unwrap();
        add(&mut c, pod("web-high").node("s1").priority(100));
        add(&mut c, pod("web-low").node("s1"));
        add(&mut c, pod("agent").node("s1").with(|p| p.owner = Some(("DaemonSet".into(), "agent".into()))));
        add(&mut c, pod("static").node("s1").annotation(ANNOTATION_MIRROR, "x"));
        add(&mut c, pod("pinned").node("s1").annotation(ANNOTATION_DO_NOT_EVICT, "true"));
        add(&mut c, pod("unpinned").node("s1").annotation(ANNOTATION_DO_NOT_EVICT, "false"));
        add(&mut c, pod("going").node("s1").with(|p| p.terminating = true));
        // Gang g1: one member on s1, one on n4: both go, once.
        add(&mut c, pod("g1-a").node("s1").with(|p| p.pod_group = Some("g1".into())));
        add(&mut c, pod("g1-b").node("n4").with(|p| p.pod_group = Some("g1".into())));
        // Gang g2: a member on s1, another annotated do-not-evict on n4.
        add(&mut c, pod("g2-a").node("s1").with(|p| p.pod_group = Some("g2".into())));
        add(
            &mut c,
            pod("g2-b").node("n4").with(|p| p.pod_group = Some("g2".into())).annotation(ANNOTATION_DO_NOT_EVICT, ""),
        );
        add(&mut c, pod("later").node("s2"));
        add(&mut c, pod("safe").node("s3"));
        c
    }

    fn names(e: &Eviction) -> Vec<&str> {
        e.pods.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn the_plan_for_a_cluster_with_spot_nodes() {
        let c = cluster();
        let p = plan(&c, &SpotDrainConfig::default(), at(NOW));
        assert_eq!(p.taint, ["s2"]);
        assert_eq!(p.untaint, ["s3"], "out of the window: the taint comes off");
        let draining: Vec<(&str, bool, usize)> =
            p.draining.iter().map(|d| (d.node.as_str(), d.tainted, d.to_evict)).collect();
        assert_eq!(draining, [("s1", true, 4), ("s2", false, 1)]);
        // Lowest priority first; the gang whole; s2's pod waits for its taint.
        let evict: Vec<(Vec<&str>, bool)> = p.evict.iter().map(|e| (names(e), e.ready)).collect();
        assert_eq!(
            evict,
            [
                (vec!["g1-a", "g1-b"], true),
                (vec!["unpinned"], true),
                (vec!["web-low"], true),
                (vec!["web-high"], true),
                (vec!["later"], false)
            ]
        );
        assert_eq!(p.evict[0].gang.as_deref(), Some("default/g1"));
        let mut kept: Vec<String> = p.kept.iter().map(|(p, k)| format!("{}: {k}", p.name)).collect();
        kept.sort();
        assert_eq!(
            kept,
            [
                "agent: a DaemonSet's pod",
                "g2-a: gang default/g2 stays whole: its member default/g2-b is annotated gpu-scheduler.io/do-not-evict",
                "pinned: annotated gpu-scheduler.io/do-not-evict",
                "static: a static pod's mirror",
            ]
        );
    }

    #[test]
    fn nothing_happens_outside_the_window() {
        let c = cluster();
        let cfg = SpotDrainConfig { window: Duration::from_secs(5 * 60), ..Default::default() };
        let p = plan(&c, &cfg, at(NOW));
        assert!(p.evict.is_empty() && p.taint.is_empty() && p.draining.is_empty(), "{p:?}");
        assert_eq!(p.untaint, ["s1", "s3"]);
        // An expired node is drained too.
        let p = plan(&c, &cfg, at("2026-01-01T13:00:00Z"));
        assert_eq!(p.draining.iter().map(|d| d.node.as_str()).collect::<Vec<_>>(), ["s1", "s2"]);
    }

    #[test]
    fn batches_keep_the_order_and_the_allowance() {
        let c = cluster();
        let p = plan(&c, &SpotDrainConfig::default(), at(NOW));
        let batch = |budget, allowance, in_flight| -> Vec<Vec<&str>> {
            take_batch(&p.evict, budget, allowance, in_flight, |_| false).into_iter().map(names).collect()
        };
        assert_eq!(batch(2, 2, 0), [vec!["g1-a", "g1-b"]]);
        assert_eq!(batch(3, 3, 0), [vec!["g1-a", "g1-b"], vec!["unpinned"]]);
        assert!(batch(1, 2, 1).is_empty(), "the gang of 2 waits for room, nothing overtakes it");
        assert_eq!(batch(1, 1, 0), [vec!["g1-a", "g1-b"]], "a gang larger than the allowance goes alone");
        assert!(batch(1, 1, 1).is_empty(), "... when nothing else is in flight");
        assert_eq!(batch(9, 9, 0).len(), 4, "not the pod waiting for its node's taint");
        let skipped = take_batch(&p.evict, 2, 2, 0, |e| e.gang.is_some());
        assert_eq!(skipped.into_iter().map(names).collect::<Vec<_>>(), [vec!["unpinned"], vec!["web-low"]]);
    }

    #[test]
    fn config_validation_names_the_field() {
        SpotDrainConfig::default().validate("spotDrain").unwrap();
        let cases = [
            (SpotDrainConfig { window: Duration::ZERO, ..Default::default() }, "spotDrain.window"),
            (SpotDrainConfig { interval: Duration::ZERO, ..Default::default() }, "spotDrain.interval"),
            (SpotDrainConfig { max_evictions: 0, ..Default::default() }, "spotDrain.maxEvictions"),
        ];
        for (cfg, field) in cases {
            assert_eq!(cfg.validate("spotDrain").unwrap_err().path, field);
        }
    }
}
