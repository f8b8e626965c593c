//! Temperature: the article's thermal rule (DESIGN.md §4). A node at or
//! above `maxCelsius` (90 °C) is rejected: work started there would be
//! throttled or lost when the node shuts down. Below it, cooler is better:
//! 100 at or below `coolCelsius` (60 °C), falling linearly to 0 at
//! `hotCelsius` (85 °C). A node whose temperature is unknown scores 100, so
//! clusters without the metric are not skewed.
//!
//! The temperature is a node fact, read when the node changed: annotation
//! `gpu-scheduler.io/temperature-celsius`, written by a monitoring agent.

use std::sync::Arc;

use framework::cache::{NodeList, NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, FilterPlugin, MAX_NODE_SCORE, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Status,
};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::{node_events, skip_if};

pub const NAME: &str = "Temperature";

pub const ERR_REASON_TOO_HOT: &str = "node(s) too hot";

/// `TemperatureArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemperatureArgs {
    /// At or above this a node is rejected.
    #[serde(default = "default_max")]
    pub max_celsius: f64,
    /// At or below this a node scores 100.
    #[serde(default = "default_cool")]
    pub cool_celsius: f64,
    /// At or above this a node scores 0.
    #[serde(default = "default_hot")]
    pub hot_celsius: f64,
}

fn default_max() -> f64 {
    90.0
}
fn default_cool() -> f64 {
    60.0
}
fn default_hot() -> f64 {
    85.0
}

impl Default for TemperatureArgs {
    fn default() -> Self {
        TemperatureArgs { max_celsius: default_max(), cool_celsius: default_cool(), hot_celsius: default_hot() }
    }
}

impl TemperatureArgs {
    pub fn validate(&self) -> Result<(), ArgsError> {
        // The temperatures a node may report (annotation or Prometheus).
        for (field, v) in
            [("maxCelsius", self.max_celsius), ("coolCelsius", self.cool_celsius), ("hotCelsius", self.hot_celsius)]
        {
            ArgsError::check(field, framework::facts::CELSIUS.check(v))?;
        }
        if self.cool_celsius >= self.hot_celsius {
            return Err(ArgsError::new(
                "hotCelsius",
                format!("{}: must be above coolCelsius ({})", self.hot_celsius, self.cool_celsius),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Temperature {
    args: TemperatureArgs,
}

impl Temperature {
    fn score_of(&self, celsius: Option<f64>) -> i64 {
        let Some(t) = celsius else { return MAX_NODE_SCORE };
        let a = &self.args;
        let share = ((a.hot_celsius - t) / (a.hot_celsius - a.cool_celsius)).clamp(0.0, 1.0);
        (share * MAX_NODE_SCORE as f64).round() as i64
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: TemperatureArgs = decode_args(args)?;
    args.validate()?;
    Ok(Arc::new(Temperature { args }))
}

impl Plugin for Temperature {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node cooling down (its annotation updated), or a new node.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        node_events(&[EventAction::Add, EventAction::Update])
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Skip when no node reports a temperature: none is too hot, all score 100.
fn skip_unless_measured(snapshot: &Snapshot) -> Status {
    skip_if(snapshot.fact_counts().temperature == 0)
}

impl PreFilterPlugin for Temperature {
    fn pre_filter(&self, _state: &mut CycleState, _pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        (PreFilterResult::default(), skip_unless_measured(snapshot))
    }
}

impl PreScorePlugin for Temperature {
    fn pre_score(&self, _state: &mut CycleState, _pod: &Pod, nodes: NodeList<'_>) -> Status {
        skip_unless_measured(nodes.snapshot())
    }
}

impl FilterPlugin for Temperature {
    fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        match node.summary().temperature_celsius() {
            // Evicting pods does not cool a node in time: unresolvable.
            Some(t) if t >= self.args.max_celsius => Status::unresolvable(ERR_REASON_TOO_HOT),
            _ => Status::success(),
        }
    }
}

impl ScorePlugin for Temperature {
    fn score(&self, _state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        Ok(self.score_of(node.summary().temperature_celsius()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::ANNOTATION_TEMPERATURE;
    use framework::testing::{node, pod};

    /// (name, annotation, filter passes, score)
    const CASES: &[(&str, Option<&str>, bool, i64)] = &[
        ("unknown", None, true, 100),
        ("cold", Some("20"), true, 100),
        ("at the cool mark", Some("60"), true, 100),
        ("a fifth of the way", Some("65"), true, 80),
        ("halfway", Some("72.5"), true, 50),
        ("at the hot mark", Some("85"), true, 0),
        ("hot but under the limit", Some("89.9"), true, 0),
        ("at the limit", Some("90"), false, 0),
        ("above the limit", Some("95"), false, 0),
        ("malformed is unknown", Some("hot"), true, 100),
    ];

    #[test]
    fn filter_and_score_table() {
        let p = new(None).unwrap();
        let (f, s) = (p.as_filter().unwrap(), p.as_score().unwrap());
        for (name, celsius, fits, score) in CASES {
            let mut n = node("n");
            if let Some(c) = celsius {
                n = n.annotation(ANNOTATION_TEMPERATURE, c);
            }
            let info = n.info();
            let state = CycleState::new();
            let v = f.filter(&state, &pod("p").build(), &info.view());
            assert_eq!(v.is_success(), *fits, "{name}: {v:?}");
            if !fits {
                assert_eq!(v.message(), ERR_REASON_TOO_HOT, "{name}");
            }
            assert_eq!(s.score(&state, &pod("p").build(), &info.view()), Ok(*score), "{name}");
        }
    }

    #[test]
    fn skips_when_no_node_reports_a_temperature() {
        let p = new(None).unwrap();
        let pod = pod("p").build();
        for (nodes, skip) in [
            (vec![node("a").build()], true),
            (vec![node("a").build(), node("b").annotation(ANNOTATION_TEMPERATURE, "40").build()], false),
        ] {
            let snap = Snapshot::from_parts(nodes, vec![]);
            let pf = p.as_pre_filter().unwrap().pre_filter(&mut CycleState::new(), &pod, &snap).1;
            let ps = p.as_pre_score().unwrap().pre_score(&mut CycleState::new(), &pod, snap.node_list());
            assert_eq!((pf.is_skip(), ps.is_skip()), (skip, skip));
        }
    }

    #[test]
    fn args() {
        let p = new(Some(&serde_json::json!({"maxCelsius": 80, "coolCelsius": 40, "hotCelsius": 60}))).unwrap();
        let info = node("n").annotation(ANNOTATION_TEMPERATURE, "50").info();
        let state = CycleState::new();
        assert_eq!(p.as_score().unwrap().score(&state, &pod("p").build(), &info.view()), Ok(50));
        let info = node("n").annotation(ANNOTATION_TEMPERATURE, "80").info();
        assert!(!p.as_filter().unwrap().filter(&state, &pod("p").build(), &info.view()).is_success());
        for (args, field) in [
            (serde_json::json!({"coolCelsius": 90}), "hotCelsius"),
            (serde_json::json!({"maxCelsius": "hot"}), "maxCelsius"),
            (serde_json::json!({"limit": 90}), "limit"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
