//! Connections for reads: [`Store::read`], kept here instead of in sqlx's
//! pool.
//!
//! sqlx pings every connection returned to its pool, to flush what a
//! cancelled query may have left and to find one that broke. On SQLite a
//! connection is driven by a worker thread of its own, so that ping is one
//! more thread wake-up and round trip per read; on the hottest path
//! (`memory.get`) it was half of them. On PostgreSQL it is one more round
//! trip to the server per read: kept here, three rounds of 10 s runs of
//! gets on PostgreSQL served 9.1-9.8k gets/s against 7.5-9.0k through the
//! pool (74-88 µs of the server's CPU a get against 81-96), and sets as
//! many within the noise with the pool at half the connections. A
//! read connection needs no such flush: it never holds a transaction, and
//! what a cancelled query left is read off before the connection's next
//! statement runs (both sqlx drivers do it). The pool still opens the
//! connections (with the store's per-connection settings); they are then
//! detached from it and handed out from here, at most the configured number
//! at once (on PostgreSQL half the store's connections, the pool keeping
//! the other half).
//!
//! What the pool's pings caught, on PostgreSQL: a connection that sat idle
//! for [`StoreOptions::ping_after_idle`](super::StoreOptions) or longer is
//! pinged before it is handed out, and one the server dropped is replaced;
//! a connection out while any call found a connection lost
//! (`error::connections_lost`, counted where every database error that
//! means it becomes a `LoomError`) is closed as it comes back, not kept,
//! as it may be that one; and one older than the store's connection
//! lifetime is closed as it comes back, for a new one to take its place,
//! as the pool does.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loom_core::OpResult;
use sqlx::{AnyConnection, AnyPool, Connection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::timeout;

use super::error::connections_lost;
use super::{Store, db_error};

/// The store's read connections.
pub(super) struct Kept {
    /// Opens connections; they leave it at once
    /// ([`PoolConnection::detach`](sqlx::pool::PoolConnection::detach)).
    opener: AnyPool,
    idle: Mutex<Vec<Idle>>,
    permits: Arc<Semaphore>,
    wait: Duration,
    /// PostgreSQL's checks of its connections; `None` on SQLite, whose
    /// connections are file handles nothing drops or wears out.
    upkeep: Option<Upkeep>,
}

/// How a PostgreSQL read connection is checked
/// ([`StoreOptions`](super::StoreOptions)'s fields of the same names).
pub(super) struct Upkeep {
    /// How long a connection may sit idle before it is pinged on its way
    /// out.
    pub(super) ping_after_idle: Duration,
    /// How long a connection is kept before it is closed and a new one
    /// opened in its place.
    pub(super) lifetime: Duration,
}

/// An idle connection: when it was opened and when it was given back.
struct Idle {
    conn: AnyConnection,
    born: Instant,
    since: Instant,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl Kept {
    pub(super) fn new(
        opener: AnyPool,
        size: u32,
        wait: Duration,
        upkeep: Option<Upkeep>,
    ) -> Arc<Kept> {
        Arc::new(Kept {
            opener,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(size.max(1) as usize)),
            wait,
            upkeep,
        })
    }

    async fn take(self: &Arc<Kept>) -> OpResult<ReadConn> {
        let permit = timeout(self.wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| db_error(sqlx::Error::PoolTimedOut))?
            .map_err(|_| db_error(sqlx::Error::PoolClosed))?;
        let (conn, born) = loop {
            let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some(Idle {
                mut conn,
                born,
                since,
            }) = idle
            else {
                let conn = self.opener.acquire().await.map_err(db_error)?.detach();
                break (conn, Instant::now());
            };
            let stale = self
                .upkeep
                .as_ref()
                .is_some_and(|u| since.elapsed() >= u.ping_after_idle);
            // a server that stopped answering gets as long as a call would
            // wait for a connection
            if !stale || matches!(timeout(self.wait, conn.ping()).await, Ok(Ok(()))) {
                break (conn, born);
            }
            // dropped by the server meanwhile: let it go, try the next
            tracing::info!(
                idle_ms = since.elapsed().as_millis(),
                "a read connection was dropped while idle; replacing it"
            );
        };
        Ok(ReadConn {
            conn: Some(conn),
            born,
            home: self.clone(),
            lost_before: connections_lost(),
            _permit: permit,
        })
    }

    /// Closes the idle connections; those in use close when returned.
    pub(super) async fn close(&self) {
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for Idle { conn, .. } in idle {
            let _ = conn.close().await;
        }
    }
}

/// A connection for reads; derefs to the connection. Nothing it runs may
/// write or open a transaction.
pub struct ReadConn {
    conn: Option<AnyConnection>,
    /// When the connection was opened.
    born: Instant,
    home: Arc<Kept>,
    /// [`connections_lost`] when it was taken.
    lost_before: u64,
    _permit: OwnedSemaphorePermit,
}

impl Deref for ReadConn {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        self.conn.as_ref().expect("held until dropped")
    }
}

impl DerefMut for ReadConn {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        self.conn.as_mut().expect("held until dropped")
    }
}

impl Drop for ReadConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let home = &self.home;
        if home.permits.is_closed()
            || connections_lost() != self.lost_before
            || home
                .upkeep
                .as_ref()
                .is_some_and(|u| self.born.elapsed() >= u.lifetime)
        {
            // The store is closed, this may be a connection found lost, or
            // it is old enough to renew: closed, not kept (a SQLite handle
            // closes on its worker thread).
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = conn.close().await;
                });
            }
            return;
        }
        home.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Idle {
                conn,
                born: self.born,
                since: Instant::now(),
            });
    }
}

impl Store {
    /// A connection for reads (see the module doc).
    pub async fn read(&self) -> OpResult<ReadConn> {
        self.kept.take().await
    }
}
