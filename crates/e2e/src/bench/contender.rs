//! One run of one contender: its pods created (before it starts in drain
//! mode, while it runs in stream mode), every binding seen on a watch, its
//! process's cost read from /proc, its pods and namespace removed after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use crate::workload::{Placement, Workload, pod_name};
use gpu_scheduler_e2e::cluster::{ClusterGuard, IN_FLIGHT, SETTLE, create, remove_namespace, wait_bound, watch_pods};
use gpu_scheduler_e2e::process::{Process, cpu_seconds};

use crate::{Args, Mode, ceiling};

/// One contender's figures in one run.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub name: String,
    /// The round (0-based) and the place in that round's order.
    pub round: usize,
    pub position: usize,
    /// Drain: from the first binding to the last. Stream: from the first
    /// creation to the last binding.
    pub pods_per_s: f64,
    /// Drain only: from the process's start (the ceiling: its first
    /// request) to the last binding, start-up and cache sync included.
    pub pods_per_s_from_start: Option<f64>,
    /// Drain only: seconds from the start to the first binding.
    pub first_binding_s: Option<f64>,
    /// Latency to bound: from creation (stream) or from the contender's
    /// start (drain).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub peak_rss_mib: Option<f64>,
    /// The scheduler process's CPU seconds, start-up included.
    pub cpu_s: Option<f64>,
    /// The API server's CPU seconds while this contender ran.
    pub apiserver_cpu_s: Option<f64>,
    /// Wall seconds the contender ran (start to last binding).
    pub wall_s: f64,
    /// Seconds from the first creation to the last.
    pub created_s: f64,
    /// Seconds since the start of the measure at which each pod was bound,
    /// sorted.
    pub bound_at: Vec<f64>,
    /// Requests the ceiling retried (connection dropped, 429, 5xx).
    pub retries: Option<u64>,
    /// How well the mixed workload was placed (not for the ceiling, which
    /// places round-robin).
    pub placement: Option<Placement>,
}

impl Run {
    pub fn cpu_s_per_1000_pods(&self, pods: usize) -> Option<f64> {
        self.cpu_s.map(|c| c * 1000.0 / pods.max(1) as f64)
    }

    pub fn summary(&self) -> String {
        let opt = |v: Option<f64>, unit: &str| v.map_or("-".into(), |v| format!("{v:.1}{unit}"));
        format!(
            "{:.0} pods/s{}, first binding at {}, p50 {:.0} ms, p99 {:.0} ms, peak RSS {}, CPU {}, API server CPU {}",
            self.pods_per_s,
            self.pods_per_s_from_start.map_or(String::new(), |v| format!(" ({v:.0} from start)")),
            opt(self.first_binding_s, " s"),
            self.p50_ms,
            self.p99_ms,
            opt(self.peak_rss_mib, " MiB"),
            opt(self.cpu_s, " s"),
            opt(self.apiserver_cpu_s, " s"),
        )
    }
}

/// What runs while the pods are bound: a scheduler process or the ceiling.
enum Running {
    Process(Process),
    Ceiling(Box<ceiling::Ceiling>),
}

impl Running {
    async fn start(
        args: &Args,
        cluster: &ClusterGuard,
        name: &str,
        namespace: &str,
        scheduler: &str,
    ) -> Result<Running> {
        Ok(match name {
            "gpu-scheduler" => Running::Process(Process::gpu_scheduler(&args.gpu_scheduler, cluster, scheduler, "")?),
            "kube-scheduler" => {
                Running::Process(Process::kube_scheduler(&cluster.bin.join("kube-scheduler"), cluster, scheduler, "")?)
            }
            _ => {
                let client = if args.ceiling_http1 {
                    gpu_scheduler_e2e::client::http1(&cluster.kubeconfig).await?
                } else {
                    gpu_scheduler_e2e::client::http2(&cluster.kubeconfig).await?
                };
                eprintln!("   the ceiling's client speaks {}", gpu_scheduler_e2e::client::version(&client).await?);
                let c = ceiling::Ceiling::new(client, namespace, scheduler, args.nodes, args.ceiling_in_flight);
                Running::Ceiling(Box::new(match args.mode {
                    Mode::Stream => c.watching(),
                    Mode::Drain => c.precomputed().await?,
                }))
            }
        })
    }

    /// Drain mode: what runs is told to go (a process already runs).
    fn go(&mut self) {
        if let Running::Ceiling(c) = self {
            c.go();
        }
    }

    /// (peak RSS MiB, CPU s) of a process.
    fn usage(&self) -> (Option<f64>, Option<f64>) {
        match self {
            Running::Process(p) => p.usage(),
            Running::Ceiling(_) => (None, None),
        }
    }

    fn stop(self) -> Option<u64> {
        match self {
            Running::Process(p) => {
                p.stop();
                None
            }
            Running::Ceiling(c) => Some(c.stop()),
        }
    }
}

type Bound = Arc<Mutex<HashMap<String, (Instant, String)>>>;

/// Watches `pods` and records when each is first seen bound, and where.
/// Returns once the watch has listed what exists.
async fn watch_bindings(pods: &Api<Pod>) -> (Bound, tokio::task::JoinHandle<()>) {
    let bound: Bound = Arc::default();
    let noted = bound.clone();
    let handle = watch_pods(pods, move |p| {
        if let Some(node) = p.spec.and_then(|s| s.node_name) {
            let name = p.metadata.name.unwrap_or_default();
            noted.lock().unwrap_or_else(|e| e.into_inner()).entry(name).or_insert_with(|| (Instant::now(), node));
        }
    })
    .await;
    (bound, handle)
}

