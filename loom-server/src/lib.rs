//! # loom-server: transports, workers, configuration and the `loom` binary
//!
//! - [`config`]: every `LOOM_*` variable, parsed once;
//! - [`app`]: the shared state and [`app::spawn`], which serves it;
//! - [`pipeline`]: the one path every call takes ([`pipeline::authenticate`],
//!   then [`pipeline::call`]);
//! - [`transport`]: HTTP (`POST /v1/<op>`);
//! - [`tokens`]: access tokens and the revocation list;
//! - [`oauth`]: OAuth 2.1 sign-in (discovery, registration, authorize, token)
//!   and the 401 challenge ([`oauth::challenge`]);
//! - [`cli`]: `loom serve`, `loom migrate`, `loom token …`, `loom user …`,
//!   `loom export-actions`.

pub mod app;
pub mod cli;
pub mod config;
pub mod oauth;
pub mod pipeline;
pub mod readiness;
pub mod tokens;
pub mod transport;
pub mod workers;

pub use app::{App, RunningServer, spawn};
pub use config::Config;
