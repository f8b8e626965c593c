//! Hostile numbers (docs/RELIABILITY.md, "Hostile numbers"): every number
//! and duration of the configuration, and every annotation the scheduler
//! reads a number, a time or an index from, set in turn to extreme values
//! (`engine::testing::extremes`) and taken through `check-config`,
//! `simulate` and what `run` does with a reloaded file. Nothing may panic;
//! a refused configuration exits 2 and its error names the field.
//!
//! The fields come from `hostile/every-field.yaml`, which sets every field
//! of the configuration; serde itself says which fields exist (the
//! unknown-field error lists them), so a field added to the structs but
//! not to the file fails `every_field_is_in_the_fixture`.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use gpu_scheduler::App;
use gpu_scheduler::engine::config::{Configuration, go_duration};
use gpu_scheduler::engine::scheduler::{CycleOutcome, Scheduler};
use gpu_scheduler::engine::testing::extremes;
use gpu_scheduler::engine::{convert, framework::Status};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;
use serde_json::Value;

const FIXTURE: &str = include_str!("hostile/every-field.yaml");
const NOW: &str = "2026-01-01T00:00:00Z";
const NOW_MS: u64 = 1_767_225_600_000;
/// Stands for the value under test in the YAML written.
const HOLE: &str = "HOSTILEVALUE";

/// One place a value goes: its path in the fixture and how it is written.
#[derive(Debug, Clone)]
struct Field {
    path: Vec<Step>,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Duration,
}

impl Field {
    /// As the configuration's errors name it: `profiles[0].pluginConfig[2].args.margin`.
    fn name(&self) -> String {
        render(&self.path)
    }

    fn key(&self) -> &str {
        self.path.iter().rev().find_map(|s| if let Step::Key(k) = s { Some(k.as_str()) } else { None }).unwrap_or("")
    }
}

fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => out.push_str(&format!(".{k}")),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The fixture as a tree (parsed once: YAML is slow to parse in a debug build).
fn fixture() -> Value {
    static TREE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    TREE.get_or_init(|| serde_yaml_ng::from_str(FIXTURE).expect("the fixture is YAML")).clone()
}

