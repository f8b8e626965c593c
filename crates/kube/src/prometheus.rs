//! Numeric node facts from Prometheus (`nodeFacts.prometheus[]`): each
//! fact's instant query is polled on its interval, off the scheduling
//! path, and the values per node are sent to the scheduling thread. When
//! Prometheus is down, slow or answers nonsense, scheduling goes on with
//! the last values until they are older than `maxAge`, then without them;
//! `gpu_scheduler_fact_source_up{source}` and one log line per outage say
//! so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use engine::provided_facts::PrometheusFact;
use serde::Deserialize;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::watch::Change;

/// What one query gave: a value per node. Samples without the node label
/// or with a value that is not a finite number are skipped.
pub fn parse_answer(body: &str, node_label: &str) -> Result<BTreeMap<String, f64>, String> {
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
        let Ok(v) = s.value.1.parse::<f64>() else { continue };
        if v.is_finite() {
            // Several series for one node: the highest counts (the hottest GPU).
            let e = out.entry(node.clone()).or_insert(v);
            *e = f64::max(*e, v);
        }
    }
    Ok(out)
}

/// A fact's last good answer and when it came.
#[derive(Debug, Default)]
pub struct Freshness {
    last: Option<(Instant, BTreeMap<String, f64>)>,
}

impl Freshness {
    pub fn answered(&mut self, at: Instant, values: BTreeMap<String, f64>) {
        self.last = Some((at, values));
    }

    /// The values still young enough to use at `now`.
    pub fn current(&self, now: Instant, max_age: Duration) -> BTreeMap<String, f64> {
        match &self.last {
            Some((at, v)) if now.duration_since(*at) <= max_age => v.clone(),
            _ => BTreeMap::new(),
        }
    }
}

/// Queries `fact` once (blocking, within its timeout).
fn query(agent: &ureq::Agent, fact: &PrometheusFact) -> Result<BTreeMap<String, f64>, String> {
    let url = format!("{}/api/v1/query", fact.url.trim_end_matches('/'));
    let mut response = agent.get(&url).query("query", &fact.query).call().map_err(|e| format!("{url}: {e}"))?;
    // Bounded: a node count's worth of samples, not an endless stream.
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .map_err(|e| format!("{url}: reading the answer: {e}"))?;
    parse_answer(&body, &fact.node_label)
}

/// Polls every configured fact until the receiver is gone; `up(name,
/// bool)` reports each source's state.
pub fn spawn<T>(facts: &[PrometheusFact], tx: mpsc::Sender<T>, up: impl Fn(&str, bool) + Send + Sync + Clone + 'static)
where
    T: From<Change> + Send + 'static,
{
    for fact in facts.iter().cloned() {
        let tx = tx.clone();
        let up = up.clone();
        tokio::spawn(async move {
            let config = ureq::Agent::config_builder()
                .timeout_global(Some(fact.timeout))
                // A 4xx/5xx answer's body names the error (a bad query).
                .http_status_as_error(false)
                .build();
            let agent = ureq::Agent::new_with_config(config);
            let mut fresh = Freshness::default();
            let mut sent: Option<BTreeMap<String, f64>> = None;
            let mut outage = false;
            let mut tick = tokio::time::interval(fact.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (a, f) = (agent.clone(), fact.clone());
                let answer = tokio::task::spawn_blocking(move || query(&a, &f))
                    .await
                    .unwrap_or_else(|e| Err(format!("the query task failed: {e}")));
                match answer {
                    Ok(values) => {
                        if outage {
                            info!(fact = %fact.name, nodes = values.len(), "Prometheus answers again");
                        }
                        outage = false;
                        fresh.answered(Instant::now(), values);
                    }
                    Err(e) => {
                        if !outage {
                            warn!(fact = %fact.name, "Prometheus does not answer; scheduling goes on without this fact once its values are older than {:?}: {e}", fact.max_age);
                        }
                        outage = true;
                    }
                }
                up(&fact.name, !outage);
                let values = fresh.current(Instant::now(), fact.max_age);
                if sent.as_ref() != Some(&values) {
                    let change = Change::NodeNumbers(fact.name.clone(), values.clone());
                    if tx.send(change.into()).await.is_err() {
                        return; // the scheduler stopped
                    }
                    sent = Some(values);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_table() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"node":"a","gpu":"0"},"value":[1700000000.1,"71"]},
            {"metric":{"node":"a","gpu":"1"},"value":[1700000000.1,"88.5"]},
            {"metric":{"node":"b"},"value":[1700000000.1,"NaN"]},
            {"metric":{"instance":"c:9400"},"value":[1700000000.1,"50"]},
            {"metric":{"node":"d"},"value":[1700000000.1,"hot"]}]}}"#;
        let got = parse_answer(ok, "node").unwrap();
        assert_eq!(got, [("a".to_string(), 88.5)].into(), "the hottest GPU; NaN, unlabelled and garbage skipped");
        let errors = [
            ("<html>", "not a Prometheus API answer"),
            (r#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#, "parse error at char 4"),
            (r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#, "a matrix, not an instant vector"),
            (r#"{"status":"success","data":{"resultType":"vector","result":{"x":1}}}"#, "not a vector"),
            (r#"{"status":"success"}"#, "no data"),
        ];
        for (body, want) in errors {
            let e = parse_answer(body, "node").unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    #[test]
    fn values_age_out() {
        let mut f = Freshness::default();
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        assert!(f.current(t0, max).is_empty());
        f.answered(t0, [("a".to_string(), 70.0)].into());
        assert_eq!(f.current(t0 + Duration::from_secs(60), max).len(), 1);
        assert!(f.current(t0 + Duration::from_secs(61), max).is_empty(), "too old while Prometheus is down");
    }
}
