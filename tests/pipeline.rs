//! Pipeline steps that need ops of their own: a handler over its latency
//! budget, an idempotency key on an op that is not idempotent, a second
//! call with a key whose first call is still running, and shutdown with a
//! call still running. The ops live in this test binary only.

use loom_core::Role;
use loom_tests::servers;
use serde_json::json;

mod testing {
    use loom_core::{OpCx, OpResult, loom_op};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use tokio::sync::Semaphore;

    /// Released by the test to let `testing.hold` finish.
    pub static GATE: Semaphore = Semaphore::const_new(0);

    /// Nothing.
    #[derive(Debug, Default, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Empty {
        /// A value echoed back.
        #[serde(default)]
        pub n: u32,
    }

    /// The echo.
    #[derive(Debug, Serialize, JsonSchema)]
    pub struct Echo {
        /// The value.
        pub n: u32,
    }

    /// Never finishes within its budget.
    #[loom_op(role = "viewer", idempotent, budget_ms = 50)]
    async fn stall(_cx: &OpCx, input: Empty) -> OpResult<Echo> {
        std::future::pending::<()>().await;
        Ok(Echo { n: input.n })
    }

    /// Waits until the test opens the gate.
    #[loom_op(role = "viewer", idempotent)]
    async fn hold(_cx: &OpCx, input: Empty) -> OpResult<Echo> {
        GATE.acquire().await.expect("gate").forget();
        Ok(Echo { n: input.n })
    }

    /// Released by the test to let `testing.late` finish.
    pub static LATE: Semaphore = Semaphore::const_new(0);

    /// Waits until the test opens its own gate.
    #[loom_op(role = "viewer", idempotent)]
    async fn late(_cx: &OpCx, input: Empty) -> OpResult<Echo> {
        LATE.acquire().await.expect("gate").forget();
        Ok(Echo { n: input.n })
    }

    /// Signalled by `testing.linger` when it has started.
    pub static LINGERING: Semaphore = Semaphore::const_new(0);
    /// Released by the test to let `testing.linger` finish.
    pub static LINGER: Semaphore = Semaphore::const_new(0);

    /// Says it started, waits for the test, then writes a `settings` row
    /// named `linger-<n>` in a transaction of its own.
    #[loom_op(role = "writer")]
    async fn linger(cx: &OpCx, input: Empty) -> OpResult<Echo> {
        LINGERING.add_permits(1);
        LINGER.acquire().await.expect("gate").forget();
        let store = cx.service::<loom_ops::store::Store>()?;
        let mut tx = store.begin_write().await?;
        sqlx::query("INSERT INTO settings (name, value, created_ms) VALUES ($1, 'x', 0)")
            .bind(format!("linger-{}", input.n))
            .execute(tx.conn())
            .await
            .map_err(loom_ops::store::db_error)?;
        tx.commit_unaudited().await?;
        Ok(Echo { n: input.n })
    }

    /// Not idempotent.
    #[loom_op(role = "writer")]
    async fn bump(_cx: &OpCx, input: Empty) -> OpResult<Echo> {
        Ok(Echo { n: input.n + 1 })
    }
}

