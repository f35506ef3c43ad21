//! The store: one API over SQLite (the embedded default) and PostgreSQL,
//! through sqlx's `Any` driver.
//!
//! Reads and writes go through different handles from the start
//! ([`Store::reader`], [`Store::writer`]), so reads can later be served by
//! replicas. On SQLite the writer pool is one connection: writes queue in the
//! pool instead of meeting `database is locked`, and WAL lets readers run
//! beside it. Every write commits with `synchronous=FULL`, so an
//! acknowledged write survives a `kill -9`; write transactions that queue
//! behind each other share one commit (`group`), and a write that is one
//! statement list runs on a second connection, the direct writer
//! (`direct`), which commits every such write queued for it at once.
//!
//! On a SQLite file, the append-only telemetry (the call ledger,
//! exposures and their counts) lives in a second file attached to the
//! read-write connections (`telemetry`), so its commits leave the
//! memories' readers their pages.
//!
//! SQL is written once with `$1` placeholders, which both backends accept;
//! where the dialects differ, [`Backend`] picks the statement. SQLite is
//! built with `SQLITE_ENABLE_QPSG` (`.cargo/config.toml`), so no plan
//! depends on the values bound and a cached statement is never prepared
//! again because a parameter changed.

mod access_cache;
mod advice;
mod batch;
mod bind;
mod checkpoint;
mod direct;
mod error;
pub(crate) mod fold;
mod full_text;
mod full_text_queue;
mod gates;
mod group;
mod inline;
mod mcp_sessions;
mod multirow;
mod oauth;
mod oidc;
mod open;
pub(crate) mod packed;
mod probe;
mod rate_buckets;
mod read;
mod retention;
mod session_runs;
mod settings;
mod telemetry;
pub mod testing;
mod tx;
mod worker;
mod writer_phases;

pub use batch::{BatchSink, BatchWriter, LINGER, Ledger};
pub(crate) use bind::{Bind, Values};
pub use error::db_error;
pub use full_text::{FullTextState, FullTextWatch, Merged};
pub use gates::{
    GrantRow, IdemBegin, NamespaceAccess, NamespaceCreated, NewNamespace, SIGNING_KEY_SETTING,
};
pub use inline::{all_rows, first_row};
pub use mcp_sessions::McpSessionRow;
pub(crate) use multirow::{execute_chunked, execute_chunked_direct};
pub use oauth::{AuthRequestRow, ClientRow, CodeRow, RefreshRow, UserRow};
pub use oidc::OidcLoginRow;
pub use open::{
    DEFAULT_ACCESS_CACHE, PING_AFTER_IDLE, StoreOptions, default_connections, default_database_url,
    postgres_names_database, prepare_sqlite, sqlite_path, store_place,
};
pub use rate_buckets::RateBudget;
pub use read::ReadConn;
pub use retention::{PRUNE_BATCH, Pruned};
pub use session_runs::SessionRunKey;
pub use tx::WriteTx;
pub(crate) use tx::{OneStep, one_step_sql};

use std::sync::LazyLock;

use sqlx::{AnyConnection, AnyPool};

/// Which database the store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite (the default).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// The backend `conn` talks to.
    pub fn of(conn: &AnyConnection) -> Backend {
        if conn.backend_name() == "PostgreSQL" {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A statement whose text differs by backend, written once per backend on
/// first use (statements are cached by their text, and hot ones should not
/// be formatted per call).
pub(crate) struct PerBackend {
    sqlite: LazyLock<String, fn() -> String>,
    postgres: LazyLock<String, fn() -> String>,
}

impl PerBackend {
    /// The statement built by `sqlite` or `postgres`.
    pub(crate) const fn new(sqlite: fn() -> String, postgres: fn() -> String) -> Self {
        PerBackend {
            sqlite: LazyLock::new(sqlite),
            postgres: LazyLock::new(postgres),
        }
    }

    /// The text for `backend`.
    pub(crate) fn get(&self, backend: Backend) -> &str {
        match backend {
            Backend::Sqlite => &self.sqlite,
            Backend::Postgres => &self.postgres,
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
    /// The read connections, kept out of the pools ([`Store::read`]).
    kept: std::sync::Arc<read::Kept>,
    /// SQLite's point reads on the calling thread ([`Store::read_inline`]);
    /// `None` on PostgreSQL and in memory.
    inline: Option<std::sync::Arc<inline::Inline>>,
    /// Search terms' document frequencies, kept a while (SQLite's ranking).
    doc_freqs: std::sync::Arc<crate::memory::doc_freq::DocFreqs>,
    /// What authorization read of namespaces and grants, kept a while
    /// ([`Store::namespace_access`]).
    access: std::sync::Arc<access_cache::AccessCache>,
    /// `/readyz`'s connection ([`Store::ping`]).
    probe: std::sync::Arc<probe::Probe>,
}

impl Store {
    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The search terms' kept document frequencies.
    pub(crate) fn doc_freqs(&self) -> &crate::memory::doc_freq::DocFreqs {
        &self.doc_freqs
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
        self.kept.close().await;
        if let Some(inline) = &self.inline {
            inline.close();
        }
        self.writer.close().await;
        self.reader.close().await;
    }
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
