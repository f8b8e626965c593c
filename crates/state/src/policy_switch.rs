//! Policy switching by live load (`profiles[].policySwitch`): a profile
//! names rules such as "GPU allocation at least 85 % → fragmentation with a
//! higher weight" or "below 50 % → spread"; each cycle reads the
//! cluster's load from the snapshot ([`Load`], kept incrementally) and runs
//! the pod with the profile as the active rule changes it. A rule is left
//! only once the load is past its threshold by `hysteresis` points, so a
//! load wobbling around a threshold does not flap between policies.
//!
//! [`Load`] (GPU and CPU allocated against capacity) is updated with each
//! changed NodeInfo, as the fact counts are, so reading it is free;
//! [`PolicySwitchConfig::next`] gives the rule in force, and each change is
//! a [`PolicySwitched`] for the driver to report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::devices::GpuPlacement;
use crate::node_info::Load;
use gpu_scheduler_model::field::ConfigError;

/// `profiles[].policySwitch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySwitchConfig {
    /// Percentage points the load must move back past the active rule's
    /// threshold before the rule is left.
    #[serde(default = "default_hysteresis")]
    pub hysteresis: f64,
    /// Tried in order when no rule is active; the first that holds wins.
    pub rules: Vec<PolicyRule>,
}

fn default_hysteresis() -> f64 {
    5.0
}

/// One alternative policy and when it applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyRule {
    /// Names the rule in logs, Events and metrics.
    pub name: String,
    pub when: LoadCondition,
    /// Replaces the profile's `gpuPlacement` while the rule is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_placement: Option<GpuPlacement>,
    /// Score weights by plugin name, as `plugins.score.enabled` would set
    /// them (a plugin not in the profile's score list is added).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, f64>,
}

/// `metric` at least `atLeast`, or below `below` (exactly one of them), in
/// percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadCondition {
    pub metric: LoadMetric,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LoadMetric {
    /// GPU capacity allocated (shares counted), % of the cluster's GPUs.
    GpuAllocation,
    /// CPU requested, % of the cluster's allocatable CPU.
    CpuAllocation,
}

impl LoadMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMetric::GpuAllocation => "gpuAllocation",
            LoadMetric::CpuAllocation => "cpuAllocation",
        }
    }
}

