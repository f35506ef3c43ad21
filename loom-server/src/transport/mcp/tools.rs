//! `tools/call`: registry tools, the three synthetic tools, and how their
//! answers are shaped. Every call runs the one pipeline
//! ([`crate::pipeline::call_to_completion`]): the same gates as `POST /v1/<op>`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use loom_core::render::{loom_op_routes, render_op_names};
use loom_core::{ErrorCode, Listing, LoomError, Op, Output, Transport, lean::lean};
use serde_json::{Map, Value, json};

use super::endpoint::{Connection, Mcp};
use super::jsonrpc::{Id, JsonText, Reply, code};
use super::listing::{LOOM_ACTIVATE, LOOM_OP, LOOM_SEARCH, SEARCH_OP, lists};
use super::methods::primer_text;
use super::outcome::{Replayed, fault_error, is_refusal, refusal_result, tool_result};
use crate::pipeline::{self, CallPolicy, CallRequest, identity};

use super::methods::RpcResult;

/// How many ops `loom_op` help lists at most.
pub const CATALOG_LIMIT: usize = 15;
/// The words of a `loom_op` help query matched, at most (the first ones).
const HELP_WORDS: usize = 16;

/// Answers a `tools/call`.
pub async fn call(mcp: &Mcp, conn: &Connection, _id: &Id, mut params: Value) -> RpcResult {
    // Moved out of the params, not copied: they are the call's.
    let args = match params.as_object_mut().and_then(|p| p.remove("arguments")) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v) => v,
    };
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((
            code::INVALID_PARAMS,
            "tools/call needs the tool's name".into(),
            None,
        ));
    };
    let registry = mcp.listings.registry();
    if conn.listing == Listing::Assistant {
        return assistant_call(mcp, conn, name, args).await;
    }
    match name {
        LOOM_SEARCH => search(mcp, conn, args).await,
        LOOM_ACTIVATE => {
            if let Some(e) = unknown_keys(LOOM_ACTIVATE, &args, &[]) {
                return Ok(refusal(conn, &e));
            }
            let text = primer_text(mcp, conn).await;
            let json = JsonText::of(&json!({"primer": text}));
            Ok(tool_result(json, None, Replayed(false), conn.revision))
        }
        LOOM_OP => loom_op(mcp, conn, args).await,
        _ => match registry.by_tool_name(name).filter(|op| !op.synthetic()) {
            None => {
                let tools: Vec<String> = registry
                    .ops()
                    .iter()
                    .filter(|op| !op.synthetic() && op.mcp_hidden().is_none())
                    .map(|op| op.tool_name.clone())
                    .chain([LOOM_SEARCH, LOOM_ACTIVATE, LOOM_OP].map(String::from))
                    .collect();
                let suggestions = loom_core::closest(name, tools.iter().map(String::as_str), 3);
                Err((
                    code::INVALID_PARAMS,
                    format!("unknown tool '{name}'"),
                    Some(json!({"tool": name, "suggestions": suggestions})),
                ))
            }
            Some(op) => match op.mcp_hidden() {
                Some(instead) => Ok(refusal(conn, &not_on_mcp(op, instead, &conn.listing, mcp))),
                None => run(mcp, conn, op, args, Shape::Lean).await,
            },
        },
    }
}

/// A `tools/call` on the assistant toolset: only its own reads run. Any
/// other registry tool (`loom_search` included) is refused through the
/// pipeline, so the refusal is ledgered and an unreadable org or namespace
/// gets the access refusal first; a name that is no registry tool
/// (`loom_op`, `loom_activate`, a typo) gets the same answers and writes no
/// row.
async fn assistant_call(mcp: &Mcp, conn: &Connection, name: &str, args: Value) -> RpcResult {
    let registry = mcp.listings.registry();
    let unknown = LoomError::new(
        ErrorCode::UnknownOp,
        format!("no tool named '{name}' on this connection"),
    )
    .with_detail("tool", name);
    let op = match name {
        LOOM_SEARCH => registry.get(SEARCH_OP),
        _ => registry.by_tool_name(name).filter(|op| !op.synthetic()),
    };
    match op {
        Some(op) if op.listed_on(&Listing::Assistant) => {
            run(mcp, conn, op, without_explain(op, args), Shape::Full).await
        }
        Some(op) => refused_call(mcp, conn, op, place_of(&args), unknown).await,
        None => {
            // loom_op names the scope of the op it would run in `arguments`.
            let scoped = args
                .get("arguments")
                .filter(|a| a.is_object())
                .unwrap_or(&args);
            let checked = pipeline::check_access(
                &mcp.app,
                conn.caller.as_ref(),
                scoped,
                conn.session.as_ref().map(|s| s.agent.as_str()),
                &policy(conn),
            )
            .await;
            match checked {
                Err(e) if !is_refusal(&e) => {
                    let (code, message, data) = fault_error(&e, name, &conn.request_id);
                    Err((code, message, Some(data)))
                }
                Err(e) => Ok(refusal(conn, &e)),
                Ok(()) => Ok(refusal(conn, &unknown)),
            }
        }
    }
}

