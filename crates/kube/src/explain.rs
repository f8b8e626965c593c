//! The last decision of recent pods, kept for `/debug/explain/NS/POD`
//! when that endpoint is on (it costs an explanation per decision, so it
//! is off by default).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use engine::explain::DecisionRecord;

/// Pods whose last decision is kept, at most; the oldest go first.
pub const KEPT: usize = 2048;

#[derive(Debug, Default)]
pub struct Explanations {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// `NAMESPACE/NAME` → the explanation as JSON.
    by_pod: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Explanations {
    /// Keeps `record` as its pod's last decision.
    pub fn record(&self, record: &DecisionRecord) {
        let json = match serde_json::to_string(&record.explain()) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(pod = %record.pod, "explanation not kept: {e}");
                return;
            }
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.by_pod.insert(record.pod.clone(), json).is_none() {
            inner.order.push_back(record.pod.clone());
        }
        while inner.order.len() > KEPT {
            if let Some(old) = inner.order.pop_front() {
                inner.by_pod.remove(&old);
            }
        }
    }

    /// The last decision for `NAMESPACE/NAME`, as JSON.
    pub fn get(&self, pod: &str) -> Option<String> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).by_pod.get(pod).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_decision_of_the_most_recent_pods() {
        let e = Explanations::default();
        let record = |pod: &str, node: Option<&str>| DecisionRecord {
            pod: pod.into(),
            profile: "gpu-scheduler".into(),
            node: node.map(str::to_string),
            ..Default::default()
        };
        e.record(&record("ns/a", None));
        e.record(&record("ns/a", Some("n1")));
        let a: serde_json::Value = serde_json::from_str(&e.get("ns/a").unwrap_or_default()).unwrap_or_default();
        assert_eq!(a["node"], "n1", "{a}");
        for i in 0..KEPT {
            e.record(&record(&format!("ns/p{i}"), None));
        }
        assert!(e.get("ns/a").is_none(), "the oldest pod should have been dropped");
        assert!(e.get(&format!("ns/p{}", KEPT - 1)).is_some());
    }
}
