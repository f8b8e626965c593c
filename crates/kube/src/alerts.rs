//! Hardware alerts from Warning Events on Nodes: node-problem-detector,
//! GPU health checkers and the like report failing hardware as Events
//! (`involvedObject.kind=Node`, `type=Warning`). The reasons named in
//! `nodeFacts.hardwareAlertEventReasons` count as alerts; each node's
//! latest such Event is sent to the scheduling thread, which lays it over
//! the node's facts (NodeHealth's window then decides).

use std::collections::{BTreeMap, HashMap, HashSet};

use engine::time::Millis;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::mpsc;
use tracing::warn;

use crate::watch::{Change, WATCH_TIMEOUT_SECS};

/// The field selector of the watch.
pub const FIELD_SELECTOR: &str = "involvedObject.kind=Node,type=Warning";

/// One alert Event: the node it is about and when it last happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub node: String,
    pub at: Millis,
}

/// Reads an Event: an alert when its reason is one of `reasons` and it
/// names a node and a time.
pub fn alert_of(event: &Event, reasons: &HashSet<String>) -> Option<Alert> {
    let reason = event.reason.as_deref()?;
    if !reasons.contains(reason) || event.involved_object.kind.as_deref() != Some("Node") {
        return None;
    }
    if event.type_.as_deref().is_some_and(|t| t != "Warning") {
        return None;
    }
    let node = event.involved_object.name.clone().filter(|n| !n.is_empty())?;
    // The latest of the times an Event carries (a series' last
    // observation, the deprecated lastTimestamp, eventTime, creation).
    let times = [
        event.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).map(|t| t.0),
        event.last_timestamp.as_ref().map(|t| t.0),
        event.event_time.as_ref().map(|t| t.0),
        event.first_timestamp.as_ref().map(|t| t.0),
        event.metadata.creation_timestamp.as_ref().map(|t| t.0),
    ];
    let at = times.into_iter().flatten().max()?;
    let at = Millis::try_from(at.as_millisecond()).ok()?;
    Some(Alert { node, at })
}

/// The alert Events known, by Event key, and each node's latest.
#[derive(Debug, Default)]
pub struct AlertBook {
    events: HashMap<String, Alert>,
    /// What was last sent for each node.
    sent: BTreeMap<String, Millis>,
}

