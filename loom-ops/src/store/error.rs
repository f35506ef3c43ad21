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
        sqlx::Error::Database(db) if db.code().is_some_and(|c| unreachable(&c)) => {
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

/// Whether a PostgreSQL error code says the database cannot be reached
/// now, whatever the statement: its connection exceptions (class 08), its
/// shutdowns (57P01-57P03: terminated, crashed, starting up), its lack of
/// resources (class 53: too many connections, out of memory or disk) and a
/// database not accepting connections (55000 at connect: `ALTER DATABASE
/// ... ALLOW_CONNECTIONS false`, which Loom's statements cannot otherwise
/// raise). SQLite's codes are numbers and match none.
fn unreachable(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("57P") || code.starts_with("53") || code == "55000"
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    /// A database error with only a code, as the drivers report one.
    #[derive(Debug)]
    struct Coded(&'static str);

    impl std::fmt::Display for Coded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            "coded"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    /// A store that cannot be reached, or cannot finish, is a retryable
    /// BACKEND_TIMEOUT; a fault of the statement is INTERNAL.
    #[test]
    fn an_unreachable_store_is_retryable() {
        for (code, expected) in [
            ("08006", ErrorCode::BackendTimeout),
            ("57P01", ErrorCode::BackendTimeout),
            ("53300", ErrorCode::BackendTimeout),
            ("55000", ErrorCode::BackendTimeout),
            ("40001", ErrorCode::BackendTimeout),
            ("5", ErrorCode::BackendTimeout),
            ("42P01", ErrorCode::Internal),
            ("23505", ErrorCode::Internal),
            ("1", ErrorCode::Internal),
        ] {
            let e = db_error(sqlx::Error::Database(Box::new(Coded(code))));
            assert_eq!(e.code(), expected, "{code}");
        }
    }
}
