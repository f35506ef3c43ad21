//! SQLite's direct writer: one-step writes ([`super::tx::OneStep`]) and the
//! batched bookkeeping ([`super::Store::write_direct`]: the call ledger, the
//! usage log) run back to back on a thread of its own, through rusqlite,
//! and share one commit.
//!
//! Why: through sqlx every statement list is a message to the writer
//! connection's worker thread and a wake-up back, and between two calls the
//! group's lock passes from one task to the next, each hop a thread switch
//! on a busy machine. Under 32 writing connections the writer connection sat
//! idle between calls for most of each call's time (the machine ~35% idle,
//! groups of ~12 calls per fsync). Here a call queues its write and waits;
//! the thread runs every queued write, then commits them all at once
//! (`synchronous=FULL`: one fsync) and only then answers them: no call is
//! answered before the commit that holds its write. A failed write is
//! undone alone ([`group`]). Writes that arrive during a commit form the
//! next group. Its connection writes the WAL through `loom_wal_buffer`
//! ([`worker::open`]): a commit's frames in one write instead of two for
//! each frame.
//!
//! A bookkeeping batch is thousands of rows of a few statements, which
//! through sqlx were each bound into sqlx's own values on the runtime and
//! run on the connection's worker thread; here its inserts run as cached
//! multi-row statements, up to 64 rows a step (`multirow`), and the batch
//! commits with the group it joins. Under memory.get's full load that took
//! the bookkeeping from ~21% to ~18% of the server's samples in `perf`
//! (bench/RESULTS.md), at a row per step; 64 rows a step took a further
//! ~6% off memory.get's instructions (`bench/instructions.sh`).
//!
//! Sharing the file with sqlx's writer: the thread takes the group's lock
//! ([`super::group`]) for each of its groups and commits the group open
//! there first, so the two never wait on SQLite's file lock for each other,
//! and writes that do not run in one step keep their order in line.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use loom_core::{LoomError, OpResult};
use rusqlite::Connection;
use rusqlite::types::Value;
use tokio::runtime::Handle;
use tokio::sync::{Mutex, OwnedMutexGuard, oneshot};

use super::group::{BeforeCommit, OPEN_SAVEPOINT, RELEASE_SAVEPOINT, State, commit_open};
use super::open::SQLITE_WRITER_SETTINGS;
use super::telemetry;
use super::worker::{self, Worker};
use super::writer_phases::{Phase, Phases};

/// Prepared statements the writer keeps: each one-step write is a few, and
/// each multi-row insert of the bookkeeping one per chunk length (seven).
const CACHED_STATEMENTS: usize = 64;
/// The most calls one group commits: bounds a commit's size and the wait
/// of the first call in it.
const MAX_GROUP: usize = 512;

/// How long the writer waits for a write after a group before it does
/// what the group's commit left for later ([`when_idle`]). Under load the
/// next write comes within a commit's time; 20 ms is a few commits.
const IDLE: Duration = Duration::from_millis(20);

/// Undoes a call's savepoint (then released as one that succeeded).
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT loom_call";

/// One call's write, run on the writer's connection; it answers a count
/// of rows (what it means is the caller's). `Fn`: a group that must be
/// run again in savepoints ([`group`]) runs its calls' writes again.
type Work = Box<dyn Fn(&Connection) -> rusqlite::Result<usize> + Send>;

/// One call's write and where its answer goes once committed.
struct Job {
    work: Work,
    reply: oneshot::Sender<OpResult<usize>>,
    _pending: Pending,
    /// When it was queued ([`Phases::committed`]).
    queued: Instant,
}

/// Counts a job in [`Direct::pending`] while it lives: from its queuing
/// until its group commits (or it is refused).
struct Pending(Arc<AtomicUsize>);