impl AlertBook {
    pub fn upsert(&mut self, key: String, alert: Option<Alert>) {
        match alert {
            Some(a) => {
                self.events.insert(key, a);
            }
            None => {
                self.events.remove(&key);
            }
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.events.remove(key);
    }

    /// Replaces every Event (after a relist).
    pub fn replace(&mut self, events: HashMap<String, Alert>) {
        self.events = events;
    }

    /// Nodes whose latest alert changed since the last call, with it
    /// (None: no alert Event left for the node).
    pub fn changes(&mut self) -> Vec<(String, Option<Millis>)> {
        let mut latest: BTreeMap<String, Millis> = BTreeMap::new();
        for a in self.events.values() {
            let t = latest.entry(a.node.clone()).or_insert(a.at);
            *t = (*t).max(a.at);
        }
        let mut out = Vec::new();
        for (node, at) in &latest {
            if self.sent.get(node) != Some(at) {
                out.push((node.clone(), Some(*at)));
            }
        }
        for node in self.sent.keys() {
            if !latest.contains_key(node) {
                out.push((node.clone(), None));
            }
        }
        self.sent = latest;
        out
    }
}

fn event_key(e: &Event) -> String {
    format!(
        "{}/{}",
        e.metadata.namespace.as_deref().unwrap_or_default(),
        e.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Watches alert Events in every namespace and sends
/// [`Change::NodeAlert`]s; an empty `reasons` list watches nothing.
pub fn spawn<T>(client: &Client, reasons: &[String], tx: mpsc::Sender<T>, up: impl Fn(bool) + Send + 'static)
where
    T: From<Change> + Send + 'static,
{
    if reasons.is_empty() {
        return;
    }
    let reasons: HashSet<String> = reasons.iter().cloned().collect();
    let api = Api::<Event>::all(client.clone());
    let config = watcher::Config::default().fields(FIELD_SELECTOR).timeout(WATCH_TIMEOUT_SECS);
    tokio::spawn(async move {
        let mut book = AlertBook::default();
        let mut listing: Option<HashMap<String, Alert>> = None;
        let mut failing = false;
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    if !failing {
                        warn!("watching node alert Events failed, retrying: {e}");
                        failing = true;
                        up(false);
                    }
                    continue;
                }
            };
            if failing {
                failing = false;
                up(true);
            }
            match event {
                watcher::Event::Init => listing = Some(HashMap::new()),
                watcher::Event::InitApply(e) => {
                    if let (Some(l), Some(a)) = (&mut listing, alert_of(&e, &reasons)) {
                        l.insert(event_key(&e), a);
                    }
                }
                watcher::Event::InitDone => {
                    book.replace(listing.take().unwrap_or_default());
                    up(true);
                }
                watcher::Event::Apply(e) => book.upsert(event_key(&e), alert_of(&e, &reasons)),
                watcher::Event::Delete(e) => book.remove(&event_key(&e)),
            }
            if listing.is_some() {
                continue; // the whole list first
            }
            for (node, at) in book.changes() {
                if tx.send(Change::NodeAlert(node, at).into()).await.is_err() {
                    return; // the scheduler stopped
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSeries, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn event(kind: &str, node: &str, type_: &str, reason: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{node}.{reason}")),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference { kind: Some(kind.into()), name: Some(node.into()), ..Default::default() },
            type_: Some(type_.into()),
            reason: Some(reason.into()),
            last_timestamp: Some(Time(ts("2026-01-01T10:00:00Z"))),
            ..Default::default()
        }
    }

    #[test]
    fn which_events_are_alerts() {
        let reasons: HashSet<String> = ["XidError".to_string()].into();
        let at = Millis::try_from(ts("2026-01-01T10:00:00Z").as_millisecond()).unwrap();
        let mut series = event("Node", "n", "Warning", "XidError");
        series.series =
            Some(EventSeries { count: Some(3), last_observed_time: Some(MicroTime(ts("2026-01-01T10:05:00Z"))) });
        let mut timeless = event("Node", "n", "Warning", "XidError");
        timeless.last_timestamp = None;
        let cases = [
            ("configured reason", event("Node", "n", "Warning", "XidError"), Some(at)),
            ("other reason", event("Node", "n", "Warning", "Rebooted"), None),
            ("not a node", event("Pod", "n", "Warning", "XidError"), None),
            ("normal event", event("Node", "n", "Normal", "XidError"), None),
            ("a series' last observation", series, Some(at + 300_000)),
            ("no time at all", timeless, None),
        ];
        for (name, e, want) in cases {
            assert_eq!(alert_of(&e, &reasons).map(|a| a.at), want, "{name}");
        }
    }

    #[test]
    fn the_book_sends_each_nodes_latest_alert_once() {
        let a = |node: &str, at| Some(Alert { node: node.into(), at });
        let mut book = AlertBook::default();
        book.upsert("e1".into(), a("n1", 10));
        book.upsert("e2".into(), a("n1", 30));
        book.upsert("e3".into(), a("n2", 20));
        assert_eq!(book.changes(), [("n1".to_string(), Some(30)), ("n2".to_string(), Some(20))]);
        assert!(book.changes().is_empty(), "nothing new");
        book.remove("e2");
        assert_eq!(book.changes(), [("n1".to_string(), Some(10))]);
        // A relist without n2's Event (expired): n2 has no alert left.
        book.replace([("e1".to_string(), Alert { node: "n1".into(), at: 10 })].into());
        assert_eq!(book.changes(), [("n2".to_string(), None)]);
        // An Event updated to a reason that is not an alert.
        book.upsert("e1".into(), None);
        assert_eq!(book.changes(), [("n1".to_string(), None)]);
    }
}
