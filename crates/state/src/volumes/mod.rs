//! Volumes: the objects are the model crate's
//! (`gpu_scheduler_model::volumes`, re-exported here); the cache's holding
//! of them, with the bindings decisions have assumed, is [`VolumeObjects`].

mod objects;

pub use gpu_scheduler_model::volumes::*;
pub use objects::{AssumedBinding, VolumeObjects};
