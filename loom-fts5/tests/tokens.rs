//! loom_fts_tokens against the sizes FTS5 keeps itself, on real SQLite
//! connections.

use proptest::prelude::*;
use rusqlite::Connection;

fn open() -> Connection {
    loom_fts5::install().expect("install");
    Connection::open_in_memory().expect("open")
}

/// Each row's size as FTS5 keeps it (the docsize blob's varints summed,
/// read back through `bm25`'s own path: `xColumnSize` via the docsize
/// table), against loom_fts_tokens over the same values.
fn sizes(db: &Connection, rows: &[(String, String, Option<String>)]) -> Vec<(i64, i64)> {
    db.execute_batch(
        "DROP TABLE IF EXISTS t; \
         CREATE VIRTUAL TABLE t USING fts5 (memory_key, content, labels, tokenize = 'porter unicode61'); \
         CREATE TABLE src (id INTEGER PRIMARY KEY, memory_key, content, labels);",
    )
    .expect("create");
    db.execute_batch("DELETE FROM src").expect("empty");
    for (i, (key, content, labels)) in rows.iter().enumerate() {
        let id = i64::try_from(i).unwrap() + 1;
        db.execute(
            "INSERT INTO src (id, memory_key, content, labels) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![id, key, content, labels],
        )
        .expect("insert src");
        db.execute(
            "INSERT INTO t (rowid, memory_key, content, labels) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![id, key, content, labels],
        )
        .expect("insert t");
    }
    let mut stmt = db
        .prepare(
            "SELECT (SELECT sz FROM t_docsize WHERE id = src.id), \
             loom_fts_tokens(memory_key, content, labels) FROM src ORDER BY id",
        )
        .expect("prepare");
    stmt.query_map([], |r| Ok((varints(&r.get::<_, Vec<u8>>(0)?), r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// The sum of a docsize blob's varints.
fn varints(blob: &[u8]) -> i64 {
    let (mut total, mut n) = (0_i64, 0_i64);
    for &b in blob {
        n = (n << 7) | i64::from(b & 0x7f);
        if b & 0x80 == 0 {
            total += n;
            n = 0;
        }
    }
    total
}

/// Text of words, numbers, punctuation, accents, CJK, emoji and the odd
/// separator: what a memory may hold.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "deploy",
            "Window",
            "postgres",
            "caching",
            "running",
            "naïve",
            "Ärger",
            "東京",
            "emoji🙂",
            "x",
            "42",
            "3.14",
            "v2",
            "don't",
            "snake_case",
            "kebab-case",
            "\u{345}",
            "ﬁle",
            "ǅ",
            "İstanbul",
        ])
        .prop_map(str::to_owned),
        "[ -~]{0,6}",
        "\\PC{0,4}",
    ];
    prop::collection::vec(piece, 0..30).prop_map(|p| p.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the text, loom_fts_tokens counts what FTS5 keeps as the
    /// row's size.
    #[test]
    fn counts_what_fts5_keeps(
        rows in prop::collection::vec((text(), text(), prop::option::of(text())), 1..20),
    ) {
        let db = open();
        for (rowid, (fts5, ours)) in sizes(&db, &rows).into_iter().enumerate() {
            prop_assert_eq!(fts5, ours, "row {}: {:?}", rowid + 1, &rows[rowid]);
        }
    }
}

#[test]
fn empty_and_null_columns_count_nothing() {
    let db = open();
    let count = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(count("SELECT loom_fts_tokens()"), 0);
    assert_eq!(count("SELECT loom_fts_tokens(NULL, '', '  ,; ')"), 0);
    assert_eq!(
        count("SELECT loom_fts_tokens('deploy-window', 'a b c', NULL)"),
        5
    );
    // A number is read as its text, as FTS5 reads a column holding one.
    assert_eq!(count("SELECT loom_fts_tokens(3.5, 12)"), 3);
}

/// A long text: sizes past one byte of varint, the same as FTS5's.
#[test]
fn long_texts_count_as_fts5_does() {
    let db = open();
    let long = vec!["deploy"; 20_000].join(" ");
    let rows = vec![("k".to_owned(), long, Some("a b".to_owned()))];
    assert_eq!(sizes(&db, &rows), vec![(20_003, 20_003)]);
}

/// Loom's own table keeps no sizes (`columnsize = 0`, contentless): given
/// the counted size, loom_bm25 scores its rows as bm25() scores the same
/// rows in a table that keeps them; given none, it says so.
#[test]
fn a_table_without_sizes_scores_with_the_counted_size() {
    let db = open();
    db.execute_batch(
        "CREATE VIRTUAL TABLE kept USING fts5 (memory_key, content, labels, tokenize = 'porter unicode61'); \
         CREATE VIRTUAL TABLE bare USING fts5 (memory_key, content, labels, content = '', \
           tokenize = 'porter unicode61', columnsize = 0); \
         CREATE TABLE m (id INTEGER PRIMARY KEY, memory_key, content, labels, fts_tokens);",
    )
    .unwrap();
    let docs = [
        ("k1", "deploy the window on friday", "[\"ops\"]"),
        ("k2", "window window cache", "[]"),
        (
            "k3",
            "a long deploy note about postgres and its deploy window",
            "[]",
        ),
    ];
    for (i, (k, c, l)) in docs.iter().enumerate() {
        let id = i64::try_from(i).unwrap() + 1;
        for table in ["kept", "bare"] {
            db.execute(
                &format!("INSERT INTO {table} (rowid, memory_key, content, labels) VALUES (?1, ?2, ?3, ?4)"),
                rusqlite::params![id, k, c, l],
            )
            .unwrap();
        }
        db.execute(
            "INSERT INTO m VALUES (?1, ?2, ?3, ?4, loom_fts_tokens(?2, ?3, ?4))",
            rusqlite::params![id, k, c, l],
        )
        .unwrap();
    }
    assert!(
        !db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'bare_docsize'")
            .unwrap()
            .exists([])
            .unwrap()
    );
    let expr = "\"deploy\" OR \"window\"";
    let scores = |sql: &str| -> Vec<u64> {
        let mut stmt = db.prepare(sql).unwrap();
        stmt.query_map([expr], |r| r.get::<_, f64>(0).map(f64::to_bits))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let kept =
        scores("SELECT bm25(kept, 2.0, 1.0, 0.5) FROM kept WHERE kept MATCH ?1 ORDER BY rowid");
    let dfs = "2 3";
    let bare = scores(&format!(
        "SELECT loom_bm25(bare, '{dfs}', m.fts_tokens, 2.0, 1.0, 0.5) FROM bare \
         JOIN m ON m.id = bare.rowid WHERE bare MATCH ?1 ORDER BY bare.rowid"
    ));
    assert_eq!(kept.len(), 3);
    assert_eq!(kept, bare);
    let err = db
        .query_row(
            "SELECT loom_bm25(bare, '2', NULL) FROM bare WHERE bare MATCH 'deploy'",
            [],
            |r| r.get::<_, f64>(0),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("keeps no row sizes"), "{err}");
}
