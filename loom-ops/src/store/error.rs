//! Database errors as [`LoomError`]s: the client sees a code, the log the cause.

use std::sync::atomic::{AtomicU64, Ordering};

use loom_core::{ErrorCode, LoomError};

/// Connections found lost so far ([`connections_lost`]).
static LOST: AtomicU64 = AtomicU64::new(0);

/// How many times a call has found the store's connection lost (a broken
/// socket, PostgreSQL's connection errors) since the process started: the
/// read connections kept out of sqlx's pool (`store::read`) compare it
/// before and after a read, and do not keep one that may be the lost one.
pub(super) fn connections_lost() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Maps a sqlx error: an exhausted pool is `OVERLOADED` (retry later), a
/// busy SQLite, a serialization failure or a connection the database server
/// dropped is `BACKEND_TIMEOUT`, anything else is an internal fault whose
/// cause is logged, never sent.
pub fn db_error(e: sqlx::Error) -> LoomError {
    match &e {
        sqlx::Error::PoolTimedOut => {
            LoomError::new(ErrorCode::Overloaded, "the store is busy; retry shortly")
                .with_retry_after(std::time::Duration::from_secs(1))
                .with_internal(e.to_string())
        }
        // The socket to PostgreSQL broke (`open::PING_AFTER_IDLE` says when
        // a call can meet such a connection); the connection is replaced
        // as it comes back (`store::read`, sqlx's pool).
        sqlx::Error::Io(_) => connection_lost(e),
        sqlx::Error::Database(db)
            if db
                .code()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")) =>
        {
            // PostgreSQL's connection exceptions (class 08) and its
            // shutdowns (57P01-57P03: terminated, crashed, starting up)
            connection_lost(e)
        }
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // SQLITE_BUSY (5), SQLITE_LOCKED (6); PostgreSQL serialization (40001) and deadlock (40P01).
            if matches!(code.as_ref(), "5" | "6" | "517" | "40001" | "40P01") {
                LoomError::new(
                    ErrorCode::BackendTimeout,
                    "the store could not finish in time; retry",
                )
                .with_retry_after(std::time::Duration::from_secs(1))
                .with_internal(e.to_string())
            } else {
                LoomError::internal(e)
            }
        }
        _ => LoomError::internal(e),
    }
}

fn connection_lost(e: sqlx::Error) -> LoomError {
    LOST.fetch_add(1, Ordering::Relaxed);
    LoomError::new(
        ErrorCode::BackendTimeout,
        "the store's connection was lost; retry",
    )
    .with_retry_after(std::time::Duration::from_secs(1))
    .with_internal(e.to_string())
}
