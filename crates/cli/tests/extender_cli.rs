//! HTTP extenders configured as in a KubeSchedulerConfiguration, called by
//! `simulate` (the same engine path as `run`): a small real extender
//! server filters, prioritises and binds.

#[path = "../../extender/tests/support/mod.rs"]
mod extender_server;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn simulate(config: &str, cluster: &str) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(["simulate", "--output", "json", "--now", "2026-06-01T00:00:00Z", "--config", config, cluster])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, stderr)
}

fn check_config(config: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler")).args(["check-config", config]).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn write(name: &str, text: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("extender_cli");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const HEAD: &str = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n";

fn cluster() -> String {
    let node = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{cpu: '8', memory: 32Gi, pods: '110'}}}}\n---\n"
        )
    };
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default{extra}}}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]\n---\n"
        )
    };
    let pinned = "apiVersion: v1\nkind: Pod\nmetadata: {name: pinned, namespace: default}\nspec:\n  schedulerName: gpu-scheduler\n  nodeSelector: {kubernetes.io/hostname: bad-1}\n  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]\n";
    ["good-1", "bad-1", "best-1", "doomed-1"].iter().map(|n| node(n)).collect::<String>()
        + &pod("web", "")
        + &pod("refused", ", labels: {mode: error}")
        + pinned
}

fn placement<'a>(v: &'a Value, pod: &str) -> &'a Value {
    v["placements"].as_array().unwrap().iter().find(|p| p["pod"] == format!("default/{pod}")).unwrap()
}

#[test]
fn extenders_filter_prioritize_and_bind() {
    let server = extender_server::start();
    let cluster = write("cluster.yaml", &cluster());
    let extenders = |ignorable: bool, cache: bool| {
        format!(
            "{HEAD}extenders:\n- urlPrefix: {}\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  bindVerb: bind\n  weight: 5\n  nodeCacheCapable: {cache}\n  ignorable: {ignorable}\n  httpTimeout: 2s\n",
            server.url
        )
    };
    for cache in [false, true] {
        let config = write("strict.yaml", &extenders(false, cache));
        let (code, v, err) = simulate(&config, &cluster);
        assert_eq!(code, Some(0), "{err}");
        // Filtered to good-1 and best-1; the extender's 10 × weight 5 × 10 wins.
        assert_eq!(placement(&v, "web")["node"], "best-1", "{v}");
        // Bound by the extender, with kube's ExtenderBindingArgs.
        let bind = server.seen.lock().unwrap().bind.clone().unwrap();
        assert_eq!((bind["PodName"].as_str(), bind["Node"].as_str()), (Some("web"), Some("best-1")), "{bind}");
        // The only node the plugins allow is one the extender rejects.
        let pinned = placement(&v, "pinned");
        assert!(pinned["node"].is_null());
        let reason = pinned["reason"].as_str().unwrap();
        assert!(reason.starts_with("0/4 nodes are available: 1 bad node, says the extender"), "{reason}");
        // A failing extender that is not ignorable: the pod is retried,
        // and reported with the extender's error.
        let refused = placement(&v, "refused");
        assert!(refused["node"].is_null());
        assert!(refused["reason"].as_str().unwrap().contains("the extender says no"), "{refused}");
    }

    // Ignorable: the failing extender is skipped and the pod placed.
    let config = write("ignorable.yaml", &extenders(true, true));
    let (code, v, err) = simulate(&config, &cluster);
    assert_eq!(code, Some(0), "{err}");
    assert!(placement(&v, "refused")["node"].is_string(), "{v}");
}

#[test]
fn extender_config_errors_name_the_field() {
    let cases = [
        ("extenders:\n- urlPrefix: http://x\n  prioritizeVerb: p\n", "extenders[0].weight"),
        ("extenders:\n- urlPrefix: ftp://x\n  filterVerb: f\n", "extenders[0].urlPrefix"),
        ("extenders:\n- urlPrefix: http://x\n", "extenders[0]: needs at least one of"),
        (
            "extenders:\n- {urlPrefix: 'http://a', bindVerb: b}\n- {urlPrefix: 'http://b', bindVerb: b}\n",
            "only one extender can implement bind",
        ),
        (
            "extenders:\n- {urlPrefix: 'http://a', filterVerb: f, managedResources: [{name: cpu}]}\n",
            "extenders[0].managedResources[0].name",
        ),
        (
            "extenders:\n- {urlPrefix: 'https://a', enableHTTPS: true, filterVerb: f, tlsConfig: {caData: '!!'}}\n",
            "extenders[0].tlsConfig.caData",
        ),
        ("extenders:\n- {urlPrefix: 'http://a', filterVerb: f, httpTimout: 1s}\n", "httpTimout"),
    ];
    for (i, (body, want)) in cases.iter().enumerate() {
        let file = write(&format!("bad-{i}.yaml"), &format!("{HEAD}{body}"));
        let (code, err) = check_config(&file);
        assert_eq!(code, Some(2), "{body}: {err}");
        assert!(err.contains(want), "{body}: {err}");
    }
}
