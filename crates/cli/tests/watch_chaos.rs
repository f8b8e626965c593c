//! Watch chaos on a real control plane (DESIGN.md §6): the API server
//! restarted again and again during a burst; etcd compacted while the
//! scheduler's watches were cut off, so that resuming them gets `410
//! Gone` and they list again; and the scheduler's connections paused,
//! closed mid-stream and left half-open by a TCP proxy in front of the
//! API server. In each: every pod bound exactly once, the scheduler's
//! cache the API server's state at the end, and its memory sampled and
//! bounded. Each scenario has its own cluster: a restart or a compaction
//! reaches everything on it.
//!
//! The CI sizes are small; `GPU_SCHEDULER_CHAOS_LONG=1` runs the long
//! versions (docs/RELIABILITY.md has their figures).

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::cluster::{Cluster, Scheduler, config_yaml, items, node_yaml, pod_yaml, s, wait_for};
use support::proxy::Proxy;
use support::reliability::{cache_disagreements, compact_etcd, kubeconfig_via, rss_kib};

fn long() -> bool {
    std::env::var_os("GPU_SCHEDULER_CHAOS_LONG").is_some_and(|v| v == "1")
}

/// Most memory the scheduler may use in these scenarios (a few thousand
/// pods and a dozen nodes take tens of MiB; a leak across relists or
/// reconnections would show far above).
const RSS_LIMIT_KIB: u64 = 512 << 10;

/// A namespace, `n` nodes `POOL-i` (16 cores, 64 GiB) labelled
/// `pool=POOL`, and a config for `scheduler` on them at `qps`.
fn setup(c: &Cluster, pool: &str, n: usize, scheduler: &str, qps: u32) -> PathBuf {
    c.kubectl(&["create", "namespace", pool]);
    let nodes: String = (0..n).map(|i| node_yaml(&format!("{pool}-{i}"), &[("pool", pool)], 16, 64, 0, &[])).collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    c.file(&format!("{pool}-config.yaml"), &config_yaml(scheduler, pool, qps, qps))
}

fn pods(prefix: &str, scheduler: &str, range: std::ops::Range<usize>) -> String {
    range
        .map(|i| pod_yaml(&format!("{prefix}{i:05}"), scheduler, &[("app", prefix)], "cpu: 20m, memory: 64Mi", 0))
        .collect()
}

/// Creates pods in chunks (a `kubectl create` refused while the API
/// server restarts is tried again).
fn create(c: &Cluster, namespace: &str, yaml: &str) {
    let docs: Vec<&str> = yaml.split_inclusive("---\n").collect();
    for chunk in docs.chunks(200) {
        let text = chunk.concat();
        wait_for(120, "kubectl create to go through", || {
            let out = support::cluster::output_with_input(
                std::process::Command::new("kubectl")
                    .args(["create", "-n", namespace, "-f", "-"])
                    .env("KUBECONFIG", &c.kubeconfig)
                    .env("PATH", c.path()),
                &text,
            );
            let said = String::from_utf8_lossy(&out.stderr);
            // After a retry, pods made by the first try already exist.
            (out.status.success() || (!said.is_empty() && said.lines().all(|l| l.contains("AlreadyExists"))))
                .then_some(())
        });
    }
}

fn all_bound(c: &Cluster, namespace: &str, expected: usize) -> Option<HashMap<String, String>> {
    let out = std::process::Command::new("kubectl")
        .args(["get", "pods", "-n", namespace, "-o", "json"])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("PATH", c.path())
        .output()
        .ok()?;
    // The API server may be restarting: not yet.
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let p: Vec<(String, String)> =
        items(&list).iter().map(|p| (s(&p["metadata"]["name"]), s(&p["spec"]["nodeName"]))).collect();
    (p.len() == expected && p.iter().all(|(_, n)| !n.is_empty())).then(|| p.into_iter().collect())
}

