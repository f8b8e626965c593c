//! SchedulingGates: keeps a pod out of the active queue while it carries
//! `spec.schedulingGates` (kube-scheduler's `SchedulingGates` PreEnqueue).

use std::sync::Arc;

use framework::framework::{ClusterEvent, EventAction, EventResource, Plugin, PreEnqueuePlugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "SchedulingGates";

#[derive(Debug, Default, Clone, Copy)]
pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Gates can only be removed, by an update of the gated pod itself.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update)]
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        if pod.scheduling_gates.is_empty() {
            return Status::success();
        }
        // kube formats the gate names as a Go slice: `[a b]`.
        Status::unresolvable(format!("waiting for scheduling gates: [{}]", pod.scheduling_gates.join(" ")))
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(SchedulingGates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::testing::pod;

    #[test]
    fn pre_enqueue_table() {
        let cases: [(&str, &[&str], Option<&str>); 3] = [
            ("no gates", &[], None),
            ("one gate", &["example.com/hold"], Some("waiting for scheduling gates: [example.com/hold]")),
            ("two gates in order", &["foo", "bar"], Some("waiting for scheduling gates: [foo bar]")),
        ];
        for (name, gates, want) in cases {
            let p = pod("p").with(|p| p.scheduling_gates = gates.iter().map(|g| g.to_string()).collect()).build();
            let s = SchedulingGates.pre_enqueue(&p);
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(msg) => {
                    assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), msg, "{name}");
                }
            }
        }
    }

    #[test]
    fn registers_pod_updates() {
        let p = new(None).unwrap();
        assert!(p.as_pre_enqueue().is_some());
        let update = ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update);
        assert!(p.events_to_register().iter().any(|e| update.triggers(e)));
        let node_add = ClusterEvent::new(EventResource::Node, EventAction::Add);
        assert!(!p.events_to_register().iter().any(|e| node_add.triggers(e)));
    }
}
