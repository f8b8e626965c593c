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

// The object model lives below the engine, in its own crate; its modules
// are re-exported under their old names.
pub use gpu_scheduler_model::{bounds, disruption, model, quantity, resources, selectors, time};

pub mod algorithm;
pub mod cache;
pub mod config;
pub mod convert;
pub mod devices;
pub mod dra;
pub mod explain;
pub mod extender;
pub mod facts;
pub mod forecast;
pub mod framework;
pub mod gang;
pub mod instrument;
pub mod node_info;
pub mod policy_switch;
pub mod profile;
pub mod queue;
pub mod queues;
pub mod registry;
pub mod scheduler;
pub mod spot_drain;
pub mod starvation;
pub mod testing;
pub mod volumes;
