//! Loom's SQLite VFS: the default VFS (`unix`) with two changes, each for
//! one kind of file; every other file is the default VFS's own.
//!
//! - WAL files: a commit's frames reach the kernel in one write instead
//!   of two for every frame (below).
//! - Main database files: a connection's memory map of the file is kept
//!   across other connections' commits instead of dropped at its next read
//!   (the `map` module says when it is still dropped, and why that is
//!   safe).
//!
//! And, for every connection of the process, SQLite's own page cache
//! behind a layer that skips truncations with nothing to drop
//! ([`page_cache`] says why).
//!
//! # The WAL's writes
//!
//! Why: SQLite writes a WAL frame as two `pwrite`s, its 24-byte header and
//! its page. Under Loom's `memory.set` benchmark a commit of ~15 sets wrote
//! ~90 frames, ~12 `pwrite`s a set, and the kernel's side of them (a
//! syscall each, the same page-cache pages looked up and dirtied two or
//! three times over) was a quarter of the writing thread's time. Through
//! this VFS the writer made a tenth of the `pwrite`s and spent 5-7 µs less
//! a set (bench/RESULTS.md).
//!
//! What it does: writes to a WAL that continue where the last one ended
//! gather in a buffer, and the buffer goes to the file
//!
//! - after the page of a commit frame (a frame header whose commit field,
//!   the database's size, is not zero): a commit's frames are in the file
//!   before SQLite publishes them to other connections in the WAL index,
//!   whatever `synchronous` is (with `NORMAL` a commit syncs nothing);
//! - before anything else touches the file (a read, a sync, a truncate,
//!   its size, a lock, a file control) and before a write anywhere but at
//!   the buffer's end, except one that lands inside it (SQLite writing a
//!   frame of the same transaction again), which is copied in place;
//! - when it holds 4 MiB (a large transaction spilling its cache).
//!
//! So the file holds what it would without the buffer whenever another
//! connection could look, and a sync covers every write SQLite made before
//! it: durability and crash recovery are SQLite's own.
//!
//! What is left in the buffer when no commit follows is frames of a
//! transaction that was rolled back: [`discard`] drops them. Left there,
//! they would be written out at this connection's next write, over frames
//! another connection committed in their place meanwhile. Closing a file
//! drops them too.
//!
//! ```no_run
//! let vfs = loom_wal_buffer::register()?;
//! let flags = rusqlite::OpenFlags::default();
//! let conn = rusqlite::Connection::open_with_flags_and_vfs("loom.db", flags, vfs)?;
//! conn.execute_batch("PRAGMA journal_mode = WAL")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod file;
mod map;
pub mod page_cache;
mod vfs;

use std::ffi::CStr;
use std::ptr;

use rusqlite::{Connection, ffi};

pub use vfs::register;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
pub const NAME: &str = "loom-wal-buffer";

/// Drops what the WAL of `conn`'s database `schema` (`c"main"`, or an
/// attached one's name) holds unwritten. Call it after a rollback: all it
/// can hold then is frames of the transaction rolled back.
pub fn discard(conn: &Connection, schema: &CStr) {
    with_wal(conn, schema, file::WalFile::discard);
}

/// How many bytes the WAL of `conn`'s database `schema` holds unwritten;
/// `None` when that WAL is not this VFS's (or not open).
pub fn buffered(conn: &Connection, schema: &CStr) -> Option<usize> {
    with_wal(conn, schema, |wal| wal.buffered())
}

/// Runs `f` on the WAL file of `conn`'s database `schema`, when it is
/// this VFS's. The connection is borrowed meanwhile, so SQLite cannot use
/// the file while `f` does.
fn with_wal<T>(
    conn: &Connection,
    schema: &CStr,
    f: impl FnOnce(&mut file::WalFile) -> T,
) -> Option<T> {
    let mut journal: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: the handle is live while `conn` is; JOURNAL_POINTER writes
    // the database's journal file (its WAL in WAL mode), or null, into
    // `journal`.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            schema.as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            (&raw mut journal).cast(),
        )
    };
    if rc != ffi::SQLITE_OK || journal.is_null() {
        return None;
    }
    // SAFETY: a non-null journal file is open, and nothing else uses it
    // while `conn` is borrowed here (a connection is used from one thread
    // at a time); `of` answers only a file of ours.
    unsafe { file::WalFile::of(journal) }.map(f)
}