fn at<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(v, |v, s| match s {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// Every object (with its path) and every number or duration leaf.
fn walk(v: &Value, path: &mut Vec<Step>, objects: &mut Vec<Vec<Step>>, fields: &mut Vec<Field>) {
    match v {
        Value::Object(m) => {
            objects.push(path.clone());
            for (k, child) in m {
                path.push(Step::Key(k.clone()));
                walk(child, path, objects, fields);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                path.push(Step::Index(i));
                walk(child, path, objects, fields);
                path.pop();
            }
        }
        Value::Number(_) => fields.push(Field { path: path.clone(), kind: Kind::Number }),
        Value::String(s) if go_duration::parse(s).is_ok() => {
            fields.push(Field { path: path.clone(), kind: Kind::Duration })
        }
        _ => {}
    }
}

fn fields_and_objects() -> (Vec<Field>, Vec<Vec<Step>>) {
    let (mut objects, mut fields) = (Vec::new(), Vec::new());
    walk(&fixture(), &mut Vec::new(), &mut objects, &mut fields);
    (fields, objects)
}

/// The smallest part of the fixture that holds `field`: its top-level
/// section whole (fields checked against each other stay together), and
/// under `profiles` only the profile's part that holds it (one
/// `pluginConfig` entry). Every other setting keeps its default, so each
/// case builds a small configuration: the sweep takes seconds. Returns
/// the document and the field's path in it.
fn part_for(field: &Field) -> (Value, Vec<Step>) {
    static TREE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let full = TREE.get_or_init(fixture);
    let mut doc = serde_json::json!({"apiVersion": full["apiVersion"], "kind": full["kind"]});
    let mut path = field.path.clone();
    let top = match &path[0] {
        Step::Key(k) => k.clone(),
        Step::Index(_) => unreachable!("the fixture is a mapping"),
    };
    if top != "profiles" {
        doc[&top] = full[&top].clone();
        return (doc, path);
    }
    let (Step::Index(i), Step::Key(key)) = (path[1].clone(), path[2].clone()) else {
        unreachable!("profiles[i].field")
    };
    let profile = &full["profiles"][i];
    let mut part = serde_json::json!({"schedulerName": profile["schedulerName"]});
    part[&key] = match (key.as_str(), path.get(3)) {
        ("pluginConfig", Some(&Step::Index(j))) => {
            let entry = profile["pluginConfig"][j].clone();
            path[3] = Step::Index(0);
            Value::Array(vec![entry])
        }
        _ => profile[&key].clone(),
    };
    path[1] = Step::Index(0);
    doc["profiles"] = Value::Array(vec![part]);
    (doc, path)
}

/// The part of the fixture that holds `field`, with `value` (YAML, as
/// written) in its place, and the field's path as errors name it.
fn with_value(field: &Field, value: &str) -> (String, String) {
    let (mut doc, path) = part_for(field);
    *at(&mut doc, &path) = Value::String(HOLE.into());
    // JSON is YAML, and quicker to write.
    let text = doc.to_string();
    let hole = format!("\"{HOLE}\"");
    assert_eq!(text.matches(&hole).count(), 1, "the hole is written once");
    (text.replace(&hole, value), render(&path))
}

/// What each field is tried with: its own kind's extremes, and the other
/// kind's spelled as the wrong type.
fn values_for(kind: Kind) -> Vec<String> {
    let quoted = |s: &&str| serde_json::to_string(s).expect("a JSON string is YAML");
    match kind {
        Kind::Number => extremes::NUMBERS
            .iter()
            .map(|s| s.to_string())
            .chain(["\"18446744073709551616s\"".to_string(), "\"1e308\"".to_string()])
            .collect(),
        Kind::Duration => extremes::DURATIONS
            .iter()
            .map(quoted)
            .chain(["1e308", ".nan", "-1", "18446744073709551616"].map(String::from))
            .collect(),
    }
}

/// A scratch directory of this test binary.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile_numbers").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Two nodes of the fixture's pool, a pod bound to one, and two pending
/// pods of the fixture profile (`team: ml`); `node` and `pod` annotations
/// go on the GPU node and on both GPU pods.
fn manifests(node_annotations: &Value, pod_annotations: &Value, node_labels: &Value) -> String {
    let mut labels = serde_json::json!({"pool": "gpu", "gpu-model": "a100", "topology.kubernetes.io/zone": "a"});
    if let (Some(l), Some(extra)) = (labels.as_object_mut(), node_labels.as_object()) {
        l.extend(extra.clone());
    }
    format!(
        r#"apiVersion: v1
kind: Node
metadata: {{name: gpu-1, labels: {labels}, annotations: {node_annotations}}}
status:
  capacity: {{cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}}
  allocatable: {{cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Node
metadata: {{name: cpu-1, labels: {{pool: gpu, topology.kubernetes.io/zone: b}}}}
status:
  allocatable: {{cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {{name: running, namespace: ml, uid: running-uid, labels: {{team: ml}}, annotations: {pod_annotations}}}
spec:
  nodeName: gpu-1
  schedulerName: gpu-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}, limits: {{nvidia.com/gpu: "1"}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: train, namespace: ml, uid: train-uid, labels: {{team: ml, app: train}}, annotations: {pod_annotations}}}
spec:
  schedulerName: gpu-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}, limits: {{nvidia.com/gpu: "1"}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: ml, uid: web-uid, labels: {{team: ml, app: web}}}}
spec:
  schedulerName: gpu-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}}}]
"#
    )
}

