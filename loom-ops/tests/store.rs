//! The store opens, migrates and round-trips on every backend.

use loom_ops::store::{Backend, testing};

#[tokio::test]
async fn opens_migrates_and_writes_on_every_backend() {
    for t in testing::all().await {
        let store = &t.store;
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ($1, $2)")
            .bind("acme")
            .bind(1_i64)
            .execute(store.writer())
            .await
            .unwrap();
        let (org,): (String,) = sqlx::query_as("SELECT org FROM orgs WHERE org = $1")
            .bind("acme")
            .fetch_one(store.reader())
            .await
            .unwrap();
        assert_eq!(org, "acme", "{}", t.name());
        // migrations are idempotent
        store.migrate().await.unwrap();
    }
}

#[tokio::test]
async fn sqlite_runs_in_wal_mode() {
    let t = testing::sqlite().await;
    assert_eq!(t.store.backend(), Backend::Sqlite);
    let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(t.store.reader())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    // reads go through a shared memory map, not a small cache per connection
    let (mmap,): (i64,) = sqlx::query_as("PRAGMA mmap_size")
        .fetch_one(t.store.reader())
        .await
        .unwrap();
    assert_eq!(mmap, 1 << 30);
}

/// SQLite before 3.51.3 can lose committed pages when a checkpoint races a
/// commit that starts the WAL over, the pattern the store's checkpoint
/// thread and writers run all day (the README's Reliability). sqlx's
/// connections and rusqlite's (the direct
/// writer, the inline readers) are one SQLite, and it is a fixed one.
#[tokio::test]
async fn sqlite_is_one_that_has_the_wal_reset_fix() {
    const FIXED: i32 = 3_051_003;
    assert!(
        rusqlite::version_number() >= FIXED,
        "rusqlite links SQLite {}",
        rusqlite::version()
    );
    let t = testing::sqlite().await;
    let (version,): (String,) = sqlx::query_as("SELECT sqlite_version()")
        .fetch_one(t.store.reader())
        .await
        .unwrap();
    assert_eq!(
        version,
        rusqlite::version(),
        "sqlx and rusqlite link one SQLite"
    );
}

fn cx() -> loom_core::OpCx {
    loom_core::OpCx::new(
        "test.write",
        std::sync::Arc::new(loom_core::Services::new()),
    )
}

async fn setting(store: &loom_ops::store::Store, name: &str) -> Option<String> {
    sqlx::query_as::<_, (String,)>("SELECT value FROM settings WHERE name = $1")
        .bind(name)
        .fetch_optional(store.reader())
        .await
        .unwrap()
        .map(|(v,)| v)
}

async fn put(tx: &mut loom_ops::store::WriteTx, name: &str) {
    sqlx::query("INSERT INTO settings (name, value, created_ms) VALUES ($1, $2, 0)")
        .bind(name)
        .bind(name)
        .execute(tx.conn())
        .await
        .unwrap();
}

/// Many write transactions at once (on SQLite they share group commits):
/// each committed one is visible to a reader the moment its commit returns,
/// and the ones that rolled back, or were dropped half-way, left nothing.
#[tokio::test]
async fn concurrent_write_transactions_commit_alone_or_roll_back_alone() {
    for t in testing::all().await {
        let n = t.name();
        let store = t.store.clone();
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..60 {
            let store = store.clone();
            calls.spawn(async move {
                let name = format!("k{i}");
                let mut tx = store.begin_write().await.unwrap();
                put(&mut tx, &name).await;
                match i % 3 {
                    0 => {
                        tx.commit(&cx()).await.unwrap();
                        // acknowledged means committed: a reader sees it now
                        assert_eq!(setting(&store, &name).await.as_deref(), Some(name.as_str()));
                    }
                    1 => tx.rollback().await.unwrap(),
                    _ => drop(tx),
                }
            });
        }
        while let Some(done) = calls.join_next().await {
            done.unwrap();
        }
        // a later write still works after the abandoned ones
        let mut tx = store.begin_write().await.unwrap();
        put(&mut tx, "after").await;
        tx.commit(&cx()).await.unwrap();
        for i in 0..60 {
            let found = setting(&store, &format!("k{i}")).await;
            assert_eq!(found.is_some(), i % 3 == 0, "{n}: k{i}");
        }
        assert!(setting(&store, "after").await.is_some(), "{n}");
    }
}

/// A write committed just before the store closes is on disk when the
/// store opens again.
#[tokio::test]
async fn a_committed_write_survives_close_and_reopen() {
    for t in testing::all().await {
        let n = t.name();
        let mut tx = t.store.begin_write().await.unwrap();
        put(&mut tx, "durable").await;
        tx.commit(&cx()).await.unwrap();
        t.store.close().await;
        let again = loom_ops::store::Store::open(t.options.clone())
            .await
            .unwrap();
        assert_eq!(
            setting(&again, "durable").await.as_deref(),
            Some("durable"),
            "{n}"
        );
        again.close().await;
    }
}

