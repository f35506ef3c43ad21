//! One error type for every refusal and fault.
//!
//! A [`LoomError`] carries a stable [`ErrorCode`] (which fixes the HTTP status,
//! the category and whether a retry can help), a message meant for the
//! client, optional structured detail that transports copy into their error
//! bodies, and an optional internal message that is logged but never sent.
//! Each transport renders this one value its own way: the HTTP envelope, an
//! MCP `isError` result, or a JSON-RPC error.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

/// The broad class of an error, shown to clients so that they can decide
/// what to do without knowing every code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Category {
    /// The request was wrong; fix it before sending it again.
    Validation,
    /// Who is calling, or what they may do.
    Auth,
    /// What was asked for does not exist.
    NotFound,
    /// The state of the data refuses the change (locks, pins, versions).
    Conflict,
    /// Too many calls; wait and retry.
    RateLimit,
    /// The server cannot answer now; retry later.
    Unavailable,
    /// A fault inside Loom.
    Internal,
}

impl Category {
    /// The class in words, as a refusal text ends with it.
    pub fn advice(self) -> &'static str {
        match self {
            Category::Validation => "validation: fix the arguments before retrying",
            Category::Auth => "auth: do not retry unchanged",
            Category::NotFound => "not found: do not retry unchanged",
            Category::Conflict => "conflict: re-read the current state, then retry",
            Category::RateLimit => "rate limit: retry after the wait",
            Category::Unavailable => "unavailable: retry later",
            Category::Internal => "internal: retry later; report it if it persists",
        }
    }

    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Validation => "validation",
            Category::Auth => "auth",
            Category::NotFound => "not_found",
            Category::Conflict => "conflict",
            Category::RateLimit => "rate_limit",
            Category::Unavailable => "unavailable",
            Category::Internal => "internal",
        }
    }
}

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $status:literal, $category:ident, $retryable:literal;)*) => {
        /// Every stable error code Loom answers with.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as clients see it (`LOCKED`, `RATE_LIMITED`, …).
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// The HTTP status this code answers with.
            pub const fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            /// The category of this code.
            pub const fn category(self) -> Category {
                match self { $(ErrorCode::$variant => Category::$category,)* }
            }

            /// Whether sending the same request again later can succeed.
            pub const fn retryable(self) -> bool {
                match self { $(ErrorCode::$variant => $retryable,)* }
            }
        }
    };
}