/// The assistant's results are the full output, but an op's per-hit score
/// breakdown (`explain`) is diagnostics a citation does not need: it is
/// off whatever the call sends.
fn without_explain(op: &Op, mut args: Value) -> Value {
    if op.takes_explain
        && let Some(map) = args.as_object_mut()
    {
        map.insert("explain".into(), Value::Bool(false));
    }
    args
}

/// What this connection asks of its calls: the assistant toolset's policy
/// on `?toolset=assistant`, else the ordinary one.
pub(super) fn policy(conn: &Connection) -> CallPolicy {
    if conn.listing == Listing::Assistant {
        CallPolicy::assistant()
    } else {
        CallPolicy::default()
    }
}

fn not_on_mcp(op: &Op, instead: &str, listing: &Listing, mcp: &Mcp) -> LoomError {
    let instead = render_op_names(instead, mcp.listings.registry(), listing);
    LoomError::new(
        ErrorCode::OpNotOnMcp,
        format!("{} is not served over MCP: {instead}", op.name),
    )
    .with_detail("op", op.name.clone())
    .with_detail("instead", instead)
}

fn refusal(conn: &Connection, err: &LoomError) -> Reply {
    refusal_result(err, conn.revision).into()
}

/// How a successful answer is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Lean unless the call asks `explain: true`.
    Lean,
    /// Always the full output (assistant).
    Full,
}

/// Runs one registry op through the pipeline and shapes its answer.
async fn run(
    mcp: &Mcp,
    conn: &Connection,
    op: &'static Op,
    args: Value,
    shape: Shape,
) -> RpcResult {
    let place = place_of(&args);
    let (args, idempotency_key, explain) = match prepare(op, args) {
        Ok(p) => p,
        Err(e) => return refused_call(mcp, conn, op, place, e).await,
    };
    let outcome = call_op(mcp, conn, op, args, idempotency_key).await;
    let answer = outcome.and_then(|(output, replayed)| {
        structured(&output, shape == Shape::Full || explain).map(|json| (json, replayed))
    });
    match answer {
        Ok((json, replayed)) => Ok(tool_result(json, None, replayed, conn.revision)),
        Err(e) => answer_error(mcp, conn, op, &e),
    }
}

/// Where a call acts, as its arguments name it (`org`, `namespace`,
/// `agent`; nothing when they are no object).
fn place_of(args: &Value) -> Value {
    let mut place = Map::new();
    if let Value::Object(map) = args {
        for key in ["org", "namespace", "agent"] {
            if let Some(v) = map.get(key) {
                place.insert(key.to_owned(), v.clone());
            }
        }
    }
    Value::Object(place)
}

/// A call refused before the pipeline reads its arguments (they are no
/// object, an idempotency key is malformed, the connection does not serve
/// the tool): it still goes through the pipeline, with `place` for
/// arguments, so that it is ledgered as any refused call is (the
/// assistant's as `loom-assistant`), and a caller that may not act there
/// gets the access refusal first.
async fn refused_call(
    mcp: &Mcp,
    conn: &Connection,
    op: &'static Op,
    place: Value,
    refusal: LoomError,
) -> RpcResult {
    let request = CallRequest {
        refuse: Some(refusal),
        ..call_request(conn, op, place)
    };
    let outcome = pipeline::call_to_completion(mcp.app.clone(), request).await;
    // The pipeline answers a call it is told to refuse with a refusal.
    let e = outcome
        .result
        .err()
        .unwrap_or_else(|| LoomError::internal("a refused call ran"));
    answer_error(mcp, conn, op, &e)
}

