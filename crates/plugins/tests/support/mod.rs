//! A scheduler driven as `run` drives it, for tests of behaviour over
//! time: pods arrive, decisions are bound, bound pods come back as the
//! bound-pods watch would report them.

#![allow(dead_code)] // each test file uses part of it

use std::collections::{BTreeMap, HashSet};

use engine::config::Configuration;
use engine::framework::{Binder, Status};
use engine::gang::PodGroup;
use engine::model::{LABEL_ZONE, Pod};
use engine::profile::build_profiles;
use engine::resources::Resources;
use engine::scheduler::{CycleOutcome, Scheduler};
use engine::testing::{node, pod};

pub const GPU: &str = "nvidia.com/gpu";

/// Binds everything except the pods named in `refuse` (once each).
pub struct Api {
    pub refuse: std::sync::Mutex<HashSet<String>>,
}

impl Binder for Api {
    fn bind(&self, pod: &Pod, _node: &str) -> Result<(), String> {
        let mut refuse = self.refuse.lock().unwrap_or_else(|e| e.into_inner());
        if refuse.remove(&pod.name) { Err("binding rejected: conflict (409)".into()) } else { Ok(()) }
    }
}

pub struct Cluster {
    pub s: Scheduler,
    pub api: Api,
    /// Pod name → node, for bound pods.
    pub bound: BTreeMap<String, String>,
    /// Pod name → last failure message.
    pub failed: BTreeMap<String, String>,
    /// Outcomes of the last `run`.
    pub outcomes: usize,
    /// Every failure message, in order.
    pub history: Vec<String>,
}

impl Cluster {
    pub fn new(seed: u64) -> Cluster {
        Cluster::with_config(seed, &Configuration::default())
    }

    pub fn with_config(seed: u64, cfg: &Configuration) -> Cluster {
        let profiles =
            build_profiles(cfg, &gpu_scheduler_plugins::registry(), &gpu_scheduler_plugins::default_plugins())
                .unwrap_or_else(|e| panic!("default profiles: {e}"));
        Cluster {
            s: Scheduler::new(cfg, profiles, seed).unwrap_or_else(|e| panic!("{e}")),
            api: Api { refuse: Default::default() },
            bound: BTreeMap::new(),
            failed: BTreeMap::new(),
            outcomes: 0,
            history: Vec::new(),
        }
    }

    /// `n` nodes of 8 GPUs named `{prefix}{i}` in `zone` ("" for none).
    pub fn gpu_nodes(&mut self, prefix: &str, zone: &str, n: usize) {
        for i in 1..=n {
            let mut b = node(&format!("{prefix}{i}")).capacity(64_000, 512 << 30).resource(GPU, 8);
            if !zone.is_empty() {
                b = b.label(LABEL_ZONE, zone);
            }
            self.s.on_node_upsert(b.build(), 0);
        }
    }

    pub fn group(&mut self, name: &str, min: u32, f: impl FnOnce(&mut PodGroup), now: u64) {
        let mut g = PodGroup {
            namespace: "default".into(),
            name: name.into(),
            min_member: min,
            min_resources: Resources::default(),
            schedule_timeout: None,
            topology_key: None,
        };
        f(&mut g);
        self.s.on_pod_group_upsert(g, now);
    }

    /// A pending member of `group` asking for `gpus` GPUs.
    pub fn member(&mut self, name: &str, group: &str, gpus: i64, now: u64) {
        let p = pod(name).req(1000, 1 << 30).resource(GPU, gpus).with(|p| p.pod_group = Some(group.into())).build();
        self.s.on_pod_upsert(p, now);
    }

    /// Schedules until nothing is ready at `now`; bound pods come back as
    /// the bound-pods watch would report them.
    pub fn run(&mut self, now: u64) {
        self.outcomes = 0;
        while let Some(outcome) = self.s.schedule_one(now) {
            self.outcomes += 1;
            assert!(self.outcomes < 10_000, "the scheduler does not settle");
            match outcome {
                CycleOutcome::Assumed(mut task) => {
                    let status: Status = task.bind(&self.api);
                    let (bound, node) = ((*task.pod).clone(), task.node.clone());
                    self.s.finish_binding(*task, &status, now);
                    if status.is_success() {
                        assert!(self.bound.insert(bound.name.clone(), node).is_none(), "{} bound twice", bound.name);
                        self.failed.remove(&bound.name);
                        self.s.on_pod_upsert(bound, now);
                    } else {
                        self.failed.insert(bound.name.clone(), status.message());
                    }
                }
                CycleOutcome::Failed(f) => {
                    self.failed.insert(f.pod.name.clone(), f.message.clone());
                    self.history.push(f.message.clone());
                }
            }
        }
    }

    pub fn bound_of(&self, prefix: &str) -> usize {
        self.bound.keys().filter(|n| n.starts_with(prefix)).count()
    }

    pub fn message(&self, pod: &str) -> &str {
        self.failed.get(pod).map_or("", String::as_str)
    }
}
