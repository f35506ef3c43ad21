//! Three `loom serve` replicas on one PostgreSQL database (run when
//! `LOOM_TEST_DATABASE_URL` is set): a write through one is read through
//! the others at once, an idempotency key stored through one replays
//! through another, a revoked token is refused by all within the refresh
//! interval. Rate limits across replicas are in `shared_limits.rs`.

use std::time::Duration;

use loom_core::Role;
use loom_ops::store::testing;
use loom_server::tokens::MintSpec;
use loom_server::{Config, RunningServer};
use serde_json::{Value, json};

pub async fn replicas(
    tweak: impl Fn(&mut Config),
) -> Option<(Vec<RunningServer>, testing::TestStore)> {
    loom_tests::link();
    let db = testing::postgres().await?;
    let mut out = Vec::new();
    for _ in 0..3 {
        let mut config = Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: db.options.url.clone(),
            pg_schema: db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            revocation_refresh: Duration::from_secs(1),
            ..Config::default()
        };
        tweak(&mut config);
        out.push(loom_server::spawn(config).await.expect("a replica starts"));
    }
    let client = reqwest::Client::new();
    for r in &out {
        let mut ready = false;
        for _ in 0..500 {
            let s = client
                .get(format!("{}/readyz", r.url()))
                .send()
                .await
                .expect("readyz");
            if s.status() == 200 {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(ready, "a replica never became ready");
    }
    Some((out, db))
}

pub fn spec(subject: &str) -> MintSpec {
    MintSpec {
        org: "default".into(),
        subject: subject.into(),
        role: Role::Writer,
        namespaces: Vec::new(),
        ttl_secs: 3600,
        platform_admin: false,
        consumer: None,
    }
}

async fn post(
    client: &reqwest::Client,
    r: &RunningServer,
    token: &str,
    op: &str,
    key: Option<&str>,
    args: Value,
) -> (u16, Option<String>, Value) {
    let mut req = client
        .post(format!("{}/v1/{op}", r.url()))
        .bearer_auth(token)
        .json(&args);
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let resp = req.send().await.expect("an answer");
    let status = resp.status().as_u16();
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, replayed, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_writes_keys_and_revocations() {
    let Some((rs, _db)) = replicas(|_| {}).await else {
        eprintln!("LOOM_TEST_DATABASE_URL is not set: replicas need PostgreSQL");
        return;
    };
    let client = reqwest::Client::new();
    let (token, claims) = rs[0].app.keys.mint(spec("ana")).expect("mint");

    // a write through each replica is read through every other at once
    for (i, w) in rs.iter().enumerate() {
        let content = format!("written through replica {i}");
        let (s, _, b) = post(
            &client,
            w,
            &token,
            "memory.set",
            None,
            json!({"memory_key": "shared", "content": content}),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        for r in &rs {
            let (s, _, got) = post(
                &client,
                r,
                &token,
                "memory.get",
                None,
                json!({"memory_key": "shared"}),
            )
            .await;
            assert_eq!(
                (s, got["content"].as_str(), got["version"].as_i64()),
                (200, Some(content.as_str()), b["version"].as_i64())
            );
        }
    }

    // an idempotency key stored through one replica replays through the others
    let args = json!({"memory_key": "once", "content": "exactly once"});
    let (s, replayed, first) = post(
        &client,
        &rs[0],
        &token,
        "memory.set",
        Some("key-1"),
        args.clone(),
    )
    .await;
    assert_eq!((s, replayed), (200, None));
    for r in &rs[1..] {
        let (s, replayed, again) = post(
            &client,
            r,
            &token,
            "memory.set",
            Some("key-1"),
            args.clone(),
        )
        .await;
        assert_eq!(
            (s, replayed.as_deref(), &again),
            (200, Some("true"), &first)
        );
    }
    let (_, _, h) = post(
        &client,
        &rs[2],
        &token,
        "memory.history",
        None,
        json!({"memory_key": "once"}),
    )
    .await;
    assert_eq!(h["versions"].as_array().map(Vec::len), Some(1), "{h}");

    // a revoked token is refused by every replica once each reloads its list
    assert!(
        rs[1]
            .app
            .store
            .revoke_token(&claims.jti)
            .await
            .expect("revoke")
    );
    for (i, r) in rs.iter().enumerate() {
        let mut refused = false;
        // bounded: LOOM_REVOCATION_REFRESH_SECS is 1 here; give it ten
        for _ in 0..100 {
            let (s, _, _) = post(
                &client,
                r,
                &token,
                "memory.get",
                None,
                json!({"memory_key": "shared"}),
            )
            .await;
            if s == 401 {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(refused, "replica {i} still accepts a revoked token");
    }
    for r in rs {
        r.shutdown().await;
    }
}

/// One MCP request to replica `r`: its status, the session it names, and
/// the JSON-RPC answer.
async fn mcp(
    client: &reqwest::Client,
    r: &RunningServer,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut req = client
        .post(format!("{}/mcp", r.url()))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await.expect("an answer");
    let status = resp.status().as_u16();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, id, resp.json().await.unwrap_or(Value::Null))
}

/// An MCP session opened on one replica is served by the others, with
/// the agent its client's name gave; `DELETE /mcp` on another replica ends
/// it everywhere (on the one that opened it within its recheck).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_is_served_by_every_replica_and_ends_on_all() {
    let Some((rs, _db)) = replicas(|_| {}).await else {
        eprintln!("LOOM_TEST_DATABASE_URL is not set: replicas need PostgreSQL");
        return;
    };
    let client = reqwest::Client::new();
    let (token, _) = rs[0].app.keys.mint(spec("ana")).expect("mint");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "Replica Client", "version": "1"}}});
    let (s, session, _) = mcp(&client, &rs[0], &token, None, init).await;
    let session = session.expect("a session id");
    assert_eq!(s, 200);

    let set = |key: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "loom_memory_set", "arguments": {"memory_key": key, "content": "c"}}})
    };
    let (s, echoed, answer) = mcp(&client, &rs[1], &token, Some(&session), set("via-b")).await;
    assert_eq!(
        (s, echoed.as_deref()),
        (200, Some(session.as_str())),
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // filed under the agent the client's name gave, on the replica that
    // never saw the initialize, and answered in the revision it agreed
    // (2025-06-18: tool results carry structuredContent)
    let (_, _, got) = post(
        &client,
        &rs[2],
        &token,
        "memory.get",
        None,
        json!({"memory_key": "via-b"}),
    )
    .await;
    assert_eq!(got["agent"], "replica-client", "{got}");
    assert!(
        answer["result"].get("structuredContent").is_some(),
        "{answer}"
    );

    // another bearer is refused on every replica, as on the first
    let (other, _) = rs[0].app.keys.mint(spec("bob")).expect("mint");
    let (s, _, _) = mcp(&client, &rs[2], &other, Some(&session), set("bob")).await;
    assert_eq!(s, 404);

    // ended through the third replica: 404 there at once, and on the
    // first (which opened it and caches it) once it asks the store again
    let end = client
        .delete(format!("{}/mcp", rs[2].url()))
        .bearer_auth(&token)
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("an answer");
    assert_eq!(end.status().as_u16(), 204);
    let (s, _, _) = mcp(&client, &rs[2], &token, Some(&session), set("after")).await;
    assert_eq!(s, 404);
    let ping = || async {
        let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
        mcp(&client, &rs[0], &token, Some(&session), ping).await.0
    };
    let status = loom_tests::poll_until(Duration::from_secs(30), 404, ping).await;
    assert_eq!(status, 404);
    for r in rs {
        r.shutdown().await;
    }
}
