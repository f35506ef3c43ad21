//! The run plane: a unit of an agent's work, from run.begin to run.complete.
//! Writes made with the run's id carry it in their version history.

pub mod model;
pub mod store;

use loom_core::{ErrorCode, LoomError, OpCx, OpResult, loom_op};

use self::model::{Run, RunBegin, RunComplete, RunDetail, RunGet, RunList, Runs};
use crate::memory::validate;
use crate::scope::require_namespace;
use crate::store::{Ledger, Store, now_ms};

/// Starts a run: a unit of work whose writes and working memory carry its
/// run_id. Pass the returned run_id to working_memory.set and, as run_id,
/// to the writes made in it (run.get lists them); end the run with
/// run.complete.
#[loom_op(role = "writer", run_scoped = false, toolsets(atomic))]
async fn begin(cx: &OpCx, input: RunBegin) -> OpResult<Run> {
    let run_id = match input.run_id {
        Some(id) => {
            validate::key("run_id", &id)?;
            id
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    let goal = input.goal.unwrap_or_default();
    if goal.len() > validate::MAX_CONTENT_BYTES {
        return Err(validate::invalid("goal", "goal is over 64 KiB"));
    }
    let store = cx.service::<Store>()?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    let row = store::Row {
        run_id: run_id.clone(),
        namespace: cx.scope.namespace.clone(),
        agent: cx.scope.agent.clone(),
        goal,
        status: "open".into(),
        summary: String::new(),
        started_ms: now_ms(),
        completed_ms: None,
        session_id: None,
        close_reason: None,
        subject: cx.caller.subject.clone(),
    };
    if !store::insert(tx.conn(), cx, &row).await? {
        let existing = store::get(tx.conn(), cx, &run_id).await?;
        tx.rollback().await?;
        return match existing {
            // The same begin again; an MCP session's implicit run is its
            // session's, never one run.begin made.
            Some(r)
                if r.status == "open"
                    && r.session_id.is_none()
                    && r.agent == cx.scope.agent
                    && r.goal == row.goal =>
            {
                Ok(r.to_run(false))
            }
            _ => Err(validate::invalid(
                "run_id",
                format!("run_id {run_id:?} is already used"),
            )),
        };
    }
    tx.commit(cx).await?;
    Ok(row.to_run(true))
}

/// Ends a run begun with run.begin as succeeded (default), failed or
/// abandoned, with a summary of what came of it. Completing a run that has
/// already ended changes nothing and returns it as it is.
#[loom_op(role = "writer", idempotent, run_scoped = false, toolsets(atomic))]
async fn complete(cx: &OpCx, input: RunComplete) -> OpResult<Run> {
    validate::key("run_id", &input.run_id)?;
    let summary = input.summary.unwrap_or_default();
    if summary.len() > validate::MAX_CONTENT_BYTES {
        return Err(validate::invalid("summary", "summary is over 64 KiB"));
    }
    let store = cx.service::<Store>()?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    // A session's implicit run lives as long as the session: its next
    // call would still carry the run ended here.
    if let Some(run) = store::get(tx.conn(), cx, &input.run_id).await?
        && run.session_id.is_some()
        && run.status == "open"
    {
        tx.rollback().await?;
        return Err(validate::invalid(
            "run_id",
            format!(
                "run {:?} is an MCP session's implicit run: it ends with its session (DELETE /mcp) or when idle; run.complete ends runs begun with run.begin",
                input.run_id
            ),
        ));
    }
    let changed = store::close(
        tx.conn(),
        cx,
        &input.run_id,
        input.status.unwrap_or_default().as_str(),
        &summary,
        now_ms(),
    )
    .await?;
    let Some(row) = store::get(tx.conn(), cx, &input.run_id).await? else {
        return Err(LoomError::new(
            ErrorCode::ResourceNotFound,
            format!("no run {:?} in this namespace", input.run_id),
        )
        .with_detail("run_id", input.run_id));
    };
    tx.commit(cx).await?;
    Ok(row.to_run(changed))
}

/// Shows one run: its goal, status and summary, its working memory notes
/// and the memory changes made in it. To end it use run.complete.
#[loom_op(role = "viewer", idempotent, run_scoped = false)]
async fn get(cx: &OpCx, input: RunGet) -> OpResult<RunDetail> {
    validate::key("run_id", &input.run_id)?;
    // The calls answered before this one are ledgered off the request
    // path: wait until they are written, so the run lists them.
    if let Some(ledger) = cx.services().get::<Ledger>() {
        ledger.flush().await;
    }
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let Some(row) = store::get(&mut conn, cx, &input.run_id).await? else {
        return Err(LoomError::new(
            ErrorCode::ResourceNotFound,
            format!("no run {:?} in this namespace", input.run_id),
        )
        .with_detail("run_id", input.run_id));
    };
    Ok(RunDetail {
        run: row.to_run(false),
        working_memory: store::notes(&mut conn, cx, &input.run_id).await?,
        changes: store::changes(&mut conn, cx, &row).await?,
        calls: store::calls(&mut conn, cx, &row).await?,
    })
}

/// Lists the namespace's runs, newest first: explicit runs and MCP
/// sessions' implicit ones, with their status (open or ended), when they
/// began and ended, why a session's run closed, and its session. Read one
/// run's calls and changes with run.get.
#[loom_op(role = "viewer", idempotent, run_scoped = false)]
async fn list(cx: &OpCx, input: RunList) -> OpResult<Runs> {
    // As every list: under 1 refused, over the page's most clamped.
    let limit = validate::limit(input.limit, 50, 500)?;
    if let Some(status) = input.status.as_deref()
        && !matches!(
            status,
            "open" | "succeeded" | "failed" | "abandoned" | "closed"
        )
    {
        return Err(validate::invalid(
            "status",
            "status must be open, succeeded, failed, abandoned or closed",
        ));
    }
    // A page's last run: its start (ms) and id.
    let after = match input.cursor.as_deref() {
        None | Some("") => None,
        Some(c) => match c
            .split_once('|')
            .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id)))
        {
            Some((ms, id)) if validate::key("cursor", id).is_ok() => Some((ms, id)),
            _ => {
                return Err(validate::invalid(
                    "cursor",
                    format!("cursor {c:?} is not one this op returned"),
                ));
            }
        },
    };
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let mut rows = store::list(&mut conn, cx, input.status.as_deref(), after, limit + 1).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next_cursor = rows
        .last()
        .filter(|_| more)
        .map(|r| format!("{}|{}", r.started_ms, r.run_id));
    Ok(Runs {
        runs: rows.iter().map(|r| r.to_run(false)).collect(),
        next_cursor,
    })
}
