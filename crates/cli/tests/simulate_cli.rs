//! The `gpu-scheduler` binary end to end: `simulate` reports (golden files
//! and the JSON contract of DESIGN.md §1), `--explain`, exit codes and
//! error messages, and `check-config`.
//!
//! Golden files live in `tests/golden/`; `UPDATE_GOLDEN=1 cargo test -p
//! gpu-scheduler --test simulate_cli` rewrites them from the current binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const NOW: &str = "2026-01-01T00:00:00Z";
const EXAMPLE: &str = "examples/mixed-cluster.yaml";

/// The nodes of the example manifest.
const EXAMPLE_NODES: &[&str] =
    &["cpu-a1", "cpu-a2", "cpu-b1", "cpu-b2", "cpu-c1", "cpu-c2", "a100-a1", "a100-b1", "t4-a1", "t4-c1"];

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs the binary from the workspace root, so relative paths are as a user types them.
fn run(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(args)
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    Output {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("simulate_cli").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Compares with `tests/golden/<name>`, or rewrites it under `UPDATE_GOLDEN=1`.
fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (create it with UPDATE_GOLDEN=1)", path.display()));
    assert!(
        want == actual,
        "output differs from {} (rerun with UPDATE_GOLDEN=1 if the change is intended)\n--- want\n{want}\n--- got\n{actual}",
        path.display()
    );
}

fn simulate_json(extra: &[&str], files: &[&str]) -> Value {
    let mut args = vec!["simulate", "--output", "json", "--seed", "1", "--now", NOW];
    args.extend_from_slice(extra);
    args.extend_from_slice(files);
    let out = run(&args);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout))
}

fn placements(v: &Value) -> &Vec<Value> {
    v["placements"].as_array().expect("placements is an array")
}

// ------------------------------------------------------------------ golden

#[test]
fn json_report_of_the_example_matches_golden_and_the_contract() {
    let out = run(&["simulate", "--output", "json", "--seed", "1", "--now", NOW, EXAMPLE]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stdout.starts_with("{\"placements\":"), "placements must be the first key: {}", out.stdout);
    assert_eq!(out.stdout.matches('\n').count(), 1, "one JSON object on one line");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v.as_object().unwrap().keys().next().map(String::as_str), Some("placements"));

    // The contract: pod "NS/NAME", node a string or null, reason exactly when null.
    let ps = placements(&v);
    assert!(!ps.is_empty());
    for p in ps {
        let pod = p["pod"].as_str().unwrap_or_else(|| panic!("pod is a string: {p}"));
        let (ns, name) = pod.split_once('/').unwrap_or_else(|| panic!("pod is NS/NAME: {pod}"));
        assert!(!ns.is_empty() && !name.is_empty() && !name.contains('/'), "{pod}");
        match &p["node"] {
            Value::String(n) => {
                assert!(EXAMPLE_NODES.contains(&n.as_str()), "{pod} on unknown node {n}");
                assert!(p.get("reason").is_none(), "{pod} is placed but has a reason: {p}");
            }
            Value::Null => {
                let reason = p["reason"].as_str().unwrap_or_else(|| panic!("{pod} unplaced without reason: {p}"));
                assert!(!reason.is_empty());
            }
            other => panic!("{pod}: node must be a string or null, got {other}"),
        }
    }
    let giant = ps.iter().find(|p| p["pod"] == "ml/giant-pretrain").expect("giant-pretrain reported");
    assert_eq!(giant["node"], Value::Null);
    assert_eq!(
        giant["reason"],
        // Five: the inference replicas pack on t4-a1, keeping t4-c1 whole.
        "0/10 nodes are available: 1 node(s) in maintenance mode, 1 node(s) too hot, 5 Insufficient cpu, \
         6 Insufficient memory, 8 Insufficient nvidia.com/gpu. preemption: 0/10 nodes are available: \
         10 Preemption is not helpful for scheduling."
    );
    assert!(ps.iter().all(|p| p["pod"] != "shop/nightly-report"), "bound pods are load, not placements");
    assert!(ps.iter().all(|p| p["pod"] != "shop/metrics-agent"), "other schedulers' pods are ignored");

    golden("mixed-cluster.json", &(serde_json::to_string_pretty(&v).unwrap() + "\n"));
}

#[test]
fn table_report_of_the_example_matches_golden() {
    let out = run(&["simulate", "--seed", "1", "--now", NOW, EXAMPLE]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stdout.starts_with("Scheduled "), "{}", out.stdout);
    golden("mixed-cluster.txt", &out.stdout);
}

#[test]
fn same_seed_same_report_and_table_agrees_with_json() {
    let a = simulate_json(&[], &[EXAMPLE]);
    let b = simulate_json(&[], &[EXAMPLE]);
    assert_eq!(a, b);
    let table = run(&["simulate", "--seed", "1", "--now", NOW, EXAMPLE]).stdout;
    for p in placements(&a) {
        let pod = p["pod"].as_str().unwrap();
        match p["node"].as_str() {
            Some(node) => {
                let line = table.lines().find(|l| l.starts_with(pod)).unwrap_or_else(|| panic!("{pod} not in table"));
                assert!(line.split_whitespace().nth(1) == Some(node), "{line}");
            }
            None => assert!(table.contains(p["reason"].as_str().unwrap())),
        }
    }
}

// ----------------------------------------------------------------- explain

/// The explanation section of a table report: the lines after "Decision for".
fn explanation(stdout: &str) -> &str {
    let at = stdout.find("Decision for ").unwrap_or_else(|| panic!("no explanation in:\n{stdout}"));
    &stdout[at..]
}