/// A result's `structuredContent`: the output in full, or lean.
fn structured(output: &Output, full: bool) -> Result<JsonText, LoomError> {
    if full {
        output.json().map(JsonText::assembled)
    } else {
        output.lean_json().map(JsonText::marked)
    }
}

fn answer_error(mcp: &Mcp, conn: &Connection, op: &Op, e: &LoomError) -> RpcResult {
    if is_refusal(e) {
        let mut e = with_hint_rendered(mcp, conn, with_next_step(mcp, conn, op, e));
        // The assistant lists an op's input its own way: the refusal's
        // corrected call must be one that listing accepts.
        if conn.listing == Listing::Assistant {
            e = loom_core::as_listed(e, &super::listing::assistant_input(op, conn.profile));
        }
        Ok(refusal(conn, &e))
    } else {
        let (code, message, data) = fault_error(e, &op.tool_name, &conn.request_id);
        Err((code, message, Some(data)))
    }
}

/// A refusal's `hint` names ops as this connection's listing reaches
/// them (`loom_memory_search` where it is listed), as mentor text is.
fn with_hint_rendered(mcp: &Mcp, conn: &Connection, e: LoomError) -> LoomError {
    match e.detail().get("hint").and_then(Value::as_str) {
        Some(hint) => {
            let rendered = render_op_names(hint, mcp.listings.registry(), &conn.listing);
            e.with_detail("hint", rendered)
        }
        None => e,
    }
}

/// A NAMESPACE_NOT_ACCESSIBLE refusal of a namespace that is not a
/// collection, from a tool that is not a code or tracker tool, on a
/// connection that reaches `loom_op`, says what to do next.
fn with_next_step(mcp: &Mcp, conn: &Connection, op: &Op, e: &LoomError) -> LoomError {
    let plane = loom_core::naming::plane_of(&op.name);
    if e.code() != ErrorCode::NamespaceNotAccessible
        || e.detail().get("kind").and_then(Value::as_str) == Some("collection")
        || matches!(plane, "code" | "tracker")
        || matches!(conn.listing, Listing::Assistant)
    {
        return e.clone();
    }
    // Nobody is asked for a grant on someone's personal namespace.
    let text = if e.detail().get("kind").and_then(Value::as_str) == Some("personal") {
        "List the namespaces you can use with namespace.list_mine."
    } else {
        "List the namespaces you can use with namespace.list_mine, or ask an admin of this namespace \
         to grant you a role on it with grants.set."
    };
    let next = render_op_names(text, mcp.listings.registry(), &conn.listing);
    e.clone().with_detail("next_step", next)
}

/// Takes the MCP-only keys out of the arguments: `_idempotency_key` /
/// `idempotency_key` (MCP has no header for it) and, for an op whose input
/// has no `explain`, the `explain` shaping flag; answers whether the call
/// gets the full shape (`explain: true`, or a diagnostic asked for by name).
fn prepare(op: &Op, args: Value) -> Result<(Value, Option<String>, bool), LoomError> {
    let validator = op.validator();
    let Value::Object(mut map) = args else {
        return Err(validator.not_an_object(&op.name, &args));
    };
    let mut key = None;
    // `_idempotency_key` is taken out for every op, so that one that is not
    // idempotent is refused as over HTTP (BAD_REQUEST, saying so), not as
    // an unknown argument.
    let names: &[&str] = if op.meta.idempotent {
        &["_idempotency_key", "idempotency_key"]
    } else {
        &["_idempotency_key"]
    };
    for &name in names {
        if let Some(v) = map.remove(name) {
            match v {
                // Two keys would leave one unused, as two Idempotency-Key
                // headers would over HTTP: refused the same way.
                Value::String(_) if key.is_some() => {
                    return Err(LoomError::new(
                        ErrorCode::BadRequest,
                        "send one idempotency key, _idempotency_key or idempotency_key, not both",
                    ));
                }
                Value::String(s) => key = Some(s),
                other => {
                    let error = format!(
                        "{name}: Input should be a valid string [string_type], got {}",
                        loom_core::type_name(&other)
                    );
                    return Err(validator.refusal(&op.name, &Value::Object(map), vec![error]));
                }
            }
        }
    }
    // A near miss of the key a change takes is refused as one of its own
    // arguments would be (nothing written), not as a key nothing resembles.
    if op.meta.idempotent
        && !op.read_only()
        && let Some(refusal) = validator.near_miss_of(&op.name, &map, names)
    {
        return Err(refusal);
    }
    let explain = if op.takes_explain {
        map.get("explain").and_then(Value::as_bool).unwrap_or(false)
    } else {
        map.remove("explain")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    };
    let full = explain || loom_core::lean::asks_for_diagnostics(&map);
    Ok((Value::Object(map), key, full))
}

