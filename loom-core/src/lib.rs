//! # loom-core: the operation contract
//!
//! Loom's server is generated from one registry of annotated operations. An
//! op author writes one async function:
//!
//! ```ignore
//! /// Reads one memory by key. …curated MCP description…
//! #[loom_op(role = "viewer", idempotent, toolsets(core, coding, atomic))]
//! async fn get(cx: &OpCx, input: MemoryGet) -> OpResult<MemoryGot> { … }
//! ```
//!
//! and [`loom_op`] emits, beside the untouched function, a const [`OpMeta`]
//! that `inventory` collects. [`Registry::global`] validates and indexes every
//! entry once; the MCP listing, `POST /v1/<op>`, `ops.capabilities`,
//! `loom export-actions` and the docs all read it.
//!
//! ## `#[loom_op]` keys
//!
//! | key | meaning | default |
//! | --- | --- | --- |
//! | `name = "plane.verb"` | the op name, lowercase dotted | derived: module's last segment + `.` + fn name |
//! | `role = "viewer" \| "writer" \| "admin"` | minimum role | required |
//! | `idempotent` | accepts an idempotency key; a repeat changes nothing more | off |
//! | `audit` | writes an `audit_log` row in the change's transaction | off |
//! | `writes` | changes state although its role is viewer | off |
//! | `destructive` | can remove or irreversibly replace data | derived from the verb (delete, purge, …) |
//! | `toolsets(core, coding, tracker, tasks, atomic, assistant)` | curated rosters that list it; `readonly` and `all` are derived | none (callable by name) |
//! | `maturity = "stable" \| "experimental"` | | stable |
//! | `mcp_hidden = "what to use instead"` | neither listed nor callable over MCP | callable |
//! | `budget_ms = N` | latency budget | by role: viewer 2 s, writer 5 s, admin 10 s |
//! | `rate = "read" \| "write" \| "heavy"` | rate-limit class | read for read-only ops, else write |
//! | `run_scoped = false` | not part of an MCP session's implicit run | true |
//! | `tool = "loom_…"` | its MCP tool name, where not the derived one | `loom_` + the name with dots as underscores |
//! | `synthetic` | one of the transport's synthetic tools (needs `tool`): listed on every listing but assistant's, never declared on a roster | off |
//!
//! The handler's doc comment is the op's curated description; without one,
//! listings show a one-line fallback with its budget, idempotency and role.
//!
//! Input fields the server fills (`org`, `agent`, `user_id`, `session_id`,
//! `consumer`) are removed from MCP listings by name; mark others with
//! `#[schemars(extend("x-loom-field" = "mcp_hidden"))]` (or `"dashboard"`).

// Lets `#[loom_op]` expansions (which name `::loom_core`) compile inside this
// crate's own tests.
extern crate self as loom_core;

pub mod access;
mod args;
mod capabilities;
mod cx;
pub mod effect;
mod error;
pub mod export;
pub mod gates;
pub mod lean;
pub mod maturity;
pub mod naming;
mod op;
mod output;
pub mod rate;
mod registry;
pub mod render;
pub mod role;
pub mod schema;
pub mod toolset;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use access::{NamespaceFacts, Reach};
pub use args::{Unknown, Validator, as_listed, closest, similarity, type_name, whole_i64};
pub use capabilities::{OpCapability, capabilities};
pub use cx::{CallOptions, Caller, OpCx, Scope, Services, Transport};
pub use effect::{Annotations, Effect};
pub use error::{Category, ErrorCode, LoomError, OpResult};
pub use gates::{AgentEvent, EventSink, RateKey, RateLimiter};
pub use loom_macros::loom_op;
pub use maturity::Maturity;
pub use op::{BoxFuture, HandlerFn, McpVisibility, OpEntry, OpMeta, OpName, TypeInfo};
pub use output::Output;
pub use rate::RateClass;
pub use registry::{Op, Registry, RegistryError, default_budget, fallback_description};
pub use role::Role;
pub use schema::Profile;
pub use toolset::{Listing, Toolset};

#[cfg(test)]
mod tests;
