//! Telling users: Events (events.k8s.io/v1) `Scheduled`,
//! `FailedScheduling` and `Preempted`, the pod condition `PodScheduled=False`
//! with reason `Unschedulable`, preemption's evictions and PodGroup statuses. These go through a bounded queue to a
//! background worker, never on the scheduling thread; when the queue is
//! full a report is dropped and counted rather than slowing scheduling.
//!
//! FailedScheduling Events form a series per pod and message, as kube's
//! recorder does; kube-rs's `Recorder`, which keeps every Event six
//! minutes and scans them all on each publish, is used only for the rare
//! Node and ConfigMap Events. PodGroup statuses are sent one at a time, in
//! order. Evictions have a queue of their own (64 at a time): behind
//! thousands of Events they reached the API seconds late.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod as K8sPod};
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter as EventReporter};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use engine::convert::{PodGroupObject, QueueObject};

/// Reports waiting to be sent, at most.
const QUEUE: usize = 4096;
/// Reports being sent at once.
const CONCURRENCY: usize = 16;
/// Victims being evicted at once: a preemptor waits for all of its own,
/// and kube-scheduler deletes each preemptor's victims 16 at a time with
/// preemptors in parallel.
const EVICTION_CONCURRENCY: usize = 64;

/// The pod a report is about.
#[derive(Debug, Clone)]
pub struct PodId {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub scheduler_name: String,
}

impl PodId {
    pub fn of(pod: &engine::model::Pod) -> PodId {
        PodId {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            scheduler_name: pod.scheduler_name.clone(),
        }
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..Default::default()
        }
    }
}

#[derive(Debug)]
pub enum Report {
    Scheduled {
        pod: PodId,
        node: String,
    },
    /// A failed attempt: an Event, and the condition when `condition` is
    /// set (it changed since the last report for this pod).
    Failed {
        pod: PodId,
        message: String,
        reason: &'static str,
        condition: bool,
        nominated_node: Option<String>,
    },
    /// A pod preempted to make room for `preemptor` on `node`: the
    /// `DisruptionTarget` condition, the deletion, and a `Preempted` Event.
    Preempt {
        victim: PodId,
        node: String,
        preemptor: PodId,
        /// The queue taking back quota it lent (QueueQuota's reclaim);
        /// None for a priority preemption.
        reclaim: Option<String>,
    },
    /// A PodGroup's status changed.
    GangStatus {
        namespace: String,
        name: String,
        status: engine::gang::GangStatus,
    },
    /// A Queue's status changed (a merge patch of `status`).
    QueueStatus {
        name: String,
        status: serde_json::Value,
    },
    /// A Normal Event on a pod (the spot rebalancer's evictions).
    PodNote {
        pod: PodId,
        reason: &'static str,
        note: String,
    },
    /// A Normal Event on a node (the spot rebalancer's taint).
    NodeNote {
        node: String,
        reason: &'static str,
        note: String,
        controller: String,
    },
    /// About the configuration (a reload applied or refused, a policy
    /// switch), on the ConfigMap it comes from.
    ConfigNote {
        namespace: String,
        name: String,
        reason: &'static str,
        note: String,
        warning: bool,
        controller: String,
    },
    /// A node fact that could not be read (DESIGN.md §4: reported once).
    NodeWarning {
        node: String,
        message: String,
        controller: String,
    },
}

/// The sending side, used by the scheduling thread.
#[derive(Clone)]
pub struct Reporter {
    tx: mpsc::Sender<Report>,
    /// A preemption's deletions: a queue and senders of their own, so
    /// they never wait behind Events.
    evictions: mpsc::Sender<Report>,
    dropped: Arc<AtomicU64>,
}

impl Reporter {
    /// Starts the worker. It stops when every `Reporter` is dropped and
    /// the queue is drained.
    pub fn start(events: Client, main: Client, instance: &str) -> (Reporter, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (evictions, evictions_rx) = mpsc::channel(QUEUE);
        let worker = Worker {
            events,
            main,
            instance: instance.to_string(),
            recorders: Default::default(),
            failed: Default::default(),
        };
        let handle = tokio::spawn(worker.run(rx, evictions_rx));
        (Reporter { tx, evictions, dropped: Arc::default() }, handle)
    }

