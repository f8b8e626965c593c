//! The refactoring oracle: the engine is deterministic, so a change that
//! only moves code leaves every output byte for byte as it was. This runs
//! `simulate --output json` on every manifest in examples/ under the default
//! profile and under every configuration in examples/, and a small `replay`
//! of two openb lists, and compares each with `tests/oracle/`.
//! `bench/openb/oracle` does the same for the full replays (by hand: minutes).
//!
//! A deliberate change of behaviour rewrites the files with
//! `UPDATE_ORACLE=1 cargo test -p gpu-scheduler --test oracle`, and says so
//! in its commit.

use std::path::{Path, PathBuf};
use std::process::Command;

const NOW: &str = "2026-01-01T00:00:00Z";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The binary's stdout, or its exit code and stderr when it fails: a
/// refused input is behaviour too.
fn run(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
        .args(args)
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    if out.status.success() {
        stdout
    } else {
        format!("exit {:?}\n{}", out.status.code(), String::from_utf8(out.stderr).unwrap())
    }
}

/// Every YAML file in examples/, split into configurations and manifests.
fn examples() -> (Vec<String>, Vec<String>) {
    let dir = workspace_root().join("examples");
    let mut configs = Vec::new();
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        if text.lines().any(|l| l.trim() == "kind: GpuSchedulerConfiguration") {
            configs.push(name);
        } else {
            manifests.push(name);
        }
    }
    configs.sort();
    manifests.sort();
    (configs, manifests)
}

/// Compares each output with `tests/oracle/<name>`; collects every
/// difference before failing, so one run shows all that moved.
fn check(outputs: &[(String, String)]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle");
    let update = std::env::var_os("UPDATE_ORACLE").is_some_and(|v| v == "1");
    let mut differ = Vec::new();
    for (name, actual) in outputs {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == *actual => {}
            Ok(_) => differ.push(format!("{name}: differs")),
            Err(e) => differ.push(format!("{name}: {e}")),
        }
    }
    assert!(
        differ.is_empty(),
        "outputs moved from tests/oracle/ (UPDATE_ORACLE=1 only for a deliberate change):\n{}",
        differ.join("\n")
    );
}

#[test]
fn simulate_outputs_are_unchanged() {
    let (configs, manifests) = examples();
    assert!(configs.len() >= 5 && manifests.len() >= 5, "examples/ lost its files: {configs:?} {manifests:?}");
    let mut outputs = Vec::new();
    for manifest in &manifests {
        let stem = manifest.trim_end_matches(".yaml");
        for config in std::iter::once(None).chain(configs.iter().map(Some)) {
            let mut args: Vec<String> =
                ["simulate", "--output", "json", "--seed", "1", "--now", NOW].iter().map(|s| s.to_string()).collect();
            if let Some(config) = config {
                args.push("--config".into());
                args.push(format!("examples/{config}"));
            }
            args.push(format!("examples/{manifest}"));
            let config = config.map_or("default", |c| c.trim_end_matches(".yaml"));
            outputs.push((format!("simulate.{stem}.{config}.json"), run(&args)));
        }
    }
    check(&outputs);
}

#[test]
fn small_replays_are_unchanged() {
    // Two runs keep the debug build's test short; the full set is
    // bench/openb/oracle's.
    let mut outputs = Vec::new();
    for (list, config) in [("gpushare40", None), ("multigpu20", Some("openb-config"))] {
        let mut args: Vec<String> =
            ["replay", "--format", "openb", "--seed", "42", "--inflate", "0.4", "--output", "json"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.push("--nodes".into());
        args.push("bench/openb/openb_node_list_gpu_node.csv".into());
        args.push("--pods".into());
        args.push(format!("bench/openb/openb_pod_list_{list}.csv"));
        if let Some(config) = config {
            args.push("--config".into());
            args.push(format!("examples/{config}.yaml"));
        }
        let config = config.map_or("default", |c| c.trim_end_matches("-config"));
        outputs.push((format!("replay.{list}.{config}.json"), run(&args)));
    }
    check(&outputs);
}
