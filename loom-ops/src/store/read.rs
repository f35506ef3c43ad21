//! Connections for reads: [`Store::read`].
//!
//! On PostgreSQL a read takes a connection from the pool, as anything else.
//!
//! On SQLite the read connections are kept here instead of in sqlx's pool.
//! sqlx pings every connection returned to its pool, to flush what a
//! cancelled query may have left. A SQLite connection is driven by a
//! worker thread of its own, so that ping is one more thread wake-up and
//! round trip per read; on the hottest path (`memory.get`) it was half of
//! them. A read connection needs no such flush: it never holds a
//! transaction, and a query cancelled half-way is reset by its worker
//! before the connection's next statement runs. The pool still opens the
//! connections (with the store's per-connection settings); they are then
//! detached from it and handed out from here, at most the configured
//! number at once.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom_core::OpResult;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Store, db_error};

/// SQLite's read connections.
pub(super) struct Kept {
    /// Opens connections; they leave it at once ([`PoolConnection::detach`]).
    opener: AnyPool,
    idle: Mutex<Vec<AnyConnection>>,
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl Kept {
    pub(super) fn new(opener: AnyPool, size: u32, wait: Duration) -> Arc<Kept> {
        Arc::new(Kept {
            opener,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(size.max(1) as usize)),
            wait,
        })
    }

    async fn take(self: &Arc<Kept>) -> OpResult<ReadConn> {
        let permit = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| db_error(sqlx::Error::PoolTimedOut))?
            .map_err(|_| db_error(sqlx::Error::PoolClosed))?;
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.opener.acquire().await.map_err(db_error)?.detach(),
        };
        Ok(ReadConn(Held::Kept {
            conn: Some(conn),
            home: self.clone(),
            _permit: permit,
        }))
    }

    /// Closes the idle connections; those in use close when returned.
    pub(super) async fn close(&self) {
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for conn in idle {
            let _ = conn.close().await;
        }
    }
}

/// A connection for reads; derefs to the connection. Nothing it runs may
/// write or open a transaction.
pub struct ReadConn(Held);

enum Held {
    Pooled(PoolConnection<Any>),
    Kept {
        conn: Option<AnyConnection>,
        home: Arc<Kept>,
        _permit: OwnedSemaphorePermit,
    },
}

impl Deref for ReadConn {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match &self.0 {
            Held::Pooled(c) => c,
            Held::Kept { conn, .. } => conn.as_ref().expect("held until dropped"),
        }
    }
}

impl DerefMut for ReadConn {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Held::Pooled(c) => c,
            Held::Kept { conn, .. } => conn.as_mut().expect("held until dropped"),
        }
    }
}

impl Drop for ReadConn {
    fn drop(&mut self) {
        if let Held::Kept { conn, home, .. } = &mut self.0
            && let Some(conn) = conn.take()
            && !home.permits.is_closed()
        {
            // Dropped when the store is closed: its worker thread then
            // closes the SQLite handle.
            home.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
        }
    }
}

impl Store {
    /// A connection for reads (see the module doc).
    pub async fn read(&self) -> OpResult<ReadConn> {
        match &self.kept {
            Some(kept) => kept.take().await,
            None => Ok(ReadConn(Held::Pooled(
                self.reader.acquire().await.map_err(db_error)?,
            ))),
        }
    }
}
