//! One scenario on the live control plane: its objects created through
//! kube-rs, the pending pod placed by gpu-scheduler and then by
//! kube-scheduler against the same state, every object removed afterwards.
//!
//! Order matters. gpu-scheduler goes first: kube-scheduler watches all
//! pods on one stream, so it sees our pod (bound, then deleted) before its
//! own, in that order; gpu-scheduler watches bound and pending pods on two
//! streams and would have no such guarantee. The objects a scheduler may
//! write while binding (the pending pod's unbound claims, free volumes)
//! are made afresh for each run. What cannot be ordered (a node or a
//! claim event still on its way when the pod arrives) is given `settle`,
//! and a decision made on a view with the wrong node count is reported
//! as [`Error::Stale`] rather than compared.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use gpu_scheduler::engine::explain::Explanation;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::compare::{Decision, Verdict, compare, node_count_in};
use crate::scenario::{Run, RunObjects, Scenario};

/// kube-scheduler's annotation on a claim to provision for the pod's node.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// How often a decision is looked for.
const POLL: Duration = Duration::from_millis(10);
/// How long a scheduler may take over one pod before the run is called
/// stale (a liveness bound, not a speed check: decisions take milliseconds).
const DECISION_SECS: u64 = 30;
/// How long an unschedulable decision with another node count may take to
/// be retried with the scenario's nodes (both schedulers retry a pod on a
/// node event, after a backoff of a second or two).
const RECOUNT_SECS: u64 = 8;

/// Both decisions on one scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ours: Decision,
    pub explanation: Explanation,
    pub kube: Decision,
    pub verdict: Verdict,
}

pub struct Harness {
    client: Client,
    /// gpu-scheduler's HTTP address (the explain endpoint).
    our_addr: String,
}

impl Harness {
    pub fn new(client: Client, our_addr: String) -> Harness {
        Harness { client, our_addr }
    }

