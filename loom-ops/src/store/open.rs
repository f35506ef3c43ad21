//! Opening the store: pools, per-connection settings, migrations.

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, Executor};

use super::telemetry::Attach;
use super::{Backend, Store};

/// What every SQLite connection of the store is set to, sqlx's and the
/// direct writer's alike. busy_timeout first: the journal_mode pragma
/// itself takes a lock, and without a timeout it fails at once while
/// another process (a CLI, a replica) writes. synchronous = FULL: an
/// acknowledged write survives a crash. mmap_size: pages are read through
/// a shared memory map instead of a pread into each connection's own small
/// cache (reads only; writes and the WAL are unchanged, so crash safety is
/// too). temp_store: a savepoint's statement journal (every write runs in
/// one, see `group`) and sorts stay in memory, not in temp files.
pub(super) const SQLITE_SETTINGS: &str = "PRAGMA busy_timeout = 10000; \
     PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
     PRAGMA mmap_size = 1073741824; PRAGMA temp_store = MEMORY;";

/// What the SQLite writer runs after work that read much of the file
/// ([`Store::release_writer_pages`]).
const SQLITE_WRITER_RELEASE: &str =
    "PRAGMA shrink_memory; PRAGMA mmap_size = 0; PRAGMA mmap_size = 1073741824;";

/// A writer's settings, on top of [`SQLITE_SETTINGS`].
///
/// Its page cache holds a whole transaction. A group of calls or a batch of
/// usage rows (recall counts land on random rows) dirties hundreds of
/// pages, which at SQLite's default 2 MB spilled into the WAL before the
/// commit. Under the memory.get benchmark the writer's extra work showed as
/// the readers' p99: 17 ms with 16 MB, 7-11 ms with 32 MB (filled only as
/// pages are touched).
///
/// It leaves checkpoints to the checkpoint thread (`checkpoint`) and
/// checkpoints itself only when the WAL reaches 10,000 pages (SQLite's
/// default is 1,000): a backstop for that thread falling behind or
/// stopping, and under a steady stream of writes the checkpoint that
/// starts the WAL over (`checkpoint` says why).
pub(super) const SQLITE_WRITER_SETTINGS: &str =
    "PRAGMA cache_size = -32768; PRAGMA wal_autocheckpoint = 10000;";

/// What the process must do before any thread uses SQLite: a binary calls
/// it first in `main`, while it has one thread. It puts
/// [`loom_wal_buffer::page_cache`]'s layer in front of SQLite's page cache
/// (SQLite takes a page cache only before it starts, and only while no
/// other thread uses it). A store opened without it works the same, with
/// SQLite's own cache.
pub fn prepare_sqlite() {
    // The outcome is the store's to report when it opens (its logging is
    // not set up yet here).
    let _ = loom_wal_buffer::page_cache::install();
}

/// The database Loom uses when `LOOM_DATABASE_URL` is unset: `loom.db` in
/// the working folder, created if missing.
pub fn default_database_url() -> String {
    "sqlite://loom.db".to_owned()
}

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// `sqlite://path` or `postgres://…`.
    pub url: String,
    /// Connections to the database. PostgreSQL: the total, half of them
    /// for reads ([`Store::read`]) and the rest, at least two, for writes
    /// and every other statement. SQLite: reader connections (it always
    /// writes through one). `None`: the backend's default
    /// ([`default_connections`]).
    pub max_connections: Option<u32>,
    /// PostgreSQL schema to use (and create); tests run each in its own.
    pub pg_schema: Option<String>,
    /// How long a call may wait for a connection.
    pub acquire_timeout: Duration,
    /// How long what authorization read of a namespace and a subject's
    /// grant on it is kept ([`Store::namespace_access`]); zero keeps nothing.
    pub access_cache: Duration,
    /// PostgreSQL: how long a connection sits idle before it is pinged on
    /// its way out ([`PING_AFTER_IDLE`]); zero pings every time.
    pub ping_after_idle: Duration,
    /// PostgreSQL: how long a connection is used before it is closed and a
    /// new one opened in its place ([`CONNECTION_LIFETIME`]).
    pub connection_lifetime: Duration,
}

impl StoreOptions {
    /// Whether these options name a SQLite store in memory
    /// (`sqlite::memory:`, or a URL with `mode=memory`): one database
    /// shared by the connections of the process that opens it, gone when
    /// it stops.
    pub fn in_memory(&self) -> bool {
        self.url.starts_with("sqlite:") && sqlite_in_memory(&self.url)
    }

