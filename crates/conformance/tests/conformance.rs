//! gpu-scheduler with `examples/kube-default-config.yaml` against
//! kube-scheduler v1.36.3 (or the release `K8S_VERSION` names) on one real
//! control plane: the named cases of `regressions/` (each a divergence
//! once found, now fixed), then generated scenarios.
//!
//! `CONFORMANCE_SCENARIOS=N` (default 300) sets how many are generated,
//! `CONFORMANCE_FIRST_SEED=S` (default 1) where their seeds start,
//! `CONFORMANCE_SEEDS=a,b,...` runs just those seeds. The summary is in
//! `target/conformance/summary.md` (and `.json`), each divergence's report
//! in `target/conformance/divergences.txt`.

use std::path::{Path, PathBuf};

use gpu_scheduler_conformance::suite::Suite;
use gpu_scheduler_conformance::{Scenario, generate};

/// Generated scenarios in CI: what fits the suite's budget of a few
/// minutes on a two-core machine (docs/CONFORMANCE.md).
const DEFAULT_SCENARIOS: u64 = 300;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|e| panic!("{name}={v:?}: {e}")),
        Err(_) => default,
    }
}

/// The named cases: `regressions/NAME.yaml`, in name order.
fn named_cases() -> Vec<Scenario> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let name = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
            Scenario::from_yaml(&name, &text).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
        })
        .collect()
}

fn seeds() -> Vec<u64> {
    if let Ok(list) = std::env::var("CONFORMANCE_SEEDS") {
        return list
            .split(',')
            .map(|s| s.trim().parse().unwrap_or_else(|e| panic!("CONFORMANCE_SEEDS={list:?}: {e}")))
            .collect();
    }
    let first = env_u64("CONFORMANCE_FIRST_SEED", 1);
    (first..first + env_u64("CONFORMANCE_SCENARIOS", DEFAULT_SCENARIOS)).collect()
}

#[test]
fn gpu_scheduler_decides_as_kube_scheduler_does() {
    let repo = repo();
    let dir = repo.join("target/conformance");
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    let (summary, reports) = runtime.block_on(async {
        let binary = Path::new(env!("CARGO_BIN_EXE_conformance-gpu-scheduler"));
        let mut suite = Suite::start(&repo, binary, &dir).await.unwrap_or_else(|e| panic!("starting the suite: {e}"));
        let named = named_cases();
        let seeds = seeds();
        let total = named.len() + seeds.len();
        let cases = named.into_iter().map(Ok).chain(seeds.into_iter().map(Err));
        for (i, case) in cases.enumerate() {
            let scenario = case.unwrap_or_else(generate);
            suite.check(&scenario).await.unwrap_or_else(|e| panic!("{}: {e}", scenario.name));
            if (i + 1) % 50 == 0 {
                eprintln!("conformance: {}/{total} scenarios", i + 1);
            }
        }
        let summary = suite.finish().unwrap_or_else(|e| panic!("writing the summary: {e}"));
        (serde_json::to_value(summary).unwrap_or_default(), suite.reports.clone())
    });
    eprintln!("conformance: {}", summary_line(&summary));
    assert!(
        reports.is_empty(),
        "{}\n{}\n(all in {})",
        summary_line(&summary),
        reports.join("\n"),
        dir.join("divergences.txt").display()
    );
}

fn summary_line(s: &serde_json::Value) -> String {
    format!(
        "{} scenarios in {:.0} s: {} placed by both, {} unschedulable for both ({} differing only by design), {} divergences {}, {} errors, {} agreed only when run again {}",
        s["scenarios"],
        s["seconds"].as_f64().unwrap_or_default(),
        s["agreed_scheduled"],
        s["agreed_unschedulable"],
        s["by_design"].as_array().map_or(0, Vec::len),
        s["divergences"].as_array().map_or(0, Vec::len),
        s["divergences"],
        s["errors"].as_array().map_or(0, Vec::len),
        s["rerun_then_agreed"].as_array().map_or(0, Vec::len),
        s["rerun_then_agreed"],
    )
}
