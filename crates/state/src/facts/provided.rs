//! Node facts that do not live on the Node object: hardware alerts read
//! from Warning Events, and numbers polled from a monitoring system
//! (`nodeFacts.prometheus`, one [`PrometheusFact`] per entry). The caller
//! (`run`) gathers them and hands them in per node
//! (`Scheduler::on_node_provided_facts`, which fires a node-update event);
//! the cache lays them over the facts it reads from the node's labels and
//! annotations (`Cache::set_provided_facts`), so every plugin sees one set
//! of facts.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::NodeFacts;
use crate::time::Millis;
use gpu_scheduler_model::field::ConfigError;
use gpu_scheduler_model::go_duration;

/// The numeric fact that, when provided, replaces the temperature
/// annotation.
pub const FACT_TEMPERATURE: &str = "temperature";

/// What outside sources say of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProvidedFacts {
    /// The latest hardware alert seen in the node's Warning Events.
    pub event_alert: Option<Millis>,
    /// Numbers by fact name (from `nodeFacts.prometheus[].name`).
    pub numbers: BTreeMap<String, f64>,
}

impl ProvidedFacts {
    pub fn is_empty(&self) -> bool {
        self.event_alert.is_none() && self.numbers.is_empty()
    }

    /// Lays these facts over what the node object said: the later alert
    /// wins, a provided temperature replaces the annotation's, unless it is
    /// no plausible temperature (a broken sensor reads as 1e308 too): as an
    /// annotation's, it then counts as none.
    pub fn apply(&self, facts: &mut NodeFacts) {
        facts.last_hardware_alert = facts.last_hardware_alert.max(self.event_alert);
        if let Some(t) = self.numbers.get(FACT_TEMPERATURE) {
            facts.temperature_celsius = Some(*t).filter(|t| super::CELSIUS.contains(*t));
        }
        facts.numbers = self.numbers.clone();
    }
}

/// One numeric node fact read from Prometheus's HTTP API
/// (`nodeFacts.prometheus[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusFact {
    /// The fact's name: `temperature` replaces the temperature annotation;
    /// any name is `node.facts.NAME` in CEL rules.
    pub name: String,
    /// Prometheus's base URL, e.g. `http://prometheus:9090`.
    pub url: String,
    /// A PromQL instant query giving one sample per node.
    pub query: String,
    /// The label of each sample that names the node.
    #[serde(default = "default_node_label")]
    pub node_label: String,
    /// How often to query (Go duration).
    #[serde(default = "default_interval", with = "go_duration")]
    pub interval: Duration,
    /// How long one query may take.
    #[serde(default = "default_timeout", with = "go_duration")]
    pub timeout: Duration,
    /// Values older than this are dropped while Prometheus cannot answer.
    #[serde(default = "default_max_age", with = "go_duration")]
    pub max_age: Duration,
}

fn default_node_label() -> String {
    "node".into()
}
fn default_interval() -> Duration {
    Duration::from_secs(30)
}
fn default_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_max_age() -> Duration {
    Duration::from_secs(120)
}

impl PrometheusFact {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let valid_name = |s: &str| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !valid_name(&self.name) {
            return Err(ConfigError::new(
                format!("{path}.name"),
                "must be a CEL identifier (letters, digits and '_', not starting with a digit)",
            ));
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(ConfigError::new(format!("{path}.url"), "must be an http:// or https:// URL"));
        }
        if self.query.trim().is_empty() {
            return Err(ConfigError::new(format!("{path}.query"), "must not be empty"));
        }
        if self.node_label.is_empty() {
            return Err(ConfigError::new(format!("{path}.nodeLabel"), "must not be empty"));
        }
        use crate::bounds::MIN_DURATION;
        use crate::bounds::{MAX_DURATION, duration};
        ConfigError::check(format!("{path}.interval"), duration(self.interval, MIN_DURATION, MAX_DURATION))?;
        ConfigError::check(format!("{path}.timeout"), duration(self.timeout, MIN_DURATION, self.interval))
            .map_err(|e| ConfigError::new(e.path, format!("{} (at most interval)", e.message)))?;
        ConfigError::check(format!("{path}.maxAge"), duration(self.max_age, self.interval, MAX_DURATION))
            .map_err(|e| ConfigError::new(e.path, format!("{} (at least interval)", e.message)))?;
        Ok(())
    }
}

