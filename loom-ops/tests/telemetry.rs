//! SQLite's telemetry file: the call ledger, exposures and their counts in
//! a file of their own beside the store's, so their commits leave the
//! readers of the memories their pages; and a store made before it has
//! those tables moved when it opens.

mod common;

use std::path::{Path, PathBuf};

use loom_core::{AgentEvent, Transport};
use loom_ops::store::testing::{self, TestStore};
use loom_ops::store::{Store, StoreOptions};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;

/// The tables the telemetry file holds.
const TABLES: [&str; 3] = ["agent_events", "memory_exposures", "memory_exposure_counts"];

/// The store's SQLite file.
fn file_of(t: &TestStore) -> PathBuf {
    PathBuf::from(t.options.url.strip_prefix("sqlite://").unwrap())
}

fn telemetry_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push("-telemetry");
    name.into()
}

/// A read-only connection to one file, as the memories' readers have.
fn reader(file: &Path) -> Connection {
    Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// SQLite's count of commits other connections made to the file since.
fn data_version(conn: &Connection) -> i64 {
    count(conn, "PRAGMA data_version")
}

fn events(n: usize) -> std::sync::Arc<[AgentEvent]> {
    (0..n)
        .map(|i| AgentEvent {
            org: "default".into(),
            namespace: "default".into(),
            subject: format!("s{i}"),
            agent: "a".into(),
            consumer: None,
            op: "memory.get".into(),
            transport: Transport::Mcp,
            run_id: None,
            session_id: None,
            request_id: format!("r{i}"),
            outcome: "ok".into(),
            status: 200,
            latency_ms: 1,
            at_ms: 1,
        })
        .collect()
}

#[tokio::test]
async fn what_reads_leave_behind_is_committed_to_the_telemetry_file_alone() {
    let h = common::sqlite().await;
    h.call(
        "memory.set",
        json!({"memory_key": "deploy_window", "content": "Deploys go out on Tuesdays"}),
    )
    .await
    .unwrap();
    // The set's rows queued for the full-text index go in first: the
    // search would hand them over itself, a write of the set's, not of
    // what the read leaves behind.
    h.store().index_queued_writes().await.unwrap();
    let file = file_of(&h.t);
    let memories = reader(&file);
    let before = data_version(&memories);

    // A search's exposure rows and counts, and a batch of the ledger.
    let out = h
        .call("search.query", json!({"query": "When do deploys go out?"}))
        .await
        .unwrap();
    assert_eq!(out["memory"].as_array().map(Vec::len), Some(1), "{out}");
    h.flush_usage().await;
    h.store().insert_agent_events(&events(3)).await.unwrap();

    assert_eq!(
        data_version(&memories),
        before,
        "nothing was committed to the store's file"
    );
    let telemetry = reader(&telemetry_of(&file));
    assert_eq!(
        count(&telemetry, "SELECT COUNT(*) FROM memory_exposures"),
        1
    );
    assert_eq!(
        count(&telemetry, "SELECT SUM(n) FROM memory_exposure_counts"),
        1
    );
    assert_eq!(count(&telemetry, "SELECT COUNT(*) FROM agent_events"), 3);
    for table in TABLES {
        assert_eq!(
            tables_named(&memories, table),
            0,
            "{table} is not in the store's file"
        );
    }

    // A memory write is committed to the store's file: the check above
    // would have seen one.
    h.call("memory.set", json!({"memory_key": "k", "content": "v"}))
        .await
        .unwrap();
    assert_ne!(data_version(&memories), before);
}

/// A store as the versions before the telemetry file made it: the
/// migrations alone, which create the telemetry tables in the store's file
/// (`Store::open` then moves them). With its URL, file and folder.
async fn store_from_before() -> (Store, StoreOptions, PathBuf, PathBuf) {
    let (url, dir) = testing::sqlite_url();
    let options = StoreOptions::new(url);
    let store = Store::connect(options.clone()).await.unwrap();
    store.migrate().await.unwrap();
    let file = PathBuf::from(options.url.strip_prefix("sqlite://").unwrap());
    (store, options, file, dir)
}

fn tables_named(conn: &Connection, table: &str) -> i64 {
    count(
        conn,
        &format!("SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = '{table}'"),
    )
}

#[tokio::test]
async fn a_store_from_before_the_telemetry_file_has_its_tables_moved_when_it_opens() {
    let (old, options, file, dir) = store_from_before().await;
    old.insert_agent_events(&events(5)).await.unwrap();
    old.close().await;
    let main = reader(&file);
    assert_eq!(count(&main, "SELECT COUNT(*) FROM agent_events"), 5);

    let t = testing::sqlite_at(options.url, dir).await;
    for table in TABLES {
        assert_eq!(
            tables_named(&main, table),
            0,
            "{table} left the store's file"
        );
    }
    let telemetry = reader(&telemetry_of(&file));
    assert_eq!(
        count(
            &telemetry,
            "SELECT COUNT(*) FROM agent_events WHERE id BETWEEN 1 AND 5"
        ),
        5
    );
    assert_eq!(
        tables_named(&telemetry, "agent_events"),
        3,
        "the table and its two indexes"
    );
    // Its ids go on from where they were.
    t.store.insert_agent_events(&events(1)).await.unwrap();
    assert_eq!(count(&telemetry, "SELECT MAX(id) FROM agent_events"), 6);
    t.store.close().await;
}

#[tokio::test]
async fn a_move_cut_short_is_made_again_from_the_start() {
    let (old, options, file, dir) = store_from_before().await;
    old.close().await;
    // The table in both files, as a crash between the copy's commit and
    // the drop would leave it: the copy holds one row of the two.
    Connection::open(&file)
        .unwrap()
        .execute_batch(&format!(
            "INSERT INTO memory_exposure_counts VALUES ('o', 'n', 'a', 'k1', 'b', 2), \
               ('o', 'n', 'a', 'k2', 'b', 3); \
             ATTACH DATABASE '{}' AS telemetry; \
             CREATE TABLE telemetry.memory_exposure_counts AS \
               SELECT * FROM main.memory_exposure_counts WHERE memory_key = 'k1';",
            telemetry_of(&file).display()
        ))
        .unwrap();

    let t = testing::sqlite_at(options.url, dir).await;
    let (rows, n): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), CAST(SUM(n) AS BIGINT) FROM memory_exposure_counts")
            .fetch_one(t.store.reader())
            .await
            .unwrap();
    assert_eq!((rows, n), (2, 5));
    assert_eq!(tables_named(&reader(&file), "memory_exposure_counts"), 0);
    // The copy has the table's key again.
    let dup =
        sqlx::query("INSERT INTO memory_exposure_counts VALUES ('o', 'n', 'a', 'k1', 'b', 1)")
            .execute(t.store.writer())
            .await;
    assert!(dup.is_err(), "{dup:?}");
    t.store.close().await;
}

