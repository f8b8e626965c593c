//! Watches: Pods (one watch, as kube-scheduler's one pod informer: a
//! binding comes back as one event, where a pending and a bound watch would
//! each send one), and every kind the engine registers
//! (`engine::scheduler::visit_kinds`) that the cluster serves, each a
//! kube-rs watcher whose objects are converted to the engine's model as
//! they arrive (the API objects are not kept, which keeps memory to what
//! scheduling reads) and sent to the scheduling thread as [`Change`]s, the
//! one path into the cache. This module names no kind but pods.
//!
//! After a watch error or an API-server restart the watcher lists again;
//! objects that were known but are missing from the new list are sent as
//! deletions, so the cache converges on what the API server has.
//!
//! Terminal pods are excluded by field selector, and other schedulers'
//! pending pods are skipped before conversion (`pod_of_interest`). Each
//! watch request lasts [`WATCH_TIMEOUT_SECS`] and resumes from its
//! resourceVersion, so a watch on a half-open connection is given up
//! soon. Each watch's first complete list is reported (`Change::Synced`):
//! `run` decides nothing before every watch has synced.

use std::collections::HashSet;
use std::sync::Arc;

use engine::convert;
use engine::model::Pod;
use engine::scheduler::{Kind, KindVisitor, ObjectChange, ReadOptions, key, visit_kinds};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// A cluster change, already converted.
#[derive(Debug)]
pub enum Change {
    /// A cluster object the engine reads, pods aside.
    Object(ObjectChange),
    /// A pod, bound, or pending for one of our schedulerNames.
    Pod(Box<Pod>),
    /// A pod (UID) was deleted or finished.
    PodGone(String),
    /// A node's latest hardware-alert Event (None: none left).
    NodeAlert(String, Option<engine::time::Millis>),
    /// A `nodeFacts.prometheus` fact's current values, by node.
    NodeNumbers(String, std::collections::BTreeMap<String, f64>),
    /// A watch finished its first complete list.
    Synced(Source),
}

/// Which watch a change came from: its kind (`Pod`, `Node`, ...).
pub type Source = String;

/// Whether the API server serves `K` (discovery of its group version).
pub async fn served<K: Resource<DynamicType = ()>>(client: &Client) -> bool {
    let plural = K::plural(&());
    let list = if K::group(&()).is_empty() {
        client.list_core_api_resources(&K::version(&())).await
    } else {
        client.list_api_group_resources(&K::api_version(&())).await
    };
    list.is_ok_and(|l| l.resources.iter().any(|r| r.name == plural))
}