/// A pipeline request for `op` from this connection: its caller, session,
/// agent and policy; no idempotency key and no run until the caller sets
/// them.
fn call_request(conn: &Connection, op: &'static Op, args: Value) -> CallRequest {
    CallRequest {
        op,
        args,
        caller: conn.caller.clone(),
        transport: Transport::Mcp,
        request_id: conn.request_id.clone(),
        idempotency_key: None,
        session_id: conn.session_id.clone(),
        run_id: None,
        default_agent: conn.session.as_ref().map(|s| s.agent.clone()),
        policy: policy(conn),
        refuse: None,
        cancel: conn.cancel.clone(),
    }
}

/// Runs the pipeline. A rate-limited call whose wait is at most
/// `LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S` sits it out once and checks the
/// same buckets again ([`CallPolicy::rate_limit_wait`]), since MCP clients
/// do not retry. The output comes with whether it is a stored answer
/// replayed for the call's idempotency key.
async fn call_op(
    mcp: &Mcp,
    conn: &Connection,
    op: &'static Op,
    args: Value,
    idempotency_key: Option<String>,
) -> Result<(Output, Replayed), LoomError> {
    let mut refuse = None;
    let run_id = if op.meta.run_scoped {
        match session_run(mcp, conn, op, &args).await {
            SessionRun::Found(run_id) => run_id,
            // A read goes on without the run (it is labelled with it, not
            // filtered by it); a change is refused as its own write would
            // be, and the session's next call begins the run.
            SessionRun::Failed(e) => {
                if !op.read_only() {
                    refuse = Some(e);
                }
                None
            }
        }
    } else {
        None
    };
    let mut request = CallRequest {
        idempotency_key,
        run_id,
        refuse,
        ..call_request(conn, op, args)
    };
    let left = &conn.rate_wait_left_ms;
    request.policy.rate_limit_wait = Duration::from_millis(left.load(Ordering::Relaxed));
    let outcome = pipeline::call_to_completion(mcp.app.clone(), request).await;
    let waited = u64::try_from(outcome.waited.as_millis()).unwrap_or(u64::MAX);
    // The calls of one request run one after another: nothing else spends it.
    left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |ms| {
        Some(ms.saturating_sub(waited))
    })
    .ok();
    let replayed = Replayed(outcome.replayed);
    outcome.result.map(|output| (output, replayed))
}

/// What a call finds of its session's run.
enum SessionRun {
    /// The run's id; none without a session, on the assistant toolset, or
    /// where no run can be filed.
    Found(Option<String>),
    /// Beginning it failed, or did not finish within the op's budget: a
    /// change is refused with this (its own write would fail alike).
    Failed(LoomError),
}

