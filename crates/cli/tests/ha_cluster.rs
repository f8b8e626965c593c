//! The deployment as an SRE installs it (deploy/crds/ then deploy/*.yaml
//! applied with `kubectl apply --server-side`), two scheduler replicas
//! running as its ServiceAccount with the deployed configuration, and a
//! failover: the leader killed with SIGKILL in the middle of a 500-pod
//! burst. Then what gangs and preemption need from the installation: the
//! PodGroup CRD's validation and status subresource, and the permissions
//! around them.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::cluster::{Cluster, deploy_files, items, node_yaml, output_with_input, pod_yaml, repo, s, wait_for};

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

/// The ServiceAccount as a client: a token from the TokenRequest API, and
/// the server and CA file of the admin's kubeconfig.
struct ServiceAccount {
    token: String,
    server: String,
    ca: String,
}

fn service_account(c: &Cluster) -> ServiceAccount {
    let token = c.kubectl(&["create", "token", "scheduler-sa", "-n", NS, "--duration", "2h"]);
    let admin = std::fs::read_to_string(&c.kubeconfig).unwrap_or_else(|e| panic!("reading the kubeconfig: {e}"));
    let field = |key: &str| {
        admin
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {key} in the admin kubeconfig"))
    };
    ServiceAccount { token: token.trim().to_string(), server: field("server:"), ca: field("certificate-authority:") }
}

/// A kubeconfig that authenticates as the ServiceAccount.
fn service_account_kubeconfig(c: &Cluster, sa: &ServiceAccount) -> std::path::PathBuf {
    let ServiceAccount { token, server, ca } = sa;
    c.file(
        "scheduler-sa.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: scheduler-sa\n  user:\n    token: {token}\ncontexts:\n- name: local\n  context: {{cluster: local, user: scheduler-sa}}\ncurrent-context: local\n"
        ),
    )
}

