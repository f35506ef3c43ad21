//! Step 1: authentication. Both transports call [`authenticate`] with the
//! request's headers, of which it reads `Authorization` and nothing else: a
//! token in the URL (`?token=`) or in a body is never read, so the request is
//! treated as carrying no token.

use std::time::Duration;

use loom_core::{Caller, ErrorCode, LoomError};

use crate::app::App;

/// The challenge on a 401 when no bearer was sent (OAuth off; with OAuth
/// on, [`crate::oauth::challenge`] adds `resource_metadata`).
pub const CHALLENGE: &str = "Bearer realm=\"loom\"";
/// The challenge on a 401 when the bearer sent is not valid.
pub const CHALLENGE_INVALID: &str = "Bearer realm=\"loom\", error=\"invalid_token\"";
/// The challenge on a 400 for a request that sends its credentials amiss
/// (RFC 6750 §3.1 `invalid_request`: more than one of them).
pub const CHALLENGE_MALFORMED: &str = "Bearer realm=\"loom\", error=\"invalid_request\"";
/// The challenge on a 403 for a valid token that may not do what it asked
/// (RFC 6750 §3.1 `insufficient_scope`).
pub const CHALLENGE_INSUFFICIENT: &str = "Bearer realm=\"loom\", error=\"insufficient_scope\"";

/// A refused authentication: the error, and which `WWW-Authenticate`
/// challenge the transport sends with it ([`AuthRefusal::challenge`]).
#[derive(Debug)]
pub struct AuthRefusal {
    /// UNAUTHENTICATED (401), BAD_REQUEST (400) or NOT_READY (503, with a
    /// wait).
    pub error: LoomError,
    /// The `WWW-Authenticate` challenge it goes with; none on a 503.
    challenge: Option<Challenge>,
}

/// Which `WWW-Authenticate` challenge a refusal sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// No bearer (401): the challenge without `error`.
    Missing = 0,
    /// A bearer that failed a check (401): `error="invalid_token"`.
    InvalidToken = 1,
    /// A valid bearer whose caller may not do what it asked (403):
    /// `error="insufficient_scope"`.
    InsufficientScope = 2,
    /// Credentials sent amiss (400): `error="invalid_request"`.
    InvalidRequest = 3,
}

impl AuthRefusal {
    /// The `WWW-Authenticate` value to send with the refusal from `resource`.
    pub fn challenge(&self, app: &App, resource: crate::oauth::Protected) -> Option<&'static str> {
        Some(crate::oauth::challenge(app, resource, self.challenge?))
    }
}

/// The challenge a refusal of an authenticated call sends:
/// `insufficient_scope` for a caller whose role, namespaces or org do not
/// reach what it asked (RFC 6750 §3.1; MCP 2025-11-25, "Runtime
/// Insufficient Scope Errors"), none for any other. Over MCP the same
/// refusals are the tool's result, not an HTTP 403.
pub fn forbidden_challenge(
    app: &App,
    resource: crate::oauth::Protected,
    error: &LoomError,
) -> Option<&'static str> {
    match error.code() {
        ErrorCode::AuthInsufficient
        | ErrorCode::NamespaceNotAccessible
        | ErrorCode::OrgMismatch => Some(crate::oauth::challenge(
            app,
            resource,
            Challenge::InsufficientScope,
        )),
        _ => None,
    }
}

fn missing() -> AuthRefusal {
    AuthRefusal {
        error: LoomError::new(
            ErrorCode::Unauthenticated,
            "a bearer token is required (Authorization: Bearer <token>)",
        ),
        challenge: Some(Challenge::Missing),
    }
}

fn invalid(why: &str) -> AuthRefusal {
    refused(
        why,
        "the bearer token is not valid (expired, revoked or not issued by this server)",
    )
}

fn refused(why: &str, message: &str) -> AuthRefusal {
    tracing::info!(reason = why, "bearer token refused");
    AuthRefusal {
        error: LoomError::new(ErrorCode::Unauthenticated, message),
        challenge: Some(Challenge::InvalidToken),
    }
}

/// Credentials sent amiss, whatever they hold: 400 `invalid_request`.
fn malformed(why: &str, message: &str) -> AuthRefusal {
    tracing::info!(reason = why, "bearer token refused");
    AuthRefusal {
        error: LoomError::new(ErrorCode::BadRequest, message),
        challenge: Some(Challenge::InvalidRequest),
    }
}

/// Authenticates one call from its headers' one `Authorization` value
/// ([`check_bearer`]). A request carrying two is malformed whatever they
/// hold (RFC 6750 §3.1: 400 `invalid_request`): which one a proxy or a log
/// in front of the server read is anyone's guess, and taking the first let
/// a valid token ride along with any other.
pub fn authenticate(
    app: &App,
    headers: &axum::http::HeaderMap,
) -> Result<Option<Caller>, AuthRefusal> {
    let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let first = values.next();
    if values.next().is_some() && app.config.auth_required {
        return Err(malformed(
            "more than one Authorization header",
            "the request carries more than one Authorization header; send one bearer token",
        ));
    }
    check_bearer(app, first.map(axum::http::HeaderValue::as_bytes))
}

/// Authenticates one call from its `Authorization` header value (`None`
/// when the header is absent; pass the raw bytes, the scheme is matched
/// case-insensitively).
///
/// - Authentication off (`LOOM_AUTH_REQUIRED=false`): `Ok(None)`; any
///   bearer is ignored and the call runs as `anonymous` with the admin role.
/// - No bearer (or another scheme): 401, challenge without `error`.
/// - Every 401 challenge names the protected-resource metadata when OAuth
///   is on ([`crate::oauth::challenge`]).
/// - A bearer that fails any check (signature, algorithm, expiry, issuer,
///   audience, claims, revoked `jti`): 401 with `error="invalid_token"`.
/// - The revocation list has not loaded yet: 503 NOT_READY with a wait.
pub fn check_bearer(
    app: &App,
    authorization: Option<&[u8]>,
) -> Result<Option<Caller>, AuthRefusal> {
    if !app.config.auth_required {
        return Ok(None);
    }
    let Some(raw) = authorization else {
        return Err(missing());
    };
    let Ok(value) = std::str::from_utf8(raw) else {
        return Err(invalid("header is not UTF-8"));
    };
    let value = value.trim();
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(missing());
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(invalid("empty bearer"));
    }
    let claims = app.keys.verify(token).map_err(|e| invalid(&e.0))?;
    match app.revocations.is_revoked(&claims.jti) {
        None => {
            return Err(AuthRefusal {
                error: LoomError::new(
                    ErrorCode::NotReady,
                    "the server is starting: credentials cannot be checked yet",
                )
                .with_retry_after(Duration::from_secs(1)),
                challenge: None,
            });
        }
        Some(true) => return Err(invalid("revoked jti")),
        Some(false) => {}
    }
    let platform_admin = claims.platform_admin || app.config.platform_admins.contains(&claims.sub);
    Ok(Some(Caller {
        subject: claims.sub,
        org: claims.org,
        role: Some(claims.role),
        namespaces: claims.namespaces,
        platform_admin,
        consumer: claims.consumer,
        jti: Some(claims.jti),
        anonymous: false,
    }))
}