/// Ledger batches (a few multi-row statements at a time through
/// `store::execute_chunked`, a row per step on SQLite's direct writer) land
/// whole whatever their length, each row with its own values, on every
/// backend.
#[tokio::test]
async fn a_ledger_batch_of_any_length_lands_whole() {
    use loom_core::{AgentEvent, Transport};
    for t in testing::all().await {
        let events: std::sync::Arc<[AgentEvent]> = (0..237)
            .map(|i| AgentEvent {
                org: "default".into(),
                namespace: "default".into(),
                subject: format!("s{i}"),
                agent: "a".into(),
                consumer: (i % 2 == 0).then(|| "c".to_owned()),
                op: "memory.get".into(),
                transport: Transport::Http,
                run_id: None,
                session_id: None,
                request_id: format!("r{i}"),
                outcome: "ok".into(),
                status: 200,
                latency_ms: i,
                at_ms: i64::try_from(i).unwrap(),
            })
            .collect();
        t.store.insert_agent_events(&events).await.unwrap();
        t.store
            .insert_agent_events(&events[..1].into())
            .await
            .unwrap();
        let (rows, latency, consumers): (i64, i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), CAST(SUM(latency_ms) AS BIGINT), COUNT(consumer) FROM agent_events",
        )
        .fetch_one(t.store.reader())
        .await
        .unwrap();
        let n = t.name();
        assert_eq!(rows, 238, "{n}");
        assert_eq!(latency, (0..237).sum::<i64>(), "{n}");
        assert_eq!(consumers, 120, "{n}");
        let (subject, request): (String, String) =
            sqlx::query_as("SELECT subject, request_id FROM agent_events WHERE latency_ms = 200")
                .fetch_one(t.store.reader())
                .await
                .unwrap();
        assert_eq!(
            (subject.as_str(), request.as_str()),
            ("s200", "r200"),
            "{n}"
        );
    }
}

/// Not beside the tests that drop connections (tests/postgres_connections.rs):
/// a connection found lost anywhere in the process closes the read
/// connections out at the time, which this test's would then be.
#[tokio::test]
async fn one_read_at_a_time_reuses_its_postgres_connection() {
    let Some(t) = testing::postgres().await else {
        return;
    };
    let mut pids = Vec::new();
    for _ in 0..3 {
        let mut conn = t.store.read().await.unwrap();
        let (pid,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        pids.push(pid);
    }
    assert!(pids.iter().all(|p| *p == pids[0]), "{pids:?}");
}

/// `sqlite::memory:` (and `sqlite:`) is one database for every connection
/// of the store, not a private one each: what the writer makes, the
/// readers see. Two stores opened so are two databases.
#[tokio::test]
async fn an_in_memory_store_is_one_database_for_its_connections() {
    for url in ["sqlite::memory:", "sqlite:"] {
        let store = loom_ops::store::Store::open(loom_ops::store::StoreOptions::new(url))
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ('mem', 1)")
            .execute(store.writer())
            .await
            .unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM orgs WHERE org = 'mem'")
            .fetch_one(store.reader())
            .await
            .unwrap();
        assert_eq!(n, 1, "{url}");
        let other = loom_ops::store::Store::open(loom_ops::store::StoreOptions::new(url))
            .await
            .unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM orgs WHERE org = 'mem'")
            .fetch_one(other.reader())
            .await
            .unwrap();
        assert_eq!(n, 0, "{url}: a second store is a database of its own");
        store.close().await;
        other.close().await;
    }
}

/// Processes opening a new SQLite store at once (`loom serve` and `loom
/// token mint` side by side) all migrate it: SQLite has no lock sqlx holds
/// while it migrates, and the one that lost a migration's race was refused
/// (`table ... already exists`, a locked file).
#[tokio::test]
async fn stores_opened_at_once_on_a_new_file_all_migrate_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("new.db").display());
    let opening = (0..4)
        .map(|_| loom_ops::store::Store::open(loom_ops::store::StoreOptions::new(url.clone())));
    let stores: Vec<_> = futures_util::future::join_all(opening)
        .await
        .into_iter()
        .map(|s| s.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let (applied,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(stores[0].reader())
        .await
        .unwrap();
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .count();
    assert_eq!(applied as usize, files);
    for s in stores {
        s.close().await;
    }
}

/// PostgreSQL over TLS, as a managed database asks (`sslmode=require`):
/// the store's connections are encrypted. Skipped where the server has no
/// TLS configured.
#[tokio::test]
async fn a_postgres_store_connects_over_tls_when_the_url_asks() {
    let Some(plain) = testing::postgres().await else {
        return;
    };
    let (ssl,): (String,) = sqlx::query_as("SHOW ssl")
        .fetch_one(plain.store.reader())
        .await
        .unwrap();
    plain.store.close().await;
    if ssl != "on" {
        return;
    }
    let t = testing::postgres_with(|o| {
        let join = if o.url.contains('?') { '&' } else { '?' };
        o.url = format!("{}{join}sslmode=require", o.url);
    })
    .await
    .unwrap();
    let mut conn = t.store.read().await.unwrap();
    let (encrypted,): (bool,) =
        sqlx::query_as("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert!(encrypted);
    drop(conn);
    t.store.close().await;
}
