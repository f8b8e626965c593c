//! The starvation guard: a GPU pod (or gang) pending for longer than the
//! profile's `starvationGuard.after` gets a node held for it, the node where
//! it would fit soonest; pods of lower or equal priority asking for GPUs do
//! not take that node's GPUs meanwhile (they go elsewhere or wait), so an
//! 8-GPU job is not starved forever by a stream of 1-GPU jobs. The holds are
//! the scheduler's state; cycles get them as [`HeldNodes`], one of the
//! [`NodeHolds`] of the [`CycleState`](crate::framework::CycleState), and
//! the rejection is
//! explained like a filter's ("node(s) held for ml/pretrain since ...").
//!
//! The guard is set per profile (`enabled`, `after`, `maxHeldShare`: the
//! share of the cluster's GPUs held at most). [`Holds::hold`] picks the node
//! among those that rejected the pod only for now (pods leaving can make
//! room there), and a hold keeps off pods asking for GPUs, not of the
//! holder's gang, of priority up to the holder's. A hold ends when its pod
//! leaves the queue.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::Snapshot;
use crate::facts::GPU_RESOURCE;
use crate::framework::{Code, NodeHolds, Status};
use crate::model::Pod;
use crate::time::{MINUTE, Millis};
use gpu_scheduler_model::field::ConfigError;
use gpu_scheduler_model::go_duration;

/// The name held-node rejections are filed under (in explanations, and
/// for the events that release a pod blocked by a hold).
pub const STARVATION_GUARD: &str = "StarvationGuard";

/// `profiles[].starvationGuard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StarvationGuardConfig {
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// How long a GPU pod may wait before a node is held for it.
    #[serde(default = "default_after", with = "go_duration")]
    pub after: std::time::Duration,
    /// The most of the cluster's GPUs that holds may keep, in (0, 1].
    #[serde(default = "default_share")]
    pub max_held_share: f64,
}

fn default_enabled() -> bool {
    true
}

fn default_after() -> std::time::Duration {
    std::time::Duration::from_millis(10 * MINUTE)
}

fn default_share() -> f64 {
    0.2
}

impl Default for StarvationGuardConfig {
    fn default() -> Self {
        StarvationGuardConfig { enabled: true, after: default_after(), max_held_share: default_share() }
    }
}

