//! The HTTP API: `POST /v1/<op>` with the op's arguments as a JSON object;
//! the answer is the op's full output as JSON, or the error envelope
//! `{"error": {code, message, category, retryable, status, …detail}}` with
//! the matching status, `Retry-After` where there is a wait and
//! `WWW-Authenticate` on a 401. Every answer carries `x-request-id`.
//! `/healthz` says the process is alive; `/readyz` that it can serve calls
//! (its revocation list loaded, its store answering).

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use loom_core::{ErrorCode, LoomError, Transport};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::app::App;
use crate::pipeline::{self, CallRequest};

/// The request id header.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The idempotency key header.
pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// Set on an answer replayed for an idempotency key.
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request id of the request being served.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// The routes: the HTTP API, health, and MCP at `/mcp` (without the
/// request id layer, [`request_id`], which the server puts around every
/// route it serves, OAuth's included).
pub fn router(app: Arc<App>) -> Router {
    let mcp = super::mcp::router(app.clone());
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/{op}", post(call_op).fallback(method_not_allowed))
        .fallback(not_found)
        .with_state(app)
        .merge(mcp)
}

/// An incoming id is kept when it is 1 to 128 characters of `[A-Za-z0-9._:-]`.
fn sane_request_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// Gives every request an id (kept from `x-request-id` when sane), a log
/// span holding it, the `x-request-id` answer header and an "answered" line.
pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| sane_request_id(v))
        .map_or_else(|| uuid::Uuid::now_v7().simple().to_string(), str::to_owned);
    req.extensions_mut().insert(RequestId(id.clone()));
    // The path only: a query string (where a misplaced token would be) is never logged.
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let started = Instant::now();
    let mut response = next.run(req).instrument(span.clone()).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    // A body over the limit or too slow was not read whole: the connection
    // closes after this answer, and the answer says so.
    if matches!(
        response.status(),
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    ) {
        closing(&mut response);
    }
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_millis() as u64,
            "answered"
        );
    });
    response
}

