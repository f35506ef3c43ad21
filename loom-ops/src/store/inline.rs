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
//! They read the main file only: the telemetry file (`telemetry`) is not
//! attached, as no point read needs it, and a read of the memories should
//! not fail over a file it does not read.
//!
//! PostgreSQL, and SQLite in memory (nothing else could open it), have no
//! inline reads: [`Store::read_inline`] answers `None` and the caller uses
//! [`Store::read`].

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loom_core::{LoomError, OpResult};
use rusqlite::{Connection, OpenFlags, Statement, ToSql};

use super::Store;

/// Prepared statements each connection keeps (rusqlite's statement cache).
const CACHED_STATEMENTS: usize = 32;

/// The read connections of one SQLite file.
pub(super) struct Inline {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    closed: AtomicBool,
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
        }
    }

    /// The database file.
    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
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
    fn run<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Option<OpResult<T>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle.map_or_else(|| self.open(), Ok) {
            Ok(conn) => conn,
            Err(e) if busy(&e) => return None,
            Err(e) => return Some(Err(sqlite_error(e))),
        };
        let out = match read(&conn) {
            Err(e) if busy(&e) || interrupted(&e) => None,
            out => Some(out.map_err(sqlite_error)),
        };
        if !self.closed.load(Ordering::Acquire) {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
        }
        out
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
    /// Runs `read` on the calling thread, on SQLite (see the module doc).
    /// `None`: no inline reads here (PostgreSQL, SQLite in memory, a busy
    /// file); run the same statement through [`Store::read`].
    pub fn read_inline<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<OpResult<T>> {
        self.inline.as_ref()?.run(read)
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
            conn.progress_handler(PROGRESS_STEPS, Some(move || started.elapsed() > budget));
            let out = read(conn);
            conn.progress_handler(0, None::<fn() -> bool>);
            out
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
}