    /// Queues a preemption's deletion, which must not be dropped: waits
    /// for room. Call from a thread outside the runtime, as the scheduling
    /// thread is.
    pub fn send_reliably(&self, report: Report) {
        if self.evictions.blocking_send(report).is_err() {
            warn!("report worker gone, report lost");
        }
    }

    /// Queues a report; never waits.
    pub fn send(&self, report: Report) {
        if let Err(e) = self.tx.try_send(report) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                warn!(dropped = n, "event queue full or closed, report dropped: {e}");
            }
        }
    }

    /// Reports dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

struct Worker {
    events: Client,
    main: Client,
    instance: String,
    /// One recorder per schedulerName: it is the Events' reporting
    /// controller, as kube-scheduler reports each profile by its name.
    recorders: std::sync::Mutex<HashMap<String, Recorder>>,
    /// FailedScheduling series by pod UID and message (see
    /// [`Worker::failed_event`]).
    failed: std::sync::Mutex<HashMap<(String, String), FailedSeries>>,
}

/// Attempts at one status write, and how long each may take.
const STATUS_ATTEMPTS: u32 = 5;
const STATUS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Writes a status patch, again after a failed or stalled attempt: the
/// status is written only when it changes, so a lost write would leave it
/// stale until the next change. A deleted object or a refused patch is not
/// retried.
async fn write_status<K>(api: &Api<K>, what: &str, name: &str, patch: &Patch<serde_json::Value>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    for attempt in 1..=STATUS_ATTEMPTS {
        let error =
            match tokio::time::timeout(STATUS_TIMEOUT, api.patch_status(name, &PatchParams::default(), patch)).await {
                Ok(Ok(_)) => return,
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
                    debug!("{what}: status not written, it is gone");
                    return;
                }
                Ok(Err(kube::Error::Api(s))) if s.code == 400 || s.code == 422 => {
                    warn!("{what}: status refused: {}", s.message);
                    return;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {} s", STATUS_TIMEOUT.as_secs()),
            };
        if attempt == STATUS_ATTEMPTS {
            warn!("{what}: status not written after {attempt} attempts: {error}");
            return;
        }
        debug!("{what}: status not written (attempt {attempt}): {error}");
        tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
    }
}

/// A FailedScheduling Event sent, counted again while its message repeats.
#[derive(Debug, Clone)]
struct FailedSeries {
    name: String,
    count: i32,
    last: jiff::Timestamp,
}

/// How long a FailedScheduling Event is counted again rather than
/// recreated (client-go's event series cache keeps them as long).
const SERIES_TTL: jiff::SignedDuration = jiff::SignedDuration::from_mins(6);

impl Worker {
    /// Sends the reports: most of them concurrently, PodGroup and Queue statuses one
    /// after another in the order they were made, since a later status
    /// overtaken by an earlier one would be lost. A preemption's deletions
    /// have a lane of their own: behind thousands of Events they would
    /// reach the API seconds late while their preemptor waits.
    async fn run(self, mut rx: mpsc::Receiver<Report>, evictions_rx: mpsc::Receiver<Report>) {
        let (ordered_tx, mut ordered_rx) = mpsc::channel::<Report>(QUEUE);
        let (concurrent_tx, concurrent_rx) = mpsc::channel::<Report>(QUEUE);
        let dispatch = async move {
            while let Some(r) = rx.recv().await {
                let ordered = matches!(r, Report::GangStatus { .. } | Report::QueueStatus { .. });
                let to = if ordered { &ordered_tx } else { &concurrent_tx };
                if to.send(r).await.is_err() {
                    break;
                }
            }
        };
        let this = Arc::new(self);
        let sequential = this.clone();
        let ordered = async move {
            while let Some(r) = ordered_rx.recv().await {
                sequential.send(r).await;
            }
        };
        let lane =
            |rx: mpsc::Receiver<Report>, this: Arc<Worker>, concurrency: usize| {
                futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
                    .for_each_concurrent(concurrency, move |r| {
                        let this = this.clone();
                        async move { this.send(r).await }
                    })
            };
        let evictions = lane(evictions_rx, this.clone(), EVICTION_CONCURRENCY);
        let concurrent = lane(concurrent_rx, this, CONCURRENCY);
        futures::join!(dispatch, ordered, evictions, concurrent);
    }

