//! Live node facts and spot draining on a real control plane (etcd,
//! kube-apiserver, kube-controller-manager v1.36.3 from tools/k8s): a
//! hardware alert from a Warning Event, temperatures from a real Prometheus
//! (Debian's `prometheus`, started here, scraping a small static exporter),
//! and the spot rebalancer emptying an expiring node through the Eviction
//! API while a PodDisruptionBudget holds; and a configuration changed under
//! a running scheduler (the file a ConfigMap mount gives, swapped as the
//! kubelet swaps it) applied without a restart, an invalid one refused
//! while scheduling goes on. KWOK plays the kubelets: bound pods run and
//! turn Ready, evicted ones go at the end of their grace period.

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cluster::{Cluster, Scheduler, items, node_yaml, pod_yaml, s, wait_for};

type Scenario = fn(&Cluster);

#[test]
fn live_facts_and_spot_draining() {
    let c = Cluster::up_with_lifecycles("facts");
    let scenarios: [(&str, Scenario); 4] = [
        ("a hardware alert Event", alert_event),
        ("temperatures from Prometheus", prometheus_temperatures),
        ("spot draining", spot_draining),
        ("a changed ConfigMap", config_reload),
    ];
    let failed: Vec<&str> = std::thread::scope(|scope| {
        let handles: Vec<_> = scenarios.iter().map(|(name, f)| (*name, scope.spawn(|| f(&c)))).collect();
        handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect()
    });
    assert!(failed.is_empty(), "failed scenarios: {failed:?} (their panics are printed above)");
}

fn config(scheduler: &str, pool: &str, extra: &str) -> String {
    format!(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nleaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {scheduler}\n  nodeSelector: {{matchLabels: {{pool: {pool}}}}}\n{extra}"
    )
}

fn node_of(c: &Cluster, ns: &str, pod: &str) -> String {
    c.placements(ns).into_iter().find(|(p, _)| p == pod).map(|(_, n)| n).unwrap_or_default()
}

fn now_rfc3339(offset_secs: i64) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64 + offset_secs;
    let out = Command::new("date").args(["-u", "-d", &format!("@{t}"), "+%Y-%m-%dT%H:%M:%SZ"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn metric(sched: &Scheduler, line_start: &str) -> Option<f64> {
    let (_, text) = sched.get("/metrics");
    text.lines().find_map(|l| l.strip_prefix(line_start).and_then(|v| v.trim().parse().ok()))
}

/// A Warning Event with a configured reason (XidError is a default) keeps
/// pods off the node for NodeHealth's window (20 s here, as a filter); a
/// pod that can only go there is placed as soon as the alert ages out,
/// not at the 5-minute flush of unschedulable pods.
fn alert_event(c: &Cluster) {
    let ns = "alerts";
    c.kubectl(&["create", "namespace", ns]);
    let pool = [("pool", "alerts")];
    let nodes = [node_yaml("alert-big", &pool, 64, 256, 0, &[]), node_yaml("alert-small", &pool, 8, 32, 0, &[])];
    c.kubectl_in(&["create", "-f", "-"], &nodes.concat());
    let extra = "  pluginConfig:\n  - name: NodeHealth\n    args: {mode: Filter, window: 20s}\n";
    let cfg = c.file("alerts-config.yaml", &config("gs-alerts", "alerts", extra));
    let mut sched = c.start_scheduler(&cfg, &c.dir.join("alerts-scheduler.log"));
    let when = now_rfc3339(0);
    let event = format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: alert-big.xid, namespace: default}}\ninvolvedObject: {{apiVersion: v1, kind: Node, name: alert-big}}\ntype: Warning\nreason: XidError\nmessage: 'XID 79: GPU has fallen off the bus'\nsource: {{component: gpu-health}}\nfirstTimestamp: {when}\nlastTimestamp: {when}\n"
    );
    c.kubectl_in(&["create", "-f", "-"], &event);
    let created = Instant::now();
    // Ignored: another reason, and an Event on a pod.
    let other = event
        .replace("alert-big.xid", "alert-small.reboot")
        .replace("alert-big}", "alert-small}")
        .replace("XidError", "Rebooted");
    c.kubectl_in(&["create", "-f", "-"], &other);

    // The bigger node would win; the alert sends the pod to the small one.
    std::thread::sleep(Duration::from_secs(2));
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("steered", "gs-alerts", &[], "cpu: 1", 0));
    wait_for(60, "steered bound", || Some(node_of(c, ns, "steered")).filter(|n| !n.is_empty()));
    assert_eq!(node_of(c, ns, "steered"), "alert-small");

    // A pod only the alerted node can hold waits, said so, then lands there.
    let pinned = pod_yaml("pinned", "gs-alerts", &[], "cpu: 20", 0);
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pinned);
    let msg = wait_for(30, "pinned reported unschedulable", || {
        let p = c.get_json(&["pod", "pinned", "-n", ns]);
        let cond = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PodScheduled")?.clone();
        (cond["status"] == "False").then(|| s(&cond["message"]))
    });
    assert!(msg.contains("1 node(s) had a hardware alert in the last 20s"), "{msg}");
    wait_for(90, "pinned bound once the alert aged out", || Some(node_of(c, ns, "pinned")).filter(|n| !n.is_empty()));
    let waited = created.elapsed();
    assert_eq!(node_of(c, ns, "pinned"), "alert-big");
    assert!(waited >= Duration::from_secs(19), "bound before the alert aged out ({waited:?})");
    assert!(waited < Duration::from_secs(240), "waited for the 5-minute flush, not the alert ({waited:?})");
    assert_eq!(metric(&sched, "gpu_scheduler_fact_source_up{source=\"events\"} "), Some(1.0));
    let status = sched.terminate();
    assert!(status.success(), "{}", sched.log_text());
}