/// Each node's line in an explanation, by node name.
fn node_lines(section: &str) -> Vec<(&str, &str)> {
    EXAMPLE_NODES
        .iter()
        .map(|n| {
            let line = section
                .lines()
                .find(|l| l.split_whitespace().next() == Some(*n))
                .unwrap_or_else(|| panic!("no line for node {n} in:\n{section}"));
            (*n, line)
        })
        .collect()
}

#[test]
fn explain_unplaced_pod_lists_every_node_rejected() {
    let out = run(&["simulate", "--seed", "1", "--now", NOW, "--explain", "ml/giant-pretrain", EXAMPLE]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let section = explanation(&out.stdout);
    assert!(section.starts_with("Decision for ml/giant-pretrain"), "{section}");
    assert!(section.contains("not scheduled"), "{section}");
    assert!(section.contains("0/10 nodes are available:"), "{section}");
    for (node, line) in node_lines(section) {
        assert_eq!(line.split_whitespace().nth(1), Some("rejected"), "{node}: {line}");
        // The first filter that fails is the one shown: the policy
        // filters run before NodeResourcesFit.
        let want = match node {
            "cpu-b2" => "Maintenance: node(s) in maintenance mode",
            "cpu-c2" => "Temperature: node(s) too hot",
            _ => "Insufficient nvidia.com/gpu",
        };
        assert!(line.contains(want), "{node}: {line}");
    }
}

#[test]
fn explain_placed_pod_lists_every_node_with_verdict_and_scores() {
    let report = simulate_json(&[], &[EXAMPLE]);
    // A pod of the web Deployment: several feasible nodes, so scores are computed.
    let placed = placements(&report)
        .iter()
        .find(|p| p["pod"].as_str().unwrap().starts_with("shop/web-") && p["score"].is_number())
        .expect("a scored web pod");
    let pod = placed["pod"].as_str().unwrap();
    let node = placed["node"].as_str().unwrap();

    let out = run(&["simulate", "--seed", "1", "--now", NOW, "--explain", pod, EXAMPLE]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let section = explanation(&out.stdout);
    assert!(section.starts_with(&format!("Decision for {pod}")), "{section}");
    assert!(section.contains(&format!("scheduled to {node}")), "{section}");
    let mut selected = Vec::new();
    for (n, line) in node_lines(section) {
        let verdict = line.split_whitespace().nth(1).unwrap();
        match verdict {
            "selected" => selected.push(n),
            "feasible" => {}
            "rejected" => assert!(
                line.contains(match n {
                    "cpu-b2" => "Maintenance: node(s) in maintenance mode",
                    "cpu-c2" => "Temperature: node(s) too hot",
                    _ => "TaintToleration: node(s) had untolerated taint(s)",
                }),
                "{line}"
            ),
            other => panic!("{n}: unexpected verdict {other}: {line}"),
        }
        if verdict != "rejected" {
            // Per plugin: normalised × weight = weighted (raw).
            assert!(line.contains('×') && line.contains("(raw "), "scores per plugin: {line}");
        }
    }
    assert_eq!(selected, [node]);
    // GPU nodes are tainted; of the CPU nodes one is in maintenance and one too hot.
    for (n, line) in node_lines(section) {
        let usable = n.starts_with("cpu-") && !["cpu-b2", "cpu-c2"].contains(&n);
        assert_eq!(line.contains("rejected"), !usable, "{line}");
    }
    // The header names the score plugins.
    assert!(section.lines().any(|l| l.starts_with("NODE") && l.contains("VERDICT") && l.contains("TaintToleration")));

    // The same in JSON.
    let v = simulate_json(&["--explain", pod], &[EXAMPLE]);
    let e = &v["explain"];
    assert_eq!(e["pod"], pod);
    assert_eq!(e["node"], node);
    let nodes = e["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), EXAMPLE_NODES.len());
    assert_eq!(nodes[0]["node"], node);
    assert_eq!(nodes[0]["verdict"], "selected");
    for n in nodes {
        let verdict = n["verdict"].as_str().unwrap();
        assert!(["selected", "feasible", "rejected"].contains(&verdict), "{n}");
        assert_eq!(verdict == "rejected", n["scores"].is_null(), "{n}");
    }
}

#[test]
fn explain_of_unknown_pod_is_an_error() {
    let out = run(&["simulate", "--now", NOW, "--explain", "ml/no-such-pod", EXAMPLE]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("ml/no-such-pod"), "{}", out.stderr);
}

// ------------------------------------------------------------------ errors

#[test]
fn manifest_with_bad_field_names_file_document_and_path() {
    let dir = scratch("bad-field");
    let file = write(
        &dir,
        "bad.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"10\"}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: three\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: x}]}\n",
    );
    let out = run(&["simulate", "--now", NOW, &file]);
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "no report on error: {}", out.stdout);
    for want in [file.as_str(), "document 1", "Deployment web", "spec.replicas"] {
        assert!(out.stderr.contains(want), "stderr lacks {want:?}: {}", out.stderr);
    }
}

#[test]
fn bad_pod_field_inside_a_workload_template_names_the_template_path() {
    let dir = scratch("bad-template");
    let file = write(
        &dir,
        "bad.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      schedulerName: gpu-scheduler\n      containers: [{name: c, image: x, resources: {requests: {cpu: lots}}}]\n",
    );
    let out = run(&["simulate", "--now", NOW, &file]);
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    for want in [file.as_str(), "document 0", "spec.template.spec.containers[0].resources.requests.cpu"] {
        assert!(out.stderr.contains(want), "stderr lacks {want:?}: {}", out.stderr);
    }
}

#[test]
fn missing_manifest_file_is_named() {
    let dir = scratch("missing");
    let path = dir.join("does-not-exist.yaml").to_string_lossy().into_owned();
    let out = run(&["simulate", "--now", NOW, &path]);
    assert!(out.code.is_some_and(|c| c != 0), "exit {:?}", out.code);
    assert!(out.stderr.contains(&path), "{}", out.stderr);
}

#[test]
fn bad_now_exits_2() {
    for bad in ["tomorrow", "2026-13-01T00:00:00Z", "2026-01-01"] {
        let out = run(&["simulate", "--now", bad, EXAMPLE]);
        assert_eq!(out.code, Some(2), "--now {bad}: stderr {}", out.stderr);
        assert!(out.stderr.contains("--now"), "{}", out.stderr);
        assert!(out.stdout.is_empty());
    }
}

const CONFIG_HEAD: &str = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n";

#[test]
fn check_config_rejects_bad_configs_naming_the_field() {
    let dir = scratch("check-config-bad");
    let score = |plugin: &str, weight: &str| {
        format!("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: {plugin}\n        weight: {weight}\n")
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("unknown field", "profiles:\n- schedulerName: a\n  bogus: 1\n".into(), "profiles[0]"),
        ("unknown top-level field", "percentageOfNodesToScor: 50\n".into(), "percentageOfNodesToScor"),
        ("unknown nested field", "leaderElection:\n  leaseDurationn: 15s\n".into(), "leaderElection"),
        (
            "unknown plugin",
            "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin\n".into(),
            "profiles[0].plugins.filter.enabled[0].name",
        ),
        ("negative weight", score("TaintToleration", "-1"), "profiles[0].plugins.score.enabled[0].weight"),
        ("zero weight", score("TaintToleration", "0"), "profiles[0].plugins.score.enabled[0].weight"),
        ("non-numeric weight", score("TaintToleration", "heavy"), "profiles[0].plugins.score.enabled[0].weight"),
        (
            "duplicate schedulerName",
            "profiles:\n- schedulerName: gpu-scheduler\n- schedulerName: canary\n- schedulerName: gpu-scheduler\n".into(),
            "profiles[2].schedulerName",
        ),
        ("percentage out of range", "percentageOfNodesToScore: 101\n".into(), "percentageOfNodesToScore"),
        ("spot drain without evictions", "spotDrain:\n  enabled: true\n  maxEvictions: 0\n".into(), "spotDrain.maxEvictions"),
        ("spot drain window unreadable", "spotDrain:\n  window: soon\n".into(), "spotDrain.window"),
        (
            "policy rule with two thresholds",
            "profiles:\n- policySwitch:\n    rules:\n    - {name: busy, when: {metric: gpuAllocation, atLeast: 80, below: 90}, gpuPlacement: binpack}\n".into(),
            "profiles[0].policySwitch.rules[0].when: needs exactly one of atLeast and below",
        ),
        (
            "policy rule weighting an unknown plugin",
            "profiles:\n- policySwitch:\n    rules:\n    - {name: busy, when: {metric: gpuAllocation, atLeast: 80}, weights: {NoSuchPlugin: 2}}\n".into(),
            "profiles[0].policySwitch.rules[0].plugins.score.enabled[",
        ),
        (
            "Prometheus fact without a scheme",
            "nodeFacts:\n  prometheus:\n  - {name: temperature, url: 'prometheus:9090', query: up}\n".into(),
            "nodeFacts.prometheus[0].url",
        ),
        (
            "Prometheus fact named twice",
            "nodeFacts:\n  prometheus:\n  - {name: t, url: 'http://p:9090', query: up}\n  - {name: t, url: 'http://p:9090', query: up}\n".into(),
            "nodeFacts.prometheus[1].name",
        ),
        (
            "bad plugin args",
            "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Sideways\n"
                .into(),
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        ),
        (
            "CEL rule with a syntax error",
            "profiles:\n- pluginConfig:\n  - name: CelRules\n    args:\n      rules:\n      - {name: ok, filter: 'true'}\n      - {name: broken, filter: \"node.labels[\"}\n".into(),
            "profiles[0].pluginConfig[0].args.rules[1].filter: rule \"broken\": syntax error at line 1, column",
        ),
        (
            "CEL rule with a type error",
            "profiles:\n- pluginConfig:\n  - name: CelRules\n    args:\n      rules:\n      - {name: typed, score: \"node.name * 2\"}\n".into(),
            "profiles[0].pluginConfig[0].args.rules[0].score: rule \"typed\": type error",
        ),
        (
            "CEL rule naming an unknown variable",
            "profiles:\n- pluginConfig:\n  - name: CelRules\n    args:\n      rules:\n      - {name: typo, filter: \"nodes.name == 'x'\"}\n".into(),
            "rule \"typo\": type error at line 1, column 1: Undeclared reference to 'nodes'",
        ),
    ];
    for (i, (name, body, path)) in cases.iter().enumerate() {
        let file = write(&dir, &format!("bad-{i}.yaml"), &format!("{CONFIG_HEAD}{body}"));
        let out = run(&["check-config", &file]);
        assert_eq!(out.code, Some(2), "{name}: stdout {} stderr {}", out.stdout, out.stderr);
        assert!(out.stderr.contains(path), "{name}: stderr lacks {path:?}: {}", out.stderr);
        assert!(out.stderr.contains(&file), "{name}: stderr names the file: {}", out.stderr);
        // The same config makes simulate fail the same way.
        let sim = run(&["simulate", "--now", NOW, "--config", &file, EXAMPLE]);
        assert_eq!(sim.code, Some(2), "{name}: simulate --config: {}", sim.stderr);
        assert!(sim.stderr.contains(path), "{name}: {}", sim.stderr);
    }
}

#[test]
fn check_config_accepts_a_valid_config() {
    let dir = scratch("check-config-good");
    let file = write(
        &dir,
        "good.yaml",
        &format!(
            "{CONFIG_HEAD}percentageOfNodesToScore: 50\nprofiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    score:\n      enabled:\n      - name: TaintToleration\n        weight: 2.5\n- schedulerName: canary\n"
        ),
    );
    let out = run(&["check-config", &file]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stdout.contains("valid"), "{}", out.stdout);
    assert!(out.stdout.contains("gpu-scheduler") && out.stdout.contains("canary"), "{}", out.stdout);

    let out = run(&["check-config", &dir.join("absent.yaml").to_string_lossy()]);
    assert_eq!(out.code, Some(2), "a missing config is a config error: {}", out.stderr);
}

/// Every shipped config is valid.
#[test]
fn example_configs_are_valid() {
    let mut checked = 0;
    for entry in std::fs::read_dir(workspace_root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with("config.yaml") {
            let out = run(&["check-config", &path.to_string_lossy()]);
            assert_eq!(out.code, Some(0), "{name}: {}", out.stderr);
            checked += 1;
        }
    }
    assert!(checked >= 2, "config.yaml and canary-config.yaml at least");
}

/// examples/config.yaml spells out the default: the same decisions, the
/// same scores, the same plugins in an explanation as no config at all.
#[test]
fn the_example_config_is_the_default() {
    let config = ["--config", "examples/config.yaml"];
    assert_eq!(simulate_json(&config, &[EXAMPLE]), simulate_json(&[], &[EXAMPLE]));
    let pod = ["--explain", "shop/web-8zw74gfwm7-crbgk"];
    assert_eq!(simulate_json(&[&config[..], &pod[..]].concat(), &[EXAMPLE]), simulate_json(&pod, &[EXAMPLE]));
}

/// The canary config: experimental pods go to canary nodes only, the rest
/// keep off them.
#[test]
fn canary_config_splits_pods_and_nodes() {
    let dir = scratch("canary");
    let yaml = std::fs::read_to_string(workspace_root().join(EXAMPLE)).unwrap()
        + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: trial, namespace: shop, labels: {scheduler-group: experimental}}\n\
           spec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]\n";
    let yaml = yaml.replace(
        "    kubernetes.io/hostname: cpu-c1\n",
        "    kubernetes.io/hostname: cpu-c1\n    scheduler-canary: enabled\n",
    );
    let file = write(&dir, "cluster.yaml", &yaml);
    let v = simulate_json(&["--config", "examples/canary-config.yaml"], &[&file]);
    for p in placements(&v) {
        let on_canary = p["node"] == "cpu-c1";
        assert_eq!(on_canary, p["pod"] == "shop/trial", "{p}");
    }
}