/// The registered kinds a cluster may not serve and this one does not
/// (by kind name); with `warn_lost`, each is said once with what the
/// scheduler loses without it.
pub async fn unserved(client: &Client, warn_lost: bool) -> HashSet<String> {
    type Probe = for<'c> fn(&'c Client) -> BoxFuture<'c, bool>;
    fn probe<K: Kind>(client: &Client) -> BoxFuture<'_, bool> {
        Box::pin(served::<K::Object>(client))
    }
    struct Optional(Vec<(String, String, &'static str, Probe)>);
    impl KindVisitor for Optional {
        fn visit<K: Kind>(&mut self) {
            if let Some(lost) = K::WHEN_MISSING {
                let kind = K::Object::kind(&()).into_owned();
                let api = format!("{}.{}", K::Object::plural(&()), K::Object::api_version(&()));
                self.0.push((kind, api, lost, probe::<K>));
            }
        }
    }
    let mut optional = Optional(Vec::new());
    visit_kinds(&mut optional);
    let mut missing = HashSet::new();
    for (kind, api, lost, probe) in optional.0 {
        if !probe(client).await {
            if warn_lost {
                warn!("{kind}s ({api}) are not served: {lost}");
            } else {
                debug!("{kind}s ({api}) are not served");
            }
            missing.insert(kind);
        }
    }
    missing
}

/// How long each watch request lasts before the API server ends it and
/// the watcher resumes from where it was (no relist). kube-rs gives up on
/// a watch silent for this plus 5 s, so this bounds how long a half-open
/// connection hides the cluster from the scheduler; client-go's HTTP/2
/// pings notice one in about 45 s, and this stays below that.
pub const WATCH_TIMEOUT_SECS: u32 = 30;

/// Pods in a terminal phase hold no resources, as in kube-scheduler.
const NOT_FINISHED: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Starts the watches: pods, and every registered kind the cluster serves
/// (all but `unserved`, see [`unserved`]); changes go to `tx`. Returns the
/// sources the scheduler must see synced before its first decision.
///
/// `keep` says whether pods and nodes keep their API objects (extenders are
/// sent them); without extenders neither does, to save memory.
pub fn spawn_all<T>(
    client: &Client,
    scheduler_names: &[String],
    keep: (bool, bool),
    unserved: &HashSet<String>,
    tx: mpsc::Sender<T>,
) -> Vec<Source>
where
    T: From<Change> + Send + 'static,
{
    let (keep_pods, keep_nodes) = keep;
    let names: HashSet<String> = scheduler_names.iter().cloned().collect();
    let pods = K8sPod::kind(&()).into_owned();
    let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS).fields(NOT_FINISHED);
    let uid = |p: &K8sPod| p.meta().uid.clone().unwrap_or_default();
    let watch = Watch { source: pods.clone(), key: uid, gone: |uid| Some(Change::PodGone(uid)) };
    spawn(Api::<K8sPod>::all(client.clone()), config, watch, tx.clone(), move |p| {
        pod_of_interest(p, &names, keep_pods)
    });

    struct Spawner<'a, T> {
        client: &'a Client,
        tx: &'a mpsc::Sender<T>,
        unserved: &'a HashSet<String>,
        read: ReadOptions,
        sources: Vec<Source>,
    }
    impl<T: From<Change> + Send + 'static> KindVisitor for Spawner<'_, T> {
        fn visit<K: Kind>(&mut self) {
            let kind = K::Object::kind(&()).into_owned();
            if self.unserved.contains(&kind) {
                return;
            }
            let read = self.read;
            let watch = Watch { source: kind.clone(), key: key::<K>, gone: |k| K::deleted(k).map(Change::Object) };
            let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
            let label = kind.clone();
            spawn(Api::<K::Object>::all(self.client.clone()), config, watch, self.tx.clone(), move |obj| {
                match K::change(obj, read) {
                    Ok(change) => Some(Change::Object(change)),
                    Err(e) => {
                        // Left out: what needs it waits, as for a missing object.
                        warn!(object = %format!("{label} {}", key::<K>(obj)), "ignoring: {e}");
                        None
                    }
                }
            });
            self.sources.push(kind);
        }
    }
    let read = ReadOptions { keep_node_objects: keep_nodes };
    let mut spawner = Spawner { client, tx: &tx, unserved, read, sources: vec![pods] };
    visit_kinds(&mut spawner);
    spawner.sources
}

/// A pod the scheduler keeps: every bound pod (they hold resources), and
/// the pending pods of our schedulerNames (with their API object when
/// `keep`: extenders are sent it); other schedulers' pending pods are
/// skipped before conversion. A skipped pod's later deletion reaches the
/// scheduler as a [`Change::PodGone`] for a UID it does not know, which
/// changes nothing.
fn pod_of_interest(p: &K8sPod, names: &HashSet<String>, keep: bool) -> Option<Change> {
    let spec = p.spec.as_ref();
    let bound = spec.and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    if !bound {
        let name = spec.and_then(|s| s.scheduler_name.as_deref()).filter(|n| !n.is_empty());
        let name = name.unwrap_or(convert::DEFAULT_SCHEDULER_NAME);
        if !names.contains(name) {
            return None;
        }
    }
    let mut change = pod_change(p);
    if keep
        && !bound
        && let Some(Change::Pod(pod)) = &mut change
    {
        pod.source = serde_json::to_value(p).ok().map(Arc::new);
    }
    change
}

fn pod_change(p: &K8sPod) -> Option<Change> {
    match convert::pod_from_k8s(p) {
        Ok(pod) => Some(Change::Pod(Box::new(pod))),
        Err(e) => {
            warn!(pod = %format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()), "ignoring pod: {e}");
            None
        }
    }
}

/// One watch: where its changes come from, the key an object is known
/// by, and the change an object's deletion makes.
struct Watch<K> {
    source: Source,
    key: fn(&K) -> String,
    gone: fn(String) -> Option<Change>,
}

fn spawn<K, T, F>(api: Api<K>, config: watcher::Config, watch: Watch<K>, tx: mpsc::Sender<T>, convert: F)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    T: From<Change> + Send + 'static,
    F: Fn(&K) -> Option<Change> + Send + 'static,
{
    tokio::spawn(async move {
        let mut relist = Relist::default();
        let source = watch.source.clone();
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    warn!(%source, "watch failed, retrying: {e}");
                    continue;
                }
            };
            for change in relist.apply(&watch, event, &convert) {
                if tx.send(change.into()).await.is_err() {
                    return; // the scheduler stopped
                }
            }
        }
    });
}

