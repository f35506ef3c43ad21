//! The one path every call takes, whatever the transport (DESIGN.md, "One
//! path for every call"). A transport does two things:
//!
//! 1. [`authenticate`] with the request's `Authorization` header value
//!    (never a URL or body token); on a refusal it answers the error with
//!    the refusal's `WWW-Authenticate` challenge;
//! 2. [`call`] with a [`CallRequest`]: identity defaults, authorization,
//!    rate limit, idempotency, argument validation, the handler under its
//!    latency budget, audit and ledger run here, in that order, and the
//!    [`CallOutcome`] carries the op's output or a [`LoomError`] with the
//!    status to answer with.
//!
//! Shaping the answer (full JSON for HTTP, lean for MCP) stays with the
//! transport.

pub mod auth;
pub mod authorize;
pub mod cancel;
pub mod idempotency;
pub mod identity;
pub mod ledger;
pub mod ratelimit;

use std::sync::Arc;
use std::time::{Duration, Instant};

use loom_core::{
    AgentEvent, CallOptions, Caller, ErrorCode, LoomError, Op, OpCx, Output, RateKey, Scope,
    Transport,
};
use serde_json::Value;
use tracing::Instrument as _;

pub use auth::{AuthRefusal, authenticate, check_bearer};
pub use cancel::Cancel;

use crate::app::App;
use loom_ops::store::{IdemBegin, now_ms};

/// One call, as a transport hands it to the pipeline.
#[derive(Clone, Debug)]
pub struct CallRequest {
    /// The op, from `Registry::global()`.
    pub op: &'static Op,
    /// The arguments (a JSON object; anything else fails validation).
    pub args: Value,
    /// Who is calling ([`authenticate`]'s answer; `None` when auth is off).
    pub caller: Option<Caller>,
    /// The transport.
    pub transport: Transport,
    /// The request id (on every log line and answer).
    pub request_id: String,
    /// The idempotency key (HTTP `Idempotency-Key`, MCP `_idempotency_key`).
    pub idempotency_key: Option<String>,
    /// The MCP session, when there is one.
    pub session_id: Option<String>,
    /// The run the call belongs to.
    pub run_id: Option<String>,
    /// The agent when the arguments name none (MCP: from the client's name);
    /// `None` falls back to the token subject.
    pub default_agent: Option<String>,
    /// What the connection asks of its calls beyond their arguments.
    pub policy: CallPolicy,
    /// A refusal to answer once the caller's access to the call's org and
    /// namespace has been checked (an op the connection does not serve): a
    /// call to an unreadable namespace gets the access refusal instead. The
    /// call is ledgered either way; the op does not run.
    pub refuse: Option<LoomError>,
    /// Cancelled when the client withdraws the call (MCP's
    /// `notifications/cancelled`): an op not begun is not run, one running
    /// is stopped as its latency budget would stop it.
    pub cancel: Option<Arc<Cancel>>,
}

/// What a connection asks of every call beyond its arguments. The default
/// is the ordinary behaviour of every transport; the MCP assistant toolset
/// asks for [`CallPolicy::assistant`].
#[derive(Clone, Debug, Default)]
pub struct CallPolicy {
    /// The consumer a call is ledgered as when the token's claim names none
    /// (a token's own claim always wins).
    pub consumer: Option<String>,
    /// A call that names no namespace acts in the first namespace the token
    /// names *and may read*, rather than the first it names.
    pub readable_default: bool,
    /// Handed to the op on its context.
    pub options: CallOptions,
    /// The longest rate-limit wait a call sits out, once, before it checks
    /// the same buckets again (MCP: its clients do not retry); zero, or a
    /// longer wait, refuses at once.
    pub rate_limit_wait: Duration,
}

/// The consumer the assistant toolset's calls are ledgered as.
pub const ASSISTANT_CONSUMER: &str = "loom-assistant";

impl CallPolicy {
    /// The assistant toolset's: ledgered as `loom-assistant`, reads default
    /// to the first namespace the token may read, record no usage and are
    /// not narrowed to the client's agent, which writes nothing.
    pub fn assistant() -> CallPolicy {
        CallPolicy {
            consumer: Some(ASSISTANT_CONSUMER.into()),
            readable_default: true,
            options: CallOptions {
                records_usage: false,
                own_agent: false,
            },
            rate_limit_wait: Duration::ZERO,
        }
    }
}

/// What a call answered.
#[derive(Debug)]
pub struct CallOutcome {
    /// The op's output, or the refusal or fault.
    pub result: Result<Output, LoomError>,
    /// The HTTP status to answer with.
    pub status: u16,
    /// Whether the answer is a stored one replayed for an idempotency key.
    pub replayed: bool,
    /// The rate-limit wait the call sat out ([`CallPolicy::rate_limit_wait`]).
    pub waited: Duration,
}

