//! MCP sessions' implicit runs, end to end over a real socket: begun by a
//! session's first run-scoped call, carried by its writes, labelling its
//! reads, closed by DELETE /mcp or by the idle sweep exactly once, even with
//! two servers on one database.

use loom_core::Role;
use loom_ops::store::now_ms;
use loom_server::Config;
use loom_server::workers::session_runs::sweep_once;
use loom_tests::{McpClient, TestServer, generous, servers};
use serde_json::{Value, json};

async fn runs(c: &McpClient<'_>) -> Vec<Value> {
    let r = c
        .call("loom_op", json!({"op": "run.list", "arguments": {}}))
        .await;
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"]["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn idle_ms(t: &TestServer) -> i64 {
    t.server.app.config.mcp.session_run_idle.as_millis() as i64
}

/// A write made with an explicit run's id (run.begin) carries it, over
/// HTTP and over MCP, where it takes the place of the session's run; a run
/// that never began or has ended is refused and nothing is written.
#[tokio::test]
async fn a_write_made_with_a_runs_id_carries_it() {
    for t in servers(generous).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &["default"]);
        let begun = t
            .post("run.begin", Some(&token), json!({"run_id": "job-7"}))
            .await;
        assert_eq!(begun.status, 200, "{n}: {}", begun.text);
        let a = t
            .post(
                "memory.set",
                Some(&token),
                json!({"memory_key": "built", "content": "v1", "run_id": "job-7"}),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        let r = c
            .call(
                "loom_memory_update",
                json!({"memory_key": "built", "content": "v2", "run_id": "job-7"}),
            )
            .await;
        assert_eq!(r["isError"], false, "{n}: {r}");
        let got = t
            .post("run.get", Some(&token), json!({"run_id": "job-7"}))
            .await;
        let changes: Vec<(String, i64)> = got.body["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["memory_key"].as_str().unwrap().to_owned(),
                    c["version"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [("built".to_owned(), 1), ("built".to_owned(), 2)],
            "{n}: {}",
            got.text
        );
        // a run that never began, or has ended, takes nothing
        let a = t
            .post(
                "memory.set",
                Some(&token),
                json!({"memory_key": "x", "content": "c", "run_id": "nope"}),
            )
            .await;
        assert_eq!(
            (a.status, a.code()),
            (404, "RESOURCE_NOT_FOUND"),
            "{n}: {}",
            a.text
        );
        t.post(
            "run.complete",
            Some(&token),
            json!({"run_id": "job-7", "status": "succeeded"}),
        )
        .await;
        let a = t
            .post(
                "memory.set",
                Some(&token),
                json!({"memory_key": "x", "content": "c", "run_id": "job-7"}),
            )
            .await;
        assert_eq!((a.status, a.code()), (409, "RUN_ENDED"), "{n}: {}", a.text);
        // the envelope's status is the HTTP status; the run's is its own detail
        assert_eq!(
            (&a.body["error"]["status"], &a.body["error"]["run_status"]),
            (&json!(409), &json!("succeeded")),
            "{n}: {}",
            a.text
        );
        let a = t
            .post(
                "memory.set",
                Some(&token),
                json!({"memory_key": "x", "content": "c", "run_id": 7}),
            )
            .await;
        assert_eq!(
            (a.status, a.code()),
            (422, "INVALID_ARGUMENTS"),
            "{n}: {}",
            a.text
        );
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memories WHERE memory_key = 'x'")
                .await,
            0,
            "{n}"
        );
        // run.list pages as every list does: past its most clamped, under 1 refused
        let a = t
            .post("run.list", Some(&token), json!({"limit": 501}))
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let a = t.post("run.list", Some(&token), json!({"limit": 0})).await;
        assert_eq!((a.status, a.code()), (422, "INVALID_ARGUMENTS"), "{n}");
        // …and with a cursor, every run once, newest first
        for i in 0..5 {
            let begun = t
                .post(
                    "run.begin",
                    Some(&token),
                    json!({"run_id": format!("page-{i}")}),
                )
                .await;
            assert_eq!(begun.status, 200, "{n}: {}", begun.text);
        }
        let all = t
            .post("run.list", Some(&token), json!({"limit": 500}))
            .await;
        let every: Vec<Value> = all.body["runs"].as_array().unwrap().clone();
        assert!(all.body.get("next_cursor").is_none(), "{n}");
        let mut paged = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let page = t
                .post(
                    "run.list",
                    Some(&token),
                    json!({"limit": 2, "cursor": cursor}),
                )
                .await;
            assert_eq!(page.status, 200, "{n}: {}", page.text);
            let runs = page.body["runs"].as_array().unwrap();
            assert!(runs.len() <= 2, "{n}");
            paged.extend(runs.iter().cloned());
            match page.body.get("next_cursor") {
                Some(next) => cursor = next.clone(),
                None => break,
            }
        }
        assert_eq!(paged, every, "{n}");
        let a = t
            .post("run.list", Some(&token), json!({"cursor": "nonsense"}))
            .await;
        assert_eq!((a.status, a.code()), (422, "INVALID_ARGUMENTS"), "{n}");
        t.server.shutdown().await;
    }
}

