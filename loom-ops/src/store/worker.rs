//! A thread of the store's own that works through a channel (SQLite's
//! direct writer, its checkpoints), and its connection to the file.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

use super::open::SQLITE_SETTINGS;
use super::telemetry;

/// The thread and the sending side of its channel. Stopping drops the
/// sender: the thread sees its channel close, finishes what it holds and
/// ends.
pub(super) struct Worker<S> {
    sender: Mutex<Option<S>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<S> Worker<S> {
    /// Starts `body` on a thread named `name`, fed through `sender`.
    pub(super) fn spawn(
        name: &str,
        sender: S,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<Worker<S>, String> {
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(body)
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Worker {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The sender; `None` once stopped.
    pub(super) fn sender(&self) -> MutexGuard<'_, Option<S>> {
        lock(&self.sender)
    }

    /// Closes the channel, unparks the thread (one that waits parked, not
    /// on the channel, sees it closed at once) and waits for it to end.
    pub(super) async fn stop(&self) {
        lock(&self.sender).take();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            thread.thread().unpark();
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A read-write connection to the file at `path` with its telemetry file
/// attached, set as every connection of the store is ([`SQLITE_SETTINGS`],
/// [`telemetry::statements`]). A `writer` has a writer's cache and writes
/// its WAL frames through [`loom_wal_buffer`]: a commit's in one write.
pub(super) fn open(path: &Path, writer: bool) -> rusqlite::Result<Connection> {
    // CREATE for the telemetry file, which ATTACH opens with the flags the
    // connection was opened with; the store's file exists by now.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if writer {
        Connection::open_with_flags_and_vfs(path, flags, vfs()?)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    conn.execute_batch(SQLITE_SETTINGS)?;
    conn.execute_batch(&telemetry::statements(path, writer))?;
    Ok(conn)
}

/// The store's VFS ([`loom_wal_buffer`]), registered on first use: the
/// direct writer's WAL writes a commit in one write, and the inline
/// readers keep their memory map across commits.
pub(super) fn vfs() -> rusqlite::Result<&'static str> {
    loom_wal_buffer::register().map_err(|e| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(e),
        )
    })
}
