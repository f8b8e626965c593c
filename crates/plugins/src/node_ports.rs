//! NodePorts: a pod's host ports must be free on the node
//! (kube-scheduler's `NodePorts`).
//!
//! Two host ports conflict when port and protocol are equal and the
//! addresses overlap: the wildcard `0.0.0.0` (or an empty host IP) overlaps
//! every address, a specific address only itself and the wildcard. An
//! empty protocol means TCP.

use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use framework::model::{HostPort, Pod};
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "NodePorts";

pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The address that means "every address of the node".
pub const BIND_ALL_HOST_IP: &str = "0.0.0.0";

const DEFAULT_PROTOCOL: &str = "TCP";

/// The host ports the pod asks for, computed once per cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WantedPorts(Vec<HostPort>);

#[derive(Debug, Default, Clone, Copy)]
pub struct NodePorts;

fn host_ip(p: &HostPort) -> &str {
    if p.host_ip.is_empty() { BIND_ALL_HOST_IP } else { &p.host_ip }
}

fn protocol(p: &HostPort) -> &str {
    if p.protocol.is_empty() { DEFAULT_PROTOCOL } else { &p.protocol }
}

/// Whether `want` collides with any of the ports in use on a node
/// (kube's `HostPortInfo.CheckConflict`). Ports ≤ 0 ask for nothing.
pub fn conflicts(want: &HostPort, in_use: &[HostPort]) -> bool {
    if want.port <= 0 {
        return false;
    }
    let (ip, proto) = (host_ip(want), protocol(want));
    in_use.iter().any(|u| {
        u.port == want.port
            && protocol(u) == proto
            && (ip == BIND_ALL_HOST_IP || host_ip(u) == BIND_ALL_HOST_IP || host_ip(u) == ip)
    })
}

/// Whether none of `wanted` collides with `in_use`.
pub fn fits_ports(wanted: &[HostPort], in_use: &[HostPort]) -> bool {
    !wanted.iter().any(|w| conflicts(w, in_use))
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Ports free up when a pod on a node goes away, or a new node appears.
    /// Container ports are immutable, so pod updates never help.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::Node, EventAction::Add),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let wanted: Vec<HostPort> = pod.host_ports.iter().filter(|p| p.port > 0).cloned().collect();
        if wanted.is_empty() {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(WantedPorts(wanted));
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeView<'_>) -> Status {
        // Without PreFilter's state (e.g. a caller running Filter alone) the
        // pod's own list gives the same answer: ports ≤ 0 never conflict.
        let wanted = state.read::<WantedPorts>().map_or(pod.host_ports.as_slice(), |w| w.0.as_slice());
        if fits_ports(wanted, &node.used_ports) { Status::success() } else { Status::unschedulable(ERR_REASON) }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(NodePorts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::testing::{PodBuilder, node, pod};

    /// (port, protocol, host IP)
    type Port = (i32, &'static str, &'static str);

    fn with_ports(b: PodBuilder, ports: &[Port]) -> PodBuilder {
        ports.iter().fold(b, |b, &(port, proto, ip)| b.host_port(port, proto, ip))
    }

    #[test]
    fn filter_table() {
        let cases: Vec<(&str, Vec<Port>, Vec<Port>, bool)> = vec![
            ("nothing in use", vec![(8080, "TCP", "")], vec![], true),
            ("other port", vec![(8080, "TCP", "")], vec![(9090, "TCP", "")], true),
            ("same port and protocol", vec![(8080, "TCP", "")], vec![(8080, "TCP", "")], false),
            ("UDP and TCP do not clash", vec![(8080, "UDP", "")], vec![(8080, "TCP", "")], true),
            ("empty protocol is TCP", vec![(8080, "", "")], vec![(8080, "TCP", "")], false),
            ("empty protocol is not UDP", vec![(8080, "", "")], vec![(8080, "UDP", "")], true),
            ("SCTP is its own protocol", vec![(8080, "SCTP", "")], vec![(8080, "TCP", "")], true),
            (
                "two specific addresses do not clash",
                vec![(8080, "TCP", "127.0.0.1")],
                vec![(8080, "TCP", "127.0.0.2")],
                true,
            ),
            (
                "same specific address clashes",
                vec![(8080, "TCP", "127.0.0.1")],
                vec![(8080, "TCP", "127.0.0.1")],
                false,
            ),
            (
                "wanted wildcard clashes with any address in use",
                vec![(8080, "TCP", "0.0.0.0")],
                vec![(8080, "TCP", "127.0.0.1")],
                false,
            ),
            ("wanted empty IP is the wildcard", vec![(8080, "TCP", "")], vec![(8080, "TCP", "10.0.0.1")], false),
            (
                "specific address clashes with the wildcard in use",
                vec![(8080, "TCP", "127.0.0.1")],
                vec![(8080, "TCP", "0.0.0.0")],
                false,
            ),
            (
                "specific address clashes with an empty IP in use",
                vec![(8080, "TCP", "127.0.0.1")],
                vec![(8080, "TCP", "")],
                false,
            ),
            (
                "wildcard of another protocol does not clash",
                vec![(8080, "UDP", "127.0.0.1")],
                vec![(8080, "TCP", "0.0.0.0")],
                true,
            ),
            (
                "one clash among several ports fails the node",
                vec![(8080, "UDP", ""), (9090, "TCP", "")],
                vec![(9090, "TCP", "127.0.0.1")],
                false,
            ),
            ("ports in use with port 0 are ignored", vec![(8080, "TCP", "")], vec![(0, "TCP", "")], true),
        ];
        for (name, want, used, fits) in cases {
            let p = with_ports(pod("p"), &want).build();
            let existing = with_ports(pod("existing"), &used).node("n").arc();
            let snap = Snapshot::from_parts(vec![node("n").build()], vec![existing]);
            let info = snap.get("n").unwrap();
            let mut state = CycleState::new();
            let (res, s) = NodePorts.pre_filter(&mut state, &p, &snap);
            assert_eq!(res, PreFilterResult::default(), "{name}");
            assert!(s.is_success(), "{name}: {s:?}");
            let s = NodePorts.filter(&state, &p, &info.view());
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code, Code::Unschedulable, "{name}");
                assert_eq!(s.message(), ERR_REASON, "{name}");
            }
            // Filter without PreFilter agrees.
            assert_eq!(NodePorts.filter(&CycleState::new(), &p, &info.view()), s, "{name}: stateless");
        }
    }

    #[test]
    fn pre_filter_skips_pods_without_host_ports() {
        let snap = Snapshot::from_parts(vec![node("n").build()], vec![]);
        for (name, p) in [
            ("no ports", pod("p").build()),
            ("only port 0 (a container port without host port)", pod("p").host_port(0, "TCP", "").build()),
        ] {
            let mut state = CycleState::new();
            let (_, s) = NodePorts.pre_filter(&mut state, &p, &snap);
            assert!(s.is_skip(), "{name}: {s:?}");
        }
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_pre_filter().is_some() && p.as_filter().is_some());
    }
}
