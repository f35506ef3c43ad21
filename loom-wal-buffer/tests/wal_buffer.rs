//! The VFS against SQLite itself: connections writing through it and
//! plain ones reading and writing the same file, as Loom's direct writer
//! shares its store with sqlx's connections.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

fn writer(path: &Path, synchronous: &str) -> Connection {
    let vfs = loom_wal_buffer::register().unwrap();
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)"
    ))
    .unwrap();
    conn
}

/// A new database in a folder of its own (kept while the `TempDir`
/// lives), and a connection writing it through the VFS at `synchronous`.
fn fresh(synchronous: &str) -> (tempfile::TempDir, PathBuf, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let conn = writer(&path, synchronous);
    (dir, path, conn)
}

fn plain(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA busy_timeout = 5000").unwrap();
    conn
}

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

fn integrity(conn: &Connection) -> String {
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

fn insert(conn: &Connection, rows: usize, size: usize) {
    let mut stmt = conn
        .prepare_cached("INSERT INTO t (body) VALUES (?1)")
        .unwrap();
    for i in 0..rows {
        stmt.execute(params![vec![(i % 251) as u8; size]]).unwrap();
    }
}

#[test]
fn registering_twice_gives_the_same_vfs() {
    assert_eq!(loom_wal_buffer::register(), Ok(loom_wal_buffer::NAME));
    assert_eq!(loom_wal_buffer::register(), Ok(loom_wal_buffer::NAME));
}

/// A commit's frames are in the file when the commit returns, with a sync
/// (FULL) and without one (NORMAL): another connection reads them at once.
#[test]
fn every_commit_is_in_the_file_when_it_returns() {
    for synchronous in ["FULL", "NORMAL"] {
        let (_dir, path, w) = fresh(synchronous);
        let r = plain(&path);
        for n in 1..=40 {
            w.execute_batch("BEGIN").unwrap();
            insert(&w, n, 300);
            w.execute_batch("COMMIT").unwrap();
            assert_eq!(
                loom_wal_buffer::buffered(&w, c"main"),
                Some(0),
                "{synchronous}"
            );
            assert_eq!(count(&r), (n * (n + 1) / 2) as i64, "{synchronous}");
        }
        assert_eq!(integrity(&r), "ok");
    }
}

/// A transaction far larger than the buffer, and than the default VFS
/// writes in one call, with its cache spilling into the WAL on the way.
#[test]
fn a_large_transaction_is_written_whole() {
    let (_dir, path, w) = fresh("FULL");
    w.execute_batch("PRAGMA cache_size = 64; BEGIN").unwrap();
    insert(&w, 6_000, 2_000);
    w.execute_batch("UPDATE t SET body = zeroblob(1500) WHERE id % 7 = 0; COMMIT")
        .unwrap();
    assert_eq!(loom_wal_buffer::buffered(&w, c"main"), Some(0));
    let r = plain(&path);
    assert_eq!(count(&r), 6_000);
    let zeroed: i64 = r
        .query_row(
            "SELECT COUNT(*) FROM t WHERE body = zeroblob(1500)",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(zeroed, 6_000 / 7);
    assert_eq!(integrity(&r), "ok");
}

/// Frames a rolled-back transaction spilled into the buffer never land
/// over what another connection commits after it: its rollback (which
/// may read the WAL, writing the buffer out first while it still holds
/// the write lock) and [`loom_wal_buffer::discard`] leave nothing behind.
#[test]
fn a_rollback_leaves_nothing_to_write_over_another_commit() {
    let (_dir, path, w) = fresh("FULL");
    insert(&w, 10, 100);
    w.execute_batch("PRAGMA cache_size = 16; BEGIN").unwrap();
    insert(&w, 400, 1_000);
    let left = loom_wal_buffer::buffered(&w, c"main").unwrap();
    assert!(left > 0, "the spill should have left frames in the buffer");
    w.execute_batch("ROLLBACK").unwrap();
    loom_wal_buffer::discard(&w, c"main");
    assert_eq!(loom_wal_buffer::buffered(&w, c"main"), Some(0));

    let other = plain(&path);
    insert(&other, 300, 1_000);
    w.execute_batch("BEGIN").unwrap();
    insert(&w, 5, 100);
    w.execute_batch("COMMIT").unwrap();

    let r = plain(&path);
    assert_eq!(count(&r), 10 + 300 + 5);
    assert_eq!(integrity(&r), "ok");
}

/// Databases attached to a connection of the VFS write through it too,
/// each WAL with a buffer of its own; a connection of the default VFS has
/// none.
#[test]
fn attached_databases_have_buffers_of_their_own() {
    let (dir, path, w) = fresh("FULL");
    let other = dir.path().join("other.db");
    w.execute_batch(&format!(
        "ATTACH DATABASE '{}' AS other; PRAGMA other.journal_mode = WAL; \
         PRAGMA other.synchronous = NORMAL; CREATE TABLE other.u (x)",
        other.display()
    ))
    .unwrap();
    w.execute_batch(
        "BEGIN; INSERT INTO other.u VALUES (1); INSERT INTO t (body) VALUES (x'00'); COMMIT",
    )
    .unwrap();
    assert_eq!(loom_wal_buffer::buffered(&w, c"other"), Some(0));
    assert_eq!(loom_wal_buffer::buffered(&w, c"main"), Some(0));
    let r = plain(&other);
    let n: i64 = r
        .query_row("SELECT COUNT(*) FROM u", [], |row| row.get(0))
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(loom_wal_buffer::buffered(&plain(&path), c"main"), None);
}