    /// The SQLite file these options name, when it does not exist yet:
    /// opening the store will create it (a new store, with a signing key
    /// of its own). `None` for a file that exists, in memory and on
    /// PostgreSQL.
    pub fn new_sqlite_file(&self) -> Option<std::path::PathBuf> {
        if !self.url.starts_with("sqlite:") {
            return None;
        }
        sqlite_file(&self.url).filter(|path| !path.exists())
    }
}

/// [`StoreOptions::connection_lifetime`] by default, sqlx's own: so what
/// PostgreSQL holds for a connection (its caches, the connection's
/// prepared statements) does not grow for good, and after a failover
/// every connection has moved over within this time.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// [`StoreOptions::ping_after_idle`] by default: how long a PostgreSQL
/// connection must have sat idle before it is pinged on its way out, to
/// catch one the server or the network dropped meanwhile (a restart, a
/// proxy's idle timeout). It holds for sqlx's pool (writes, listings) and
/// for the read connections kept out of it (`store::read`).
///
/// Why not on every acquire (sqlx's `test_before_acquire`): sqlx also pings
/// every connection given back to its pool, so a point read was three
/// round trips to PostgreSQL, two of them pings. Under the benchmark's
/// `memory.get` load 29% of the server's samples in `perf` were its
/// threads switching and waking up; without the ping on acquire, paired
/// 10 s runs served 8.0-8.7k gets/s against 7.0-7.4k, at 86-89 µs of the
/// server's CPU a get against 97-101. A connection in use is checked as it
/// comes back: the pool's ping closes one that broke, and a read
/// connection is closed when any call found a connection lost while it was
/// out. What the idle time leaves unchecked is a connection given back
/// less than this long before the server dropped it: its next query fails
/// (one call, `BACKEND_TIMEOUT`, which may be retried) and it is closed as
/// it comes back. SQLite's connections are file handles that nothing drops
/// under us: never pinged here.
pub const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// [`StoreOptions::access_cache`] unless told otherwise
/// (`LOOM_ACCESS_CACHE_MS`).
pub const DEFAULT_ACCESS_CACHE: Duration = Duration::from_secs(1);

impl StoreOptions {
    /// Options for `url` with defaults.
    pub fn new(url: impl Into<String>) -> Self {
        StoreOptions {
            url: url.into(),
            max_connections: None,
            pg_schema: None,
            acquire_timeout: Duration::from_secs(5),
            access_cache: DEFAULT_ACCESS_CACHE,
            ping_after_idle: PING_AFTER_IDLE,
            connection_lifetime: CONNECTION_LIFETIME,
        }
    }
}

/// The pool size when none is configured. PostgreSQL: 16, as its
/// connections mostly wait on the network. SQLite: one reader per core.
/// A SQLite read is CPU work on its connection's own thread, so readers
/// beyond the cores only queue for them: on 2 cores, 16 readers served as
/// many memory.get calls as 2 but with a p99 latency six times longer.
pub fn default_connections(backend: Backend) -> u32 {
    match backend {
        Backend::Postgres => 16,
        Backend::Sqlite => std::thread::available_parallelism()
            .map_or(2, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .max(2),
    }
}

fn backend_of(url: &str) -> Result<Backend, String> {
    if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else {
        Err(format!(
            "LOOM_DATABASE_URL must start with sqlite:// or postgres://, got {:?}",
            url.split(':').next().unwrap_or("")
        ))
    }
}

/// Why the store's pool did not open. sqlx's pool says only that it timed
/// out waiting for a connection when none could be made (PostgreSQL not
/// listening, a host that does not answer): one connection made directly
/// names the cause, and the message the server it was meant for (host and
/// port, never the URL's password).
async fn open_error(backend: Backend, url: &str, e: sqlx::Error) -> String {
    if backend != Backend::Postgres || !matches!(e, sqlx::Error::PoolTimedOut) {
        return format!("cannot open the database: {e}");
    }
    let server = sqlx::postgres::PgConnectOptions::from_str(url)
        .map(|o| format!("{}:{}", o.get_host(), o.get_port()))
        .unwrap_or_else(|_| "its server".into());
    let cause = match tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(url))
        .await
    {
        Ok(Err(direct)) => direct.to_string(),
        Ok(Ok(_)) => e.to_string(),
        Err(_) => "no answer within 5 s".into(),
    };
    format!("cannot open the database at {server}: {cause}")
}

