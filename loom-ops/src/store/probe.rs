//! Whether the store answers ([`Store::ping`], what `/readyz` asks), on a
//! PostgreSQL connection of its own.
//!
//! Why a connection of its own: a probe that took one from the calls'
//! pools would wait behind the calls under load and call a busy replica
//! unready, and a load balancer would then take calls away from every
//! busy replica at once. A connection opened for each probe would fail
//! when PostgreSQL has no connection left to give while the pools' own
//! work on. So one is kept for the probes and opened again only when it
//! failed: a probe that finds it broken (PostgreSQL restarted, or an idle
//! timeout closed it) tries once more on a new one.

use loom_core::{LoomError, OpResult};
use sqlx::{AnyConnection, ConnectOptions};
use tokio::sync::Mutex;

use super::{Backend, Store};

/// The probes' connection, once opened.
#[derive(Default)]
pub(super) struct Probe {
    conn: Mutex<Option<AnyConnection>>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probe")
    }
}

impl Store {
    /// Whether the store answers: `SELECT 1` on PostgreSQL (a database
    /// that can become unreachable while the server runs). SQLite is a
    /// file the process opened at start, with no connection to lose: it
    /// answers.
    pub async fn ping(&self) -> OpResult<()> {
        if self.backend == Backend::Sqlite {
            return Ok(());
        }
        let mut kept = self.probe.conn.lock().await;
        if let Some(conn) = kept.as_mut()
            && select_one(conn).await.is_ok()
        {
            return Ok(());
        }
        *kept = None;
        let mut conn = self
            .reader
            .connect_options()
            .connect()
            .await
            .map_err(unanswered)?;
        select_one(&mut conn).await?;
        *kept = Some(conn);
        Ok(())
    }
}

async fn select_one(conn: &mut AnyConnection) -> OpResult<()> {
    sqlx::query("SELECT 1")
        .execute(conn)
        .await
        .map(|_| ())
        .map_err(unanswered)
}

/// The probe's failure, for the log; not [`super::db_error`], which takes
/// a lost connection as a sign that the pools' are lost too.
fn unanswered(e: sqlx::Error) -> LoomError {
    LoomError::internal(e.to_string())
}