/// Renders an error as the envelope.
pub fn error_response(error: &LoomError, challenge: Option<&'static str>) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(json!({ "error": error.body() }))).into_response();
    if let Some(secs) = error.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(challenge) = challenge {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    response
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.not_ready().await {
        None => axum::Json(json!({"status": "ready"})).into_response(),
        Some(why) => error_response(
            &LoomError::new(ErrorCode::NotReady, why)
                .with_retry_after(std::time::Duration::from_secs(1)),
            None,
        ),
    }
}

async fn not_found(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let response = error_response(
        &LoomError::new(
            ErrorCode::ResourceNotFound,
            "no such endpoint; ops are served at POST /v1/<op> and MCP at /mcp",
        ),
        None,
    );
    answer_unread(&app, &headers, body, response).await
}

async fn method_not_allowed(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut response = error_response(
        &LoomError::new(
            ErrorCode::MethodNotAllowed,
            "ops are called with POST /v1/<op>",
        ),
        None,
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    answer_unread(&app, &headers, body, response).await
}

/// `response`, given before the request's body was read (the request is
/// refused whole: its bearer, its op, its path): the body is read first
/// and dropped, within the body's limits. A body left unread closes the
/// connection after the answer, and a client that reuses it sends its next
/// request into a closed socket (a POST, which it does not retry). One
/// that cannot be read whole (over the limit, too slow) still closes it,
/// and the answer says so.
pub(crate) async fn answer_unread(
    app: &App,
    headers: &HeaderMap,
    body: Body,
    mut response: Response,
) -> Response {
    if read_whole(app, headers, body).await.is_err() {
        closing(&mut response);
    }
    response
}

/// Marks an answer as the connection's last.
fn closing(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}

/// "line L, column C" of a JSON error, for the 400 answer.
fn json_error(e: &serde_json::Error) -> LoomError {
    LoomError::new(
        ErrorCode::BadRequest,
        format!(
            "the body is not valid JSON: {} at line {}, column {}",
            describe(e),
            e.line(),
            e.column()
        ),
    )
    .with_detail("line", e.line())
    .with_detail("column", e.column())
}

fn describe(e: &serde_json::Error) -> String {
    // serde_json's message ends with " at line L column C"; keep the cause only.
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

async fn read_body(app: &App, headers: &HeaderMap, body: Body) -> Result<Value, LoomError> {
    let bytes = read_bytes(app, headers, body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let value: Value = super::json::from_slice(&bytes).map_err(|e| json_error(&e))?;
    // The body is the arguments, one object: anything else is the
    // request's framing, not an argument the op could name.
    if !value.is_object() {
        return Err(LoomError::new(
            ErrorCode::BadRequest,
            format!(
                "the body is JSON {}: send the op's arguments as one JSON object ({{}} for none)",
                loom_core::type_name(&value)
            ),
        ));
    }
    Ok(value)
}

/// Reads a whole request body within `LOOM_MAX_BODY_BYTES` (413) and
/// `LOOM_BODY_READ_TIMEOUT_SECS` (408), in no content coding (415).
pub(crate) async fn read_bytes(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> Result<axum::body::Bytes, LoomError> {
    // Read before it is refused, so that the connection stays usable.
    let bytes = read_whole(app, headers, body).await?;
    // A body in a content coding (gzip, br) is not decoded: say so, rather
    // than answer that the compressed bytes are not JSON.
    if let Some(coding) = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
    {
        return Err(LoomError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Encoding {coding:?} is not accepted: send the body uncompressed"),
        )
        .with_detail("content_encoding", coding.to_owned()));
    }
    Ok(bytes)
}

/// Reads a whole request body, whatever its coding, within
/// `LOOM_MAX_BODY_BYTES` (413) and `LOOM_BODY_READ_TIMEOUT_SECS` (408).
async fn read_whole(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> Result<axum::body::Bytes, LoomError> {
    let limit = app.config.max_body_bytes;
    let too_large = || {
        LoomError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is over the {limit}-byte limit"),
        )
        .with_detail("limit_bytes", limit)
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let bytes =
        match tokio::time::timeout(app.config.body_read_timeout, to_bytes(body, limit)).await {
            Err(_) => {
                return Err(LoomError::new(
                    ErrorCode::RequestTimeout,
                    "the request body did not arrive in time",
                ));
            }
            Ok(Err(e)) => {
                let over = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                    || e.to_string().contains("length limit");
                return Err(if over {
                    too_large()
                } else {
                    LoomError::new(ErrorCode::BadRequest, "the request body could not be read")
                });
            }
            Ok(Ok(bytes)) => bytes,
        };
    Ok(bytes)
}

async fn call_op(
    State(app): State<Arc<App>>,
    name: Result<Path<String>, PathRejection>,
    axum::Extension(RequestId(request_id)): axum::Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let caller = match pipeline::authenticate(&app, &headers) {
        Ok(caller) => caller,
        Err(refusal) => {
            let challenge = refusal.challenge(&app, crate::oauth::Protected::Server);
            let response = error_response(&refusal.error, challenge);
            return answer_unread(&app, &headers, body, response).await;
        }
    };
    // With authentication off nothing but the request's own headers tells
    // a web page's post from a client's (transport::guard).
    if caller.is_none() && !app.guard.admits(&headers) {
        let response = error_response(
            &LoomError::new(ErrorCode::ForeignOrigin, super::guard::REFUSAL),
            None,
        );
        return answer_unread(&app, &headers, body, response).await;
    }
    // A name that does not decode (`/v1/%ff`) names no op either: the
    // envelope, not the router's plain-text refusal.
    let name = match name {
        Ok(Path(name)) => name,
        Err(_) => {
            let response = error_response(
                &LoomError::new(
                    ErrorCode::UnknownOp,
                    "no op named that: the op name in the URL is not UTF-8",
                )
                .with_detail("suggestions", Vec::<String>::new()),
                None,
            );
            return answer_unread(&app, &headers, body, response).await;
        }
    };
    let Some(op) = app.registry.get(&name) else {
        let suggestions: Vec<&str> = app.registry.suggest(&name, 3);
        let response = error_response(
            &LoomError::new(ErrorCode::UnknownOp, format!("no op named '{name}'"))
                .with_detail("op", name.clone())
                .with_detail("suggestions", suggestions),
            None,
        );
        return answer_unread(&app, &headers, body, response).await;
    };
    let args = match read_body(&app, &headers, body).await {
        Ok(args) => args,
        Err(e) => return error_response(&e, None),
    };
    // Two keys name no one request: refused, as two Authorization headers are.
    if headers.get_all(&IDEMPOTENCY_KEY).iter().nth(1).is_some() {
        return error_response(
            &LoomError::new(
                ErrorCode::BadRequest,
                "send one Idempotency-Key header, not several",
            ),
            None,
        );
    }
    let idempotency_key = match headers.get(&IDEMPOTENCY_KEY).map(|v| v.to_str()) {
        None => None,
        Some(Ok(k)) => Some(k.to_owned()),
        Some(Err(_)) => {
            return error_response(
                &LoomError::new(
                    ErrorCode::BadRequest,
                    "the Idempotency-Key header must be visible ASCII",
                ),
                None,
            );
        }
    };
    let outcome = pipeline::call_to_completion(
        app.clone(),
        CallRequest {
            op,
            args,
            caller,
            transport: Transport::Http,
            request_id,
            idempotency_key,
            session_id: None,
            run_id: None,
            default_agent: None,
            policy: pipeline::CallPolicy::default(),
            refuse: None,
            cancel: None,
        },
    )
    .await;
    match outcome.result.and_then(|output| output.json()) {
        Ok(body) => {
            let status = StatusCode::from_u16(outcome.status).unwrap_or(StatusCode::OK);
            let json = [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )];
            let mut response = (status, json, body).into_response();
            if outcome.replayed {
                response.headers_mut().insert(
                    IDEMPOTENT_REPLAYED.clone(),
                    HeaderValue::from_static("true"),
                );
            }
            response
        }
        Err(e) => {
            let challenge =
                pipeline::auth::forbidden_challenge(&app, crate::oauth::Protected::Server, &e);
            error_response(&e, challenge)
        }
    }
}