/// One API request as the ServiceAccount, sent as the scheduler sends it:
/// kubectl would GET the object's subresource first, which the scheduler
/// need not be allowed to. Returns the HTTP status and the body.
fn request_as(sa: &ServiceAccount, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
    let out = output_with_input(
        Command::new("curl")
            .args(["-sS", "--cacert", &sa.ca, "-X", method, "--data-binary", "@-", "-w", "\n%{http_code}"])
            .args([
                "-H",
                &format!("Authorization: Bearer {}", sa.token),
                "-H",
                &format!("Content-Type: {content_type}"),
            ])
            .arg(format!("{}{path}", sa.server)),
        body,
    );
    assert!(out.status.success(), "curl {method} {path}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or_else(|| panic!("curl {method} {path}: no status in {text}"));
    (code.trim().parse().unwrap_or_else(|e| panic!("curl {method} {path}: status {code:?}: {e}")), body.to_string())
}

/// Installs as docs/OPERATIONS.md says: the CRDs first, then deploy/.
fn install(c: &Cluster) {
    // PodGroups can be created, and RBAC rules on them resolved, once the
    // API server serves the new resource.
    c.install_crds();
    let mut args = vec!["apply", "--server-side"];
    let files = deploy_files();
    for f in &files {
        args.extend_from_slice(&["-f", f.to_str().unwrap_or_default()]);
    }
    c.kubectl(&args);
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
    install(&c);

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
        (false, vec!["update", "pods", "-n", "default"]),
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
    let kubeconfig = service_account_kubeconfig(&c, &service_account(&c));

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

/// A PodGroup in namespace ml with `spec` (YAML lines under `spec:`).
fn podgroup_yaml(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: {name}\n  namespace: ml\nspec:\n  {spec}\n"
    )
}

#[test]
fn podgroups_validate_and_the_scheduler_writes_only_their_status() {
    let c = Cluster::up("ha-podgroups");
    install(&c);

    // Gangs and preemption: what they need, and nothing around it.
    let pg = "podgroups.scheduling.x-k8s.io";
    let pdb = "poddisruptionbudgets.policy";
    for (allowed, check) in [
        (true, vec!["get", pg, "-n", "ml"]),
        (true, vec!["list", pg, "-A"]),
        (true, vec!["watch", pg, "-A"]),
        (true, vec!["patch", pg, "--subresource=status", "-n", "ml"]),
        (true, vec!["update", pg, "--subresource=status", "-n", "ml"]),
        (true, vec!["delete", "pods", "-n", "ml"]),
        (true, vec!["patch", "pods", "--subresource=status", "-n", "ml"]),
        (true, vec!["list", pdb, "-A"]),
        (true, vec!["watch", pdb, "-A"]),
        (false, vec!["create", pg, "-n", "ml"]),
        (false, vec!["update", pg, "-n", "ml"]),
        (false, vec!["patch", pg, "-n", "ml"]),
        (false, vec!["delete", pg, "-n", "ml"]),
        (false, vec!["create", pdb, "-n", "ml"]),
        (false, vec!["delete", pdb, "-n", "ml"]),
        (true, vec!["create", "pods", "--subresource=eviction", "-n", "ml"]),
        (true, vec!["list", "queues.gpu-scheduler.io"]),
        (true, vec!["watch", "queues.gpu-scheduler.io"]),
        (false, vec!["update", "queues.gpu-scheduler.io"]),
        (true, vec!["patch", "queues.gpu-scheduler.io", "--subresource=status"]),
        (false, vec!["delete", "queues.gpu-scheduler.io"]),
        (true, vec!["list", "events", "-A"]),
        (true, vec!["watch", "events", "-A"]),
        (true, vec!["patch", "nodes"]),
        (false, vec!["update", "nodes"]),
        (false, vec!["delete", "events", "-A"]),
        (false, vec!["update", "pods", "-n", "ml"]),
        (false, vec!["delete", "nodes"]),
        (false, vec!["delete", "customresourcedefinitions.apiextensions.k8s.io"]),
    ] {
        assert_eq!(can_i(&c, &check), allowed, "can-i {check:?} as the ServiceAccount");
    }

    // The example applies as its comment says (all but the stand-in
    // nodes), and the nodes are valid objects too.
    let example = repo().join("examples/gang-training.yaml");
    let example = example.to_str().unwrap_or_default();
    c.kubectl(&["apply", "-f", example, "--selector", "!gpu-model"]);
    c.kubectl(&["apply", "--dry-run=server", "-f", example]);
    let applied = c.get_json(&["podgroup", "pretrain", "-n", "ml"]);
    assert_eq!(applied["spec"]["minMember"], 4, "{applied}");
    assert_eq!(applied["metadata"]["annotations"]["gpu-scheduler.io/topology-key"], "topology.kubernetes.io/zone");

    // Quantities as pods write them, numbers or strings.
    c.kubectl_in(
        &["create", "-f", "-"],
        &podgroup_yaml(
            "quantities",
            "minMember: 2\n  minResources: {nvidia.com/gpu: 16, cpu: 500m, memory: 512Gi, example.com/x: 1e3}",
        ),
    );
    for (name, spec, field, why) in [
        ("empty", "minMember: 0", "spec.minMember", "greater than or equal to 1"),
        (
            "words",
            "minMember: 2\n  minResources: {nvidia.com/gpu: eight}",
            "spec.minResources.nvidia.com/gpu",
            "should match",
        ),
    ] {
        let said = c.kubectl_refused(&["create", "-f", "-"], &podgroup_yaml(name, spec));
        assert!(said.contains(field) && said.contains(why), "PodGroup {name} ({spec}): {said}");
    }
    let huge = podgroup_yaml("huge", "minMember: 3000000000");
    if c.skip_below(
        36,
        "the API server's refusal of a PodGroup with minMember 3000000000",
        "before 1.36 a CRD's format: int32 is not enforced; checked instead that such a PodGroup is stored and \
         gpu-scheduler still reads the others (snapshot lists them all)",
    ) {
        c.kubectl_in(&["create", "-f", "-"], &huge);
        let text = std::fs::read_to_string(c.snapshot("huge-snapshot.yaml")).unwrap_or_default();
        assert!(text.contains("name: huge") && text.contains("name: quantities"), "{text}");
        c.kubectl(&["delete", "podgroup", "huge", "-n", "ml"]);
    } else {
        let said = c.kubectl_refused(&["create", "-f", "-"], &huge);
        assert!(said.contains("spec.minMember") && said.contains("int32"), "PodGroup huge: {said}");
    }

    // The scheduler's ServiceAccount writes the status, by patch and by
    // update, through the status subresource.
    let sa = service_account(&c);
    let status_path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/pretrain/status";
    let merge = "application/merge-patch+json";
    let status = json!({"status": {"phase": "Scheduling", "scheduled": 2, "running": 0,
        "scheduleStartTime": "2026-01-01T00:00:00Z", "occupiedBy": "0b8e6f6a-0000-4000-8000-000000000001"}});
    let (code, body) = request_as(&sa, "PATCH", status_path, merge, &status.to_string());
    assert_eq!(code, 200, "patching the status as the ServiceAccount: {body}");
    let kubeconfig = service_account_kubeconfig(&c, &sa);
    let mut read =
        c.get_json(&["--kubeconfig", kubeconfig.to_str().unwrap_or_default(), "podgroup", "pretrain", "-n", "ml"]);
    read["status"]["phase"] = json!("Scheduled");
    read["status"]["scheduled"] = json!(4);
    // Through the status endpoint, a changed spec is ignored.
    read["spec"]["minMember"] = json!(1);
    let (code, body) = request_as(&sa, "PUT", status_path, "application/json", &read.to_string());
    assert_eq!(code, 200, "updating the status as the ServiceAccount: {body}");
    let table = c.kubectl(&["get", "pg", "pretrain", "-n", "ml"]);
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows.first().map(Vec::as_slice),
        Some(&["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "AGE"][..]),
        "{table}"
    );
    assert_eq!(
        rows.get(1).map(|r| &r[..r.len().min(5)]),
        Some(&["pretrain", "Scheduled", "4", "4", "0"][..]),
        "{table}"
    );
    let after = c.get_json(&["podgroup", "pretrain", "-n", "ml"]);
    assert_eq!(after["status"]["scheduleStartTime"], "2026-01-01T00:00:00Z", "{after}");
    assert_eq!(after["spec"]["minMember"], 4, "the status update changed the spec: {after}");

    // Not a phase the API knows; not the scheduler's to change the spec.
    let (code, body) = request_as(&sa, "PATCH", status_path, merge, r#"{"status":{"phase":"Done"}}"#);
    assert!(code == 422 && body.contains("status.phase") && body.contains("Unsupported value"), "{code}: {body}");
    let object_path = status_path.trim_end_matches("/status");
    let (code, body) = request_as(&sa, "PATCH", object_path, merge, r#"{"spec":{"minMember":2}}"#);
    assert_eq!(code, 403, "the ServiceAccount patched a PodGroup's spec: {body}");

    // With the status subresource on, a write to the object leaves its
    // status alone, even from an admin.
    c.kubectl(&["patch", "podgroup", "pretrain", "-n", "ml", "--type=merge", "-p", r#"{"status":{"phase":"Failed"}}"#]);
    let after = c.get_json(&["podgroup", "pretrain", "-n", "ml"]);
    assert_eq!(after["status"]["phase"], "Scheduled", "{after}");
}
