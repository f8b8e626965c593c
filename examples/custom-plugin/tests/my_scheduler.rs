//! The custom binary, built by cargo for this test, schedules with its own
//! plugin beside the built-in ones.

use std::process::Command;

use serde_json::Value;

fn my_scheduler(args: &[&str]) -> (Option<i32>, String, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new(env!("CARGO_BIN_EXE_my-scheduler"))
        .current_dir(root)
        .args(args)
        .output()
        .expect("running my-scheduler");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const CLUSTER: &str = "examples/custom-plugin/cluster.yaml";

fn placements(extra: &[&str]) -> Vec<(String, Option<String>, Option<String>)> {
    let args = [&["simulate", "--output", "json", "--now", "2026-06-01T00:00:00Z"], extra, &[CLUSTER]].concat();
    let (code, out, err) = my_scheduler(&args);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().into(),
                p["node"].as_str().map(Into::into),
                p["reason"].as_str().map(Into::into),
            )
        })
        .collect()
}

#[test]
fn the_custom_plugin_filters_and_scores() {
    for config in [&[][..], &["--config", "examples/custom-plugin/config.yaml"][..]] {
        let got = placements(config);
        assert_eq!(got.len(), 4, "{got:?}");
        // The repair node, the biggest, takes nothing; the best burn-in
        // (node-a) takes the first replica.
        assert!(got.iter().all(|(_, node, _)| node.as_deref() != Some("node-c")), "{config:?}: {got:?}");
        assert_eq!(
            got.iter().find(|(p, ..)| p.starts_with("team-a/api-")).and_then(|(_, n, _)| n.as_deref()),
            Some("node-a")
        );
        let (_, node, reason) = got.iter().find(|(p, ..)| p == "team-a/pinned-to-repair").unwrap();
        assert_eq!(node, &None);
        let reason = reason.as_deref().unwrap_or_default();
        assert!(reason.contains("1 node(s) not in-service in the CMDB"), "{reason}");
    }
}

#[test]
fn its_args_are_checked_like_the_builtins() {
    let (code, out, err) = my_scheduler(&["check-config", "examples/custom-plugin/config.yaml"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let dir = std::env::temp_dir().join(format!("my-scheduler-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeSanitizer\n    args: {requiredState: 7}\n",
    )
    .unwrap();
    let (code, _, err) = my_scheduler(&["check-config", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("profiles[0].pluginConfig[0].args.requiredState"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_builtin_command_is_there() {
    let (code, out, _) = my_scheduler(&["--help"]);
    assert_eq!(code, Some(0));
    for cmd in ["run", "simulate", "check-config", "snapshot", "explain"] {
        assert!(out.contains(cmd), "{cmd} missing from:\n{out}");
    }
}
