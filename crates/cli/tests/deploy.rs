//! The deployment artifacts: deploy/*.yaml and the Helm chart render the
//! same kinds of objects, grant exactly the API access `run` uses, and
//! carry configurations `check-config` accepts; the CRDs, in deploy/crds/
//! and the chart's crds/, are the same files. helm is built from Go
//! modules by tools/k8s/helm/build. (ha_cluster.rs applies deploy/ to a
//! real control plane and runs the scheduler with its permissions.)

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrBool,
};
use serde_json::{Value, json};
use support::cluster::{deploy_files, repo};

/// The rules `run` needs: (API group, resource, verbs, resource names).
/// Pod delete, PodGroups and PodDisruptionBudgets are for gangs and
/// preemption (docs/OPERATIONS.md gives each rule's reason).
fn expected_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["nodes", "namespaces", "pods"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}),
        json!({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}),
        json!({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}),
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}),
        json!({"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch", "update"]}),
        json!({"apiGroups": ["gpu-scheduler.io"], "resources": ["queues"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["gpu-scheduler.io"], "resources": ["queues/status"], "verbs": ["patch"]}),
        json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "patch"]}),
        json!({"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["patch"]}),
        json!({"apiGroups": [""], "resources": ["services", "replicationcontrollers"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch", "update"]}),
        json!({"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]}),
        json!({"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}),
        json!({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}),
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
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
            docs(&text, &f.display().to_string())
        })
        .collect()
}

/// Runs helm (built, or found in the cache, by tools/k8s/helm/build).
fn helm_output(args: &[&str]) -> std::process::Output {
    let out = Command::new(repo().join("tools/k8s/helm/build"))
        .output()
        .unwrap_or_else(|e| panic!("running tools/k8s/helm/build: {e}"));
    assert!(out.status.success(), "tools/k8s/helm/build: {}", String::from_utf8_lossy(&out.stderr));
    let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Command::new(Path::new(&bin).join("helm"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running helm from {bin}: {e}"))
}

/// Runs helm and returns its output, which must be a success.
fn helm(args: &[&str]) -> String {
    let out = helm_output(args);
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
    let rbac: Vec<&Value> =
        ["ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"].iter().flat_map(|k| of_kind(objects, k)).collect();
    let text = serde_json::to_string(&rbac).unwrap_or_else(|e| panic!("{source}: {e}"));
    assert!(!text.contains('*'), "{source}: a wildcard in RBAC");
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
    // Each binding grants its own role, and the Lease Role sits where the
    // configuration puts the Lease.
    assert_eq!(of_kind(objects, "ClusterRoleBinding")[0]["roleRef"]["name"], cluster_roles[0]["metadata"]["name"]);
    let role_bindings = of_kind(objects, "RoleBinding");
    assert_eq!(role_bindings.len(), 1, "{source}: one RoleBinding, for the Lease");
    assert_eq!(role_bindings[0]["roleRef"]["name"], roles[0]["metadata"]["name"], "{source}");
    assert_eq!(role_bindings[0]["metadata"]["namespace"], roles[0]["metadata"]["namespace"], "{source}");
    let config = config_of(objects, source);
    assert_eq!(roles[0]["metadata"]["namespace"], config["leaderElection"]["resourceNamespace"], "{source}");
}

/// The parsed config.yaml of the (one) ConfigMap.
fn config_of(objects: &[Value], source: &str) -> Value {
    let text = of_kind(objects, "ConfigMap")
        .first()
        .and_then(|c| c["data"]["config.yaml"].as_str())
        .unwrap_or_else(|| panic!("{source}: no ConfigMap with config.yaml"));
    docs(text, source).into_iter().next().unwrap_or_else(|| panic!("{source}: empty config.yaml"))
}

/// The ConfigMap's config.yaml passes `gpu-scheduler check-config` and has
/// leader election on, with the Lease `lease_name` in `lease_namespace`.
fn check_config(objects: &[Value], source: &str, lease_namespace: &str, lease_name: &str) {
    let cm = of_kind(objects, "ConfigMap");
    let config = cm
        .first()
        .and_then(|c| c["data"]["config.yaml"].as_str())
        .unwrap_or_else(|| panic!("{source}: no ConfigMap with config.yaml"));
    let dir = repo().join("target/deploy-test");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let file = dir.join(format!("{}.yaml", source.replace(['/', ' ', '(', ')'], "-")));
    std::fs::write(&file, config).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("running check-config: {e}"));
    assert!(out.status.success(), "{source}: check-config: {}", String::from_utf8_lossy(&out.stderr));
    let le = &config_of(objects, source)["leaderElection"];
    assert_eq!(le["leaderElect"], true, "{source}");
    assert_eq!(le["resourceLock"], "leases", "{source}");
    assert_eq!(le["resourceName"], lease_name, "{source}");
    assert_eq!(le["resourceNamespace"], lease_namespace, "{source}");
}

/// The hardened pod spec both forms promise.
fn check_deployment(objects: &[Value], source: &str) {
    let d = of_kind(objects, "Deployment");
    assert_eq!(d.len(), 1, "{source}");
    let spec = &d[0]["spec"];
    assert_eq!(spec["replicas"], 2, "{source}");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "scheduler-sa", "{source}");
    assert_eq!(pod["automountServiceAccountToken"], true, "{source}");
    assert_eq!(pod["schedulerName"], "default-scheduler", "{source}");
    assert_eq!(pod["terminationGracePeriodSeconds"], 40, "{source}");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{source}");
    assert_eq!(pod["securityContext"]["runAsUser"], 65532, "{source}");
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{source}");
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{source}");
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{source}");
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]), "{source}");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{source}");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{source}");
    assert_eq!(c["ports"][0]["name"], "http", "{source}");
    assert_eq!(c["ports"][0]["containerPort"], 10251, "{source}");
    assert_eq!(c["resources"]["requests"], json!({"cpu": "100m", "memory": "128Mi"}), "{source}");
    assert_eq!(c["resources"]["limits"], json!({"memory": "512Mi"}), "{source}");
    let args: Vec<&str> = c["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(args.first(), Some(&"run"), "{source}: {args:?}");
    assert!(args.contains(&"--config=/etc/gpu-scheduler/config.yaml"), "{source}: {args:?}");
    // Config changes apply live; their Events go to the mounted ConfigMap.
    let volumes = pod["volumes"].as_array().into_iter().flatten();
    let config_map = volumes.filter_map(|v| v["configMap"]["name"].as_str()).next().unwrap_or_default();
    let ns = d[0]["metadata"]["namespace"].as_str().unwrap_or_default();
    assert!(args.contains(&format!("--config-map={ns}/{config_map}").as_str()), "{source}: {args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--kubeconfig")), "{source}: in-cluster config expected");
    assert!(pod["affinity"]["podAntiAffinity"].is_object(), "{source}: replicas not spread");
}

#[test]
fn plain_manifests_are_least_privilege_and_valid() {
    let objects = deploy_objects();
    check_rbac(&objects, "deploy/");
    check_config(&objects, "deploy/", "gpu-scheduler", "gpu-scheduler");
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
    check_config(&objects, "helm template", "sched", "gpu-scheduler");
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
    assert!(d[0]["spec"]["template"]["metadata"]["annotations"]["checksum/config"].is_null(), "reloaded, not rolled");
    // Without live reload a config change rolls the replicas.
    let rolled = helm(&["template", "t", "deploy/helm/gpu-scheduler", "--set", "configReload=false"]);
    let rolled = docs(&rolled, "helm template (rolled)");
    let d = of_kind(&rolled, "Deployment");
    let args = d[0]["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--config-check-interval=0s") && !args.contains("--config-map"), "{args}");
    assert!(d[0]["spec"]["template"]["metadata"]["annotations"]["checksum/config"].is_string());
    assert_eq!(config_of(&objects, "helm template (single)")["leaderElection"]["leaderElect"], false);

    // More than one replica without leader election would schedule twice.
    let out = helm_output(&["template", "t", "deploy/helm/gpu-scheduler", "--set", "leaderElection.enabled=false"]);
    assert!(!out.status.success(), "two replicas without leader election rendered");

    // A Lease in another namespace: the Role and its binding follow it.
    let moved = helm(&[
        "template",
        "t",
        "deploy/helm/gpu-scheduler",
        "--namespace",
        "sched",
        "--set",
        "config.leaderElection.resourceNamespace=leases,config.leaderElection.resourceName=gs",
    ]);
    let objects = docs(&moved, "helm template (moved lease)");
    check_config(&objects, "helm template (moved lease)", "leases", "gs");
    let role = of_kind(&objects, "Role");
    assert_eq!(role[0]["metadata"]["namespace"], "leases");
    assert_eq!(role[0]["rules"][1]["resourceNames"], json!(["gs"]));
    assert_eq!(of_kind(&objects, "RoleBinding")[0]["metadata"]["namespace"], "leases");
}

