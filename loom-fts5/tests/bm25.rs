//! loom_bm25 against FTS5's own bm25(), on real SQLite connections.

use proptest::prelude::*;
use rusqlite::Connection;

const WORDS: &[&str] = &[
    "deploy", "window", "postgres", "cache", "friday", "rollback", "token", "agent",
];

/// An in-memory table shaped like Loom's memories_fts, holding `docs`.
fn table(docs: &[(String, String, String)]) -> Connection {
    loom_fts5::install().expect("install");
    let db = Connection::open_in_memory().expect("open");
    db.execute_batch(
        "CREATE VIRTUAL TABLE t USING fts5 (memory_key, content, labels, tokenize = 'porter unicode61')",
    )
    .expect("create");
    for (key, content, labels) in docs {
        db.execute(
            "INSERT INTO t (memory_key, content, labels) VALUES (?1, ?2, ?3)",
            [key, content, labels],
        )
        .expect("insert");
    }
    db
}

/// The rows holding each term, counted as Loom counts them.
fn counts(db: &Connection, terms: &[&str]) -> Vec<i64> {
    terms
        .iter()
        .map(|t| {
            db.query_row(
                "SELECT count(*) FROM t WHERE t MATCH ?1",
                [format!("\"{t}\"")],
                |r| r.get(0),
            )
            .expect("count")
        })
        .collect()
}

/// (rowid, bm25, loom_bm25) for every row `expr` matches, loom_bm25 given
/// the row's size from the docsize table (and checked to score the same
/// given it by FTS5 itself or by loom_fts_tokens).
fn both_scores(db: &Connection, expr: &str, dfs: &str) -> Vec<(i64, f64, f64)> {
    let rows = scores(
        db,
        expr,
        dfs,
        "(SELECT sz FROM t_docsize WHERE id = t.rowid)",
    );
    // With no size (NULL), FTS5 reads it itself: the same score.
    let read_by_fts5 = scores(db, expr, dfs, "NULL");
    assert_eq!(rows, read_by_fts5);
    // With the row's tokens counted by loom_fts_tokens, as a memory keeps
    // them: the same score.
    let counted = scores(
        db,
        expr,
        dfs,
        "loom_fts_tokens(t.memory_key, t.content, t.labels)",
    );
    assert_eq!(rows, counted);
    rows
}

