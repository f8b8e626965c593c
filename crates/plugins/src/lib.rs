//! gpu-scheduler's plugins, one module per decision. Each module exports
//! `NAME` and a `new` factory for the [`engine::registry::Registry`].
pub mod priority_sort;
pub mod scheduling_gates;
pub mod node_unschedulable;
pub mod node_name;
pub mod node_affinity;
pub mod taint_toleration;
pub mod node_ports;
pub mod default_binder;
pub mod node_resources_fit;
pub mod balanced_allocation;
pub mod resource_allocation;
pub mod pod_topology_spread;
pub mod inter_pod_affinity;