/// The GPU-pool config (the article's split with default-scheduler) keeps
/// our pods on the nodes labelled scheduler-group=gpu.
#[test]
fn gpu_pool_config_keeps_our_pods_on_the_pool() {
    let dir = scratch("gpu-pool");
    let mut yaml = std::fs::read_to_string(workspace_root().join(EXAMPLE)).unwrap();
    for gpu_node in ["a100-a1", "a100-b1", "t4-a1", "t4-c1"] {
        let host = format!("    kubernetes.io/hostname: {gpu_node}\n");
        yaml = yaml.replace(&host, &format!("{host}    scheduler-group: gpu\n"));
    }
    let file = write(&dir, "cluster.yaml", &yaml);
    let v = simulate_json(&["--config", "examples/gpu-pool-config.yaml"], &[&file]);
    let mut placed = 0;
    for p in placements(&v) {
        match p["node"].as_str() {
            Some(node) => {
                assert!(node.starts_with("a100-") || node.starts_with("t4-"), "{p}");
                placed += 1;
            }
            None => {
                let reason = p["reason"].as_str().unwrap();
                assert!(reason.contains("node(s) outside this profile's node pool"), "{reason}");
            }
        }
    }
    assert_eq!(placed, 7, "the training and inference pods; the web pods do not tolerate the GPU taint");
}

