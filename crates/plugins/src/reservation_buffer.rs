//! ReservationBuffer: keeps the last part of every node's cpu and memory
//! (10 % by default) free for system-critical pods, the article's "always
//! reserve at least 10 % for system components". A pod with priority at or
//! below `maxPriority` (1,000,000: everything under the built-in
//! `system-cluster-critical` / `system-node-critical` classes) may take a
//! node only while the requests of all pods there, its own included, stay
//! within `fraction` of allocatable; higher-priority pods may use the rest.
//!
//! This is also where the article's "×1.5 score for priority > 1,000,000"
//! went: multiplying every node's score by the same factor cannot change
//! which node wins, whereas access to the reserve does (docs/POLICIES.md).

use std::borrow::Cow;
use std::sync::Arc;

use engine::cache::{NodeView, Snapshot};
use engine::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use engine::model::Pod;
use engine::registry::{ArgsError, decode_args};
use serde::Deserialize;

use crate::helper::skip_if;

pub const NAME: &str = "ReservationBuffer";

/// `ReservationBufferArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservationBufferArgs {
    /// Pods with a priority above this may use the reserve.
    #[serde(default = "default_max_priority")]
    pub max_priority: i32,
    /// The share of allocatable cpu and memory other pods may fill.
    #[serde(default = "default_fraction")]
    pub fraction: f64,
}

fn default_max_priority() -> i32 {
    1_000_000
}

fn default_fraction() -> f64 {
    0.9
}

impl Default for ReservationBufferArgs {
    fn default() -> Self {
        ReservationBufferArgs { max_priority: default_max_priority(), fraction: default_fraction() }
    }
}