/// The ledger is written off the request path, in batches, yet run.get
/// lists every call of the run answered before it, with nothing flushed.
#[tokio::test]
async fn run_get_lists_every_call_answered_before_it() {
    for t in servers(generous).await {
        let token = t.token("default", "ana", Role::Writer, &[]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        c.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "one"}),
        )
        .await;
        let run_id = runs(&c).await[0]["run_id"].as_str().unwrap().to_owned();
        for round in 1..=5 {
            c.call("loom_memory_get", json!({"memory_key": "a"})).await;
            let detail = c
                .call(
                    "loom_op",
                    json!({"op": "run.get", "arguments": {"run_id": run_id}}),
                )
                .await;
            let calls = detail["structuredContent"]["calls"].as_array().unwrap();
            let ops: Vec<&str> = calls.iter().filter_map(|c| c["op"].as_str()).collect();
            assert_eq!(
                ops.iter().filter(|op| **op == "memory.get").count(),
                round,
                "{}: {ops:?}",
                t.name()
            );
            assert!(ops.contains(&"memory.set"), "{}: {ops:?}", t.name());
        }
        t.server.shutdown().await;
    }
}

/// run.get lists the calls made under its run: in its namespace (a run of
/// the same id in another namespace is another run, whose calls its caller
/// may not be allowed to see), and, to its own subject, its session's calls
/// in other namespaces.
#[tokio::test]
async fn run_get_lists_only_its_own_runs_calls() {
    for t in servers(generous).await {
        let n = t.name();
        t.create_namespace("default", "secret").await;
        t.create_namespace("default", "team2").await;
        let sam = t.token("default", "sam", Role::Writer, &["secret"]);
        let tina = t.token("default", "tina", Role::Writer, &["team2"]);
        for (token, namespace) in [(&sam, "secret"), (&tina, "team2")] {
            let begun = t
                .post(
                    "run.begin",
                    Some(token),
                    json!({"run_id": "shared-id", "namespace": namespace}),
                )
                .await;
            assert_eq!(begun.status, 200, "{n}: {}", begun.text);
        }
        let set = t
            .post(
                "memory.set",
                Some(&sam),
                json!({"memory_key": "plan", "content": "confidential", "namespace": "secret", "run_id": "shared-id"}),
            )
            .await;
        assert_eq!(set.status, 200, "{n}: {}", set.text);
        let calls = |token: &str, namespace: &str| {
            let token = token.to_owned();
            let namespace = namespace.to_owned();
            let t = &t;
            async move {
                let got = t
                    .post(
                        "run.get",
                        Some(&token),
                        json!({"run_id": "shared-id", "namespace": namespace}),
                    )
                    .await;
                assert_eq!(got.status, 200, "{}", got.text);
                got.body["calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["op"].as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(calls(&sam, "secret").await, ["memory.set"], "{n}");
        assert!(calls(&tina, "team2").await.is_empty(), "{n}");

        // An MCP session's run, filed in ana's default namespace, carries
        // her session's calls elsewhere: she sees them, bob does not.
        let ana = t.token("default", "ana", Role::Writer, &["default", "team2"]);
        let bob = t.token("default", "bob", Role::Viewer, &["default"]);
        let mut c = McpClient::new(&t, Some(&ana), "");
        c.initialize("Cursor", "2025-11-25").await;
        for namespace in ["default", "team2"] {
            let r = c
                .call(
                    "loom_memory_set",
                    json!({"memory_key": "k", "content": "x", "namespace": namespace}),
                )
                .await;
            assert_eq!(r["isError"], false, "{n}: {r}");
        }
        let run = runs(&c).await[0].clone();
        assert_eq!(run["namespace"], "default", "{n}");
        let run_id = run["run_id"].as_str().unwrap();
        // Its changes follow the same rule, each naming its namespace.
        let session = |token: &str| {
            let token = token.to_owned();
            let t = &t;
            async move {
                let got = t
                    .post("run.get", Some(&token), json!({"run_id": run_id}))
                    .await;
                assert_eq!(got.status, 200, "{}", got.text);
                let namespaces = |list: &str| {
                    let mut seen: Vec<String> = got.body[list]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["namespace"].as_str().unwrap().to_owned())
                        .collect();
                    seen.sort();
                    seen
                };
                (namespaces("calls"), namespaces("changes"))
            }
        };
        let both = vec!["default".to_owned(), "team2".to_owned()];
        assert_eq!(session(&ana).await, (both.clone(), both), "{n}");
        let home = vec!["default".to_owned()];
        assert_eq!(session(&bob).await, (home.clone(), home), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_session_run_is_begun_carried_and_closed_on_delete() {
    for t in servers(generous).await {
        let token = t.token("default", "ana", Role::Writer, &[]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        assert!(
            runs(&c).await.is_empty(),
            "run.list is not run-scoped: it begins no run"
        );
        c.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "one"}),
        )
        .await;
        c.call("loom_memory_get", json!({"memory_key": "a"})).await;
        let open = runs(&c).await;
        assert_eq!(open.len(), 1, "{}: {open:?}", t.name());
        let run_id = open[0]["run_id"].as_str().unwrap().to_owned();
        assert_eq!(open[0]["status"], "open");
        assert_eq!(open[0]["session_id"].as_str(), c.session.as_deref());
        assert_eq!(open[0]["agent"], "cursor");
        assert_eq!(open[0]["subject"], "ana");
        // run.complete ends runs begun with run.begin, not the session's
        // (its next call would carry it still); nor does run.begin take it
        // for a begin made again, with its very goal and agent: the id is
        // the session's
        for (op, args) in [
            ("run.complete", json!({"run_id": run_id})),
            (
                "run.begin",
                json!({"run_id": run_id, "goal": open[0]["goal"], "agent": "cursor"}),
            ),
        ] {
            let refused = t.post(op, Some(&token), args).await;
            assert_eq!(
                (refused.status, refused.body["error"]["code"].as_str()),
                (422, Some("INVALID_ARGUMENTS")),
                "{} {op}: {}",
                t.name(),
                refused.text
            );
            assert_eq!(runs(&c).await[0]["status"], "open");
        }
        // the write carries it and shows it when read
        let got = c.call("loom_memory_get", json!({"memory_key": "a"})).await;
        assert_eq!(got["structuredContent"]["run_id"], run_id.as_str());
        // reads are labelled with it, not filtered; run.* and working_memory.* are not run-scoped
        c.call(
            "loom_working_memory_set",
            json!({"run_id": "explicit-1", "name": "n", "content": "c"}),
        )
        .await;
        t.flush_ledger().await;
        let labelled = t
            .count(&format!(
                "SELECT COUNT(*) FROM agent_events WHERE run_id = '{run_id}' AND op = 'memory.get'"
            ))
            .await;
        assert_eq!(labelled, 2, "{}", t.name());
        let wm = t
            .count(&format!("SELECT COUNT(*) FROM agent_events WHERE run_id = '{run_id}' AND op = 'working_memory.set'"))
            .await;
        assert_eq!(wm, 0, "{}", t.name());
        // another session of the same subject gets its own run
        let mut d = McpClient::new(&t, Some(&token), "");
        d.initialize("Cursor", "2025-11-25").await;
        d.call(
            "loom_memory_set",
            json!({"memory_key": "b", "content": "two"}),
        )
        .await;
        assert_eq!(runs(&d).await.len(), 2);
        // DELETE /mcp closes it; run.get shows why, and its calls
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", c.session.clone().unwrap()),
            )
            .await;
        assert_eq!(del.status, 204);
        let detail = d
            .call(
                "loom_op",
                json!({"op": "run.get", "arguments": {"run_id": run_id}}),
            )
            .await;
        let run = &detail["structuredContent"]["run"];
        assert_eq!(
            (run["status"].as_str(), run["close_reason"].as_str()),
            (Some("closed"), Some("session_ended")),
            "{detail}"
        );
        assert!(run["completed_at"].is_string());
        let calls = detail["structuredContent"]["calls"].as_array().unwrap();
        assert_eq!(
            calls.iter().filter(|c| c["op"] == "memory.get").count(),
            2,
            "{calls:?}"
        );
        assert!(calls.iter().all(|c| c["transport"] == "mcp"));
        t.server.shutdown().await;
    }
}

/// A session's implicit run is its own: DELETE /mcp closes it whatever org
/// the token acts in (an org-wide token's run is filed in the default
/// org), even on a server that does not hold the session; another org's
/// subject of the same name cannot end the session; and no call names the
/// run to add to it (or keep it from closing when idle).
#[tokio::test]
async fn a_session_run_is_its_sessions_own() {
    for t in servers(generous).await {
        let n = t.name();
        let own = t.token("default", "ana", Role::Admin, &[]);
        let delete = |url: String, token: &str, session: &str| {
            t.client
                .delete(url)
                .bearer_auth(token)
                .header("mcp-session-id", session)
        };
        let status_of = |run_id: String| {
            let own = own.clone();
            let t = &t;
            async move {
                let got = t
                    .post("run.get", Some(&own), json!({"run_id": run_id}))
                    .await;
                assert_eq!(got.status, 200, "{}", got.text);
                got.body["run"]["status"].as_str().unwrap().to_owned()
            }
        };
        let open_run = |c: &McpClient<'_>| {
            let session = c.session.clone().unwrap();
            let t = &t;
            async move {
                t.flush_ledger().await;
                let row: (String,) =
                    sqlx::query_as("SELECT run_id FROM runs WHERE session_id = $1")
                        .bind(session)
                        .fetch_one(t.db.store.reader())
                        .await
                        .unwrap();
                row.0
            }
        };

        // an org-wide token: its run is filed in the default org, and ends
        let wide = t.token("*", "svc", Role::Admin, &[]);
        let mut c = McpClient::new(&t, Some(&wide), "");
        c.initialize("Cursor", "2025-11-25").await;
        c.call(
            "loom_memory_set",
            json!({"memory_key": "w", "content": "v"}),
        )
        .await;
        let wide_run = open_run(&c).await;
        assert_eq!(status_of(wide_run.clone()).await, "open", "{n}");
        let del = t
            .send(delete(c.url(), &wide, c.session.as_deref().unwrap()))
            .await;
        assert_eq!(del.status, 204, "{n}: {}", del.text);
        assert_eq!(status_of(wide_run).await, "closed", "{n}");

        // the same subject name in another org is another principal
        let mut a = McpClient::new(&t, Some(&own), "");
        a.initialize("Cursor", "2025-11-25").await;
        a.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "v"}),
        )
        .await;
        let run = open_run(&a).await;
        t.create_namespace("other", "default").await;
        let namesake = t.token("other", "ana", Role::Admin, &[]);
        let del = t
            .send(delete(a.url(), &namesake, a.session.as_deref().unwrap()))
            .await;
        assert_eq!(del.status, 404, "{n}: {}", del.text);
        assert_eq!(status_of(run.clone()).await, "open", "{n}");
        let r = a.call("loom_memory_get", json!({"memory_key": "a"})).await;
        assert_eq!(r["isError"], false, "{n}: the session lives on: {r}");

        // no call names the session's run, its own subject's neither
        let bob = t.token("default", "bob", Role::Writer, &[]);
        for (who, token) in [("bob", &bob), ("ana", &own)] {
            let w = t
                .post(
                    "memory.set",
                    Some(token),
                    json!({"memory_key": "b", "content": "v", "run_id": run}),
                )
                .await;
            assert_eq!(
                (w.status, w.body["error"]["field"].as_str()),
                (422, Some("run_id")),
                "{n} {who}: {}",
                w.text
            );
            let w = t
                .post(
                    "working_memory.set",
                    Some(token),
                    json!({"run_id": run, "name": "note", "content": "v"}),
                )
                .await;
            assert_eq!(w.status, 422, "{n} {who}: {}", w.text);
        }
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memories WHERE memory_key = 'b'")
                .await,
            0,
            "{n}"
        );

        // a server that does not hold the session still ends its run
        let mut config = Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: t.db.options.url.clone(),
            pg_schema: t.db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            ..Config::default()
        };
        generous(&mut config);
        let second = loom_server::spawn(config).await.expect("second server");
        loom_tests::wait_ready(&t.client, &second.url(), n).await;
        let elsewhere = format!("{}/mcp", second.url());
        let session = a.session.clone().unwrap();
        let del = t.send(delete(elsewhere.clone(), &namesake, &session)).await;
        assert_eq!(del.status, 404, "{n}: not the namesake's run: {}", del.text);
        assert_eq!(status_of(run.clone()).await, "open", "{n}");
        let del = t.send(delete(elsewhere.clone(), &own, &session)).await;
        assert_eq!(del.status, 204, "{n}: {}", del.text);
        assert_eq!(status_of(run).await, "closed", "{n}");
        let del = t.send(delete(elsewhere, &own, &session)).await;
        assert_eq!(del.status, 404, "{n}: ended once: {}", del.text);
        second.shutdown().await;
        t.server.shutdown().await;
    }
}