/// Pods reported `Scheduled` more than once, by UID.
fn scheduled_twice(c: &Cluster, namespace: &str) -> Vec<(String, u64)> {
    let list = c.get_json(&["events.v1.events.k8s.io", "-n", namespace]);
    let mut counts: HashMap<String, u64> = HashMap::new();
    for e in items(&list) {
        if e["reason"] == "Scheduled" {
            *counts.entry(s(&e["regarding"]["uid"])).or_insert(0) += e["series"]["count"].as_u64().unwrap_or(1);
        }
    }
    counts.into_iter().filter(|(_, n)| *n > 1).collect()
}

/// Samples a process's RSS every half second while `f` runs: (peak, last) in KiB.
fn sampling_rss<T>(pid: u32, f: impl FnOnce() -> T) -> (T, u64, u64) {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let (mut peak, mut last) = (0, 0);
            while !done.load(Ordering::SeqCst) {
                last = rss_kib(pid);
                peak = peak.max(last);
                std::thread::sleep(Duration::from_millis(500));
            }
            (peak, last)
        });
        let out = f();
        done.store(true, Ordering::SeqCst);
        let (peak, last) = sampler.join().unwrap_or((0, 0));
        (out, peak, last)
    })
}

fn start(c: &Cluster, kubeconfig: &Path, config: &Path, name: &str) -> Scheduler {
    c.start_scheduler_as(kubeconfig, config, name, &c.dir.join(format!("{name}.log")), &["--enable-explain-endpoint"])
}