#[test]
fn gang_example_simulates_on_its_own() {
    // The PodGroup is read and the Job's four 8-GPU workers are placed
    // as one gang: four whole nodes, in one zone.
    let v = simulate_json(&[], &["examples/gang-training.yaml"]);
    let p = placements(&v);
    let workers: Vec<&str> = p.iter().filter_map(|x| x["pod"].as_str()).collect();
    assert_eq!(workers.len(), 4, "{v}");
    assert!(workers.iter().all(|w| w.starts_with("ml/pretrain-")), "{workers:?}");
    let nodes: std::collections::BTreeSet<&str> =
        p.iter().map(|x| x["node"].as_str().unwrap_or_else(|| panic!("unplaced: {x}"))).collect();
    assert_eq!(nodes.len(), 4, "one worker per 8-GPU node: {v}");
    // The PodGroup's topology key keeps the gang in the zone that holds it.
    assert!(nodes.iter().all(|n| n.starts_with("a100-b")), "all in eu-west-1b: {nodes:?}");
    assert_eq!(v["summary"]["ignoredObjects"], 0, "the PodGroup is read: {v}");
}

#[test]
fn preemption_example_evicts_the_batch_pod_not_the_budgeted_one() {
    let v = simulate_json(&["--explain", "ml/urgent-finetune"], &["examples/preemption.yaml"]);
    let find = |name: &str| placements(&v).iter().find(|p| p["pod"] == name).cloned().unwrap_or_default();
    assert_eq!(find("ml/urgent-finetune")["node"], "a100-1", "{v}");
    assert_eq!(
        v["preempted"],
        serde_json::json!([{"pod": "ml/nightly-batch", "node": "a100-1", "by": "ml/urgent-finetune"}])
    );
    assert_eq!(
        find("ml/polite-eval")["reason"],
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never."
    );
    let candidates = &v["explain"]["preemption"]["candidates"];
    assert_eq!(candidates[1]["node"], "a100-2");
    assert_eq!(candidates[1]["pdbViolations"], 1, "the serving replica's budget: {v}");
}