/// The session's implicit run, begun by its first run-scoped call: one per
/// (org, token subject, session), filed in the caller's default namespace
/// of the org the call acts in, when that namespace exists and the caller
/// may act there (else the call goes without one).
async fn session_run(mcp: &Mcp, conn: &Connection, op: &Op, args: &Value) -> SessionRun {
    let (Some(session_id), Some(session)) = (&conn.session_id, &conn.session) else {
        return SessionRun::Found(None);
    };
    if conn.listing == Listing::Assistant {
        return SessionRun::Found(None);
    }
    let caller = conn.caller.as_ref();
    // The org the call acts in; one it may not act in is refused by the
    // pipeline, with no run begun for it.
    let Ok(org) = identity::call_org(caller, args) else {
        return SessionRun::Found(None);
    };
    // The run this process found open a moment ago; past `run_recheck` the
    // store says whether it still is (another replica may have closed it),
    // and a new one is begun when it is not.
    if let Some(s) = mcp.sessions.get(session_id)
        && let Some(run) = s.run
        && run.org == org
        && run.checked.elapsed() < mcp.app.config.mcp.run_recheck()
    {
        return SessionRun::Found(Some(run.id));
    }
    let ws = super::methods::workspace(conn);
    // Both steps together within the op's budget, as the op's own write.
    let deadline = tokio::time::Instant::now() + op.budget;
    // Filed where the caller may act: a run in a restricted namespace of
    // another org would show the caller's session to its members.
    let place = json!({"org": org, "namespace": ws.namespace});
    let policy = CallPolicy::default();
    let access = pipeline::check_access(&mcp.app, caller, &place, None, &policy);
    match tokio::time::timeout_at(deadline, access).await {
        Err(_) => return SessionRun::Failed(pipeline::over_budget(op)),
        Ok(Err(e)) if e.status() >= 500 => return SessionRun::Failed(e),
        Ok(Err(_)) => return SessionRun::Found(None),
        Ok(Ok(())) => {}
    }
    let subject = caller.map_or(crate::pipeline::identity::ANONYMOUS, |c| c.subject.as_str());
    let key = loom_ops::store::SessionRunKey {
        org,
        namespace: &ws.namespace,
        subject,
        agent: &session.agent,
        session_id,
    };
    // Beginning it is a write: with the store locked by another program it
    // waits within the op's budget, as the op would.
    let Ok(begun) = tokio::time::timeout_at(deadline, mcp.app.store.session_run(&key)).await else {
        tracing::warn!(op = %op.name, "session run not begun within the call's budget");
        return SessionRun::Failed(pipeline::over_budget(op));
    };
    match begun {
        Ok(Some(run_id)) => {
            mcp.sessions.set_run(session_id, org, &run_id);
            SessionRun::Found(Some(run_id))
        }
        Ok(None) => {
            tracing::debug!(
                org = %org,
                namespace = %ws.namespace,
                "session run not begun: its default namespace does not exist"
            );
            SessionRun::Found(None)
        }
        Err(e) => {
            tracing::warn!(
                cause = e.internal_message().unwrap_or(e.message()),
                "session run not begun"
            );
            SessionRun::Failed(e)
        }
    }
}

/// `loom_search`: `search.query` with lenient options and a text summary.
async fn search(mcp: &Mcp, conn: &Connection, args: Value) -> RpcResult {
    let Some(op) = mcp.listings.registry().get(SEARCH_OP) else {
        return Ok(refusal(
            conn,
            &LoomError::new(
                ErrorCode::UnknownOp,
                "search is not available on this server",
            ),
        ));
    };
    let mut args = args;
    if let Some(map) = args.as_object_mut() {
        // Lenient: a top_k of the wrong shape or range is clamped, never refused.
        if let Some(v) = map.remove("top_k") {
            let n = match &v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            if let Some(n) = n.filter(|n| n.is_finite()) {
                map.insert("top_k".into(), json!(n.round().clamp(1.0, 50.0) as i64));
            }
        }
        // An unknown recipe or bodies name is read as the default by the op;
        // one that is not a name at all is dropped here, to the same end.
        for option in ["recipe", "bodies"] {
            if map.get(option).is_some_and(|v| !v.is_string()) {
                map.remove(option);
            }
        }
    }
    let place = place_of(&args);
    let (args, key, explain) = match prepare(op, args) {
        Ok(p) => p,
        Err(e) => return refused_call(mcp, conn, op, place, e).await,
    };
    let results = call_op(mcp, conn, op, args, key).await;
    let answer = results.and_then(|(output, replayed)| {
        let value = output.into_value()?;
        let summary = summarize(&value);
        structured(&Output::from(value), explain).map(|json| (json, summary, replayed))
    });
    match answer {
        Ok((json, summary, replayed)) => {
            Ok(tool_result(json, Some(summary), replayed, conn.revision))
        }
        Err(e) => answer_error(mcp, conn, op, &e),
    }
}

