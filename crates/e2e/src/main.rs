//! The end-to-end benchmark (`bench/e2e --nodes N --pods M`): one control
//! plane from tools/k8s, N nodes shaped like scheduler_perf's
//! SchedulingBasic (4 cpu, 32 Gi, 110 pods), and, one after the other on
//! fresh pods, M pods (100m, 500 Mi) scheduled by gpu-scheduler, by
//! kube-scheduler (built in tools/k8s, same client limits), and by the
//! ceiling: a plain client that makes only the writes every scheduler
//! must make per pod (the binding to a pre-chosen node and one Scheduled
//! Event). For each: pods/s from the first pod created to the last bound,
//! creation-to-bound latency p50/p99 (as this client observes creation and
//! the bound pod's watch event), and the scheduler process's peak RSS and
//! CPU seconds. Writes target/bench/e2e-N-M.json, .md and .svg.
//!
//! `--workload mixed` runs a GPU cluster of ours instead (workload.rs) and
//! adds placement quality; its results are target/bench/e2e-mixed-N-M.*.

mod workload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Binding, Namespace, Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use serde_json::json;
use workload::{Placement, Workload, node_name, pod_name};

/// Client limits for every client of the run, as scheduler_perf sets them.
const CLIENT_QPS: u32 = 5000;
/// Quiet time after the nodes are created and between contenders, so that
/// no contender pays for another's clean-up.
const SETTLE: Duration = Duration::from_secs(10);
/// Requests the harness keeps in flight when creating or binding.
const IN_FLIGHT: usize = 64;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    nodes: usize,
    #[arg(long)]
    pods: usize,
    /// What to schedule: scheduler_perf's SchedulingBasic, or a mixed GPU cluster.
    #[arg(long, value_enum, default_value = "basic")]
    workload: Workload,
    /// Contenders to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "gpu-scheduler,kube-scheduler,ceiling")]
    only: Vec<String>,
    /// The gpu-scheduler binary.
    #[arg(long, default_value = "target/release/gpu-scheduler")]
    gpu_scheduler: PathBuf,
    /// Where results go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// How long one contender may take to bind all pods.
    #[arg(long, default_value_t = 1800)]
    timeout_s: u64,
}

/// One contender's figures.
#[derive(Debug, Clone, Default)]
struct Run {
    name: String,
    pods_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    peak_rss_mib: Option<f64>,
    cpu_s: Option<f64>,
    /// Seconds from the first creation to the last (how fast the API
    /// server took the pods while this contender scheduled them).
    created_s: f64,
    /// Seconds since the first creation at which each pod was bound, sorted.
    bound_at: Vec<f64>,
    /// How well the mixed workload was placed (not for the ceiling, which
    /// places round-robin).
    placement: Option<Placement>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    args.workload.check(args.nodes, args.pods)?;
    let repo = std::env::current_dir()?;
    let cluster_dir = repo.join(&args.out).join("cluster");
    std::fs::create_dir_all(&cluster_dir)?;
    let cluster = ClusterGuard::up(&repo, &cluster_dir)?;
    let client = client(&cluster.kubeconfig).await?;

    eprintln!("creating {} nodes", args.nodes);
    create_nodes(&client, args.workload, args.nodes).await?;
    // The controllers react to new nodes; let that pass before measuring.
    tokio::time::sleep(SETTLE).await;

    let mut runs = Vec::new();
    for name in &args.only {
        eprintln!("== {name}: {} pods on {} nodes", args.pods, args.nodes);
        let run = match name.as_str() {
            "gpu-scheduler" | "kube-scheduler" | "ceiling" => contender(&args, &cluster, &client, name).await?,
            other => bail!("unknown contender {other:?} (gpu-scheduler, kube-scheduler, ceiling)"),
        };
        eprintln!(
            "   {:.0} pods/s (all created in {:.1} s), p50 {:.0} ms, p99 {:.0} ms, peak RSS {}, CPU {}",
            run.pods_per_s,
            run.created_s,
            run.p50_ms,
            run.p99_ms,
            run.peak_rss_mib.map_or("-".into(), |m| format!("{m:.0} MiB")),
            run.cpu_s.map_or("-".into(), |c| format!("{c:.1} s")),
        );
        if let Some(p) = &run.placement {
            eprintln!("   placement: {}", p.json());
        }
        runs.push(run);
    }
    write_results(&args, &runs)?;
    Ok(())
}

async fn client(kubeconfig: &Path) -> Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The control plane, stopped when dropped.
struct ClusterGuard {
    repo: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    bin: PathBuf,
}