struct Answer {
    value: Output,
    status: u16,
    replayed: bool,
}

fn principal(cx: &OpCx) -> (&str, &str) {
    (cx.scope.org.as_str(), cx.caller.subject.as_str())
}

/// [`call`] on its own task, so that it runs to its end even when the
/// transport stops waiting for it (the client closed its connection, or
/// its own timeout fired). Without this, a call abandoned half-way would
/// stop between its commit and the storing of its idempotent answer, leaving
/// the key in flight and the client's retries refused until the claim went
/// stale. Every transport calls ops through this. A panic in the call is
/// answered as an internal fault.
pub async fn call_to_completion(app: Arc<App>, req: CallRequest) -> CallOutcome {
    let op = req.op;
    let calls = app.calls.clone();
    // Boxed before it is spawned: the call's state machine is large, and a
    // future is moved by value through `spawn` into its task.
    // The call's task logs under the request's span (its request id).
    let call = Box::pin(async move { call(&app, req).await }.instrument(tracing::Span::current()));
    match calls.spawn(call).await {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::error!(op = %op.name, cause = %e, "call panicked");
            let error = LoomError::internal(format!("the call did not finish: {e}"));
            CallOutcome {
                status: error.status(),
                result: Err(error),
                replayed: false,
                waited: Duration::ZERO,
            }
        }
    }
}

/// Runs steps 2 to 8 of the pipeline for one authenticated call. It stops
/// where it is if its future is dropped: transports use
/// [`call_to_completion`].
pub async fn call(app: &App, mut req: CallRequest) -> CallOutcome {
    let started = Instant::now();
    let op = req.op;
    let mut cx = OpCx::new(op.name.as_str(), app.services.clone());
    cx.request_id = req.request_id.clone();
    cx.transport = req.transport;
    cx.audit = op.meta.audit;
    cx.caller = req.caller.clone().unwrap_or_else(|| Caller {
        subject: identity::ANONYMOUS.into(),
        org: identity::DEFAULT_ORG.into(),
        anonymous: true,
        ..Caller::default()
    });
    cx.run_id = req.run_id.clone();
    cx.session_id = req.session_id.clone();
    // Only audit rows carry the digest, and the store writes them only for
    // a call whose `cx.audit` is set: hashing every read's arguments was ~1%
    // of a memory.get.
    if cx.audit {
        cx.args_digest = idempotency::digest(&req.args);
    }
    cx.options = req.policy.options;
    if cx.caller.consumer.is_none() {
        cx.caller.consumer.clone_from(&req.policy.consumer);
    }

    let mut waited = Duration::ZERO;
    let result = run(app, &mut cx, &mut req, started, &mut waited).await;
    let (result, status, replayed) = match result {
        Ok(a) => (Ok(a.value), a.status, a.replayed),
        Err(e) => {
            let status = e.status();
            (Err(e), status, false)
        }
    };
    let outcome = match &result {
        Ok(_) => "ok".to_owned(),
        Err(e) => e.code().as_str().to_owned(),
    };
    if let Err(e) = &result {
        if e.code() == ErrorCode::Internal || e.status() >= 500 {
            tracing::error!(op = %op.name, code = %e.code(), cause = e.internal_message().unwrap_or(""), "call failed");
        } else {
            tracing::info!(op = %op.name, code = %e.code(), "call refused");
        }
    }
    let org = if cx.scope.org.is_empty() {
        cx.caller.org.clone()
    } else {
        cx.scope.org.clone()
    };
    let mut event = AgentEvent {
        org,
        namespace: cx.scope.namespace.clone(),
        subject: cx.caller.subject.clone(),
        agent: cx.scope.agent.clone(),
        consumer: cx.caller.consumer.clone(),
        op: op.name.clone(),
        transport: cx.transport,
        run_id: cx.run_id.clone(),
        session_id: cx.session_id.clone(),
        request_id: cx.request_id.clone(),
        outcome,
        status,
        latency_ms: 0,
        at_ms: 0,
    };
    // Audit: an audited op whose change did not commit its own row (a
    // refusal, a failure, a replay) gets one row with its outcome, as long
    // as the call got far enough to have a scope and its namespace exists
    // (`loom_ops::outcome::logged`).
    let logged = result.as_ref().err().is_none_or(loom_ops::outcome::logged);
    if op.meta.audit && !cx.audited() && !cx.scope.org.is_empty() && logged {
        let outcome = if replayed {
            "replayed".to_owned()
        } else {
            event.outcome.clone()
        };
        // The answer waits for the row while the call's budget lasts, not
        // longer: with the store's file locked by another program, a
        // refusal (BACKEND_TIMEOUT, a cancelled call) would wait out the
        // lock. A call the store already did not answer in time (its MCP
        // session's run not begun, say) or one cancelled does not wait. The
        // row is then written when the store takes it; shutdown waits for
        // it as for a call.
        let gone = result
            .as_ref()
            .is_err_and(|e| matches!(e.code(), ErrorCode::Cancelled | ErrorCode::BackendTimeout));
        let wait = if gone {
            Duration::ZERO
        } else {
            op.budget.saturating_sub(started.elapsed())
        };
        let store = app.store.clone();
        let name = op.name.as_str();
        write_within(app, wait, async move {
            let gave_up = tokio::time::Instant::now() + AUDIT_LOCKED_FOR;
            loop {
                match store.audit_outcome(&cx, &outcome).await {
                    Ok(()) => break,
                    // SQLite's file locked by another program (each try
                    // waits out the busy timeout): tried again while the
                    // lock may last, not dropped after one wait.
                    Err(e)
                        if e.code() == ErrorCode::BackendTimeout
                            && store.backend() == loom_ops::store::Backend::Sqlite
                            && tokio::time::Instant::now() < gave_up =>
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => {
                        tracing::error!(op = %name, cause = e.internal_message().unwrap_or(""), "audit row not written");
                        break;
                    }
                }
            }
        })
        .await;
    }
    event.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    event.at_ms = now_ms();
    app.ledger.record(event).await;
    CallOutcome {
        result,
        status,
        replayed,
        waited,
    }
}

