//! run.*, working_memory.* and namespace.*, on every backend.

mod common;

use common::code;
use serde_json::json;

#[tokio::test]
async fn a_run_begins_and_completes_once() {
    for h in common::all().await {
        let n = h.name();
        let run = h
            .call("run.begin", json!({"goal": "fix the flaky test"}))
            .await
            .unwrap();
        let id = run["run_id"].as_str().unwrap().to_owned();
        assert_eq!(
            (run["status"].clone(), run["changed"].clone()),
            (json!("open"), json!(true)),
            "{n}"
        );
        // whose run it is: the agent, and the token subject that began it
        assert_eq!(run["subject"], "user:1", "{n}");
        // null names nothing: the default status, no summary
        let other = h.call("run.begin", json!({"goal": "tidy"})).await.unwrap();
        let nulls = h
            .call(
                "run.complete",
                json!({"run_id": other["run_id"], "status": null, "summary": null}),
            )
            .await
            .unwrap();
        assert_eq!(nulls["status"], "succeeded", "{n}");
        let done = h
            .call(
                "run.complete",
                json!({"run_id": id, "status": "failed", "summary": "could not reproduce"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (done["status"].clone(), done["changed"].clone()),
            (json!("failed"), json!(true)),
            "{n}"
        );
        let (status, summary, completed): (String, String, Option<i64>) =
            sqlx::query_as("SELECT status, summary, completed_ms FROM runs WHERE run_id = $1")
                .bind(&id)
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(
            (status.as_str(), summary.as_str(), completed.is_some()),
            ("failed", "could not reproduce", true),
            "{n}"
        );
        // completing again changes nothing
        let again = h
            .call("run.complete", json!({"run_id": id, "status": "succeeded"}))
            .await
            .unwrap();
        assert_eq!(
            (again["status"].clone(), again["changed"].clone()),
            (json!("failed"), json!(false)),
            "{n}"
        );
        assert_eq!(
            code(h.call("run.complete", json!({"run_id": "nope"})).await),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        // a chosen id is kept; reusing it for another goal is refused
        let mine = h
            .call("run.begin", json!({"run_id": "r-7", "goal": "a"}))
            .await
            .unwrap();
        assert_eq!(mine["run_id"], "r-7", "{n}");
        assert_eq!(
            h.call("run.begin", json!({"run_id": "r-7", "goal": "a"}))
                .await
                .unwrap()["changed"],
            false,
            "{n}"
        );
        assert_eq!(
            code(
                h.call("run.begin", json!({"run_id": "r-7", "goal": "b"}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        // the first, the one completed with nulls, and r-7
        assert_eq!(h.rows("runs").await, 3, "{n}");
    }
}

#[tokio::test]
async fn working_memory_is_kept_per_run_and_name() {
    for h in common::all().await {
        let n = h.name();
        // Notes are kept for a run in progress, and for no other.
        assert_eq!(
            code(
                h.call(
                    "working_memory.set",
                    json!({"run_id": "r1", "content": "early"})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        for run_id in ["r1", "r2", "r3", "done"] {
            h.call("run.begin", json!({"run_id": run_id}))
                .await
                .unwrap();
        }
        h.call(
            "run.complete",
            json!({"run_id": "done", "status": "succeeded"}),
        )
        .await
        .unwrap();
        assert_eq!(
            code(
                h.call(
                    "working_memory.append",
                    json!({"run_id": "done", "content": "late"})
                )
                .await
            ),
            "RUN_ENDED",
            "{n}"
        );
        assert_eq!(h.rows("working_memory").await, 0, "{n}: nothing written");
        let set = h
            .call(
                "working_memory.set",
                json!({"run_id": "r1", "content": "step 1"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (set["name"].clone(), set["content"].clone()),
            (json!("main"), json!("step 1")),
            "{n}"
        );
        let app = h
            .call(
                "working_memory.append",
                json!({"run_id": "r1", "content": "step 2"}),
            )
            .await
            .unwrap();
        assert_eq!(app["content"], "step 1\nstep 2", "{n}");
        h.call(
            "working_memory.append",
            json!({"run_id": "r2", "content": "other run"}),
        )
        .await
        .unwrap();
        h.call(
            "working_memory.set",
            json!({"run_id": "r1", "name": "plan", "content": "A then B"}),
        )
        .await
        .unwrap();
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT run_id, name, content FROM working_memory ORDER BY run_id, name",
        )
        .fetch_all(h.store().reader())
        .await
        .unwrap();
        let expected = [
            ("r1", "main", "step 1\nstep 2"),
            ("r1", "plan", "A then B"),
            ("r2", "main", "other run"),
        ];
        let rows: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        assert_eq!(rows, expected, "{n}");
        let replaced = h
            .call(
                "working_memory.set",
                json!({"run_id": "r1", "content": "fresh"}),
            )
            .await
            .unwrap();
        assert_eq!(replaced["content"], "fresh", "{n}");

        // over 64 KiB in all: refused, the note unchanged
        let big = "x".repeat(40 * 1024);
        h.call(
            "working_memory.set",
            json!({"run_id": "r3", "content": big.clone()}),
        )
        .await
        .unwrap();
        assert_eq!(
            code(
                h.call(
                    "working_memory.append",
                    json!({"run_id": "r3", "content": big})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        let (len,): (i64,) = sqlx::query_as(
            "SELECT CAST(LENGTH(content) AS BIGINT) FROM working_memory WHERE run_id = 'r3'",
        )
        .fetch_one(h.store().reader())
        .await
        .unwrap();
        assert_eq!(len, 40 * 1024, "{n}");
        assert_eq!(
            code(
                h.call("working_memory.set", json!({"run_id": "r1", "content": ""}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

/// Working memory is not run-scoped: a call names its run, whatever run the
/// call itself belongs to.
#[tokio::test]
async fn working_memory_needs_its_run_named() {
    let h = common::sqlite().await;
    h.call("run.begin", json!({"run_id": "run-1"}))
        .await
        .unwrap();
    let none = h.call("working_memory.set", json!({"content": "x"})).await;
    let err = none.unwrap_err();
    assert_eq!(err.code().as_str(), "INVALID_ARGUMENTS");
    assert_eq!(
        err.detail()["errors"],
        json!(["run_id: Field required [missing]"])
    );
    assert_eq!(h.rows("working_memory").await, 0);
    let named = h
        .call(
            "working_memory.set",
            json!({"content": "x", "run_id": "run-1"}),
        )
        .await
        .unwrap();
    assert_eq!(named["run_id"], "run-1");
}

#[tokio::test]
async fn namespaces_describe_themselves_and_list() {
    for h in common::all().await {
        let n = h.name();
        sqlx::query("INSERT INTO namespaces (org, namespace, kind, restricted, description, created_ms) VALUES ('acme', 'secret', 'collection', TRUE, 'locked away', 1)")
            .execute(h.store().writer())
            .await
            .unwrap();
        h.call("memory.set", json!({"memory_key": "k", "content": "v"}))
            .await
            .unwrap();
        let main = h.call("namespace.get", json!({})).await.unwrap();
        assert_eq!(
            (
                main["namespace"].clone(),
                main["memories"].clone(),
                main["restricted"].clone()
            ),
            (json!("main"), json!(1), json!(false)),
            "{n}"
        );
        let secret = h
            .call("namespace.get", json!({"namespace": "secret"}))
            .await
            .unwrap();
        assert_eq!(
            (secret["kind"].clone(), secret["restricted"].clone()),
            (json!("collection"), json!(true)),
            "{n}"
        );
        assert_eq!(
            code(
                h.call("namespace.get", json!({"namespace": "nowhere"}))
                    .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );

        let names = |v: &serde_json::Value| -> Vec<String> {
            v["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["namespace"].as_str().unwrap().to_owned())
                .collect()
        };
        let all = h.call("namespace.list", json!({"limit": 2})).await.unwrap();
        assert_eq!(names(&all), ["main", "secret"], "{n}");
        let rest = h
            .call("namespace.list", json!({"cursor": all["next_cursor"]}))
            .await
            .unwrap();
        assert_eq!(names(&rest), ["team"], "{n}");
        assert_eq!(
            names(
                &h.call("namespace.list", json!({"kind": "collection"}))
                    .await
                    .unwrap()
            ),
            ["secret"],
            "{n}"
        );
        assert_eq!(
            code(h.call("namespace.list", json!({"kind": "colection"})).await),
            "INVALID_ARGUMENTS",
            "{n}: a kind no namespace can have"
        );
        // a token naming no namespace works in every one, as `*`; one
        // naming its own, in that one
        assert_eq!(
            names(&h.call("namespace.list_mine", json!({})).await.unwrap()),
            ["main", "secret", "team"],
            "{n}"
        );
        assert_eq!(
            names(
                &h.call_with_token(
                    common::AGENT,
                    None,
                    &["main"],
                    "namespace.list_mine",
                    json!({})
                )
                .await
                .unwrap()
            ),
            ["main"],
            "{n}"
        );
        assert_eq!(
            code(h.call("namespace.list", json!({"limit": -1})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn run_get_shows_the_notes_and_changes_of_a_run() {
    for h in common::all().await {
        let n = h.name();
        let run = h.call("run.begin", json!({"goal": "tidy"})).await.unwrap();
        let id = run["run_id"].as_str().unwrap().to_owned();
        h.call_in(
            common::AGENT,
            Some(&id),
            "memory.set",
            json!({"memory_key": "a", "content": "x"}),
        )
        .await
        .unwrap();
        h.call_in(
            common::AGENT,
            Some(&id),
            "memory.pin",
            json!({"memory_key": "a"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "b", "content": "other run"}),
        )
        .await
        .unwrap();
        h.call(
            "working_memory.set",
            json!({"run_id": id, "content": "half done"}),
        )
        .await
        .unwrap();
        let got = h.call("run.get", json!({"run_id": id})).await.unwrap();
        assert_eq!(
            (got["run"]["goal"].clone(), got["run"]["status"].clone()),
            (json!("tidy"), json!("open")),
            "{n}"
        );
        assert_eq!(got["working_memory"][0]["content"], "half done", "{n}");
        let changes: Vec<(String, String)> = got["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["memory_key"].as_str().unwrap().to_owned(),
                    c["change"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [
                ("a".to_owned(), "create".to_owned()),
                ("a".to_owned(), "pin".to_owned())
            ],
            "{n}"
        );
        assert_eq!(
            code(h.call("run.get", json!({"run_id": "missing"})).await),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
    }
}

/// A run keeps at most `MAX_NOTES` notes: one more name is refused with
/// nothing written, and its notes can still be written over.
#[tokio::test]
async fn a_run_keeps_a_bounded_number_of_notes() {
    use loom_ops::working_memory::MAX_NOTES;
    for h in common::all().await {
        let n = h.name();
        h.call("run.begin", json!({"run_id": "many"}))
            .await
            .unwrap();
        for i in 0..MAX_NOTES {
            h.call(
                "working_memory.set",
                json!({"run_id": "many", "name": format!("n{i}"), "content": "x"}),
            )
            .await
            .unwrap();
        }
        for op in ["working_memory.set", "working_memory.append"] {
            let refused = h
                .call(
                    op,
                    json!({"run_id": "many", "name": "one-more", "content": "x"}),
                )
                .await;
            assert_eq!(code(refused), "INVALID_ARGUMENTS", "{n} {op}");
        }
        assert_eq!(h.rows("working_memory").await, MAX_NOTES, "{n}");
        let kept = h
            .call(
                "working_memory.append",
                json!({"run_id": "many", "name": "n0", "content": "y"}),
            )
            .await
            .unwrap();
        assert_eq!(kept["content"], "x\ny", "{n}");
    }
}

/// PostgreSQL: `run.complete` waits for a note's write under way in the
/// run, so no note changes in a run already ended. The test holds the
/// note's row, so the append stops after its check of the run, and sees
/// the completion wait for the append rather than end the run under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_does_not_end_under_a_note_being_written() {
    use sqlx::Connection;
    let Some(t) = loom_ops::store::testing::postgres().await else {
        return;
    };
    let h = common::Harness::seeded(t).await;
    h.call("run.begin", json!({"run_id": "held"}))
        .await
        .unwrap();
    h.call(
        "working_memory.set",
        json!({"run_id": "held", "content": "first"}),
    )
    .await
    .unwrap();
    let schema = h.t.options.pg_schema.clone().expect("a test schema");
    let mut holder = sqlx::PgConnection::connect(&h.t.options.url).await.unwrap();
    let mut watcher = sqlx::PgConnection::connect(&h.t.options.url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET search_path TO {schema}; BEGIN; \
         SELECT content FROM working_memory WHERE run_id = 'held' FOR UPDATE"
    )))
    .execute(&mut holder)
    .await
    .unwrap();
    // Statements of this test's schema waiting for another transaction.
    async fn waiting(watcher: &mut sqlx::PgConnection, statement: &str) -> bool {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0 \
             AND query LIKE $1",
        )
        .bind(format!("{statement}%"))
        .fetch_one(watcher)
        .await
        .unwrap();
        waiting > 0
    }
    let append = h.call(
        "working_memory.append",
        json!({"run_id": "held", "content": "after"}),
    );
    let complete_and_release = async {
        // Polled (bounded) until the append waits for the held note.
        let mut blocked = false;
        for _ in 0..1000 {
            if waiting(&mut watcher, "INSERT INTO working_memory").await {
                blocked = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(blocked, "the append never reached the held note");
        let complete = h.call("run.complete", json!({"run_id": "held"}));
        tokio::pin!(complete);
        // The completion must wait for the append: it either ends first
        // (the defect) or is seen waiting.
        let mut seen_waiting = false;
        for _ in 0..1000 {
            tokio::select! {
                early = &mut complete => panic!("the run ended under a note being written: {early:?}"),
                () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
            }
            if waiting(&mut watcher, "UPDATE runs SET status").await {
                seen_waiting = true;
                break;
            }
        }
        assert!(seen_waiting, "the completion neither ended nor waited");
        sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
        complete.await
    };
    let (appended, completed) = tokio::join!(append, complete_and_release);
    assert_eq!(appended.unwrap()["content"], "first\nafter");
    assert_eq!(completed.unwrap()["status"], "succeeded");
    let got = h.call("run.get", json!({"run_id": "held"})).await.unwrap();
    assert_eq!(got["working_memory"][0]["content"], "first\nafter");
}

/// A write naming a run commits only while the run is open: a
/// `run.complete` that lands after the server's check of the run and
/// before the write's commit leaves nothing stamped into the ended run.
#[tokio::test]
async fn a_write_of_a_run_ended_meanwhile_is_refused_whole() {
    for h in common::all().await {
        let n = h.name();
        for run_id in ["open", "ended"] {
            h.call("run.begin", json!({"run_id": run_id}))
                .await
                .unwrap();
        }
        h.call("memory.set", json!({"memory_key": "k", "content": "v1"}))
            .await
            .unwrap();
        h.call("run.complete", json!({"run_id": "ended"}))
            .await
            .unwrap();
        let audited = h
            .count("SELECT COUNT(*) FROM audit_log WHERE outcome = 'ok'")
            .await;
        let writes = [
            (
                "memory.set",
                json!({"memory_key": "new", "content": "late"}),
            ),
            ("memory.set", json!({"memory_key": "k", "content": "late"})),
            (
                "memory.update",
                json!({"memory_key": "k", "content": "later"}),
            ),
            ("memory.delete", json!({"memory_key": "k"})),
        ];
        for (op, args) in &writes {
            assert_eq!(
                code(h.call_named_run("ended", op, args.clone()).await),
                "RUN_ENDED",
                "{n}: {op} {args}"
            );
        }
        assert_eq!(
            h.count("SELECT COUNT(*) FROM memories WHERE (memory_key = 'new' OR version > 1 OR deleted <> 0)")
                .await,
            0,
            "{n}: nothing written"
        );
        assert_eq!(
            h.count("SELECT COUNT(*) FROM memory_versions WHERE run_id = 'ended'")
                .await,
            0,
            "{n}: no version stamped into the ended run"
        );
        assert_eq!(
            h.count("SELECT COUNT(*) FROM audit_log WHERE outcome = 'ok'")
                .await,
            audited,
            "{n}: no row audited ok"
        );
        // The same writes in a run in progress are kept, stamped with it.
        for (op, args) in &writes {
            h.call_named_run("open", op, args.clone())
                .await
                .unwrap_or_else(|e| panic!("{n}: {op}: {e}"));
        }
        assert_eq!(
            h.count("SELECT COUNT(*) FROM memory_versions WHERE run_id = 'open'")
                .await,
            4,
            "{n}: each version of the run's writes names it"
        );
    }
}