/// Tracks the keys one watch has reported, to turn a relist into the
/// deletions it implies.
#[derive(Default)]
struct Relist {
    known: HashSet<String>,
    listing: Option<HashSet<String>>,
    synced: bool,
}

impl Relist {
    fn apply<K>(
        &mut self,
        watch: &Watch<K>,
        event: watcher::Event<K>,
        convert: &impl Fn(&K) -> Option<Change>,
    ) -> Vec<Change> {
        match event {
            watcher::Event::Init => {
                debug!(source = %watch.source, "listing");
                self.listing = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let key = (watch.key)(&obj);
                if let Some(listing) = &mut self.listing {
                    listing.insert(key.clone());
                }
                self.known.insert(key);
                convert(&obj).into_iter().collect()
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                // Sorted, so that the same lists always give the same changes.
                let mut missing: Vec<&String> = self.known.iter().filter(|k| !listed.contains(*k)).collect();
                missing.sort();
                let mut out: Vec<Change> = missing.into_iter().filter_map(|k| (watch.gone)(k.clone())).collect();
                self.known = listed;
                if !self.synced {
                    self.synced = true;
                    out.push(Change::Synced(watch.source.clone()));
                }
                out
            }
            watcher::Event::Apply(obj) => {
                self.known.insert((watch.key)(&obj));
                convert(&obj).into_iter().collect()
            }
            watcher::Event::Delete(obj) => {
                let key = (watch.key)(&obj);
                self.known.remove(&key);
                (watch.gone)(key).into_iter().collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node as K8sNode;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str) -> K8sNode {
        K8sNode { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    fn names(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Object(ObjectChange::Node(n)) => format!("+{}", n.name),
                Change::Object(ObjectChange::NodeDeleted(n)) => format!("-{n}"),
                Change::Synced(_) => "synced".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn the_pod_watch_keeps_bound_pods_and_our_pending_ones() {
        let pod = |scheduler: Option<&str>, node: Option<&str>| -> K8sPod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                "spec": {
                    "containers": [{"name": "c"}],
                    "schedulerName": scheduler,
                    "nodeName": node,
                },
            }))
            .expect("a valid pod")
        };
        let names: HashSet<String> = ["ours".to_string(), "default-scheduler".to_string()].into();
        // (schedulerName, nodeName, keep) -> (kept, its API object kept)
        let cases = [
            (Some("ours"), None, false, Some(false)),
            (Some("ours"), None, true, Some(true)),
            (Some("ours"), Some(""), true, Some(true)),
            (None, None, false, Some(false)), // the API server's default name
            (Some(""), None, false, Some(false)),
            (Some("theirs"), None, true, None),
            (Some("theirs"), Some("n1"), true, Some(false)), // bound: holds resources
            (Some("ours"), Some("n1"), true, Some(false)),
        ];
        for (scheduler, node, keep, want) in cases {
            let got = match pod_of_interest(&pod(scheduler, node), &names, keep) {
                Some(Change::Pod(p)) => Some(p.source.is_some()),
                None => None,
                Some(other) => panic!("unexpected {other:?}"),
            };
            assert_eq!(got, want, "schedulerName {scheduler:?}, nodeName {node:?}, keep {keep}");
        }
    }

    #[test]
    fn a_relist_deletes_what_it_no_longer_lists_and_syncs_once() {
        use engine::scheduler::kinds::Nodes;
        let convert = |n: &K8sNode| Nodes::change(n, ReadOptions::default()).ok().map(Change::Object);
        let watch = Watch { source: "Node".into(), key: key::<Nodes>, gone: |k| Nodes::deleted(k).map(Change::Object) };
        let mut r = Relist::default();
        let mut run = |events: Vec<watcher::Event<K8sNode>>| -> Vec<String> {
            events.into_iter().flat_map(|e| names(&r.apply(&watch, e, &convert))).collect()
        };
        use watcher::Event::*;
        assert_eq!(run(vec![Init, InitApply(node("a")), InitApply(node("b")), InitDone]), ["+a", "+b", "synced"]);
        assert_eq!(run(vec![Apply(node("c")), Delete(node("a"))]), ["+c", "-a"]);
        // The watch broke and listed again: b is gone, d is new.
        assert_eq!(run(vec![Init, InitApply(node("c")), InitApply(node("d")), InitDone]), ["+c", "+d", "-b"]);
        assert_eq!(run(vec![Init, InitDone]), ["-c", "-d"]);
    }
}
