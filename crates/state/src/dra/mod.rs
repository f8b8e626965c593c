//! Dynamic Resource Allocation: the objects are the model crate's
//! (`gpu_scheduler_model::dra`, re-exported here); the cache's holding of
//! them, with the allocations decisions have assumed, is [`DraObjects`].

mod objects;

pub use gpu_scheduler_model::dra::*;
pub use objects::{DraObjects, GpuLayout};
