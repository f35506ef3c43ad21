//! The `/mcp` endpoint: POST (one message or a batch), DELETE (end the
//! session), GET (405: Loom answers JSON, never an event stream).
//!
//! Order of checks on a POST, each answered before the next runs:
//! the whole body is read first (so a keep-alive connection stays in step);
//! `Host` and `Origin` (403); `MCP-Protocol-Version` (400, -32022, before any
//! session or method check, which the Python SDK's discovery probe relies
//! on); JSON-RPC framing (-32700 / -32600, HTTP 200); the session (404 for an
//! unknown one); the bearer (401 / 503); then each message.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use loom_core::{Caller, ErrorCode, Listing, LoomError, Profile, RateClass};
use serde_json::Value;

use super::cancel::InFlight;
use super::config::AuthMode;
use super::jsonrpc::{self, Body as RpcBody, JsonText, Message, code};
use super::listing::Listings;
use super::methods;
use super::protocol::{self, Revision};
use super::session::{self, Session, Sessions};
use crate::app::App;
use crate::pipeline;
use crate::transport::guard;
use crate::transport::http::{RequestId, read_bytes};

/// The session header.
pub static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// The protocol version header.
pub static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// What the MCP transport keeps between requests.
pub struct Mcp {
    /// The server.
    pub app: Arc<App>,
    /// Live sessions.
    pub sessions: Sessions,
    /// Cached listings.
    pub listings: Listings,
    /// Requests in flight, for `notifications/cancelled`.
    pub in_flight: InFlight,
    sweep: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Mcp {
    fn drop(&mut self) {
        if let Some(sweep) = self.sweep.lock().unwrap_or_else(|p| p.into_inner()).take() {
            sweep.abort();
        }
    }
}

/// The `/mcp` routes, with their own state; starts the session-run sweep
/// unless `LOOM_WORKERS=false`.
pub fn router(app: Arc<App>) -> Router {
    let mcp = Arc::new(Mcp {
        sessions: Sessions::new(app.config.mcp.session_cache),
        listings: Listings::new(app.registry),
        in_flight: InFlight::default(),
        sweep: std::sync::Mutex::new(None),
        app: app.clone(),
    });
    if app.config.workers {
        let weak = Arc::downgrade(&mcp);
        let handle = crate::workers::session_runs::start(app, move |closed| {
            if let Some(mcp) = weak.upgrade() {
                mcp.sessions.forget_runs(closed);
            }
        });
        *mcp.sweep.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }
    Router::new()
        .route(
            "/mcp",
            post(post_mcp)
                .delete(delete_mcp)
                .get(get_mcp)
                .fallback(other_method),
        )
        .with_state(mcp)
}

/// `?toolset=` and `?schema_profile=`.
#[derive(Debug, Default)]
pub struct ConnectionQuery {
    toolset: Option<String>,
    schema_profile: Option<String>,
}

impl ConnectionQuery {
    /// Read from the URL, never refused: what cannot be read, and a
    /// parameter given twice with two values, names nothing, so the
    /// connection gets the deployment's default as for an unknown value.
    fn from_uri(uri: &axum::http::Uri) -> ConnectionQuery {
        let Ok(Query(pairs)) = Query::<Vec<(String, String)>>::try_from_uri(uri) else {
            return ConnectionQuery::default();
        };
        let one = |key: &str| {
            let mut values = pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v);
            let first = values.next()?;
            values.all(|v| v == first).then(|| first.clone())
        };
        ConnectionQuery {
            toolset: one("toolset"),
            schema_profile: one("schema_profile"),
        }
    }
}

/// One request's connection: what it lists, how, and who calls.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The roster listed.
    pub listing: Listing,
    /// The schema profile.
    pub profile: Profile,
    /// The negotiated revision (or the header's, or the assumed one).
    pub revision: Revision,
    /// The session id, when the request carried a known one.
    pub session_id: Option<String>,
    /// The session.
    pub session: Option<Session>,
    /// Who calls (`None`: no bearer on an open method, or auth off).
    pub caller: Option<Caller>,
    /// Whether a bearer was checked (calls need one unless the mode is open).
    pub authenticated: bool,
    /// The request id.
    pub request_id: String,
    /// `X-Loom-Code-Scope`, when sent.
    pub code_scope: Option<String>,
    /// Cancelled when the client cancels the request being answered.
    pub cancel: Option<Arc<crate::pipeline::Cancel>>,
    /// What is left of the rate-limit wait the request's calls may sit out
    /// (`LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S`), in milliseconds: one wait
    /// for the whole request, so that a batch of rate-limited calls is not
    /// held for a wait each.
    pub rate_wait_left_ms: Arc<AtomicU64>,
}

