//! The store's PostgreSQL connections: those the server drops (a restart,
//! a proxy's idle timeout) are replaced, a call that ran on one fails with
//! a code a client may retry, not an internal fault, and connections are
//! renewed at their lifetime. Run when `LOOM_TEST_DATABASE_URL` is set.

use std::time::Duration;

use loom_core::ErrorCode;
use loom_ops::store::{Store, StoreOptions, db_error, testing};
use sqlx::Connection;

/// The store's read connections: half of its connections on PostgreSQL.
const READERS: u32 = 2;
const CONNECTIONS: u32 = 2 * READERS;

/// A PostgreSQL test store of [`CONNECTIONS`], `adjust`ed; `None` without
/// a server.
async fn store_with(adjust: impl FnOnce(&mut StoreOptions)) -> Option<testing::TestStore> {
    testing::postgres_with(|o| {
        o.max_connections = Some(CONNECTIONS);
        adjust(o);
    })
    .await
}

/// The server processes behind every read connection of `store`: all of
/// them held at once, so each is a different connection.
async fn reader_pids(store: &Store) -> Vec<i32> {
    let mut held = Vec::new();
    let mut pids = Vec::new();
    for _ in 0..READERS {
        let mut conn = store.read().await.unwrap();
        let (pid,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        pids.push(pid);
        held.push(conn);
    }
    pids
}

/// Ends each server process of `pids` from a connection of its own, and
/// waits until each has exited (PostgreSQL 14's timeout argument).
async fn terminate(url: &str, pids: &[i32]) {
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    for pid in pids {
        let (ended,): (bool,) = sqlx::query_as("SELECT pg_terminate_backend($1, 10000)")
            .bind(pid)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        assert!(ended, "server process {pid} did not end");
    }
}

/// One read on a connection from the pool: its server process, or the
/// error a call would answer.
async fn read_once(store: &Store) -> Result<i32, loom_core::LoomError> {
    let mut conn = store.read().await?;
    let (pid,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(pid)
}

#[tokio::test]
async fn a_connection_idle_past_the_ping_threshold_is_checked_and_replaced() {
    let Some(t) = store_with(|o| o.ping_after_idle = Duration::ZERO).await else {
        return;
    };
    let dropped = reader_pids(&t.store).await;
    terminate(&t.options.url, &dropped).await;
    // every connection handed out is pinged first: no read fails
    for _ in 0..READERS + 1 {
        let pid = read_once(&t.store).await.expect("a read after the drop");
        assert!(!dropped.contains(&pid), "read on dropped process {pid}");
    }
}

#[tokio::test]
async fn a_connection_dropped_while_briefly_idle_fails_one_call_retryably() {
    let Some(t) = store_with(|_| {}).await else {
        return;
    };
    assert_eq!(t.options.ping_after_idle, loom_ops::store::PING_AFTER_IDLE);
    let dropped = reader_pids(&t.store).await;
    terminate(&t.options.url, &dropped).await;
    // Each dropped connection fails at most the one call that finds it (it
    // is closed as it comes back); after that, reads run on new ones.
    let mut failures = 0;
    let pid = loop {
        match read_once(&t.store).await {
            Ok(pid) => break pid,
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::BackendTimeout, "{e:?}");
                assert!(e.retry_after().is_some(), "{e:?}");
                failures += 1;
                assert!(
                    failures <= READERS,
                    "more failed reads than dropped connections"
                );
            }
        }
    };
    assert!(!dropped.contains(&pid));
    for _ in 0..READERS {
        let pid = read_once(&t.store)
            .await
            .expect("reads after the first success");
        assert!(!dropped.contains(&pid));
    }
}

#[tokio::test]
async fn a_read_connection_past_its_lifetime_is_renewed() {
    let Some(t) = store_with(|o| o.connection_lifetime = Duration::ZERO).await else {
        return;
    };
    // one read at a time: each gets the connection the last one gave back
    // (tests/store.rs), unless it was closed for its age
    let first = read_once(&t.store).await.unwrap();
    let second = read_once(&t.store).await.unwrap();
    assert_ne!(first, second, "a connection past its lifetime was kept");
}