#[tokio::test]
async fn a_lost_telemetry_file_is_made_again_empty() {
    let t = testing::sqlite().await;
    t.store.insert_agent_events(&events(2)).await.unwrap();
    t.store.close().await;
    let telemetry = telemetry_of(&file_of(&t));
    for suffix in ["", "-wal", "-shm"] {
        let mut name = telemetry.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }

    let store = Store::open(t.options.clone()).await.unwrap();
    store.insert_agent_events(&events(3)).await.unwrap();
    let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM agent_events")
        .fetch_one(store.reader())
        .await
        .unwrap();
    assert_eq!(rows, 3, "the lost rows are gone, new ones land");
    let conn = reader(&telemetry);
    for table in TABLES {
        assert!(tables_named(&conn, table) >= 1, "{table} made again");
    }
    assert_eq!(tables_named(&conn, "agent_events"), 3, "with its indexes");
    store.close().await;
}

#[tokio::test]
async fn a_telemetry_file_that_cannot_be_opened_is_named_at_once() {
    let (url, dir) = testing::sqlite_url();
    let file = PathBuf::from(url.strip_prefix("sqlite://").unwrap());
    std::fs::create_dir_all(telemetry_of(&file)).unwrap();
    let err = Store::open(StoreOptions::new(url)).await.unwrap_err();
    assert!(
        err.starts_with("cannot open the telemetry file ") && err.contains("loom.db-telemetry"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A store's file that is no SQLite database is named as the store's, and
/// no telemetry file is left beside it.
#[tokio::test]
async fn a_file_that_is_no_database_is_named_and_left_alone() {
    let (url, dir) = testing::sqlite_url();
    let file = PathBuf::from(url.strip_prefix("sqlite://").unwrap());
    std::fs::write(&file, "not a database\n").unwrap();
    let err = Store::open(StoreOptions::new(url)).await.unwrap_err();
    assert!(
        err.contains(&format!("cannot open the store {}", file.display())),
        "{err}"
    );
    assert!(!telemetry_of(&file).exists(), "a side file was made");
    let _ = std::fs::remove_dir_all(dir);
}
