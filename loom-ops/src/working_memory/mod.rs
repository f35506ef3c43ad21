//! The working memory plane: a run's scratch notes, kept by run id and name.

pub mod model;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{WorkingMemory, WorkingMemoryWrite};
use crate::memory::validate;
use crate::scope::require_namespace;
use crate::store::{Store, db_error, now_ms, rfc3339};

/// Replaces a run's working memory (its scratch notes under a name,
/// default "main"). Use it for state a run needs until it ends; for what
/// should outlive the run use memory.set. The run must be open (run.begin).
#[loom_op(
    role = "writer",
    idempotent,
    run_scoped = false,
    toolsets(coding, atomic)
)]
async fn set(cx: &OpCx, input: WorkingMemoryWrite) -> OpResult<WorkingMemory> {
    write(cx, input, false).await
}

/// Appends a line to a run's working memory (under a name, default
/// "main"), creating it when missing. To replace it use working_memory.set.
/// The run must be open (run.begin).
#[loom_op(role = "writer", run_scoped = false, toolsets(atomic))]
async fn append(cx: &OpCx, input: WorkingMemoryWrite) -> OpResult<WorkingMemory> {
    write(cx, input, true).await
}

/// The most notes (names) a run keeps: `run.get` answers them all, into
/// an agent's context, so their number and size (64 KiB each) bound it.
pub const MAX_NOTES: i64 = 32;

async fn write(cx: &OpCx, input: WorkingMemoryWrite, append: bool) -> OpResult<WorkingMemory> {
    // Working memory is kept per run, named by the call: the op is not
    // run-scoped, so no session's run stands in for it.
    let run_id = input.run_id.clone();
    validate::key("run_id", &run_id)?;
    let name = input.name.clone().unwrap_or_else(|| "main".to_owned());
    validate::key("name", &name)?;
    validate::content(&input.content)?;
    let store = cx.service::<Store>()?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    // A run's notes belong to a run in progress in the namespace, held so
    // until this write commits.
    crate::run::store::hold_open(tx.conn(), cx, &run_id).await?;
    let sql = if append {
        "INSERT INTO working_memory (org, namespace, run_id, name, content, agent, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (org, namespace, run_id, name) DO UPDATE \
         SET content = working_memory.content || $8 || excluded.content, agent = excluded.agent, \
         updated_ms = excluded.updated_ms"
    } else {
        "INSERT INTO working_memory (org, namespace, run_id, name, content, agent, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (org, namespace, run_id, name) DO UPDATE \
         SET content = excluded.content, agent = excluded.agent, updated_ms = excluded.updated_ms"
    };
    let mut q = sqlx::query(sql)
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(&run_id)
        .bind(&name)
        .bind(&input.content)
        .bind(&cx.scope.agent)
        .bind(now);
    if append {
        q = q.bind("\n");
    }
    q.execute(tx.conn()).await.map_err(db_error)?;
    // The note as written, and how many the run keeps now.
    let (content, notes): (String, i64) = sqlx::query_as(
        "SELECT content, (SELECT COUNT(*) FROM working_memory AS w WHERE w.org = $1 \
         AND w.namespace = $2 AND w.run_id = $3) FROM working_memory \
         WHERE org = $1 AND namespace = $2 AND run_id = $3 AND name = $4",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(&run_id)
    .bind(&name)
    .fetch_one(tx.conn())
    .await
    .map_err(db_error)?;
    if notes > MAX_NOTES {
        tx.rollback().await?;
        return Err(validate::invalid(
            "name",
            format!(
                "run {run_id:?} keeps {MAX_NOTES} notes, the most a run keeps: write one of them \
                 instead. Nothing was written"
            ),
        ));
    }
    if content.len() > validate::MAX_CONTENT_BYTES {
        tx.rollback().await?;
        return Err(validate::invalid(
            "content",
            format!(
                "working memory {name} would be {} bytes; at most 64 KiB. Nothing was written",
                content.len()
            ),
        ));
    }
    tx.commit(cx).await?;
    Ok(WorkingMemory {
        run_id,
        name,
        bytes: content.len() as i64,
        content,
        updated_at: rfc3339(now),
    })
}
