//! ZoneSpread: the article's "spread a service over availability zones"
//! (DESIGN.md §4). For a pod with a service identity (namespace + `app`
//! label, else `app.kubernetes.io/name`): 100 on a node in a zone without
//! a pod of that service, else max(0, 100 − `penaltyPerPod` × the
//! service's pods in that zone). The article subtracted per zone the
//! service was in, the same for every used zone; counting pods per zone
//! makes the emptier zone win (docs/POLICIES.md). Nodes without
//! `topology.kubernetes.io/zone` share one zone of their own.
//!
//! The counts come from the cache, kept as pods come and go; PreScore
//! copies the service's few zones once per pod.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::facts::service_identity;
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

pub const NAME: &str = "ZoneSpread";

/// `ZoneSpreadArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ZoneSpreadArgs {
    /// Points off per pod of the service already in the node's zone.
    #[serde(default = "default_penalty")]
    pub penalty_per_pod: i64,
}

fn default_penalty() -> i64 {
    20
}

impl Default for ZoneSpreadArgs {
    fn default() -> Self {
        ZoneSpreadArgs { penalty_per_pod: default_penalty() }
    }
}

#[derive(Debug, Clone)]
pub struct ZoneSpread {
    penalty_per_pod: i64,
}

/// The service's pods per zone ("" for nodes without a zone).
struct ZoneCounts(Vec<(Arc<str>, u32)>);

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: ZoneSpreadArgs = decode_args(args)?;
    if !(0..=MAX_NODE_SCORE).contains(&args.penalty_per_pod) {
        return Err(ArgsError::new("penaltyPerPod", format!("must be from 0 to 100, got {}", args.penalty_per_pod)));
    }
    Ok(Arc::new(ZoneSpread { penalty_per_pod: args.penalty_per_pod }))
}

impl Plugin for ZoneSpread {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A score rejects nothing: no event needs to requeue pods for it.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for ZoneSpread {
    /// Skips pods without a service, and services with no pod yet: every
    /// node would score 100.
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        let Some(id) = service_identity(pod) else { return Status::skip() };
        match nodes.snapshot().service(&id) {
            Some(stats) if !stats.zones.is_empty() => {
                state.write(ZoneCounts(stats.zones.clone()));
                Status::success()
            }
            _ => Status::skip(),
        }
    }
}

impl ScorePlugin for ZoneSpread {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        let Some(ZoneCounts(zones)) = state.read::<ZoneCounts>() else {
            return Err(Status::error("ZoneSpread: PreScore did not run"));
        };
        let zone = node.facts.zone.as_deref().unwrap_or("");
        let count = zones.iter().find(|(z, _)| &**z == zone).map_or(0, |(_, n)| i64::from(*n));
        Ok((MAX_NODE_SCORE - self.penalty_per_pod * count).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::testing::{node, pod};

    /// (name, pod, running pods as (node, app), scores of a / b / c)
    type Case<'a> = (&'static str, &'a Pod, &'static [(&'static str, &'static str)], Option<[i64; 3]>);

    /// Scores of nodes a (zone z1), b (z2), c (no zone) for `p`, with the
    /// `running` pods as (node, app) pairs; None when PreScore skips.
    fn scores(plugin: &Arc<dyn Plugin>, p: &Pod, running: &[(&str, &str)]) -> Option<[i64; 3]> {
        let nodes = vec![node("a").zone("z1").build(), node("b").zone("z2").build(), node("c").build()];
        let pods = running
            .iter()
            .enumerate()
            .map(|(i, (n, app))| pod(&format!("r{i}")).label("app", app).node(n).arc())
            .collect();
        let snap = Snapshot::from_parts(nodes, pods);
        let mut state = CycleState::new();
        if plugin.as_pre_score().unwrap().pre_score(&mut state, p, snap.node_list()).is_skip() {
            return None;
        }
        let s = plugin.as_score().unwrap();
        Some(["a", "b", "c"].map(|n| s.score(&state, p, &snap.view(snap.position(n).unwrap())).unwrap()))
    }

    #[test]
    fn score_table() {
        let plugin = new(None).unwrap();
        let web = pod("p").label("app", "web").build();
        let cases: &[Case] = &[
            ("no pod of the service yet: skipped", &web, &[], None),
            ("one pod in z1", &web, &[("a", "web")], Some([80, 100, 100])),
            ("two in z1, one in z2", &web, &[("a", "web"), ("a", "web"), ("b", "web")], Some([60, 80, 100])),
            ("other services do not count", &web, &[("a", "api"), ("b", "web")], Some([100, 80, 100])),
            ("unlabelled nodes share a zone", &web, &[("c", "web"), ("c", "web")], Some([100, 100, 60])),
            ("penalty clamps at 0", &web, &[("a", "web"); 6], Some([0, 100, 100])),
        ];
        for (name, p, running, want) in cases {
            assert_eq!(scores(&plugin, p, running), *want, "{name}");
        }
        let no_service = pod("p").build();
        assert_eq!(scores(&plugin, &no_service, &[("a", "web")]), None, "pods without a service skip");
        let by_name = pod("p").label("app.kubernetes.io/name", "web").build();
        assert_eq!(scores(&plugin, &by_name, &[("a", "web")]), Some([80, 100, 100]), "app.kubernetes.io/name");
    }

    #[test]
    fn args() {
        let plugin = new(Some(&serde_json::json!({"penaltyPerPod": 50}))).unwrap();
        let web = pod("p").label("app", "web").build();
        assert_eq!(scores(&plugin, &web, &[("a", "web")]), Some([50, 100, 100]));
        for (args, field) in [
            (serde_json::json!({"penaltyPerPod": 101}), "penaltyPerPod"),
            (serde_json::json!({"penaltyPerPod": -1}), "penaltyPerPod"),
            (serde_json::json!({"penalty": 20}), "penalty"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
