//! # loom-server: transports, workers, configuration and the `loom` binary

pub mod cli;
pub mod transport;
