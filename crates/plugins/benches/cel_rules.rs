//! What a CEL rule costs per node: one filter rule, one score rule, and
//! five rules, evaluated on a node whose CEL value is kept (the usual
//! case: values are rebuilt only when a node changes), and the rebuild
//! itself (a node that changed since the last cycle).

use criterion::{Criterion, criterion_group, criterion_main};
use framework::framework::CycleState;
use framework::testing::{node, pod};
use serde_json::json;

fn rules(c: &mut Criterion) {
    let p = pod("p").label("team", "ml").req(500, 1 << 30).resource("nvidia.com/gpu", 1).build();
    let mut info = node("gpu-1")
        .label("team", "ml")
        .label("disk-type", "ssd")
        .label("gpu-model", "a100")
        .zone("zone-a")
        .resource("nvidia.com/gpu", 8)
        .annotation("gpu-scheduler.io/temperature-celsius", "70")
        .info();
    info.generation = 1;
    let filter = "node.labels[?'maintenance-mode'].orValue('') != 'true'";
    let score = "node.labels[?'disk-type'].orValue('') == 'ssd' ? 100 : 0";
    let five = json!([
        {"name": "maintenance", "filter": filter},
        {"name": "team", "filter": "node.labels[?'team'].orValue('') == pod.labels[?'team'].orValue('')"},
        {"name": "gpus", "filter": "node.free[?'nvidia.com/gpu'].orValue(0) >= pod.requests[?'nvidia.com/gpu'].orValue(0)"},
        {"name": "cool", "filter": "!has(node.temperature) || node.temperature < 85.0"},
        {"name": "ssd", "score": score},
    ]);
    let mut state = CycleState::new();
    let mut group = c.benchmark_group("cel_rules");
    for (name, args) in [
        ("filter/1 rule", json!([{"name": "r", "filter": filter}])),
        ("score/1 rule", json!([{"name": "r", "score": score}])),
        ("filter+score/5 rules", five),
    ] {
        let plugin = gpu_scheduler_plugins::cel_rules::new(Some(&json!({ "rules": args }))).unwrap();
        let snap = framework::cache::Snapshot::from_parts(vec![info.node.clone()], vec![]);
        if let Some(pf) = plugin.as_pre_filter() {
            let _ = pf.pre_filter(&mut state, &p, &snap);
        }
        let view = info.view();
        // Filter and Score as a cycle calls them on one node (a plugin
        // without score rules returns at once from Score).
        group.bench_function(format!("{name}/node kept"), |b| {
            b.iter(|| {
                let f = plugin.as_filter().unwrap().filter(&state, &p, &view);
                let s = plugin.as_score().unwrap().score(&state, &p, &view);
                (f, s)
            })
        });
    }
    // A node changed since the last cycle: its value is rebuilt first.
    let plugin =
        gpu_scheduler_plugins::cel_rules::new(Some(&json!({"rules": [{"name": "r", "filter": filter}]}))).unwrap();
    let mut changed = info.clone();
    group.bench_function("filter/1 rule/node changed", |b| {
        b.iter(|| {
            changed.generation += 1;
            plugin.as_filter().unwrap().filter(&state, &p, &changed.view())
        })
    });
    group.finish();
}

criterion_group!(benches, rules);
criterion_main!(benches);