impl Connection {
    /// Whether this request speaks for its session: always for a session
    /// no principal opened, else only with that principal's bearer. A
    /// notification needs no bearer, but one sent without it must not act
    /// in a session someone signed in to (cancel its requests).
    pub fn speaks_for_session(&self) -> bool {
        self.session
            .as_ref()
            .is_none_or(|s| s.held_by(self.caller.as_ref()))
    }
}

fn rpc_error_response(
    status: StatusCode,
    id: Option<&jsonrpc::Id>,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response {
    (
        status,
        axum::Json(jsonrpc::error_response(id, code, message, data)),
    )
        .into_response()
}

/// The body for the answers, each JSON text already: the one answer, or
/// the batch's as an array.
fn batch_text(mut answers: Vec<JsonText>, batch: bool) -> String {
    if !batch
        && answers.len() == 1
        && let Some(answer) = answers.pop()
    {
        return answer.into_string();
    }
    let mut text =
        String::with_capacity(answers.iter().map(|a| a.as_str().len() + 1).sum::<usize>() + 1);
    text.push('[');
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(answer.as_str());
    }
    text.push(']');
    text
}

/// A 200 with a JSON body written already.
fn json_text(text: String) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        text,
    )
        .into_response()
}

/// The id a refusal of the whole request names: the request's own when
/// the body is one request (clients match an error to its request by id);
/// none for a batch or a notification, which JSON-RPC answers id-less.
fn sole_id(messages: &[Message], batch: bool) -> Option<&jsonrpc::Id> {
    match messages {
        [Message::Request { id, .. }] if !batch => Some(id),
        _ => None,
    }
}

/// The 404 for a session Loom does not know (ended, pruned, never opened,
/// or another principal's): the client initializes again. `id` is the
/// request's when the body was one request.
fn session_gone(id: Option<&jsonrpc::Id>) -> Response {
    rpc_error_response(
        StatusCode::NOT_FOUND,
        id,
        code::INVALID_REQUEST,
        "unknown or ended session: initialize again",
        None,
    )
}

fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `Mcp-Session-Id` the request names: `Err` when it sends one that is
/// not visible ASCII, which names no session Loom issued (its ids are), so
/// it is answered as an unknown session rather than as no session at all.
fn session_header(headers: &HeaderMap) -> Result<Option<&str>, ()> {
    match headers.get(&SESSION_ID) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| ()),
    }
}

/// The 403 for a foreign `Host` or `Origin`.
/// An answer given before any message runs (boxed: a `Response` is large).
type Early = Box<Response>;

fn check_host_and_origin(mcp: &Mcp, headers: &HeaderMap) -> Result<(), Early> {
    if mcp.app.guard.admits(headers) {
        Ok(())
    } else {
        let refusal = LoomError::new(ErrorCode::ForeignOrigin, guard::REFUSAL);
        Err(Box::new(rpc_error_response(
            StatusCode::FORBIDDEN,
            None,
            code::INVALID_REQUEST,
            guard::REFUSAL,
            Some(Value::Object(refusal.body())),
        )))
    }
}

/// The 400 / -32022 for an `MCP-Protocol-Version` Loom does not serve.
/// Every value of the header is checked: a request that sends it twice is
/// refused when either names a revision Loom does not serve, or when the
/// two name different ones, whatever their order.
fn check_protocol_header(
    headers: &HeaderMap,
    id: Option<&jsonrpc::Id>,
) -> Result<Option<Revision>, Early> {
    let mut named = None;
    for raw in headers.get_all(&PROTOCOL_VERSION) {
        let requested = raw.to_str().unwrap_or("");
        let refused = |message: String| {
            Box::new(rpc_error_response(
                StatusCode::BAD_REQUEST,
                id,
                code::UNSUPPORTED_PROTOCOL_VERSION,
                &message,
                Some(protocol::unsupported_data(requested)),
            ))
        };
        let Some(revision) = Revision::parse(requested) else {
            return Err(refused(format!(
                "unsupported protocol version {requested:?}"
            )));
        };
        if named.is_some_and(|r| r != revision) {
            return Err(refused(format!(
                "conflicting MCP-Protocol-Version headers: {requested:?} and another"
            )));
        }
        named = Some(revision);
    }
    Ok(named)
}

