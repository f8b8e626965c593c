//! K decisions of a 300-thousandth GPU share on 5,000 nodes of 8 GPUs,
//! one share of 300, 500 or 700 already bound on each, every node scored,
//! on one thread; GpuFragmentation's gap balance on or off. Or, `basic`,
//! K decisions of kube's SchedulingBasic pod (100m, 500 MiB) on 5,000
//! nodes without GPUs, every node scored. For counting instructions
//! (docs/BENCHMARKS.md, "The cost of a GPU share's decision"):
//! `valgrind --tool=callgrind target/release/examples/share_decisions on 50`
//! against `... on 0` (the setup alone).

use engine::devices::{DeviceSet, GpuRequest};
use engine::framework::Binder;
use engine::model::Pod;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

const NODES: usize = 5_000;

struct NoopBinder;

impl Binder for NoopBinder {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, decisions) = match args.as_slice() {
        [b, k] if ["on", "off", "basic"].contains(&b.as_str()) && k.parse::<usize>().is_ok() => {
            (b.clone(), k.parse().unwrap_or(0))
        }
        _ => {
            eprintln!("usage: share_decisions on|off|basic DECISIONS");
            std::process::exit(2);
        }
    };
    let (balance, gpus) = (mode == "on", mode != "basic");
    let yaml = format!(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\npercentageOfNodesToScore: 100\n\
         profiles:\n- pluginConfig:\n  - name: GpuFragmentation\n    args: {{gapBalance: {balance}}}\n"
    );
    let cfg = engine::config::parse(&yaml).expect("configuration");
    let profiles = engine::profile::build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins())
        .expect("default profile");
    let mut s = Scheduler::new(&cfg, profiles, 1).expect("profiles");
    for i in 0..NODES {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        let n = node(&format!("node-{i}")).zone(zone).capacity(4000, 32 << 30).pods(110);
        let n = if gpus { n.label("gpu-model", "a100").resource("nvidia.com/gpu", 8) } else { n };
        s.on_node_upsert(n.build(), 0);
    }
    for i in (0..NODES).filter(|_| gpus) {
        let bound = pod(&format!("load-{i}")).req(100, 500 << 20).node(&format!("node-{i}")).with(|p| {
            p.gpu = GpuRequest::share([300, 500, 700][i % 3], 0);
            p.gpu_devices = Some(DeviceSet::single((i / 3) % 8));
        });
        s.on_pod_upsert(bound.build(), 0);
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("thread pool");
    pool.install(|| {
        for i in 0..decisions {
            let p = pod(&format!("pod-{i}")).req(100, 500 << 20);
            let p = if gpus { p.with(|p| p.gpu = GpuRequest::share(300, 0)) } else { p };
            s.on_pod_upsert(p.build(), 0);
            if let Some(CycleOutcome::Assumed(mut task)) = s.schedule_one(0) {
                let status = task.bind(&NoopBinder);
                let placed = task.pod.clone();
                s.finish_binding(*task, &status, 0);
                s.on_pod_delete(&placed.uid, 0);
            }
        }
    });
}
