//! The MCP methods Loom serves, one message at a time.

use loom_core::{Caller, ErrorCode, LoomError, RateClass};
use serde_json::{Value, json};

use super::endpoint::{Connection, Mcp};
use super::jsonrpc::{self, Id, JsonText, Message, Reply, code};
use super::listing::LIST_TTL_MS;
use super::primer::{self, Workspace};
use super::protocol::{self, Revision};
use super::session::{Principal, Session, Sessions, agent_slug};
use super::tools;
use crate::pipeline::identity::{ANONYMOUS, DEFAULT_NAMESPACE, home_org};

/// The prompt and resource that carry the primer.
const PROMPT: &str = "loom";
const PRIMER_URI: &str = "loom://primer";

/// Answers one message, as the JSON text sent; `None` for notifications
/// and client responses.
pub async fn handle(
    mcp: &Mcp,
    conn: &mut Connection,
    message: Message,
    in_batch: bool,
) -> Option<JsonText> {
    match message {
        Message::Notification { method, params } => {
            if method == "notifications/cancelled"
                && conn.speaks_for_session()
                && let Some(id) = params.get("requestId").and_then(Id::from_value)
            {
                mcp.in_flight.cancel(conn, &id);
            }
            None
        }
        Message::Response => None,
        Message::Invalid { id, reason } => Some(JsonText::of(&jsonrpc::error_response(
            id.as_ref(),
            code::INVALID_REQUEST,
            &format!("invalid request: {reason}"),
            None,
        ))),
        Message::Request { id, method, params } => Some(
            match request(mcp, conn, &id, &method, params, in_batch).await {
                Ok(result) => jsonrpc::result_response(&id, &result),
                Err((code, message, data)) => {
                    JsonText::of(&jsonrpc::error_response(Some(&id), code, &message, data))
                }
            },
        ),
    }
}

/// A JSON-RPC error: code, message, data.
pub type RpcError = (i64, String, Option<Value>);

/// A method's answer: a result, or a JSON-RPC error.
pub type RpcResult = Result<Reply, RpcError>;

fn invalid_params(message: impl Into<String>) -> RpcError {
    (code::INVALID_PARAMS, message.into(), None)
}

async fn request(
    mcp: &Mcp,
    conn: &mut Connection,
    id: &Id,
    method: &str,
    params: Value,
    in_batch: bool,
) -> RpcResult {
    match method {
        "tools/call" => tools::call(mcp, conn, id, params).await,
        "tools/list" => {
            no_cursor(&params)?;
            Ok(Reply::Shared(mcp.listings.tools_list_text(
                &conn.listing,
                conn.profile,
                conn.revision,
            )))
        }
        _ => other_request(mcp, conn, method, params, in_batch)
            .await
            .map(Reply::from),
    }
}

/// Every method but `tools/call` and `tools/list`: its result is a JSON
/// value.
async fn other_request(
    mcp: &Mcp,
    conn: &mut Connection,
    method: &str,
    params: Value,
    in_batch: bool,
) -> Result<Value, RpcError> {
    match method {
        "initialize" if in_batch => Err((
            code::INVALID_REQUEST,
            "initialize cannot be batched".into(),
            None,
        )),
        "initialize" => {
            opens_sessions(mcp, conn.caller.as_ref()).await?;
            Ok(initialize(mcp, conn, &params).await)
        }
        "ping" => Ok(json!({})),
        "prompts/list" => {
            no_cursor(&params)?;
            Ok(json!({
                "prompts": [{
                    "name": PROMPT,
                    "description": "The Loom session primer: your workspace and how to use Loom's tools.",
                }],
                "ttlMs": LIST_TTL_MS,
                "cacheScope": "public",
            }))
        }
        "prompts/get" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if name != PROMPT {
                return Err(invalid_params(format!(
                    "unknown prompt {name:?}; the only prompt is \"loom\""
                )));
            }
            // The schema's `arguments` is an object of strings; the primer
            // takes none, so any such object is ignored, anything else refused.
            match params.get("arguments") {
                None | Some(Value::Null) => {}
                Some(Value::Object(args)) if args.values().all(Value::is_string) => {}
                Some(_) => {
                    return Err(invalid_params(
                        "prompts/get arguments must be an object of strings",
                    ));
                }
            }
            let text = primer_text(mcp, conn).await;
            Ok(json!({
                "description": "The Loom session primer.",
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            }))
        }
        "resources/list" => {
            no_cursor(&params)?;
            let mut resource = json!({
                "uri": PRIMER_URI,
                "name": "primer",
                "description": "The Loom session primer: your workspace and how to use Loom's tools.",
                "mimeType": "text/plain",
            });
            if conn.revision.has_structured_output() {
                resource["title"] = "Loom session primer".into();
            }
            Ok(json!({"resources": [resource], "ttlMs": LIST_TTL_MS, "cacheScope": "public"}))
        }
        "resources/templates/list" => {
            no_cursor(&params)?;
            Ok(json!({"resourceTemplates": [], "ttlMs": LIST_TTL_MS, "cacheScope": "public"}))
        }
        "resources/read" => {
            let Some(uri) = params.get("uri").and_then(Value::as_str) else {
                return Err(invalid_params("resources/read needs a uri, a string"));
            };
            if uri != PRIMER_URI {
                return Err((
                    code::RESOURCE_NOT_FOUND,
                    format!("resource not found: {uri}"),
                    Some(json!({"uri": uri})),
                ));
            }
            let text = primer_text(mcp, conn).await;
            Ok(json!({"contents": [{"uri": PRIMER_URI, "mimeType": "text/plain", "text": text}]}))
        }
        "server/discover" => {
            let instructions = primer_text(mcp, conn).await;
            Ok(json!({
                "supportedVersions": protocol::supported_strings(),
                "capabilities": capabilities(),
                "serverInfo": server_info(Revision::V2025_11_25),
                "instructions": instructions,
                "ttlMs": LIST_TTL_MS,
                // The primer is the caller's: workspace, agent, profile.
                "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": server_info(Revision::V2025_11_25)},
            }))
        }
        other => Err((
            code::METHOD_NOT_FOUND,
            format!("method not found: {other}"),
            None,
        )),
    }
}