/// The `*.yaml` files of a directory: file name → text.
fn yaml_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            (p.file_name().unwrap_or_default().to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// Where `a` and `b` first differ (a dotted path), numbers compared as
/// floats: k8s-openapi holds `minimum` as f64, so a round trip turns the
/// 1 of the YAML into 1.0.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64() != y.as_f64()).then(|| path.to_string()),
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).find_map(|k| {
            first_difference(x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), &join(k))
        }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (u, v))| first_difference(u, v, &format!("{path}[{i}]")))
        }
        _ => (a != b).then(|| path.to_string()),
    }
}

/// The schema of the property at `path` (dot-separated) below `schema`.
fn property<'a>(schema: &'a JSONSchemaProps, path: &str) -> &'a JSONSchemaProps {
    path.split('.').fold(schema, |s, name| {
        s.properties.as_ref().and_then(|p| p.get(name)).unwrap_or_else(|| panic!("the PodGroup schema has no {path}"))
    })
}

/// Asserts a property's type and format.
fn typed(schema: &JSONSchemaProps, path: &str, type_: &str, format: Option<&str>) {
    let p = property(schema, path);
    assert_eq!(p.type_.as_deref(), Some(type_), "type of {path}");
    assert_eq!(p.format.as_deref(), format, "format of {path}");
}