#[test]
fn queues_example_borrows_reclaims_and_waits_with_the_queues_reasons() {
    let v = simulate_json(&[], &["examples/queues.yaml"]);
    let placed = |prefix: &str| {
        placements(&v).iter().filter(|p| p["pod"].as_str().unwrap().starts_with(prefix) && !p["node"].is_null()).count()
    };
    // team-a borrowed 4 of team-b's 8; team-b's fifth pod took one back.
    assert_eq!((placed("research/sweep-"), placed("product/eval-")), (11, 5), "{v}");
    let preempted = v["preempted"].as_array().unwrap();
    assert_eq!(preempted.len(), 1, "{v}");
    assert!(preempted[0]["pod"].as_str().unwrap().starts_with("research/sweep-"), "{v}");
    assert!(preempted[0]["by"].as_str().unwrap().starts_with("product/eval-"), "{v}");
    let stray = placements(&v).iter().find(|p| p["pod"] == "product/stray").unwrap();
    assert!(
        stray["reason"].as_str().unwrap().starts_with("0/2 nodes are available: queue team-c does not exist."),
        "{v}"
    );
}

#[test]
fn spot_drain_example_shows_what_the_rebalancer_would_do_at_now() {
    let at = |now: &str| {
        let out = run(&["simulate", "--output", "json", "--now", now, "examples/spot-drain.yaml"]);
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout).unwrap()
    };
    let v = at("2026-01-01T12:00:00Z");
    let find = |name: &str| placements(&v).iter().find(|p| p["pod"] == name).cloned().unwrap_or_default();
    assert_eq!(find("shop/api")["node"], "on-demand-1", "the expiring node gets no new pod: {v}");
    let d = &v["spotDrain"];
    assert_eq!(d["taint"], serde_json::json!(["spot-1"]));
    assert_eq!(d["untaint"], serde_json::json!(["spot-2"]), "out of the window: the taint comes off");
    let evicted: Vec<String> = d["evict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pods"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect::<Vec<_>>().join("+"))
        .collect();
    assert_eq!(evicted, ["ml/train-0+ml/train-1", "shop/web-1", "shop/web-2"], "gang whole, then the replicas");
    assert!(d["evict"].as_array().unwrap().iter().all(|e| e["afterTaint"] == true), "{d}");
    let kept: Vec<&str> = d["kept"].as_array().unwrap().iter().map(|k| k["pod"].as_str().unwrap()).collect();
    assert_eq!(kept, ["kube-system/log-agent-x7k2p", "ml/checkpoint-sync"]);

    // An hour earlier neither spot node is within the window: nothing to
    // drain, only spot-2's stale taint to remove.
    let v = at("2026-01-01T11:00:00Z");
    assert_eq!(v["spotDrain"]["nodes"], serde_json::json!([]), "{v}");
    assert_eq!(v["spotDrain"]["evict"], serde_json::json!([]));
    // The table says the same.
    let out = run(&["simulate", "--now", "2026-01-01T12:00:00Z", "examples/spot-drain.yaml"]);
    let table = &out.stdout;
    assert!(
        table.contains("evict ml/train-0, ml/train-1 (gang ml/train, whole) from spot-1, after the taint"),
        "{table}"
    );
    assert!(table.contains("keep ml/checkpoint-sync on spot-1: annotated gpu-scheduler.io/do-not-evict"), "{table}");
}

// ------------------------------------------------------ what gets scheduled

