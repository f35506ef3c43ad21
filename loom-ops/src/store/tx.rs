//! Write transactions. Every write goes through one: begin, change, and
//! commit, which also writes the call's audit row when the op is declared
//! `audit`, so the change and its audit commit together or not at all.
//!
//! On PostgreSQL a write transaction is a transaction of its own on the
//! writer pool. On SQLite it is a savepoint in a group commit
//! ([`super::group`]): the same all-or-nothing, one fsync for every call
//! that queued behind the writer, and still no answer before the commit.

use std::sync::LazyLock;

use loom_core::{OpCx, OpResult};
use sqlx::{Any, Transaction};

use super::bind::{Bind, Values};
use super::direct::{Direct, Numbered};
use super::group::{Member, RELEASE_SAVEPOINT};
use super::multirow::AnyQuery;
use super::{Store, db_error, now_ms};

/// The audit row's table and columns, as [`audit_args`] binds them.
macro_rules! insert_audit_into {
    () => {
        "INSERT INTO audit_log \
         (org, namespace, subject, agent, op, args_digest, outcome, request_id, at_ms)"
    };
}

const INSERT_AUDIT: &str = concat!(
    insert_audit_into!(),
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
);

/// The audit row and the release of the call's savepoint as one
/// statement list: on SQLite each statement is a round trip to the
/// writer connection's thread, taken while every other write waits.
static INSERT_AUDIT_AND_RELEASE: LazyLock<String> =
    LazyLock::new(|| format!("{INSERT_AUDIT}; {RELEASE_SAVEPOINT}"));

/// A write's statements, in order, for SQLite's direct writer: built once
/// by [`one_step_sql`], run by [`Store::write_in_one_step`].
#[derive(Debug)]
pub(crate) struct OneStep {
    /// The write, a chain: each statement runs only when the one before it
    /// changed a row or returned one (`direct::run_chain`).
    chain: Vec<Numbered>,
    /// The call's audit row, written when the whole chain ran.
    audit: Numbered,
}

impl OneStep {
    /// Its statements' text, the audit row's last.
    #[cfg(test)]
    pub(crate) fn statements(&self) -> impl Iterator<Item = &str> {
        self.chain.iter().chain([&self.audit]).map(Numbered::sql)
    }
}

/// A write as one statement list on SQLite ([`Store::write_in_one_step`]):
/// `write`, statements separated by `;` (none inside a literal) whose
/// parameters end at `$next - 1`, each run only when the one before it
/// changed a row or returned one (a `SELECT` that returns a row only when
/// the write may go ahead guards the rest); the write happened when the
/// last one ran and did. Then the call's audit row (parameters `$next`
/// on, [`Store::write_in_one_step`] binds them), written only then. Each
/// `INSERT` and `UPDATE` runs with the FAIL conflict policy ([`or_fail`]).
///
/// The statements should call no SQL function (`changes()`, Loom's own):
/// one that writes more than one row then costs a statement journal
/// (`direct::run_chain` says why); the chain stands for `changes() = 1`.
pub(crate) fn one_step_sql(write: &str, next: usize) -> OneStep {
    let p: Vec<String> = (next..next + 9).map(|n| format!("${n}")).collect();
    let audit = format!("{} VALUES ({})", insert_audit_into!(), p.join(", "));
    let chain = write
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|statement| Numbered::new(or_fail(statement.to_owned())))
        .collect();
    OneStep {
        chain,
        audit: Numbered::new(or_fail(audit)),
    }
}

/// `statement` with the FAIL conflict policy when it is an `INSERT` or an
/// `UPDATE` with none of its own: a failed constraint ends it where it
/// is, what it changed before kept, where the default (ABORT) undoes it.
///
/// Why: to undo a statement that may abort and changes more than one row
/// (an `INSERT ... SELECT`, or any statement a trigger adds rows to, as
/// the full-text queue's do), SQLite opens a statement journal for it and
/// copies into it every page it changes that the transaction held before.
/// A one-step write is such statements. With FAIL nothing of them is
/// undone, and no journal is kept (while they call no SQL function,
/// [`one_step_sql`]); a call that fails part way is
/// undone whole by the direct writer instead ([`super::direct`]: its
/// group rolled back and run again, each call in a savepoint). 500 sets
/// one at a time under callgrind: the writer thread's instructions 4.4%
/// fewer with this and no savepoints (bench/RESULTS.md).
fn or_fail(statement: String) -> String {
    for verb in ["INSERT ", "UPDATE "] {
        if let Some(rest) = statement.strip_prefix(verb)
            && !rest.starts_with("OR ")
        {
            return format!("{verb}OR FAIL {rest}");
        }
    }
    statement
}