/// Publishes `text` as `dir/config.yaml` the way the kubelet updates a
/// mounted ConfigMap: a new timestamped directory, then the `..data`
/// symlink swapped to it in one rename.
fn publish_config(dir: &Path, version: u32, text: &str) {
    let data = format!("..v{version}");
    std::fs::create_dir_all(dir.join(&data)).unwrap();
    std::fs::write(dir.join(&data).join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&data, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    let link = dir.join("config.yaml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/config.yaml", &link).unwrap();
    }
}

/// Events on the ConfigMap by reason: their notes, oldest first.
fn config_events(c: &Cluster, ns: &str, reason: &str) -> Vec<String> {
    let list = c.get_json(&["events.v1.events.k8s.io", "-n", ns]);
    items(&list)
        .iter()
        .filter(|e| e["regarding"]["kind"] == "ConfigMap" && e["reason"] == reason)
        .map(|e| s(&e["note"]))
        .collect()
}

/// The scheduler allows only side a; the pod that fits only on side b
/// waits. The ConfigMap's file changes to allow both sides and add a
/// policy rule: the pod binds with no restart, the rule switches on, each
/// said by an Event on the ConfigMap and in /metrics. (The load is the
/// whole cluster's, which the other scenarios share: the rule holds at any
/// load; the threshold itself is tested in crates/sim/tests/policy_switch.rs.)
/// Then an invalid file is refused, generation kept, and pods still bind.
fn config_reload(c: &Cluster) {
    let ns = "reload";
    c.kubectl(&["create", "namespace", ns]);
    let nodes = [
        node_yaml("reload-a", &[("pool", "reload"), ("side", "a")], 8, 32, 0, &[]),
        node_yaml("reload-b", &[("pool", "reload"), ("side", "b")], 8, 32, 0, &[]),
    ];
    c.kubectl_in(&["create", "-f", "-"], &nodes.concat());
    let v1 = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nleaderElection: {leaderElect: false}\nprofiles:\n- schedulerName: gs-reload\n  nodeSelector: {matchLabels: {pool: reload, side: a}}\n";
    let v2 = v1.replace("{pool: reload, side: a}", "{pool: reload}")
        + "  policySwitch:\n    rules:\n    - name: busy\n      when: {metric: cpuAllocation, atLeast: 0}\n      weights: {NodeResourcesBalancedAllocation: 5}\n";
    let v3 = format!("percentageOfNodesToScore: 150\n{v2}");
    let dir = c.dir.join("reload-configmap");
    publish_config(&dir, 1, v1);
    c.kubectl(&[
        "create",
        "configmap",
        "gs-reload-config",
        "-n",
        ns,
        &format!("--from-file=config.yaml={}", dir.join("config.yaml").display()),
    ]);
    let log = c.dir.join("reload-scheduler.log");
    let args = ["--config-map", "reload/gs-reload-config", "--config-check-interval", "1s"];
    let mut sched = c.start_scheduler_as(&c.kubeconfig, &dir.join("config.yaml"), "gpu-scheduler", &log, &args);
    let bound = |pod: &str| Some(node_of(c, ns, pod)).filter(|n| !n.is_empty());

    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("first", "gs-reload", &[], "cpu: 4", 0));
    wait_for(60, "first bound", || bound("first"));
    assert_eq!(node_of(c, ns, "first"), "reload-a");
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("second", "gs-reload", &[], "cpu: 6", 0));
    wait_for(30, "second reported unschedulable", || {
        let p = c.get_json(&["pod", "second", "-n", ns]);
        p["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .cloned()
    });
    assert_eq!(metric(&sched, "gpu_scheduler_config_generation "), Some(1.0));

    publish_config(&dir, 2, &v2);
    let file = format!("--from-file=config.yaml={}", dir.join("..v2/config.yaml").display());
    let cm = c.kubectl(&["create", "configmap", "gs-reload-config", "-n", ns, &file, "--dry-run=client", "-o", "yaml"]);
    c.kubectl_in(&["apply", "-f", "-"], &cm);
    wait_for(60, "second bound after the reload", || bound("second"));
    assert_eq!(node_of(c, ns, "second"), "reload-b");
    assert_eq!(metric(&sched, "gpu_scheduler_config_generation "), Some(2.0));
    let applied = wait_for(30, "a ConfigReloaded Event", || config_events(c, ns, "ConfigReloaded").pop());
    assert!(applied.contains("configuration generation 2 applied"), "{applied}");
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("third", "gs-reload", &[], "cpu: 1", 0));
    wait_for(60, "third bound", || bound("third"));
    let switched = wait_for(30, "a PolicySwitched Event", || config_events(c, ns, "PolicySwitched").pop());
    assert!(switched.contains("policy the profile as written → busy at cpuAllocation"), "{switched}");
    wait_for(10, "the switch counted", || {
        metric(&sched, "gpu_scheduler_policy_switches_total{profile=\"gs-reload\",rule=\"busy\"} ")
    });

    publish_config(&dir, 3, &v3);
    let refused = wait_for(30, "a ConfigRejected Event", || config_events(c, ns, "ConfigRejected").pop());
    assert!(refused.contains("kept configuration generation 2"), "{refused}");
    assert!(refused.contains("percentageOfNodesToScore: must be between 0 and 100, got 150"), "{refused}");
    assert!(sched.log_text().contains("configuration file refused"), "{}", sched.log_text());
    assert_eq!(metric(&sched, "gpu_scheduler_config_reloads_total{result=\"rejected\"} "), Some(1.0));
    assert_eq!(metric(&sched, "gpu_scheduler_config_generation "), Some(2.0));
    // Scheduling goes on under generation 2 (both sides allowed).
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("fourth", "gs-reload", &[], "cpu: 3", 0));
    wait_for(60, "fourth bound while the bad file stays", || bound("fourth"));
    assert_eq!(node_of(c, ns, "fourth"), "reload-a", "only side a has 3 cpus left");
    let status = sched.terminate();
    assert!(status.success(), "{}", sched.log_text());
}