error_codes! {
    /// Arguments failed validation.
    InvalidArguments = "INVALID_ARGUMENTS", 422, Validation, false;
    /// A state-changing op was given a key that is probably a typo.
    UnknownArgument = "UNKNOWN_ARGUMENT", 422, Validation, false;
    /// The request body is not what the endpoint takes (malformed JSON, wrong shape).
    BadRequest = "BAD_REQUEST", 400, Validation, false;
    /// The request body is over the configured limit.
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", 413, Validation, false;
    /// The request body is in a content coding the server does not decode.
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415, Validation, false;
    /// The client did not send its request within the read timeout.
    RequestTimeout = "REQUEST_TIMEOUT", 408, Validation, true;
    /// The HTTP method is not the one the endpoint takes.
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405, Validation, false;
    /// An idempotency key was reused with a different request.
    IdempotencyMismatch = "IDEMPOTENCY_KEY_MISMATCH", 422, Validation, false;
    /// No op of that name.
    UnknownOp = "UNKNOWN_OP", 404, NotFound, false;
    /// The op exists but is not served over MCP.
    OpNotOnMcp = "OP_NOT_ON_MCP", 404, NotFound, false;
    /// The thing asked for does not exist.
    ResourceNotFound = "RESOURCE_NOT_FOUND", 404, NotFound, false;
    /// No valid credentials.
    Unauthenticated = "UNAUTHENTICATED", 401, Auth, false;
    /// The caller's role is below the op's minimum role.
    AuthInsufficient = "AUTH_INSUFFICIENT", 403, Auth, false;
    /// The token neither names the namespace nor holds a grant on it.
    NamespaceNotAccessible = "NAMESPACE_NOT_ACCESSIBLE", 403, Auth, false;
    /// The token may not act in that org.
    OrgMismatch = "ORG_MISMATCH", 403, Auth, false;
    /// The request's `Host` or `Origin` names a host the server does not
    /// serve (DNS-rebinding and cross-site protection).
    ForeignOrigin = "FOREIGN_ORIGIN", 403, Auth, false;
    /// The key is locked.
    Locked = "LOCKED", 409, Conflict, false;
    /// The memory is pinned.
    PinnedConflict = "PINNED_CONFLICT", 409, Conflict, false;
    /// The expected version is not the current one (the same request never
    /// succeeds: read the memory again and send its version).
    VersionConflict = "VERSION_CONFLICT", 409, Conflict, false;
    /// The content matches a blacklist pattern.
    Blacklisted = "BLACKLISTED", 422, Conflict, false;
    /// The run has ended: what is kept for a run in progress is refused.
    RunEnded = "RUN_ENDED", 409, Conflict, false;
    /// A request with the same idempotency key is still running.
    IdempotencyInFlight = "IDEMPOTENCY_KEY_IN_FLIGHT", 409, Conflict, true;
    /// Too many calls in this class.
    RateLimited = "RATE_LIMITED", 429, RateLimit, true;
    /// The server is shedding load.
    Overloaded = "OVERLOADED", 503, Unavailable, true;
    /// Credentials cannot be checked yet (the revocation list has not loaded).
    NotReady = "NOT_READY", 503, Unavailable, true;
    /// The store did not answer within the op's budget.
    BackendTimeout = "BACKEND_TIMEOUT", 504, Unavailable, true;
    /// The client withdrew the call before it finished (MCP's
    /// `notifications/cancelled`); the MCP client is answered -32800, and
    /// the code is what the ledger and audit record.
    Cancelled = "CANCELLED", 499, Unavailable, true;
    /// A fault inside Loom.
    Internal = "INTERNAL", 500, Internal, true;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of every op handler.
pub type OpResult<T> = Result<T, LoomError>;

/// A refusal or fault with a stable code. Boxed, so `Result<T, LoomError>`
/// stays one pointer wide on the happy path.
#[derive(Clone, Debug)]
pub struct LoomError(Box<Inner>);

#[derive(Clone, Debug)]
struct Inner {
    code: ErrorCode,
    message: String,
    detail: Map<String, Value>,
    retry_after: Option<Duration>,
    internal: Option<String>,
}

impl LoomError {
    /// An error with a code and a client-facing message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        LoomError(Box::new(Inner {
            code,
            message: message.into(),
            detail: Map::new(),
            retry_after: None,
            internal: None,
        }))
    }

    /// A fault whose cause is logged but not shown to the client.
    pub fn internal(cause: impl fmt::Display) -> Self {
        LoomError::new(ErrorCode::Internal, "internal error").with_internal(cause.to_string())
    }

    /// Adds one field of structured detail (copied into every transport's error body).
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.detail.insert(key.to_owned(), value.into());
        self
    }

    /// Sets how long the client should wait before retrying.
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.0.retry_after = Some(wait);
        self
    }

    /// Sets the message that is logged but never sent.
    pub fn with_internal(mut self, cause: impl Into<String>) -> Self {
        self.0.internal = Some(cause.into());
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The client-facing message.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Structured detail.
    pub fn detail(&self) -> &Map<String, Value> {
        &self.0.detail
    }

    /// The wait before a retry, when there is one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after
    }

    /// Whole seconds to wait, rounded up, as `Retry-After` carries them.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.0
            .retry_after
            .map(|d| d.as_millis().div_ceil(1000).max(1) as u64)
    }

    /// The logged-only cause.
    pub fn internal_message(&self) -> Option<&str> {
        self.0.internal.as_deref()
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.0.code.status()
    }

    /// The body every transport shares: code, message, category, retryable,
    /// status, `retry_after_s` when there is a wait, then the detail.
    pub fn body(&self) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("code".into(), self.0.code.as_str().into());
        body.insert("message".into(), self.0.message.clone().into());
        body.insert("category".into(), self.0.code.category().as_str().into());
        body.insert("retryable".into(), self.0.code.retryable().into());
        body.insert("status".into(), self.status().into());
        if let Some(secs) = self.retry_after_secs() {
            body.insert("retry_after_s".into(), secs.into());
        }
        for (k, v) in &self.0.detail {
            body.entry(k.clone()).or_insert_with(|| v.clone());
        }
        body
    }
}

impl fmt::Display for LoomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)
    }
}

impl std::error::Error for LoomError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_upper_snake() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(s.chars().all(|c| c.is_ascii_uppercase() || c == '_'), "{s}");
            assert!((400..600).contains(&code.status()), "{s}");
        }
    }

    #[test]
    fn body_carries_the_envelope_fields_and_detail() {
        let err = LoomError::new(ErrorCode::RateLimited, "slow down")
            .with_retry_after(Duration::from_millis(1500))
            .with_detail("class", "write");
        let body = err.body();
        assert_eq!(body["code"], "RATE_LIMITED");
        assert_eq!(body["status"], 429);
        assert_eq!(body["category"], "rate_limit");
        assert_eq!(body["retryable"], true);
        assert_eq!(body["retry_after_s"], 2);
        assert_eq!(body["class"], "write");
    }

    #[test]
    fn detail_never_overrides_the_code() {
        let err = LoomError::new(ErrorCode::Locked, "locked").with_detail("code", "OTHER");
        assert_eq!(err.body()["code"], "LOCKED");
    }

    #[test]
    fn internal_cause_stays_out_of_the_body() {
        let err = LoomError::internal("db exploded at /var/x");
        assert!(
            !serde_json::to_string(&err.body())
                .unwrap()
                .contains("exploded")
        );
        assert_eq!(err.internal_message(), Some("db exploded at /var/x"));
    }
}