    /// Runs `s`: creates it, places its pod with both schedulers, compares,
    /// and removes every object it created (also after an error).
    /// `settle` is the pause between a run's last object and its pod.
    pub async fn run(&self, s: &Scenario, settle: Duration) -> Result<Outcome, Error> {
        self.wait_absent(s).await?;
        let result: Result<Outcome, Error> = async {
            self.create_shared(s).await?;
            let (ours, explanation) = self.our_run(s, settle).await?;
            let kube = self.kube_run(s, settle).await?;
            let verdict = compare(&ours, &explanation, &kube);
            Ok(Outcome { ours, explanation, kube, verdict })
        }
        .await;
        let cleaned = self.cleanup(s).await;
        let outcome = result?;
        cleaned?;
        Ok(outcome)
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn claims(&self, ns: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// A scenario run again (a retry, or a named case whose seed also came
    /// up generated) reuses its namespaces' names: the old ones must be gone.
    async fn wait_absent(&self, s: &Scenario) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for ns in &s.namespaces {
            let name = ns.name_any();
            poll(
                &format!("namespace {name} from an earlier run to be deleted"),
                120,
                Duration::from_millis(250),
                || {
                    let api = api.clone();
                    let name = name.clone();
                    async move {
                        let got = api.get_opt(&name).await.map_err(Error::kube(format!("reading namespace {name}")))?;
                        Ok(got.is_none().then_some(()))
                    }
                },
            )
            .await?;
        }
        Ok(())
    }

    async fn create_shared(&self, s: &Scenario) -> Result<(), Error> {
        let all = |c: &Client| c.clone();
        create_all(&Api::<Namespace>::all(all(&self.client)), &s.namespaces).await?;
        create_all(&Api::<StorageClass>::all(all(&self.client)), &s.storage_classes).await?;
        let volumes: Vec<PersistentVolume> = s.shared_volumes().cloned().collect();
        create_all(&Api::<PersistentVolume>::all(all(&self.client)), &volumes).await?;
        let claims: Vec<PersistentVolumeClaim> = s.shared_claims().cloned().collect();
        create_namespaced(&self.client, &claims).await?;
        create_all(&Api::<Node>::all(all(&self.client)), &s.nodes).await?;
        create_namespaced::<Service>(&self.client, &s.services).await?;
        create_namespaced(&self.client, &s.bound_pods).await?;
        // Pre-bound claims: the PV controller completes the binding (both
        // schedulers read a claim as bound only then).
        for c in &claims {
            let api = self.claims(c.metadata.namespace.as_deref().unwrap_or_default());
            let name = c.name_any();
            poll(&format!("claim {name} to be bound"), DECISION_SECS, POLL, || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let c = api.get(&name).await.map_err(Error::kube(format!("reading claim {name}")))?;
                    Ok((c.status.and_then(|s| s.phase).as_deref() == Some("Bound")).then_some(()))
                }
            })
            .await?;
        }
        Ok(())
    }

    /// Creates a run's claims, volumes and then (after `settle`) its pod.
    async fn start_run(&self, run: &RunObjects, settle: Duration) -> Result<(), Error> {
        create_all(&Api::<PersistentVolume>::all(self.client.clone()), &run.volumes).await?;
        create_namespaced(&self.client, &run.claims).await?;
        tokio::time::sleep(settle).await;
        create_namespaced(&self.client, std::slice::from_ref(&run.pod)).await
    }

    /// Deletes a run's pod, claims and volumes and waits until they are gone.
    async fn end_run(&self, s: &Scenario, run: &RunObjects) -> Result<(), Error> {
        let ns = s.namespace();
        let pods = self.pods(ns);
        let name = run.pod.name_any();
        ignore_missing(pods.delete(&name, &DeleteParams::default().grace_period(0)).await.map(|_| ()))
            .map_err(Error::kube(format!("deleting pod {name}")))?;
        for c in &run.claims {
            delete_unprotected(&self.claims(ns), &c.name_any()).await?;
        }
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        for v in &run.volumes {
            delete_unprotected(&volumes, &v.name_any()).await?;
        }
        poll(&format!("pod {name} to be deleted"), DECISION_SECS, POLL, || {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let got = pods.get_opt(&name).await.map_err(Error::kube(format!("reading pod {name}")))?;
                Ok(got.is_none().then_some(()))
            }
        })
        .await
    }

    async fn our_run(&self, s: &Scenario, settle: Duration) -> Result<(Decision, Explanation), Error> {
        let run = s.run_objects(Run::Ours);
        self.start_run(&run, settle).await?;
        let decided = self.our_decision(s, &run).await;
        self.finish_run(s, &run, decided).await
    }

    async fn kube_run(&self, s: &Scenario, settle: Duration) -> Result<Decision, Error> {
        let run = s.run_objects(Run::Kube);
        self.start_run(&run, settle).await?;
        let decided = self.kube_decision(s, &run).await;
        self.finish_run(s, &run, decided).await
    }

    /// Ends a run whatever its decision was, then returns the decision.
    async fn finish_run<T>(&self, s: &Scenario, run: &RunObjects, decided: Result<T, Error>) -> Result<T, Error> {
        let ended = self.end_run(s, run).await;
        let decided = decided?;
        ended?;
        Ok(decided)
    }

    /// Our decision from the explain endpoint; for an unschedulable pod,
    /// the message from its PodScheduled condition.
    async fn our_decision(&self, s: &Scenario, run: &RunObjects) -> Result<(Decision, Explanation), Error> {
        let ns = s.namespace().to_string();
        let name = run.pod.name_any();
        let path = format!("/debug/explain/{ns}/{name}");
        let want = s.nodes.len();
        let start = Instant::now();
        let explanation = poll(&format!("gpu-scheduler's decision for {ns}/{name}"), DECISION_SECS, POLL, || {
            let path = path.clone();
            async move {
                let (status, body) = http_get(&self.our_addr, &path).await?;
                if status != 200 {
                    return Ok(None);
                }
                let e: Explanation = serde_json::from_str(&body)?;
                // An unschedulable decision on a partial view is retried by
                // the scheduler when the missing node arrives.
                if e.total_nodes != want && e.node.is_none() && start.elapsed().as_secs() < RECOUNT_SECS {
                    return Ok(None);
                }
                Ok(Some(e))
            }
        })
        .await?;
        if explanation.total_nodes != want {
            return Err(Error::Stale(format!(
                "gpu-scheduler decided on {} nodes, the scenario has {want}",
                explanation.total_nodes
            )));
        }
        let decision = match &explanation.node {
            Some(n) => Decision::Scheduled(n.clone()),
            None => {
                let pods = self.pods(&ns);
                let message = poll(&format!("the PodScheduled condition of {ns}/{name}"), DECISION_SECS, POLL, || {
                    let pods = pods.clone();
                    let name = name.clone();
                    async move {
                        let p = pods.get(&name).await.map_err(Error::kube(format!("reading pod {name}")))?;
                        Ok(unschedulable_message(&p).filter(|m| node_count_in(m) == Some(want)))
                    }
                })
                .await?;
                Decision::Unschedulable(message)
            }
        };
        Ok((decision, explanation))
    }

    /// kube's decision: the pod's node; or the node it selected on a
    /// claim to provision (the pod waits for a provisioner that never
    /// comes); or its PodScheduled condition's message.
    async fn kube_decision(&self, s: &Scenario, run: &RunObjects) -> Result<Decision, Error> {
        let ns = s.namespace().to_string();
        let name = run.pod.name_any();
        let want = s.nodes.len();
        let pods = self.pods(&ns);
        let claims = self.claims(&ns);
        let start = Instant::now();
        let run_claims: Vec<String> = run.claims.iter().map(|c| c.name_any()).collect();
        let decision = poll(&format!("kube-scheduler's decision for {ns}/{name}"), DECISION_SECS, POLL, || {
            let pods = pods.clone();
            let claims = claims.clone();
            let name = name.clone();
            let run_claims = run_claims.clone();
            async move {
                let p = pods.get(&name).await.map_err(Error::kube(format!("reading pod {name}")))?;
                if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) {
                    return Ok(Some(Decision::Scheduled(n)));
                }
                for c in &run_claims {
                    let claim = claims.get(c).await.map_err(Error::kube(format!("reading claim {c}")))?;
                    if let Some(n) = claim.annotations().get(SELECTED_NODE) {
                        return Ok(Some(Decision::Scheduled(n.clone())));
                    }
                }
                match unschedulable_message(&p) {
                    Some(m) if node_count_in(&m) == Some(want) || start.elapsed().as_secs() >= RECOUNT_SECS => {
                        Ok(Some(Decision::Unschedulable(m)))
                    }
                    _ => Ok(None),
                }
            }
        })
        .await?;
        if let Decision::Unschedulable(m) = &decision
            && node_count_in(m) != Some(want)
        {
            return Err(Error::Stale(format!("kube-scheduler decided on another node count than {want}: {m}")));
        }
        if let Decision::Scheduled(n) = &decision
            && !s.nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n))
        {
            return Err(Error::Stale(format!("kube-scheduler chose {n}, not a node of the scenario")));
        }
        Ok(decision)
    }

    /// Removes every object of the scenario (both runs' too); pods go at
    /// once (grace period 0: no kubelet would ever confirm), claims and
    /// volumes without their protection finalizers.
    async fn cleanup(&self, s: &Scenario) -> Result<(), Error> {
        let now = DeleteParams::default().grace_period(0);
        for ns in &s.namespaces {
            let ns = ns.name_any();
            ignore_missing(self.pods(&ns).delete_collection(&now, &ListParams::default()).await.map(|_| ()))
                .map_err(Error::kube(format!("deleting the pods of {ns}")))?;
            let claims = self.claims(&ns);
            let list = ignore_missing(claims.list(&ListParams::default()).await.map(|l| l.items))
                .map_err(Error::kube(format!("listing the claims of {ns}")))?;
            for c in list {
                delete_unprotected(&claims, &c.name_any()).await?;
            }
        }
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut names: Vec<String> = s.shared_volumes().map(ResourceExt::name_any).collect();
        for run in [Run::Ours, Run::Kube] {
            names.extend(s.run_objects(run).volumes.iter().map(ResourceExt::name_any));
        }
        for v in names {
            delete_unprotected(&volumes, &v).await?;
        }
        let classes: Api<StorageClass> = Api::all(self.client.clone());
        for c in &s.storage_classes {
            ignore_missing(classes.delete(&c.name_any(), &DeleteParams::default()).await.map(|_| ()))
                .map_err(Error::kube("deleting a storage class"))?;
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        for n in &s.nodes {
            ignore_missing(nodes.delete(&n.name_any(), &DeleteParams::default()).await.map(|_| ()))
                .map_err(Error::kube("deleting a node"))?;
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for ns in &s.namespaces {
            ignore_missing(namespaces.delete(&ns.name_any(), &DeleteParams::default()).await.map(|_| ()))
                .map_err(Error::kube("deleting a namespace"))?;
        }
        Ok(())
    }
}

/// The message of an `Unschedulable` PodScheduled condition.
fn unschedulable_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        .and_then(|c| c.message.clone())
}

