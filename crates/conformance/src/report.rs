//! What a reader gets: for a disagreement, both decisions, our per-node
//! totals and per-plugin scores, kube's per-plugin scores when its log has
//! them, and the scenario as YAML; for the whole run, a summary (JSON and
//! Markdown) under `target/conformance/`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use gpu_scheduler::engine::explain::Explanation;
use serde::Serialize;

use crate::Error;
use crate::compare::{Verdict, top_nodes};
use crate::runner::Outcome;
use crate::scenario::Scenario;

/// kube-scheduler's per-plugin scores for one pod, from its `-v=10` log
/// lines `"Plugin scored node for pod" pod="NS/NAME" plugin="P"
/// node="N" score=S`: node → plugin → score.
pub fn kube_scores(log: &str, pod: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let want = format!("pod=\"{pod}\"");
    for line in log.lines().filter(|l| l.contains("Plugin scored node for pod") && l.contains(&want)) {
        let (Some(plugin), Some(node), Some(score)) =
            (field(line, "plugin"), field(line, "node"), field(line, "score"))
        else {
            continue;
        };
        if let Ok(score) = score.parse() {
            out.entry(node).or_default().insert(plugin, score);
        }
    }
    out
}

/// The value of `key=VALUE` or `key="VALUE"` in a klog line.
fn field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    if let Some(quoted) = rest.strip_prefix('"') {
        quoted.split('"').next().map(str::to_string)
    } else {
        rest.split_whitespace().next().map(str::to_string)
    }
}

/// Our decision, node by node: verdict, total and each plugin's weighted
/// score, or the rejecting plugin's reasons.
pub fn our_table(e: &Explanation) -> String {
    let mut out = String::new();
    for n in &e.nodes {
        let _ = write!(out, "  {:<14} {:<9}", n.node, n.verdict);
        match n.total {
            Some(t) => {
                let _ = write!(out, " total {t:>6.1} ");
                for s in &n.scores {
                    let _ = write!(out, " {}={:.0}", s.plugin, s.weighted);
                }
            }
            None if !n.reasons.is_empty() => {
                let _ = write!(out, " {}: {}", n.plugin.as_deref().unwrap_or("-"), n.reasons.join(", "));
            }
            None => {}
        }
        out.push('\n');
    }
    out
}

/// The report of one disagreement.
pub fn disagreement(
    s: &Scenario,
    outcome: &Outcome,
    kube_scores: &BTreeMap<String, BTreeMap<String, i64>>,
) -> Result<String, Error> {
    let why = match &outcome.verdict {
        Verdict::Disagree(w) | Verdict::ByDesign(w) => w.as_str(),
        Verdict::Agree => "agree",
    };
    let mut out = format!("=== {}: DIVERGENCE: {why}\n", s.name);
    let _ = writeln!(out, "gpu-scheduler:  {} (top nodes {:?})", outcome.ours, top_nodes(&outcome.explanation));
    out.push_str(&our_table(&outcome.explanation));
    let _ = writeln!(out, "kube-scheduler: {}", outcome.kube);
    for (node, plugins) in kube_scores {
        let total: i64 = plugins.values().sum();
        let parts: Vec<String> = plugins.iter().map(|(p, v)| format!("{p}={v}")).collect();
        let _ = writeln!(out, "  {node:<14} raw scores (before weights), sum {total}: {}", parts.join(" "));
    }
    out.push_str("scenario:\n");
    out.push_str(&s.to_yaml()?);
    Ok(out)
}

/// One scenario's line in the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub name: String,
    pub ours: String,
    pub kube: String,
    /// "agree", "divergence: ...", "timing" (agreed when run again after
    /// a stale view) or "error: ..."; an agreement by design adds ", by
    /// design (...)" naming the policy.
    pub result: String,
    pub millis: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// The release of the oracle (and of the control plane), e.g. v1.36.3.
    pub kube_version: String,
    pub scenarios: usize,
    pub agreed_scheduled: usize,
    pub agreed_unschedulable: usize,
    pub divergences: Vec<String>,
    /// Agreements that needed a by-design difference (docs/POLICIES.md):
    /// name and the difference.
    pub by_design: Vec<String>,
    /// Scenarios run again after a stale view or a disagreement, which
    /// then agreed.
    pub rerun_then_agreed: Vec<String>,
    pub errors: Vec<String>,
    pub seconds: f64,
    pub entries: Vec<Entry>,
}