/// Whether a method needs a bearer in this auth mode.
fn needs_bearer(mode: AuthMode, method: &str) -> bool {
    match mode {
        AuthMode::Required => !method.starts_with("notifications/"),
        AuthMode::DiscoveryOnly => method == "tools/call",
        AuthMode::Open => false,
    }
}

fn auth_refusal_response(
    app: &App,
    refusal: pipeline::AuthRefusal,
    id: Option<&jsonrpc::Id>,
) -> Response {
    let status = StatusCode::from_u16(refusal.error.status()).unwrap_or(StatusCode::UNAUTHORIZED);
    let mut data = refusal.error.body();
    data.remove("message");
    let mut response = rpc_error_response(
        status,
        id,
        code::INVALID_REQUEST,
        refusal.error.message(),
        Some(Value::Object(data)),
    );
    if let Some(secs) = refusal.error.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(challenge) = refusal.challenge(app, crate::oauth::Protected::Mcp) {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    response
}

/// Authenticates per the auth mode: `Ok((caller, checked))`.
fn authenticate(
    mcp: &Mcp,
    headers: &HeaderMap,
    required: bool,
    id: Option<&jsonrpc::Id>,
) -> Result<(Option<Caller>, bool), Early> {
    let mode = mcp.app.config.mcp.auth_mode;
    if !mcp.app.config.auth_required {
        return Ok((None, true));
    }
    match pipeline::authenticate(&mcp.app, headers) {
        Ok(caller) => Ok((caller, true)),
        Err(refusal) if required => Err(Box::new(auth_refusal_response(&mcp.app, refusal, id))),
        // An open method (or open mode): an absent or invalid bearer is ignored.
        Err(_) if mode == AuthMode::Open => Ok((None, true)),
        Err(_) => Ok((None, false)),
    }
}

/// Takes the request whole: its headers and request id are moved out of it
/// (the `HeaderMap` and `Extension` extractors clone them, every call).
async fn post_mcp(State(mcp): State<Arc<Mcp>>, request: Request) -> Response {
    let session_id = request.headers().get(&SESSION_ID).cloned();
    echo_session(session_id, answer_post(mcp, request).await)
}

/// Every answer within a session names it, refusals included (a new
/// session's `initialize` answer names its own); not the one saying the
/// session is unknown, nor an id that is not visible ASCII (no session's).
fn echo_session(session_id: Option<HeaderValue>, mut response: Response) -> Response {
    if let Some(id) = session_id
        && response.status() != StatusCode::NOT_FOUND
        && id.to_str().is_ok()
    {
        response
            .headers_mut()
            .entry(SESSION_ID.clone())
            .or_insert(id);
    }
    response
}

async fn answer_post(mcp: Arc<Mcp>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let query = ConnectionQuery::from_uri(&parts.uri);
    let Some(RequestId(request_id)) = parts.extensions.remove::<RequestId>() else {
        // The router's request-id layer gives every request one.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let headers = &parts.headers;
    let bytes = read_bytes(&mcp.app, headers, body).await;
    if let Err(refusal) = check_host_and_origin(&mcp, headers) {
        return *refusal;
    }
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            return rpc_error_response(
                status,
                None,
                code::INVALID_REQUEST,
                e.message(),
                Some(Value::Object(e.body())),
            );
        }
    };
    // Parsed before the header is checked, which still answers first: a
    // refusal of the whole request names the request's id when it is one.
    let parsed = jsonrpc::parse(&bytes);
    let sole = match &parsed {
        Ok(RpcBody::Single(m)) => sole_id(std::slice::from_ref(m), false),
        _ => None,
    };
    let header_revision = match check_protocol_header(headers, sole) {
        Ok(r) => r,
        Err(refusal) => return *refusal,
    };
    let parsed = match parsed {
        Ok(p) => p,
        Err(e) => return (StatusCode::OK, axum::Json(e.response())).into_response(),
    };
    let (messages, batch) = match parsed {
        RpcBody::Single(m) => (vec![m], false),
        RpcBody::Batch(ms) => (ms, true),
    };
    let id = sole_id(&messages, batch);

    let Ok(session_id) = session_header(headers).map(|s| s.map(str::to_owned)) else {
        return session_gone(id);
    };
    let session = match &session_id {
        Some(sid) => match session::find(&mcp.sessions, &mcp.app.store, sid).await {
            Some(s) => Some(s),
            None => {
                return session_gone(id);
            }
        },
        None => None,
    };

    let mode = mcp.app.config.mcp.auth_mode;
    let required = messages.iter().any(|m| match m {
        Message::Request { method, .. } => needs_bearer(mode, method),
        _ => false,
    });
    let (caller, authenticated) = match authenticate(&mcp, headers, required, id) {
        Ok(a) => a,
        Err(refusal) => return *refusal,
    };
    // A session is bound to the principal that opened it, or (opened
    // with no token) to the first that acts in it.
    if let (Some(sid), Some(s), Some(c)) = (&session_id, &session, &caller)
        && !session::claim(&mcp.sessions, &mcp.app.store, sid, s, c).await
    {
        return session_gone(id);
    }

    let config = &mcp.app.config.mcp;
    let listing = Listing::resolve(query.toolset.as_deref(), &config.toolset);
    let profile = query
        .schema_profile
        .as_deref()
        .and_then(Profile::parse)
        .unwrap_or(config.profile);
    let revision = session
        .as_ref()
        .map(|s| s.revision)
        .or(header_revision)
        .unwrap_or(protocol::ASSUMED);
    let mut conn = Connection {
        listing,
        profile,
        revision,
        session_id: session_id.clone(),
        session,
        caller,
        authenticated,
        request_id,
        code_scope: header_str(headers, &HeaderName::from_static("x-loom-code-scope"))
            .map(str::to_owned),
        cancel: None,
        rate_wait_left_ms: Arc::new(AtomicU64::new(
            u64::try_from(mcp.app.config.mcp.ratelimit_retry_max_wait.as_millis())
                .unwrap_or(u64::MAX),
        )),
    };

    let mut answers = Vec::new();
    let mut cancelled = None;
    for message in messages {
        // Every request but initialize may be cancelled while it runs.
        let registration = match &message {
            Message::Request { id, method, .. } if method != "initialize" => {
                Some((mcp.in_flight.begin(&conn, id), id.clone()))
            }
            _ => None,
        };
        conn.cancel = registration.as_ref().map(|(r, _)| r.cancel().clone());
        let answer = methods::handle(&mcp, &mut conn, message, batch).await;
        match registration {
            // A cancelled request is not answered, whatever became of it.
            Some((r, id)) if r.cancel().is_cancelled() => cancelled = Some(id),
            _ => answers.extend(answer),
        }
    }
    // A POST whose requests were all cancelled still needs a JSON answer;
    // its client has stopped waiting for it.
    if answers.is_empty()
        && let Some(id) = cancelled
    {
        answers.push(JsonText::of(&jsonrpc::error_response(
            Some(&id),
            code::REQUEST_CANCELLED,
            "request cancelled",
            None,
        )));
    }
    let mut response = if answers.is_empty() {
        StatusCode::ACCEPTED.into_response()
    } else {
        json_text(batch_text(answers, batch))
    };
    if let Some(id) = conn
        .session_id
        .as_deref()
        .and_then(|id| HeaderValue::from_str(id).ok())
    {
        response.headers_mut().insert(SESSION_ID.clone(), id);
    }
    response
}