#[test]
fn the_podgroup_crd_is_one_file_in_both_forms_and_speaks_coscheduling() {
    // Helm installs the chart's crds/ as they are (no templating), so the
    // two forms can, and must, ship the very same files.
    let plain = yaml_files(&repo().join("deploy/crds"));
    let chart = yaml_files(&repo().join("deploy/helm/gpu-scheduler/crds"));
    assert_eq!(
        plain.keys().collect::<Vec<_>>(),
        chart.keys().collect::<Vec<_>>(),
        "deploy/crds/ and deploy/helm/gpu-scheduler/crds/ hold different files"
    );
    for (name, text) in &plain {
        assert!(
            chart[name] == *text,
            "deploy/crds/{name} and deploy/helm/gpu-scheduler/crds/{name} differ: regenerate both (UPDATE_CRDS=1 cargo test -p gpu-scheduler-engine --test crds)"
        );
    }

    let file = "deploy/crds/scheduling.x-k8s.io_podgroups.yaml";
    let text = plain.get("scheduling.x-k8s.io_podgroups.yaml").unwrap_or_else(|| panic!("no {file}"));
    let objects = docs(text, file);
    assert_eq!(objects.len(), 1, "{file}: one object");
    let crd: CustomResourceDefinition = serde_json::from_value(objects[0].clone())
        .unwrap_or_else(|e| panic!("{file}: not a CustomResourceDefinition: {e}"));
    // k8s-openapi drops what it does not know: a misspelt field (say
    // `x-kubernetes-int-or-strng`) shows as a difference here.
    let back = serde_json::to_value(&crd).unwrap_or_else(|e| panic!("{file}: {e}"));
    if let Some(path) = first_difference(&objects[0], &back, "") {
        panic!("{file}: {path} is not part of a CustomResourceDefinition (lost in decoding)");
    }

    assert_eq!(crd.metadata.name.as_deref(), Some("podgroups.scheduling.x-k8s.io"));
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key("api-approved.kubernetes.io"), "{file}: no api-approved.kubernetes.io");
    // Deleting a CRD deletes every object of it: gpu-scheduler's labels
    // must not select it.
    assert!(crd.metadata.labels.is_none(), "{file}: labelled {:?}", crd.metadata.labels);
    let spec = &crd.spec;
    assert_eq!(spec.group, "scheduling.x-k8s.io");
    assert_eq!(spec.scope, "Namespaced");
    assert_eq!(spec.names.kind, "PodGroup");
    assert_eq!(spec.names.list_kind.as_deref(), Some("PodGroupList"));
    assert_eq!(spec.names.plural, "podgroups");
    assert_eq!(spec.names.singular.as_deref(), Some("podgroup"));
    assert_eq!(spec.names.short_names, Some(vec!["pg".to_string(), "pgs".to_string()]));
    let [version] = spec.versions.as_slice() else {
        panic!("{file}: one version expected, not {}", spec.versions.len())
    };
    assert_eq!(version.name, "v1alpha1");
    assert!(version.served && version.storage, "{file}: v1alpha1 must be served and stored");
    let subresources = version.subresources.as_ref().unwrap_or_else(|| panic!("{file}: no subresources"));
    assert!(subresources.status.is_some(), "{file}: no status subresource");
    assert!(subresources.scale.is_none(), "{file}: a scale subresource");
    let columns: Vec<(&str, &str, &str)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Phase", "string", ".status.phase"),
            ("MinMember", "integer", ".spec.minMember"),
            ("Scheduled", "integer", ".status.scheduled"),
            ("Running", "integer", ".status.running"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );

    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .unwrap_or_else(|| panic!("{file}: no openAPIV3Schema"));
    assert!(
        schema.description.as_deref().unwrap_or_default().contains("gpu-scheduler.io/topology-key"),
        "{file}: the topology-key annotation is not documented in the schema"
    );
    typed(schema, "spec.minMember", "integer", Some("int32"));
    assert_eq!(property(schema, "spec.minMember").minimum, Some(1.0), "a gang of at least one");
    typed(schema, "spec.scheduleTimeoutSeconds", "integer", Some("int32"));
    typed(schema, "spec.minResources", "object", None);
    let Some(JSONSchemaPropsOrBool::Schema(quantity)) = &property(schema, "spec.minResources").additional_properties
    else {
        panic!("{file}: spec.minResources has no schema for its values")
    };
    // The API server reads int-or-string as integer or string; the derived
    // schema (kube-core's structural rewriter) spells out no `anyOf`.
    assert_eq!(quantity.x_kubernetes_int_or_string, Some(true), "minResources values: int or string");
    assert!(quantity.type_.is_none(), "minResources values: int-or-string takes no type");
    assert!(quantity.pattern.is_some(), "minResources values: no quantity pattern");
    let phases: Vec<Value> = property(schema, "status.phase").enum_.iter().flatten().map(|j| j.0.clone()).collect();
    assert_eq!(
        phases,
        [
            json!("Pending"),
            json!("Scheduling"),
            json!("Scheduled"),
            json!("Running"),
            json!("Finished"),
            json!("Failed"),
            json!("Unknown")
        ]
    );
    typed(schema, "status.phase", "string", None);
    typed(schema, "status.occupiedBy", "string", None);
    for count in ["scheduled", "running", "succeeded", "failed"] {
        typed(schema, &format!("status.{count}"), "integer", Some("int32"));
    }
    typed(schema, "status.scheduleStartTime", "string", Some("date-time"));

    // Helm finds it where it looks for CRDs.
    let rendered = helm(&["template", "t", "deploy/helm/gpu-scheduler", "--include-crds"]);
    let crds: Vec<Value> = docs(&rendered, "helm template --include-crds")
        .into_iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    let podgroups: Vec<Value> =
        crds.into_iter().filter(|c| c["metadata"]["name"] == "podgroups.scheduling.x-k8s.io").collect();
    assert_eq!(podgroups, objects, "helm template --include-crds");
}