/// Creates the measured pods, `IN_FLIGHT` at a time; returns when each
/// was sent.
async fn create_pods(args: &Args, pods: &Api<Pod>, scheduler: &str) -> Result<HashMap<String, Instant>> {
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    futures::stream::iter(0..args.pods)
        .map(|i| {
            let (pods, created) = (pods.clone(), created.clone());
            async move {
                let name = pod_name(i);
                let p = args.workload.pod(i, &name, scheduler)?;
                created.lock().unwrap_or_else(|e| e.into_inner()).insert(name, Instant::now());
                create(&pods, &p).await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    let created = created.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(created)
}

/// Waits until every measured pod is bound.
async fn wait_all_bound(args: &Args, name: &str, bound: &Bound) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    loop {
        let n = bound.lock().unwrap_or_else(|e| e.into_inner()).keys().filter(|k| k.starts_with("p-")).count();
        if n >= args.pods {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{name}: only {n} of {} pods bound after {} s", args.pods, args.timeout_s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn run(args: &Args, cluster: &ClusterGuard, client: &Client, name: &str, round: usize) -> Result<Run> {
    let scheduler = format!("bench-{name}");
    let namespace = format!("bench-{name}-{}", round + 1);
    let ns: Api<Namespace> = Api::all(client.clone());
    let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    ns.create(&PostParams::default(), &ns_obj).await?;
    args.workload.prepare(client, &namespace, &scheduler, args.nodes, args.pods).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let apiserver_cpu = || cluster.apiserver_pid().and_then(cpu_seconds);

    let (running, bound, watch, start, created, created_s, apiserver_before) = match args.mode {
        Mode::Stream => {
            let running = Running::start(args, cluster, name, &namespace, &scheduler).await?;
            // Warm up: one pod bound means the contender has synced and decides.
            pods.create(&PostParams::default(), &Workload::Basic.pod(0, "warmup", &scheduler)?).await?;
            wait_bound(&pods, "warmup", Duration::from_secs(120), || true).await.context("warm-up pod not bound")?;
            let (bound, watch) = watch_bindings(&pods).await;
            let apiserver_before = apiserver_cpu();
            let start = Instant::now();
            let created = create_pods(args, &pods, &scheduler).await?;
            let created_s = start.elapsed().as_secs_f64();
            (running, bound, watch, start, created, created_s, apiserver_before)
        }
        Mode::Drain => {
            let t = Instant::now();
            let created = create_pods(args, &pods, &scheduler).await?;
            let created_s = t.elapsed().as_secs_f64();
            let (bound, watch) = watch_bindings(&pods).await;
            // The API server settles after the burst of creations.
            tokio::time::sleep(SETTLE).await;
            let apiserver_before = apiserver_cpu();
            let spawned = Instant::now();
            let mut running = Running::start(args, cluster, name, &namespace, &scheduler).await?;
            // A process counts from its spawn; the ceiling from its first
            // request, its bindings being computed before.
            let start = if matches!(running, Running::Ceiling(_)) { Instant::now() } else { spawned };
            running.go();
            (running, bound, watch, start, created, created_s, apiserver_before)
        }
    };
    wait_all_bound(args, name, &bound).await?;
    let wall_s = start.elapsed().as_secs_f64();
    let apiserver_cpu_s = apiserver_cpu().zip(apiserver_before).map(|(after, before)| after - before);
    let (peak_rss_mib, cpu_s) = running.usage();
    watch.abort();
    let retries = running.stop();

    let bound = bound.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut latencies: Vec<f64> = Vec::with_capacity(args.pods);
    let mut bound_at: Vec<f64> = Vec::with_capacity(args.pods);
    for (pod, c) in &created {
        if let Some((b, _)) = bound.get(pod) {
            let from = match args.mode {
                Mode::Stream => *c,
                Mode::Drain => start,
            };
            latencies.push(b.saturating_duration_since(from).as_secs_f64() * 1000.0);
            bound_at.push(b.saturating_duration_since(start).as_secs_f64());
        }
    }
    latencies.sort_by(f64::total_cmp);
    bound_at.sort_by(f64::total_cmp);
    let last = bound_at.last().copied().unwrap_or(0.0).max(1e-9);
    let n = args.pods as f64;
    let (pods_per_s, pods_per_s_from_start, first_binding_s) = match args.mode {
        Mode::Stream => (n / last, None, None),
        Mode::Drain => {
            let first = bound_at.first().copied().unwrap_or(0.0);
            // Intervals between the first binding and the last.
            ((n - 1.0).max(1.0) / (last - first).max(1e-9), Some(n / last), Some(first))
        }
    };
    let run = Run {
        name: name.to_string(),
        round,
        position: 0,
        pods_per_s,
        pods_per_s_from_start,
        first_binding_s,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        peak_rss_mib,
        cpu_s,
        apiserver_cpu_s,
        wall_s,
        created_s,
        bound_at,
        retries,
        placement: (args.workload == Workload::Mixed && name != "ceiling").then(|| {
            let on: HashMap<String, String> = bound.into_iter().map(|(pod, (_, node))| (pod, node)).collect();
            args.workload.placement(&on)
        }),
    };

    remove_namespace(client, &namespace).await?;
    Ok(run)
}

pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
