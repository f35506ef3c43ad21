//! The page cache's layer (`page_cache`) against SQLite itself: B-tree
//! splits that renumber pages through the lock byte's page, commits and
//! rollbacks, with the table checked against a model after each.
//!
//! One test in this file, so one process: the layer must be installed
//! before SQLite is first used, and its counts are the process's.

use std::collections::BTreeMap;

use loom_wal_buffer::page_cache::counts;
use rusqlite::{Connection, params};

/// A small deterministic generator: the same run every time.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

fn table(conn: &Connection) -> BTreeMap<i64, String> {
    conn.prepare("SELECT k, v FROM t")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn integrity(conn: &Connection) -> String {
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn splits_commits_and_rollbacks_through_the_layer() {
    loom_wal_buffer::page_cache::install().expect("installed before SQLite is used");
    assert!(
        loom_wal_buffer::page_cache::install().is_ok(),
        "a second call answers the first's outcome"
    );

    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("cache.db")).unwrap();
    // A small cache, so pages are evicted and fetched again too.
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA cache_size = 64; \
         CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL); \
         CREATE INDEX t_by_v ON t (v)",
    )
    .unwrap();

    let mut model = BTreeMap::new();
    let mut before = counts();
    let mut rng = Lcg(7);
    let value = |rng: &mut Lcg| {
        format!(
            "{:x}{}",
            rng.next(u64::MAX),
            "x".repeat(rng.next(300) as usize)
        )
    };
    for round in 0..60 {
        let rolled_back = round % 5 == 4;
        let tx = conn.unchecked_transaction().unwrap();
        let mut changed = model.clone();
        // Inserts at random keys split pages; deletes fill the freelist
        // the next splits take their pages from, out of order.
        for _ in 0..400 {
            let k = rng.next(20_000) as i64;
            if rng.next(3) == 0 {
                tx.execute("DELETE FROM t WHERE k = ?1", params![k])
                    .unwrap();
                changed.remove(&k);
            } else {
                let v = value(&mut rng);
                tx.execute(
                    "INSERT OR REPLACE INTO t (k, v) VALUES (?1, ?2)",
                    params![k, v],
                )
                .unwrap();
                changed.insert(k, v);
            }
        }
        if rolled_back {
            tx.rollback().unwrap();
        } else {
            tx.commit().unwrap();
            model = changed;
        }
        assert_eq!(table(&conn), model, "round {round}");
        let now = counts();
        if !rolled_back {
            // A commit truncates the cache to the file's size, though its
            // splits put pages at the lock byte's page: skipped, as the
            // cache holds nothing past the file's end.
            assert_eq!(now.handed_on, before.handed_on, "round {round}: {now:?}");
            assert!(now.skipped > before.skipped, "round {round}: {now:?}");
        }
        before = now;
    }
    assert_eq!(integrity(&conn), "ok");
    // A fresh connection reads the same from the file.
    let other = Connection::open(dir.path().join("cache.db")).unwrap();
    assert_eq!(table(&other), model);

    let counts = counts();
    assert!(
        counts.through_lock_page > 0,
        "the workload renumbers pages through the lock byte's page: {counts:?}"
    );
}