#[test]
fn other_schedulers_pods_are_ignored_and_bound_pods_are_load() {
    let dir = scratch("foreign-and-bound");
    let pod = |name: &str, extra: &str, cpu: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{extra}  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\", memory: 1Gi}}}}}}]\n---\n"
        )
    };
    let yaml = [
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"10\"}}\n---\n"
            .to_string(),
        // Bound by someone else: 2 of the 4 cpus are taken.
        pod("running", "  nodeName: n1\n", "2"),
        // Pending, but not ours.
        pod("default-sched", "", "100m"),
        pod("explicit-default", "  schedulerName: default-scheduler\n", "100m"),
        pod("other", "  schedulerName: other-scheduler\n", "100m"),
        // Ours: only the 1-cpu pod fits next to the running one.
        pod("big", "  schedulerName: gpu-scheduler\n", "3"),
        pod("small", "  schedulerName: gpu-scheduler\n", "1"),
    ]
    .concat();
    let file = write(&dir, "cluster.yaml", &yaml);
    let v = simulate_json(&[], &[&file]);
    let mut pods: Vec<&str> = placements(&v).iter().map(|p| p["pod"].as_str().unwrap()).collect();
    pods.sort_unstable();
    assert_eq!(pods, ["default/big", "default/small"], "only our pending pods are reported");
    let find = |name: &str| placements(&v).iter().find(|p| p["pod"] == name).unwrap();
    assert_eq!(find("default/small")["node"], "n1");
    assert_eq!(find("default/big")["node"], Value::Null);
    assert_eq!(
        find("default/big")["reason"],
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    assert_eq!(v["summary"]["existingPods"], 1);
    assert_eq!(v["summary"]["otherSchedulerPods"], 3);
    let n1 = &v["nodes"][0];
    assert_eq!(n1["name"], "n1");
    assert_eq!(n1["cpuMillis"]["requested"], 3000, "the bound pod and ours; never the foreign ones");
    assert_eq!(n1["pods"]["count"], 2);

    let table = run(&["simulate", "--now", NOW, &file]).stdout;
    assert!(table.starts_with("Scheduled 1 of 2 pending pods (1 already running, 3 for other schedulers)."), "{table}");
}

#[test]
fn several_files_form_one_cluster() {
    let dir = scratch("several-files");
    let nodes = write(
        &dir,
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"2\", memory: 4Gi, pods: \"10\"}}\n",
    );
    let pods = write(
        &dir,
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x}]\n",
    );
    let v = simulate_json(&[], &[&nodes, &pods]);
    assert_eq!(placements(&v)[0]["pod"], "default/p");
    assert_eq!(placements(&v)[0]["node"], "n1");
}

