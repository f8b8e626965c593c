//! Watches: Nodes, Namespaces, Pods (one watch, as kube-scheduler's one
//! pod informer: a binding comes back as one event, where a pending and a
//! bound watch would each send one), PodDisruptionBudgets, the volume
//! objects (claims, volumes, storage classes, CSINodes), the selectors of
//! Services, ReplicaSets, StatefulSets and ReplicationControllers (for
//! default topology spreading), the DRA objects
//! (ResourceSlices, DeviceClasses, ResourceClaims, when
//! `resource.k8s.io/v1` is served) and (when their CRDs are served)
//! PodGroups and Queues, each a kube-rs watcher whose objects are
//! converted to the engine's model as they arrive (the API objects are
//! not kept, which keeps memory to what scheduling reads) and sent to the
//! scheduling thread as [`Change`]s, the one path into the cache.
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
use engine::model::LabelSelector;
use engine::model::{Labels, Pod};
use engine::scheduler::ObjectChange;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node as K8sNode, PersistentVolume, PersistentVolumeClaim, Pod as K8sPod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use engine::convert::{PodGroupObject, QueueObject, pod_group_from_object, queue_from_object};

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

/// Which watch a change came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Nodes,
    Namespaces,
    Pods,
    PodGroups,
    Queues,
    Pdbs,
    Claims,
    Volumes,
    StorageClasses,
    CsiNodes,
    Services,
    ReplicaSets,
    StatefulSets,
    ReplicationControllers,
    ResourceSlices,
    DeviceClasses,
    ResourceClaims,
}

/// Whether the API server serves `resource.k8s.io/v1` (DRA, GA since
/// Kubernetes 1.34); without it the DRA objects are not watched.
pub async fn dra_served(client: &Client) -> bool {
    match client.list_api_group_resources("resource.k8s.io/v1").await {
        Ok(list) => list.resources.iter().any(|r| r.name == "resourceslices"),
        Err(_) => false,
    }
}

/// How long each watch request lasts before the API server ends it and
/// the watcher resumes from where it was (no relist). kube-rs gives up on
/// a watch silent for this plus 5 s, so this bounds how long a half-open
/// connection hides the cluster from the scheduler; client-go's HTTP/2
/// pings notice one in about 45 s, and this stays below that.
pub const WATCH_TIMEOUT_SECS: u32 = 30;