impl Pending {
    fn new(count: &Arc<AtomicUsize>) -> Pending {
        count.fetch_add(1, Ordering::Relaxed);
        Pending(count.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The direct writer of one SQLite file.
pub(super) struct Direct {
    worker: Worker<mpsc::Sender<Job>>,
    /// Cleared when the thread ends (stopped, or a panic): writes then take
    /// the path through sqlx's writer instead of failing one by one.
    running: Arc<AtomicBool>,
    /// Writes queued and not yet committed ([`Direct::pending`]).
    pending: Arc<AtomicUsize>,
}

/// Clears the writer's `running` flag when its thread ends, however it ends.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
        if std::thread::panicking() {
            tracing::error!("the direct writer stopped on a panic; writes go through the group");
        }
    }
}

impl Direct {
    /// Opens a connection to the file at `path` and starts the writer's
    /// thread, which takes `state`'s lock for each group.
    pub(super) fn start(path: &Path, state: Arc<Mutex<State>>) -> Result<Direct, String> {
        let conn = open(path).map_err(|e| format!("cannot open the direct writer: {e}"))?;
        let (tx, rx) = mpsc::channel();
        let runtime = Handle::current();
        let running = Arc::new(AtomicBool::new(true));
        let flag = Running(running.clone());
        let worker = Worker::spawn("loom-sqlite-writer", tx, move || {
            let _running = flag;
            run(&conn, &rx, &state, &runtime);
        })?;
        Ok(Direct {
            worker,
            running,
            pending: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// How many writes are queued or running and not yet committed.
    pub(super) fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Whether the thread still takes writes.
    pub(super) fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Runs `chain` with `values` (`$n` is `values[n - 1]` in every
    /// statement) as one call's write ([`run_chain`]), then `then` when the
    /// whole chain ran, and waits for its group's commit; answers whether
    /// the chain ran to its end. If a statement fails, the call's write is
    /// undone whole and its group goes on.
    pub(super) async fn write(
        &self,
        chain: &'static [Numbered],
        then: Option<&'static Numbered>,
        values: Vec<Value>,
    ) -> OpResult<bool> {
        let done = self.run(move |conn| {
            let ran = run_chain(conn, chain, &values)?;
            if ran && let Some(then) = then {
                run_statement(conn, then, &values)?;
            }
            Ok(usize::from(ran))
        });
        Ok(done.await? == 1)
    }

    /// Queues `work` as one call's write, as [`Direct::write`] does a
    /// statement list, and answers a future of its outcome: answered after
    /// its group's commit, undone alone when it fails. The write is queued
    /// when this is called, not when the future is first polled. `work` may
    /// run twice (the first run undone): it must act only on the
    /// connection.
    pub(super) fn run<W>(&self, work: W) -> impl Future<Output = OpResult<usize>> + use<W>
    where
        W: Fn(&Connection) -> rusqlite::Result<usize> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            work: Box::new(work),
            reply,
            _pending: Pending::new(&self.pending),
            queued: Instant::now(),
        };
        let sent = self.worker.sender().as_ref().map(|jobs| jobs.send(job));
        let queued = matches!(sent, Some(Ok(())));
        async move {
            if !queued {
                return Err(LoomError::internal("the store is closed"));
            }
            answer
                .await
                .map_err(|_| LoomError::internal("the direct writer stopped"))?
        }
    }

    /// Stops taking writes, lets the thread commit what it was given and
    /// waits for it to end.
    pub(super) async fn stop(&self) {
        self.worker.stop().await;
    }
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = worker::open(path, true)?;
    // As sqlx's writer connection: the same durability and caches.
    conn.execute_batch(SQLITE_WRITER_SETTINGS)?;
    conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
    // The one-step writes' blacklist guard (memory::store::none_held).
    crate::blacklist::pattern::register(&conn)?;
    Ok(conn)
}

/// The writer's loop: a group per wake-up, until every sender is gone;
/// when no write comes for [`IDLE`] after a group, what its commits left
/// for later ([`BeforeCommit`]) is done then ([`when_idle`]).
fn run(conn: &Connection, jobs: &mpsc::Receiver<Job>, state: &Arc<Mutex<State>>, rt: &Handle) {
    let mut left = false;
    let mut phases = Phases::new();
    loop {
        let next = if left {
            jobs.recv_timeout(IDLE)
        } else {
            jobs.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let first = match next {
            Ok(first) => first,
            Err(RecvTimeoutError::Timeout) => {
                left = false;
                phases.end(Phase::Waiting);
                if let Some(guard) = lock(state, rt)
                    && when_idle(conn, &guard)
                {
                    phases.handed_over();
                }
                phases.end(Phase::HandingOver);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let Some(guard) = lock(state, rt) else {
            let _ = first
                .reply
                .send(Err(LoomError::internal("the store is closed")));
            continue;
        };
        phases.end(Phase::Waiting);
        let answers = group(conn, first, jobs, &guard, &mut phases);
        left = guard.before_commit.is_some();
        drop(guard);
        let calls = answers.len();
        for (reply, answer) in answers {
            let _ = reply.send(answer);
        }
        phases.done(calls);
    }
}

/// The group's lock, with sqlx's open group committed; `None` once the
/// store is closing.
fn lock(state: &Arc<Mutex<State>>, rt: &Handle) -> Option<OwnedMutexGuard<State>> {
    rt.block_on(async {
        let mut guard = state.clone().lock_owned().await;
        if guard.closed {
            return None;
        }
        commit_open(&mut guard).await;
        Some(guard)
    })
}

/// What the writer's commits left for later, done in a transaction of its
/// own once no write has come for [`IDLE`]: whatever the state's
/// [`BeforeCommit`] finds due, however short of its batch. Whether it
/// committed any.
///
/// Why: a commit hands FTS5 the full-text queue only once it holds a
/// batch (`full_text_queue`), and a search first hands it whatever is
/// queued, so the first search after a burst of writes paid for up to a
/// batch of them, and every search begun meanwhile waited for it: after
/// the benchmark's sets, the searches of the first half second waited
/// 100-150 ms on a slow host (bench/RESULTS.md). Under a steady stream of
/// writes the writer is never idle this long, and the batches stay whole.
fn when_idle(conn: &Connection, state: &State) -> bool {
    let Some(before) = state.before_commit else {
        return false;
    };
    let done = due(conn, before).and_then(|due| {
        if due == 0 {
            return Ok(false);
        }
        begin(conn)?;
        let run = hand_over(conn, before).and_then(|()| execute(conn, "COMMIT"));
        if run.is_err() {
            roll_back(conn);
        }
        run.map(|()| true)
    });
    match done {
        Ok(true) => {
            state.committed();
            true
        }
        Ok(false) => false,
        Err(e) => {
            tracing::warn!(cause = %e, "the idle writer's commit failed; the next commit does it");
            false
        }
    }
}

type Answer = (oneshot::Sender<OpResult<usize>>, OpResult<usize>);

/// Runs `first` and every write queued behind it in one transaction, then
/// the state's `before_commit`, and commits it: each call's answer, all
/// failed when the commit did.
///
/// The calls run with no savepoint of their own while none fails: a
/// savepoint costs each call two statements and a copy of every page it
/// changes that the group held before (SQLite's statement journal), for
/// the rare call that fails. When one does, what it wrote before its
/// failing statement cannot be told from what its group wrote, so the
/// transaction is rolled back and the group so far runs again, each call
/// in a savepoint, and so does the rest of the group. (A one-step write's
/// statements keep no journal of their own either: `tx::or_fail`.)
fn group(
    conn: &Connection,
    first: Job,
    jobs: &mpsc::Receiver<Job>,
    state: &State,
    phases: &mut Phases,
) -> Vec<Answer> {
    let mut taken: Vec<Job> = Vec::new();
    let mut answers: Vec<OpResult<usize>> = Vec::new();
    let mut guarded = false;
    let mut run = begin(conn);
    let mut next = Some(first);
    while let Some(job) = next.take() {
        // A call whose caller has gone is not made: its latency budget ran
        // out while the write waited its turn or for the file's lock (held
        // by another program), and it was answered that it timed out and
        // may retry. Checked once the lock is held, just before its
        // statements: a budget running out during them or the commit
        // (microseconds to a sync) is the one window left.
        if job.reply.is_closed() {
            tracing::debug!("a write whose caller has gone is not made");
        } else {
            run = run.and_then(|()| add(conn, &job, &taken, &mut answers, &mut guarded));
            taken.push(job);
            if run.is_err() {
                break;
            }
        }
        if taken.len() < MAX_GROUP {
            next = jobs.try_recv().ok();
        }
    }
    phases.end(Phase::Running);
    let run = run.and_then(|()| before_commit(conn, state.before_commit));
    if matches!(run, Ok(true)) {
        phases.handed_over();
    }
    phases.end(Phase::HandingOver);
    let run = run.and_then(|_| execute(conn, "COMMIT"));
    phases.end(Phase::Committing);
    phases.committed(taken.iter().map(|job| job.queued));
    let replies = taken.into_iter().map(|job| job.reply);
    match run {
        Ok(()) => {
            state.committed();
            replies.zip(answers).collect()
        }
        Err(e) => failed(conn, replies, &e),
    }
}

/// Runs `job`, the next call of a group whose calls so far are `taken`,
/// answered in `answers`: bare until one fails (`guarded` then), each in
/// a savepoint after; the call that fails bare rolls the group back and
/// runs it again, in savepoints. `Err` when the transaction cannot go on:
/// a savepoint that could not be opened, released or undone, or no new
/// transaction after the rollback.
fn add(
    conn: &Connection,
    job: &Job,
    taken: &[Job],
    answers: &mut Vec<OpResult<usize>>,
    guarded: &mut bool,
) -> rusqlite::Result<()> {
    if *guarded {
        answers.push(call(conn, &job.work)?);
        return Ok(());
    }
    if let Ok(rows) = (job.work)(conn) {
        answers.push(Ok(rows));
        return Ok(());
    }
    roll_back(conn);
    *guarded = true;
    answers.clear();
    begin(conn)?;
    for work in taken.iter().map(|j| &j.work).chain([&job.work]) {
        answers.push(call(conn, work)?);
    }
    Ok(())
}

/// Begins the writer's transaction, taking the write lock at once.
fn begin(conn: &Connection) -> rusqlite::Result<()> {
    execute(conn, "BEGIN IMMEDIATE")
}

/// Runs what a commit runs first ([`BeforeCommit`]), once a batch of it
/// is due; whether it did.
fn before_commit(conn: &Connection, before: Option<&BeforeCommit>) -> rusqlite::Result<bool> {
    let Some(before) = before else {
        return Ok(false);
    };
    if due(conn, before)? < before.batch.max(1) {
        return Ok(false);
    }
    hand_over(conn, before)?;
    Ok(true)
}

/// How much of `before`'s work is due (its `when`).
fn due(conn: &Connection, before: &BeforeCommit) -> rusqlite::Result<i64> {
    conn.prepare_cached(before.when)?
        .query_row([], |row| row.get(0))
}

/// Runs `before`'s statements, in the open transaction.
fn hand_over(conn: &Connection, before: &BeforeCommit) -> rusqlite::Result<()> {
    before
        .statements
        .iter()
        .try_for_each(|statement| execute(conn, statement))
}

/// Rolls the open transaction back and fails every call of the group.
fn failed(
    conn: &Connection,
    replies: impl Iterator<Item = oneshot::Sender<OpResult<usize>>>,
    e: &rusqlite::Error,
) -> Vec<Answer> {
    roll_back(conn);
    tracing::error!(cause = %e, "a direct write group failed");
    replies
        .map(|reply| {
            let error = LoomError::internal(format!("group commit failed: {e}"));
            (reply, Err(error))
        })
        .collect()
}

/// Rolls the open transaction back, and drops what it wrote to a WAL's
/// buffer and did not commit.
fn roll_back(conn: &Connection) {
    let _ = conn.execute_batch("ROLLBACK");
    for schema in [c"main", telemetry::SCHEMA_C] {
        loom_wal_buffer::discard(conn, schema);
    }
}

/// One call in its savepoint: `Ok` with its answer (a failed statement is
/// the call's error, its savepoint undone), `Err` when the savepoint could
/// not be opened, released or undone.
fn call(conn: &Connection, work: &Work) -> rusqlite::Result<OpResult<usize>> {
    execute(conn, OPEN_SAVEPOINT)?;
    match work(conn) {
        Ok(rows) => {
            execute(conn, RELEASE_SAVEPOINT)?;
            Ok(Ok(rows))
        }
        Err(e) => {
            execute(conn, ROLLBACK_TO_SAVEPOINT)?;
            execute(conn, RELEASE_SAVEPOINT)?;
            Ok(Err(sqlite_error(&e)))
        }
    }
}

/// A statement of a one-step write ([`super::tx::OneStep`]), with the
/// number of each of its parameters once it has run.
///
/// Why kept: SQLite numbers `$n` parameters in the order they first appear
/// in the text, so parameter `i` of the prepared statement is `$n` for an
/// `n` only the text decides. Asked of SQLite at every run (its name, a
/// walk of the statement's name list, then parsed), ~45 parameters a
/// `memory.set`, each in a list of up to ~30, that was 6% of the writer
/// thread's instructions a set (`bench/instructions.sh`, bench/RESULTS.md).
/// The numbers are the text's, the same on any connection: asked once.
#[derive(Debug)]
pub(super) struct Numbered {
    sql: String,
    numbers: OnceLock<Box<[usize]>>,
}

impl Numbered {
    /// `sql`, written with `$1`, `$2`, … parameters.
    pub(super) fn new(sql: String) -> Numbered {
        Numbered {
            sql,
            numbers: OnceLock::new(),
        }
    }

    /// The statement's text.
    pub(super) fn sql(&self) -> &str {
        &self.sql
    }

    /// Of each parameter of `stmt` (this statement, prepared), in order,
    /// the `n` of its name `$n`.
    fn numbers(&self, stmt: &rusqlite::Statement<'_>) -> rusqlite::Result<&[usize]> {
        if let Some(numbers) = self.numbers.get() {
            return Ok(numbers);
        }
        let numbers = (1..=stmt.parameter_count())
            .map(|index| {
                stmt.parameter_name(index)
                    .and_then(|name| name.strip_prefix('$'))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| rusqlite::Error::InvalidParameterName(format!("#{index}")))
            })
            .collect::<rusqlite::Result<Box<[usize]>>>()?;
        Ok(self.numbers.get_or_init(|| numbers))
    }
}

/// Runs `chain` in order, binding `$n` to `values[n - 1]`, each
/// statement only when the one before it changed a row or returned one;
/// whether the last one did (the chain ran to its end). A `$n` past
/// `values` is an error, not a NULL.
///
/// Why the chain is kept here and not in the SQL (`... WHERE changes() =
/// 1`): a statement that calls an SQL function may fail part way (the
/// function may), so SQLite keeps a statement journal for it when it writes
/// more than one row (its triggers' included) inside a transaction,
/// copying each page it changes before it does. A `memory.set` was three
/// such statements; without the functions (its size for search counted on
/// the calling thread, ~4.5 points of it) the writer thread ran 18-21%
/// fewer instructions a set (`bench/instructions.sh`, bench/RESULTS.md).
fn run_chain(conn: &Connection, chain: &[Numbered], values: &[Value]) -> rusqlite::Result<bool> {
    for statement in chain {
        if !run_statement(conn, statement, values)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs `statement`, binding `$n` to `values[n - 1]`; whether it changed a
/// row (its triggers' changes counted) or returned one.
fn run_statement(
    conn: &Connection,
    statement: &Numbered,
    values: &[Value],
) -> rusqlite::Result<bool> {
    let changes = conn.total_changes();
    let mut stmt = conn.prepare_cached(statement.sql())?;
    for (index, &n) in statement.numbers(&stmt)?.iter().enumerate() {
        let value = values
            .get(n - 1)
            .ok_or_else(|| rusqlite::Error::InvalidParameterName(format!("${n}")))?;
        stmt.raw_bind_parameter(index + 1, value)?;
    }
    let mut returned = stmt.raw_query();
    let mut any = false;
    while returned.next()?.is_some() {
        any = true;
    }
    Ok(any || conn.total_changes() != changes)
}

fn execute(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.raw_execute().map(|_| ())
}

/// A failed write: an internal fault whose cause is logged, never sent.
fn sqlite_error(e: &rusqlite::Error) -> LoomError {
    LoomError::internal(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statements(sql: &[&str]) -> &'static [Numbered] {
        Box::leak(sql.iter().map(|s| Numbered::new((*s).to_owned())).collect())
    }

    /// A new WAL database holding `schema`, in a folder of its own (kept
    /// while the `TempDir` lives).
    fn database(schema: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch(&format!("PRAGMA journal_mode = WAL; {schema}"))
            .unwrap();
        (dir, path)
    }

    /// The first column of `sql`'s rows, read from the file by a
    /// connection of its own.
    fn column<T: rusqlite::types::FromSql>(path: &Path, sql: &str) -> Vec<T> {
        Connection::open(path)
            .unwrap()
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_commit_fail_alone_and_stop_with_the_thread() {
        let (_dir, path) = database("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)");
        let direct = Direct::start(&path, Arc::new(Mutex::new(State::default()))).unwrap();
        assert!(direct.running());

        let insert = statements(&["INSERT INTO t (k, v) VALUES ($1, $2) RETURNING v"]);
        let row = |k: &str, v: i64| vec![Value::Text(k.into()), Value::Integer(v)];
        assert!(direct.write(insert, None, row("a", 1)).await.unwrap());
        // A duplicate key fails in the database: that write alone.
        let (dup, b) = tokio::join!(
            direct.write(insert, None, row("a", 2)),
            direct.write(insert, None, row("b", 3))
        );
        assert!(dup.is_err());
        assert!(b.unwrap());
        // A parameter the values do not hold is the write's error.
        let unbound = statements(&["INSERT INTO t (k, v) VALUES ($1, $9)"]);
        assert!(direct.write(unbound, None, row("c", 4)).await.is_err());

        let committed: Vec<(String, i64)> = Connection::open(&path)
            .unwrap()
            .prepare("SELECT k, v FROM t ORDER BY k")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(committed, [("a".to_owned(), 1), ("b".to_owned(), 3)]);

        direct.stop().await;
        assert!(!direct.running());
        assert!(direct.write(insert, None, row("d", 5)).await.is_err());
    }

    /// Parameters bind by the number in their names, however the text
    /// orders and repeats them, on the first run (numbers asked of SQLite)
    /// and on the next (numbers kept), and from the second statement of a
    /// list as from the first.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parameters_bind_by_their_numbers_on_every_run() {
        let (_dir, path) = database("CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)");
        let direct = Direct::start(&path, Arc::new(Mutex::new(State::default()))).unwrap();
        let insert = statements(&[
            "INSERT INTO t (a, b, c) VALUES ($3, $1, $3)",
            "INSERT INTO t (a, b, c) VALUES ($2, $2 + $1, $4)",
        ]);
        let values = |base: i64| (1..=4).map(|i| Value::Integer(base + i)).collect();
        direct.write(insert, None, values(0)).await.unwrap();
        direct.write(insert, None, values(10)).await.unwrap();
        direct.stop().await;

        let rows: Vec<String> = column(
            &path,
            "SELECT a || ' ' || b || ' ' || c FROM t ORDER BY rowid",
        );
        assert_eq!(rows, ["3 1 3", "2 3 4", "13 11 13", "12 23 14"]);
    }

    /// A chain's statement runs only when the one before it changed a row
    /// or returned one, and what follows the chain only when all of it ran.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_chain_stops_at_a_statement_that_did_nothing() {
        let (_dir, path) =
            database("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER); CREATE TABLE log (k TEXT)");
        let direct = Direct::start(&path, Arc::new(Mutex::new(State::default()))).unwrap();
        let chain = statements(&[
            "SELECT 1 WHERE $2 > 0",
            "INSERT INTO t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING",
            "UPDATE t SET v = v + 1 WHERE k = $1",
        ]);
        let then = &statements(&["INSERT INTO log (k) VALUES ($1)"])[0];
        let row = |k: &str, v: i64| vec![Value::Text(k.into()), Value::Integer(v)];
        assert!(direct.write(chain, Some(then), row("a", 1)).await.unwrap());
        // The first statement returns no row: nothing after it runs.
        assert!(!direct.write(chain, Some(then), row("b", 0)).await.unwrap());
        // The insert changes nothing (the key is there): neither the update
        // nor what follows the chain runs.
        assert!(!direct.write(chain, Some(then), row("a", 5)).await.unwrap());
        direct.stop().await;

        let t: Vec<String> = column(&path, "SELECT k || ' ' || v FROM t ORDER BY k");
        assert_eq!(t, ["a 2"]);
        let log: Vec<String> = column(&path, "SELECT k FROM log");
        assert_eq!(log, ["a"]);
    }

    /// A write whose caller gave up (its future dropped: the call's budget
    /// ran out) before the writer got the file's lock is not made; the
    /// writes queued with it are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_has_gone_is_not_made() {
        let (_dir, path) = database("CREATE TABLE t (k TEXT PRIMARY KEY)");
        let direct = Direct::start(&path, Arc::new(Mutex::new(State::default()))).unwrap();
        let insert = |k: &'static str| {
            move |conn: &Connection| conn.execute("INSERT INTO t (k) VALUES (?1)", [k])
        };

        // Another program holds the file's write lock: the writer waits for
        // it in its BEGIN (busy_timeout) with the first write in hand.
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let gone = direct.run(insert("gone"));
        let kept = direct.run(insert("kept"));
        drop(gone);
        other.execute_batch("COMMIT").unwrap();

        assert_eq!(kept.await.unwrap(), 1);
        let committed: Vec<String> = column(&path, "SELECT k FROM t ORDER BY k");
        assert_eq!(committed, ["kept"]);
        direct.stop().await;
    }

    /// A call that fails after writing part of its write, in a group with
    /// calls before and after it: its part is undone and theirs commit.
    /// The group runs with no savepoints until the failure, so the call
    /// before it runs twice (rolled back, then again in a savepoint).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_that_fails_half_way_leaves_nothing_and_its_group_commits() {
        use std::sync::atomic::AtomicUsize;

        let (_dir, path) = database("CREATE TABLE t (k TEXT PRIMARY KEY)");
        let state = Arc::new(Mutex::new(State::default()));
        let direct = Direct::start(&path, state.clone()).unwrap();
        let insert =
            |conn: &Connection, k: &str| conn.execute("INSERT INTO t (k) VALUES (?1)", [k]);
        let runs = Arc::new(AtomicUsize::new(0));

        // The writer takes the state's lock for each group: held, every
        // write below is queued before the group that takes them begins.
        let held = state.lock().await;
        let counted = runs.clone();
        let before = direct.run(move |conn| {
            counted.fetch_add(1, Ordering::Relaxed);
            insert(conn, "before")
        });
        let half = direct.run(move |conn| {
            insert(conn, "half")?;
            insert(conn, "before")
        });
        let after = direct.run(move |conn| insert(conn, "after"));
        drop(held);
        let (before, half, after) = tokio::join!(before, half, after);

        assert_eq!(before.unwrap(), 1);
        assert!(half.is_err(), "a duplicate key: the call's error");
        assert_eq!(after.unwrap(), 1);
        assert_eq!(runs.load(Ordering::Relaxed), 2, "one group, run again");
        let committed: Vec<String> = column(&path, "SELECT k FROM t ORDER BY k");
        assert_eq!(committed, ["after", "before"]);
        direct.stop().await;
    }

    /// What a commit left short of its batch ([`BeforeCommit`]) is done
    /// once the writer has had no write for [`IDLE`], with no other write
    /// or read to prompt it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_writer_does_what_its_commits_left() {
        static MOVE: BeforeCommit = BeforeCommit {
            when: "SELECT count(*) FROM queued",
            batch: 100,
            statements: &[
                "INSERT INTO moved SELECT v FROM queued",
                "DELETE FROM queued",
            ],
        };
        let (_dir, path) =
            database("CREATE TABLE queued (v INTEGER); CREATE TABLE moved (v INTEGER)");
        let mut state = State::default();
        state.before_commit = Some(&MOVE);
        let direct = Direct::start(&path, Arc::new(Mutex::new(state))).unwrap();
        let insert = statements(&["INSERT INTO queued (v) VALUES ($1)"]);
        for v in 0..3 {
            direct
                .write(insert, None, vec![Value::Integer(v)])
                .await
                .unwrap();
        }
        let reader = Connection::open(&path).unwrap();
        let counts = || -> (i64, i64) {
            reader
                .query_row(
                    "SELECT (SELECT count(*) FROM queued), (SELECT count(*) FROM moved)",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap()
        };
        // The writer's idle turn comes on its own: polled, up to a bound
        // far past IDLE.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while counts() != (0, 3) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(counts(), (0, 3));
        direct.stop().await;
    }

    /// The writer's connection writes its WAL through loom-wal-buffer, and
    /// a write that was answered left nothing in the buffer: its commit
    /// wrote it out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_writes_its_wal_through_the_buffer() {
        let (_dir, path) = database("CREATE TABLE t (v BLOB)");
        let direct = Direct::start(&path, Arc::new(Mutex::new(State::default()))).unwrap();
        let insert = statements(&["INSERT INTO t (v) VALUES (zeroblob($1))"]);
        direct
            .write(insert, None, vec![Value::Integer(50_000)])
            .await
            .unwrap();
        let held = direct
            .run(|conn| Ok(loom_wal_buffer::buffered(conn, c"main").unwrap_or(usize::MAX)))
            .await
            .unwrap();
        assert_eq!(held, 0, "usize::MAX: the WAL is not the buffer's");
        let size: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT length(v) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(size, 50_000);
        direct.stop().await;
    }

    /// What a commit runs first runs only once a batch of it is due: not
    /// for a commit that queued nothing (the store's drain would write the
    /// queue's page for nothing), nor for one that queued less than a batch.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_runs_what_comes_first_only_when_a_batch_is_due() {
        static DRAIN: BeforeCommit = BeforeCommit {
            when: "SELECT COUNT(*) FROM queue",
            batch: 3,
            statements: &[
                "INSERT INTO drains (n) SELECT COUNT(*) FROM queue",
                "DELETE FROM queue",
            ],
        };
        let (_dir, path) = database(
            "CREATE TABLE t (v INTEGER); CREATE TABLE queue (v INTEGER); \
             CREATE TABLE drains (n INTEGER)",
        );
        let mut state = State::default();
        state.before_commit = Some(&DRAIN);
        let direct = Direct::start(&path, Arc::new(Mutex::new(state))).unwrap();
        let drains = || -> Vec<i64> { column(&path, "SELECT n FROM drains") };

        let into_t = statements(&["INSERT INTO t (v) VALUES ($1)"]);
        direct
            .write(into_t, None, vec![Value::Integer(1)])
            .await
            .unwrap();
        assert_eq!(drains(), Vec::<i64>::new(), "nothing queued, no drain");

        let queued = statements(&["INSERT INTO queue (v) VALUES ($1), ($1)"]);
        direct
            .write(queued, None, vec![Value::Integer(2)])
            .await
            .unwrap();
        assert_eq!(drains(), Vec::<i64>::new(), "less than a batch queued");
        direct
            .write(queued, None, vec![Value::Integer(3)])
            .await
            .unwrap();
        assert_eq!(drains(), [4], "drained in the commit that made a batch");

        direct
            .write(into_t, None, vec![Value::Integer(4)])
            .await
            .unwrap();
        assert_eq!(drains(), [4]);
        direct.stop().await;
    }
}