/// Steps 2 and 3: the call's scope, then whether its caller may act there.
async fn identify_and_authorize(
    app: &App,
    cx: &mut OpCx,
    req: &mut CallRequest,
) -> Result<(), LoomError> {
    let op = req.op;
    // 2. identity defaults
    let known;
    (cx.scope, known) = scope(
        app,
        req.caller.as_ref(),
        &req.args,
        req.default_agent.as_deref(),
        &req.policy,
    )
    .await?;
    identity::drop_blank_names(&mut req.args);
    // 3. authorization (an op the connection does not serve is refused
    // once the caller's access is known, so an unreadable namespace is
    // never told apart from a served one)
    if let Some(refusal) = &req.refuse {
        if known.is_none() {
            authorize::access(app, req.caller.as_ref(), &cx.scope).await?;
        }
        return Err(refusal.clone());
    }
    authorize::authorize(app, op, req.caller.as_ref(), &mut cx.scope, known).await
}

async fn run(
    app: &App,
    cx: &mut OpCx,
    req: &mut CallRequest,
    started: Instant,
    waited: &mut Duration,
) -> Result<Answer, LoomError> {
    let op = req.op;
    // 2. and 3. read what they need of the store (a namespace, a grant)
    // when the access cache does not hold it: within the op's budget, as
    // the handler, so a store that does not answer (PostgreSQL down: no
    // connection to be had) is BACKEND_TIMEOUT at the budget, not a wait
    // for the pool. A read the cache answers sets no timer (a timeout
    // polls its future first).
    tokio::time::timeout(op.budget, identify_and_authorize(app, cx, req))
        .await
        .unwrap_or_else(|_| Err(over_budget(op)))?;
    // 4. rate limit
    let key = RateKey {
        org: cx.scope.org.clone(),
        subject: cx.caller.subject.clone(),
    };
    let mut limited = app.limiter.check(&key, op.rate).await;
    if let Err(wait) = limited
        && !wait.is_zero()
        && wait <= req.policy.rate_limit_wait
    {
        if until_cancelled(req.cancel.as_deref(), tokio::time::sleep(wait))
            .await
            .is_none()
        {
            return Err(cancelled(op));
        }
        *waited = wait;
        limited = app.limiter.check(&key, op.rate).await;
    }
    if let Err(wait) = limited {
        return Err(LoomError::new(
            ErrorCode::RateLimited,
            format!("too many {} calls; retry after the wait", op.rate.as_str()),
        )
        .with_retry_after(wait)
        .with_detail("rate_class", op.rate.as_str()));
    }
    // 5. idempotency
    let claimed = match &req.idempotency_key {
        None => None,
        Some(_) if !op.meta.idempotent => {
            return Err(LoomError::new(
                ErrorCode::BadRequest,
                format!(
                    "{} is not idempotent and does not take an idempotency key",
                    op.name
                ),
            ));
        }
        Some(key) => {
            idempotency::check_key(key)?;
            let hash = idempotency::request_hash(
                &op.name,
                &cx.scope.namespace,
                &cx.scope.agent,
                &req.args,
            );
            let ttl_ms = i64::try_from(app.config.idempotency_ttl.as_millis()).unwrap_or(i64::MAX);
            let stale_ms =
                i64::try_from(idempotency::STALE_IN_FLIGHT.as_millis()).unwrap_or(i64::MAX);
            // The claim is a write: with the store locked by another
            // program it waits, within the op's budget as the op would.
            let begin =
                app.store
                    .idempotency_begin(principal(cx), key, &op.name, &hash, ttl_ms, stale_ms);
            match tokio::time::timeout(op.budget, begin)
                .await
                .map_err(|_| over_budget(op))??
            {
                IdemBegin::Owned => Some(key.as_str()),
                IdemBegin::Replay { status, body } => {
                    let value: Value = serde_json::from_str(&body).map_err(|e| {
                        LoomError::internal(format!("stored idempotent answer: {e}"))
                    })?;
                    return Ok(Answer {
                        value: value.into(),
                        status,
                        replayed: true,
                    });
                }
                IdemBegin::Mismatch => return Err(idempotency::mismatch()),
                IdemBegin::InFlight => return Err(idempotency::in_flight()),
            }
        }
    };
    // A run-scoped call made with a run's id carries it (run.begin), in
    // place of the transport's run (an MCP session's implicit one). A run
    // refused fails the call as the op would, releasing its key below.
    let result = match explicit_run(app, cx, op, &mut req.args).await {
        Err(e) => Err(e),
        Ok(run_id) => {
            if run_id.is_some() {
                cx.run_id = run_id;
                cx.run_named = true;
            }
            // The arguments go to the op: nothing after it reads them.
            let args = std::mem::take(&mut req.args);
            until_cancelled(req.cancel.as_deref(), validate_and_run(cx, op, args))
                .await
                .unwrap_or_else(|| Err(cancelled(op)))
        }
    };
    if let Some(key) = claimed {
        // An output that cannot be written is answered as a fault by the
        // transport: the key is released, as for any failed call. The
        // answer waits for this write while the budget lasts, then it is
        // left to finish on its own (a retry meanwhile finds the key in
        // flight, and is told to retry).
        let store = app.store.clone();
        let (org, subject, key) = (
            cx.scope.org.clone(),
            cx.caller.subject.clone(),
            key.to_owned(),
        );
        let body = match result.as_ref().map(Output::json) {
            Ok(Ok(body)) => Some(body),
            _ => None,
        };
        let wait = op.budget.saturating_sub(started.elapsed());
        write_within(app, wait, async move {
            let principal = (org.as_str(), subject.as_str());
            let stored = match body {
                Some(body) => store.idempotency_finish(principal, &key, 200, &body).await,
                None => store.idempotency_release(principal, &key).await,
            };
            if let Err(e) = stored {
                tracing::error!(
                    cause = e.internal_message().unwrap_or(""),
                    "idempotency key not updated"
                );
            }
        })
        .await;
    }
    result.map(|value| Answer {
        value,
        status: 200,
        replayed: false,
    })
}