/// A write transaction on the store's writer.
pub struct WriteTx {
    inner: Inner,
}

enum Inner {
    Own(Transaction<'static, Any>),
    Grouped(Member),
}

impl Store {
    /// Begins a write transaction.
    pub async fn begin_write(&self) -> OpResult<WriteTx> {
        let inner = match &self.group {
            Some(group) => Inner::Grouped(group.join().await?),
            None => Inner::Own(self.writer().begin().await.map_err(db_error)?),
        };
        Ok(WriteTx { inner })
    }

    /// Whether `cx`'s write can run as one statement list
    /// ([`Store::write_in_one_step`]): SQLite on a file, whose one-step
    /// writes run back to back on the direct writer ([`super::direct`]),
    /// for a call that names no run of its own: such a write takes a
    /// transaction, whose commit checks the run is still open
    /// ([`WriteTx::commit`]).
    pub(crate) fn writes_in_one_step(&self, cx: &OpCx) -> bool {
        self.direct().is_some() && !cx.run_named
    }

    /// How many writes have gone through SQLite's group, the path that
    /// holds every other write up while it runs ([`super::group`]), since
    /// the store opened; 0 on PostgreSQL. For tests and diagnostics: under
    /// a load of one-step writes it should barely move.
    pub fn grouped_writes(&self) -> u64 {
        self.group.as_ref().map_or(0, |g| g.joins())
    }

    /// How many one-step writes are queued for SQLite's direct writer or
    /// running there, not yet committed; 0 where there is none. For tests
    /// and diagnostics.
    pub fn direct_writes_pending(&self) -> usize {
        self.group
            .as_ref()
            .and_then(|g| g.direct())
            .map_or(0, Direct::pending)
    }

    /// SQLite's direct writer, where there is one and it still takes writes
    /// (a stopped one sends them the sqlx way).
    fn direct(&self) -> Option<&Direct> {
        self.group
            .as_ref()
            .and_then(|g| g.direct())
            .filter(|d| d.running())
    }

    /// Runs `work` on SQLite's direct writer as a write of its own (in the
    /// group it joins, undone alone if it fails; it may run twice, the
    /// first run undone) and waits for its group's commit; answers what
    /// `work` did. `None`, with nothing run, where there is no running
    /// direct writer (PostgreSQL, SQLite in memory, a writer that
    /// stopped): write through [`Store::begin_write`] instead. For writes that are many rows of
    /// one statement (the batched bookkeeping): each row is a step of a
    /// prepared statement on the writer's thread, with no hand-off between.
    pub(crate) async fn write_direct(
        &self,
        work: impl Fn(&rusqlite::Connection) -> rusqlite::Result<usize> + Send + 'static,
    ) -> Option<OpResult<usize>> {
        let direct = self.direct()?;
        Some(direct.run(work).await)
    }

    /// Runs `step` (from [`one_step_sql`]) with `values`, its write's
    /// parameters, as the call's whole write and waits for its commit,
    /// binding the audit row's parameters: the audit row (outcome `ok`) is
    /// written with the change when the op is audited and has none yet.
    /// Answers whether the write happened (its chain ran to its end). Only
    /// where [`Store::writes_in_one_step`].
    pub(crate) async fn write_in_one_step(
        &self,
        cx: &OpCx,
        step: &'static OneStep,
        values: Values,
    ) -> OpResult<bool> {
        let Some(direct) = self.direct() else {
            return Err(loom_core::LoomError::internal(
                "a one-step write needs SQLite's direct writer",
            ));
        };
        let audit = cx.audit && !cx.audited();
        let values = audit_args(values, cx, "ok")
            .into_inner()
            .map_err(loom_core::LoomError::internal)?;
        let written = direct
            .write(&step.chain, audit.then_some(&step.audit), values)
            .await?;
        if audit && written {
            cx.mark_audited();
        }
        Ok(written)
    }
}

impl WriteTx {
    /// The connection to run statements on.
    pub fn conn(&mut self) -> &mut sqlx::AnyConnection {
        match &mut self.inner {
            Inner::Own(tx) => tx,
            Inner::Grouped(member) => member.conn(),
        }
    }

