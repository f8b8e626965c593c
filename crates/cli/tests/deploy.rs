//! The deployment artifacts: deploy/*.yaml and the Helm chart render the
//! same kinds of objects, grant exactly the API access `run` uses, and
//! carry configurations `check-config` accepts. helm is built from Go
//! modules by tools/k8s/helm/build. (ha_cluster.rs applies deploy/ to a
//! real control plane and runs the scheduler with its permissions.)

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::cluster::{deploy_files, repo};

/// The rules `run` needs: (API group, resource, verbs, resource names).
fn expected_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["nodes", "namespaces", "pods"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}),
        json!({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}),
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}),
    ]
}

fn expected_lease_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["gpu-scheduler"], "verbs": ["get", "update"]}),
    ]
}

fn docs(yaml: &str, source: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| {
            let v: serde_yaml_ng::Value =
                serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{source}: not YAML: {e}"));
            serde_json::to_value(v).unwrap_or_else(|e| panic!("{source}: {e}"))
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn deploy_objects() -> Vec<Value> {
    deploy_files()
        .iter()
        .flat_map(|f| docs(&std::fs::read_to_string(f).unwrap_or_default(), &f.display().to_string()))
        .collect()
}

fn helm(args: &[&str]) -> String {
    let out = Command::new(repo().join("tools/k8s/helm/build"))
        .output()
        .unwrap_or_else(|e| panic!("running tools/k8s/helm/build: {e}"));
    assert!(out.status.success(), "tools/k8s/helm/build: {}", String::from_utf8_lossy(&out.stderr));
    let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = Command::new(Path::new(&bin).join("helm"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running helm: {e}"));
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects.iter().map(|o| o["kind"].as_str().unwrap_or_default().to_string()).collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The access granted, and that nothing is granted beyond it.
fn check_rbac(objects: &[Value], source: &str) {
    let text = serde_json::to_string(objects).unwrap_or_default();
    assert!(!text.contains("\"*\""), "{source}: a wildcard in RBAC");
    assert!(!text.contains("secrets"), "{source}: Secrets in RBAC");
    let cluster_roles = of_kind(objects, "ClusterRole");
    assert_eq!(cluster_roles.len(), 1, "{source}: one ClusterRole");
    assert_eq!(cluster_roles[0]["rules"].as_array().cloned().unwrap_or_default(), expected_rules(), "{source}");
    let roles = of_kind(objects, "Role");
    assert_eq!(roles.len(), 1, "{source}: one Role, for the Lease");
    assert_eq!(roles[0]["rules"].as_array().cloned().unwrap_or_default(), expected_lease_rules(), "{source}");
    for binding in of_kind(objects, "ClusterRoleBinding").into_iter().chain(of_kind(objects, "RoleBinding")) {
        assert_eq!(binding["subjects"][0]["name"], "scheduler-sa", "{source}: {binding}");
    }
}

/// The ConfigMap's config.yaml passes `gpu-scheduler check-config`.
fn check_config(objects: &[Value], source: &str, lease_namespace: &str) {
    let cm = of_kind(objects, "ConfigMap");
    let config = cm
        .first()
        .and_then(|c| c["data"]["config.yaml"].as_str())
        .unwrap_or_else(|| panic!("{source}: no ConfigMap with config.yaml"));
    let dir = repo().join("target/deploy-test");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.join(format!("{}.yaml", source.replace(['/', ' '], "-")));
    std::fs::write(&file, config).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("running check-config: {e}"));
    assert!(out.status.success(), "{source}: check-config: {}", String::from_utf8_lossy(&out.stderr));
    let parsed = docs(config, source);
    assert_eq!(parsed[0]["leaderElection"]["leaderElect"], true, "{source}");
    assert_eq!(parsed[0]["leaderElection"]["resourceName"], "gpu-scheduler", "{source}");
    assert_eq!(parsed[0]["leaderElection"]["resourceNamespace"], lease_namespace, "{source}");
}

/// The hardened pod spec both forms promise.
fn check_deployment(objects: &[Value], source: &str) {
    let d = of_kind(objects, "Deployment");
    assert_eq!(d.len(), 1, "{source}");
    let spec = &d[0]["spec"];
    assert_eq!(spec["replicas"], 2, "{source}");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "scheduler-sa", "{source}");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{source}");
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{source}");
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{source}");
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]), "{source}");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{source}");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{source}");
    assert!(pod["affinity"]["podAntiAffinity"].is_object(), "{source}: replicas not spread");
}

#[test]
fn plain_manifests_are_least_privilege_and_valid() {
    let objects = deploy_objects();
    check_rbac(&objects, "deploy/");
    check_config(&objects, "deploy/", "gpu-scheduler");
    check_deployment(&objects, "deploy/");
}

#[test]
fn the_helm_chart_lints_and_renders_what_deploy_has() {
    helm(&["lint", "--strict", "deploy/helm/gpu-scheduler"]);
    let rendered = helm(&["template", "t", "deploy/helm/gpu-scheduler", "--namespace", "sched"]);
    let objects = docs(&rendered, "helm template");
    let mut expected = kinds(&deploy_objects());
    expected.remove("Namespace"); // Helm installs into a namespace it is given
    assert_eq!(kinds(&objects), expected);
    check_rbac(&objects, "helm template");
    check_config(&objects, "helm template", "sched");
    check_deployment(&objects, "helm template");
    for o in &objects {
        if o["metadata"]["namespace"].is_string() {
            assert_eq!(o["metadata"]["namespace"], "sched", "{o}");
        }
    }

    // Values change what they say: one replica without leader election,
    // no Role then, and the explain endpoint on.
    let single = helm(&[
        "template",
        "t",
        "deploy/helm/gpu-scheduler",
        "--namespace",
        "sched",
        "--set",
        "replicas=1,leaderElection.enabled=false,explainEndpoint=true",
    ]);
    let objects = docs(&single, "helm template (single)");
    assert!(of_kind(&objects, "Role").is_empty());
    let d = of_kind(&objects, "Deployment");
    assert_eq!(d[0]["spec"]["replicas"], 1);
    let args = d[0]["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--enable-explain-endpoint"), "{args}");
    let cm = of_kind(&objects, "ConfigMap");
    let config = docs(cm[0]["data"]["config.yaml"].as_str().unwrap_or_default(), "config");
    assert_eq!(config[0]["leaderElection"]["leaderElect"], false);
}