/// One more GPU node of the pool per value, with `key` set to it.
fn extra_nodes(key: &str, object: Object, values: &[&str]) -> String {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut labels = serde_json::json!({"pool": "gpu", "gpu-model": "a100"});
            let mut annotations = serde_json::json!({});
            let set = if object == Object::NodeLabel { &mut labels } else { &mut annotations };
            set[key] = Value::from(*v);
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: x-{i}, labels: {labels}, annotations: {annotations}}}\n\
                 status:\n  allocatable: {{cpu: \"8\", memory: 32Gi, pods: \"110\", nvidia.com/gpu: \"4\"}}\n"
            )
        })
        .collect()
}

fn plain_manifests() -> String {
    let spot = serde_json::json!({"gpu-scheduler.io/spot-expiry": "2026-01-01T00:10:00Z"});
    manifests(&spot, &serde_json::json!({}), &serde_json::json!({}))
}

/// What went wrong, one line per case.
#[derive(Default)]
struct Failures(Mutex<Vec<String>>);

impl Failures {
    fn add(&self, line: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    /// Records a panic or an error of the step `what` of `case`.
    fn outcome(&self, case: &str, what: &str, result: Result<Result<(), String>, String>) {
        match result {
            Err(p) => self.add(format!("{case}: {what} panicked: {p}")),
            Ok(Err(e)) => self.add(format!("{case}: {what} failed: {e}")),
            Ok(Ok(())) => {}
        }
    }

    fn check(self, what: &str) {
        let list = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        assert!(list.is_empty(), "{what}: {} failures:\n{}", list.len(), list.join("\n"));
    }
}

/// `f` run with a panic caught and reported as text.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into())
    })
}