/// A Prometheus HTTP API answer to an instant query (`/api/v1/query`) as a
/// value per node: the samples' `node_label` names the node. Samples
/// without the label or without a finite number are skipped; several
/// series for one node give the highest (the hottest GPU). Anything but a
/// successful instant vector is an error saying what came instead.
pub fn parse_prometheus_answer(body: &str, node_label: &str) -> Result<BTreeMap<String, f64>, String> {
    #[derive(Deserialize)]
    struct Answer {
        status: String,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        data: Option<Data>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Data {
        result_type: String,
        result: serde_json::Value,
    }
    #[derive(Deserialize)]
    struct Sample {
        metric: BTreeMap<String, String>,
        value: (f64, String),
    }
    let answer: Answer = serde_json::from_str(body).map_err(|e| format!("not a Prometheus API answer: {e}"))?;
    if answer.status != "success" {
        return Err(format!("query failed: {}", answer.error.unwrap_or(answer.status)));
    }
    let data = answer.data.ok_or("the answer has no data")?;
    if data.result_type != "vector" {
        return Err(format!("the query gives a {}, not an instant vector", data.result_type));
    }
    let samples: Vec<Sample> =
        serde_json::from_value(data.result).map_err(|e| format!("the answer's result is not a vector: {e}"))?;
    let mut out = BTreeMap::new();
    for s in samples {
        let Some(node) = s.metric.get(node_label) else { continue };
        let Ok(v) = s.value.1.trim().parse::<f64>() else { continue };
        if v.is_finite() {
            let e = out.entry(node.clone()).or_insert(v);
            *e = f64::max(*e, v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provided_facts_lay_over_the_node_objects() {
        let mut facts =
            NodeFacts { last_hardware_alert: Some(5_000), temperature_celsius: Some(60.0), ..Default::default() };
        let cases = [
            (ProvidedFacts::default(), Some(5_000), Some(60.0)),
            (ProvidedFacts { event_alert: Some(9_000), ..Default::default() }, Some(9_000), Some(60.0)),
            (ProvidedFacts { event_alert: Some(1_000), ..Default::default() }, Some(5_000), Some(60.0)),
            (
                ProvidedFacts { numbers: [(FACT_TEMPERATURE.to_string(), 91.0)].into(), ..Default::default() },
                Some(5_000),
                Some(91.0),
            ),
            (
                ProvidedFacts { numbers: [(FACT_TEMPERATURE.to_string(), 1e308)].into(), ..Default::default() },
                Some(5_000),
                None,
            ),
        ];
        for (provided, alert, temperature) in cases {
            let mut f = facts.clone();
            provided.apply(&mut f);
            assert_eq!((f.last_hardware_alert, f.temperature_celsius), (alert, temperature), "{provided:?}");
            assert_eq!(f.numbers, provided.numbers);
        }
        facts.numbers.insert("x".into(), 1.0);
        ProvidedFacts::default().apply(&mut facts);
        assert!(facts.numbers.is_empty(), "numbers no longer provided are gone");
    }

    #[test]
    fn prometheus_fact_validation_names_the_field() {
        let good = PrometheusFact {
            name: "temperature".into(),
            url: "http://prometheus:9090".into(),
            query: "max by (node) (DCGM_FI_DEV_GPU_TEMP)".into(),
            node_label: default_node_label(),
            interval: default_interval(),
            timeout: default_timeout(),
            max_age: default_max_age(),
        };
        good.validate("p").unwrap();
        type Edit = fn(&mut PrometheusFact);
        let cases: [(&str, Edit); 8] = [
            ("p.name", |f| f.name = "gpu-temp".into()),
            ("p.name", |f| f.name = "1x".into()),
            ("p.url", |f| f.url = "prometheus:9090".into()),
            ("p.query", |f| f.query = " ".into()),
            ("p.nodeLabel", |f| f.node_label = String::new()),
            ("p.interval", |f| f.interval = Duration::ZERO),
            ("p.timeout", |f| f.timeout = Duration::from_secs(60)),
            ("p.maxAge", |f| f.max_age = Duration::from_secs(10)),
        ];
        for (field, edit) in cases {
            let mut f = good.clone();
            edit(&mut f);
            let e = f.validate("p").unwrap_err();
            assert_eq!(e.path, field, "{e}");
        }
    }

    #[test]
    fn answers_table() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"node":"a","gpu":"0"},"value":[1700000000.1,"71"]},
            {"metric":{"node":"a","gpu":"1"},"value":[1700000000.1,"88.5"]},
            {"metric":{"node":"b"},"value":[1700000000.1,"NaN"]},
            {"metric":{"instance":"c:9400"},"value":[1700000000.1,"50"]},
            {"metric":{"node":"d"},"value":[1700000000.1,"hot"]}]}}"#;
        let got = parse_prometheus_answer(ok, "node").unwrap();
        assert_eq!(got, [("a".to_string(), 88.5)].into(), "the hottest GPU; NaN, unlabelled and garbage skipped");
        let errors = [
            ("<html>", "not a Prometheus API answer"),
            (r#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#, "parse error at char 4"),
            (r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#, "a matrix, not an instant vector"),
            (r#"{"status":"success","data":{"resultType":"vector","result":{"x":1}}}"#, "not a vector"),
            (r#"{"status":"success"}"#, "no data"),
        ];
        for (body, want) in errors {
            let e = parse_prometheus_answer(body, "node").unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
