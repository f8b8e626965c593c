pub mod cluster;