/// The path a SQLite URL names (`:memory:` for the in-memory store),
/// `None` when it names none (`sqlite:`, `sqlite://`, `sqlite://?mode=rwc`).
pub fn sqlite_path(url: &str) -> Option<&str> {
    let path = url
        .strip_prefix("sqlite:")?
        .trim_start_matches("//")
        .split('?')
        .next()
        .unwrap_or("");
    (!path.is_empty()).then_some(path)
}

/// A SQLite URL every connection of the store opens as one database: a
/// file is created when missing (`mode=rwc`). SQLite gives each connection
/// a private database for `sqlite::memory:` (and `sqlite:`), so the
/// writer's tables were not the readers'; such a URL becomes one named
/// in-memory database that this store's connections share, and that goes
/// when they close.
fn sqlite_url(url: &str) -> String {
    let path = sqlite_path(url).unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        let name = uuid::Uuid::new_v4().simple();
        format!("sqlite:file:loom-{name}?mode=memory&cache=shared")
    } else if url.contains("mode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A lock on `<file>-open.lock` beside a SQLite file store, taken before
/// the store is opened (connected, migrated, its telemetry file settled,
/// what was queued for the full-text index handed over) and let go once it
/// is: processes opening one store at once (`loom serve` and `loom token
/// mint` side by side on a new store) take turns. SQLite holds no lock
/// across those steps, and each reads and then changes the file: two
/// processes both found a migration pending, or both moved a telemetry
/// table, and the second failed (`table runs already exists`, `database
/// is locked`). PostgreSQL's migrations hold an advisory lock of sqlx's,
/// and its telemetry stays in the database. `None` for a store in memory,
/// on PostgreSQL, or where the lock file cannot be made (a read-only
/// directory: nothing will be migrated there either).
async fn opening_turn(options: &StoreOptions) -> Option<std::fs::File> {
    if !options.url.starts_with("sqlite:") {
        return None;
    }
    let mut lock = sqlite_file(&options.url)?.into_os_string();
    lock.push("-open.lock");
    let taken = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)?;
        // An advisory lock (flock) on a file of its own: it never meets
        // SQLite's locks on the database's files.
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await;
    match taken {
        Ok(Ok(file)) => Some(file),
        Ok(Err(e)) => {
            tracing::debug!(cause = %e, "the store is opened without taking turns with other processes");
            None
        }
        Err(_) => None,
    }
}

/// Which store a URL names, for the server's banner: a SQLite file's
/// path; PostgreSQL's host, port and database (never its user or
/// password), read as the driver reads the URL, so that the banner names
/// where it connects (`?dbname=`, `?port=`, `?host=` included; the
/// environment's PGHOST and PGPORT fill what the URL leaves out, as for
/// the connection).
pub fn store_place(url: &str) -> String {
    if let Some(path) = sqlite_path(url) {
        return format!("sqlite {path}");
    }
    match url.parse::<sqlx::postgres::PgConnectOptions>() {
        Ok(o) => {
            let place = match o.get_socket() {
                Some(socket) => socket.display().to_string(),
                None => format!("{}:{}", o.get_host(), o.get_port()),
            };
            format!("postgres {place}/{}", o.get_database().unwrap_or(""))
        }
        Err(_) => "postgres".to_owned(),
    }
}

/// Whether a PostgreSQL URL names its database, read as the driver reads
/// it (a path, `?dbname=`, or `PGDATABASE`); one the driver cannot read
/// names none.
pub fn postgres_names_database(url: &str) -> bool {
    url.parse::<sqlx::postgres::PgConnectOptions>()
        .is_ok_and(|o| o.get_database().is_some_and(|d| !d.is_empty()))
}

/// The database file a SQLite URL names; `None` in memory.
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let options = SqliteConnectOptions::from_str(url).ok()?;
    (!sqlite_in_memory(url)).then(|| options.get_filename().to_path_buf())
}

/// Whether a SQLite URL names a database in memory: `sqlite::memory:`, a
/// URL naming no file, or one asking for `mode=memory`.
fn sqlite_in_memory(url: &str) -> bool {
    sqlite_path(url).is_none_or(|p| p == ":memory:") || url.contains("mode=memory")
}