impl StarvationGuardConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        use crate::bounds::{Interval, MAX_DURATION, duration};
        ConfigError::check(format!("{path}.after"), duration(self.after, crate::bounds::MIN_DURATION, MAX_DURATION))?;
        ConfigError::check(format!("{path}.maxHeldShare"), Interval::above(0.0, 1.0).check(self.max_held_share))?;
        Ok(())
    }

    /// `after` in the engine's time unit.
    pub fn after_ms(&self) -> Millis {
        u64::try_from(self.after.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A node held for a pending pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub node: String,
    /// The holder's uid and `NAMESPACE/NAME`.
    pub holder: String,
    pub pod: String,
    /// Its gang, whose other members may use the node.
    pub group: Option<String>,
    pub priority: i32,
    /// Since when the holder has waited (its first time in the queue).
    pub since: Millis,
    /// The node's allocatable GPUs, counted against the share.
    pub gpus: i64,
}

impl Hold {
    /// Whether the hold keeps `pod` off the node: another pod (not of the
    /// holder's gang), asking for GPUs, of priority up to the holder's.
    pub fn blocks(&self, pod: &Pod) -> bool {
        pod.uid != self.holder
            && pod.requests.scalar(GPU_RESOURCE) > 0
            && pod.priority <= self.priority
            && (self.group.is_none() || pod.group_key() != self.group)
    }

    /// The rejection of a pod this hold blocks.
    pub fn status(&self) -> Status {
        let since = jiff::Timestamp::from_millisecond(i64::try_from(self.since).unwrap_or(i64::MAX))
            .map_or_else(|_| self.since.to_string(), |t| t.to_string());
        Status::new(Code::Unschedulable, format!("node(s) held for {} since {since} (starvation guard)", self.pod))
            .with_plugin(STARVATION_GUARD)
    }
}

/// The holds, by holder uid.
#[derive(Debug, Default)]
pub struct Holds {
    by_holder: HashMap<String, Hold>,
}

impl Holds {
    pub fn is_empty(&self) -> bool {
        self.by_holder.is_empty()
    }

    /// The holder is placed or gone: its node is free again.
    pub fn release(&mut self, holder: &str) -> bool {
        self.by_holder.remove(holder).is_some()
    }

    pub fn get(&self, holder: &str) -> Option<&Hold> {
        self.by_holder.get(holder)
    }

    /// GPUs held, for the `gpu_scheduler_held_gpus` gauge.
    pub fn held_gpus(&self) -> i64 {
        self.by_holder.values().map(|h| h.gpus).sum()
    }

    /// The holds by node, for a cycle; None when there are none.
    pub fn index(&self) -> Option<Arc<HeldNodes>> {
        (!self.by_holder.is_empty()).then(|| {
            Arc::new(HeldNodes { by_node: self.by_holder.values().map(|h| (h.node.clone(), h.clone())).collect() })
        })
    }

    /// Holds (or moves) a node for `pod`, which has waited since `since`
    /// and was rejected by the nodes in `rejected` (snapshot positions).
    /// The node is the one where it would fit soonest: among nodes that
    /// rejected it only for now (`Unschedulable`, not `Unresolvable`: pods
    /// leaving can make room there), held by no one else, with GPUs enough
    /// in all, the one with the most GPUs free, then the fewest pods. None
    /// when no node qualifies or the share would be exceeded.
    pub fn hold(
        &mut self,
        cfg: &StarvationGuardConfig,
        snap: &Snapshot,
        pod: &Pod,
        since: Millis,
        rejected: &[(usize, Status)],
    ) -> Option<&Hold> {
        let want = pod.requests.scalar(GPU_RESOURCE);
        if want <= 0 {
            return None;
        }
        let taken: HashMap<&str, &str> = self
            .by_holder
            .values()
            .filter(|h| h.holder != pod.uid)
            .map(|h| (h.node.as_str(), h.holder.as_str()))
            .collect();
        let best = rejected
            .iter()
            .filter(|(_, s)| s.code == Code::Unschedulable)
            .map(|(i, _)| (*i, &snap.nodes()[*i]))
            .filter(|(_, n)| n.node.allocatable.scalar(GPU_RESOURCE) >= want && !taken.contains_key(n.name()))
            .min_by(|(i, a), (j, b)| {
                b.free(GPU_RESOURCE).cmp(&a.free(GPU_RESOURCE)).then(a.pods.len().cmp(&b.pods.len())).then(i.cmp(j))
            })
            .map(|(_, n)| n)?;
        let gpus = best.node.allocatable.scalar(GPU_RESOURCE);
        let total: i64 = snap.nodes().iter().map(|n| n.node.allocatable.scalar(GPU_RESOURCE)).sum();
        let others: i64 = self.by_holder.values().filter(|h| h.holder != pod.uid).map(|h| h.gpus).sum();
        if (others + gpus) as f64 > cfg.max_held_share * total as f64 {
            return None;
        }
        let hold = Hold {
            node: best.name().to_string(),
            holder: pod.uid.clone(),
            pod: pod.key(),
            group: pod.group_key(),
            priority: pod.priority,
            since,
            gpus,
        };
        self.by_holder.insert(pod.uid.clone(), hold);
        self.by_holder.get(&pod.uid)
    }
}

/// The holds a cycle sees, by node name.
#[derive(Debug, Clone, Default)]
pub struct HeldNodes {
    by_node: HashMap<String, Hold>,
}

impl HeldNodes {
    /// The hold that keeps `pod` off `node`, if any.
    pub fn blocking(&self, node: &str, pod: &Pod) -> Option<&Hold> {
        self.by_node.get(node).filter(|h| h.blocks(pod))
    }
}

impl NodeHolds for HeldNodes {
    fn blocks(&self, node: &str, pod: &Pod) -> bool {
        self.blocking(node, pod).is_some()
    }

    fn blocking(&self, node: &str, pod: &Pod) -> Option<Status> {
        HeldNodes::blocking(self, node, pod).map(Hold::status)
    }

    fn held_nodes(&self) -> Vec<&str> {
        self.by_node.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    const GPU: &str = GPU_RESOURCE;

    #[test]
    fn the_node_that_fits_soonest_is_held_within_the_share() {
        let nodes = vec![
            node("busy").resource(GPU, 8).build(),
            node("half").resource(GPU, 8).build(),
            node("small").resource(GPU, 4).build(),
            node("tainted").resource(GPU, 8).build(),
        ];
        let pods = vec![
            pod("a").node("busy").resource(GPU, 7).arc(),
            pod("b").node("half").resource(GPU, 4).arc(),
            pod("c").node("tainted").resource(GPU, 1).arc(),
        ];
        let snap = Snapshot::from_parts(nodes, pods);
        let big = pod("big").resource(GPU, 8).priority(5).build();
        let pos = |n: &str| snap.position(n).unwrap_or(usize::MAX);
        let rejected = vec![
            (pos("busy"), Status::unschedulable("Insufficient nvidia.com/gpu")),
            (pos("half"), Status::unschedulable("Insufficient nvidia.com/gpu")),
            (pos("small"), Status::unresolvable("Insufficient nvidia.com/gpu")),
            (pos("tainted"), Status::unresolvable("node(s) had untolerated taint(s)")),
        ];
        let cfg = StarvationGuardConfig { max_held_share: 0.5, ..Default::default() };
        let mut holds = Holds::default();
        let held = holds.hold(&cfg, &snap, &big, 1_000, &rejected).map(|h| h.node.clone());
        assert_eq!(held.as_deref(), Some("half"), "most GPUs free among nodes pods leaving can free");
        assert_eq!(holds.held_gpus(), 8);

        // Who the hold keeps off the node.
        let index = holds.index().unwrap_or_default();
        let small = |p: i32| pod("small").resource(GPU, 1).priority(p).build();
        assert!(index.blocking("half", &small(5)).is_some(), "equal priority");
        assert!(index.blocking("half", &small(6)).is_none(), "higher priority");
        assert!(index.blocking("half", &pod("web").priority(0).build()).is_none(), "no GPUs asked");
        assert!(index.blocking("half", &big).is_none(), "the holder itself");
        assert!(index.blocking("busy", &small(0)).is_none(), "another node");
        let blocked = index.blocking("half", &small(0)).map(Hold::status).unwrap_or_else(Status::success);
        assert_eq!(blocked.message(), "node(s) held for default/big since 1970-01-01T00:00:01Z (starvation guard)");

        // A second starving pod may not hold past the share: 8 of 28 GPUs
        // are held, another 8 would pass 50 %. With room it takes the next
        // node, not the held one.
        let other = pod("other").resource(GPU, 8).build();
        assert!(holds.hold(&cfg, &snap, &other, 2_000, &rejected).is_none());
        let roomy = StarvationGuardConfig { max_held_share: 1.0, ..Default::default() };
        let held = holds.hold(&roomy, &snap, &other, 2_000, &rejected).map(|h| h.node.clone());
        assert_eq!(held.as_deref(), Some("busy"));
        assert_eq!(holds.held_gpus(), 16);
        assert!(holds.release("big") && holds.release("other"));
        assert!(holds.is_empty());
    }

    #[test]
    fn config_is_checked() {
        let bad = [
            (StarvationGuardConfig { after: std::time::Duration::ZERO, ..Default::default() }, "sg.after"),
            (StarvationGuardConfig { max_held_share: 0.0, ..Default::default() }, "sg.maxHeldShare"),
            (StarvationGuardConfig { max_held_share: 1.5, ..Default::default() }, "sg.maxHeldShare"),
        ];
        for (cfg, path) in bad {
            assert_eq!(cfg.validate("sg").map_err(|e| e.path), Err(path.to_string()));
        }
        assert!(StarvationGuardConfig::default().validate("sg").is_ok());
    }
}