async fn delete_mcp(State(mcp): State<Arc<Mcp>>, headers: HeaderMap, body: Body) -> Response {
    let session_id = headers.get(&SESSION_ID).cloned();
    echo_session(session_id, end_session(mcp, headers, body).await)
}

async fn end_session(mcp: Arc<Mcp>, headers: HeaderMap, body: Body) -> Response {
    let _ = read_bytes(&mcp.app, &headers, body).await;
    if let Err(refusal) = check_host_and_origin(&mcp, &headers) {
        return *refusal;
    }
    if let Err(refusal) = check_protocol_header(&headers, None) {
        return *refusal;
    }
    let Ok(id) = session_header(&headers) else {
        return session_gone(None);
    };
    let Some(id) = id.map(str::to_owned) else {
        return rpc_error_response(
            StatusCode::BAD_REQUEST,
            None,
            code::INVALID_REQUEST,
            "DELETE /mcp needs an Mcp-Session-Id header",
            None,
        );
    };
    let required = mcp.app.config.mcp.auth_mode == AuthMode::Required;
    let (caller, _) = match authenticate(&mcp, &headers, required, None) {
        Ok(a) => a,
        Err(refusal) => return *refusal,
    };
    // Rate-limited as run.complete, per caller within the org.
    let key = pipeline::identity::rate_key(caller.as_ref());
    let class = mcp
        .app
        .registry
        .get("run.complete")
        .map_or(RateClass::Write, |op| op.rate);
    if let Err(wait) = mcp.app.limiter.check(&key, class).await {
        let err = LoomError::new(
            ErrorCode::RateLimited,
            "too many session ends; retry after the wait",
        )
        .with_retry_after(wait);
        let mut response = rpc_error_response(
            StatusCode::TOO_MANY_REQUESTS,
            None,
            code::INVALID_REQUEST,
            err.message(),
            Some(Value::Object(err.body())),
        );
        if let Some(secs) = err.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        return response;
    }
    // A session has an implicit run in each org it acted in: a caller
    // bound to its org has runs there only, an org-wide token or a
    // platform admin wherever it acted.
    let org = caller
        .as_ref()
        .filter(|c| c.org != "*" && !c.platform_admin)
        .map(|c| c.org.as_str());
    let subject = caller
        .as_ref()
        .map_or(pipeline::identity::ANONYMOUS, |c| c.subject.as_str());
    let close_run = || async {
        mcp.app
            .store
            .close_session_runs(org, subject, &id)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "session run not closed"
                );
                false
            })
    };
    match session::find(&mcp.sessions, &mcp.app.store, &id).await {
        Some(s) if !s.held_by(caller.as_ref()) => session_gone(None),
        Some(_) => {
            mcp.sessions.close(&id);
            if let Err(e) = mcp.app.store.mcp_session_end(&id).await {
                tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "MCP session not ended in the store: other replicas may still serve it"
                );
            }
            close_run().await;
            StatusCode::NO_CONTENT.into_response()
        }
        // A session no server keeps (opened before sessions were kept in
        // the store, or evicted from a cache whose store write failed)
        // still ends its runs, when the caller's own run of that session is
        // open: a run is keyed by its org and the caller's subject, and a
        // caller bound to an org closes runs in it only, so no one else's
        // can be closed.
        None if caller.is_some() && close_run().await => StatusCode::NO_CONTENT.into_response(),
        None => session_gone(None),
    }
}

async fn get_mcp(State(mcp): State<Arc<Mcp>>, headers: HeaderMap) -> Response {
    not_served(
        &mcp,
        &headers,
        "this server answers POST /mcp with JSON; it opens no event stream",
    )
}

/// Any method but POST, DELETE and GET (HEAD is GET's): refused as GET is,
/// in JSON with the methods served, not with the router's bare 405.
async fn other_method(
    State(mcp): State<Arc<Mcp>>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    let message =
        format!("{method} /mcp is not served: POST a JSON-RPC message, or DELETE a session");
    not_served(&mcp, &headers, &message)
}

/// The 405 for a method `/mcp` does not serve, naming the ones it does.
fn not_served(mcp: &Mcp, headers: &HeaderMap, message: &str) -> Response {
    if let Err(refusal) = check_host_and_origin(mcp, headers) {
        return *refusal;
    }
    let refusal = LoomError::new(ErrorCode::MethodNotAllowed, message);
    let mut response = rpc_error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        code::INVALID_REQUEST,
        message,
        Some(Value::Object(refusal.body())),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    echo_session(headers.get(&SESSION_ID).cloned(), response)
}
