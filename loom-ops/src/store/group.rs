//! Group commit for SQLite's one writer connection.
//!
//! Why: every write commits with `synchronous=FULL`, and on SQLite every
//! write goes through one connection, so a commit per call caps writes at
//! one fsync each (a few hundred a second on ordinary disks). Here calls
//! that queue behind each other share one transaction and one fsync, and no
//! call is answered before the commit that holds its write.
//!
//! How: the writer connection lives in [`Group`] behind a fair (FIFO) lock.
//! A call takes the lock, begins the group's transaction if none is open,
//! and runs inside a savepoint of its own; its commit releases the savepoint
//! (a failed or abandoned call rolls back only its savepoint), hands the lock
//! to the next call in line and waits for the group's commit. One committer
//! task queues on the same lock whenever a call finished: every call that
//! queued before it joins the group, so under load groups grow by
//! themselves, and alone a call commits at once.
//!
//! A write that is one statement list ([`super::tx::OneStep`]) goes to the
//! direct writer instead ([`super::direct`]), which takes this lock for
//! each of its groups.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use loom_core::{LoomError, OpResult};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool, Connection, Executor};
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, oneshot, watch};

use super::checkpoint::Checkpoints;
use super::db_error;
use super::direct::Direct;
use super::inline::Inline;
use super::multirow::AnyQuery;

/// The statements around each call's savepoint (`loom_call`), written out
/// once: they run on every write.
pub(super) const OPEN_SAVEPOINT: &str = "SAVEPOINT loom_call";
pub(super) const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT loom_call";
const UNDO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT loom_call; RELEASE SAVEPOINT loom_call";

/// What a commit runs first, outside any call's savepoint: `statements`,
/// when `when` (one row, one integer: how much there is to do) answers at
/// least `batch` on the direct writer ([`super::direct`]), or more than 0
/// on this group. The store's is the full-text queue's drain
/// (`full_text_queue`): the direct writer's many small commits let work
/// gather, and the group's (rarer, and the ones a reader who needs the
/// work done waits for) do it all.
pub(super) struct BeforeCommit {
    pub(super) when: &'static str,
    pub(super) batch: i64,
    pub(super) statements: &'static [&'static str],
}

/// How one group ended: `None` while it is open, then its commit's outcome.
type Outcome = Option<Result<(), String>>;

/// The writer connection and the open group, if any.
pub(super) struct Group {
    pool: AnyPool,
    state: Arc<Mutex<State>>,
    /// Rung when a call left the group (committed or rolled back its
    /// savepoint), so the committer queues for the lock. Shared with the
    /// committer, which holds the group itself only weakly.
    finished: Arc<Notify>,
    /// The direct writer of one-step writes; `None` in memory (no file for
    /// a second connection to open).
    direct: Option<Direct>,
    /// Calls that joined a group ([`Group::joins`]).
    joins: AtomicU64,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Group")
    }
}

#[derive(Default)]
pub(super) struct State {
    /// The connection, while a group's transaction is open.
    conn: Option<PoolConnection<Any>>,
    /// Where the open group's outcome is announced.
    outcome: Option<watch::Sender<Outcome>>,
    /// A call was abandoned inside its savepoint: roll it back first.
    abandoned: bool,
    /// The store is closing: no new group.
    pub(super) closed: bool,
    /// What every commit runs first ([`BeforeCommit`]); `None`: nothing.
    pub(super) before_commit: Option<&'static BeforeCommit>,
    /// Told of every commit; `None` in memory (no WAL).
    pub(super) checkpoints: Option<Arc<Checkpoints>>,
}

impl State {
    /// A group committed: its WAL pages are due a checkpoint.
    pub(super) fn committed(&self) {
        if let Some(checkpoints) = &self.checkpoints {
            checkpoints.committed();
        }
    }
}

/// One call's place in the group: holds the lock until its commit.
pub(super) struct Member {
    group: Arc<Group>,
    guard: Option<OwnedMutexGuard<State>>,
}

impl Group {
    /// The group over `pool` (SQLite's one writer connection), with its
    /// committer task on the current runtime, and the direct writer and
    /// the checkpoint thread of the database file `readers` read, when it
    /// is one (every commit is announced to them). Every commit of either
    /// writer runs `before_commit` first.
    pub(super) fn start(
        pool: AnyPool,
        readers: Option<&Arc<Inline>>,
        before_commit: &'static BeforeCommit,
    ) -> Result<Arc<Group>, String> {
        let checkpoints = readers
            .map(|readers| Checkpoints::start(readers.clone()))
            .transpose()?
            .map(Arc::new);
        let file = readers.map(|readers| readers.path());
        let state = Arc::new(Mutex::new(State {
            before_commit: Some(before_commit),
            checkpoints,
            ..State::default()
        }));
        let direct = file
            .map(|path| Direct::start(path, state.clone()))
            .transpose()?;
        let group = Arc::new(Group {
            pool,
            state,
            finished: Arc::new(Notify::new()),
            direct,
            joins: AtomicU64::new(0),
        });
        tokio::spawn(committer(group.finished.clone(), Arc::downgrade(&group)));
        Ok(group)
    }

