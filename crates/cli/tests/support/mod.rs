pub mod cluster;
pub mod reliability;