impl Summary {
    pub fn add(&mut self, e: Entry, agreed_scheduled: Option<bool>) {
        self.scenarios += 1;
        match agreed_scheduled {
            Some(true) => self.agreed_scheduled += 1,
            Some(false) => self.agreed_unschedulable += 1,
            None => {}
        }
        if e.result.starts_with("divergence") {
            self.divergences.push(e.name.clone());
        }
        if let Some((_, why)) = e.result.split_once(", by design") {
            self.by_design.push(format!("{}: by design{why}", e.name));
        }
        if e.result.starts_with("timing") {
            self.rerun_then_agreed.push(e.name.clone());
        } else if e.result.starts_with("error") {
            self.errors.push(format!("{}: {}", e.name, e.result));
        }
        self.entries.push(e);
    }

    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Conformance: gpu-scheduler against kube-scheduler {}\n\n{} scenarios in {:.0} s: {} placed by both (kube's node among our top nodes), {} unschedulable for both with the same message ({} of them differing only by design, docs/POLICIES.md), {} divergences, {} errors; {} agreed only when run again (a watch event late).\n\n",
            self.kube_version,
            self.scenarios,
            self.seconds,
            self.agreed_scheduled,
            self.agreed_unschedulable,
            self.by_design.len(),
            self.divergences.len(),
            self.errors.len(),
            self.rerun_then_agreed.len()
        );
        out.push_str("| scenario | gpu-scheduler | kube-scheduler | result | ms |\n|---|---|---|---|---|\n");
        for e in &self.entries {
            let cell = |s: &str| s.replace('|', "\\|");
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                e.name,
                cell(&e.ours),
                cell(&e.kube),
                cell(&e.result),
                e.millis
            );
        }
        out
    }

    /// Writes `summary.json` and `summary.md` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(dir.join("summary.json"), json).map_err(Error::io("writing summary.json"))?;
        std::fs::write(dir.join("summary.md"), self.markdown()).map_err(Error::io("writing summary.md"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_scores_from_a_verbose_log() {
        let log = r#"I0101 10:00:00.000001   1 schedule_one.go:900] "Plugin scored node for pod" pod="s1/incoming-kube" plugin="NodeAffinity" node="s1-n0" score=100
I0101 10:00:00.000002   1 schedule_one.go:900] "Plugin scored node for pod" pod="s1/incoming-kube" plugin="TaintToleration" node="s1-n0" score=0
I0101 10:00:00.000003   1 schedule_one.go:900] "Plugin scored node for pod" pod="s2/incoming-kube" plugin="NodeAffinity" node="s2-n0" score=7
I0101 10:00:00.000004   1 schedule_one.go:900] "Plugin scored node for pod" pod="s1/incoming-kube" plugin="NodeAffinity" node="s1-n1" score=50
I0101 10:00:00.000005   1 schedule_one.go:910] "Calculated node's final score for pod" pod="s1/incoming-kube" node="s1-n1" score=150
"#;
        let got = kube_scores(log, "s1/incoming-kube");
        let want: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::from([
            ("s1-n0".into(), BTreeMap::from([("NodeAffinity".into(), 100), ("TaintToleration".into(), 0)])),
            ("s1-n1".into(), BTreeMap::from([("NodeAffinity".into(), 50)])),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn summary_counts_each_kind_of_result() {
        let mut s = Summary::default();
        let e = |name: &str, result: &str| Entry {
            name: name.into(),
            ours: "o".into(),
            kube: "k".into(),
            result: result.into(),
            millis: 1,
        };
        s.add(e("a", "agree"), Some(true));
        s.add(e("b", "agree"), Some(false));
        s.add(e("c", "divergence: x"), None);
        s.add(e("d", "timing"), Some(true));
        s.add(e("e", "error: boom"), None);
        s.add(e("f", "agree, by design (P)"), Some(false));
        assert_eq!((s.scenarios, s.agreed_scheduled, s.agreed_unschedulable), (6, 2, 2));
        assert_eq!(s.by_design, ["f: by design (P)"]);
        assert_eq!(s.divergences, ["c"]);
        assert_eq!(s.rerun_then_agreed, ["d"]);
        assert_eq!(s.errors, ["e: error: boom"]);
        assert!(s.markdown().contains("6 scenarios"), "{}", s.markdown());
    }
}
