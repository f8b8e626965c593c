//! The ceiling: the writes every scheduler must make per pod (the binding
//! to a node and one Scheduled Event) with no decision at all, as fast as
//! the API server takes them. In drain mode the bindings are computed
//! before the clock starts (pods listed, nodes round-robin) and sent
//! `in_flight` at a time; in stream mode each pending pod is bound as the
//! watch shows it. Its client speaks HTTP/2 unless told otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::workload::node_name;
use gpu_scheduler_e2e::cluster::retrying;

/// Bindings in flight by default (`--ceiling-in-flight` changes it): on
/// the 2-core machine of BENCHMARKS.md the API server is busy long before
/// this many wait on it.
pub const IN_FLIGHT: usize = 128;

/// Events in flight at most: like a scheduler's event sender (gpu-
/// scheduler's sends 16 at a time), so that Events queue behind the
/// bindings instead of taking the API server from them.
const EVENTS_IN_FLIGHT: usize = 16;

/// A pod to bind: name and UID.
type Target = (String, Option<String>);

pub struct Ceiling {
    pods: Api<Pod>,
    events: Api<Event>,
    scheduler: String,
    nodes: usize,
    in_flight: usize,
    retries: Arc<AtomicU64>,
    go: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Ceiling {
    pub fn new(client: Client, namespace: &str, scheduler: &str, nodes: usize, in_flight: usize) -> Ceiling {
        Ceiling {
            pods: Api::namespaced(client.clone(), namespace),
            events: Api::namespaced(client, namespace),
            scheduler: scheduler.to_string(),
            nodes: nodes.max(1),
            in_flight: in_flight.max(1),
            retries: Arc::default(),
            go: None,
            task: None,
        }
    }

    /// Stream mode: binds each pending pod of its scheduler as the watch
    /// shows it.
    pub fn watching(mut self) -> Ceiling {
        let cfg = watcher::Config::default().fields(&format!("spec.schedulerName={},spec.nodeName=", self.scheduler));
        let next = Arc::new(AtomicUsize::new(0));
        let writer = self.writer();
        let (pods, in_flight, nodes) = (self.pods.clone(), self.in_flight, self.nodes);
        self.task = Some(tokio::spawn(async move {
            watcher(pods, cfg)
                .filter_map(|e| async move {
                    match e {
                        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => Some(p),
                        _ => None,
                    }
                })
                .for_each_concurrent(in_flight, |p| {
                    let node = node_name(next.fetch_add(1, Ordering::Relaxed) % nodes);
                    let writer = writer.clone();
                    async move {
                        let target = (p.metadata.name.unwrap_or_default(), p.metadata.uid);
                        writer.bind(target, node).await;
                    }
                })
                .await;
        }));
        self
    }

    /// Drain mode: lists the pending pods and pairs each with a node now;
    /// the bindings go when [`Ceiling::go`] is called.
    pub async fn precomputed(mut self) -> Result<Ceiling> {
        let (pods, all) = (self.pods.clone(), ListParams::default());
        let list = retrying(|| pods.list(&all)).await?;
        let targets: Vec<(Target, String)> = list
            .items
            .into_iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
            .enumerate()
            .map(|(i, p)| ((p.metadata.name.unwrap_or_default(), p.metadata.uid), node_name(i % self.nodes)))
            .collect();
        let (tx, rx) = oneshot::channel();
        let writer = self.writer();
        let in_flight = self.in_flight;
        self.go = Some(tx);
        self.task = Some(tokio::spawn(async move {
            if rx.await.is_err() {
                return;
            }
            futures::stream::iter(targets)
                .for_each_concurrent(in_flight, |(target, node)| {
                    let writer = writer.clone();
                    async move { writer.bind(target, node).await }
                })
                .await;
        }));
        Ok(self)
    }

    pub fn go(&mut self) {
        if let Some(tx) = self.go.take() {
            let _ = tx.send(());
        }
    }

    /// Stops, and says how many requests were retried.
    pub fn stop(self) -> u64 {
        if let Some(t) = self.task {
            t.abort();
        }
        self.retries.load(Ordering::Relaxed)
    }

    fn writer(&self) -> Writer {
        Writer {
            pods: self.pods.clone(),
            events: self.events.clone(),
            retries: self.retries.clone(),
            events_in_flight: Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT)),
        }
    }
}

#[derive(Clone)]
struct Writer {
    pods: Api<Pod>,
    events: Api<Event>,
    retries: Arc<AtomicU64>,
    events_in_flight: Arc<tokio::sync::Semaphore>,
}

impl Writer {
    /// The binding, retried when the connection fails or the API server
    /// sheds load; then the Event, off the binding path as a scheduler
    /// sends its Events.
    async fn bind(&self, (name, uid): Target, node: String) {
        let binding = Binding {
            metadata: ObjectMeta { name: Some(name.clone()), uid: uid.clone(), ..Default::default() },
            target: ObjectReference { kind: Some("Node".into()), name: Some(node.clone()), ..Default::default() },
        };
        let mut attempt = 0u64;
        loop {
            let r = self
                .pods
                .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                .await;
            match r {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code != 429 && s.code < 500 => return,
                Err(_) if attempt >= 5 => return,
                Err(_) => {
                    attempt += 1;
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
                }
            }
        }
        let ev = Event {
            metadata: ObjectMeta { generate_name: Some(format!("{name}.")), ..Default::default() },
            event_time: Some(MicroTime(jiff::Timestamp::now())),
            action: Some("Binding".into()),
            reason: Some("Scheduled".into()),
            note: Some(format!("Successfully assigned {name} to {node}")),
            type_: Some("Normal".into()),
            reporting_controller: Some("ceiling".into()),
            reporting_instance: Some("ceiling".into()),
            regarding: Some(ObjectReference {
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: self.pods_namespace(),
                uid,
                api_version: Some("v1".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (events, in_flight) = (self.events.clone(), self.events_in_flight.clone());
        tokio::spawn(async move {
            let Ok(_permit) = in_flight.acquire().await else { return };
            let _ = events.create(&PostParams::default(), &ev).await;
        });
    }

    fn pods_namespace(&self) -> Option<String> {
        self.pods.namespace().map(str::to_string)
    }
}
