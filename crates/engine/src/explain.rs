//! Decision records: for every scheduling decision, why each node was
//! rejected (plugin and reason) or how it scored (each plugin's raw,
//! normalised and weighted score), and kube-scheduler's summary message
//! for unschedulable pods.
//!
//! [`FitError`]'s message counts the reasons over the nodes and sorts them
//! as strings, exactly as kube-scheduler does. A [`DecisionRecord`] keeps
//! nodes as snapshot positions beside the snapshot's shared name list, so
//! recording copies no strings and touches no NodeInfo; nodes never
//! evaluated (a partial search) are not in it. It expands into a
//! serialisable [`Explanation`]: the selected node first, then the feasible
//! nodes by total, then the rejected ones with the plugin and reasons.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::cache::NodeNames;
use crate::framework::{Code, Status};
// A PostFilter's result carries its record; explanations show it.
pub use crate::framework::{PreemptionCandidate, PreemptionRecord};
use crate::time::Millis;

/// Why no node was found.
#[derive(Debug, Clone)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// A PreFilter rejection applies to every node and replaces the histogram.
    pub pre_filter: Option<Status>,
    /// Nodes rejected by a Filter plugin (by snapshot position).
    pub rejected: Vec<(usize, Status)>,
    /// Nodes never evaluated because PreFilter narrowed the candidates (or
    /// a gang's topology domain excluded them); each group counts under its
    /// status (kube's "absent nodes" status).
    pub absent: Vec<(usize, Status)>,
    pub post_filter_msg: Option<String>,
}

impl FitError {
    /// Plugins that rejected the pod: events they registered can requeue it.
    pub fn unschedulable_plugins(&self) -> HashSet<&'static str> {
        let mut set: HashSet<&'static str> = self.rejected.iter().map(|(_, s)| s.plugin).collect();
        set.extend(self.pre_filter.iter().map(|s| s.plugin));
        set.extend(self.absent.iter().map(|(_, s)| s.plugin));
        set.retain(|p| !p.is_empty());
        set
    }

    /// The earliest time a rejection lapses by itself, if any does: the
    /// pod is tried again then, event or not.
    pub fn retry_at(&self) -> Option<Millis> {
        let statuses = self.rejected.iter().chain(&self.absent).map(|(_, s)| s).chain(&self.pre_filter);
        statuses.filter_map(|s| s.retry_at).min()
    }

    /// kube-scheduler's message: "0/5 nodes are available: 2 node(s) had
    /// untolerated taint(s), 3 Insufficient cpu." — reasons counted and
    /// sorted as strings, as kube does.
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        if let Some(pf) = &self.pre_filter {
            msg.push_str(&format!(" {}.", pf.message()));
        } else {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for (_, s) in &self.rejected {
                for r in &s.reasons {
                    *counts.entry(r.as_ref()).or_default() += 1;
                }
            }
            for (n, s) in &self.absent {
                for r in &s.reasons {
                    *counts.entry(r.as_ref()).or_default() += n;
                }
            }
            let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
            parts.sort();
            if !parts.is_empty() {
                msg.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        // PostFilter messages end with their own period, as kube's do
        // ("preemption: 0/3 nodes are available: ...").
        if let Some(pf) = &self.post_filter_msg {
            msg.push_str(&format!(" {pf}"));
        }
        msg
    }
}

/// One score plugin's column of a decision.
#[derive(Debug, Clone)]
pub struct ScoreColumn {
    pub plugin: &'static str,
    pub weight: f64,
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
}

