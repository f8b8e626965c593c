//! What an extender costs per decision: one filter and one prioritize
//! round-trip to a local extender (the server of the tests), for 100 and
//! 500 feasible nodes sent whole or by name.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use engine::config::ExtenderConfig;
use engine::extender::Extender;
use engine::node_info::NodeInfo;
use engine::testing::{node, pod};
use gpu_scheduler_extender::HttpExtender;

fn round_trip(c: &mut Criterion) {
    let server = support::start();
    let p = pod("p").label("app", "web").req(100, 1 << 20).build();
    let mut group = c.benchmark_group("extender");
    for n in [100, 500] {
        let infos: Vec<NodeInfo> = (0..n).map(|i| node(&format!("node-{i}")).label("zone", "a").info()).collect();
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        for cache_capable in [true, false] {
            let cfg = ExtenderConfig {
                url_prefix: server.url.clone(),
                filter_verb: "filter".into(),
                preempt_verb: String::new(),
                prioritize_verb: "prioritize".into(),
                weight: 1,
                bind_verb: String::new(),
                enable_https: false,
                tls_config: None,
                http_timeout: Duration::from_secs(5),
                node_cache_capable: cache_capable,
                managed_resources: Vec::new(),
                ignorable: false,
            };
            let ext = HttpExtender::new(0, &cfg).unwrap();
            let shape = if cache_capable { "names" } else { "nodes" };
            group.bench_with_input(BenchmarkId::new(format!("filter+prioritize/{shape}"), n), &refs, |b, refs| {
                b.iter(|| {
                    ext.filter(&p, refs).unwrap();
                    ext.prioritize(&p, refs).unwrap();
                })
            });
        }
    }
    group.finish();
    // The calls reached the extender (a benchmark of failures would be fast).
    assert!(server.seen.lock().unwrap().prioritize.is_some());
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