/// Calls `f` every `every` until it returns a value; fails after `secs`.
async fn poll<T, F, Fut>(what: &str, secs: u64, every: Duration, mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout { what: what.to_string(), secs });
        }
        tokio::time::sleep(every).await;
    }
}

fn ignore_missing<T: Default>(r: kube::Result<T>) -> kube::Result<T> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(T::default()),
        other => other,
    }
}

async fn create_all<K>(api: &Api<K>, objects: &[K]) -> Result<(), Error>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let post = PostParams::default();
    try_join_all(objects.iter().map(|o| async {
        api.create(&post, o).await.map(|_| ()).map_err(Error::kube(format!("creating {}", o.name_any())))
    }))
    .await?;
    Ok(())
}

async fn create_namespaced<K>(client: &Client, objects: &[K]) -> Result<(), Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let post = PostParams::default();
    try_join_all(objects.iter().map(|o| async {
        let api: Api<K> = Api::namespaced(client.clone(), o.meta().namespace.as_deref().unwrap_or("default"));
        api.create(&post, o).await.map(|_| ()).map_err(Error::kube(format!("creating {}", o.name_any())))
    }))
    .await?;
    Ok(())
}

/// Deletes a claim or volume at once: its protection finalizer (the
/// controller would drop it only later) is removed first.
async fn delete_unprotected<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    ignore_missing(api.patch(name, &PatchParams::default(), &strip).await.map(|_| ()))
        .map_err(Error::kube(format!("removing the finalizers of {name}")))?;
    ignore_missing(api.delete(name, &DeleteParams::default()).await.map(|_| ()))
        .map_err(Error::kube(format!("deleting {name}")))?;
    Ok(())
}

/// A plain HTTP/1.1 GET on the scheduler's own endpoint: (status, body).
async fn http_get(addr: &str, path: &str) -> Result<(u16, String), Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(Error::io(format!("connecting to {addr}")))?;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .map_err(Error::io(format!("writing to {addr}")))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.map_err(Error::io(format!("reading from {addr}")))?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    Ok((status, body))
}