fn valid_schema_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Store {
    /// Opens the store and runs the migrations.
    pub async fn open(options: StoreOptions) -> Result<Store, String> {
        // Held until the store is open, then let go.
        let _turn = opening_turn(&options).await;
        let store = Store::connect(options).await?;
        store.migrate().await?;
        store.settle_telemetry().await?;
        store
            .index_queued(super::full_text_queue::DRAIN_BATCH)
            .await
            .map_err(|e| {
                let cause = e.internal_message().unwrap_or(e.message());
                format!("cannot index the rows queued for the full-text index: {cause}")
            })?;
        store
            .release_writer_pages()
            .await
            .map_err(|e| format!("cannot open the database: {e}"))?;
        Ok(store)
    }

    /// Opens the store without running migrations.
    pub async fn connect(options: StoreOptions) -> Result<Store, String> {
        install_default_drivers();
        let backend = backend_of(&options.url)?;
        if backend == Backend::Sqlite {
            match loom_wal_buffer::page_cache::installed() {
                Some(Ok(())) => {}
                Some(Err(why)) => {
                    tracing::warn!(%why, "SQLite's page cache without Loom's layer")
                }
                None => tracing::debug!("SQLite's page cache without Loom's layer: not installed"),
            }
            // Search ranks with loom_bm25; registered before the first
            // connection opens, it is on every one.
            loom_fts5::install()?;
        }
        let url = match backend {
            Backend::Sqlite => sqlite_url(&options.url),
            Backend::Postgres => options.url.clone(),
        };
        let schema = match &options.pg_schema {
            Some(s) if !valid_schema_name(s) => {
                return Err(format!("invalid PostgreSQL schema name {s:?}"));
            }
            other => other.clone(),
        };
        // The store's SQLite file: its telemetry file is attached to every
        // connection of both pools.
        let file = match backend {
            Backend::Sqlite => sqlite_file(&url),
            Backend::Postgres => None,
        };
        if let Some(file) = &file {
            super::telemetry::check_opens(file)?;
        }
        let (ping_after_idle, lifetime) = (options.ping_after_idle, options.connection_lifetime);
        // `sqlite_extra`: pragmas for one pool's connections on SQLite;
        // `attach`: the telemetry file's attach for them.
        let setup =
            move |schema: Option<String>, sqlite_extra: &'static str, attach: Option<Attach>| {
                AnyPoolOptions::new()
                    .acquire_timeout(options.acquire_timeout)
                    .max_lifetime(lifetime)
                    // Not sqlx's ping on every acquire: see PING_AFTER_IDLE.
                    .test_before_acquire(false)
                    .before_acquire(move |conn, meta| {
                        Box::pin(async move {
                            if backend == Backend::Postgres && meta.idle_for >= ping_after_idle {
                                // An error here discards the connection; the
                                // pool hands out another or opens a new one.
                                conn.ping().await?;
                            }
                            Ok(true)
                        })
                    })
                    .after_connect(move |conn, _meta| {
                        let schema = schema.clone();
                        let attach = attach.clone();
                        Box::pin(async move {
                            match backend {
                                Backend::Sqlite => {
                                    conn.execute(SQLITE_SETTINGS).await?;
                                    if let Some(attach) = attach {
                                        attach.run(conn).await?;
                                    }
                                    if !sqlite_extra.is_empty() {
                                        conn.execute(sqlite_extra).await?;
                                    }
                                }
                                Backend::Postgres => {
                                    if let Some(schema) = schema {
                                        conn.execute(sqlx::AssertSqlSafe(format!(
                                            "SET search_path TO {schema}"
                                        )))
                                        .await?;
                                    }
                                }
                            }
                            Ok(())
                        })
                    })
            };
        if let (Backend::Postgres, Some(schema)) = (backend, &schema) {
            let admin = AnyPoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await
                .map_err(|e| format!("cannot connect to the database: {e}"))?;
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "CREATE SCHEMA IF NOT EXISTS {schema}"
                )))
                .await
                .map_err(|e| format!("cannot create schema {schema}: {e}"))?;
            admin.close().await;
        }
        let connections = options
            .max_connections
            .unwrap_or_else(|| default_connections(backend));
        // PostgreSQL: the configured total split between the read
        // connections kept out of sqlx's pool (`store::read`) and the pool
        // every other statement uses (writes, listings), at least two.
        let (reads, writers) = match backend {
            Backend::Sqlite => (connections, 1),
            Backend::Postgres => {
                let reads = (connections / 2).max(1);
                (reads, connections.saturating_sub(reads).max(2))
            }
        };
        let writer = setup(
            schema.clone(),
            SQLITE_WRITER_SETTINGS,
            file.as_deref().map(|file| Attach::new(file, true)),
        )
        .max_connections(writers)
        .connect(&url)
        .await;
        let writer = match writer {
            Ok(pool) => pool,
            Err(e) => return Err(open_error(backend, &url, e).await),
        };
        let reader = match backend {
            Backend::Sqlite => setup(
                schema,
                "",
                file.as_deref().map(|file| Attach::new(file, false)),
            )
            .max_connections(connections.max(1))
            .connect(&url)
            .await
            .map_err(|e| format!("cannot open the database: {e}"))?,
            Backend::Postgres => writer.clone(),
        };
        let kept = super::read::Kept::new(
            reader.clone(),
            reads,
            options.acquire_timeout,
            (backend == Backend::Postgres).then_some(super::read::Upkeep {
                ping_after_idle,
                lifetime,
            }),
        );
        // After the pools connected: `mode=rwc` has created the file by now.
        let inline = file
            .filter(|file| file.is_file())
            .map(|file| std::sync::Arc::new(super::inline::Inline::new(file)));
        let group = match backend {
            Backend::Sqlite => Some(super::group::Group::start(
                writer.clone(),
                inline.as_ref(),
                &super::full_text_queue::DRAIN_PENDING,
            )?),
            Backend::Postgres => None,
        };
        Ok(Store {
            backend,
            writer,
            reader,
            group,
            kept,
            inline,
            doc_freqs: Default::default(),
            access: std::sync::Arc::new(super::access_cache::AccessCache::new(
                options.access_cache,
            )),
            probe: Default::default(),
        })
    }

    /// Lets go of the pages the SQLite writer holds, after work that read
    /// much of the file while nothing else ran (start-up: a migration that
    /// builds an index scans the table; a full merge of the full-text
    /// index): its cache and its memory map kept them, counted in the
    /// server's RSS (79 MB at idle against 20 after a migration that
    /// scanned 100,000 memories). Empties the cache and maps the file anew
    /// (`mmap_size` as in [`SQLITE_SETTINGS`]); pages come back as
    /// touched. Nothing on PostgreSQL.
    pub(super) async fn release_writer_pages(&self) -> Result<(), sqlx::Error> {
        if self.backend != Backend::Sqlite {
            return Ok(());
        }
        sqlx::raw_sql(SQLITE_WRITER_RELEASE)
            .execute(&self.writer)
            .await
            .map(drop)
    }

    /// Runs the embedded migrations for this backend (on SQLite, within
    /// the opening turn [`Store::open`] takes).
    pub async fn migrate(&self) -> Result<(), String> {
        let migrator = match self.backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
        };
        migrator.run(&self.writer).await.map_err(|e| match e {
            // The store records a migration this build does not have.
            sqlx::migrate::MigrateError::VersionMissing(v) => format!(
                "migrations failed: the store was migrated by a newer Loom (its migration {v} is not in this build); run that release or a later one"
            ),
            e => format!("migrations failed: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_where_the_store_connects_and_no_secret() {
        for (url, place) in [
            ("sqlite://loom.db", "sqlite loom.db"),
            (
                "postgres://u:secret@db.example.com:6432/loom",
                "postgres db.example.com:6432/loom",
            ),
            (
                "postgres://u:secret@h/postgres?dbname=test",
                "postgres h:5432/test",
            ),
            ("postgres://h:1/test?port=5432", "postgres h:5432/test"),
            (
                "postgres:///loom?host=/var/run/postgresql",
                "postgres /var/run/postgresql/loom",
            ),
        ] {
            assert_eq!(store_place(url), place, "{url}");
        }
    }

    #[test]
    fn a_sqlite_url_names_a_file_memory_or_nothing() {
        for (url, path) in [
            ("sqlite://loom.db", Some("loom.db")),
            (
                "sqlite:///var/lib/loom/loom.db?mode=rwc",
                Some("/var/lib/loom/loom.db"),
            ),
            ("sqlite:loom.db", Some("loom.db")),
            ("sqlite::memory:", Some(":memory:")),
            ("sqlite://", None),
            ("sqlite:", None),
            ("sqlite://?mode=rwc", None),
            ("postgres://h/db", None),
        ] {
            assert_eq!(sqlite_path(url), path, "{url}");
        }
        let memory = |url: &str| StoreOptions::new(url.to_owned()).in_memory();
        assert!(memory("sqlite::memory:"));
        assert!(memory("sqlite:file:loom-x?mode=memory&cache=shared"));
        assert!(!memory("sqlite://loom.db"));
        assert!(!memory("postgres://h/db"));
    }
}