/// Loom does not paginate: every list fits one page, so any cursor is one it never issued.
fn no_cursor(params: &Value) -> Result<(), RpcError> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(invalid_params("invalid cursor: this list has one page")),
    }
}

fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "prompts": {"listChanged": false},
        "resources": {"subscribe": false, "listChanged": false},
    })
}

fn server_info(revision: Revision) -> Value {
    let mut info = json!({"name": "loom", "version": env!("CARGO_PKG_VERSION")});
    if revision.has_structured_output() {
        info["title"] = "Loom".into();
    }
    if revision >= Revision::V2025_11_25 {
        info["description"] = "Long-term, shared memory and context for AI agents.".into();
    }
    info
}

/// A caller with a token opens sessions within its write budget: each is a
/// row the store keeps as long as the ledger keeps calls, so a client
/// initializing in a loop must not fill it. One opened with no token lives
/// only in the bounded cache and is not counted.
async fn opens_sessions(mcp: &Mcp, caller: Option<&Caller>) -> Result<(), RpcError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    let key = crate::pipeline::identity::rate_key(Some(caller));
    match mcp.app.limiter.check(&key, RateClass::Write).await {
        Ok(()) => Ok(()),
        Err(wait) => {
            let err = LoomError::new(
                ErrorCode::RateLimited,
                "too many sessions opened; retry after the wait",
            )
            .with_retry_after(wait)
            .with_detail("rate_class", RateClass::Write.as_str());
            Err((
                code::SERVER_ERROR,
                err.message().to_owned(),
                Some(Value::Object(err.body())),
            ))
        }
    }
}

async fn initialize(mcp: &Mcp, conn: &mut Connection, params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let revision = Revision::negotiate(requested);
    let client = params.pointer("/clientInfo/name").and_then(Value::as_str);
    let mut session = Session {
        agent: agent_slug(client),
        revision,
        principal: conn.caller.as_ref().map(Principal::of),
        run: None,
        checked: std::time::Instant::now(),
        stored: false,
        seen: std::time::Instant::now(),
    };
    let id = Sessions::new_id();
    // One a bearer holds is kept in the store before the answer names it,
    // so the client's next request may reach any replica (or this server
    // after a restart); one opened with no token, once a bearer acts in it
    // (`session::claim`).
    if session.principal.is_some() {
        match mcp.app.store.mcp_session_keep(&session.row(&id)).await {
            Ok(kept) => session.stored = kept,
            Err(e) => tracing::warn!(
                cause = e.internal_message().unwrap_or(e.message()),
                "MCP session not kept in the store: only this server knows it"
            ),
        }
    }
    mcp.sessions.put(&id, session.clone());
    conn.session_id = Some(id);
    conn.session = Some(session);
    conn.revision = revision;
    // The session primer, as the loom prompt and loom_activate give it:
    // the caller's profile included.
    let instructions = primer_text(mcp, conn).await;
    json!({
        "protocolVersion": revision.as_str(),
        "capabilities": capabilities(),
        "serverInfo": server_info(revision),
        "instructions": instructions,
    })
}

/// The caller's default workspace.
pub fn workspace(conn: &Connection) -> Workspace {
    let caller = conn.caller.as_ref();
    let org = home_org(caller);
    let namespace = caller
        .and_then(|c| c.namespaces.iter().find(|n| *n != "*"))
        .map_or(DEFAULT_NAMESPACE, String::as_str);
    let agent = conn
        .session
        .as_ref()
        .map(|s| s.agent.clone())
        .unwrap_or_else(|| caller.map_or(ANONYMOUS.to_owned(), |c| c.subject.clone()));
    Workspace {
        org: org.into(),
        namespace: namespace.into(),
        agent,
        profile: None,
    }
}

/// The primer with the caller's workspace and profile.
pub async fn primer_text(mcp: &Mcp, conn: &Connection) -> String {
    let mut ws = workspace(conn);
    // The namespace calls naming none act in, where the connection picks
    // it by what the caller may read (the assistant's).
    let policy = tools::policy(conn);
    if policy.readable_default
        && let Ok(scope) =
            crate::pipeline::default_scope(&mcp.app, conn.caller.as_ref(), None, &policy).await
    {
        ws.namespace = scope.namespace;
    }
    ws.profile = tools::caller_profile(mcp, conn).await;
    primer::primer(mcp.listings.registry(), &conn.listing, Some(&ws))
}
