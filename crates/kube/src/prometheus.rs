//! Numeric node facts from Prometheus (`nodeFacts.prometheus[]`): each
//! fact's instant query is polled on its interval, off the scheduling
//! path, and the values per node are sent to the scheduling thread. When
//! Prometheus is down, slow or answers nonsense, scheduling goes on with
//! the last values until they are older than `maxAge`, then without them;
//! `gpu_scheduler_fact_source_up{source}` and one log line per outage say
//! so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use engine::facts::provided::{PrometheusFact, parse_prometheus_answer};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::watch::Change;

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
    parse_prometheus_answer(&body, &fact.node_label)
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
                let values = fresh.current(Instant::now(), fact.max_age);
                if sent.as_ref() != Some(&values) {
                    let change = Change::NodeNumbers(fact.name.clone(), values.clone());
                    if tx.send(change.into()).await.is_err() {
                        return; // the scheduler stopped
                    }
                    sent = Some(values);
                }
                // After the values: "up" means the scheduler has them.
                up(&fact.name, !outage);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