    fn recorder(&self, scheduler_name: &str) -> Recorder {
        let mut map = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(scheduler_name.to_string())
            .or_insert_with(|| {
                let reporter = EventReporter {
                    controller: scheduler_name.to_string(),
                    instance: Some(format!("{scheduler_name}-{}", self.instance)),
                };
                Recorder::new(self.events.clone(), reporter)
            })
            .clone()
    }

    async fn send(&self, report: Report) {
        match report {
            Report::Scheduled { pod, node } => {
                let ev = Event {
                    type_: EventType::Normal,
                    reason: "Scheduled".into(),
                    note: Some(format!("Successfully assigned {}/{} to {node}", pod.namespace, pod.name)),
                    action: "Binding".into(),
                    secondary: None,
                };
                self.event(&pod, ev).await;
            }
            Report::Failed { pod, message, reason, condition, nominated_node } => {
                self.failed_event(&pod, truncate(&message, 1024)).await;
                if condition {
                    self.condition(&pod, &message, reason, nominated_node.as_deref()).await;
                }
            }
            Report::Preempt { victim, node, preemptor, reclaim } => {
                self.preempt(&victim, &node, &preemptor, reclaim.as_deref()).await
            }
            Report::GangStatus { namespace, name, status } => {
                let api: Api<PodGroupObject> = Api::namespaced(self.main.clone(), &namespace);
                let patch = Patch::Merge(crate::podgroup::status_patch(&status));
                write_status(&api, &format!("PodGroup {namespace}/{name}"), &name, &patch).await;
            }
            Report::QueueStatus { name, status } => {
                let api: Api<QueueObject> = Api::all(self.main.clone());
                let patch = Patch::Merge(json!({ "status": status }));
                write_status(&api, &format!("Queue {name}"), &name, &patch).await;
            }
            Report::PodNote { pod, reason, note } => {
                let ev = Event {
                    type_: EventType::Normal,
                    reason: reason.into(),
                    note: Some(truncate(&note, 1024)),
                    action: "Evicting".into(),
                    secondary: None,
                };
                self.event(&pod, ev).await;
            }
            Report::NodeNote { node, reason, note, controller } => {
                let ev = Event {
                    type_: EventType::Normal,
                    reason: reason.into(),
                    note: Some(truncate(&note, 1024)),
                    action: "Draining".into(),
                    secondary: None,
                };
                self.node_event(&node, &controller, ev).await;
            }
            Report::ConfigNote { namespace, name, reason, note, warning, controller } => {
                let ev = Event {
                    type_: if warning { EventType::Warning } else { EventType::Normal },
                    reason: reason.into(),
                    note: Some(truncate(&note, 1024)),
                    action: "Configuring".into(),
                    secondary: None,
                };
                let config_map = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("ConfigMap".into()),
                    namespace: Some(namespace.clone()),
                    name: Some(name.clone()),
                    ..Default::default()
                };
                if let Err(e) = self.recorder(&controller).publish(&ev, &config_map).await {
                    debug!(configmap = %format!("{namespace}/{name}"), "event not recorded: {e}");
                }
            }
            Report::NodeWarning { node, message, controller } => {
                let ev = Event {
                    type_: EventType::Warning,
                    reason: "InvalidNodeFact".into(),
                    note: Some(truncate(&message, 1024)),
                    action: "Scheduling".into(),
                    secondary: None,
                };
                self.node_event(&node, &controller, ev).await;
            }
        }
    }

    async fn node_event(&self, node: &str, controller: &str, ev: Event) {
        let node_ref = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        };
        if let Err(e) = self.recorder(controller).publish(&ev, &node_ref).await {
            debug!(%node, "event not recorded: {e}");
        }
    }

    /// An Event about a pod, created as it is: `Scheduled` and
    /// `Preempted` happen once per pod and binding, so there is no series
    /// to count. (kube-rs's recorder keeps every Event it sent for six
    /// minutes and scans them all on each publish: 10,000 bindings cost
    /// tens of MiB and a quadratic scan.)
    async fn event(&self, pod: &PodId, ev: Event) {
        let type_ = match ev.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let mut event = self.pod_event(pod, type_, &ev.reason, &ev.action, ev.note, jiff::Timestamp::now());
        event.related = ev.secondary;
        let api: Api<K8sEvent> = Api::namespaced(self.events.clone(), &pod.namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "event not recorded: {e}");
        }
    }

    /// A new Event regarding `pod`, reported by its scheduler.
    fn pod_event(
        &self,
        pod: &PodId,
        type_: &str,
        reason: &str,
        action: &str,
        note: Option<String>,
        now: jiff::Timestamp,
    ) -> K8sEvent {
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond())),
                namespace: Some(pod.namespace.clone()),
                ..Default::default()
            },
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note,
            type_: Some(type_.to_string()),
            event_time: Some(MicroTime(now)),
            regarding: Some(pod.reference()),
            reporting_controller: Some(pod.scheduler_name.clone()),
            reporting_instance: Some(format!("{}-{}", pod.scheduler_name, self.instance)),
            ..Default::default()
        }
    }

    /// A FailedScheduling Event as kube-scheduler's recorder makes it: one
    /// Event per pod and message, a repeat of the message counted in that
    /// Event's series. (kube-rs's recorder keys series without the
    /// message, so a pod whose reason changed would keep showing the
    /// first one.)
    async fn failed_event(&self, pod: &PodId, note: String) {
        let now = jiff::Timestamp::now();
        let key = (pod.uid.clone(), note.clone());
        let previous = {
            let mut map = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, s| s.last + SERIES_TTL > now);
            map.get(&key).cloned()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.events.clone(), &pod.namespace);
        let result = match previous {
            Some(prev) => {
                let series = EventSeries { count: prev.count + 1, last_observed_time: MicroTime(now) };
                let patch = json!({ "series": series });
                api.patch(&prev.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| FailedSeries {
                    name: prev.name,
                    count: prev.count + 1,
                    last: now,
                })
            }
            None => {
                let ev = self.pod_event(pod, "Warning", "FailedScheduling", "Scheduling", Some(note), now);
                let name = ev.metadata.name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &ev).await.map(|_| FailedSeries { name, count: 1, last: now })
            }
        };
        match result {
            Ok(series) => {
                self.failed.lock().unwrap_or_else(|e| e.into_inner()).insert(key, series);
            }
            Err(e) => debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "event not recorded: {e}"),
        }
    }

    /// Evicts a victim as kube-scheduler's preemption does: the
    /// `DisruptionTarget` condition first (so its controller and users see
    /// why), then the deletion with the pod's UID as precondition, then the
    /// `Preempted` Event. A victim already gone is not an error.
    async fn preempt(&self, victim: &PodId, node: &str, preemptor: &PodId, reclaim: Option<&str>) {
        let api: Api<K8sPod> = Api::namespaced(self.main.clone(), &victim.namespace);
        let key = format!("{}/{}", victim.namespace, victim.name);
        let patch = disruption_patch(victim, &preemptor.scheduler_name, reclaim, jiff::Timestamp::now());
        if let Err(e) = api.patch_status(&victim.name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            debug!(pod = %key, "DisruptionTarget not set: {e}");
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(victim.uid.clone()), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(&victim.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                debug!(pod = %key, "victim already gone");
                return;
            }
            Err(e) => {
                warn!(pod = %key, "preemption could not delete the victim: {e}");
                return;
            }
        }
        let ev = Event {
            type_: EventType::Normal,
            reason: "Preempted".into(),
            note: Some(match reclaim {
                Some(q) => {
                    format!("Preempted by pod {} on node {node}: queue {q} reclaims the quota it lent", preemptor.uid)
                }
                None => format!("Preempted by pod {} on node {node}", preemptor.uid),
            }),
            action: "Preempting".into(),
            secondary: Some(preemptor.reference()),
        };
        // Reported by the preemptor's scheduler, about the victim.
        let victim = PodId { scheduler_name: preemptor.scheduler_name.clone(), ..victim.clone() };
        self.event(&victim, ev).await;
    }

    /// A strategic-merge patch of the status: `conditions` merge by
    /// `type`, so other conditions are untouched.
    async fn condition(&self, pod: &PodId, message: &str, reason: &str, nominated_node: Option<&str>) {
        let api: Api<K8sPod> = Api::namespaced(self.main.clone(), &pod.namespace);
        let patch = condition_patch(pod, message, reason, nominated_node, jiff::Timestamp::now());
        let params = PatchParams::default();
        if let Err(e) = api.patch_status(&pod.name, &params, &Patch::Strategic(patch)).await {
            debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "status not updated: {e}");
        }
    }
}

