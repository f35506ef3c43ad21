//! MCP over streamable HTTP at `/mcp`. JSON bodies only, never an event
//! stream. This transport knows no op by name except the synthetic tools
//! (`loom_search` → `search.query`, `loom_activate`, `loom_op`) and the primer.

mod cancel;
pub mod config;
pub mod endpoint;
pub mod jsonrpc;
pub mod listing;
mod methods;
pub mod outcome;
pub mod primer;
pub mod protocol;
pub mod session;
mod tools;

pub use endpoint::router;
