//! The objects gpu-scheduler reasons about, below the engine: quantities
//! and resources, times and the bounds on outside numbers, pods and nodes
//! with their selectors, a pod's GPU request, DRA and volume objects,
//! disruption budgets, and the field errors of converting them.
//!
//! It knows no cache, no plugin, no configuration and no API client; the
//! engine (`gpu-scheduler-engine`) builds on it and re-exports its modules.

pub mod bounds;
pub mod disruption;
pub mod dra;
pub mod field;
pub mod go_duration;
pub mod gpu;
pub mod model;
pub mod quantity;
pub mod resources;
pub mod selectors;
pub mod terms;
pub mod testing;
pub mod time;
pub mod volumes;