#[test]
fn the_queue_crd_decodes_with_the_fields_the_scheduler_reads() {
    let file = "deploy/crds/gpu-scheduler.io_queues.yaml";
    let text = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let objects = docs(&text, file);
    assert_eq!(objects.len(), 1, "{file}: one object");
    let crd: CustomResourceDefinition = serde_json::from_value(objects[0].clone())
        .unwrap_or_else(|e| panic!("{file}: not a CustomResourceDefinition: {e}"));
    let back = serde_json::to_value(&crd).unwrap_or_else(|e| panic!("{file}: {e}"));
    if let Some(path) = first_difference(&objects[0], &back, "") {
        panic!("{file}: {path} is not part of a CustomResourceDefinition (lost in decoding)");
    }
    assert_eq!(crd.metadata.name.as_deref(), Some("queues.gpu-scheduler.io"));
    assert!(crd.metadata.labels.is_none(), "{file}: labelled {:?}", crd.metadata.labels);
    let spec = &crd.spec;
    assert_eq!((spec.group.as_str(), spec.scope.as_str()), ("gpu-scheduler.io", "Cluster"));
    assert_eq!((spec.names.kind.as_str(), spec.names.plural.as_str()), ("Queue", "queues"));
    let [version] = spec.versions.as_slice() else { panic!("{file}: one version expected") };
    assert_eq!(version.name, "v1alpha1");
    let schema = serde_json::to_value(&version.schema).unwrap_or_default();
    let spec_props = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    for field in ["parent", "quota", "borrowingLimit", "lendingLimit", "weight", "reclaim"] {
        assert!(spec_props.get(field).is_some(), "{file}: spec.{field} missing");
    }
    for field in ["quota", "borrowingLimit", "lendingLimit"] {
        assert_eq!(spec_props[field]["additionalProperties"]["x-kubernetes-int-or-string"], true, "{file}: {field}");
    }
    // The engine's reader takes what the schema allows.
    let example = serde_json::json!({
        "apiVersion": "gpu-scheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"},
        "spec": {"parent": "root", "quota": {"nvidia.com/gpu": 8, "nvidia.com/gpu:a100": "4", "cpu": "64"},
                 "borrowingLimit": {"nvidia.com/gpu": 4}, "lendingLimit": {"nvidia.com/gpu": 2}, "weight": 2, "reclaim": true}
    });
    let obj: engine::convert::QueueObject = serde_json::from_value(example).unwrap();
    engine::convert::queue_from_object(&obj).unwrap();
}
