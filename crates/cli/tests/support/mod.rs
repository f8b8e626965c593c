pub mod cluster;
pub mod proxy;
pub mod reliability;
