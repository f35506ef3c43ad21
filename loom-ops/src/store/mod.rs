//! The store: one API over SQLite (the embedded default) and PostgreSQL,
//! through sqlx's `Any` driver.
//!
//! Reads and writes go through different handles from the start
//! ([`Store::reader`], [`Store::writer`]), so reads can later be served by
//! replicas. On SQLite the writer is one connection: writes queue in the
//! pool instead of meeting `database is locked`, and WAL lets readers run
//! beside it. Every write commits with `synchronous=FULL`, so an
//! acknowledged write survives a `kill -9`; write transactions that queue
//! behind each other share one commit (`group`).
//!
//! SQL is written once with `$1` placeholders, which both backends accept;
//! where the dialects differ, [`Backend`] picks the statement.

mod batch;
mod error;
mod gates;
mod group;
mod oauth;
mod oidc;
mod open;
mod rate_buckets;
mod read;
mod session_runs;
pub mod testing;
mod tx;

pub use batch::{BatchSink, BatchWriter};
pub use error::db_error;
pub use gates::{GrantRow, IdemBegin, NamespaceAccess, SIGNING_KEY_SETTING};
pub use oauth::{AuthRequestRow, ClientRow, CodeRow, RefreshRow, UserRow};
pub use oidc::OidcLoginRow;
pub use open::{StoreOptions, default_connections, default_database_url};
pub use rate_buckets::RateBudget;
pub use read::ReadConn;
pub use session_runs::SessionRunKey;
pub use tx::WriteTx;

use sqlx::AnyPool;

/// Which database the store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite (the default).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Loom's storage handle. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
    writer: AnyPool,
    reader: AnyPool,
    /// SQLite's group commit over the writer; `None` on PostgreSQL.
    group: Option<std::sync::Arc<group::Group>>,
    /// SQLite's read connections ([`Store::read`]); `None` on PostgreSQL.
    kept: Option<std::sync::Arc<read::Kept>>,
}

impl Store {
    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool writes go through.
    pub fn writer(&self) -> &AnyPool {
        &self.writer
    }

    /// The pool occasional reads go through; an op's reads take a
    /// connection from [`Store::read`].
    pub fn reader(&self) -> &AnyPool {
        &self.reader
    }

    /// Commits the open write group, then closes both pools, waiting for
    /// connections in use to be returned.
    pub async fn close(&self) {
        if let Some(group) = &self.group {
            group.close().await;
        }
        if let Some(kept) = &self.kept {
            kept.close().await;
        }
        self.writer.close().await;
        self.reader.close().await;
    }
}

/// The `VALUES` rows of a multi-row statement: `rows` tuples of `cols`
/// numbered parameters from `$first` on; `values_list(1, 2, 2)` is
/// `($1, $2), ($3, $4)`. Batches are written a statement per chunk of rows,
/// not a statement per row: each statement is a round trip, on SQLite to
/// the connection's worker thread.
pub(crate) fn values_list(first: usize, rows: usize, cols: usize) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 1..=cols {
            if c > 1 {
                out.push_str(", ");
            }
            let _ = write!(out, "${}", first + r * cols + c - 1);
        }
        out.push(')');
    }
    out
}

/// `rows` cut into chunks for multi-row statements: each chunk as long as
/// the largest power of two that fits, up to `max`. A statement's text
/// depends on its row count, and the connection caches prepared statements
/// by text; with power-of-two chunks a batch of any length reuses at most
/// a handful of cached statements instead of preparing a new one per batch.
pub(crate) fn pow2_chunks<T>(mut rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if rows.is_empty() {
            return None;
        }
        let fit = 1usize << rows.len().ilog2();
        let (chunk, rest) = rows.split_at(fit.min(max.max(1)));
        rows = rest;
        Some(chunk)
    })
}

/// Milliseconds since the Unix epoch: how every timestamp is stored.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// An RFC 3339 timestamp (UTC, milliseconds) from stored milliseconds.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow2_chunks_cover_every_row_once_in_few_shapes() {
        let rows: Vec<usize> = (0..237).collect();
        let chunks: Vec<&[usize]> = super::pow2_chunks(&rows, 64).collect();
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        assert_eq!(lens, [64, 64, 64, 32, 8, 4, 1]);
        assert_eq!(chunks.concat(), rows);
        assert_eq!(super::pow2_chunks::<u8>(&[], 64).count(), 0);
    }

    #[test]
    fn values_list_numbers_every_parameter_once() {
        assert_eq!(super::values_list(1, 1, 1), "($1)");
        assert_eq!(super::values_list(1, 2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::values_list(4, 2, 2), "($4, $5), ($6, $7)");
    }
}