/// The call's scope after identity defaults ([`identity::resolve`]); under
/// [`CallPolicy::readable_default`] a call that names no namespace acts in
/// the first one the token names and the caller may read, and the access
/// found there comes with it (`None`: not asked yet).
async fn scope(
    app: &App,
    caller: Option<&Caller>,
    args: &Value,
    default_agent: Option<&str>,
    policy: &CallPolicy,
) -> Result<(Scope, Option<authorize::Access>), LoomError> {
    let scope = identity::resolve(caller, args, default_agent)?;
    if policy.readable_default && !identity::names_namespace(args) {
        for named in caller
            .into_iter()
            .flat_map(|c| &c.namespaces)
            .filter(|n| *n != "*")
        {
            let candidate = Scope {
                namespace: named.clone(),
                ..scope.clone()
            };
            // One the token names that does not exist is no default: each
            // read there would be RESOURCE_NOT_FOUND.
            if let Ok(access) = authorize::access(app, caller, &candidate).await
                && access.found
            {
                return Ok((candidate, Some(access)));
            }
        }
    }
    Ok((scope, None))
}

/// Where a call naming no org or namespace acts on a connection with this
/// policy (the namespace [`CallPolicy::readable_default`] picks included).
pub async fn default_scope(
    app: &App,
    caller: Option<&Caller>,
    default_agent: Option<&str>,
    policy: &CallPolicy,
) -> Result<Scope, LoomError> {
    let no_args = Value::Object(serde_json::Map::new());
    Ok(scope(app, caller, &no_args, default_agent, policy).await?.0)
}

