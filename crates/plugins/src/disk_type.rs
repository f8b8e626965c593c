//! DiskType: the article's NodeSanitizer bonus for SSD nodes ("+10 for
//! `disk-type=ssd`", DESIGN.md §4): 100 on nodes whose label `disk-type`
//! is the preferred type, 0 elsewhere; the default weight 0.1 makes it the
//! article's +10. Enough to break ties, never to outweigh a real reason.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::skip_if;

pub const NAME: &str = "DiskType";

/// `DiskTypeArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DiskTypeArgs {
    /// The `disk-type` label value that scores 100 (any case).
    #[serde(default = "default_preferred")]
    pub preferred: String,
}

fn default_preferred() -> String {
    "ssd".into()
}

impl Default for DiskTypeArgs {
    fn default() -> Self {
        DiskTypeArgs { preferred: default_preferred() }
    }
}

#[derive(Debug, Clone)]
pub struct DiskType {
    /// Lower case, as the facts store the label.
    preferred: String,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: DiskTypeArgs = decode_args(args)?;
    let preferred = args.preferred.trim().to_ascii_lowercase();
    if preferred.is_empty() {
        return Err(ArgsError::new("preferred", "must not be empty"));
    }
    Ok(Arc::new(DiskType { preferred }))
}

impl Plugin for DiskType {
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

impl PreScorePlugin for DiskType {
    /// No SSD node at all: every node would score 0. (Other preferred
    /// types are not counted, so they are always scored.)
    fn pre_score(&self, _state: &mut CycleState, _pod: &Pod, nodes: NodeList<'_>) -> Status {
        skip_if(self.preferred == "ssd" && nodes.snapshot().fact_counts().ssd == 0)
    }
}

impl ScorePlugin for DiskType {
    fn score(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        // SSD, the default, is in the summary: no visit to the NodeInfo.
        let hit = if self.preferred == "ssd" {
            node.summary().ssd
        } else {
            node.facts.disk_type.as_deref() == Some(self.preferred.as_str())
        };
        Ok(if hit { MAX_NODE_SCORE } else { 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::LABEL_DISK_TYPE;
    use framework::testing::{node, pod};

    #[test]
    fn score_table() {
        let cases = [
            ("ssd", None, Some("ssd"), 100),
            ("label in upper case", None, Some("SSD"), 100),
            ("hdd", None, Some("hdd"), 0),
            ("no label", None, None, 0),
            ("nvme preferred, nvme node", Some("NVMe"), Some("nvme"), 100),
            ("nvme preferred, ssd node", Some("nvme"), Some("ssd"), 0),
        ];
        for (name, preferred, label, want) in cases {
            let args = preferred.map(|p| serde_json::json!({ "preferred": p }));
            let plugin = new(args.as_ref()).unwrap();
            let mut n = node("n");
            if let Some(l) = label {
                n = n.label(LABEL_DISK_TYPE, l);
            }
            let info = n.info();
            let got = plugin.as_score().unwrap().score(&CycleState::new(), &pod("p").build(), &info.view());
            assert_eq!(got, Ok(want), "{name}");
        }
    }

    #[test]
    fn skips_without_ssd_nodes() {
        use framework::cache::Snapshot;
        let p = new(None).unwrap();
        for (nodes, skip) in [
            (vec![node("a").label(LABEL_DISK_TYPE, "hdd").build()], true),
            (vec![node("a").build(), node("b").label(LABEL_DISK_TYPE, "ssd").build()], false),
        ] {
            let snap = Snapshot::from_parts(nodes, vec![]);
            let s = p.as_pre_score().unwrap().pre_score(&mut CycleState::new(), &pod("p").build(), snap.node_list());
            assert_eq!(s.is_skip(), skip);
        }
    }

    #[test]
    fn args_errors_name_the_field() {
        for (args, field) in [
            (serde_json::json!({"preferred": " "}), "preferred"),
            (serde_json::json!({"preferred": 1}), "preferred"),
            (serde_json::json!({"bonus": 10}), "bonus"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
