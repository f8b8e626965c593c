//! The deployment as an SRE installs it (deploy/*.yaml applied with
//! `kubectl apply --server-side`), two scheduler replicas running as its
//! ServiceAccount with the deployed configuration, and a failover: the
//! leader killed with SIGKILL in the middle of a 500-pod burst.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::cluster::{Cluster, deploy_files, items, node_yaml, pod_yaml, s, wait_for};

const NS: &str = "gpu-scheduler";
const SA: &str = "system:serviceaccount:gpu-scheduler:scheduler-sa";

/// `kubectl auth can-i VERB RESOURCE` as the scheduler's ServiceAccount.
fn can_i(c: &Cluster, args: &[&str]) -> bool {
    let mut a = vec!["auth", "can-i", "--as", SA];
    a.extend_from_slice(args);
    let out = Command::new("kubectl")
        .args(&a)
        .env("KUBECONFIG", &c.kubeconfig)
        .env("PATH", c.path())
        .output()
        .unwrap_or_else(|e| panic!("kubectl auth can-i: {e}"));
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// A kubeconfig that authenticates with a ServiceAccount token from the
/// TokenRequest API, against the same server and CA as the admin's.
fn service_account_kubeconfig(c: &Cluster) -> std::path::PathBuf {
    let token = c.kubectl(&["create", "token", "scheduler-sa", "-n", NS, "--duration", "2h"]);
    let admin = std::fs::read_to_string(&c.kubeconfig).unwrap_or_else(|e| panic!("reading the kubeconfig: {e}"));
    let field = |key: &str| {
        admin
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {key} in the admin kubeconfig"))
    };
    let (server, ca) = (field("server:"), field("certificate-authority:"));
    c.file(
        "scheduler-sa.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: scheduler-sa\n  user:\n    token: {}\ncontexts:\n- name: local\n  context: {{cluster: local, user: scheduler-sa}}\ncurrent-context: local\n",
            token.trim()
        ),
    )
}

fn lease_holder(c: &Cluster) -> String {
    let leases = c.get_json(&["leases", "-n", NS]);
    items(&leases)
        .iter()
        .find(|l| s(&l["metadata"]["name"]).contains("gpu-scheduler"))
        .map(|l| s(&l["spec"]["holderIdentity"]))
        .unwrap_or_default()
}

/// The value of one sample in Prometheus text, 0 when absent.
fn sample(metrics: &str, name_and_labels: &str) -> f64 {
    metrics.lines().find_map(|l| l.strip_prefix(name_and_labels).and_then(|v| v.trim().parse().ok())).unwrap_or(0.0)
}