/// "memory: 2 hits (deploy_window, release_train); profile: 0; …".
fn summarize(results: &Value) -> String {
    let mut parts = Vec::new();
    for section in ["memory", "profile", "knowledge", "conversations"] {
        let hits = results
            .get(section)
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let keys: Vec<&str> = hits
            .iter()
            .filter_map(|h| {
                h.get("memory_key")
                    .or_else(|| h.get("section"))
                    .and_then(Value::as_str)
            })
            .take(5)
            .collect();
        if keys.is_empty() {
            parts.push(format!("{section}: {}", hits.len()));
        } else {
            parts.push(format!("{section}: {} ({})", hits.len(), keys.join(", ")));
        }
    }
    parts.join("; ")
}

/// `loom_op`'s refusal of its own arguments, for one error.
fn invalid_loom_op(error: &str) -> LoomError {
    LoomError::new(
        ErrorCode::InvalidArguments,
        format!("loom_op: invalid arguments. {error}"),
    )
    .with_detail("errors", vec![error])
    .with_detail("required", vec!["op"])
    .with_detail("optional", vec!["arguments", "query"])
    .with_detail("example", json!({"op": "help", "query": "unpin a memory"}))
}

/// `loom_op`: `{op, arguments}` runs an op the roster does not list;
/// `{op: "help", query}` lists matching ops. Its own refusals carry their
/// fields as JSON in the text.
async fn loom_op(mcp: &Mcp, conn: &Connection, args: Value) -> RpcResult {
    let registry = mcp.listings.registry();
    let own_refusal = |e: LoomError| {
        let mut r = refusal_result(&e, conn.revision);
        r["content"] = json!([{"type": "text", "text": Value::Object(e.body()).to_string()}]);
        Ok(r.into())
    };
    // `argumnts` would otherwise run the op with no arguments at all.
    if let Some(e) = unknown_keys(LOOM_OP, &args, &["op", "arguments", "query"]) {
        return own_refusal(e);
    }
    let Some(name) = args.get("op").and_then(Value::as_str) else {
        let error = match args.get("op") {
            None | Some(Value::Null) => "op: Field required [missing]",
            Some(_) => "op: Input should be a valid string [string_type]",
        };
        return own_refusal(invalid_loom_op(error));
    };
    if name == "help" {
        let query = match args.get("query") {
            None | Some(Value::Null) => "",
            Some(Value::String(q)) => q.as_str(),
            // Read as no query it would list the first ops, as if matched.
            Some(other) => {
                let error = format!(
                    "query: Input should be a valid string [string_type], got {}",
                    loom_core::type_name(other)
                );
                return own_refusal(invalid_loom_op(&error));
            }
        };
        let json = JsonText::of(&help(mcp, &conn.listing, query));
        return Ok(tool_result(json, None, Replayed(false), conn.revision));
    }
    let op = registry.get(name).or_else(|| registry.by_tool_name(name));
    let Some(op) = op else {
        return own_refusal(
            LoomError::new(ErrorCode::UnknownOp, format!("no op named '{name}'"))
                .with_detail("op", name)
                .with_detail("suggestions", registry.suggest(name, 3))
                .with_detail(
                    "help",
                    "call loom_op with {\"op\": \"help\", \"query\": \"<words>\"}",
                ),
        );
    };
    if let Some(instead) = op.mcp_hidden() {
        return own_refusal(not_on_mcp(op, instead, &conn.listing, mcp));
    }
    if !loom_op_routes(op, &conn.listing) {
        return own_refusal(
            LoomError::new(
                ErrorCode::OpNotOnMcp,
                format!(
                    "{} changes state; this read-only connection runs read ops only",
                    op.name
                ),
            )
            .with_detail("op", op.name.clone()),
        );
    }
    let arguments = match args.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(v) => v.clone(),
    };
    if op.name == SEARCH_OP {
        return search(mcp, conn, arguments).await;
    }
    run(mcp, conn, op, arguments, Shape::Lean).await
}

