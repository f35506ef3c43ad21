//! Write transactions. Every write goes through one: begin, change, and
//! commit, which also writes the call's audit row when the op is declared
//! `audit`, so the change and its audit commit together or not at all.

use loom_core::{OpCx, OpResult};
use sqlx::{Any, Transaction};

use super::{Store, db_error, now_ms};

/// A write transaction on the store's writer.
pub struct WriteTx {
    tx: Transaction<'static, Any>,
}

impl Store {
    /// Begins a write transaction.
    pub async fn begin_write(&self) -> OpResult<WriteTx> {
        let tx = self.writer().begin().await.map_err(db_error)?;
        Ok(WriteTx { tx })
    }
}

impl WriteTx {
    /// The connection to run statements on.
    pub fn conn(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.tx
    }

    /// Commits; for an audited op, writes its audit row (outcome `ok`) first.
    pub async fn commit(mut self, cx: &OpCx) -> OpResult<()> {
        if cx.audit && !cx.audited() {
            insert_audit(&mut self.tx, cx, "ok").await?;
        }
        self.tx.commit().await.map_err(db_error)?;
        if cx.audit {
            cx.mark_audited();
        }
        Ok(())
    }

    /// Rolls back.
    pub async fn rollback(self) -> OpResult<()> {
        self.tx.rollback().await.map_err(db_error)
    }
}

/// Writes one audit row.
pub(crate) async fn insert_audit(
    conn: &mut sqlx::AnyConnection,
    cx: &OpCx,
    outcome: &str,
) -> OpResult<()> {
    sqlx::query(
        "INSERT INTO audit_log (org, namespace, subject, agent, op, args_digest, outcome, request_id, at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(&cx.caller.subject)
    .bind(&cx.scope.agent)
    .bind(cx.op)
    .bind(&cx.args_digest)
    .bind(outcome)
    .bind(&cx.request_id)
    .bind(now_ms())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

impl Store {
    /// Writes the audit row of a call that changed nothing (a refusal, or a
    /// no-op write), when the op is audited and no row was written yet.
    pub async fn audit_outcome(&self, cx: &OpCx, outcome: &str) -> OpResult<()> {
        if !cx.audit || cx.audited() {
            return Ok(());
        }
        let mut conn = self.writer().acquire().await.map_err(db_error)?;
        insert_audit(&mut conn, cx, outcome).await?;
        cx.mark_audited();
        Ok(())
    }
}
