//! Point reads on the calling thread (SQLite): [`Store::read_inline`].
//!
//! Why: sqlx drives each SQLite connection from a worker thread of its own,
//! so every statement is a message to that thread and a wake-up back, and
//! each row read is another message. For a read that finds one row by an
//! index (a few microseconds of SQLite's time) those hand-offs were most of
//! the cost: on `memory.get`, the authorization statement and the row were
//! four thread switches per call and kept the machine's cores switching
//! instead of serving. Run on the calling thread through rusqlite (the same
//! bundled SQLite library sqlx links), `memory.get` served ~70% more calls
//! a second on 2 cores.
//!
//! Why it may block the runtime's thread: these connections only read, in
//! WAL mode, where a reader never waits for the writer; their busy timeout
//! is zero, so the one wait SQLite could still impose (another process
//! recovering the WAL after a crash) is answered "busy" at once, and the
//! caller then runs the same statement through [`Store::read`] instead.
//! Only statements bounded by an index lookup belong here; anything that
//! scans or sorts many rows (listings) stays on sqlx's threads. Search is
//! the one exception, under a time budget: [`Store::read_inline_within`]
//! has SQLite interrupt a statement that runs past it, and the caller runs
//! it on sqlx's threads instead.
//!
//! Why a connection keeps its read snapshot across reads: beginning and
//! ending a read transaction (SQLite's locks on the WAL index, a system
//! call each way, and its check whether the file changed) was ~5% of the
//! server's CPU under `memory.get`'s load, more than a quarter of the read.
//! A connection now keeps its snapshot until the store's writers commit
//! ([`Inline::committed`], which every commit of the direct writer and
//! sqlx's group announces before it answers its callers, so a caller
//! reads what it was told was written) or for [`SNAPSHOT_AGE`] at most,
//! which bounds how late a write from outside the group is seen: another
//! process's, or the few the store makes on sqlx's writer pool directly
//! (the signing key, the default org, revocations, OAuth and session-run
//! rows, shared rate buckets), none of which a point read reads. It keeps
//! one only while reads come with no commit between them (a read load);
//! and an idle connection's snapshot is ended at each commit and after
//! each checkpoint ([`Inline::end_idle`]), as a snapshot holds a place in
//! the WAL and the writer starts the WAL over only when no reader has one.
//! Under the set workload the WAL grew to ~57 MB at most, against ~45 MB
//! with a transaction per read.
//!
//! They read the main file only: the telemetry file (`telemetry`) is not
//! attached, as no point read needs it, and a read of the memories should
//! not fail over a file it does not read.
//!
//! PostgreSQL, and SQLite in memory (nothing else could open it), have no
//! inline reads: [`Store::read_inline`] answers `None` and the caller uses
//! [`Store::read`].

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loom_core::{LoomError, OpResult};
use rusqlite::{Connection, OpenFlags, Statement, ToSql};

use super::{Store, worker};

/// Prepared statements each connection keeps (rusqlite's statement cache).
const CACHED_STATEMENTS: usize = 32;

/// The longest a read snapshot serves a connection when no commit is
/// announced: a write from outside the store's writers is seen this late
/// at most. Under load a connection serves ~20 reads in this time.
const SNAPSHOT_AGE: Duration = Duration::from_millis(1);

/// The read connections of one SQLite file.
pub(super) struct Inline {
    path: PathBuf,
    idle: Mutex<Vec<Reader>>,
    closed: AtomicBool,
    /// Commits the store's writers announced ([`Inline::committed`]).
    commits: AtomicU64,
}

/// A read connection and the snapshot it holds open, if any: the commits
/// announced before it began, and when it began.
struct Reader {
    conn: Connection,
    snapshot: Option<(u64, Instant)>,
    /// The commits announced when it was last taken for a read.
    last_taken: u64,
}