#[test]
fn deployed_replicas_fail_over() {
    let c = Cluster::up("ha");
    let mut args = vec!["apply", "--server-side"];
    let files = deploy_files();
    for f in &files {
        args.extend_from_slice(&["-f", f.to_str().unwrap_or_default()]);
    }
    c.kubectl(&args);

    // Least privilege: what the scheduler needs, and nothing it does not.
    for (allowed, check) in [
        (true, vec!["list", "nodes"]),
        (true, vec!["watch", "pods", "-A"]),
        (true, vec!["create", "pods", "--subresource=binding", "-n", "default"]),
        (true, vec!["patch", "pods", "--subresource=status", "-n", "default"]),
        (true, vec!["create", "events.events.k8s.io", "-n", "default"]),
        (true, vec!["update", "leases/gpu-scheduler", "-n", NS]),
        (false, vec!["get", "secrets", "-n", NS]),
        (false, vec!["list", "secrets", "-A"]),
        (false, vec!["delete", "nodes"]),
        (false, vec!["create", "pods", "-n", "default"]),
        (false, vec!["delete", "pods", "-n", "default"]),
        (false, vec!["update", "leases/kube-scheduler", "-n", "kube-system"]),
        (false, vec!["update", "configmaps", "-n", NS]),
    ] {
        assert_eq!(can_i(&c, &check), allowed, "can-i {check:?} as the ServiceAccount");
    }

    // The deployed configuration, run out of cluster as the ServiceAccount.
    let cm = c.get_json(&["configmap", "-n", NS, "-l", "app.kubernetes.io/name=gpu-scheduler"]);
    let config = items(&cm)
        .iter()
        .find_map(|m| m["data"]["config.yaml"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no ConfigMap with config.yaml in {NS}: {cm}"));
    let config = c.file("deployed-config.yaml", &config);
    let kubeconfig = service_account_kubeconfig(&c);

    let nodes: String = (0..5).map(|i| node_yaml(&format!("n{i}"), &[], 32, 128, 0, &[])).collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    c.kubectl(&["create", "namespace", "burst"]);

    // The pods exist before any replica runs: the leader's binding rate
    // (the deployed qps of 50) then sets the pace, not how fast they are
    // created, and the kill lands mid-burst on any machine.
    let pods: String =
        (0..500).map(|i| pod_yaml(&format!("p{i:03}"), "gpu-scheduler", &[("app", "burst")], "cpu: 100m", 0)).collect();
    c.kubectl_in(&["create", "-n", "burst", "-f", "-"], &pods);
    let a = c.start_scheduler_as(&kubeconfig, &config, "replica-a", &c.dir.join("replica-a.log"), &[]);
    let b = c.start_scheduler_as(&kubeconfig, &config, "replica-b", &c.dir.join("replica-b.log"), &[]);
    let first = wait_for(60, "a leader", || Some(lease_holder(&c)).filter(|h| !h.is_empty()));
    let (mut leader, mut follower) = if first.starts_with("replica-a") { (a, b) } else { (b, a) };
    wait_for(60, "both replicas ready", || {
        (leader.get("/readyz").0 == 200 && follower.get("/readyz").0 == 200).then_some(())
    });
    assert_eq!(sample(&follower.get("/metrics").1, "gpu_scheduler_leader "), 0.0);

    wait_for(120, "the leader binding pods", || (c.bound_count("burst") >= 50).then_some(()));
    leader.kill();
    let killed = Instant::now();
    // Bindings the dead leader had sent land within moments; nothing
    // binds after that until the follower leads (at least 13 s later).
    std::thread::sleep(Duration::from_secs(1));
    let bound_by_first = c.bound_count("burst");
    assert!(bound_by_first < 500, "the burst finished before the kill");

    let holder = wait_for(60, "the follower taking the Lease", || {
        let h = lease_holder(&c);
        (!h.is_empty() && h != first).then_some(h)
    });
    let takeover = killed.elapsed();
    println!("takeover after kill -9: {:.1} s (lease 15 s, retry 2 s)", takeover.as_secs_f64());
    assert!(!holder.starts_with(first.split('_').next().unwrap_or_default()), "{holder} vs {first}");

    wait_for(300, "all 500 pods bound", || (c.bound_count("burst") == 500).then_some(()));
    let twice = c.scheduled_twice("burst");
    assert!(twice.is_empty(), "pods reported scheduled more than once: {twice:?}");

    // The survivor's metrics count exactly what it did (gauges are
    // refreshed every second: wait for the queue to read empty).
    let metrics = wait_for(30, "the survivor's queue gauges at zero", || {
        let m = follower.get("/metrics").1;
        let queued: f64 = ["active", "backoff", "unschedulable"]
            .iter()
            .map(|q| sample(&m, &format!("scheduler_pending_pods{{queue=\"{q}\"}} ")))
            .sum();
        (queued == 0.0).then_some(m)
    });
    let scheduled =
        sample(&metrics, "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"gpu-scheduler\"} ");
    assert_eq!(scheduled as usize, 500 - bound_by_first, "{metrics}");
    assert_eq!(sample(&metrics, "gpu_scheduler_leader "), 1.0);
    for timed in [
        "scheduler_plugin_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",extension_point=\"PreFilter\",status=\"Success\"}",
        "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Success\",profile=\"gpu-scheduler\"}",
    ] {
        assert!(metrics.contains(timed), "no {timed} in\n{metrics}");
    }
    let binding_errors: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("gpu_scheduler_binding_errors_total"))
        .filter_map(|l| l.split(' ').nth(1)?.parse::<f64>().ok())
        .sum();
    assert_eq!(binding_errors, 0.0, "{metrics}");

    // SIGTERM releases the Lease.
    let status = follower.terminate();
    assert!(status.success(), "{status:?}:\n{}", follower.log_text());
    assert_eq!(lease_holder(&c), "", "the Lease was not released");
    leader.kill();
}