/// An org-wide token's session has a run in each org it acts in, filed in
/// its default namespace there: a call in another org neither carries the
/// home org's run (whose calls would not be counted by the idle sweep nor
/// shown by run.get) nor goes without one; DELETE /mcp closes them all. A
/// caller refused where its run would be filed (a restricted namespace of
/// another org) gets none there.
#[tokio::test]
async fn a_session_has_a_run_in_each_org_it_acts_in() {
    for t in servers(generous).await {
        let n = t.name();
        t.create_namespace("globex", "default").await;
        let wide = t.token("*", "svc", Role::Admin, &[]);
        let mut c = McpClient::new(&t, Some(&wide), "");
        c.initialize("Cursor", "2025-11-25").await;
        for (org, key) in [("default", "a"), ("globex", "g"), ("globex", "h")] {
            let r = c
                .call(
                    "loom_memory_set",
                    json!({"org": org, "memory_key": key, "content": "v"}),
                )
                .await;
            assert_eq!(r["isError"], false, "{n}: {r}");
        }
        let run_in = |org: &'static str| {
            let t = &t;
            let session = c.session.clone().unwrap();
            async move {
                let rows: Vec<(String, String)> = sqlx::query_as(
                    "SELECT run_id, status FROM runs WHERE session_id = $1 AND org = $2",
                )
                .bind(session)
                .bind(org)
                .fetch_all(t.db.store.reader())
                .await
                .unwrap();
                assert_eq!(rows.len(), 1, "one run in {org}: {rows:?}");
                rows[0].clone()
            }
        };
        let (home, _) = run_in("default").await;
        let (away, _) = run_in("globex").await;
        assert_ne!(home, away, "{n}");
        let got = c
            .call(
                "loom_memory_get",
                json!({"org": "globex", "memory_key": "g"}),
            )
            .await;
        assert_eq!(
            got["structuredContent"]["run_id"],
            away.as_str(),
            "{n}: {got}"
        );
        t.flush_ledger().await;
        let detail = t
            .post(
                "run.get",
                Some(&wide),
                json!({"org": "globex", "run_id": away}),
            )
            .await;
        assert_eq!(detail.status, 200, "{n}: {}", detail.text);
        let sets = detail.body["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["op"] == "memory.set")
            .count();
        assert_eq!(sets, 2, "{n}: {}", detail.text);
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&wide)
                    .header("mcp-session-id", c.session.clone().unwrap()),
            )
            .await;
        assert_eq!(del.status, 204, "{n}: {}", del.text);
        assert_eq!(run_in("default").await.1, "closed", "{n}");
        assert_eq!(run_in("globex").await.1, "closed", "{n}");

        // Refused where its run would be filed: no run there.
        sqlx::query(
            "INSERT INTO namespaces (org, namespace, restricted, created_ms) VALUES ('default', 'rdef', $1, 0)",
        )
        .bind(true)
        .execute(t.db.store.writer())
        .await
        .unwrap();
        let outsider = t.token("*", "outsider", Role::Admin, &["rdef"]);
        let mut o = McpClient::new(&t, Some(&outsider), "");
        o.initialize("Cursor", "2025-11-25").await;
        let r = o
            .call(
                "loom_memory_set",
                json!({"memory_key": "x", "content": "v"}),
            )
            .await;
        assert_eq!(r["structuredContent"]["code"], "ORG_MISMATCH", "{n}: {r}");
        assert_eq!(
            t.count("SELECT COUNT(*) FROM runs WHERE subject = 'outsider'")
                .await,
            0,
            "{n}"
        );
        t.server.shutdown().await;
    }
}