fn metric(sched: &Scheduler, name: &str) -> u64 {
    let (_, body) = sched.get("/metrics");
    let name = format!("{name} ");
    body.lines().find_map(|l| l.strip_prefix(&name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The end of every scenario: each pod bound once, no binding in flight,
/// the cache the API's state, memory within bounds.
fn check_end(c: &Cluster, sched: &mut Scheduler, config: &Path, pool: &str, scheduler: &str, peak_kib: u64) {
    let twice = scheduled_twice(c, pool);
    assert!(twice.is_empty(), "{pool}: pods reported scheduled more than once: {twice:?}");
    wait_for(180, "the bindings in flight to come back", || {
        (metric(sched, "gpu_scheduler_bindings_in_flight") == 0).then_some(())
    });
    let diff = cache_disagreements(c, sched, config, pool, scheduler, "cpu: 500m, memory: 1Gi");
    assert!(diff.is_empty(), "{pool}: the cache is not the API's state:\n{}", diff.join("\n"));
    assert!(peak_kib < RSS_LIMIT_KIB, "{pool}: the scheduler's RSS reached {peak_kib} KiB");
    let status = sched.terminate();
    assert!(status.success(), "{status:?}:\n{}", sched.log_text());
}

/// kube-apiserver restarted every few seconds during a burst (CI: 600
/// pods, 3 restarts 3 s apart; long: 2,000 pods, 5 restarts 5 s apart):
/// the watches list again each time, every pod is bound once.
#[test]
fn api_server_restarted_during_a_burst() {
    let (n, restarts, every): (usize, u32, u64) = if long() { (2000, 5, 5) } else { (600, 3, 3) };
    let c = Cluster::up("chaos-restarts");
    let (pool, name) = ("restarts", "gs-restarts");
    // 110 pods a node: room for the whole burst (10 nodes at least).
    let config = setup(&c, pool, n.div_ceil(100).max(10), name, 100);
    let mut sched = start(&c, &c.kubeconfig, &config, "restarts");
    let pid = sched.pid().unwrap_or(0);
    let started = Instant::now();
    let ((), peak, last) = sampling_rss(pid, || {
        create(&c, pool, &pods("p", name, 0..n));
        for _ in 0..restarts {
            std::thread::sleep(Duration::from_secs(every));
            c.restart_apiserver();
        }
        wait_for(600, &format!("{n} pods bound"), || all_bound(&c, pool, n));
    });
    let elapsed = started.elapsed();
    let relists = sched.log_text().matches("watch failed").count();
    eprintln!(
        "restarts: {n} pods, {restarts} restarts every {every} s: all bound after {:.1} s; RSS peak {} MiB, last {} MiB; {relists} watch failures",
        elapsed.as_secs_f64(),
        peak >> 10,
        last >> 10
    );
    check_end(&c, &mut sched, &config, pool, name, peak);
}

/// The scheduler's watches cut off (a proxy paused) while pods are
/// created and bound pods deleted, etcd compacted past what they saw,
/// then their connections closed: resuming gets `410 Gone`, they list
/// again, and the relist turns the deletions they missed into deletions
/// in the cache.
#[test]
fn etcd_compaction_forces_a_relist() {
    let c = Cluster::up_with_lifecycles("chaos-compaction");
    let (pool, name) = ("compact", "gs-compact");
    let config = setup(&c, pool, 5, name, 100);
    let proxy = Proxy::start(support::reliability::apiserver_port(&c));
    let via = kubeconfig_via(&c, proxy.port, "via-proxy.kubeconfig");
    let mut sched = start(&c, &via, &config, "compact");
    let pid = sched.pid().unwrap_or(0);
    let ((), peak, _) = sampling_rss(pid, || {
        create(&c, pool, &pods("a", name, 0..200));
        wait_for(120, "the first 200 pods bound", || all_bound(&c, pool, 200));
        proxy.pause();
        // Unseen by the scheduler: 100 bound pods deleted (KWOK stops them
        // after a second's grace and removes them), 300 created.
        let gone: Vec<String> = (0..100).map(|i| format!("a{i:05}")).collect();
        let mut args = vec!["delete", "pod", "-n", pool, "--grace-period=1", "--wait=true"];
        args.extend(gone.iter().map(String::as_str));
        c.kubectl(&args);
        create(&c, pool, &pods("b", name, 0..300));
        let revision = compact_etcd(&c);
        // The API server's watch cache would still serve the old
        // resourceVersion; a restart empties it, so only the relist helps.
        c.restart_apiserver();
        eprintln!("compaction: etcd compacted to revision {revision}, {} connections closed", proxy.reset());
        proxy.resume();
        let at = Instant::now();
        wait_for(300, "400 pods bound", || all_bound(&c, pool, 400));
        eprintln!("compaction: all 400 bound {:.1} s after the watches came back", at.elapsed().as_secs_f64());
    });
    eprintln!("compaction: RSS peak {} MiB", peak >> 10);
    let log = sched.log_text();
    assert!(
        log.lines().any(|l| l.contains("watch failed") && (l.contains("410") || l.contains("too old"))),
        "no watch was told 410 Gone: the scenario did not force a relist"
    );
    check_end(&c, &mut sched, &config, pool, name, peak);
}

/// The scheduler's connections through a proxy: paused for 5 s, closed
/// mid-stream, then left half-open (nothing passes, nothing closes)
/// during a burst. Watches and bindings on a half-open connection must
/// time out and come back on new connections.
#[test]
fn connections_paused_reset_and_half_open() {
    let c = Cluster::up("chaos-proxy");
    let (pool, name) = ("proxied", "gs-proxied");
    let config = setup(&c, pool, 5, name, 50);
    let proxy = Proxy::start(support::reliability::apiserver_port(&c));
    let via = kubeconfig_via(&c, proxy.port, "via-proxy.kubeconfig");
    let mut sched = start(&c, &via, &config, "proxied");
    let pid = sched.pid().unwrap_or(0);
    let ((), peak, _) = sampling_rss(pid, || {
        create(&c, pool, &pods("a", name, 0..300));
        wait_for(120, "some pods bound", || (c.bound_count(pool) >= 20).then_some(()));
        proxy.pause();
        std::thread::sleep(Duration::from_secs(5));
        proxy.resume();
        std::thread::sleep(Duration::from_secs(2));
        let closed = proxy.reset();
        create(&c, pool, &pods("b", name, 0..100));
        wait_for(120, "binding again after the reset", || (c.bound_count(pool) >= 120).then_some(()));
        let frozen = proxy.freeze();
        let at = Instant::now();
        create(&c, pool, &pods("c", name, 0..100));
        wait_for(300, "500 pods bound after the half-open connections", || all_bound(&c, pool, 500));
        eprintln!(
            "proxy: {closed} connections closed, {frozen} left half-open; all bound {:.1} s after the freeze",
            at.elapsed().as_secs_f64()
        );
    });
    eprintln!("proxy: RSS peak {} MiB", peak >> 10);
    check_end(&c, &mut sched, &config, pool, name, peak);
}