    /// Commits; for an audited op, writes its audit row (outcome `ok`) first.
    /// A write of a run the call named commits only while the run is open
    /// (refused, nothing written, when it ended meanwhile).
    pub async fn commit(mut self, cx: &OpCx) -> OpResult<()> {
        if cx.run_named
            && let Some(run_id) = &cx.run_id
        {
            crate::run::store::require_open_until_commit(self.conn(), cx, run_id).await?;
        }
        match self.inner {
            Inner::Grouped(member) if cx.audit && !cx.audited() => {
                member
                    .commit_with(audit_row(&INSERT_AUDIT_AND_RELEASE, cx, "ok"))
                    .await?;
            }
            _ => {
                if cx.audit && !cx.audited() {
                    insert_audit(self.conn(), cx, "ok").await?;
                }
                self.commit_unaudited().await?;
            }
        }
        if cx.audit {
            cx.mark_audited();
        }
        Ok(())
    }

    /// Commits without an audit row: the server's own bookkeeping
    /// (idempotency keys, the ledger, usage), which is no op's change.
    pub async fn commit_unaudited(self) -> OpResult<()> {
        match self.inner {
            Inner::Own(tx) => tx.commit().await.map_err(db_error),
            Inner::Grouped(member) => member.commit_with(sqlx::query(RELEASE_SAVEPOINT)).await,
        }
    }

    /// Rolls back.
    pub async fn rollback(self) -> OpResult<()> {
        match self.inner {
            Inner::Own(tx) => tx.rollback().await.map_err(db_error),
            Inner::Grouped(member) => member.rollback().await,
        }
    }
}

/// Writes one audit row.
pub(crate) async fn insert_audit(
    conn: &mut sqlx::AnyConnection,
    cx: &OpCx,
    outcome: &str,
) -> OpResult<()> {
    audit_row(INSERT_AUDIT, cx, outcome)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// `sql` (which starts with [`INSERT_AUDIT`]) with the call's audit row bound.
fn audit_row<'q>(sql: &'static str, cx: &'q OpCx, outcome: &'q str) -> AnyQuery<'q> {
    audit_args(sqlx::query(sql), cx, outcome)
}

/// `query` with the call's audit row bound as its next nine parameters.
fn audit_args<'q, B: Bind<'q>>(query: B, cx: &'q OpCx, outcome: &'q str) -> B {
    query
        .arg(&cx.scope.org)
        .arg(&cx.scope.namespace)
        .arg(&cx.caller.subject)
        .arg(&cx.scope.agent)
        .arg(cx.op)
        .arg(&cx.args_digest)
        .arg(outcome)
        .arg(&cx.request_id)
        .arg(now_ms())
}

impl Store {
    /// Writes the audit row of a call that changed nothing (a refusal, or a
    /// no-op write), when the op is audited and no row was written yet.
    pub async fn audit_outcome(&self, cx: &OpCx, outcome: &str) -> OpResult<()> {
        if !cx.audit || cx.audited() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        insert_audit(tx.conn(), cx, outcome).await?;
        tx.commit_unaudited().await?;
        cx.mark_audited();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement of a one-step write, the audit row's included, is
    /// an `INSERT` or `UPDATE` under FAIL, a `SELECT` as written; a policy
    /// of its own is kept. The audit row's parameters follow the write's.
    #[test]
    fn one_step_statements_fail_rather_than_abort() {
        let step = one_step_sql(
            "SELECT 1 WHERE $1 > 0; UPDATE t SET v = $1 WHERE k = $2; \
             INSERT INTO h (v) SELECT v FROM t",
            3,
        );
        // Each statement's leading keywords: its verb and policy.
        let verbs: Vec<String> = step
            .chain
            .iter()
            .chain([&step.audit])
            .map(|s| {
                s.sql()
                    .split(' ')
                    .take_while(|w| w.chars().all(|c| c.is_ascii_uppercase()))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            verbs,
            [
                "SELECT",
                "UPDATE OR FAIL",
                "INSERT OR FAIL INTO",
                "INSERT OR FAIL INTO"
            ]
        );
        assert!(
            step.audit
                .sql()
                .starts_with("INSERT OR FAIL INTO audit_log")
        );
        assert!(
            step.audit
                .sql()
                .ends_with("VALUES ($3, $4, $5, $6, $7, $8, $9, $10, $11)")
        );
        assert_eq!(
            or_fail("INSERT OR IGNORE INTO t".into()),
            "INSERT OR IGNORE INTO t"
        );
        assert_eq!(or_fail("DELETE FROM t".into()), "DELETE FROM t");
    }
}