/// A free port on loopback (released for the server that takes it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serves `body` with `content_type` on every path; returns the process
/// and its port.
fn static_server(dir: &Path, name: &str, content_type: &str, body: &str) -> (Process, u16) {
    let file = dir.join(format!("{name}.body"));
    std::fs::write(&file, body).unwrap();
    let script = format!(
        "import http.server,sys\nbody=open({file:?},'rb').read()\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        self.send_response(200); self.send_header('Content-Type',{content_type:?}); self.send_header('Content-Length',str(len(body))); self.end_headers(); self.wfile.write(body)\n    def log_message(self,*a): pass\ns=http.server.ThreadingHTTPServer(('127.0.0.1',0),H)\nprint(s.server_address[1],flush=True)\ns.serve_forever()\n",
        file = file.display().to_string()
    );
    let mut child = Command::new("python3").args(["-c", &script]).stdout(Stdio::piped()).spawn().expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("{name}: no port printed: {line:?}"));
    (Process(child), port)
}

fn prometheus_query(port: u16, query: &str) -> Value {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "2", "-G", &format!("http://127.0.0.1:{port}/api/v1/query"), "--data-urlencode"])
        .arg(format!("query={query}"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// DCGM-exporter's GPU temperature through a real Prometheus: the hot node
/// (95 °C ≥ 90) is rejected by Temperature. Prometheus stopped: scheduling
/// goes on, the metric shows the outage, one log line says so, and once
/// the values are older than maxAge the hot node is usable again. A source
/// answering garbage is a warning, not a crash.
fn prometheus_temperatures(c: &Cluster) {
    let ns = "temps";
    let dir = c.dir.join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let exposition = "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"temp-hot\"} 95\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\",Hostname=\"temp-hot\"} 70\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"temp-cool\"} 55\n";
    let (_exporter, exporter_port) = static_server(&dir, "exporter", "text/plain; version=0.0.4", exposition);
    let (_garbage, garbage_port) = static_server(&dir, "garbage", "text/html", "<html>not Prometheus</html>");
    let prom_port = free_port();
    let prom_cfg = dir.join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!("global: {{scrape_interval: 1s}}\nscrape_configs:\n- job_name: dcgm\n  static_configs:\n  - targets: ['127.0.0.1:{exporter_port}']\n"),
    )
    .unwrap();
    let prom_log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let mut prometheus = Process(
        Command::new("prometheus")
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(prom_log)
            .spawn()
            .expect("prometheus (Debian package `prometheus`)"),
    );
    let query = "max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)";
    wait_for(60, "Prometheus has scraped the exporter", || {
        let v = prometheus_query(prom_port, query);
        (v["data"]["result"].as_array().map_or(0, Vec::len) == 2).then_some(())
    });

    c.kubectl(&["create", "namespace", ns]);
    let pool = [("pool", "temps")];
    let nodes = [node_yaml("temp-hot", &pool, 64, 256, 0, &[]), node_yaml("temp-cool", &pool, 8, 32, 0, &[])];
    c.kubectl_in(&["create", "-f", "-"], &nodes.concat());
    let extra = format!(
        "nodeFacts:\n  prometheus:\n  - {{name: temperature, url: 'http://127.0.0.1:{prom_port}', query: '{query}', nodeLabel: Hostname, interval: 1s, timeout: 1s, maxAge: 5s}}\n  - {{name: garbage, url: 'http://127.0.0.1:{garbage_port}', query: up, interval: 1s, timeout: 1s, maxAge: 5s}}\n"
    );
    let cfg = c.file("temps-config.yaml", &config("gs-temps", "temps", &extra));
    let mut sched = c.start_scheduler(&cfg, &c.dir.join("temps-scheduler.log"));
    wait_for(30, "the temperature source up", || {
        (metric(&sched, "gpu_scheduler_fact_source_up{source=\"temperature\"} ") == Some(1.0)).then_some(())
    });

    // The bigger node is 95 °C: rejected.
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("cool", "gs-temps", &[], "cpu: 1", 0));
    wait_for(60, "cool bound", || Some(node_of(c, ns, "cool")).filter(|n| !n.is_empty()));
    assert_eq!(node_of(c, ns, "cool"), "temp-cool");
    // Too big for the cool node: refused with Temperature's reason.
    c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pod_yaml("big", "gs-temps", &[], "cpu: 20", 0));
    let msg = wait_for(30, "big reported unschedulable", || {
        let p = c.get_json(&["pod", "big", "-n", ns]);
        let cond = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PodScheduled")?.clone();
        (cond["status"] == "False").then(|| s(&cond["message"]))
    });
    assert!(msg.contains("1 node(s) too hot"), "{msg}");

    // Prometheus goes away: the outage is seen, said once, and once the
    // values are older than maxAge the big pod goes to the (no longer
    // known to be) hot node.
    let _ = prometheus.0.kill();
    let _ = prometheus.0.wait();
    wait_for(30, "the outage in the metric", || {
        (metric(&sched, "gpu_scheduler_fact_source_up{source=\"temperature\"} ") == Some(0.0)).then_some(())
    });
    wait_for(60, "big bound after the values aged out", || Some(node_of(c, ns, "big")).filter(|n| !n.is_empty()));
    assert_eq!(node_of(c, ns, "big"), "temp-hot");
    assert_eq!(metric(&sched, "gpu_scheduler_fact_source_up{source=\"garbage\"} "), Some(0.0));
    let status = sched.terminate();
    let log = sched.log_text();
    assert!(status.success(), "{log}");
    let outage_lines =
        log.lines().filter(|l| l.contains("Prometheus does not answer") && l.contains("fact=temperature")).count();
    assert_eq!(outage_lines, 1, "one log line per outage:\n{log}");
    assert!(
        log.lines().any(|l| l.contains("fact=garbage") && l.contains("not a Prometheus API answer")),
        "the garbage source is a warning:\n{log}"
    );
}

