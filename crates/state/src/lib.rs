//! The cluster as the scheduler believes it, below the engine: the cache
//! and its snapshots, each node's `NodeInfo` and the accounting of every
//! domain on it — GPU devices and their fragmentation measures, DRA and
//! volume objects, node facts, queue usage, gang membership — and the
//! cluster load the policy rules read.
//!
//! It knows no plugin, no framework, no configuration file and no client:
//! it is told what changed and answers what is. The engine
//! (`gpu-scheduler-engine`) builds on it and re-exports its modules.

// The object model's modules, under the names this crate's code uses.
pub use gpu_scheduler_model::{bounds, disruption, model, quantity, resources, selectors, time};

pub mod cache;
pub mod devices;
pub mod dra;
pub mod facts;
pub mod gang;
pub mod node_info;
pub mod policy_switch;
pub mod queues;
pub mod testing;
pub mod volumes;
