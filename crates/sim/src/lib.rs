//! Offline simulation with the real engine: Kubernetes manifests in, a
//! placement report out. The same `Scheduler` as `run`, a simulated clock
//! and an in-memory binder.

pub mod compare;
pub mod generate;
pub mod manifests;
pub mod openb;
pub mod replay;
pub mod report;
pub mod simulate;
pub mod timed;
pub mod workloads;

pub use manifests::{ManifestError, Manifests};
pub use simulate::{Preemption, SimError, SimOptions, Simulation, simulate};