/// A session's run closed by another process (its idle sweep) is not
/// carried on by the server holding the session: past the recheck
/// interval (`min(60 s, idle / 4)`, none here) a call asks the store, and
/// begins a new run when the one it held has ended.
#[tokio::test]
async fn a_run_closed_elsewhere_is_not_carried_on() {
    let tweak = |c: &mut Config| {
        generous(c);
        // no sweep of its own: the other process closes the run
        c.workers = false;
        c.mcp.session_run_idle = std::time::Duration::ZERO;
    };
    for t in servers(tweak).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &[]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        c.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "one"}),
        )
        .await;
        let first = runs(&c).await;
        assert_eq!(first.len(), 1, "{n}: {first:?}");
        let first = first[0]["run_id"].as_str().unwrap().to_owned();
        // another process's sweep, as if the run had been idle long enough;
        // the serving process is not told
        t.flush_ledger().await;
        let store = t.db.store.clone();
        let closed = store
            .sweep_idle_session_runs(now_ms() + 60_000, 1)
            .await
            .unwrap();
        assert_eq!(closed, std::slice::from_ref(&first), "{n}");
        c.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "two"}),
        )
        .await;
        let got = c.call("loom_memory_get", json!({"memory_key": "a"})).await;
        let carried = got["structuredContent"]["run_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_ne!(carried, first, "{n}: the closed run takes no more writes");
        let now = runs(&c).await;
        let status = |id: &str| {
            now.iter()
                .find(|r| r["run_id"] == id)
                .map(|r| r["status"].as_str().unwrap().to_owned())
        };
        assert_eq!(status(&first).as_deref(), Some("closed"), "{n}");
        assert_eq!(status(&carried).as_deref(), Some("open"), "{n}");
        t.server.shutdown().await;
    }
}

