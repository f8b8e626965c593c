//! The scheduling framework, the contract between the scheduler and its
//! plugins: the extension points and what flows through them
//! ([`framework`]: `Plugin` and the traits of PreFilter, Filter,
//! PostFilter, Score, Reserve, Permit, ...; `CycleState`, `Status`,
//! `ClusterEvent`, `Binder`), the [`registry`] that builds plugins by name
//! from their arguments, and the [`instrument`] that times them.
//!
//! It knows the cluster's state (`gpu-scheduler-state`) and nothing of the
//! scheduler that drives it: no queue, no algorithm, no configuration of
//! profiles. Plugins and the engine both depend on it.

// The lower crates' modules under one roof: a plugin depends on this
// crate alone.
pub use gpu_scheduler_model::{bounds, disruption, go_duration, model, quantity, resources, selectors, time};
pub use gpu_scheduler_state::{cache, devices, dra, facts, gang, node_info, policy_switch, queues, testing, volumes};

pub mod framework;
pub mod instrument;
pub mod registry;