/// Runs `cases` on every core, each with a file name of its own (a file
/// rewritten in place costs a flush on ext4), removed at the end.
fn in_parallel<C: Sync>(cases: &[C], dir: &Path, run: impl Fn(&C, &Path) + Sync) {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(cases.len().max(1));
    let chunk = cases.len().div_ceil(workers).max(1);
    std::thread::scope(|s| {
        for (w, part) in cases.chunks(chunk).enumerate() {
            let run = &run;
            s.spawn(move || {
                for (i, c) in part.iter().enumerate() {
                    run(c, &dir.join(format!("{}.yaml", w * chunk + i)));
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(dir);
}

/// A scheduler as `run` starts it without a file (the default
/// configuration), with the cluster of [`manifests`] in its cache.
fn live_scheduler(manifest: &str) -> Result<Scheduler, String> {
    let cfg = Configuration::default();
    let profiles = gpu_scheduler::engine::profile::build_profiles(
        &cfg,
        &gpu_scheduler::plugins::registry(),
        &gpu_scheduler::plugins::default_plugins(),
    )
    .map_err(|e| e.to_string())?;
    let mut s = Scheduler::new(&cfg, profiles, 1).map_err(|e| e.to_string())?;
    feed(&mut s, manifest);
    Ok(s)
}

/// The manifests' nodes and pods given to `s` as the watches give them
/// (converted by the same functions); unreadable objects are skipped, as
/// the watches skip them.
fn feed(s: &mut Scheduler, manifest: &str) {
    for doc in serde_yaml_ng::Deserializer::from_str(manifest) {
        let Ok(v) = serde_json::Value::deserialize(doc) else { continue };
        match v["kind"].as_str() {
            Some("Node") => {
                if let Ok(n) = serde_json::from_value::<Node>(v)
                    && let Ok(n) = convert::node_from_k8s(&n)
                {
                    s.on_node_upsert(n, NOW_MS);
                }
            }
            Some("Pod") => {
                if let Ok(p) = serde_json::from_value::<Pod>(v)
                    && let Ok(p) = convert::pod_from_k8s(&p)
                {
                    s.on_pod_upsert(p, NOW_MS);
                }
            }
            _ => {}
        }
    }
}

/// Scheduling cycles until none is ready, bindings reported successful.
fn drain(s: &mut Scheduler, now: u64) -> usize {
    let mut placed = 0;
    for _ in 0..20 {
        let Some(outcome) = s.schedule_one(now) else { break };
        if let CycleOutcome::Assumed(task) = outcome {
            placed += 1;
            s.finish_binding(*task, &Status::success(), now);
        }
    }
    s.expire_assumed_pods(now);
    placed
}

#[test]
fn the_fixture_and_its_parts_are_valid() {
    let load = App::new().config_loader();
    let loaded = load(FIXTURE).unwrap_or_else(|e| panic!("the fixture is refused: {e}"));
    assert_eq!(loaded.config.profiles.len(), 1);
    let (fields, _) = fields_and_objects();
    assert!(fields.len() > 50, "only {} numbers and durations found", fields.len());
    for f in &fields {
        let (doc, _) = part_for(f);
        let text = serde_yaml_ng::to_string(&doc).expect("YAML");
        if let Err(e) = load(&text) {
            panic!("the part of the fixture holding {} is refused: {e}\n{text}", f.name());
        }
    }
}

/// serde lists a struct's fields in its unknown-field error: for each
/// object of the fixture, one probe field is added and every field the
/// error lists must already be there. Objects that take any key (label
/// maps, weights by plugin name) accept the probe or refuse it otherwise.
/// Fields no valid configuration sets, so absent from the fixture.
const NEVER_SET: &[(&str, &str)] = &[(
    "profiles[].pluginConfig[].args.defaultConstraints[].labelSelector",
    "kube-scheduler refuses a selector in default constraints (it is the pod's controller's)",
)];

/// A path with its indices dropped: the struct a value is, wherever it sits.
fn shape(path: &[Step]) -> String {
    render(
        &path
            .iter()
            .map(|s| if let Step::Index(_) = s { Step::Index(usize::MAX) } else { s.clone() })
            .collect::<Vec<_>>(),
    )
    .replace(&format!("[{}]", usize::MAX), "[]")
}

#[test]
fn every_field_is_in_the_fixture() {
    let load = App::new().config_loader();
    let (_, objects) = fields_and_objects();
    // The keys set for each struct, over all its places (two extenders,
    // two rules: one sets what the other cannot).
    let mut have: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for path in &objects {
        let mut doc = fixture();
        let keys = at(&mut doc, path).as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        have.entry(shape(path)).or_default().extend(keys);
    }
    let mut structs = 0;
    let mut missing = BTreeSet::new();
    for path in &objects {
        let mut doc = fixture();
        let Some(obj) = at(&mut doc, path).as_object_mut() else { continue };
        obj.insert("zzProbe".into(), Value::from(0));
        let text = serde_yaml_ng::to_string(&doc).expect("YAML");
        let Err(e) = load(&text) else { continue };
        let Some((_, expected)) = e.split_once("unknown field `zzProbe`") else { continue };
        structs += 1;
        let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let set = &have[&shape(path)];
        for n in names {
            let field = format!("{}.{n}", shape(path));
            if !set.contains(n) && !NEVER_SET.iter().any(|(f, _)| *f == field) {
                missing.insert(field);
            }
        }
    }
    assert!(structs > 30, "only {structs} structs probed");
    eprintln!("completeness: {structs} objects of the fixture probed, each with every field its struct has");
    assert!(missing.is_empty(), "fields missing from tests/hostile/every-field.yaml: {missing:#?}");
}

/// Whether `error` names the field at `path` (its path, or for a rule
/// between two fields, such as leaseDuration > renewDeadline, its name).
fn names(error: &str, path: &str, field: &Field) -> bool {
    error.contains(path) || error.contains(field.key())
}

/// Whether `error` says what is allowed: a range (of the field, or of its
/// type when the value is not even of that type), a rule between fields,
/// or the format.
fn states_what_is_allowed(error: &str) -> bool {
    const WORDS: &[&str] = &[
        "from ",
        " in [",
        " in (",
        "valid range",
        "at most",
        "at least",
        "between",
        "greater than",
        "above",
        "must be 1",
        "sorted",
        "whole number of hours",
        "invalid duration",
        "must not be negative",
        "(a number)",
        "expected a string",
    ];
    WORDS.iter().any(|w| error.contains(w))
}

#[test]
fn every_config_number_and_duration_at_its_extremes() {
    let app = App::new();
    let load = app.config_loader();
    let dir = scratch("config");
    let cluster = dir.join("cluster.yaml");
    std::fs::write(&cluster, plain_manifests()).expect("manifests");
    let (fields, _) = fields_and_objects();
    let cases: Vec<(Field, String)> =
        fields.iter().flat_map(|f| values_for(f.kind).into_iter().map(move |v| (f.clone(), v))).collect();
    let failures = Failures::default();
    let counts = Mutex::new([0usize; 3]);
    in_parallel(&cases, &dir, |(field, value), file| {
        let case = format!("{} = {value}", field.name());
        let (text, path_in_part) = with_value(field, value);
        std::fs::write(file, &text).expect("config file");
        let path = file.to_string_lossy().into_owned();
        let mut out = Vec::new();
        let checked = guarded(|| app.run_with_output(["gpu-scheduler", "check-config", &path], &mut out));
        let accepted = match checked {
            Ok(c) if c == ExitCode::SUCCESS => true,
            Ok(c) if c == ExitCode::from(2) => false,
            Ok(c) => return failures.add(format!("{case}: check-config exited {c:?}")),
            Err(p) => return failures.add(format!("{case}: check-config panicked: {p}")),
        };
        // The loader `run` uses at start and for every reload.
        let loaded = match guarded(|| load(&text)) {
            Err(p) => return failures.add(format!("{case}: loading panicked: {p}")),
            Ok(Err(e)) if accepted => return failures.add(format!("{case}: check-config passed, loading failed: {e}")),
            Ok(Err(e)) if !names(&e, &path_in_part, field) => {
                return failures.add(format!("{case}: the error names another field: {e}"));
            }
            Ok(Err(e)) if !states_what_is_allowed(&e) => {
                return failures.add(format!("{case}: the error does not say what is allowed: {e}"));
            }
            Ok(Err(_)) => None,
            Ok(Ok(_)) if !accepted => return failures.add(format!("{case}: check-config failed, loading passed")),
            Ok(Ok(l)) => Some(l),
        };
        let cluster = cluster.to_string_lossy();
        let args = ["gpu-scheduler", "simulate", "--config", &path, "--now", NOW, "--output", "json", &cluster];
        let mut out = Vec::new();
        match guarded(|| app.run_with_output(args, &mut out)) {
            Err(p) => return failures.add(format!("{case}: simulate panicked: {p}")),
            Ok(c) if c != ExitCode::from(if accepted { 0 } else { 2 }) => {
                return failures.add(format!("{case}: simulate exited {c:?}, check-config {accepted}"));
            }
            Ok(_) if accepted => {
                let json: Value = serde_json::from_slice(&out).unwrap_or_default();
                if json["placements"].as_array().is_none_or(|p| p.len() != 2) {
                    return failures.add(format!("{case}: simulate placed not both pods: {json}"));
                }
            }
            Ok(_) => {}
        }
        // A reload: a refused file leaves the scheduler as it is (`run`
        // records an Event); an accepted one is applied between cycles.
        if let Some(l) = loaded {
            let reload = guarded(|| -> Result<(), String> {
                // What `run` builds from the file before it connects (the
                // review's tiny qps overflowed here).
                let _ = live::client::RateLimit::new(&l.config.client_connection);
                let mut s = live_scheduler(&plain_manifests())?;
                s.reconfigure(&l.config, l.profiles, l.extenders, NOW_MS).map_err(|e| e.to_string())?;
                drain(&mut s, NOW_MS + 10_000);
                Ok(())
            });
            failures.outcome(&case, "reload", reload);
        }
        let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
        c[usize::from(accepted)] += 1;
        c[2] += 1;
    });
    let [refused, accepted, all] = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    let durations = fields.iter().filter(|f| f.kind == Kind::Duration).count();
    eprintln!(
        "config sweep: {} fields ({} numbers, {durations} durations) x their values = {all} configurations, \
         {accepted} accepted and simulated, {refused} refused (exit 2), each through check-config, simulate and a reload",
        fields.len(),
        fields.len() - durations,
    );
    failures.check("config sweep");
}

/// The annotations (and the one label) the scheduler reads a number, a
/// time or a device index from, and where: kept in step with the engine by
/// `every_numeric_annotation_is_swept`.
const FACTS: &[(&str, Object)] = &[
    ("gpu-scheduler.io/spot-expiry", Object::Node),
    ("gpu-scheduler.io/last-hardware-alert", Object::Node),
    ("gpu-scheduler.io/temperature-celsius", Object::Node),
    ("nvidia.com/gpu.memory", Object::NodeLabel),
    ("gpu-scheduler.io/gpu-milli", Object::Pod),
    ("gpu-scheduler.io/gpu-memory-mib", Object::Pod),
    ("gpu-scheduler.io/gpu-index", Object::Pod),
    ("alibabacloud.com/gpu-milli", Object::Pod),
    ("alibabacloud.com/gpu-count", Object::Pod),
    ("alibabacloud.com/gpu-card-model", Object::Pod),
    ("gpu-scheduler.io/do-not-evict", Object::Pod),
];

/// Annotations of the engine (and the crates below it) that hold no
/// number (nothing to sweep).
const NOT_NUMBERS: &[&str] = &[
    // A label key, read as text.
    "gpu-scheduler.io/topology-key",
    // Written by provisioners, read as a node name.
    "volume.kubernetes.io/selected-node",
    // The kubelet's mirror pods; only its presence counts.
    "kubernetes.io/config.mirror",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    Node,
    NodeLabel,
    Pod,
}

#[test]
fn every_numeric_annotation_is_swept() {
    // The engine and the crates below it, where annotations are read.
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = BTreeSet::new();
    let mut dirs: Vec<_> = ["model", "state", "engine"].iter().map(|c| crates.join(c).join("src")).collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("engine sources").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                for line in text.lines().map(str::trim) {
                    if let Some(rest) = line.strip_prefix("pub const ANNOTATION_")
                        && let Some(value) = rest.split('"').nth(1)
                    {
                        found.insert(value.to_string());
                    }
                }
            }
        }
    }
    assert!(found.len() >= 10, "only {} annotations found: {found:?}", found.len());
    let known: BTreeSet<String> =
        FACTS.iter().map(|(k, _)| k.to_string()).chain(NOT_NUMBERS.iter().map(|k| k.to_string())).collect();
    let unswept: Vec<&String> = found.difference(&known).collect();
    assert!(unswept.is_empty(), "annotations of the engine missing from FACTS or NOT_NUMBERS: {unswept:?}");
}

#[test]
fn every_fact_annotation_at_its_extremes() {
    let app = App::new();
    let dir = scratch("facts");
    // The default profile, with the spot rebalancer's plan and the
    // forecast on: they read expiries and GPU requests too.
    let config = dir.join("config.yaml");
    let text = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n\
                spotDrain: {enabled: true, dryRun: true}\nforecast: {enabled: true}\n";
    std::fs::write(&config, text).expect("config");
    let values: Vec<&str> = extremes::all()
        .chain(["0-7", "7-0", "0-18446744073709551616", "0,1", "1000", "1001", "a100|t4", "", " ", "true"])
        .collect();
    // A pod's refused annotation refuses the whole input: one value a
    // cluster. Nodes are read one by one: 16 values a cluster, each on a
    // node of its own, for speed.
    let cases: Vec<(&str, Object, Vec<&str>)> = FACTS
        .iter()
        .flat_map(|&(k, o)| {
            let per = if o == Object::Pod { 1 } else { 16 };
            values.chunks(per).map(move |c| (k, o, c.to_vec()))
        })
        .collect();
    let failures = Failures::default();
    in_parallel(&cases, &dir, |(key, object, values), file| {
        let case = format!("{key} = {values:?}");
        let none = serde_json::json!({});
        let manifest = match object {
            Object::Pod => manifests(&none, &serde_json::json!({ *key: values[0] }), &none),
            _ => manifests(&none, &none, &none) + &extra_nodes(key, *object, values),
        };
        std::fs::write(file, &manifest).expect("manifests");
        let (config, file) = (config.to_string_lossy(), file.to_string_lossy());
        let args = ["gpu-scheduler", "simulate", "--config", &config, "--now", NOW, "--output", "json", &file];
        let mut out = Vec::new();
        match guarded(|| app.run_with_output(args, &mut out)) {
            Err(p) => failures.add(format!("{case}: simulate panicked: {p}")),
            // A pod whose annotation is refused is an error naming it (exit
            // 1); a node's unreadable fact is only a warning (DESIGN.md §4).
            Ok(c) if c != ExitCode::SUCCESS && (*object != Object::Pod || c != ExitCode::from(1)) => {
                failures.add(format!("{case}: simulate exited {c:?}"))
            }
            Ok(_) => {}
        }
        let live = guarded(|| -> Result<(), String> {
            let mut s = live_scheduler(&manifest)?;
            drain(&mut s, NOW_MS);
            // Later: alerts age out, expiries pass, assumed pods expire.
            drain(&mut s, NOW_MS + 86_400_000);
            Ok(())
        });
        failures.outcome(&case, "the live path", live);
    });
    eprintln!(
        "annotation sweep: {} annotations x {} values = {} cases in {} clusters, each through simulate and the live path",
        FACTS.len(),
        values.len(),
        FACTS.len() * values.len(),
        cases.len()
    );
    failures.check("annotation sweep");
}

/// The fuzz seeds and the fuzzer's dictionary made of the extremes, by
/// file under `fuzz/`: the fuzz targets start from these (a fuzzer grows
/// "15s" into "100000000000000000000h" only by luck).
fn fuzz_files() -> std::collections::BTreeMap<String, String> {
    let mut files = std::collections::BTreeMap::new();
    let mut add = |target: &str, i: usize, ext: &str, text: String| {
        files.insert(format!("seeds/{target}/hostile-{i:02}{ext}"), text);
    };
    let (fields, _) = fields_and_objects();
    let (numbers, durations): (Vec<_>, Vec<_>) = fields.into_iter().partition(|f| f.kind == Kind::Number);
    // Each extreme in a field of its kind, the fields taken in turn.
    let config = values_for(Kind::Duration)
        .into_iter()
        .enumerate()
        .map(|(i, v)| with_value(&durations[i % durations.len()], &v).0)
        .chain(
            values_for(Kind::Number)
                .into_iter()
                .enumerate()
                .map(|(i, v)| with_value(&numbers[i % numbers.len()], &v).0),
        );
    for (i, text) in config.enumerate() {
        add("config", i, ".yaml", text);
    }
    let mig = ["9Ei", "16Ei", "9223372036854775807m", "1e308", "1E-320", "1e2147483648", "0.0000000001n"];
    for (i, v) in extremes::NUMBERS.iter().chain(&mig).enumerate() {
        add("quantity", i, "", v.to_string());
    }
    let facts: Vec<&str> = extremes::NUMBERS.iter().chain(extremes::TIMESTAMPS).copied().collect();
    for (i, v) in extremes::NUMBERS.iter().enumerate() {
        let sample = serde_json::json!({"metric": {"node": "a"}, "value": [1_700_000_000.5, v]});
        let body = serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": [sample]}});
        add("prometheus", i, ".json", body.to_string());
        add("extender", i, ".json", format!(r#"[{{"Host": "n1", "Score": {v}}}, {{"Host": "n2", "Score": 10}}]"#));
        add(
            "pod_group",
            i,
            ".yaml",
            format!(
                "metadata: {{name: g, namespace: ml}}\nspec: {{minMember: {v}, scheduleTimeoutSeconds: {v}, minResources: {{cpu: \"{v}\"}}}}\n"
            ),
        );
        let mut row = ["n1", "32000", "262144", "8", "A100", "p1", "1000", "1024", "1", "1000", "0", "10", "0"];
        row[[1, 2, 3, 6, 7, 8, 9, 10, 11, 12][i % 10]] = v;
        add(
            "openb",
            i,
            "",
            format!(
                "sn,cpu_milli,memory_mib,gpu,model\n{}\n\0name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n{}\n",
                row[..5].join(","),
                row[5..].join(",")
            ),
        );
    }
    let none = serde_json::json!({});
    for (i, v) in facts.iter().enumerate() {
        let (key, object) = FACTS[i % FACTS.len()];
        let one = serde_json::json!({ key: v });
        let text = match object {
            Object::Node => manifests(&one, &none, &none),
            Object::NodeLabel => manifests(&none, &none, &one),
            Object::Pod => manifests(&none, &one, &none),
        };
        add("manifests", i, ".yaml", text);
    }
    // libFuzzer's dictionary format: one quoted token a line, bytes past ASCII escaped.
    let quote = |t: &str| {
        let body: String = t
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' => format!("\\{}", b as char),
                0x20..=0x7e => (b as char).to_string(),
                _ => format!("\\x{b:02X}"),
            })
            .collect();
        format!("\"{body}\"\n")
    };
    let tokens: BTreeSet<&str> =
        extremes::all().chain(["ns", "us", "µs", "ms", "h", "Ei", "e308", "e-320"]).filter(|t| !t.is_empty()).collect();
    let dict = "# The extremes of engine::testing::extremes, for every fuzz target (fuzz/run\n\
                # passes -dict). Written by crates/cli/tests/hostile_numbers.rs.\n"
        .to_string()
        + &tokens.iter().map(|t| quote(t)).collect::<String>();
    files.insert("extremes.dict".to_string(), dict);
    files
}

/// The files of [`fuzz_files`] are in `fuzz/` as made, and no stale
/// `hostile-*` seed is left; `UPDATE_FUZZ_SEEDS=1` writes them.
#[test]
fn fuzz_seeds_and_dictionary_hold_every_extreme() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let want = fuzz_files();
    let update = std::env::var_os("UPDATE_FUZZ_SEEDS").is_some();
    let mut stale = Vec::new();
    for dir in std::fs::read_dir(fuzz.join("seeds")).expect("fuzz/seeds").flatten() {
        for f in std::fs::read_dir(dir.path()).expect("a target's seeds").flatten() {
            let name = format!("seeds/{}/{}", dir.file_name().to_string_lossy(), f.file_name().to_string_lossy());
            if f.file_name().to_string_lossy().starts_with("hostile-") && !want.contains_key(&name) {
                stale.push(f.path());
            }
        }
    }
    if update {
        for p in &stale {
            std::fs::remove_file(p).expect("remove a stale seed");
        }
        for (name, text) in &want {
            std::fs::write(fuzz.join(name), text).expect("write a seed");
        }
        return;
    }
    assert!(stale.is_empty(), "stale seeds (UPDATE_FUZZ_SEEDS=1 removes them): {stale:?}");
    let differ: Vec<&String> = want
        .iter()
        .filter(|(name, text)| std::fs::read_to_string(fuzz.join(name)).ok().as_ref() != Some(text))
        .map(|(n, _)| n)
        .collect();
    assert!(
        differ.is_empty(),
        "fuzz files not as the extremes make them (UPDATE_FUZZ_SEEDS=1 rewrites them): {differ:?}"
    );
}