/// A session whose default namespace the org does not have begins no
/// run (it would be filed where no run.list could show it): its calls go
/// without one.
#[tokio::test]
async fn no_run_is_filed_in_a_namespace_that_does_not_exist() {
    for t in servers(generous).await {
        let n = t.name();
        t.create_namespace("solo", "work").await;
        let token = t.token("solo", "sam", Role::Writer, &[]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        let r = c
            .call(
                "loom_memory_set",
                json!({"namespace": "work", "memory_key": "a", "content": "one"}),
            )
            .await;
        assert_eq!(r["isError"], false, "{n}: {r}");
        assert_eq!(t.count("SELECT COUNT(*) FROM runs").await, 0, "{n}");
        let got = c
            .call(
                "loom_memory_get",
                json!({"namespace": "work", "memory_key": "a"}),
            )
            .await;
        assert!(
            got["structuredContent"].get("run_id").is_none(),
            "{n}: {got}"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn the_sweep_closes_idle_runs_once_and_spares_live_ones() {
    for t in servers(generous).await {
        let token = t.token("default", "ana", Role::Writer, &[]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("agent", "2025-11-25").await;
        c.call(
            "loom_memory_set",
            json!({"memory_key": "a", "content": "one"}),
        )
        .await;
        t.flush_ledger().await;
        let app = &t.server.app;
        // a call inside the idle window keeps it open
        assert!(sweep_once(app, now_ms() + 1_000).await.unwrap().is_empty());
        // past the window it is closed, once
        let later = now_ms() + idle_ms(&t) + 60_000;
        let closed = sweep_once(app, later).await.unwrap();
        assert_eq!(closed.len(), 1, "{}", t.name());
        assert!(sweep_once(app, later).await.unwrap().is_empty());
        let list = runs(&c).await;
        let closed_run = list
            .iter()
            .find(|r| r["run_id"] == closed[0].as_str())
            .unwrap();
        assert_eq!(closed_run["close_reason"], "idle");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn two_servers_on_one_database_close_each_idle_run_exactly_once() {
    for first in servers(generous).await {
        let mut config = Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: first.db.options.url.clone(),
            pg_schema: first.db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            ..Config::default()
        };
        generous(&mut config);
        let second = loom_server::spawn(config).await.expect("second server");
        let token = first.token("default", "ana", Role::Writer, &[]);
        for _ in 0..5 {
            let mut c = McpClient::new(&first, Some(&token), "");
            c.initialize("agent", "2025-11-25").await;
            c.call(
                "loom_memory_set",
                json!({"memory_key": "k", "content": "v"}),
            )
            .await;
        }
        first.flush_ledger().await;
        let later = now_ms() + idle_ms(&first) + 60_000;
        let (a, b) = tokio::join!(
            sweep_once(&first.server.app, later),
            sweep_once(&second.app, later)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(
            a.len() + b.len(),
            5,
            "{}: every run closed once ({a:?} / {b:?})",
            first.name()
        );
        assert!(a.iter().all(|r| !b.contains(r)), "no run closed twice");
        let open = first
            .count("SELECT COUNT(*) FROM runs WHERE status = 'open'")
            .await;
        assert_eq!(open, 0);
        second.shutdown().await;
        first.server.shutdown().await;
    }
}
