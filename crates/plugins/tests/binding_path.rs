//! Which bindings the driver may make as one API call, without running
//! the binding task's plugins on a blocking thread (kube-scheduler's
//! PreBindPreFlight): the default plugins, a pod with nothing to write
//! before its Binding; and the status it then reports is the one the
//! plugins would have returned.

use std::sync::Arc;

use engine::config::Configuration;
use engine::dra::{ClaimDecision, Consumer, PodAllocations};
use engine::framework::{Binder, Status};
use engine::model::Pod;
use engine::profile::build_profiles;
use engine::scheduler::{BindingTask, CycleOutcome, GangBind, Scheduler};
use engine::testing::{node, pod};
use engine::volumes::PodVolumeBindings;

/// A binder whose `bind` ends as `result`.
struct Ends(Result<(), String>);

impl Binder for Ends {
    fn bind(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        self.0.clone()
    }
}

fn assumed_task() -> Box<BindingTask> {
    let cfg = Configuration::default();
    let profiles = build_profiles(&cfg, &gpu_scheduler_plugins::registry(), &gpu_scheduler_plugins::default_plugins())
        .unwrap_or_else(|e| panic!("default profiles: {e}"));
    let mut s = Scheduler::new(&cfg, profiles, 1).unwrap_or_else(|e| panic!("{e}"));
    s.on_node_upsert(node("n1").capacity(4000, 8 << 30).pods(10).build(), 0);
    s.on_pod_upsert(pod("p").req(1000, 1 << 30).build(), 1);
    match s.schedule_one(2) {
        Some(CycleOutcome::Assumed(task)) => task,
        _ => panic!("p was not assumed"),
    }
}

/// What a case does to the assumed task before asking.
type Prepare = fn(&mut BindingTask, &PodVolumeBindings);

#[test]
fn only_a_pod_with_nothing_before_its_binding_is_bound_by_the_call_alone() {
    let volumes = PodVolumeBindings {
        static_bindings: vec![("default/data".into(), "pv-1".into())],
        provisionings: Vec::new(),
        node: "n1".into(),
    };
    let cases: [(&str, Prepare, bool); 5] = [
        ("a plain pod", |_, _| {}, true),
        ("empty volume bindings", |t, _| t.state.write(PodVolumeBindings::default()), true),
        ("volumes to bind first", |t, v| t.state.write(v.clone()), false),
        (
            "claims to allocate first",
            |t, _| {
                let consumer =
                    Consumer { api_group: String::new(), resource: "pods".into(), name: "p".into(), uid: "p".into() };
                let claim = ClaimDecision {
                    namespace: "default".into(),
                    name: "gpu".into(),
                    uid: "c1".into(),
                    allocation: None,
                    consumer,
                };
                t.state.write(PodAllocations { claims: vec![claim] })
            },
            false,
        ),
        ("a gang member", |t, _| t.gang = Some(Arc::new(GangBind::new("default/g".into()))), false),
    ];
    for (name, prepare, want) in cases {
        let mut task = assumed_task();
        prepare(&mut task, &volumes);
        assert_eq!(task.api_binding_only(), want, "{name}");
    }
}

#[test]
fn the_call_alone_reports_what_the_bind_plugins_would() {
    let results = [
        Ok(()),
        Err("binding rejected: pods \"p\" not found (404)".to_string()),
        Err("binding failed: connection reset".to_string()),
    ];
    for result in results {
        let mut task = assumed_task();
        assert!(task.api_binding_only());
        let direct: Status = task.api_binding_done(result.clone());
        let through_plugins: Status = task.bind(&Ends(result.clone()));
        assert_eq!(
            (direct.code, direct.message(), direct.plugin),
            (through_plugins.code, through_plugins.message(), through_plugins.plugin),
            "{result:?}"
        );
    }
}