/// Every 200 ms until `stop`, the Deployment `web`'s ready pods (KWOK
/// runs them and removes the evicted): once it had them all, it must never
/// have fewer than its PodDisruptionBudget allows; returns the lowest seen.
fn ready_floor(c: &Cluster, ns: &str, stop: &AtomicBool, replicas: usize) -> usize {
    let mut lowest = usize::MAX;
    let mut all_ready_once = false;
    while !stop.load(Ordering::Relaxed) {
        let pods = c.get_json(&["pods", "-n", ns, "-l", "app=web"]);
        let ready = items(&pods)
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
            })
            .count();
        if ready == replicas {
            all_ready_once = true;
        }
        if all_ready_once {
            lowest = lowest.min(ready);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    lowest
}

/// A spot node whose expiry moves into the window is tainted, then emptied
/// one pod at a time through the Eviction API (the Deployment's PDB with
/// maxUnavailable 1 is never violated), its replacements land on the
/// on-demand nodes, the pod annotated do-not-evict stays; when the expiry
/// moves out again the taint comes off. A dry run first changes nothing.
fn spot_draining(c: &Cluster) {
    let ns = "spot";
    c.kubectl(&["create", "namespace", ns]);
    let pool = [("pool", "spot")];
    c.kubectl_in(
        &["create", "-f", "-"],
        &node_yaml("spot-1", &pool, 32, 64, 0, &[("gpu-scheduler.io/spot-expiry", &now_rfc3339(7200))]),
    );
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      schedulerName: gs-spot\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: web, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: 500m}}}}}}]\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  maxUnavailable: 1\n  selector: {{matchLabels: {{app: web}}}}\n"
    );
    let pinned = pod_yaml("pinned", "gs-spot", &[], "cpu: 500m", 0)
        .replace("metadata:\n", "metadata:\n  annotations: {gpu-scheduler.io/do-not-evict: \"true\"}\n");
    let dry_cfg = c.file("spot-dry-config.yaml", &config("gs-spot", "spot", "spotDrain: {interval: 1s}\n"));
    let cfg = c.file(
        "spot-config.yaml",
        &config("gs-spot", "spot", "spotDrain: {enabled: true, interval: 1s, maxEvictions: 1}\n"),
    );

    let stop = AtomicBool::new(false);
    let lowest = std::thread::scope(|scope| {
        let kubelet = scope.spawn(|| ready_floor(c, ns, &stop, 3));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Everything starts on the spot node, the only one.
            let mut dry = c.start_scheduler_as(
                &c.kubeconfig,
                &dry_cfg,
                "gpu-scheduler",
                &c.dir.join("spot-dry.log"),
                &["--dry-run"],
            );
            c.kubectl_in(&["create", "-f", "-"], &deployment);
            c.kubectl_in(&["create", "-n", ns, "-f", "-"], &pinned);
            wait_for(90, "web and pinned running on spot-1", || {
                let p = c.placements(ns);
                (p.len() == 4 && p.iter().all(|(_, n)| n == "spot-1")).then_some(())
            });
            for name in ["od-1", "od-2"] {
                c.kubectl_in(&["create", "-f", "-"], &node_yaml(name, &pool, 32, 64, 0, &[]));
            }
            wait_for(30, "all web pods ready", || {
                let pdb = c.get_json(&["pdb", "web", "-n", ns]);
                (pdb["status"]["currentHealthy"] == 3 && pdb["status"]["disruptionsAllowed"] == 1).then_some(())
            });
            // Expiry in 10 minutes: inside the 30-minute window.
            c.kubectl(&[
                "annotate",
                "node",
                "spot-1",
                "--overwrite",
                &format!("gpu-scheduler.io/spot-expiry={}", now_rfc3339(600)),
            ]);
            wait_for(30, "the dry run's report", || {
                dry.log_text().contains("dry run: would evict the node's pods").then_some(())
            });
            std::thread::sleep(Duration::from_secs(3));
            let node = c.get_json(&["node", "spot-1"]);
            assert!(node["spec"]["taints"].is_null(), "a dry run taints nothing: {node}");
            assert_eq!(c.placements(ns).iter().filter(|(_, n)| n == "spot-1").count(), 4, "a dry run evicts nothing");
            assert!(dry.terminate().success());

            // The real thing.
            let mut sched = c.start_scheduler(&cfg, &c.dir.join("spot-scheduler.log"));
            wait_for(30, "spot-1 tainted", || {
                let node = c.get_json(&["node", "spot-1"]);
                node["spec"]["taints"]
                    .as_array()?
                    .iter()
                    .any(|t| t["key"] == "gpu-scheduler.io/spot-expiring" && t["effect"] == "NoSchedule")
                    .then_some(())
            });
            wait_for(180, "the web pods moved to the on-demand nodes", || {
                let p = c.placements(ns);
                let web: Vec<&(String, String)> = p.iter().filter(|(n, _)| n.starts_with("web-")).collect();
                (web.len() == 3 && web.iter().all(|(_, n)| n.starts_with("od-"))).then_some(())
            });
            assert_eq!(node_of(c, ns, "pinned"), "spot-1", "do-not-evict stays");
            let events =
                c.kubectl(&["get", "events", "-n", ns, "--field-selector", "reason=SpotEvicted", "-o", "json"]);
            assert!(events.contains("Evicted: spot node spot-1 expires at"), "{events}");
            let evicted = metric(&sched, "gpu_scheduler_spot_evictions_total{result=\"evicted\"} ").unwrap_or(0.0);
            assert!(evicted >= 3.0, "{evicted}");

            // The expiry moves out of the window: the taint comes off, no
            // more evictions.
            c.kubectl(&[
                "annotate",
                "node",
                "spot-1",
                "--overwrite",
                &format!("gpu-scheduler.io/spot-expiry={}", now_rfc3339(7200)),
            ]);
            wait_for(30, "spot-1 untainted", || {
                let node = c.get_json(&["node", "spot-1"]);
                let has = node["spec"]["taints"]
                    .as_array()
                    .is_some_and(|ts| ts.iter().any(|t| t["key"] == "gpu-scheduler.io/spot-expiring"));
                (!has).then_some(())
            });
            std::thread::sleep(Duration::from_secs(3));
            assert_eq!(
                metric(&sched, "gpu_scheduler_spot_evictions_total{result=\"evicted\"} ").unwrap_or(0.0),
                evicted
            );
            assert_eq!(node_of(c, ns, "pinned"), "spot-1");
            let status = sched.terminate();
            assert!(status.success(), "{}", sched.log_text());
        }));
        stop.store(true, Ordering::Relaxed);
        let lowest = kubelet.join().unwrap_or(0);
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
        lowest
    });
    assert!(lowest >= 2, "the PodDisruptionBudget (maxUnavailable 1 of 3) was violated: {lowest} ready");
}
