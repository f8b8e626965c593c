//! One contender's live run: its scheduler started and warmed up, the
//! trace's pods created at their arrival times in a namespace of its own,
//! every binding and every end seen on a watch, until the last arrival
//! and a tail have passed; then its pods and namespace removed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use crate::cluster::{ClusterGuard, IN_FLIGHT, create, remove_namespace, retrying, wait_bound, watch_pods};
use crate::live::trace::{self, LivePod};
use crate::process::Process;

/// The schedulers a live replay runs, by name.
pub const CONTENDERS: [&str; 3] = ["gpu-scheduler", "kube-scheduler", "scheduler-plugins"];

/// scheduler-plugins' kube-scheduler with Coscheduling, as its manifests
/// configure it: the plugin sorts the queue in place of PrioritySort, and
/// a gang waits at Permit for at most 10 s.
const COSCHEDULING: &str = "  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: PrioritySort}]
    preFilter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
    reserve: {enabled: [{name: Coscheduling}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10}
";

/// What a run needs besides the pods.
#[derive(Debug, Clone)]
pub struct Setup {
    pub gpu_scheduler: PathBuf,
    /// scheduler-plugins' kube-scheduler (tools/k8s/build-scheduler-plugins).
    pub scheduler_plugins: Option<PathBuf>,
    /// Seconds the run goes on after the last arrival.
    pub tail_s: u64,
}

/// What happened to one pod, seconds from the run's start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodOutcome {
    pub created_s: Option<f64>,
    /// When it was first seen bound, and where.
    pub bound: Option<(f64, String)>,
    /// When it was first seen finished (Succeeded or Failed).
    pub finished_s: Option<f64>,
}

/// One contender's run.
#[derive(Debug, Clone, Default)]
pub struct LiveRun {
    pub name: String,
    pub round: usize,
    /// Seconds from the start to the end of the measure.
    pub end_s: f64,
    /// By pod name.
    pub pods: HashMap<String, PodOutcome>,
    /// The scheduler process's CPU seconds and peak RSS (MiB).
    pub cpu_s: Option<f64>,
    pub peak_rss_mib: Option<f64>,
}

type Seen = Arc<Mutex<HashMap<String, PodOutcome>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Watches `pods` and notes, against `start`, when each is first seen
/// bound and finished.
async fn watch(pods: &Api<Pod>, start: Instant) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let noted = seen.clone();
    let handle = watch_pods(pods, move |p| {
        let now = start.elapsed().as_secs_f64();
        let name = p.metadata.name.unwrap_or_default();
        let node = p.spec.and_then(|s| s.node_name);
        let done = p.status.and_then(|s| s.phase).is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
        let mut seen = lock(&noted);
        let o = seen.entry(name).or_default();
        if let (None, Some(node)) = (&o.bound, node) {
            o.bound = Some((now, node));
        }
        if done && o.finished_s.is_none() {
            o.finished_s = Some(now);
        }
    })
    .await;
    (seen, handle)
}

fn start(setup: &Setup, cluster: &ClusterGuard, name: &str, scheduler: &str) -> Result<Process> {
    match name {
        "gpu-scheduler" => Process::gpu_scheduler(&setup.gpu_scheduler, cluster, scheduler, ""),
        "kube-scheduler" => Process::kube_scheduler(&cluster.bin.join("kube-scheduler"), cluster, scheduler, ""),
        "scheduler-plugins" => {
            let bin = setup.scheduler_plugins.as_ref().context("scheduler-plugins: no binary given")?;
            Process::kube_scheduler(bin, cluster, scheduler, COSCHEDULING)
        }
        other => bail!("unknown contender {other:?} ({})", CONTENDERS.join(", ")),
    }
}

/// Runs `pods` (sorted by arrival) under contender `name`.
pub async fn run(
    setup: &Setup,
    cluster: &ClusterGuard,
    client: &Client,
    name: &str,
    round: usize,
    pods: &[LivePod],
) -> Result<LiveRun> {
    let scheduler = format!("replay-{name}");
    let namespace = format!("replay-{name}-{}", round + 1);
    let ns: Api<Namespace> = Api::all(client.clone());
    let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    let post = PostParams::default();
    retrying(|| ns.create(&post, &ns_obj)).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);

    let mut process = start(setup, cluster, name, &scheduler)?;
    // Warm up: one pod bound means the scheduler has synced and decides.
    let warmup = LivePod {
        name: "warmup".into(),
        milli_cpu: 10,
        memory_mib: 10,
        gpus: 0,
        gpu_milli: 0,
        gpu_spec: String::new(),
        arrival_s: 0,
        run_s: 1,
    };
    create(&api, &trace::pod(&warmup, &namespace, &scheduler)?).await?;
    wait_bound(&api, "warmup", Duration::from_secs(180), || !process.exited())
        .await
        .context("warm-up pod not bound")?;

    // The run's clock starts before the watch lists the (still empty)
    // namespace: the first pods are created a moment late, none early.
    let start = Instant::now();
    let (seen, watch) = watch(&api, start).await;
    let created: Arc<Mutex<HashMap<String, f64>>> = Arc::default();
    let creating = {
        let (api, created, namespace, scheduler) = (api.clone(), created.clone(), namespace.clone(), scheduler.clone());
        let objects = pods
            .iter()
            .map(|p| Ok((p.arrival_s, p.name.clone(), trace::pod(p, &namespace, &scheduler)?)))
            .collect::<Result<Vec<_>>>()?;
        tokio::spawn(async move {
            futures::stream::iter(objects)
                .then(|(at, name, pod)| async move {
                    tokio::time::sleep_until((start + Duration::from_secs(at)).into()).await;
                    (name, pod)
                })
                .map(|(name, pod)| {
                    let (api, created) = (api.clone(), created.clone());
                    async move {
                        lock(&created).insert(name, start.elapsed().as_secs_f64());
                        create(&api, &pod).await
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
        })
    };
    let last = pods.iter().map(|p| p.arrival_s).max().unwrap_or(0);
    let end = start + Duration::from_secs(last.saturating_add(setup.tail_s));
    while Instant::now() < end {
        if process.exited() {
            bail!("{name} exited during the run (its log is in {})", cluster.dir.display());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let end_s = start.elapsed().as_secs_f64();
    creating.await.context("creating the pods")?.context("creating the pods")?;
    let (peak_rss_mib, cpu_s) = process.usage();
    process.stop();
    watch.abort();

    let created = lock(&created).clone();
    let seen = lock(&seen).clone();
    let outcomes = pods
        .iter()
        .map(|p| {
            let mut o = seen.get(&p.name).cloned().unwrap_or_default();
            // What the watch saw after the end does not count.
            o.bound = o.bound.filter(|(t, _)| *t <= end_s);
            o.finished_s = o.finished_s.filter(|t| *t <= end_s);
            o.created_s = created.get(&p.name).copied();
            (p.name.clone(), o)
        })
        .collect();
    let run = LiveRun { name: name.to_string(), round, end_s, pods: outcomes, cpu_s, peak_rss_mib };

    remove_namespace(client, &namespace).await?;
    Ok(run)
}