/// The access refusal a call with these arguments would get on a
/// connection with this policy (ORG_MISMATCH, NAMESPACE_NOT_ACCESSIBLE), or
/// `Ok` when the caller may read where it would act. For a tool that is no
/// registry op, so it writes no ledger row.
pub async fn check_access(
    app: &App,
    caller: Option<&Caller>,
    args: &Value,
    default_agent: Option<&str>,
    policy: &CallPolicy,
) -> Result<(), LoomError> {
    match scope(app, caller, args, default_agent, policy).await? {
        (_, Some(_)) => Ok(()),
        (scope, None) => authorize::access(app, caller, &scope).await.map(|_| ()),
    }
}

/// The `run_id` a call of a run-scoped op names, taken out of its
/// arguments (an op that declares `run_id` of its own, as `run.*` and
/// `working_memory.*` do, keeps it): a name as identity's are (a string of
/// at most 256 bytes with no control characters; null names none) of a run
/// in progress in the call's namespace, else the refusal.
async fn explicit_run(
    app: &App,
    cx: &OpCx,
    op: &Op,
    args: &mut Value,
) -> Result<Option<String>, LoomError> {
    // Every run-scoped call passes here and nearly none names a run: the
    // one lookup of the key first.
    if !op.meta.run_scoped || args.get("run_id").is_none() || op.declares_run_id {
        return Ok(None);
    }
    let run_id = identity::named(args, "run_id")?.map(str::to_owned);
    if let Some(map) = args.as_object_mut() {
        map.remove("run_id");
    }
    let Some(run_id) = run_id else {
        return Ok(None);
    };
    loom_ops::run::store::require_open(&mut *app.store.read().await?, cx, &run_id).await?;
    Ok(Some(run_id))
}

/// Runs a store write that follows a call's answer (its audit row, its
/// idempotency key) on the calls' tracker, so that shutdown waits for it,
/// and waits for it at most `wait`: with the store locked by another
/// program the answer goes at the call's budget and the write lands when
/// the store takes it. It runs in the call's log span, so what it logs
/// (a row not written) carries the request's id.
/// How long a refused call's audit row is tried again while SQLite's file
/// is locked by another program (a backup, a `sqlite3` shell holding a
/// transaction): past one busy timeout, which lost the row of a call
/// refused under a lock of 15 s or more, and within the time a lock so long
/// is likely to last. Shutdown does not wait for it past its grace.
const AUDIT_LOCKED_FOR: Duration = Duration::from_secs(120);

async fn write_within(app: &App, wait: Duration, write: impl Future<Output = ()> + Send + 'static) {
    let _ = tokio::time::timeout(wait, app.calls.spawn(write.in_current_span())).await;
}

/// `work`'s answer, or `None` when `cancel` fires first: `work` is then
/// dropped where it stands, as a latency budget running out drops it (a
/// write still queued for the store is not made). Cancelled already, it is
/// never begun.
async fn until_cancelled<T>(cancel: Option<&Cancel>, work: impl Future<Output = T>) -> Option<T> {
    match cancel {
        None => Some(work.await),
        Some(cancel) => tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            answer = work => Some(answer),
        },
    }
}

/// What a withdrawn call is ledgered and audited as.
fn cancelled(op: &Op) -> LoomError {
    LoomError::new(
        ErrorCode::Cancelled,
        format!("{} was cancelled by its client", op.name),
    )
}

/// The refusal of a call whose store did not answer within the op's budget.
pub(crate) fn over_budget(op: &Op) -> LoomError {
    LoomError::new(
        ErrorCode::BackendTimeout,
        format!(
            "{} did not finish within its {} ms budget",
            op.name,
            op.budget.as_millis()
        ),
    )
    .with_retry_after(std::time::Duration::from_secs(1))
}

async fn validate_and_run(cx: &OpCx, op: &'static Op, args: Value) -> Result<Output, LoomError> {
    // 6. arguments. The server-filled keys an op does not declare were
    // read for identity (step 2) and are accepted by name; the op never
    // sees them. A whole number sent as a float where an integer is
    // declared (10.0) is that integer: JSON Schema counts it as one.
    let args = op.validator().accept(&op.name, args, !op.read_only())?;
    // 7. the handler, under its latency budget. Its own refusal of an
    // argument is answered as the check's are.
    tokio::time::timeout(op.budget, (op.meta.call)(cx, args))
        .await
        .unwrap_or_else(|_| Err(over_budget(op)))
        .map_err(|e| op.validator().in_documented_shape(&op.name, e))
}
