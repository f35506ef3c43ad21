//! # loom-server: transports, workers, configuration and the `loom` binary
//!
//! - [`config`]: every `LOOM_*` variable, parsed once;
//! - [`app`]: the shared state and [`app::spawn`], which serves it;
//! - [`pipeline`]: the one path every call takes ([`pipeline::authenticate`],
//!   then [`pipeline::call`]);
//! - [`transport`]: HTTP (`POST /v1/<op>`);
//! - [`tokens`]: access tokens and the revocation list;
//! - [`cli`]: `loom serve`, `loom migrate`, `loom token …`, `loom export-actions`.

pub mod app;
pub mod cli;
pub mod config;
pub mod pipeline;
pub mod tokens;
pub mod transport;
pub mod workers;

pub use app::{App, RunningServer, spawn};
pub use config::Config;