/// The full record of one decision. Nodes are kept as shared NodeInfos,
/// so recording costs no string copies in the hot path.
#[derive(Debug, Clone, Default)]
pub struct DecisionRecord {
    pub pod: String,
    pub profile: String,
    /// The profile's `policySwitch` rule in force, if any.
    pub policy: Option<String>,
    pub node: Option<String>,
    pub message: Option<String>,
    pub total_nodes: usize,
    pub evaluated_nodes: usize,
    /// The snapshot's node names: `feasible` and `rejected` hold positions
    /// in it, so recording touches no NodeInfo.
    pub nodes: NodeNames,
    /// Nodes that passed every filter (those scored, in order).
    pub feasible: Vec<usize>,
    pub rejected: Vec<(usize, Status)>,
    pub pre_filter_rejection: Option<Status>,
    pub columns: Vec<ScoreColumn>,
    pub totals: Vec<f64>,
    /// Per feasible node (same order as `feasible`), what plugins said
    /// about it beyond their scores; filled only for explained decisions.
    pub details: Vec<Vec<Detail>>,
    /// For a gang member decided with its gang: the gang's decision.
    pub gang: Option<GangDecision>,
    /// When preemption ran: its candidates and the victims chosen.
    pub preemption: Option<PreemptionRecord>,
}

/// A gang decided in one cycle: where each member went, or why not.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GangDecision {
    /// `NAMESPACE/NAME` of the PodGroup.
    pub group: String,
    pub min_member: u32,
    /// Members already bound or assumed before this decision.
    pub placed_before: u32,
    /// The topology domain the gang was placed in (`key=value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub members: Vec<GangMember>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GangMember {
    pub pod: String,
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One value a plugin reported about a node (e.g. a rule and its result).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Detail {
    pub plugin: String,
    pub name: String,
    pub value: String,
}

/// A plugin's part of one node's score.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PluginScore {
    pub plugin: String,
    pub raw: i64,
    pub normalized: i64,
    pub weight: f64,
    pub weighted: f64,
}

/// One node's line in an explanation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    pub node: String,
    /// `selected`, `feasible`, `rejected` or `error`. Nodes a partial search
    /// (percentageOfNodesToScore) did not reach are not listed.
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<PluginScore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Detail>,
}

/// A serialisable explanation of one decision (read back by
/// `gpu-scheduler explain`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub pod: String,
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub total_nodes: usize,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
    pub nodes: Vec<NodeVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangDecision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionRecord>,
}

impl DecisionRecord {
    /// Drops what only an explanation reads (each node's result and
    /// scores), keeping the outcome and the counts. A driver calls it once
    /// it has explained the decision or will not: a burst queues thousands
    /// of decided pods behind the bindings in flight, and at 5,000 nodes
    /// each record's scores are tens of KiB.
    pub fn keep_outcome_only(&mut self) {
        self.nodes = NodeNames::default();
        self.feasible = Vec::new();
        self.rejected = Vec::new();
        self.columns = Vec::new();
        self.totals = Vec::new();
        self.details = Vec::new();
    }

    /// The name of the node at snapshot position `i`.
    pub fn node_name(&self, i: usize) -> &str {
        self.nodes.get(i).map_or("", String::as_str)
    }

    /// The names of the feasible nodes, in the order they were scored.
    pub fn feasible_names(&self) -> impl Iterator<Item = &str> {
        self.feasible.iter().map(|&i| self.node_name(i))
    }

