//! Transports: each turns its protocol into [`crate::pipeline`] calls and
//! renders the one [`loom_core::LoomError`] its own way.

pub mod guard;
pub mod http;
pub mod json;
pub mod mcp;