impl PolicySwitchConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if !(self.hysteresis.is_finite() && (0.0..=50.0).contains(&self.hysteresis)) {
            return Err(ConfigError::new(format!("{path}.hysteresis"), "must be between 0 and 50 (percentage points)"));
        }
        if self.rules.is_empty() {
            return Err(ConfigError::new(format!("{path}.rules"), "at least one rule is required"));
        }
        let mut names = std::collections::HashSet::new();
        for (k, r) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{k}]");
            if r.name.trim().is_empty() {
                return Err(ConfigError::new(format!("{at}.name"), "must not be empty"));
            }
            if !names.insert(r.name.as_str()) {
                return Err(ConfigError::new(format!("{at}.name"), format!("duplicate rule name {:?}", r.name)));
            }
            let (field, threshold) = match (r.when.at_least, r.when.below) {
                (Some(t), None) => ("atLeast", t),
                (None, Some(t)) => ("below", t),
                _ => return Err(ConfigError::new(format!("{at}.when"), "needs exactly one of atLeast and below")),
            };
            ConfigError::check(
                format!("{at}.when.{field}"),
                crate::bounds::Interval::closed(0.0, 100.0).check(threshold).map_err(|m| format!("{m} (percent)")),
            )?;
            if r.gpu_placement.is_none() && r.weights.is_empty() {
                return Err(ConfigError::new(at, "changes nothing: set gpuPlacement or weights"));
            }
            for (name, w) in &r.weights {
                if !(w.is_finite() && *w > 0.0 && *w <= 100.0) {
                    return Err(ConfigError::new(
                        format!("{at}.weights.{name}"),
                        format!("must be greater than 0 and at most 100, got {w}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The rule active after reading `load`, given the one active before.
    pub fn next(&self, active: Option<usize>, load: &Load) -> Option<usize> {
        if let Some(i) = active
            && let Some(rule) = self.rules.get(i)
            && rule.when.holds(load, self.hysteresis)
        {
            return Some(i);
        }
        self.rules.iter().position(|r| r.when.holds(load, 0.0))
    }
}

impl LoadCondition {
    /// Whether the condition holds, `slack` points more loosely (the
    /// hysteresis of a rule already active). A cluster without the
    /// resource measured has no load to compare.
    pub fn holds(&self, load: &Load, slack: f64) -> bool {
        let Some(v) = load.percent(self.metric) else { return false };
        match (self.at_least, self.below) {
            (Some(t), _) => v >= t - slack,
            (None, Some(t)) => v < t + slack,
            (None, None) => false,
        }
    }

    /// "gpuAllocation ≥ 85 %", for messages.
    pub fn describe(&self) -> String {
        match (self.at_least, self.below) {
            (Some(t), _) => format!("{} ≥ {t} %", self.metric.as_str()),
            (None, Some(t)) => format!("{} < {t} %", self.metric.as_str()),
            (None, None) => self.metric.as_str().to_string(),
        }
    }
}

impl Load {
    /// `metric` in percent; None when the cluster has none of the resource.
    pub fn percent(&self, metric: LoadMetric) -> Option<f64> {
        let (used, total) = match metric {
            LoadMetric::GpuAllocation => (self.gpu_allocated_milli, self.gpu_capacity_milli),
            LoadMetric::CpuAllocation => (self.cpu_requested_milli, self.cpu_allocatable_milli),
        };
        (total > 0).then(|| 100.0 * used as f64 / total as f64)
    }
}

/// A change of the active rule, for logs, Events and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySwitched {
    pub scheduler_name: String,
    /// The profile's index in the configuration.
    pub profile: usize,
    /// The rule left and the rule entered; None is the profile as written.
    pub from: Option<String>,
    pub to: Option<String>,
    /// The metric that decided, and its value in percent.
    pub metric: LoadMetric,
    pub value: f64,
}

impl PolicySwitched {
    pub fn message(&self) -> String {
        let name = |r: &Option<String>| r.clone().unwrap_or_else(|| "the profile as written".into());
        format!(
            "profile {:?} (profiles[{}]): policy {} → {} at {} {:.1} %",
            self.scheduler_name,
            self.profile,
            name(&self.from),
            name(&self.to),
            self.metric.as_str(),
            self.value
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_gpu(pct: f64) -> Load {
        Load { gpu_capacity_milli: 100_000, gpu_allocated_milli: (pct * 1000.0) as i64, ..Load::default() }
    }

    fn rule(name: &str, at_least: Option<f64>, below: Option<f64>) -> PolicyRule {
        PolicyRule {
            name: name.into(),
            when: LoadCondition { metric: LoadMetric::GpuAllocation, at_least, below },
            gpu_placement: Some(GpuPlacement::Spread),
            weights: BTreeMap::new(),
        }
    }

    fn packed_and_resilient() -> PolicySwitchConfig {
        PolicySwitchConfig {
            hysteresis: 5.0,
            rules: vec![rule("packed", Some(85.0), None), rule("resilient", None, Some(50.0))],
        }
    }

    #[test]
    fn rules_enter_at_the_threshold_and_leave_past_the_hysteresis() {
        let cfg = packed_and_resilient();
        // (active before, load %, active after)
        let cases = [
            (None, 60.0, None),
            (None, 84.9, None),
            (None, 85.0, Some(0)),
            (Some(0), 83.0, Some(0)),
            (Some(0), 80.0, Some(0)),
            (Some(0), 79.9, None),
            (None, 49.9, Some(1)),
            (Some(1), 54.9, Some(1)),
            (Some(1), 55.0, None),
            // Straight from one rule into another when the load jumps.
            (Some(1), 90.0, Some(0)),
            (Some(0), 10.0, Some(1)),
            // A rule index from an older configuration is ignored.
            (Some(7), 60.0, None),
        ];
        for (before, pct, after) in cases {
            assert_eq!(cfg.next(before, &load_gpu(pct)), after, "{before:?} at {pct} %");
        }
    }

    #[test]
    fn a_load_wobbling_around_the_threshold_switches_once() {
        let cfg = packed_and_resilient();
        let mut active = None;
        let mut switches = 0;
        // Up to 85 %, then ±2 % around it for a while.
        let loads = (0..=85).map(f64::from).chain((0..200).map(|i| if i % 2 == 0 { 83.0 } else { 87.0 }));
        for pct in loads {
            let next = cfg.next(active, &load_gpu(pct));
            if next != active {
                switches += 1;
            }
            active = next;
        }
        // Into "resilient" below 50 %, out at 55 %, into "packed" at 85 %.
        assert_eq!((switches, active), (3, Some(0)));
    }

    #[test]
    fn no_capacity_means_no_rule_holds() {
        let cfg = packed_and_resilient();
        assert_eq!(cfg.next(None, &Load::default()), None);
        let cpu = Load { cpu_allocatable_milli: 1000, cpu_requested_milli: 900, ..Load::default() };
        assert_eq!(cpu.percent(LoadMetric::CpuAllocation), Some(90.0));
        assert_eq!(cpu.percent(LoadMetric::GpuAllocation), None);
    }

    #[test]
    fn invalid_rules_are_named() {
        let mut no_change = rule("x", Some(1.0), None);
        no_change.gpu_placement = None;
        let mut bad_weight = rule("x", Some(1.0), None);
        bad_weight.weights.insert("GpuFragmentation".into(), 0.0);
        let cases: Vec<(PolicySwitchConfig, &str)> = vec![
            (PolicySwitchConfig { hysteresis: 5.0, rules: vec![] }, "p.rules: at least one rule is required"),
            (PolicySwitchConfig { hysteresis: -1.0, rules: vec![rule("a", Some(1.0), None)] }, "p.hysteresis: must"),
            (PolicySwitchConfig { hysteresis: 5.0, rules: vec![rule("a", None, None)] }, "p.rules[0].when: needs"),
            (
                PolicySwitchConfig { hysteresis: 5.0, rules: vec![rule("a", Some(1.0), Some(2.0))] },
                "p.rules[0].when: needs exactly one",
            ),
            (
                PolicySwitchConfig { hysteresis: 5.0, rules: vec![rule("a", Some(120.0), None)] },
                "p.rules[0].when.atLeast: must be in [0, 100]",
            ),
            (
                PolicySwitchConfig {
                    hysteresis: 5.0,
                    rules: vec![rule("a", Some(1.0), None), rule("a", None, Some(1.0))],
                },
                "p.rules[1].name: duplicate",
            ),
            (PolicySwitchConfig { hysteresis: 5.0, rules: vec![no_change] }, "p.rules[0]: changes nothing"),
            (
                PolicySwitchConfig { hysteresis: 5.0, rules: vec![bad_weight] },
                "p.rules[0].weights.GpuFragmentation: must be greater than 0",
            ),
        ];
        for (cfg, want) in cases {
            let err = cfg.validate("p").expect_err(want).to_string();
            assert!(err.starts_with(want), "{err} does not start with {want}");
        }
        packed_and_resilient().validate("p").unwrap_or_else(|e| panic!("{e}"));
    }
}
