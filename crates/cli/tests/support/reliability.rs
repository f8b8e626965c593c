//! What the reliability tests share: kube-scheduler as a rival with the
//! same schedulerName, the scheduler's connection through a [`Proxy`],
//! etcd compaction, the scheduler's memory, and the check that its cache
//! agrees with the API server once the faults are over.
//!
//! [`Proxy`]: super::proxy::Proxy

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::cluster::{Cluster, Scheduler, pod_yaml, s, wait_for};

/// The API server's port.
pub fn apiserver_port(c: &Cluster) -> u16 {
    let p = c.dir.join("run/apiserver.port");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A copy of the cluster's kubeconfig that talks to `port` on loopback
/// (a proxy in front of the API server).
pub fn kubeconfig_via(c: &Cluster, port: u16, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(&c.kubeconfig).unwrap_or_else(|e| panic!("reading the kubeconfig: {e}"));
    let api = format!("https://127.0.0.1:{}", apiserver_port(c));
    assert!(text.contains(&api), "the kubeconfig does not name {api}");
    c.file(name, &text.replace(&api, &format!("https://127.0.0.1:{port}")))
}

/// kube-scheduler, killed when dropped.
pub struct KubeScheduler {
    child: Child,
}

impl Drop for KubeScheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts kube-scheduler (tools/k8s's build) with one profile named
/// `scheduler`, kept to the nodes labelled `pool=POOL` by NodeAffinity's
/// addedAffinity (as our profile's nodeSelector keeps ours), at `qps`.
pub fn start_kube_scheduler(c: &Cluster, scheduler: &str, pool: &str, qps: u32, log: &Path) -> KubeScheduler {
    let config = c.file(
        &format!("kube-scheduler-{scheduler}.yaml"),
        &format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\n  qps: {qps}\n  burst: {qps}\nleaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {scheduler}\n  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions: [{{key: pool, operator: In, values: [{pool}]}}]\n",
            c.kubeconfig.display()
        ),
    );
    let bin = c.path().split(':').next().unwrap_or_default().to_string();
    let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
    let child = Command::new(Path::new(&bin).join("kube-scheduler"))
        .arg("--config")
        .arg(&config)
        .args(["--secure-port", "0", "-v", "2"])
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("starting kube-scheduler: {e}"));
    KubeScheduler { child }
}

/// Resident memory of a process, in KiB (0 once it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Compacts etcd up to its current revision (what kube-apiserver does
/// every 5 minutes), through etcd's JSON gateway: a watch resumed from
/// an older resourceVersion then gets `410 Gone` and must list again.
/// Returns the revision compacted to.
pub fn compact_etcd(c: &Cluster) -> u64 {
    let p = c.dir.join("run/etcd.port");
    let port = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    let url = |path: &str| format!("http://127.0.0.1:{}/v3/{path}", port.trim());
    let post = |path: &str, body: &str| -> Value {
        let out = Command::new("curl")
            .args(["-sf", "-X", "POST", &url(path), "-d", body])
            .output()
            .unwrap_or_else(|e| panic!("running curl: {e}"));
        assert!(out.status.success(), "etcd {path}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("etcd {path}: {e}"))
    };
    // Any key will do: the header carries the store's revision.
    let header = post("kv/range", r#"{"key": "L3JlZ2lzdHJ5"}"#);
    let revision: u64 = header["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision from etcd: {header}"));
    post("kv/compaction", &format!(r#"{{"revision": "{revision}", "physical": true}}"#));
    revision
}

/// How a node looks to a decision: its verdict class and each score
/// plugin's raw score (what the pods on it change).
fn node_views(explanation: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = explanation["nodes"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .map(|n| {
                    // Which feasible node won is a tie-break; feasible is what counts.
                    let verdict = if n["verdict"] == "selected" { "feasible".to_string() } else { s(&n["verdict"]) };
                    let scores: Vec<String> = n["scores"]
                        .as_array()
                        .map(|ss| ss.iter().map(|x| format!("{}={}", s(&x["plugin"]), x["raw"])).collect())
                        .unwrap_or_default();
                    let reasons = n["reasons"].to_string();
                    (s(&n["node"]), format!("{verdict} {} {reasons} {}", s(&n["plugin"]), scores.join(" ")))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Checks that the live scheduler's cache is the API server's state:
/// `gpu-scheduler snapshot` of the cluster, then a pod `probe` in
/// namespace `pool` (`requests` as YAML flow entries) simulated on that
/// snapshot with `config`, then the same pod created live and decided by
/// `sched` (started with `--enable-explain-endpoint`); the verdict and
/// raw scores of every node whose name starts with `pool` (the
/// scenario's nodes: other scenarios change theirs meanwhile) must be the
/// same in both decisions. A pod the cache still assumed, a deleted pod
/// it still held or a node it missed would change a node's free room,
/// hence its verdict or raw scores. Returns the differences, one line per
/// node.
pub fn cache_disagreements(
    c: &Cluster,
    sched: &Scheduler,
    config: &Path,
    pool: &str,
    scheduler_name: &str,
    requests: &str,
) -> Vec<String> {
    let (namespace, probe, nodes) = (pool, "probe", pool);
    let snapshot = c.dir.join(format!("{namespace}-{probe}-snapshot.yaml"));
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(["snapshot", "--kubeconfig"])
        .arg(&c.kubeconfig)
        .arg("--output")
        .arg(&snapshot)
        .output()
        .unwrap_or_else(|e| panic!("running snapshot: {e}"));
    assert!(out.status.success(), "snapshot failed: {}", String::from_utf8_lossy(&out.stderr));
    let pod = pod_yaml(probe, scheduler_name, &[("app", "probe")], requests, 0)
        .replace("metadata:\n", &format!("metadata:\n  namespace: {namespace}\n"));
    let pod_file = c.file(&format!("{namespace}-{probe}.yaml"), &pod);
    let key = format!("{namespace}/{probe}");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(["simulate", "--output", "json", "--explain", &key, "--config"])
        .arg(config)
        .arg(&snapshot)
        .arg(&pod_file)
        .output()
        .unwrap_or_else(|e| panic!("running simulate: {e}"));
    assert!(out.status.success(), "simulate of the snapshot failed: {}", String::from_utf8_lossy(&out.stderr));
    let simulated: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let ours = |v: Vec<(String, String)>| -> Vec<(String, String)> {
        v.into_iter().filter(|(n, _)| n.starts_with(nodes)).collect()
    };
    let simulated = ours(node_views(&simulated["explain"]));
    c.kubectl_in(&["create", "-f", "-"], &pod);
    let live: Value = wait_for(60, &format!("the live decision for {key}"), || {
        let (status, body) = sched.get(&format!("/debug/explain/{key}"));
        (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
    });
    let live = ours(node_views(&live));
    assert!(!live.is_empty(), "no node named {nodes}* in the live decision");
    let mut out = Vec::new();
    let names: std::collections::BTreeSet<&String> = simulated.iter().chain(live.iter()).map(|(n, _)| n).collect();
    for n in names {
        let sim = simulated.iter().find(|(m, _)| m == n).map(|(_, v)| v.as_str()).unwrap_or("(absent)");
        let liv = live.iter().find(|(m, _)| m == n).map(|(_, v)| v.as_str()).unwrap_or("(absent)");
        if sim != liv {
            out.push(format!("{n}: API state gives {sim:?}, the scheduler's cache {liv:?}"));
        }
    }
    out
}
