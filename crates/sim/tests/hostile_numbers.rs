//! Property tests of the simulator's readers of outside numbers over
//! extreme values (docs/RELIABILITY.md, "Hostile numbers"): the openb
//! trace (CSV) and the quantities, counts and priorities of manifests.
//! Either the input is refused naming where, or it replays or simulates;
//! never a panic.

use engine::config::Configuration;
use engine::testing::extremes;
use gpu_scheduler_sim as sim;
use proptest::prelude::*;
use sim::openb::{read_nodes, read_pods};
use sim::replay::{ReplayOptions, replay};
use sim::timed::replay_timed;
use sim::{Manifests, SimOptions};

/// Text where a number belongs: the shared extremes, the bounds of i64
/// and of the readers' columns, and numbers of any size.
fn cell() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(extremes::NUMBERS).prop_map(String::from),
        prop::sample::select(&["9223372036854775", "8796093022207", "64", "65", "1000", "1001", ""][..])
            .prop_map(String::from),
        any::<i64>().prop_map(|v| v.to_string()),
        (0i64..2000).prop_map(|v| v.to_string()),
    ]
}

/// A quantity as a manifest may give it.
fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(extremes::NUMBERS).prop_map(String::from),
        prop::sample::select(&["9Ei", "8Ei", "16Ei", "9223372036854775807m", "1e18", "1E18", "0.000000001m", "1n"][..])
            .prop_map(String::from),
        any::<i64>().prop_map(|v| v.to_string()),
        (any::<u32>(), prop::sample::select(&["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Gi", "Ei"][..]))
            .prop_map(|(v, s)| format!("{v}{s}")),
    ]
}

fn run_replays(nodes: &[sim::openb::TraceNode], pods: &[sim::openb::TracePod]) -> Result<(), TestCaseError> {
    let (cfg, registry, defaults) = (Configuration::default(), plugins::registry(), plugins::default_plugins());
    let opts = ReplayOptions { seed: 1, inflate: 1.0 };
    let r = replay(nodes, pods, &cfg, &registry, &defaults, &opts, &mut |_, _| {});
    prop_assert!(r.is_ok(), "a trace read without error did not replay: {:?}", r.err());
    if pods.iter().all(|p| p.creation_time.is_some()) {
        let t = replay_timed(nodes, pods, &cfg, &registry, &defaults, 1, &mut |_, _| {});
        prop_assert!(t.is_ok(), "a timed trace read without error did not replay: {:?}", t.err());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A valid trace with one or two numbers replaced by extremes.
    #[test]
    fn openb_traces_with_extreme_cells_are_refused_or_replay(cells in prop::collection::vec((0usize..10, cell()), 1..3)) {
        // cpu_milli, memory_mib, gpu of n1; then the numbers of p1.
        let mut row: Vec<String> = ["32000", "262144", "8", "1000", "1024", "1", "1000", "0", "10", "0"]
            .map(String::from)
            .to_vec();
        for (i, v) in cells {
            row[i] = v;
        }
        let nodes_csv =
            format!("sn,cpu_milli,memory_mib,gpu,model\nn1,{},{},{},A100\nn2,4000,16384,1,T4\n", row[0], row[1], row[2]);
        let pods_csv = format!(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n\
             p1,{}\np2,1000,1024,1,1000,0,10,0\n",
            row[3..].join(",")
        );
        match (read_nodes("nodes.csv", &nodes_csv), read_pods("pods.csv", &pods_csv)) {
            (Ok(n), Ok(p)) => run_replays(&n, &p)?,
            (Err(e), _) | (_, Err(e)) => prop_assert!(e.line == 2 && !e.column.is_empty(), "{e}"),
        }
    }

    /// Node allocatable and pod requests of any size, priorities past
    /// int32 and replicas of any count: refused naming the object, or
    /// simulated.
    #[test]
    fn manifests_with_extreme_quantities_are_refused_or_simulate(
        alloc in prop::collection::vec(quantity(), 4),
        req in prop::collection::vec(quantity(), 3),
        priority in cell(),
    ) {
        let yaml = format!(
            r#"apiVersion: v1
kind: Node
metadata: {{name: n1}}
status:
  allocatable: {{cpu: "{}", memory: "{}", pods: "{}", nvidia.com/gpu: "{}"}}
---
apiVersion: v1
kind: Node
metadata: {{name: n2}}
status:
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {{name: bound, namespace: ns}}
spec:
  nodeName: n1
  containers: [{{name: c, resources: {{requests: {{cpu: "{}", memory: "{}"}}, limits: {{nvidia.com/gpu: "{}"}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: ns}}
spec:
  priority: {priority}
  schedulerName: gpu-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "{}", memory: "{}"}}}}}}]
"#,
            alloc[0], alloc[1], alloc[2], alloc[3], req[0], req[1], req[2], req[0], req[1]
        );
        let mut m = Manifests::default();
        if m.add_str("cluster.yaml", &yaml).is_ok() {
            let opts = SimOptions { seed: 1, now: jiff::Timestamp::UNIX_EPOCH, explain: None, extenders: Vec::new() };
            let cfg = Configuration::default();
            let s = sim::simulate(&m, &cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {});
            if let Err(e) = s {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