/// A synthetic tool's refusal of keys it does not take, before it runs
/// anything: `UNKNOWN_ARGUMENT` with what each most likely meant, else
/// `INVALID_ARGUMENTS` naming them. `None` when every key is one of
/// `known` (arguments that are no object are left to the tool).
fn unknown_keys(tool: &str, args: &Value, known: &[&str]) -> Option<LoomError> {
    let unknown: Vec<&str> = args
        .as_object()?
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    if unknown.is_empty() {
        return None;
    }
    let mut did_you_mean = Map::new();
    let mut parts = Vec::new();
    for key in &unknown {
        // loom_op's call carries the op's idempotency key in `arguments`,
        // with the op's other arguments.
        if tool == LOOM_OP && matches!(*key, "_idempotency_key" | "idempotency_key") {
            let inside = format!("arguments.{key}");
            parts.push(format!("'{key}' goes inside 'arguments', as '{inside}'"));
            did_you_mean.insert((*key).to_owned(), inside.into());
            continue;
        }
        match loom_core::closest(key, known.iter().copied(), 1).first() {
            Some(near) => {
                parts.push(format!("unknown '{key}' — did you mean '{near}'?"));
                did_you_mean.insert((*key).to_owned(), (*near).into());
            }
            None => parts.push(format!("unknown '{key}'")),
        }
    }
    let code = if did_you_mean.is_empty() {
        ErrorCode::InvalidArguments
    } else {
        ErrorCode::UnknownArgument
    };
    Some(
        LoomError::new(
            code,
            format!("{tool}: {}", sentence(&parts.join("; "))) + " Nothing was run.",
        )
        .with_detail("unknown", unknown)
        .with_detail("did_you_mean", Value::Object(did_you_mean))
        .with_detail("arguments", known.to_vec()),
    )
}

/// Up to [`CATALOG_LIMIT`] ops `loom_op` routes here that match `query`,
/// best first, each with its required and optional arguments.
fn help(mcp: &Mcp, listing: &Listing, query: &str) -> Value {
    let registry = mcp.listings.registry();
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_ascii_lowercase)
        // Each word is looked for in every op's text: a query of a
        // megabyte of words would keep a serving thread for seconds.
        .take(HELP_WORDS)
        .collect();
    let mut scored: Vec<(usize, &Op)> = registry
        .ops()
        .iter()
        .filter(|op| loom_op_routes(op, listing) || lists(op, listing))
        .map(|op| {
            let haystack = format!("{} {}", op.name.replace(['.', '_'], " "), op.description)
                .to_ascii_lowercase();
            let name = op.name.to_ascii_lowercase();
            let score = words
                .iter()
                .map(|w| {
                    if name.contains(w.as_str()) {
                        3
                    } else {
                        usize::from(haystack.contains(w.as_str()))
                    }
                })
                .sum();
            (score, op)
        })
        .filter(|(score, _)| words.is_empty() || *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.name.cmp(&b.1.name)));
    let ops: Vec<Value> = scored
        .into_iter()
        .take(CATALOG_LIMIT)
        .map(|(_, op)| {
            let mut entry = json!({
                "op": op.name,
                "description": loom_core::schema::first_paragraph(&render_op_names(&op.description, registry, listing)),
                "required": op.validator().required(),
                "optional": op.validator().optional(),
            });
            // Listed as its own tool, or as a synthetic one (loom_search).
            if op.listed_on(listing) {
                entry["tool"] = op.tool_name.clone().into();
            }
            entry
        })
        .collect();
    json!({"query": query, "ops": ops, "limit": CATALOG_LIMIT})
}

/// The caller's profile for the primer, through the pipeline (`profile.get`),
/// when the server has it and the caller may read it. The assistant's primer
/// inlines no profile.
pub async fn caller_profile(mcp: &Mcp, conn: &Connection) -> Option<Value> {
    if conn.listing == Listing::Assistant || (!conn.authenticated && mcp.app.config.auth_required) {
        return None;
    }
    let op = mcp.listings.registry().get("profile.get")?;
    let outcome =
        pipeline::call_to_completion(mcp.app.clone(), call_request(conn, op, json!({}))).await;
    outcome
        .result
        .and_then(Output::into_value)
        .ok()
        .map(lean)
        .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

/// `text` ended as a sentence: a full stop unless it ends with one, or
/// with a question mark.
fn sentence(text: &str) -> String {
    if text.ends_with(['.', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}