    /// Expands the record into per-node verdicts: the selected node first,
    /// then feasible nodes by total score, then rejected nodes.
    pub fn explain(&self) -> Explanation {
        let mut feasible: Vec<NodeVerdict> = self
            .feasible
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let scores = self
                    .columns
                    .iter()
                    .filter(|c| i < c.raw.len())
                    .map(|c| PluginScore {
                        plugin: c.plugin.to_string(),
                        raw: c.raw[i],
                        normalized: c.normalized[i],
                        weight: c.weight,
                        weighted: c.normalized[i] as f64 * c.weight,
                    })
                    .collect();
                let name = self.node_name(*n);
                let selected = self.node.as_deref() == Some(name);
                NodeVerdict {
                    node: name.to_string(),
                    verdict: if selected { "selected" } else { "feasible" }.into(),
                    plugin: None,
                    reasons: Vec::new(),
                    scores,
                    total: self.totals.get(i).copied(),
                    details: self.details.get(i).cloned().unwrap_or_default(),
                }
            })
            .collect();
        feasible.sort_by(|a, b| {
            (b.verdict == "selected")
                .cmp(&(a.verdict == "selected"))
                .then(b.total.unwrap_or(0.0).total_cmp(&a.total.unwrap_or(0.0)))
                .then(a.node.cmp(&b.node))
        });
        let mut rejected: Vec<NodeVerdict> = self
            .rejected
            .iter()
            .map(|(n, s)| NodeVerdict {
                node: self.node_name(*n).to_string(),
                verdict: if s.code == Code::Error { "error" } else { "rejected" }.into(),
                plugin: Some(s.plugin.to_string()),
                reasons: s.reasons.iter().map(|r| r.to_string()).collect(),
                scores: Vec::new(),
                total: None,
                details: Vec::new(),
            })
            .collect();
        rejected.sort_by(|a, b| a.node.cmp(&b.node));
        feasible.extend(rejected);
        Explanation {
            pod: self.pod.clone(),
            profile: self.profile.clone(),
            policy: self.policy.clone(),
            node: self.node.clone(),
            message: self.message.clone(),
            total_nodes: self.total_nodes,
            evaluated_nodes: self.evaluated_nodes,
            feasible_nodes: self.feasible.len(),
            nodes: feasible,
            gang: self.gang.clone(),
            preemption: self.preemption.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_counts_and_sorts_reasons_like_kube() {
        let fit = |reasons: &[&'static str], plugin| {
            let mut s = Status::unschedulable(reasons[0]).with_plugin(plugin);
            s.reasons.extend(reasons[1..].iter().map(|r| (*r).into()));
            s
        };
        let err = FitError {
            num_all_nodes: 5,
            pre_filter: None,
            rejected: vec![
                (0, fit(&["Insufficient nvidia.com/gpu"], "NodeResourcesFit")),
                (1, fit(&["Insufficient nvidia.com/gpu", "Insufficient cpu"], "NodeResourcesFit")),
                (2, fit(&["Insufficient nvidia.com/gpu"], "NodeResourcesFit")),
                (3, fit(&["node(s) had untolerated taint(s)"], "TaintToleration")),
                (4, fit(&["node(s) had untolerated taint(s)"], "TaintToleration")),
            ],
            absent: Vec::new(),
            post_filter_msg: None,
        };
        assert_eq!(
            err.message(),
            "0/5 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/gpu."
        );
        assert_eq!(err.unschedulable_plugins(), ["NodeResourcesFit", "TaintToleration"].into());
    }

    #[test]
    fn pre_filter_message_replaces_histogram() {
        let err = FitError {
            num_all_nodes: 3,
            pre_filter: Some(Status::unresolvable("node(s) didn't match Pod's node affinity/selector")),
            rejected: vec![],
            absent: Vec::new(),
            post_filter_msg: None,
        };
        assert_eq!(err.message(), "0/3 nodes are available: node(s) didn't match Pod's node affinity/selector.");
    }

    #[test]
    fn keeping_the_outcome_only_drops_every_per_node_part() {
        let mut r = DecisionRecord {
            pod: "ns/p".into(),
            profile: "gpu-scheduler".into(),
            node: Some("n2".into()),
            total_nodes: 3,
            evaluated_nodes: 3,
            nodes: NodeNames::from(vec!["n1".to_string(), "n2".into(), "n3".into()]),
            feasible: vec![1, 2],
            rejected: vec![(0, Status::unschedulable("Insufficient cpu"))],
            columns: vec![ScoreColumn { plugin: "P", weight: 1.0, raw: vec![1, 2], normalized: vec![50, 100] }],
            totals: vec![50.0, 100.0],
            details: vec![Vec::new(), Vec::new()],
            ..Default::default()
        };
        r.keep_outcome_only();
        assert_eq!((r.pod.as_str(), r.node.as_deref(), r.total_nodes, r.evaluated_nodes), ("ns/p", Some("n2"), 3, 3));
        let left =
            r.nodes.len() + r.feasible.len() + r.rejected.len() + r.columns.len() + r.totals.len() + r.details.len();
        assert_eq!(left, 0);
    }
}
