//! Readers through the VFS keep their memory map across other
//! connections' commits: what they read must stay what the file holds
//! while the file grows, shrinks and grows again under them.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

/// A read-only connection through the VFS, reading through a memory map.
fn reader(path: &Path) -> Connection {
    let vfs = loom_wal_buffer::register().unwrap();
    let conn =
        Connection::open_with_flags_and_vfs(path, OpenFlags::SQLITE_OPEN_READ_ONLY, vfs).unwrap();
    conn.execute_batch("PRAGMA mmap_size = 1073741824").unwrap();
    conn
}

/// A plain connection writing the file (checkpoints with `TRUNCATE` make
/// the database file itself grow and shrink).
fn writer(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; \
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
    )
    .unwrap();
    conn
}

fn insert(conn: &Connection, rows: i64, size: usize) {
    conn.execute_batch("BEGIN").unwrap();
    let mut stmt = conn
        .prepare_cached("INSERT INTO t (body) VALUES (randomblob(?1))")
        .unwrap();
    for _ in 0..rows {
        stmt.execute(params![size as i64]).unwrap();
    }
    drop(stmt);
    conn.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
}

/// (rows, total bytes) as `conn` reads them, every page of the table read.
fn totals(conn: &Connection) -> (i64, i64) {
    conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(length(body)), 0) FROM t",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn a_kept_map_reads_what_the_file_holds_as_it_grows_and_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let w = writer(&path);
    insert(&w, 2_000, 1_000);
    let r = reader(&path);
    assert_eq!(totals(&r), (2_000, 2_000_000));

    // Small commits: the map is kept, and every one is read.
    for n in 1..=20 {
        insert(&w, 10, 1_000);
        assert_eq!(totals(&r), (2_000 + 10 * n, (2_000 + 10 * n) * 1_000));
    }

    // Grown by ~30 MB: past the map, then mapped again.
    insert(&w, 30_000, 1_000);
    assert_eq!(totals(&r), (32_200, 32_200_000));

    // Shrunk: nearly everything deleted and the file rewritten smaller.
    let before = file_size(&path);
    w.execute_batch("DELETE FROM t WHERE id > 100; VACUUM; PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    assert!(
        file_size(&path) < before / 10,
        "the file should have shrunk"
    );
    assert_eq!(totals(&r), (100, 100_000));

    // And grown again, through the place the old map covered.
    insert(&w, 20_000, 1_000);
    assert_eq!(totals(&r), (20_100, 20_100_000));
    let check: String = r
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// A reader's map kept across commits shows rows rewritten in place: the
/// map is of the file, not a copy.
#[test]
fn a_kept_map_sees_pages_rewritten_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let w = writer(&path);
    insert(&w, 500, 200);
    let r = reader(&path);
    for round in 0..10_i64 {
        w.execute("UPDATE t SET body = zeroblob(200 + ?1)", params![round])
            .unwrap();
        w.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        assert_eq!(totals(&r), (500, 500 * (200 + round)));
    }
}