    /// The direct writer of one-step writes, where there is one.
    pub(super) fn direct(&self) -> Option<&Direct> {
        self.direct.as_ref()
    }

    /// How many calls have joined a group since the store opened.
    pub(super) fn joins(&self) -> u64 {
        self.joins.load(Ordering::Relaxed)
    }

    /// Joins the open group (or begins one) and opens the call's savepoint.
    pub(super) async fn join(self: &Arc<Group>) -> OpResult<Member> {
        self.joins.fetch_add(1, Ordering::Relaxed);
        let mut guard = self.open().await?;
        let conn = guard.conn.as_mut().expect("the group's connection");
        if let Err(e) = conn.execute(OPEN_SAVEPOINT).await {
            drop(guard);
            self.finished.notify_one();
            return Err(db_error(e));
        }
        Ok(Member {
            group: self.clone(),
            guard: Some(guard),
        })
    }

    /// Leaves the group after a call's last statement: when `done` failed,
    /// marks the call's savepoint for rollback; hands the lock on, rings
    /// the committer and, when `done` succeeded, waits for the commit.
    async fn leave<T>(&self, mut guard: OwnedMutexGuard<State>, done: OpResult<T>) -> OpResult<T> {
        let outcome = match &done {
            Ok(_) => Some(subscribe(&guard)),
            Err(_) => {
                guard.abandoned = true;
                None
            }
        };
        drop(guard);
        self.finished.notify_one();
        if let Some(outcome) = outcome {
            wait_commit(outcome).await?;
        }
        done
    }

    /// The lock, with the group's transaction open (begun if none was).
    async fn open(&self) -> OpResult<OwnedMutexGuard<State>> {
        let mut guard = self.state.clone().lock_owned().await;
        if guard.closed {
            return Err(LoomError::internal("the store is closed"));
        }
        settle_abandoned(&mut guard).await?;
        if guard.conn.is_none() {
            guard.conn = Some(begin(self.pool.clone()).await?);
            guard.outcome = Some(watch::channel(None).0);
        }
        Ok(guard)
    }

    /// Lets the direct writer commit what it was given, commits the open
    /// group, if any, stops new ones and checkpoints a last time.
    pub(super) async fn close(&self) {
        if let Some(direct) = &self.direct {
            direct.stop().await;
        }
        let mut guard = self.state.lock().await;
        commit_open(&mut guard).await;
        guard.closed = true;
        let checkpoints = guard.checkpoints.clone();
        drop(guard);
        self.finished.notify_one();
        if let Some(checkpoints) = checkpoints {
            checkpoints.stop().await;
        }
    }
}

/// The writer connection with a transaction begun on it.
///
/// IMMEDIATE: the write lock is taken now, so another process's writer (a
/// CLI, a replica on the same file) holds the call up on busy_timeout at
/// the start instead of failing it half-way. That wait can outlast the
/// call, whose future is then dropped (its budget ran out, its client
/// cancelled it), while the statement goes on on sqlx's connection thread:
/// a `BEGIN` that succeeded after nobody waited for it left the connection
/// in the pool inside a transaction, holding the file's write lock, and
/// every later write failed (`cannot start a transaction within a
/// transaction`; the direct writer `database is locked`) until a restart.
/// So the begin runs in a task of its own, which rolls back a transaction
/// no call is left to take.
async fn begin(pool: AnyPool) -> OpResult<PoolConnection<Any>> {
    let (hand, take) = oneshot::channel();
    tokio::spawn(async move {
        let begun = async {
            let mut conn = pool.acquire().await.map_err(db_error)?;
            conn.execute("BEGIN IMMEDIATE").await.map_err(db_error)?;
            Ok(conn)
        }
        .await;
        if let Err(Ok(mut conn)) = hand.send(begun)
            && let Err(e) = conn.execute("ROLLBACK").await
        {
            // Closed rather than pooled: a connection still inside a
            // transaction must not serve another call.
            tracing::warn!(error = %e, "a transaction begun for a call that gave up could not be rolled back; closing its connection");
            let _ = conn.detach().close().await;
        }
    });
    take.await
        .map_err(|_| LoomError::internal("the task beginning a write transaction ended"))?
}