/// Pods in a terminal phase hold no resources, as in kube-scheduler.
const NOT_FINISHED: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Starts the watches; changes go to `tx`. Returns the sources the
/// scheduler must see synced before its first decision.
///
/// `keep` says whether pods and nodes keep their API objects (extenders are
/// sent them); without extenders neither does, to save memory.
/// `podgroups` says whether the PodGroup CRD is served (see
/// [`crate::podgroup::served`]); `dra` whether `resource.k8s.io/v1` is
/// (see [`dra_served`]); `queues` whether the Queue CRD is
/// ([`crate::queue::served`]).
pub fn spawn_all<T>(
    client: &Client,
    scheduler_names: &[String],
    keep: (bool, bool),
    (podgroups, dra, queues): (bool, bool, bool),
    tx: mpsc::Sender<T>,
) -> Vec<Source>
where
    T: From<Change> + Send + 'static,
{
    let (keep_pods, keep_nodes) = keep;
    let config = || watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
    spawn(Api::<K8sNode>::all(client.clone()), config(), Source::Nodes, tx.clone(), move |n| {
        match convert::node_from_k8s(n) {
            Ok(mut node) => {
                if keep_nodes {
                    node.source = serde_json::to_value(n).ok().map(Arc::new);
                }
                Some(Change::Object(ObjectChange::Node(Box::new(node))))
            }
            Err(e) => {
                warn!(node = %n.name_any(), "ignoring node: {e}");
                None
            }
        }
    });
    spawn(Api::<Namespace>::all(client.clone()), config(), Source::Namespaces, tx.clone(), |ns| {
        let labels: Labels = ns.labels().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Some(Change::Object(ObjectChange::Namespace(ns.name_any(), labels)))
    });
    let names: HashSet<String> = scheduler_names.iter().cloned().collect();
    spawn(Api::<K8sPod>::all(client.clone()), config().fields(NOT_FINISHED), Source::Pods, tx.clone(), move |p| {
        pod_of_interest(p, &names, keep_pods)
    });
    spawn(Api::<PodDisruptionBudget>::all(client.clone()), config(), Source::Pdbs, tx.clone(), |b| {
        match convert::pdb_from_k8s(b) {
            Ok(pdb) => Some(Change::Object(ObjectChange::Pdb(Box::new(pdb)))),
            Err(e) => {
                warn!(pdb = %format!("{}/{}", b.namespace().unwrap_or_default(), b.name_any()), "ignoring PodDisruptionBudget: {e}");
                None
            }
        }
    });
    // Volume objects, converted as they arrive; one that cannot be read is
    // left out (pods using it wait, as for a missing object) and logged.
    fn lenient<K: ResourceExt, T>(kind: &'static str, r: Result<T, convert::ConvertError>, obj: &K) -> Option<T> {
        r.map_err(|e| warn!(object = %format!("{kind} {}/{}", obj.namespace().unwrap_or_default(), obj.name_any()), "ignoring: {e}"))
            .ok()
    }
    spawn(Api::<PersistentVolumeClaim>::all(client.clone()), config(), Source::Claims, tx.clone(), |c| {
        lenient("PersistentVolumeClaim", convert::claim_from_k8s(c), c)
            .map(|c| Change::Object(ObjectChange::Claim(Box::new(c))))
    });
    spawn(Api::<PersistentVolume>::all(client.clone()), config(), Source::Volumes, tx.clone(), |v| {
        lenient("PersistentVolume", convert::volume_from_k8s(v), v)
            .map(|v| Change::Object(ObjectChange::Volume(Box::new(v))))
    });
    spawn(Api::<StorageClass>::all(client.clone()), config(), Source::StorageClasses, tx.clone(), |c| {
        lenient("StorageClass", convert::class_from_k8s(c), c)
            .map(|c| Change::Object(ObjectChange::StorageClass(Box::new(c))))
    });
    spawn(Api::<CSINode>::all(client.clone()), config(), Source::CsiNodes, tx.clone(), |c| {
        lenient("CSINode", convert::csi_node_from_k8s(c), c).map(|c| Change::Object(ObjectChange::CsiNode(Box::new(c))))
    });
    // Default spreading's selectors: Services and the controllers of pods.
    spawn(Api::<Service>::all(client.clone()), config(), Source::Services, tx.clone(), |svc| {
        let selector = svc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        Some(Change::Object(ObjectChange::Service(namespaced(svc), Some(selector))))
    });
    spawn(Api::<ReplicaSet>::all(client.clone()), config(), Source::ReplicaSets, tx.clone(), |rs| {
        let sel = rs.spec.as_ref().map(|s| &s.selector);
        controller("ReplicaSet", namespaced(rs), sel.map(|s| convert::label_selector(s, "spec.selector")))
    });
    spawn(Api::<StatefulSet>::all(client.clone()), config(), Source::StatefulSets, tx.clone(), |ss| {
        let sel = ss.spec.as_ref().map(|s| &s.selector);
        controller("StatefulSet", namespaced(ss), sel.map(|s| convert::label_selector(s, "spec.selector")))
    });
    spawn(
        Api::<ReplicationController>::all(client.clone()),
        config(),
        Source::ReplicationControllers,
        tx.clone(),
        |rc| {
            let map = rc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
            let sel = LabelSelector::from_match_labels(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            controller("ReplicationController", namespaced(rc), Some(Ok(sel)))
        },
    );
    // Field selectors cannot say "one of these names": one watch per name.
    let mut sources = vec![
        Source::Nodes,
        Source::Namespaces,
        Source::Pods,
        Source::Pdbs,
        Source::Claims,
        Source::Volumes,
        Source::StorageClasses,
        Source::CsiNodes,
        Source::Services,
        Source::ReplicaSets,
        Source::StatefulSets,
        Source::ReplicationControllers,
    ];
    if podgroups {
        let api = Api::<PodGroupObject>::all(client.clone());
        spawn(api, config(), Source::PodGroups, tx.clone(), |g| match pod_group_from_object(g) {
            Ok(group) => Some(Change::Object(ObjectChange::PodGroup(Box::new(group)))),
            Err(e) => {
                // Its members wait as members of an unknown group would.
                warn!(podgroup = %format!("{}/{}", g.namespace().unwrap_or_default(), g.name_any()), "ignoring PodGroup: {e}");
                None
            }
        });
        sources.push(Source::PodGroups);
    }
    if queues {
        let api = Api::<QueueObject>::all(client.clone());
        spawn(api, config(), Source::Queues, tx.clone(), |q| match queue_from_object(q) {
            Ok(queue) => Some(Change::Object(ObjectChange::Queue(Box::new(queue)))),
            Err(e) => {
                // Its pods wait as pods of an unknown queue would.
                warn!(queue = %q.name_any(), "ignoring Queue: {e}");
                None
            }
        });
        sources.push(Source::Queues);
    }
    if dra {
        spawn(Api::<ResourceSlice>::all(client.clone()), config(), Source::ResourceSlices, tx.clone(), |s| {
            lenient("ResourceSlice", convert::slice_from_k8s(s), s)
                .map(|s| Change::Object(ObjectChange::Slice(Box::new(s))))
        });
        spawn(Api::<DeviceClass>::all(client.clone()), config(), Source::DeviceClasses, tx.clone(), |c| {
            lenient("DeviceClass", convert::device_class_from_k8s(c), c)
                .map(|c| Change::Object(ObjectChange::DeviceClass(Box::new(c))))
        });
        spawn(Api::<ResourceClaim>::all(client.clone()), config(), Source::ResourceClaims, tx.clone(), |c| {
            lenient("ResourceClaim", convert::resource_claim_from_k8s(c), c)
                .map(|c| Change::Object(ObjectChange::ResourceClaim(Box::new(c))))
        });
        sources.extend([Source::ResourceSlices, Source::DeviceClasses, Source::ResourceClaims]);
    }
    sources
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

/// `NAMESPACE/NAME` of a namespaced object.
fn namespaced<K: ResourceExt>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// A controller's selector change; a selector that cannot be read leaves
/// the controller without one (its pods get no default spreading).
fn controller(
    kind: &'static str,
    key: String,
    selector: Option<Result<engine::model::LabelSelector, convert::ConvertError>>,
) -> Option<Change> {
    let selector = match selector {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            warn!(object = %format!("{kind} {key}"), "ignoring selector: {e}");
            None
        }
        None => None,
    };
    Some(Change::Object(ObjectChange::Controller(kind, key, selector)))
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

/// The key a deletion is sent with: UID for pods (the engine's pod key),
/// name for cluster-scoped objects, `NAMESPACE/NAME` for the others.
fn key_of<K: Resource>(source: Source, obj: &K) -> String {
    let meta = obj.meta();
    match source {
        Source::Pods => meta.uid.clone().unwrap_or_default(),
        Source::Nodes
        | Source::Namespaces
        | Source::Volumes
        | Source::StorageClasses
        | Source::CsiNodes
        | Source::ResourceSlices
        | Source::Queues
        | Source::DeviceClasses => meta.name.clone().unwrap_or_default(),
        Source::PodGroups
        | Source::ResourceClaims
        | Source::Pdbs
        | Source::Claims
        | Source::Services
        | Source::ReplicaSets
        | Source::StatefulSets
        | Source::ReplicationControllers => {
            format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
        }
    }
}

fn gone(source: Source, key: String) -> Option<Change> {
    match source {
        Source::Nodes => Some(Change::Object(ObjectChange::NodeDeleted(key))),
        Source::Pods => Some(Change::PodGone(key)),
        Source::PodGroups => Some(Change::Object(ObjectChange::PodGroupDeleted(key))),
        Source::Queues => Some(Change::Object(ObjectChange::QueueDeleted(key))),
        Source::Pdbs => Some(Change::Object(ObjectChange::PdbDeleted(key))),
        Source::Claims => Some(Change::Object(ObjectChange::ClaimDeleted(key))),
        Source::Volumes => Some(Change::Object(ObjectChange::VolumeDeleted(key))),
        Source::StorageClasses => Some(Change::Object(ObjectChange::StorageClassDeleted(key))),
        Source::CsiNodes => Some(Change::Object(ObjectChange::CsiNodeDeleted(key))),
        Source::Services => Some(Change::Object(ObjectChange::Service(key, None))),
        Source::ReplicaSets => Some(Change::Object(ObjectChange::Controller("ReplicaSet", key, None))),
        Source::StatefulSets => Some(Change::Object(ObjectChange::Controller("StatefulSet", key, None))),
        Source::ReplicationControllers => {
            Some(Change::Object(ObjectChange::Controller("ReplicationController", key, None)))
        }
        Source::ResourceSlices => Some(Change::Object(ObjectChange::SliceDeleted(key))),
        Source::DeviceClasses => Some(Change::Object(ObjectChange::DeviceClassDeleted(key))),
        Source::ResourceClaims => Some(Change::Object(ObjectChange::ResourceClaimDeleted(key))),
        // The engine keeps namespace labels only for selectors; a deleted
        // namespace has no pods left to match.
        Source::Namespaces => None,
    }
}

fn spawn<K, T, F>(api: Api<K>, config: watcher::Config, source: Source, tx: mpsc::Sender<T>, convert: F)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    T: From<Change> + Send + 'static,
    F: Fn(&K) -> Option<Change> + Send + 'static,
{
    tokio::spawn(async move {
        let mut relist = Relist::default();
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    warn!(?source, "watch failed, retrying: {e}");
                    continue;
                }
            };
            for change in relist.apply(source, event, &convert) {
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
    fn apply<K: Resource>(
        &mut self,
        source: Source,
        event: watcher::Event<K>,
        convert: &impl Fn(&K) -> Option<Change>,
    ) -> Vec<Change> {
        match event {
            watcher::Event::Init => {
                debug!(?source, "listing");
                self.listing = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let key = key_of(source, &obj);
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
                let mut out: Vec<Change> = missing.into_iter().filter_map(|k| gone(source, k.clone())).collect();
                self.known = listed;
                if !self.synced {
                    self.synced = true;
                    out.push(Change::Synced(source));
                }
                out
            }
            watcher::Event::Apply(obj) => {
                self.known.insert(key_of(source, &obj));
                convert(&obj).into_iter().collect()
            }
            watcher::Event::Delete(obj) => {
                let key = key_of(source, &obj);
                self.known.remove(&key);
                gone(source, key).into_iter().collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let convert =
            |n: &K8sNode| convert::node_from_k8s(n).ok().map(|n| Change::Object(ObjectChange::Node(Box::new(n))));
        let mut r = Relist::default();
        let mut run = |events: Vec<watcher::Event<K8sNode>>| -> Vec<String> {
            events.into_iter().flat_map(|e| names(&r.apply(Source::Nodes, e, &convert))).collect()
        };
        use watcher::Event::*;
        assert_eq!(run(vec![Init, InitApply(node("a")), InitApply(node("b")), InitDone]), ["+a", "+b", "synced"]);
        assert_eq!(run(vec![Apply(node("c")), Delete(node("a"))]), ["+c", "-a"]);
        // The watch broke and listed again: b is gone, d is new.
        assert_eq!(run(vec![Init, InitApply(node("c")), InitApply(node("d")), InitDone]), ["+c", "+d", "-b"]);
        assert_eq!(run(vec![Init, InitDone]), ["-c", "-d"]);
    }
}
