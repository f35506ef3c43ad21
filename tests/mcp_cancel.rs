//! `notifications/cancelled` over a real socket: a cancelled request is
//! answered -32800 (its POST needs an answer; its client ignores it), the
//! call stops, and a write the store has not made is never made.

use loom_core::Role;
use loom_tests::{McpClient, TestServer, generous, hold_write_lock, servers};
use serde_json::{Value, json};

fn admin(t: &TestServer) -> String {
    t.token("default", "ana", Role::Admin, &[])
}

fn set(id: i64, key: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "loom_memory_set", "arguments": {"memory_key": key, "content": "x"}},
    })
}

fn cancel(id: i64) -> Value {
    json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user pressed stop"},
    })
}

async fn memory_exists(c: &McpClient<'_>, key: &str) -> bool {
    let r = c.call("loom_memory_get", json!({"memory_key": key})).await;
    match r["structuredContent"]["code"].as_str() {
        Some("RESOURCE_NOT_FOUND") => false,
        None if r["isError"] == false => true,
        _ => panic!("memory.get {key}: {r}"),
    }
}

#[tokio::test]
async fn a_write_cancelled_while_it_waits_for_the_store_is_not_made() {
    for t in servers(generous).await {
        if t.name() != "sqlite" {
            // PostgreSQL runs a write sent before the cancellation once its
            // lock is free, as it does one whose latency budget ran out.
            t.server.shutdown().await;
            continue;
        }
        let token = admin(&t);
        // No session: a cancellation that comes before its request is
        // dropped, so the one that stops the set found it in flight.
        let c = McpClient::new(&t, Some(&token), "");
        assert!(!memory_exists(&c, "held").await);

        // Another program holds the file's write lock: the set waits.
        let mut holder = hold_write_lock(&t, false).await;

        let waiting = {
            let waiting = c.raw(set(41, "held"));
            tokio::pin!(waiting);
            loop {
                tokio::select! {
                    answer = &mut waiting => break answer,
                    sent = c.raw(cancel(41)) => assert_eq!(sent.status, 202, "{}", sent.text),
                }
            }
        };
        // Answered while the lock is still held: the call stopped (else it
        // would wait out its 5 s budget and answer BACKEND_TIMEOUT).
        assert_eq!(waiting.status, 200, "{}", waiting.text);
        assert_eq!(waiting.body["id"], 41, "{}", waiting.text);
        assert_eq!(waiting.body["error"]["code"], -32800, "{}", waiting.text);
        assert!(waiting.body.get("result").is_none(), "{}", waiting.text);

        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .expect("release");
        drop(holder);
        // A later write commits in the writer's next group, after the
        // cancelled one was dropped from its queue.
        let after = c.raw(set(42, "after")).await;
        assert_eq!(after.body["result"]["isError"], false, "{}", after.text);
        assert!(
            !memory_exists(&c, "held").await,
            "the cancelled set was made"
        );

        t.flush_ledger().await;
        assert_eq!(
            t.count(
                "SELECT COUNT(*) FROM agent_events WHERE op = 'memory.set' AND outcome = 'CANCELLED'"
            )
            .await,
            1
        );
        // Its audit row is written once the store takes it, by shutdown at
        // the latest: the answer did not wait for it.
        t.server.shutdown().await;
        let (audited,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM audit_log WHERE op = 'memory.set' AND outcome = 'CANCELLED'",
        )
        .fetch_one(t.db.store.reader())
        .await
        .expect("count");
        assert_eq!(audited, 1);
    }
}

#[tokio::test]
async fn a_cancellation_that_arrives_first_stops_its_request_in_a_batch_too() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;

        // Two POSTs may arrive in either order: within a session the
        // cancellation waits for its request.
        assert_eq!(c.raw(cancel(7)).await.status, 202);
        let lone = c.raw(set(7, "early")).await;
        assert_eq!(
            (lone.status, &lone.body["id"], &lone.body["error"]["code"]),
            (200, &json!(7), &json!(-32800)),
            "{}: {}",
            t.name(),
            lone.text
        );

        assert_eq!(c.raw(cancel(8)).await.status, 202);
        let batch = c
            .raw(json!([set(8, "batched"), {"jsonrpc": "2.0", "id": 9, "method": "ping"}]))
            .await;
        // No answer for the cancelled request; the others answered.
        assert_eq!(
            batch.body,
            json!([{"jsonrpc": "2.0", "id": 9, "result": {}}]),
            "{}",
            batch.text
        );

        // The id was cancelled once, not for good; the writes never ran.
        assert!(!memory_exists(&c, "early").await, "{}", t.name());
        assert!(!memory_exists(&c, "batched").await, "{}", t.name());
        let again = c.raw(set(7, "early")).await;
        assert_eq!(again.body["result"]["isError"], false, "{}", again.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_cancellation_reaches_only_its_own_session() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut mine = McpClient::new(&t, Some(&token), "");
        mine.initialize("Cursor", "2025-11-25").await;
        let mut theirs = McpClient::new(&t, Some(&token), "");
        theirs.initialize("Cursor", "2025-11-25").await;
        let stateless = McpClient::new(&t, Some(&token), "");

        // Another session's and a session-less cancellation of id 5 (the
        // latter for no request in flight) leave this session's id 5 alone.
        assert_eq!(theirs.raw(cancel(5)).await.status, 202);
        assert_eq!(stateless.raw(cancel(5)).await.status, 202);
        let r = mine.raw(set(5, "mine")).await;
        assert_eq!(
            r.body["result"]["isError"],
            false,
            "{}: {}",
            t.name(),
            r.text
        );
        // Nor is a stateless client's id 5 cancelled by what came before.
        let r = stateless.raw(set(5, "stateless")).await;
        assert_eq!(
            r.body["result"]["isError"],
            false,
            "{}: {}",
            t.name(),
            r.text
        );
        // A notification needs no bearer, but one sent without it does not
        // act in a session a principal opened, even with its id.
        let mut unsigned = McpClient::new(&t, None, "");
        unsigned.session = mine.session.clone();
        assert_eq!(unsigned.raw(cancel(6)).await.status, 202);
        let r = mine.raw(set(6, "mine-too")).await;
        assert_eq!(
            r.body["result"]["isError"],
            false,
            "{}: {}",
            t.name(),
            r.text
        );
        // A cancellation of initialize is never one: it is not in flight.
        let mut late = McpClient::new(&t, Some(&token), "");
        assert_eq!(late.raw(cancel(1)).await.status, 202);
        let init = late.initialize("Cursor", "2025-11-25").await;
        assert_eq!(init.body["result"]["protocolVersion"], "2025-11-25");
        t.server.shutdown().await;
    }
}