#[tokio::test]
async fn a_handler_over_its_budget_is_504_backend_timeout() {
    for t in servers(|_| {}).await {
        let token = t.token("default", "ana", Role::Viewer, &[]);
        let a = t.post("testing.stall", Some(&token), json!({})).await;
        assert_eq!(
            (a.status, a.code()),
            (504, "BACKEND_TIMEOUT"),
            "{}: {}",
            t.name(),
            a.text
        );
        assert!(a.header("retry-after").is_some(), "{}", t.name());
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_idempotency_key_on_an_op_that_is_not_idempotent_is_400() {
    for t in servers(|_| {}).await {
        let token = t.token("default", "ana", Role::Writer, &[]);
        let a = t
            .send(
                t.request("testing.bump", Some(&token))
                    .header("idempotency-key", "k")
                    .json(&json!({"n": 1})),
            )
            .await;
        assert_eq!(
            (a.status, a.code()),
            (400, "BAD_REQUEST"),
            "{}: {}",
            t.name(),
            a.text
        );
        let a = t.post("testing.bump", Some(&token), json!({"n": 1})).await;
        assert_eq!(
            (a.status, a.body["n"].as_u64()),
            (200, Some(2)),
            "{}: {}",
            t.name(),
            a.text
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_duplicate_while_the_first_call_runs_is_409_then_the_answer_replays() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Viewer, &[]);
        let first = {
            let request = t
                .request("testing.hold", Some(&token))
                .header("idempotency-key", "k-hold")
                .json(&json!({"n": 7}));
            tokio::spawn(async move { request.send().await.unwrap() })
        };
        // wait (bounded) until the first call has claimed its key
        let mut claimed = false;
        for _ in 0..500 {
            if t.count("SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = 'k-hold' AND state = 'in_flight'").await == 1 {
                claimed = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(claimed, "{n}: the first call never claimed its key");
        let a = t
            .send(
                t.request("testing.hold", Some(&token))
                    .header("idempotency-key", "k-hold")
                    .json(&json!({"n": 7})),
            )
            .await;
        assert_eq!(
            (a.status, a.code()),
            (409, "IDEMPOTENCY_KEY_IN_FLIGHT"),
            "{n}: {}",
            a.text
        );
        assert_eq!(a.header("retry-after"), Some("1"), "{n}");

        testing::GATE.add_permits(1);
        let first = first.await.unwrap();
        assert_eq!(first.status(), 200, "{n}");
        let first_body = first.text().await.unwrap();
        let a = t
            .send(
                t.request("testing.hold", Some(&token))
                    .header("idempotency-key", "k-hold")
                    .json(&json!({"n": 7})),
            )
            .await;
        assert_eq!((a.status, &a.text), (200, &first_body), "{n}");
        assert_eq!(a.header("idempotent-replayed"), Some("true"), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_call_whose_client_went_away_still_finishes_and_stores_its_answer() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Viewer, &[]);
        let first = {
            let request = t
                .request("testing.late", Some(&token))
                .header("idempotency-key", "k-gone")
                .json(&json!({"n": 9}));
            tokio::spawn(async move { request.send().await })
        };
        let state = "SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = 'k-gone' AND state = ";
        let mut claimed = false;
        for _ in 0..500 {
            if t.count(&format!("{state}'in_flight'")).await == 1 {
                claimed = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(claimed, "{n}: the first call never claimed its key");
        // the client gives up: its connection closes while the call runs
        first.abort();
        let _ = first.await;
        testing::LATE.add_permits(1);
        // the call runs on and stores its answer (bounded wait)
        let mut done = false;
        for _ in 0..500 {
            if t.count(&format!("{state}'done'")).await == 1 {
                done = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(done, "{n}: the abandoned call left its key in flight");
        let a = t
            .send(
                t.request("testing.late", Some(&token))
                    .header("idempotency-key", "k-gone")
                    .json(&json!({"n": 9})),
            )
            .await;
        assert_eq!(
            (a.status, a.body["n"].as_u64()),
            (200, Some(9)),
            "{n}: {}",
            a.text
        );
        assert_eq!(a.header("idempotent-replayed"), Some("true"), "{n}");
        t.server.shutdown().await;
    }
}

/// Shutdown waits for a call whose client went away (it runs on after its
/// connection closed) before it closes the ledger and the store: the call's
/// write and its ledger row both land.
#[tokio::test]
async fn shutdown_lets_a_call_whose_client_went_away_finish_first() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &[]);
        let request = t
            .request("testing.linger", Some(&token))
            .json(&json!({"n": 7}));
        let client = tokio::spawn(async move { request.send().await });
        testing::LINGERING
            .acquire()
            .await
            .expect("started")
            .forget();
        // the client gives up, then the server is told to stop
        client.abort();
        let _ = client.await;
        let app = t.server.app.clone();
        let stopping = tokio::spawn(t.server.shutdown());
        // shutdown has stopped taking calls and is waiting for this one
        while !app.calls.is_closed() {
            tokio::task::yield_now().await;
        }
        assert!(!stopping.is_finished(), "{n}: shutdown did not wait");
        testing::LINGER.add_permits(1);
        stopping.await.expect("shut down");

        let store = loom_ops::store::Store::open(t.db.options.clone())
            .await
            .expect("reopen");
        let (written, ledger): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM settings WHERE name = 'linger-7'), \
                    (SELECT COUNT(*) FROM agent_events WHERE op = 'testing.linger')",
        )
        .fetch_one(store.reader())
        .await
        .unwrap();
        assert_eq!(written, 1, "{n}: the call's write");
        assert_eq!(ledger, 1, "{n}: the call's ledger row");
        store.close().await;
    }
}