/// Filtering and scoring run in parallel over nodes; the report must not
/// depend on how many threads do it.
#[test]
fn report_does_not_depend_on_thread_count() {
    let dir = scratch("threads");
    let mut yaml = String::new();
    for i in 0..200 {
        let zone = ["a", "b", "c"][i % 3];
        let taint =
            if i % 7 == 0 { "spec:\n  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n" } else { "" };
        let cpu = 2 + i % 5;
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i:03}\n  labels: {{kubernetes.io/hostname: node-{i:03}, topology.kubernetes.io/zone: {zone}, disk: {disk}}}\n{taint}status:\n  allocatable: {{cpu: \"{cpu}\", memory: {mem}Gi, pods: \"20\"}}\n---\n",
            disk = if i % 2 == 0 { "ssd" } else { "hdd" },
            mem = 4 + i % 9,
        ));
    }
    yaml.push_str(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  replicas: 150\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      schedulerName: gpu-scheduler\n      containers: [{name: c, image: web, resources: {requests: {cpu: 2500m, memory: 1Gi}}}]\n---\n",
    );
    for i in 0..60 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: job-{i}, namespace: default}}\nspec:\n  schedulerName: gpu-scheduler\n  nodeSelector: {{disk: ssd}}\n  tolerations: [{{key: dedicated, operator: Exists}}]\n  containers: [{{name: c, image: job, resources: {{requests: {{cpu: \"{cpu}\", memory: 2Gi}}}}}}]\n---\n",
            cpu = 1 + i % 3,
        ));
    }
    let file = write(&dir, "big.yaml", &yaml);
    let run_with = |threads: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
            .args(["simulate", "--output", "json", "--seed", "7", "--now", NOW, &file])
            .env("RAYON_NUM_THREADS", threads)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let one = run_with("1");
    let v: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(placements(&v).len(), 210);
    assert!(placements(&v).iter().any(|p| p["node"].is_null()), "some pods should not fit");
    assert_eq!(one, run_with("4"), "1 thread vs 4 threads");
}

/// examples/cel-rules-config.yaml writes the built-in Maintenance and
/// DiskType plugins as two CEL rules: the same placements as the default
/// profile, and `--explain` shows each rule's value on each node.
#[test]
fn cel_rules_example_places_like_the_builtin_plugins() {
    let config = ["--config", "examples/cel-rules-config.yaml"];
    let nodes = |v: &Value| placements(v).iter().map(|p| (p["pod"].clone(), p["node"].clone())).collect::<Vec<_>>();
    let cel = simulate_json(&config, &[EXAMPLE]);
    assert_eq!(nodes(&cel), nodes(&simulate_json(&[], &[EXAMPLE])));
    // The maintenance node (cpu-b2) gets no pod.
    assert!(placements(&cel).iter().all(|p| p["node"] != "cpu-b2"));

    let pod = ["--explain", "shop/web-8zw74gfwm7-crbgk"];
    let v = simulate_json(&[&config[..], &pod[..]].concat(), &[EXAMPLE]);
    let verdicts = v["explain"]["nodes"].as_array().unwrap();
    let detail = |node: &str, rule: &str| {
        let n = verdicts.iter().find(|n| n["node"] == node).unwrap();
        n["details"].as_array().unwrap().iter().find(|d| d["name"] == rule).map(|d| d["value"].clone())
    };
    // cpu-a2 has an SSD, cpu-a1 a spinning disk; both passed the filter rule.
    assert_eq!(detail("cpu-a2", "ssd-bonus"), Some(Value::from("100 (weight 1)")));
    assert_eq!(detail("cpu-a1", "ssd-bonus"), Some(Value::from("0 (weight 1)")));
    assert_eq!(detail("cpu-a1", "maintenance-mode"), Some(Value::from("true")));
    let b2 = verdicts.iter().find(|n| n["node"] == "cpu-b2").unwrap();
    assert_eq!(b2["plugin"], "CelRules");
    assert_eq!(b2["reasons"][0], "node(s) in maintenance mode");
}

/// A small openb trace: two 8-GPU nodes and a 2-GPU one; whole, shared,
/// multi-GPU and CPU-only pods.
const TRACE_NODES: &str =
    "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,96000,393216,8,G2\nn2,16000,122880,2,P100\n";
const TRACE_PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np0,12000,16384,1,1000,\np1,6000,12288,1,460,\np2,4000,8192,1,500,P100\np3,32000,65536,4,1000,\np4,4000,8192,0,0,\n";

/// `replay`: the JSON contract (DESIGN.md §1), the table, and a bad CSV
/// naming file, line and column with exit code 2.
#[test]
fn replay_reports_the_curve_and_rejects_bad_csv() {
    let dir = scratch("replay");
    let nodes = write(&dir, "nodes.csv", TRACE_NODES);
    let pods = write(&dir, "pods.csv", TRACE_PODS);
    let args = |output: &'static str| {
        vec!["replay", "--format", "openb", "--nodes", &nodes, "--pods", &pods, "--seed", "7", "--output", output]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let json = run(&args("json").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["gpus_total"].as_i64(), Some(18));
    // 1.3 × 18 GPUs asked: the five pods and copies up to 23.4 GPUs, not all of which fit.
    let (replayed, placed) = (v["pods"].as_u64().unwrap(), v["placed"].as_u64().unwrap());
    assert!(replayed > 5 && placed < replayed, "{replayed} {placed}");
    let curve = v["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 131, "every percent from 0 to 130");
    for (i, p) in curve.iter().enumerate() {
        assert_eq!(p["arrived_pct"].as_u64(), Some(i as u64));
        let (a, f) = (p["allocated_pct"].as_f64().unwrap(), p["fragmentation_pct"].as_f64().unwrap());
        assert!((0.0..=100.0).contains(&a) && (0.0..=100.0).contains(&f), "{p}");
    }
    let table = run(&args("table").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(table.stdout.starts_with("Replayed ") && table.stdout.contains("ARRIVED  ALLOCATED"), "{}", table.stdout);

    let bad = write(&dir, "bad.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,lots,8,G2\n");
    let out = run(&["replay", "--format", "openb", "--nodes", &bad, "--pods", &pods]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("bad.csv:2: column memory_mib: \"lots\" is not an integer"), "{}", out.stderr);
    let out = run(&["replay", "--format", "openb", "--nodes", &nodes, "--pods", &pods, "--inflate", "0"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
}

/// `replay --timed`: the `wait` object in JSON, forecast off and on side
/// by side with `--compare`, every pod's placement with `--placements`,
/// and a pod list without arrival times refused with exit code 2.
#[test]
fn timed_replay_reports_waits() {
    let trace = ["replay", "--timed", "--format", "openb", "--nodes", "bench/forecast/nodes.csv"];
    let pods = ["--pods", "bench/forecast/pods.csv"];
    let on = ["--config", "examples/forecast-on.yaml", "--output", "json"];
    let out = run(&[&trace[..], &pods[..], &on[..]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((v["pods"].as_u64(), v["wait"]["never_placed"].as_u64()), (Some(960), Some(0)));
    let ml = &v["wait"]["queues"]["ml"];
    assert_eq!(ml["pods"].as_u64(), Some(60));
    assert!(ml["mean_s"].as_f64().unwrap() <= ml["p95_s"].as_f64().unwrap(), "{ml}");
    let holds = v["forecast_holds"].as_array().unwrap();
    assert!(
        holds.iter().any(|h| h["forecast"].as_str().unwrap().starts_with("queue ml, 1-GPU pods: 12 expected")),
        "{holds:?}"
    );

    let compare = ["--compare", "examples/forecast-off.yaml", "examples/forecast-on.yaml"];
    let out = run(&[&trace[..], &pods[..], &compare[..]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let row = out.stdout.lines().find(|l| l.trim_start().starts_with("queue ml")).unwrap_or_default().to_string();
    assert_eq!(row.matches(" s / ").count(), 2, "mean / p95 for each config: {}", out.stdout);

    let dir = scratch("timed");
    // --placements: every pod, where and when it ran, agreeing with the
    // JSON's totals (the live replay's prediction reads this file).
    let file = dir.join("placements.csv");
    let placements = ["--placements", file.to_str().unwrap()];
    let out = run(&[&trace[..], &pods[..], &on[..], &placements[..]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let csv = std::fs::read_to_string(&file).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("pod,node,arrival_s,start_s,end_s"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 960);
    let placed = rows.iter().filter(|r| !r[1].is_empty()).count();
    assert_eq!(Some(placed as u64), v["placed"].as_u64());
    for r in &rows {
        let (arrival, start): (f64, f64) = (r[2].parse().unwrap(), r[3].parse().unwrap_or(f64::INFINITY));
        assert!(start >= arrival, "a pod starts after it arrives: {r:?}");
        if let Ok(end) = r[4].parse::<f64>() {
            assert!(end > start, "{r:?}");
        }
    }
    let out = run(&[&trace[..], &pods[..], &compare[..], &placements[..]].concat());
    assert_eq!(out.code, Some(2), "--placements is for one run, not --compare: {}", out.stderr);

    let untimed = write(&dir, "pods.csv", TRACE_PODS);
    let out = run(&[&trace[..], &["--pods", &untimed][..]].concat());
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("pod p0 has no creation_time"), "{}", out.stderr);
}

/// Headless Chromium (Debian's `chromium`, which `.ci/run` installs).
fn chromium() -> String {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .unwrap_or_else(|| panic!("headless Chromium is needed to check the HTML report: apt-get install chromium"))
        .to_string()
}

/// Renders `page` in headless Chromium: its DOM after loading, and a
/// screenshot.
fn render(dir: &Path, page: &Path) -> (String, Vec<u8>) {
    let url = format!("file://{}", page.display());
    let browser = |extra: &[String]| {
        let out = Command::new(chromium())
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            .args(["--disable-component-update", "--disable-sync", "--no-first-run"])
            .arg(format!("--user-data-dir={}", dir.join("chromium-profile").display()))
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let dom = String::from_utf8(browser(&["--dump-dom".to_string()]).stdout).unwrap();
    let png = dir.join("report.png");
    browser(&["--window-size=1000,1200".to_string(), format!("--screenshot={}", png.display())]);
    (dom, std::fs::read(&png).unwrap())
}

/// `simulate --compare A B --report FILE.html`: the table, and a page
/// whose charts a browser renders (one curve and one heat strip per
/// configuration, a cell per GPU node).
#[test]
fn compare_with_an_html_report_renders_in_a_browser() {
    let dir = scratch("report");
    let page = dir.join("report.html");
    let page_arg = page.to_string_lossy().into_owned();
    let out = run(&[
        "simulate",
        "--now",
        NOW,
        "--compare",
        "examples/config.yaml",
        "examples/gpu-binpack-config.yaml",
        "examples/gpu-sharing.yaml",
        "--report",
        &page_arg,
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].contains("examples/config.yaml") && lines[0].contains("examples/gpu-binpack-config.yaml"));
    let allocated: Vec<f64> =
        lines[1].split_whitespace().filter_map(|c| c.strip_suffix('%')).map(|c| c.parse().unwrap()).collect();
    assert!(allocated[0] > allocated[1], "fragmentation places more GPU work than binpack here: {}", out.stdout);

    let (dom, png) = render(&dir, &page);
    assert_eq!(dom.matches("<polyline class=\"curve\"").count(), 2, "{dom}");
    assert_eq!(dom.matches("class=\"heat-strip\"").count(), 2);
    assert_eq!(dom.matches("<rect class=\"node\"").count(), 12, "six GPU nodes, two configurations");
    assert!(dom.contains("<table id=\"summary\">"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot with something on it: {} bytes",
        png.len()
    );
}

/// GPUs through DRA: claims from templates allocated on the nodes whose
/// slices have the devices, a claim shared by two pods on one node, a job
/// whose claim fits nowhere explained, and the allocation in `--explain`.
#[test]
fn dra_claims_are_allocated_shared_and_explained() {
    let v = simulate_json(&["--explain", "ml/serve-0"], &["examples/dra-gpus.yaml"]);
    let node = |pod: &str| {
        placements(&v).iter().find(|p| p["pod"] == pod).unwrap_or_else(|| panic!("{pod} placed?"))["node"].clone()
    };
    let train = node("ml/train-0");
    assert!(train == "a100-1" || train == "a100-2", "four A100s: {train}");
    assert_eq!(node("ml/notebook-0"), node("ml/notebook-1"), "one shared claim, one node");
    assert_ne!(node("ml/notebook-0"), Value::Null);
    assert_eq!(node("ml/train-1"), Value::Null);
    let reason = placements(&v).iter().find(|p| p["pod"] == "ml/train-1").unwrap()["reason"].as_str().unwrap();
    assert!(reason.contains("cannot allocate all claims"), "{reason}");
    let details = v["explain"]["nodes"][0]["details"].as_array().expect("details");
    let claim = details.iter().find(|d| d["plugin"] == "DynamicResources").expect("the allocation is explained");
    assert_eq!(claim["name"], "claim serve-0-gpu");
    assert!(claim["value"].as_str().unwrap().contains("=gpu.nvidia.com/"), "{claim}");
}

/// A pod naming a ResourceClaimTemplate that does not exist: an error
/// naming the pod's field, not a crash or a silent pending pod.
#[test]
fn a_missing_claim_template_is_named() {
    let dir = std::env::temp_dir().join(format!("gs-dra-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pod.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: i}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: nope}]\n",
    )
    .unwrap();
    let out = run(&["simulate", &file.to_string_lossy()]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("spec.resourceClaims[0].resourceClaimTemplateName")
            && out.stderr.contains("no ResourceClaimTemplate named \"nope\""),
        "{}",
        out.stderr
    );
}

#[test]
fn kinds_it_does_not_read_are_named_in_warnings() {
    let dir = scratch("unknown-kinds");
    let file = write(
        &dir,
        "app.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
    );
    let out = run(&["simulate", "--output", "json", "--now", NOW, &file]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    assert_eq!(v["summary"]["ignoredObjects"], 2, "{v}");
    let warnings: Vec<&str> =
        v["warnings"].as_array().map(|w| w.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    for (doc, label) in [("document 1", "ConfigMap settings"), ("document 2", "Widget w")] {
        assert!(
            warnings.iter().any(|w| w.contains(doc) && w.contains(label) && w.contains("ignored")),
            "{label}: {warnings:?}"
        );
        assert!(out.stderr.contains(label), "said on stderr too: {}", out.stderr);
    }
}
