//! The control plane every harness of this crate runs on, and the writes
//! they make to it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;

/// Client limits for every client of a run, as scheduler_perf sets them.
pub const CLIENT_QPS: u32 = 5000;
/// Quiet time after the nodes are created and between contenders, so that
/// no contender pays for another's clean-up.
pub const SETTLE: Duration = Duration::from_secs(10);
/// Requests a harness keeps in flight when creating objects.
pub const IN_FLIGHT: usize = 64;
/// The PodGroup CRD (scheduler-plugins' API) that gpu-scheduler and
/// scheduler-plugins' Coscheduling read gangs from.
const POD_GROUP_CRD: &str = include_str!("../../../deploy/crds/scheduling.x-k8s.io_podgroups.yaml");

/// The control plane, stopped when dropped.
pub struct ClusterGuard {
    repo: PathBuf,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    /// The directory of the control plane's binaries (kube-scheduler, kubectl).
    pub bin: PathBuf,
}

impl ClusterGuard {
    /// A fresh cluster, with KWOK when `kwok`: whatever an interrupted run
    /// left is removed first.
    pub fn up(repo: &Path, dir: &Path, kwok: bool) -> Result<ClusterGuard> {
        let _ = Command::new(repo.join("tools/k8s/cluster")).arg("down").env("GPU_SCHEDULER_CLUSTER_DIR", dir).status();
        let status = Command::new(repo.join("tools/k8s/cluster"))
            .arg("up")
            .env("GPU_SCHEDULER_CLUSTER_DIR", dir)
            .env("GPU_SCHEDULER_KWOK", if kwok { "1" } else { "" })
            .status()
            .context("running tools/k8s/cluster up")?;
        if !status.success() {
            bail!("tools/k8s/cluster up failed");
        }
        let bin = std::fs::read_to_string(dir.join("run/bin")).context("the cluster's bin directory")?;
        Ok(ClusterGuard {
            repo: repo.to_path_buf(),
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("kubeconfig"),
            bin: PathBuf::from(bin.trim()),
        })
    }

    /// The API server's process id, to read its CPU time.
    pub fn apiserver_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("run/apiserver.pid")).ok()?.trim().parse().ok()
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        let _ = Command::new(self.repo.join("tools/k8s/cluster"))
            .arg("down")
            .env("GPU_SCHEDULER_CLUSTER_DIR", &self.dir)
            .status();
    }
}

/// Creates `obj`, retrying a few times when the connection fails (an
/// overloaded API server drops some); one that exists already counts.
pub async fn create<K>(api: &Api<K>, obj: &K) -> Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let post = PostParams::default();
    match retrying(|| api.create(&post, obj)).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs a request again when the connection fails or the API server is
/// overloaded (it drops some connections after a burst); other errors
/// return at once.
pub async fn retrying<T, F, Fut>(mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(kube::Error::Api(s)) if s.code != 429 && s.code < 500 => return Err(kube::Error::Api(s).into()),
            Err(e) if attempt >= 5 => return Err(e.into()),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
        }
    }
}

/// Watches `pods`, calling `on_pod` with every pod as it is listed and as
/// it changes; returns (with the watch's task) once the watch has listed
/// what exists, or after two minutes.
pub async fn watch_pods(pods: &Api<Pod>, mut on_pod: impl FnMut(Pod) + Send + 'static) -> tokio::task::JoinHandle<()> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let pods = pods.clone();
    let handle = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut stream = watcher(pods, watcher::Config::default()).boxed();
        while let Some(e) = stream.next().await {
            match e {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => on_pod(p),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_secs(120), ready_rx).await;
    handle
}

/// Removes `namespace` for the next contender: its pods deleted at once
/// (grace 0: no kubelet, or KWOK's, need confirm them), then the
/// namespace, waited for until it is gone with its Events, so that the
/// next contender does not share the API server with that clean-up; then
/// a quiet [`SETTLE`].
pub async fn remove_namespace(client: &kube::Client, namespace: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let ns: Api<Namespace> = Api::all(client.clone());
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let (all, graceful) = (ListParams::default(), DeleteParams::default());
    retrying(|| pods.delete_collection(&now, &all)).await?;
    retrying(|| ns.delete(namespace, &graceful)).await?;
    for _ in 0..1200 {
        if matches!(ns.get_opt(namespace).await, Ok(None)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

/// Waits until the pod `name` is bound, while `alive()` (the scheduler
/// expected to bind it still runs).
pub async fn wait_bound(pods: &Api<Pod>, name: &str, within: Duration, mut alive: impl FnMut() -> bool) -> Result<()> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let pod = retrying(|| pods.get_opt(name)).await?;
        if pod.and_then(|p| p.spec).is_some_and(|s| s.node_name.is_some()) {
            return Ok(());
        }
        if !alive() {
            bail!("the scheduler exited before {name} was bound");
        }
        if std::time::Instant::now() > deadline {
            bail!("{name} not bound within {} s", within.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies deploy/crds' PodGroup CRD and waits until the API server serves
/// it: Coscheduling waits for its PodGroup informer before it schedules.
pub async fn apply_pod_group_crd(client: &kube::Client) -> Result<()> {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(POD_GROUP_CRD).context("reading deploy/crds/scheduling.x-k8s.io_podgroups.yaml")?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    create(&api, &crd).await.context("creating the PodGroup CRD")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let established = api
            .get_opt(&name)
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            bail!("the CRD {name} is not established after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_group_crd_reads() {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(POD_GROUP_CRD).expect("the CRD");
        assert_eq!(crd.metadata.name.as_deref(), Some("podgroups.scheduling.x-k8s.io"));
        assert!(crd.spec.versions.iter().any(|v| v.name == "v1alpha1" && v.served));
    }
}
