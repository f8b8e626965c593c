//! gpu-scheduler's scheduling engine.
//!
//! Pure by design: given a snapshot of the cluster, a pod, a configuration
//! and a random seed it decides deterministically. It reads no clock (time
//! is passed in), does no I/O and knows no API client; `run` and `simulate`
//! both drive it. docs/ARCHITECTURE.md states the engine's invariants; a
//! few more it keeps:
//!
//! - No `unsafe`: `unsafe_code` is forbidden for the whole workspace
//!   (`[workspace.lints]`), and every crate opts in with
//!   `[lints] workspace = true`.
//! - One decision path: `simulate`, `replay` and `run` drive the same
//!   `Scheduler`, and an instrumented run decides as an uninstrumented one
//!   (crates/plugins/tests/instrument.rs checks it).
//! - Plugins see facts, not sources: labels and annotations become facts
//!   once per node update, and outside data (alert Events, Prometheus) is
//!   gathered off the scheduling path by `run`'s providers and laid over
//!   them, so no network call happens inside Filter or Score.

// The object model and the cluster state live below the engine, in crates
// of their own; their modules are re-exported under their old names.
pub use gpu_scheduler_framework::{framework, instrument, registry};
pub use gpu_scheduler_model::{bounds, disruption, model, quantity, resources, selectors, time};
pub use gpu_scheduler_state::{cache, devices, dra, facts, gang, node_info, policy_switch, queues, testing, volumes};

pub mod algorithm;
pub mod config;
pub mod convert;
pub mod explain;
pub mod extender;
pub mod forecast;
pub mod profile;
pub mod queue;
pub mod scheduler;
pub mod spot_drain;
pub mod starvation;
