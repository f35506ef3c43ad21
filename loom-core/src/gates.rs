//! The interfaces of the gates every call passes, so a shared implementation
//! can replace an in-process one without touching the pipeline.
//!
//! - [`RateLimiter`]: token buckets per (org, subject, class). The server
//!   ships an in-process implementation and shared ones (PostgreSQL, Redis)
//!   that several replicas behind a load balancer draw from together,
//!   chosen by `LOOM_RATE_LIMIT_STORE`. `check` is async because a shared
//!   implementation asks a server.
//! - [`EventSink`]: where the call ledger (`agent_events`) goes, in batches,
//!   off the request path. The store is the first sink; a column store can
//!   take the stream later behind the same trait.

use std::sync::Arc;
use std::time::Duration;

use crate::cx::Transport;
use crate::error::LoomError;
use crate::op::BoxFuture;
use crate::rate::RateClass;

/// Whose bucket a call draws from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateKey {
    /// The org the call acts in.
    pub org: String,
    /// The token subject (`anonymous` when auth is off).
    pub subject: String,
}

/// Token buckets by caller and class.
pub trait RateLimiter: Send + Sync + 'static {
    /// Takes one token from `key`'s `class` bucket: `Ok(())` when the call may
    /// run, `Err(wait)` with how long until a token is available when not.
    fn check<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
    ) -> BoxFuture<'a, Result<(), Duration>>;
}

/// One call in the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentEvent {
    /// The org the call acted in.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// The token subject.
    pub subject: String,
    /// The agent.
    pub agent: String,
    /// The token's consumer claim.
    pub consumer: Option<String>,
    /// The op.
    pub op: String,
    /// The transport.
    pub transport: Transport,
    /// The run the call belongs to.
    pub run_id: Option<String>,
    /// The MCP session.
    pub session_id: Option<String>,
    /// The request id.
    pub request_id: String,
    /// `ok`, or the error code.
    pub outcome: String,
    /// The HTTP status the call answered with.
    pub status: u16,
    /// How long the call took.
    pub latency_ms: u64,
    /// When it finished (milliseconds since the Unix epoch).
    pub at_ms: i64,
}

impl Transport {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Mcp => "mcp",
            Transport::Local => "local",
        }
    }
}

/// Where ledger rows are written, a batch at a time.
pub trait EventSink: Send + Sync + 'static {
    /// Writes every event of the batch, or none. The batch is shared, so a
    /// sink may hand it to another thread without copying it.
    fn write_events<'a>(
        &'a self,
        events: &'a Arc<[AgentEvent]>,
    ) -> BoxFuture<'a, Result<(), LoomError>>;
}