/// Rolls back the savepoint of a call that was abandoned inside it. When
/// that fails, what the call wrote cannot be told from what its group
/// wrote, so the whole group is rolled back and its members told.
async fn settle_abandoned(state: &mut State) -> OpResult<()> {
    if !std::mem::take(&mut state.abandoned) {
        return Ok(());
    }
    let Some(conn) = state.conn.as_mut() else {
        return Ok(());
    };
    let Err(e) = conn.execute(UNDO_SAVEPOINT).await else {
        return Ok(());
    };
    let e = db_error(e);
    end_open(
        state,
        Err(e.internal_message().unwrap_or(e.message()).to_owned()),
    )
    .await;
    Err(e)
}

/// Commits the open group and announces the outcome to its members.
pub(super) async fn commit_open(state: &mut State) {
    if settle_abandoned(state).await.is_err() {
        // The group was rolled back and its members told.
        return;
    }
    let Some(conn) = state.conn.as_mut() else {
        return;
    };
    let outcome = commit(conn, state.before_commit).await;
    if outcome.is_ok() {
        state.committed();
    }
    end_open(state, outcome).await;
}

/// Runs `before_commit`, once for the whole group and outside its calls'
/// savepoints, and commits.
async fn commit(
    conn: &mut PoolConnection<Any>,
    before_commit: Option<&'static BeforeCommit>,
) -> Result<(), String> {
    if let Some(before) = before_commit {
        let due: i64 = sqlx::query_scalar(before.when)
            .fetch_one(&mut **conn)
            .await
            .map_err(|e| e.to_string())?;
        if due > 0 {
            for statement in before.statements {
                conn.execute(*statement).await.map_err(|e| e.to_string())?;
            }
        }
    }
    conn.execute("COMMIT").await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Ends the open group with `outcome` (a failed one is rolled back, so no
/// transaction stays open on the connection the pool gets back) and
/// announces it to its members.
async fn end_open(state: &mut State, outcome: Result<(), String>) {
    let Some(mut conn) = state.conn.take() else {
        return;
    };
    if outcome.is_err() {
        let _ = conn.execute("ROLLBACK").await;
    }
    if let Some(tx) = state.outcome.take() {
        let _ = tx.send(Some(outcome));
    }
}

/// Where the open group's outcome will be announced.
fn subscribe(state: &State) -> watch::Receiver<Outcome> {
    state
        .outcome
        .as_ref()
        .expect("an open group has an outcome channel")
        .subscribe()
}

/// Waits for the group's commit.
async fn wait_commit(mut outcome: watch::Receiver<Outcome>) -> OpResult<()> {
    let ended = outcome
        .wait_for(Option::is_some)
        .await
        .map_err(|_| LoomError::internal("the group ended without an outcome"))?
        .clone();
    match ended {
        Some(Ok(())) => Ok(()),
        Some(Err(e)) => Err(LoomError::internal(format!("group commit failed: {e}"))),
        None => unreachable!("wait_for returned an open group"),
    }
}

/// Commits the open group each time a call left it. Stops when the store
/// is closed or dropped.
async fn committer(finished: Arc<Notify>, group: Weak<Group>) {
    loop {
        finished.notified().await;
        let Some(state) = group.upgrade().map(|g| g.state.clone()) else {
            return;
        };
        let mut guard = state.lock().await;
        if guard.closed {
            return;
        }
        commit_open(&mut guard).await;
    }
}

impl Member {
    /// The connection to run statements on, inside the call's savepoint.
    pub(super) fn conn(&mut self) -> &mut sqlx::AnyConnection {
        self.guard
            .as_mut()
            .and_then(|g| g.conn.as_mut())
            .expect("a member holds the group's connection")
    }

    /// Runs `release`, statements that end by releasing the savepoint
    /// ([`RELEASE_SAVEPOINT`] alone, or after the call's last writes), and
    /// waits for the group's commit. If any of them fails the savepoint is
    /// rolled back whole.
    pub(super) async fn commit_with(mut self, release: AnyQuery<'_>) -> OpResult<()> {
        let mut guard = self.guard.take().expect("a member holds the lock");
        let released = match guard.conn.as_mut() {
            Some(conn) => release
                .execute(&mut **conn)
                .await
                .map(|_| ())
                .map_err(db_error),
            None => Err(LoomError::internal("the group's connection is gone")),
        };
        self.group.leave(guard, released).await
    }

    /// Rolls back the call's savepoint; the group goes on.
    pub(super) async fn rollback(mut self) -> OpResult<()> {
        let mut guard = self.guard.take().expect("a member holds the lock");
        guard.abandoned = true;
        let settled = settle_abandoned(&mut guard).await;
        drop(guard);
        self.group.finished.notify_one();
        settled
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Dropped before commit or rollback (an error returned early, or
        // the call's future was dropped): the next holder of the lock rolls
        // the savepoint back before it writes.
        if let Some(mut guard) = self.guard.take() {
            guard.abandoned = true;
            drop(guard);
            self.group.finished.notify_one();
        }
    }
}