impl Reader {
    /// Ends the snapshot; false when the connection could not leave its
    /// transaction and is not to be used again.
    fn end(&mut self) -> bool {
        self.snapshot = None;
        if !self.conn.is_autocommit() {
            // A read transaction: nothing to undo, and it ends either way.
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
        self.conn.is_autocommit()
    }

    /// Begins a snapshot, unless one that is still current is open.
    fn begin(&mut self, commits: u64) -> rusqlite::Result<()> {
        if self
            .snapshot
            .is_some_and(|(seen, since)| seen != commits || since.elapsed() > SNAPSHOT_AGE)
        {
            self.end();
        }
        if self.snapshot.is_none() {
            // Deferred: the snapshot is taken by the first read, after
            // `commits` was: it holds at least what they counted.
            self.conn.prepare_cached("BEGIN")?.execute([])?;
            self.snapshot = Some((commits, Instant::now()));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Inline {
    /// Inline reads of the database file at `path`.
    pub(super) fn new(path: PathBuf) -> Inline {
        Inline {
            path,
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            commits: AtomicU64::new(0),
        }
    }

    /// The database file.
    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// A reader through the store's VFS, which keeps its memory map across
    /// commits (`loom_wal_buffer`: SQLite would map the file again at the
    /// first read after each).
    fn open(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags_and_vfs(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            worker::vfs()?,
        )?;
        // busy_timeout 0: never wait on the runtime's thread (module doc).
        // mmap_size as on sqlx's connections (`open`).
        conn.execute_batch("PRAGMA busy_timeout = 0; PRAGMA mmap_size = 1073741824;")?;
        conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
        Ok(conn)
    }

    /// Runs `read` on an idle connection (opened when there is none).
    /// `None`: the file is busy (see the module doc), the read was
    /// interrupted ([`Store::read_inline_within`]) or the store closed.
    fn run<T>(
        &self,
        read: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Option<OpResult<T>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut reader = match idle {
            Some(reader) => reader,
            None => match self.open() {
                Ok(conn) => Reader {
                    conn,
                    snapshot: None,
                    last_taken: u64::MAX,
                },
                Err(e) if busy(&e) => return None,
                Err(e) => return Some(Err(sqlite_error(e))),
            },
        };
        let commits = self.commits.load(Ordering::Acquire);
        // Kept for the next read only where the last one would have served
        // this one: no commit came between the two. Under a write load
        // nearly every read finds a commit came, and a kept snapshot would
        // only hold a place in the WAL while the connection idles, which
        // stops the writer from starting the WAL over.
        let keep = std::mem::replace(&mut reader.last_taken, commits) == commits;
        let out = reader.begin(commits).and_then(|()| read(&mut reader.conn));
        let stale = self.commits.load(Ordering::Acquire) != commits;
        let usable = (out.is_ok() && keep && !stale) || reader.end();
        let out = match out {
            Err(e) if busy(&e) || interrupted(&e) => None,
            out => Some(out.map_err(sqlite_error)),
        };
        if usable && !self.closed.load(Ordering::Acquire) {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(reader);
        }
        out
    }

    /// A writer committed to the file: every snapshot begun before is
    /// stale, and the idle connections' are ended now. Called before the
    /// commit's callers are answered.
    pub(super) fn committed(&self) {
        self.commits.fetch_add(1, Ordering::Release);
        self.end_idle();
    }

    /// Ends the snapshots of the connections no read is using, so they do
    /// not hold back a checkpoint (see the module doc).
    pub(super) fn end_idle(&self) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain_mut(Reader::end);
    }

    /// Closes the idle connections; later reads answer `None`.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn interrupted(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted)
}

/// VM instructions between two looks at a bounded read's clock.
const PROGRESS_STEPS: std::ffi::c_int = 1000;

/// A failed inline read: an internal fault whose cause is logged, never sent
/// (as [`super::db_error`] does for sqlx's errors).
fn sqlite_error(e: rusqlite::Error) -> LoomError {
    LoomError::internal(e)
}

/// Binds `values` to a statement written with `$1`, `$2`, … (as every
/// statement of the store is): `values[i]` to `$(i+1)`. SQLite numbers
/// `$n` parameters in the order they first appear in the text, so each of
/// the statement's parameters is bound by the number in its name; a `$n`
/// beyond `values` stays NULL. By index, not by asking SQLite for each
/// name's index: that copied the name into a C string and searched the
/// statement's names, ~1.5% of a `memory.get`'s instructions.
fn bind_numbered(stmt: &mut Statement<'_>, values: &[&dyn ToSql]) -> rusqlite::Result<()> {
    for index in 1..=stmt.parameter_count() {
        let name = stmt.parameter_name(index);
        let number = name
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| rusqlite::Error::InvalidParameterName(name.unwrap_or("?").to_owned()))?;
        if let Some(value) = number.checked_sub(1).and_then(|i| values.get(i)) {
            stmt.raw_bind_parameter(index, value)?;
        }
    }
    Ok(())
}

/// The first row `sql` answers with `values` bound ([`bind_numbered`]),
/// decoded by `decode`; `None` when it answers none.
pub fn first_row<T>(
    conn: &Connection,
    sql: &str,
    values: &[&dyn ToSql],
    decode: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    bind_numbered(&mut stmt, values)?;
    let mut rows = stmt.raw_query();
    rows.next()?.map(decode).transpose()
}

/// Every row `sql` answers with `values` bound, decoded by `decode`. For
/// statements bounded by an index (an org's namespaces), not scans.
pub fn all_rows<T>(
    conn: &Connection,
    sql: &str,
    values: &[&dyn ToSql],
    mut decode: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    bind_numbered(&mut stmt, values)?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    Ok(out)
}

impl Store {
    /// Runs `read` on the calling thread, on SQLite (see the module doc),
    /// in one read snapshot: its statements see the file as of one moment,
    /// no earlier than the last commit the store's writers announced.
    /// `None`: no inline reads here (PostgreSQL, SQLite in memory, a busy
    /// file); run the same statement through [`Store::read`].
    pub fn read_inline<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<OpResult<T>> {
        self.inline.as_ref()?.run(|conn| read(conn))
    }

    /// [`Store::read_inline`] for a statement that usually costs little but
    /// is not bounded by an index lookup (a search): SQLite interrupts it
    /// once it has run for `budget`, and the caller then runs it through
    /// [`Store::read`] instead (this answers `None`).
    pub fn read_inline_within<T>(
        &self,
        budget: Duration,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<OpResult<T>> {
        self.inline.as_ref()?.run(|conn| {
            let started = Instant::now();
            conn.progress_handler(PROGRESS_STEPS, Some(move || started.elapsed() > budget))?;
            let out = read(conn);
            // Setting a handler fails only when SQLite cannot allocate.
            conn.progress_handler(0, None::<fn() -> bool>).and(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(sql: &str, values: &[&dyn ToSql]) -> rusqlite::Result<Option<String>> {
        let conn = Connection::open_in_memory().unwrap();
        first_row(&conn, sql, values, |r| r.get(0))
    }

    #[test]
    fn numbered_parameters_bind_by_their_number_in_any_order() {
        let got = first(
            "SELECT $3 || '/' || $1 || '/' || $2 || '/' || $1 || '/' || IFNULL($4, 'null')",
            &[&"a", &"b", &"c"],
        );
        assert_eq!(got.unwrap().as_deref(), Some("c/a/b/a/null"));
        // A value the statement never names is left out.
        assert_eq!(
            first("SELECT $2", &[&"a", &"b"]).unwrap().as_deref(),
            Some("b")
        );
        // A parameter not written `$n` is refused, not bound by chance.
        let refused = first("SELECT ?", &[&"a"]).unwrap_err();
        assert!(
            matches!(refused, rusqlite::Error::InvalidParameterName(_)),
            "{refused}"
        );
    }

    #[test]
    fn reads_see_every_announced_commit_and_an_idle_snapshot_ends_at_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snapshots.db");
        let writer = Connection::open(&path).unwrap();
        // busy_timeout 0: a checkpoint held back answers busy at once.
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; \
                 PRAGMA busy_timeout = 0; CREATE TABLE t (v INTEGER)",
            )
            .unwrap();
        let inline = Inline::new(path);
        let count = || {
            inline
                .run(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)))
                .unwrap()
                .unwrap()
        };
        for n in 1..=3 {
            writer.execute("INSERT INTO t (v) VALUES (1)", []).unwrap();
            inline.committed();
            assert_eq!(count(), n, "a read after an announced commit sees it");
        }
        // Two reads with no commit between: the connection keeps its
        // snapshot while idle, so a checkpoint that must start the WAL
        // over cannot, until the next commit ends it.
        assert_eq!(count(), 3);
        writer.execute("INSERT INTO t (v) VALUES (1)", []).unwrap();
        let busy = || -> i64 {
            writer
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(busy(), 1, "held by the idle snapshot");
        inline.committed();
        assert_eq!(busy(), 0);
        assert_eq!(count(), 4);
    }
}
