//! How PostgreSQL stores memories: the settings the migrations give their
//! table and full-text index (why each, in its migration), and the
//! warning a server without autovacuum gets at start. The PostgreSQL tests
//! run when `LOOM_TEST_DATABASE_URL` is set.

use loom_ops::store::testing;

/// `relation`'s storage parameters on a fresh PostgreSQL store,
/// comma-separated; `None` without a server.
async fn storage_parameters(relation: &str) -> Option<String> {
    let t = testing::postgres().await?;
    let (options,): (String,) = sqlx::query_as(
        "SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class \
         WHERE oid = to_regclass($1)",
    )
    .bind(relation)
    .fetch_one(t.store.reader())
    .await
    .unwrap();
    Some(options)
}

/// The full-text index moves the entries of new writes out of its pending
/// list, which every search reads whole, at 256 kB (migration 0013), not
/// at the server's default of 4 MB.
#[tokio::test]
async fn the_full_text_index_keeps_a_small_pending_list() {
    if let Some(options) = storage_parameters("memories_fts").await {
        assert_eq!(options, "gin_pending_list_limit=256");
    }
}

/// Pages of memories keep 30% free for the rows' next versions, so the
/// recall counts every get raises are updated in place (migration 0014).
#[tokio::test]
async fn memories_pages_keep_room_for_updates() {
    if let Some(options) = storage_parameters("memories").await {
        assert_eq!(options, "fillfactor=70");
    }
}

/// A server whose autovacuum is off is named at start, and only then.
#[tokio::test]
async fn the_setup_warnings_name_a_server_without_autovacuum() {
    let Some(t) = testing::postgres().await else {
        return;
    };
    // autovacuum runs only with both on
    let (autovacuum, track_counts): (String, String) =
        sqlx::query_as("SELECT current_setting('autovacuum'), current_setting('track_counts')")
            .fetch_one(t.store.reader())
            .await
            .unwrap();
    let off = autovacuum == "off" || track_counts == "off";
    let warnings = t.store.setup_warnings().await;
    let named = warnings.iter().any(|w| w.contains("autovacuum is off"));
    assert_eq!(named, off, "{autovacuum} {track_counts}: {warnings:?}");
}

/// SQLite has nothing to warn about.
#[tokio::test]
async fn a_sqlite_store_has_no_setup_warnings() {
    let t = testing::sqlite().await;
    assert!(t.store.setup_warnings().await.is_empty());
}

/// The call ledger's index by run holds only calls made in a run
/// (migration 0015), and a run's calls are still read through it.
#[tokio::test]
async fn the_ledger_indexes_only_calls_in_a_run() {
    let Some(t) = testing::postgres().await else {
        return;
    };
    let (definition,): (String,) =
        sqlx::query_as("SELECT pg_get_indexdef(to_regclass('agent_events_by_run'))")
            .fetch_one(t.store.reader())
            .await
            .unwrap();
    assert!(
        definition.ends_with("WHERE (run_id IS NOT NULL)"),
        "{definition}"
    );
    // The plans of run.calls' read and of the idle session runs' sweep,
    // with sequential scans ruled out so that only an index the query may
    // use can answer it.
    let mut conn = t.store.reader().acquire().await.unwrap();
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .unwrap();
    for read in [
        "SELECT op FROM agent_events WHERE org = 'o' AND run_id = 'r' ORDER BY at_ms, id LIMIT 500",
        "UPDATE runs SET status = 'closed' WHERE status = 'open' AND session_id IS NOT NULL \
         AND started_ms < 5 AND NOT EXISTS (SELECT 1 FROM agent_events e \
         WHERE e.org = runs.org AND e.run_id = runs.run_id AND e.at_ms >= 5)",
    ] {
        let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN {read}")))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
        assert!(
            plan.iter().any(|line| line.contains("agent_events_by_run")),
            "{read}: {plan:?}"
        );
    }
    sqlx::query("RESET enable_seqscan")
        .execute(&mut *conn)
        .await
        .unwrap();
}