impl ReservationBufferArgs {
    pub fn validate(&self) -> Result<(), ArgsError> {
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            return Err(ArgsError::new("fraction", format!("{}: must be in (0, 1]", self.fraction)));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct ReservationBuffer {
    max_priority: i32,
    /// Parts per million of allocatable: integer arithmetic in Filter.
    ppm: i64,
    cpu_reason: String,
    memory_reason: String,
}

impl ReservationBuffer {
    /// What a non-critical pod may fill of `allocatable`.
    fn limit(&self, allocatable: i64) -> i64 {
        // 128-bit division is a library call: only when 64 bits overflow
        // (more than 9 TB of memory).
        match allocatable.checked_mul(self.ppm) {
            Some(v) => v / 1_000_000,
            None => i64::try_from(i128::from(allocatable) * i128::from(self.ppm) / 1_000_000).unwrap_or(i64::MAX),
        }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: ReservationBufferArgs = decode_args(args)?;
    args.validate()?;
    // Rounded to whole percent tenths for the message; exact in the check.
    let percent = format!("{}", (args.fraction * 1000.0).round() / 10.0);
    let reason = |r: &str| format!("node(s) would exceed {percent}% of {r} (reserved for critical pods)");
    Ok(Arc::new(ReservationBuffer {
        max_priority: args.max_priority,
        ppm: (args.fraction * 1_000_000.0).round() as i64,
        cpu_reason: reason("cpu"),
        memory_reason: reason("memory"),
    }))
}

impl Plugin for ReservationBuffer {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Room appears when pods leave or nodes grow.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateAllocatable),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for ReservationBuffer {
    /// Critical pods, and pods that request neither cpu nor memory, are not
    /// this plugin's concern.
    fn pre_filter(&self, _state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let exempt = pod.priority > self.max_priority || (pod.requests.milli_cpu == 0 && pod.requests.memory == 0);
        (PreFilterResult::default(), skip_if(exempt))
    }
}

impl FilterPlugin for ReservationBuffer {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        let s = node.summary();
        let r = &pod.requests;
        // Only what the pod adds can push a node over: a node already past
        // the line (critical pods in the reserve) still takes requests of 0.
        if r.milli_cpu > 0 && s.requested_milli_cpu + r.milli_cpu > self.limit(s.allocatable_milli_cpu) {
            return Status::unschedulable(Cow::Owned(self.cpu_reason.clone()));
        }
        if r.memory > 0 && s.requested_memory + r.memory > self.limit(s.allocatable_memory) {
            return Status::unschedulable(Cow::Owned(self.memory_reason.clone()));
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::framework::Code;
    use engine::testing::{node, pod};

    const GI: i64 = 1 << 30;

    fn plugin(args: serde_json::Value) -> Arc<dyn Plugin> {
        new(Some(&args)).unwrap()
    }

    #[test]
    fn filter_table() {
        // Node: 10 cpu, 10 GiB; `used` cpu (milli) already requested.
        let cases: &[(&str, i64, i64, i64, Option<&str>)] = &[
            ("empty node", 0, 1000, GI, None),
            ("exactly 90% of cpu", 8000, 1000, GI, None),
            ("one milli-cpu over", 8001, 1000, GI, Some("cpu")),
            ("memory over 90%", 0, 1000, 10 * GI, Some("memory")),
            ("9.0 GiB of memory is allowed", 0, 1000, 9 * GI, None),
            ("pod of no cpu on a node past the line", 9500, 0, GI, None),
        ];
        let p = plugin(serde_json::Value::Null);
        let f = p.as_filter().unwrap();
        for (name, used, cpu, mem, want) in cases {
            let mut info = node("n").capacity(10_000, 10 * GI).info();
            if *used > 0 {
                info.add_pod(pod("existing").node("n").req(*used, 0).arc());
            }
            let s = f.filter(&CycleState::new(), &pod("p").req(*cpu, *mem).build(), &info.view());
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(r) => {
                    assert_eq!(s.code, Code::Unschedulable, "{name}");
                    assert_eq!(
                        s.message(),
                        format!("node(s) would exceed 90% of {r} (reserved for critical pods)"),
                        "{name}"
                    );
                }
            }
        }
    }

    #[test]
    fn limits_of_huge_nodes_do_not_overflow() {
        let b = ReservationBuffer {
            max_priority: 0,
            ppm: 900_000,
            cpu_reason: String::new(),
            memory_reason: String::new(),
        };
        let tib = 1i64 << 40;
        for alloc in [0, 10, 64 * GI, 20 * tib, i64::MAX] {
            let want = i64::try_from(i128::from(alloc) * 9 / 10).unwrap();
            assert_eq!(b.limit(alloc), want, "{alloc}");
        }
    }

    #[test]
    fn critical_and_empty_pods_skip() {
        let p = plugin(serde_json::Value::Null);
        let pf = p.as_pre_filter().unwrap();
        let snap = Snapshot::new();
        let cases = [
            ("normal pod", pod("p").req(100, 0).priority(0).build(), false),
            ("at the limit is not critical", pod("p").req(100, 0).priority(1_000_000).build(), false),
            ("system-cluster-critical", pod("p").req(100, 0).priority(2_000_000_000).build(), true),
            ("requests nothing", pod("p").build(), true),
        ];
        for (name, pod, skip) in cases {
            assert_eq!(pf.pre_filter(&mut CycleState::new(), &pod, &snap).1.is_skip(), skip, "{name}");
        }
    }

    #[test]
    fn args() {
        let p = plugin(serde_json::json!({"fraction": 0.75, "maxPriority": 10}));
        let info = node("n").capacity(4000, GI).info();
        let s = p.as_filter().unwrap().filter(&CycleState::new(), &pod("p").req(3001, 0).build(), &info.view());
        assert_eq!(s.message(), "node(s) would exceed 75% of cpu (reserved for critical pods)");
        let snap = Snapshot::new();
        let critical = pod("p").req(1, 0).priority(11).build();
        assert!(p.as_pre_filter().unwrap().pre_filter(&mut CycleState::new(), &critical, &snap).1.is_skip());

        for (args, field) in [
            (serde_json::json!({"fraction": 0}), "fraction"),
            (serde_json::json!({"fraction": 1.5}), "fraction"),
            (serde_json::json!({"fraction": "most"}), "fraction"),
            (serde_json::json!({"reserve": 0.1}), "reserve"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