/// The status patch for an unschedulable pod. The UID precondition keeps
/// it from landing on a new pod of the same name.
pub fn condition_patch(
    pod: &PodId,
    message: &str,
    reason: &str,
    nominated_node: Option<&str>,
    now: jiff::Timestamp,
) -> serde_json::Value {
    let mut status = json!({
        "conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }]
    });
    if let Some(node) = nominated_node {
        status["nominatedNodeName"] = json!(node);
    }
    json!({"metadata": {"uid": pod.uid}, "status": status})
}

/// The `DisruptionTarget` condition kube-scheduler sets on a victim.
/// The reason is kube's for any scheduler preemption (a closed list the
/// API documents); the message says whether a queue reclaims its quota.
pub fn disruption_patch(
    victim: &PodId,
    scheduler_name: &str,
    reclaim: Option<&str>,
    now: jiff::Timestamp,
) -> serde_json::Value {
    let message = match reclaim {
        Some(q) => format!("{scheduler_name}: queue {q} reclaims the quota this pod's queue borrowed"),
        None => format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
    };
    json!({"metadata": {"uid": victim.uid}, "status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }]}})
}

/// Event notes are limited to 1 KiB by the API server.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_patch_merges_by_type_and_carries_the_uid() {
        let pod = PodId { namespace: "ns".into(), name: "p".into(), uid: "u1".into(), scheduler_name: "s".into() };
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap_or_default();
        let p = condition_patch(&pod, "0/3 nodes are available", "Unschedulable", Some("n1"), now);
        assert_eq!(
            p,
            json!({"metadata": {"uid": "u1"}, "status": {
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
                "nominatedNodeName": "n1"}})
        );
        assert!(condition_patch(&pod, "m", "Unschedulable", None, now)["status"].get("nominatedNodeName").is_none());
    }

    #[test]
    fn the_disruption_condition_is_kubes() {
        let pod = PodId { namespace: "ns".into(), name: "v".into(), uid: "u2".into(), scheduler_name: "s".into() };
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap_or_default();
        assert_eq!(
            disruption_patch(&pod, "gpu-scheduler", None, now),
            json!({"metadata": {"uid": "u2"}, "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                "reason": "PreemptionByScheduler", "message": "gpu-scheduler: preempting to accommodate a higher priority pod",
                "lastTransitionTime": "2026-01-02T03:04:05Z"}]}})
        );
        let reclaimed = disruption_patch(&pod, "gpu-scheduler", Some("team-b"), now);
        assert_eq!(
            reclaimed["status"]["conditions"][0]["message"],
            "gpu-scheduler: queue team-b reclaims the quota this pod's queue borrowed"
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short", 1024), "short");
        let long = "é".repeat(600);
        let t = truncate(&long, 1024);
        assert!(t.len() <= 1024 && t.ends_with("..."), "{}", t.len());
    }
}