impl ClusterGuard {
    /// A fresh cluster: whatever an interrupted run left is removed first.
    fn up(repo: &Path, dir: &Path) -> Result<ClusterGuard> {
        let _ = Command::new(repo.join("tools/k8s/cluster")).arg("down").env("GPU_SCHEDULER_CLUSTER_DIR", dir).status();
        let status = Command::new(repo.join("tools/k8s/cluster"))
            .arg("up")
            .env("GPU_SCHEDULER_CLUSTER_DIR", dir)
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
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        let _ = Command::new(self.repo.join("tools/k8s/cluster"))
            .arg("down")
            .env("GPU_SCHEDULER_CLUSTER_DIR", &self.dir)
            .status();
    }
}

async fn create_nodes(client: &Client, workload: Workload, n: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let now = jiff::Timestamp::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { create(&api, &workload.node(i, now)?).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates `obj`, retrying a few times when the connection fails (an
/// overloaded API server drops some); one that exists already counts.
async fn create<K>(api: &Api<K>, obj: &K) -> Result<()>
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
async fn retrying<T, F, Fut>(mut call: F) -> Result<T>
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

/// A scheduler process, and how to read its cost.
struct Process {
    child: Child,
}

impl Process {
    /// Peak RSS (MiB) and CPU seconds so far, from /proc.
    fn usage(&self) -> (Option<f64>, Option<f64>) {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| kib / 1024.0);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces): utime is
        // the 14th field, stime the 15th, in clock ticks (100 per second).
        let cpu = stat.rsplit_once(')').and_then(|(_, rest)| {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        });
        (rss, cpu)
    }

    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gpu_scheduler(args: &Args, cluster: &ClusterGuard, scheduler: &str) -> Result<Process> {
    let config = cluster.dir.join("gpu-scheduler-config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nleaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {CLIENT_QPS}, burst: {CLIENT_QPS}}}\nprofiles:\n- schedulerName: {scheduler}\n"
        ),
    )?;
    let log = std::fs::File::create(cluster.dir.join("gpu-scheduler.log"))?;
    let child = Command::new(&args.gpu_scheduler)
        .arg("run")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--config")
        .arg(&config)
        .args(["--http-address", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", args.gpu_scheduler.display()))?;
    Ok(Process { child })
}

fn start_kube_scheduler(cluster: &ClusterGuard, scheduler: &str) -> Result<Process> {
    let config = cluster.dir.join("kube-scheduler-config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\n  qps: {CLIENT_QPS}\n  burst: {CLIENT_QPS}\nleaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {scheduler}\n",
            cluster.kubeconfig.display()
        ),
    )?;
    let log = std::fs::File::create(cluster.dir.join("kube-scheduler.log"))?;
    let child = Command::new(cluster.bin.join("kube-scheduler"))
        .arg("--config")
        .arg(&config)
        .args(["--secure-port", "0", "-v", "1"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting kube-scheduler")?;
    Ok(Process { child })
}

/// The ceiling: bind each pending pod of `namespace` to the next node in
/// turn (64 bindings in flight) and record one Scheduled Event beside it,
/// as fast as the API server takes them.
fn start_ceiling(client: &Client, namespace: &str, scheduler: &str, nodes: usize) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let cfg = watcher::Config::default().fields(&format!("spec.schedulerName={scheduler},spec.nodeName="));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        watcher(pods.clone(), cfg)
            .filter_map(|e| async move {
                match e {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => Some(p),
                    _ => None,
                }
            })
            .for_each_concurrent(IN_FLIGHT, |p| {
                let (pods, events, next) = (pods.clone(), events.clone(), next.clone());
                async move {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let node = node_name(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % nodes);
                    let binding = Binding {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            uid: p.metadata.uid.clone(),
                            ..Default::default()
                        },
                        target: ObjectReference {
                            kind: Some("Node".into()),
                            name: Some(node.clone()),
                            ..Default::default()
                        },
                    };
                    let bound = pods
                        .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                        .await;
                    if bound.is_err() {
                        return;
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
                            namespace: p.metadata.namespace.clone(),
                            uid: p.metadata.uid.clone(),
                            api_version: Some("v1".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    // Off the binding path, as a scheduler sends its Events.
                    tokio::spawn(async move {
                        let _ = events.create(&PostParams::default(), &ev).await;
                    });
                }
            })
            .await;
    })
}

async fn contender(args: &Args, cluster: &ClusterGuard, client: &Client, name: &str) -> Result<Run> {
    let scheduler = format!("bench-{name}");
    let namespace = format!("bench-{name}");
    let ns: Api<Namespace> = Api::all(client.clone());
    let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    ns.create(&PostParams::default(), &ns_obj).await?;
    args.workload.prepare(client, &namespace, &scheduler, args.nodes, args.pods).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);

    let (process, ceiling) = match name {
        "gpu-scheduler" => (Some(start_gpu_scheduler(args, cluster, &scheduler)?), None),
        "kube-scheduler" => (Some(start_kube_scheduler(cluster, &scheduler)?), None),
        _ => (None, Some(start_ceiling(client, &namespace, &scheduler, args.nodes))),
    };

    // Warm up: one pod bound means the contender has synced and decides.
    pods.create(&PostParams::default(), &Workload::Basic.pod(0, "warmup", &scheduler)?).await?;
    wait_bound(&pods, 1, Duration::from_secs(120)).await.context("warm-up pod not bound")?;

    // Watch bindings; then create the pods, as fast as the API server takes them.
    let bound: Arc<Mutex<HashMap<String, (Instant, String)>>> = Arc::default();
    let watch = {
        let bound = bound.clone();
        let pods = pods.clone();
        tokio::spawn(async move {
            let mut stream = watcher(pods, watcher::Config::default()).boxed();
            while let Some(e) = stream.next().await {
                if let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = e
                    && let Some(node) = p.spec.and_then(|s| s.node_name)
                {
                    let name = p.metadata.name.unwrap_or_default();
                    bound
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(name)
                        .or_insert_with(|| (Instant::now(), node));
                }
            }
        })
    };
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    futures::stream::iter(0..args.pods)
        .map(|i| {
            let (pods, created, scheduler) = (pods.clone(), created.clone(), scheduler.clone());
            async move {
                let name = pod_name(i);
                let p = args.workload.pod(i, &name, &scheduler)?;
                created.lock().unwrap_or_else(|e| e.into_inner()).insert(name, Instant::now());
                create(&pods, &p).await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    let created_s = start.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    loop {
        let n = bound.lock().unwrap_or_else(|e| e.into_inner()).keys().filter(|k| k.starts_with("p-")).count();
        if n >= args.pods {
            break;
        }
        if Instant::now() > deadline {
            bail!("{name}: only {n} of {} pods bound after {} s", args.pods, args.timeout_s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (peak_rss_mib, cpu_s) = process.as_ref().map_or((None, None), Process::usage);
    watch.abort();
    if let Some(p) = process {
        p.stop();
    }
    if let Some(c) = ceiling {
        c.abort();
    }

    let bound = bound.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let created = created.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut latencies: Vec<f64> = Vec::with_capacity(args.pods);
    let mut bound_at: Vec<f64> = Vec::with_capacity(args.pods);
    for (name, c) in &created {
        if let Some((b, _)) = bound.get(name) {
            latencies.push(b.saturating_duration_since(*c).as_secs_f64() * 1000.0);
            bound_at.push(b.saturating_duration_since(start).as_secs_f64());
        }
    }
    latencies.sort_by(f64::total_cmp);
    bound_at.sort_by(f64::total_cmp);
    let elapsed = bound_at.last().copied().unwrap_or(0.0).max(1e-9);
    let run = Run {
        name: name.to_string(),
        pods_per_s: args.pods as f64 / elapsed,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        peak_rss_mib,
        cpu_s,
        created_s,
        bound_at,
        placement: (args.workload == Workload::Mixed && name != "ceiling").then(|| {
            let on: HashMap<String, String> = bound.into_iter().map(|(pod, (_, node))| (pod, node)).collect();
            args.workload.placement(&on)
        }),
    };

    // The next contender starts without these pods. Without kubelets a
    // graceful deletion never completes: delete them at once.
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let all = ListParams::default();
    retrying(|| pods.delete_collection(&now, &all)).await?;
    let delete = DeleteParams::default();
    retrying(|| ns.delete(&namespace, &delete)).await?;
    // The namespace is gone once its pods and Events are: the next
    // contender then does not share the API server with that clean-up.
    for _ in 0..1200 {
        if matches!(ns.get_opt(&namespace).await, Ok(None)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(SETTLE).await;
    Ok(run)
}

async fn wait_bound(pods: &Api<Pod>, n: usize, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    let all = ListParams::default();
    loop {
        let list = retrying(|| pods.list(&all)).await?;
        let bound = list.items.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count();
        if bound >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{bound} of {n} pods bound");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn write_results(args: &Args, runs: &[Run]) -> Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let stem = args.out.join(format!("e2e-{}{}-{}", args.workload.file_prefix(), args.nodes, args.pods));
    let figures = |r: &Run| {
        let mut f = json!({"pods_per_s": r.pods_per_s, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms,
               "peak_rss_mib": r.peak_rss_mib, "cpu_s": r.cpu_s, "created_s": r.created_s});
        if let Some(p) = &r.placement {
            f["placement"] = p.json();
        }
        f
    };
    let by = |n: &str| runs.iter().find(|r| r.name == n);
    let mut out =
        json!({"workload": format!("{:?}", args.workload).to_lowercase(), "nodes": args.nodes, "pods": args.pods});
    if let Some(r) = by("gpu-scheduler") {
        out["gpu_scheduler"] = figures(r);
    }
    if let Some(r) = by("kube-scheduler") {
        out["kube_scheduler"] = figures(r);
    }
    if let Some(r) = by("ceiling") {
        out["ceiling_pods_per_s"] = json!(r.pods_per_s);
    }
    if let (Some(g), Some(k)) = (by("gpu-scheduler"), by("kube-scheduler")) {
        out["throughput_ratio_vs_kube_scheduler"] = json!(g.pods_per_s / k.pods_per_s);
    }
    if let (Some(g), Some(c)) = (by("gpu-scheduler"), by("ceiling")) {
        out["share_of_ceiling"] = json!(g.pods_per_s / c.pods_per_s);
    }
    std::fs::write(stem.with_extension("json"), serde_json::to_string_pretty(&out)? + "\n")?;

    let mixed = args.workload == Workload::Mixed;
    let mut md = format!(
        "# {}{} nodes, {} pods\n\n| contender | pods/s | p50 ms | p99 ms | peak RSS MiB | CPU s |{}\n|---|---:|---:|---:|---:|---:|{}\n",
        if mixed { "Mixed GPU cluster: " } else { "" },
        args.nodes,
        args.pods,
        if mixed { " GPU pods on preferred model | CPU pods on GPU nodes | pods on flagged nodes |" } else { "" },
        if mixed { "---:|---:|---:|" } else { "" },
    );
    for r in runs {
        md += &format!(
            "| {} | {:.0} | {:.0} | {:.0} | {} | {} |",
            r.name,
            r.pods_per_s,
            r.p50_ms,
            r.p99_ms,
            r.peak_rss_mib.map_or("-".into(), |v| format!("{v:.0}")),
            r.cpu_s.map_or("-".into(), |v| format!("{v:.1}")),
        );
        if mixed {
            md += &match &r.placement {
                Some(p) => format!(
                    " {} of {} | {} of {} | {} |",
                    p.gpu_pods_on_preferred_model,
                    p.gpu_pods,
                    p.cpu_pods_on_gpu_nodes,
                    p.cpu_pods,
                    p.pods_on_flagged_nodes
                ),
                None => " - | - | - |".into(),
            };
        }
        md += "\n";
    }
    std::fs::write(stem.with_extension("md"), md)?;
    std::fs::write(stem.with_extension("svg"), svg(args, runs))?;
    eprintln!("wrote {}.{{json,md,svg}}", stem.display());
    Ok(())
}

/// Pods bound over time, one line per contender.
fn svg(args: &Args, runs: &[Run]) -> String {
    let (w, h, pad) = (800.0, 420.0, 50.0);
    let t_max = runs.iter().filter_map(|r| r.bound_at.last()).fold(1e-9f64, |a, b| a.max(*b));
    let n = args.pods.max(1) as f64;
    let colours = ["#d62728", "#1f77b4", "#7f7f7f"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{pad}\" y=\"20\">Pods bound over time: {}{} nodes, {} pods</text>\n\
         <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\">{t_max:.1} s</text>\n<text x=\"5\" y=\"{}\">{}</text>\n",
        if args.workload == Workload::Mixed { "mixed GPU cluster, " } else { "" },
        args.nodes,
        args.pods,
        h - pad,
        w - pad,
        h - pad,
        h - pad,
        w - pad - 30.0,
        h - pad + 20.0,
        pad + 4.0,
        args.pods,
    );
    for (k, r) in runs.iter().enumerate() {
        let step = (r.bound_at.len() / 400).max(1);
        let points: Vec<String> = r
            .bound_at
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i + 1 == r.bound_at.len())
            .map(|(i, t)| {
                let x = pad + t / t_max * (w - 2.0 * pad);
                let y = h - pad - (i + 1) as f64 / n * (h - 2.0 * pad);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let c = colours[k % colours.len()];
        s += &format!(
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{}\" y=\"{}\" fill=\"{c}\">{} ({:.0} pods/s)</text>\n",
            points.join(" "),
            w - 260.0,
            pad + 20.0 * (k as f64 + 1.0),
            r.name,
            r.pods_per_s
        );
    }
    s + "</svg>\n"
}