fn scores(db: &Connection, expr: &str, dfs: &str, size: &str) -> Vec<(i64, f64, f64)> {
    let mut stmt = db
        .prepare(&format!(
            "SELECT rowid, bm25(t, 2.0, 1.0, 0.5), loom_bm25(t, ?2, {size}, 2.0, 1.0, 0.5) \
             FROM t WHERE t MATCH ?1 ORDER BY rowid"
        ))
        .expect("prepare");
    stmt.query_map([expr, dfs], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn doc() -> impl Strategy<Value = (String, String, String)> {
    let words = |n| prop::collection::vec(prop::sample::select(WORDS), n);
    (words(1..3), words(0..20), words(0..3))
        .prop_map(|(k, c, l)| (k.join("-"), c.join(" "), l.join(" ")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With the counts FTS5 would make itself, the scores are bm25()'s,
    /// under OR and AND, for rows that hold a term in any column.
    #[test]
    fn equals_bm25_given_the_true_counts(
        docs in prop::collection::vec(doc(), 1..40),
        terms in prop::collection::hash_set(prop::sample::select(WORDS), 1..4),
        and in any::<bool>(),
    ) {
        let terms: Vec<&str> = terms.into_iter().collect();
        let db = table(&docs);
        let dfs = loom_fts5::frequencies(&counts(&db, &terms));
        let expr = terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(if and { " AND " } else { " OR " });
        for (rowid, fts5, ours) in both_scores(&db, &expr, &dfs) {
            prop_assert_eq!(fts5.to_bits(), ours.to_bits(), "row {}: bm25 {} loom_bm25 {}", rowid, fts5, ours);
        }
    }
}

#[test]
fn a_rarer_term_weighs_more_and_stale_counts_only_move_the_weights() {
    let docs: Vec<(String, String, String)> = (0..20)
        .map(|i| {
            let content = if i == 0 {
                "deploy postgres"
            } else {
                "deploy window"
            };
            (format!("k{i}"), content.to_owned(), String::new())
        })
        .collect();
    let db = table(&docs);
    let scores = both_scores(&db, "\"deploy\" OR \"postgres\"", "20 1");
    assert_eq!(scores.len(), 20);
    // Row 1 holds the rare word too: it ranks first (most negative).
    let best = scores
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .expect("rows");
    assert_eq!(best.0, 1);
    // A count larger than the table (rows deleted since it was taken) is
    // read as the whole table: a finite score, never NaN.
    for (_, _, ours) in both_scores(&db, "\"deploy\" OR \"postgres\"", "500 1") {
        assert!(ours.is_finite() && ours <= 0.0, "{ours}");
    }
}

/// A row of hundreds of tokens has sizes of two bytes in the docsize blob.
#[test]
fn long_rows_score_as_bm25_does() {
    let long = |n: usize, word: &str| vec![word; n].join(" ");
    let docs = vec![
        ("k1".to_owned(), long(300, "deploy"), long(140, "window")),
        ("k2".to_owned(), long(20_000, "window"), "deploy".to_owned()),
        ("k3".to_owned(), "deploy".to_owned(), String::new()),
    ];
    let db = table(&docs);
    let dfs = loom_fts5::frequencies(&counts(&db, &["deploy", "window"]));
    let scores = both_scores(&db, "\"deploy\" OR \"window\"", &dfs);
    assert_eq!(scores.len(), 3);
    for (rowid, fts5, ours) in scores {
        assert_eq!(fts5.to_bits(), ours.to_bits(), "row {rowid}: {fts5} {ours}");
    }
}

#[test]
fn bad_calls_fail_with_an_error_not_a_crash() {
    let db = table(&[("k".into(), "deploy window".into(), String::new())]);
    let run = |sql: &str| {
        db.query_row(sql, [], |r| r.get::<_, f64>(0))
            .map_err(|e| e.to_string())
    };
    let err = run("SELECT loom_bm25(t) FROM t WHERE t MATCH 'deploy'").unwrap_err();
    assert!(err.contains("frequencies are missing"), "{err}");
    let err = run("SELECT loom_bm25(t, '1') FROM t WHERE t MATCH 'deploy'").unwrap_err();
    assert!(err.contains("row size is missing"), "{err}");
    let err = run("SELECT loom_bm25(t, '1 2', NULL) FROM t WHERE t MATCH 'deploy'").unwrap_err();
    assert!(err.contains("one document frequency per phrase"), "{err}");
    let err = run("SELECT loom_bm25(t, 'many', NULL) FROM t WHERE t MATCH 'deploy'").unwrap_err();
    assert!(err.contains("decimal integers"), "{err}");
    let err = run("SELECT loom_bm25(t, NULL, NULL) FROM t WHERE t MATCH 'deploy'").unwrap_err();
    assert!(err.contains("decimal integers"), "{err}");
    // A size that is no docsize blob (a truncated varint) is read from
    // FTS5 instead: the row still scores.
    let truncated = run("SELECT loom_bm25(t, '1', x'ff') FROM t WHERE t MATCH 'deploy'");
    let from_fts5 = run("SELECT loom_bm25(t, '1', NULL) FROM t WHERE t MATCH 'deploy'");
    assert_eq!(truncated, from_fts5);
    // Outside a full-text query it is no function at all.
    let err = run("SELECT loom_bm25('1')").unwrap_err();
    assert!(err.contains("loom_bm25"), "{err}");
    assert!(run("SELECT loom_bm25(t, '1', NULL) FROM t WHERE t MATCH 'deploy'").is_ok());
}

#[test]
fn frequencies_are_written_as_the_function_reads_them() {
    assert_eq!(loom_fts5::frequencies(&[3, 0, 120]), "3 0 120");
    assert_eq!(loom_fts5::frequencies(&[]), "");
}

/// A term the tokenizer reads as no token at all (U+0345 is alphanumeric
/// to Rust, a separator to unicode61) is still a phrase of the query, so
/// the frequencies stay in step with the phrases.
#[test]
fn a_term_with_no_tokens_keeps_its_place() {
    let db = table(&[("k".into(), "deploy window".into(), String::new())]);
    let terms = ["\u{345}", "deploy"];
    let dfs = loom_fts5::frequencies(&counts(&db, &terms));
    assert_eq!(dfs, "0 1");
    let scores = both_scores(&db, "\"\u{345}\" OR \"deploy\"", &dfs);
    assert_eq!(scores.len(), 1);
    assert_eq!(scores[0].1.to_bits(), scores[0].2.to_bits());
}
