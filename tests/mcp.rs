//! MCP at `/mcp` end to end, over a real socket, on every backend.

use loom_core::Role;
use loom_tests::{McpClient, TestServer, generous, poll_until, servers};
use serde_json::{Value, json};

fn admin(t: &TestServer) -> String {
    t.token("default", "ana", Role::Admin, &[])
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn initialize_negotiates_and_assigns_a_session() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        let a = c.initialize("Cursor", "2025-06-18").await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.body["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(a.body["result"]["serverInfo"]["name"], "loom");
        assert!(a.body["result"]["capabilities"]["tools"].is_object());
        let instructions = a.body["result"]["instructions"].as_str().unwrap();
        assert!(
            instructions.contains("loom_search") && instructions.contains("loom_memory_set"),
            "{instructions}"
        );
        assert!(instructions.contains("agent cursor"), "{instructions}");
        let sid = c.session.clone().expect("session id");
        assert!(sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        // every later answer echoes it
        let ping = c.request("ping", json!({})).await;
        assert_eq!(ping.body["result"], json!({}));
        assert_eq!(ping.header("mcp-session-id"), Some(sid.as_str()));
        // an unserved revision gets the newest
        let mut d = McpClient::new(&t, Some(&token), "");
        let a = d.initialize("x", "1999-01-01").await;
        assert_eq!(a.body["result"]["protocolVersion"], "2025-11-25");
        // notifications: 202, no body
        let n = c
            .raw(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!((n.status, n.text.as_str()), (202, ""));
        t.server.shutdown().await;
    }
}

/// A session outlives a restart of the server: the store keeps it, so the
/// client's next request, naming it, is served with the agent and the
/// revision its initialize agreed (clients do not initialize again on
/// their own after a 404). One ended before the restart stays ended.
#[tokio::test]
async fn a_session_outlives_a_restart_of_the_server() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut kept = McpClient::new(&t, Some(&token), "");
        kept.initialize("Restart Client", "2025-03-26").await;
        let mut ended = McpClient::new(&t, Some(&token), "");
        ended.initialize("Gone", "2025-11-25").await;
        let end = t
            .send(
                t.client
                    .delete(ended.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", ended.session.clone().unwrap()),
            )
            .await;
        assert_eq!(end.status, 204);
        let (kept, ended) = (kept.session.unwrap(), ended.session.unwrap());

        let TestServer { server, db, client } = t;
        server.shutdown().await;
        let config = loom_server::Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: db.options.url.clone(),
            pg_schema: db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            ..loom_server::Config::default()
        };
        let again = TestServer {
            server: loom_server::spawn(config).await.expect("it starts again"),
            db,
            client,
        };
        again.wait_ready().await;
        let n = again.name();
        let mut c = McpClient::new(&again, Some(&token), "");
        c.session = Some(kept);
        c.version = "2025-03-26".into();
        let list = c.request("tools/list", json!({})).await;
        assert_eq!(list.status, 200, "{n}: {}", list.text);
        // 2025-03-26: annotations, no titles
        let tools = list.body["result"]["tools"].as_array().unwrap();
        assert!(tools.iter().all(|t| t.get("title").is_none()), "{n}");
        let r = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "after", "content": "c"}),
            )
            .await;
        assert_eq!(r["isError"], false, "{n}: {r}");
        let got = again
            .post("memory.get", Some(&token), json!({"memory_key": "after"}))
            .await;
        assert_eq!(got.body["agent"], "restart-client", "{n}: {}", got.text);
        c.session = Some(ended);
        assert_eq!(c.request("ping", json!({})).await.status, 404, "{n}");
        again.server.shutdown().await;
    }
}

/// A session the store no longer keeps (the retention sweep deleted it,
/// on whichever replica) is gone on a server that still holds it in
/// memory too, once that server asks the store again.
#[tokio::test]
async fn a_session_the_store_no_longer_keeps_is_gone() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Pruned", "2025-11-25").await;
        assert_eq!(c.request("ping", json!({})).await.status, 200);
        sqlx::query("DELETE FROM mcp_sessions")
            .execute(t.db.store.writer())
            .await
            .unwrap();
        // polled, up to a bound far past the server's recheck (5 s)
        let ping = || async { c.request("ping", json!({})).await.status };
        let status = poll_until(std::time::Duration::from_secs(30), 404, ping).await;
        assert_eq!(status, 404, "{}", t.name());
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn framing_batches_and_methods() {
    for t in servers(generous).await {
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        let batch = c
            .raw(json!([
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": "two", "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}},
                {"jsonrpc": "2.0", "id": 4, "method": "no/such"}
            ]))
            .await;
        assert_eq!(batch.status, 200);
        let answers = batch.body.as_array().unwrap();
        assert_eq!(answers.len(), 4, "one answer per request: {answers:?}");
        let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).unwrap().clone();
        assert_eq!(by_id(json!(1))["result"], json!({}));
        assert!(by_id(json!("two"))["result"]["tools"].is_array());
        assert_eq!(
            by_id(json!(3))["error"]["code"],
            -32600,
            "initialize cannot be batched"
        );
        assert_eq!(by_id(json!(4))["error"]["code"], -32601);
        let only_notes = c
            .raw(json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]))
            .await;
        assert_eq!(only_notes.status, 202);
        for body in [
            json!([]),
            Value::Array(vec![
                json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
                65
            ]),
        ] {
            let a = c.raw(body).await;
            assert_eq!(
                (a.status, a.body["error"]["code"].as_i64()),
                (200, Some(-32600))
            );
            assert!(a.body.get("id").is_none());
        }
        let a = t
            .send(
                c.post()
                    .header("content-type", "application/json")
                    .body("{not json"),
            )
            .await;
        assert_eq!(
            (a.status, a.body["error"]["code"].as_i64()),
            (200, Some(-32700))
        );
        assert!(a.body.get("id").is_none());
        // a key given twice, in the envelope or in a tool's arguments, is
        // refused: which one Loom read would be a guess
        for body in [
            r#"{"jsonrpc": "2.0", "id": 9, "method": "ping", "method": "tools/list"}"#,
            r#"{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "loom_memory_get", "arguments": {"memory_key": "a", "memory_key": "b"}}}"#,
        ] {
            let a = t
                .send(
                    c.post()
                        .header("content-type", "application/json")
                        .body(body),
                )
                .await;
            assert_eq!(
                (a.status, a.body["error"]["code"].as_i64()),
                (200, Some(-32700)),
                "{body}: {}",
                a.text
            );
            assert!(
                a.body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("given twice"),
                "{}",
                a.text
            );
        }
        let a = c
            .raw(json!({"jsonrpc": "2.0", "id": null, "method": "ping"}))
            .await;
        assert_eq!(a.body["error"]["code"], -32600);
        // lists carry cache hints; a cursor Loom never issued is invalid
        let p = c.request("prompts/list", json!({})).await;
        assert_eq!(p.body["result"]["prompts"][0]["name"], "loom");
        assert!(p.body["result"]["ttlMs"].is_u64() && p.body["result"]["cacheScope"].is_string());
        let bad = c.request("tools/list", json!({"cursor": "zzz"})).await;
        assert_eq!(bad.body["error"]["code"], -32602);
        let g = c.request("prompts/get", json!({"name": "loom"})).await;
        assert!(
            g.body["result"]["messages"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .contains("Loom")
        );
        assert_eq!(
            c.request("prompts/get", json!({"name": "x"})).await.body["error"]["code"],
            -32602
        );
        // arguments are an object of strings (the primer reads none)
        for (arguments, code) in [
            (json!({"topic": "deploys"}), None),
            (json!("x"), Some(-32602)),
            (json!({"a": 1}), Some(-32602)),
        ] {
            let g = c
                .request(
                    "prompts/get",
                    json!({"name": "loom", "arguments": arguments}),
                )
                .await;
            assert_eq!(
                g.body["error"]["code"].as_i64(),
                code,
                "{arguments}: {}",
                g.text
            );
        }
        let r = c.request("resources/list", json!({})).await;
        assert_eq!(r.body["result"]["resources"][0]["uri"], "loom://primer");
        let r = c.request("resources/templates/list", json!({})).await;
        assert_eq!(
            (
                &r.body["result"]["resourceTemplates"],
                r.body["result"]["cacheScope"].as_str()
            ),
            (&json!([]), Some("public"))
        );
        assert!(r.body["result"]["ttlMs"].is_u64());
        let r = c
            .request("resources/read", json!({"uri": "loom://primer"}))
            .await;
        assert!(
            r.body["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .contains("loom_search")
        );
        for params in [json!({}), json!({"uri": 5})] {
            let r = c.request("resources/read", params).await;
            assert_eq!(r.body["error"]["code"], -32602, "{}", r.text);
        }
        let r = c
            .request("resources/read", json!({"uri": "loom://nope"}))
            .await;
        assert_eq!(
            (
                r.body["error"]["code"].as_i64(),
                r.body["error"]["data"]["uri"].as_str()
            ),
            (Some(-32002), Some("loom://nope"))
        );
        let d = c.request("server/discover", json!({})).await;
        assert_eq!(d.body["result"]["supportedVersions"][0], "2025-11-25");
        assert_eq!(d.body["result"]["serverInfo"]["name"], "loom");
        assert!(d.body["result"]["instructions"].is_string());
        assert_eq!(
            d.body["result"]["cacheScope"], "private",
            "the primer is the caller's own"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn protocol_header_host_origin_and_session_checks() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        // an unserved MCP-Protocol-Version is refused before session or method checks
        let a = t
            .send(
                t.client
                    .post(c.url())
                    .bearer_auth(&token)
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-session-id", "nope")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}})),
            )
            .await;
        assert_eq!(a.status, 400);
        assert_eq!(a.body["error"]["code"], -32022);
        assert_eq!(a.body["error"]["data"]["requested"], "2026-07-28");
        assert!(
            a.body["error"]["data"]["supported"]
                .as_array()
                .unwrap()
                .contains(&json!("2024-11-05"))
        );
        // a foreign Origin or Host is 403 even with a valid token
        let a = t
            .send(
                c.post()
                    .header("origin", "http://evil.example.com")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            )
            .await;
        assert_eq!(a.status, 403);
        let a = t
            .send(
                c.post()
                    .header("host", "evil.example.com")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            )
            .await;
        assert_eq!(a.status, 403);
        // its data carries the code and class, as every refusal's does
        assert_eq!(
            (
                &a.body["error"]["data"]["code"],
                &a.body["error"]["data"]["category"]
            ),
            (&json!("FOREIGN_ORIGIN"), &json!("auth")),
            "{}",
            a.text
        );
        let a = t
            .send(
                c.post()
                    .header("origin", "http://localhost:5173")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            )
            .await;
        assert_eq!(a.status, 200);
        // sessions end with DELETE; the dead id is 404 afterwards
        c.initialize("claude-code", "2025-11-25").await;
        let sid = c.session.clone().unwrap();
        // every answer within the session names it, refusals included
        let a = t.send(c.post().body("{not json")).await;
        assert_eq!(
            (a.body["error"]["code"].as_i64(), a.header("mcp-session-id")),
            (Some(-32700), Some(sid.as_str()))
        );
        let a = t
            .send(
                t.client
                    .post(c.url())
                    .header("mcp-session-id", &sid)
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            )
            .await;
        assert_eq!(
            (a.status, a.header("mcp-session-id")),
            (401, Some(sid.as_str()))
        );
        // a DELETE naming an unserved revision is refused as a POST is, and
        // ends nothing
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", &sid)
                    .header("mcp-protocol-version", "1999-01-01"),
            )
            .await;
        assert_eq!(
            (del.status, del.body["error"]["code"].as_i64()),
            (400, Some(-32022))
        );
        assert_eq!(c.request("ping", json!({})).await.status, 200);
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", &sid),
            )
            .await;
        assert_eq!(del.status, 204);
        let after = c.request("ping", json!({})).await;
        assert_eq!(after.status, 404);
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", &sid),
            )
            .await;
        assert_eq!(del.status, 404);
        let get = t.send(t.client.get(c.url()).bearer_auth(&token)).await;
        assert_eq!(get.status, 405);
        assert_eq!(get.body["error"]["code"], -32600, "{}", get.text);
        assert_eq!(
            get.body["error"]["data"]["code"], "METHOD_NOT_ALLOWED",
            "{}",
            get.text
        );
        // a session belongs to the principal that opened it
        let mut mine = McpClient::new(&t, Some(&token), "");
        mine.initialize("x", "2025-11-25").await;
        let other = t.token("default", "bob", Role::Admin, &[]);
        let mut theirs = McpClient::new(&t, Some(&other), "");
        theirs.session = mine.session.clone();
        assert_eq!(theirs.request("ping", json!({})).await.status, 404);
        t.server.shutdown().await;
    }
}

/// What a client sends wrong at the HTTP level: the protocol header twice,
/// a session id that is not visible ASCII, a method `/mcp` does not serve.
#[tokio::test]
async fn odd_headers_and_methods_are_refused_as_the_spec_says() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("claude-code", "2025-11-25").await;
        let sid = c.session.clone().unwrap();
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        // every MCP-Protocol-Version sent is checked, whatever the order
        for pair in [
            ["2025-06-18", "1999-01-01"],
            ["1999-01-01", "2025-06-18"],
            ["2025-06-18", "2025-11-25"],
        ] {
            let a = t
                .send(
                    t.client
                        .post(c.url())
                        .bearer_auth(&token)
                        .header("mcp-session-id", &sid)
                        .header("mcp-protocol-version", pair[0])
                        .header("mcp-protocol-version", pair[1])
                        .json(&ping),
                )
                .await;
            assert_eq!(
                (a.status, a.body["error"]["code"].as_i64()),
                (400, Some(-32022)),
                "{pair:?}: {}",
                a.text
            );
        }
        let twice = t
            .send(
                c.post()
                    .header("mcp-protocol-version", "2025-11-25")
                    .json(&ping),
            )
            .await;
        assert_eq!(twice.status, 200, "{}", twice.text);
        // a session id that is not visible ASCII names no session Loom
        // issued: unknown, as any other, and not echoed back
        let odd = reqwest::header::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap();
        let a = t
            .send(
                t.client
                    .post(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", odd.clone())
                    .json(&ping),
            )
            .await;
        assert_eq!(
            (a.status, a.header("mcp-session-id")),
            (404, None),
            "{}",
            a.text
        );
        let del = t
            .send(
                t.client
                    .delete(c.url())
                    .bearer_auth(&token)
                    .header("mcp-session-id", odd),
            )
            .await;
        assert_eq!((del.status, del.header("mcp-session-id")), (404, None));
        // a method /mcp does not serve is refused as GET is: JSON, the
        // methods it serves, the session named
        for method in ["PUT", "PATCH", "OPTIONS"] {
            let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let a = t
                .send(
                    t.client
                        .request(method.clone(), c.url())
                        .bearer_auth(&token)
                        .header("mcp-session-id", &sid)
                        .json(&ping),
                )
                .await;
            assert_eq!(a.status, 405, "{method}: {}", a.text);
            assert_eq!(a.header("allow"), Some("POST, DELETE"), "{method}");
            assert_eq!(a.header("mcp-session-id"), Some(sid.as_str()), "{method}");
            assert_eq!(
                (&a.body["error"]["code"], &a.body["error"]["data"]["code"]),
                (&json!(-32600), &json!("METHOD_NOT_ALLOWED")),
                "{method}: {}",
                a.text
            );
        }
        // two bearers are a malformed request (RFC 6750 §3.1), as on /v1
        let a = t
            .send(
                t.client
                    .post(c.url())
                    .bearer_auth(&token)
                    .header("authorization", format!("Bearer {token}"))
                    .json(&ping),
            )
            .await;
        assert_eq!(
            (a.status, a.header("www-authenticate")),
            (
                400,
                Some("Bearer realm=\"loom\", error=\"invalid_request\"")
            ),
            "{}",
            a.text
        );
        assert_eq!(a.body["error"]["data"]["code"], "BAD_REQUEST", "{}", a.text);
        // the session lives on through all of that
        assert_eq!(c.request("ping", json!({})).await.status, 200);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn bearer_rules_per_auth_mode() {
    for t in servers(generous).await {
        let c = McpClient::new(&t, None, "");
        let a = c.request("tools/list", json!({})).await;
        assert_eq!(a.status, 401);
        assert_eq!(a.header("www-authenticate"), Some("Bearer realm=\"loom\""));
        let bad = McpClient::new(&t, Some("not-a-token"), "");
        let a = bad.request("ping", json!({})).await;
        assert_eq!(a.status, 401);
        assert!(
            a.header("www-authenticate")
                .unwrap()
                .contains("error=\"invalid_token\"")
        );
        // A refusal of the whole request names the request's id when it
        // is one request (clients match errors by id, and some drop the
        // body of one without); a batch's is id-less.
        let one = json!({"jsonrpc": "2.0", "id": "req-7", "method": "tools/list"});
        let a = bad.raw(one.clone()).await;
        assert_eq!(
            (a.status, &a.body["id"]),
            (401, &json!("req-7")),
            "{}",
            a.text
        );
        let a = bad.raw(json!([one.clone()])).await;
        assert_eq!(a.status, 401);
        assert!(a.body.get("id").is_none(), "{}", a.text);
        let mut gone = McpClient::new(&t, Some(&admin(&t)), "");
        gone.session = Some("0123456789abcdef0123456789abcdef".into());
        let a = gone.raw(one.clone()).await;
        assert_eq!(
            (a.status, &a.body["id"]),
            (404, &json!("req-7")),
            "{}",
            a.text
        );
        gone.version = "1999-01-01".into();
        let a = gone.raw(one.clone()).await;
        assert_eq!(
            (a.status, &a.body["id"]),
            (400, &json!("req-7")),
            "{}",
            a.text
        );
        // a token in the URL is ignored
        let token = admin(&t);
        let q = McpClient::new(&t, None, &format!("token={token}"));
        assert_eq!(q.request("ping", json!({})).await.status, 401);
        // notifications need no bearer
        assert_eq!(
            c.raw(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await
                .status,
            202
        );
        t.server.shutdown().await;
    }
    for t in servers(|c| {
        generous(c);
        c.mcp.auth_mode = loom_server::transport::mcp::config::AuthMode::DiscoveryOnly;
    })
    .await
    {
        let c = McpClient::new(&t, None, "");
        assert_eq!(c.request("tools/list", json!({})).await.status, 200);
        assert_eq!(
            c.request("tools/call", json!({"name": "loom_ops_capabilities"}))
                .await
                .status,
            401
        );
        // A session opened with no token is bound to the first bearer
        // that acts in it, also when two act at once; the other is told it
        // is gone. Until then the store keeps no row of it: callers without
        // a token add none.
        let sessions = "SELECT COUNT(*) FROM mcp_sessions";
        let mut opened = McpClient::new(&t, None, "");
        let init = opened.initialize("Some Client", "2025-11-25").await;
        assert_eq!(init.status, 200);
        assert_eq!(t.count(sessions).await, 0);
        let in_session = |subject: &str| {
            let token = t.token("default", subject, Role::Writer, &[]);
            let mut c = McpClient::new(&t, Some(&token), "");
            c.session.clone_from(&opened.session);
            c
        };
        let (alice, bob) = (in_session("alice"), in_session("bob"));
        let caps = json!({"name": "loom_ops_capabilities"});
        let (a, b) = tokio::join!(
            async {
                let mut s = Vec::new();
                for _ in 0..4 {
                    s.push(alice.request("tools/call", caps.clone()).await.status);
                }
                s
            },
            async {
                let mut s = Vec::new();
                for _ in 0..4 {
                    s.push(bob.request("tools/call", caps.clone()).await.status);
                }
                s
            }
        );
        // one of the two holds it, in every answer after its first
        let held = |s: &[u16]| s.iter().all(|s| *s == 200);
        let refused = |s: &[u16]| s.iter().all(|s| *s == 404);
        assert!(
            (held(&a) && refused(&b)) || (held(&b) && refused(&a)),
            "{a:?} {b:?}"
        );
        assert_eq!(t.count(sessions).await, 1);
        t.server.shutdown().await;
    }
    for t in servers(|c| {
        generous(c);
        c.mcp.auth_mode = loom_server::transport::mcp::config::AuthMode::Open;
    })
    .await
    {
        let c = McpClient::new(&t, Some("garbage"), "");
        let r = c.call("loom_ops_capabilities", json!({})).await;
        assert_eq!(r["isError"], false, "{r}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn listings_follow_toolset_and_profile() {
    for t in servers(generous).await {
        let token = admin(&t);
        let core = McpClient::new(&t, Some(&token), "");
        let list = core.request("tools/list", json!({})).await.body["result"].clone();
        let n = names(&list);
        for want in [
            "loom_memory_set",
            "loom_memory_get",
            "loom_memory_apply",
            "loom_context_pack",
            "loom_search",
            "loom_activate",
            "loom_op",
        ] {
            assert!(n.contains(&want.to_owned()), "{want} in {n:?}");
        }
        assert!(
            !n.contains(&"loom_memory_search".to_owned())
                && !n.contains(&"loom_search_query".to_owned())
        );
        assert!(!n.contains(&"loom_memory_unpin".to_owned()), "not on core");
        let get = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "loom_memory_get")
            .unwrap()
            .clone();
        assert_eq!(get["annotations"]["readOnlyHint"], true);
        assert!(get.get("outputSchema").is_none());
        // loom_op's hints are the most any op it routes may do: on core
        // and coding it routes destructive ops (blacklist.remove; on
        // coding memory.apply too); on readonly only reads.
        let hints = |list: &Value, name: &str| {
            list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap()["annotations"]
                .clone()
        };
        assert_eq!(
            (
                &hints(&list, "loom_op")["readOnlyHint"],
                &hints(&list, "loom_op")["destructiveHint"]
            ),
            (&json!(false), &json!(true))
        );
        let coding = McpClient::new(&t, Some(&token), "toolset=coding");
        let co = coding.request("tools/list", json!({})).await.body["result"].clone();
        assert_eq!(hints(&co, "loom_op")["destructiveHint"], true);
        // On all every op is listed, and loom_op runs each of them too.
        let all = McpClient::new(&t, Some(&token), "toolset=all");
        let everything = all.request("tools/list", json!({})).await.body["result"].clone();
        assert_eq!(hints(&everything, "loom_op")["destructiveHint"], true);
        // Every tool refuses an argument it does not name, and says so.
        for tool in everything["tools"].as_array().unwrap() {
            let closed = &tool["inputSchema"]["additionalProperties"];
            assert_eq!(closed, &json!(false), "{}", tool["name"]);
        }
        let extra = json!({"query": "deploy", "colour": "red"});
        let refused = all.call("loom_search", extra).await;
        assert_eq!(refused["isError"], true, "{refused}");
        let extra = json!({"op": "memory.get", "arguments": {"memory_key": "k"}, "colour": 1});
        let refused = all.call("loom_op", extra).await;
        assert_eq!(refused["isError"], true, "{refused}");
        let readonly = McpClient::new(&t, Some(&token), "toolset=readonly");
        let ro = readonly.request("tools/list", json!({})).await.body["result"].clone();
        // loom_op's example op name is one it reaches and the listing does
        // not show; on a listing that shows all it runs, it names none.
        let loom_op = |list: &Value| {
            list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == "loom_op")
                .unwrap()
                .clone()
        };
        let op_field = |list: &Value| {
            loom_op(list)["inputSchema"]["properties"]["op"]["description"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(
            op_field(&list).contains("such as memory.unpin"),
            "{}",
            op_field(&list)
        );
        for shows_all in [&everything, &ro] {
            assert!(
                !op_field(shows_all).contains("such as"),
                "{}",
                op_field(shows_all)
            );
            let about = loom_op(shows_all)["description"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(about.contains("use it for help"), "{about}");
            assert!(!about.contains(" 0 ops"), "{about}");
        }
        assert_eq!(
            (
                &hints(&ro, "loom_op")["readOnlyHint"],
                &hints(&ro, "loom_op")["destructiveHint"]
            ),
            (&json!(true), &json!(false))
        );
        assert!(
            get["inputSchema"]["properties"].get("agent").is_none(),
            "server-filled fields are not listed"
        );
        let typo = McpClient::new(&t, Some(&token), "toolset=corr");
        assert_eq!(
            names(&typo.request("tools/list", json!({})).await.body["result"]),
            n,
            "unknown toolset falls back"
        );
        let twice = McpClient::new(&t, Some(&token), "toolset=coding&toolset=atomic");
        let a = twice.request("tools/list", json!({})).await;
        assert_eq!(
            (a.status, names(&a.body["result"])),
            (200, n.clone()),
            "a parameter given two values names nothing"
        );
        let union = McpClient::new(
            &t,
            Some(&token),
            "toolset=atomic+coding&schema_profile=full",
        );
        let ul = union.request("tools/list", json!({})).await.body["result"].clone();
        let un = names(&ul);
        assert!(
            un.contains(&"loom_run_begin".to_owned())
                && un.contains(&"loom_working_memory_set".to_owned())
        );
        assert!(
            ul["tools"][0].get("outputSchema").is_some(),
            "full profile adds outputSchema"
        );
        let assistant = McpClient::new(&t, Some(&token), "toolset=assistant");
        let an = names(&assistant.request("tools/list", json!({})).await.body["result"]);
        assert!(an.contains(&"loom_memory_search".to_owned()));
        assert!(!an.contains(&"loom_op".to_owned()) && !an.contains(&"loom_search".to_owned()));
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn calls_write_read_and_shape_results() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        let set = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "deploy_window", "content": "Fridays 14:00 UTC"}),
            )
            .await;
        assert_eq!(set["isError"], false, "{set}");
        assert_eq!(set["structuredContent"]["version"], 1);
        let text: Value =
            serde_json::from_str(set["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text, set["structuredContent"],
            "content[0].text holds the same lean result"
        );
        let get = c
            .call("loom_memory_get", json!({"memory_key": "deploy_window"}))
            .await;
        assert_eq!(get["structuredContent"]["content"], "Fridays 14:00 UTC");
        assert_eq!(
            get["structuredContent"]["agent"], "cursor",
            "the client's name is the agent"
        );
        assert_eq!(get["structuredContent"].get("content_hash"), None, "lean");
        // What a call asks for by name is not trimmed away.
        let asked = c
            .call(
                "loom_memory_get",
                json!({"memory_key": "deploy_window", "fields": ["content_hash"], "include_recall_breakdown": true}),
            )
            .await;
        assert_eq!(
            asked["structuredContent"]["content_hash"]
                .as_str()
                .map(str::len),
            Some(64),
            "{asked}"
        );
        assert!(
            asked["structuredContent"]["recall_breakdown"].is_object(),
            "{asked}"
        );
        // idempotency over MCP: _idempotency_key replays without a second write
        let args = json!({"memory_key": "k2", "content": "v1", "_idempotency_key": "abc-1"});
        let first = c.call("loom_memory_set", args.clone()).await;
        let again = c.call("loom_memory_set", args).await;
        assert_eq!(first["structuredContent"], again["structuredContent"]);
        // the replay says it is one, as idempotent-replayed does over HTTP
        assert!(first.get("_meta").is_none(), "{first}");
        assert_eq!(again["_meta"], json!({"loom/replayed": true}), "{again}");
        let versions = t
            .count("SELECT COUNT(*) FROM memory_versions WHERE memory_key = 'k2'")
            .await;
        assert_eq!(versions, 1, "{}", t.name());
        // Both spellings of the key at once: refused, nothing written, as
        // two Idempotency-Key headers are over HTTP.
        let both = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "k3", "content": "v", "_idempotency_key": "a", "idempotency_key": "b"}),
            )
            .await;
        assert_eq!(both["structuredContent"]["code"], "BAD_REQUEST", "{both}");
        // loom_op takes the key inside `arguments`, and says so.
        let outside = c
            .call(
                "loom_op",
                json!({"op": "memory.set", "arguments": {"memory_key": "k3", "content": "v"}, "_idempotency_key": "a"}),
            )
            .await;
        assert_eq!(
            (
                &outside["structuredContent"]["code"],
                &outside["structuredContent"]["did_you_mean"]
            ),
            (
                &json!("UNKNOWN_ARGUMENT"),
                &json!({"_idempotency_key": "arguments._idempotency_key"})
            ),
            "{outside}"
        );
        let k3 = t
            .count("SELECT COUNT(*) FROM memories WHERE memory_key = 'k3'")
            .await;
        assert_eq!(k3, 0, "{}: nothing written", t.name());
        // loom_search: four sections and a summary beside the lean result
        let s = c
            .call(
                "loom_search",
                json!({"query": "deploy window", "top_k": 500}),
            )
            .await;
        assert_eq!(s["isError"], false, "{s}");
        for section in ["memory", "profile", "knowledge", "conversations"] {
            assert!(s["structuredContent"][section].is_array(), "{section}: {s}");
        }
        assert_eq!(
            s["structuredContent"]["memory"][0]["memory_key"],
            "deploy_window"
        );
        assert!(
            s["content"][1]["text"]
                .as_str()
                .unwrap()
                .starts_with("memory: 1 (deploy_window)")
        );
        // its options are lenient: names it does not know, or that are not
        // names, are read as the defaults; the result says what was used
        for (recipe, bodies, used) in [
            (json!("fastest"), json!("summaries"), ["balanced", "full"]),
            (json!(7), json!(["none"]), ["balanced", "full"]),
            (json!("RECENT"), json!("none"), ["recent", "none"]),
        ] {
            let s = c
                .call(
                    "loom_search",
                    json!({"query": "deploy window", "recipe": recipe, "bodies": bodies}),
                )
                .await;
            assert_eq!(s["isError"], false, "{s}");
            let out = &s["structuredContent"];
            assert_eq!([&out["recipe"], &out["bodies"]], used, "{s}");
            let hit = &out["memory"][0];
            assert_eq!(hit["memory_key"], "deploy_window", "{s}");
            assert_eq!(hit.get("content").is_none(), used[1] == "none", "{s}");
        }
        // loom_op runs what core does not list, and helps find it
        let help = c
            .call("loom_op", json!({"op": "help", "query": "unpin"}))
            .await;
        let ops = help["structuredContent"]["ops"].as_array().unwrap();
        assert!(ops.len() <= 15 && ops[0]["op"] == "memory.unpin", "{help}");
        assert_eq!(ops[0]["required"], json!(["memory_key"]));
        // a query that is no text is refused, not read as none
        let bad = c.call("loom_op", json!({"op": "help", "query": 5})).await;
        assert_eq!(
            bad["structuredContent"]["code"], "INVALID_ARGUMENTS",
            "{bad}"
        );
        assert_eq!(
            bad["structuredContent"]["errors"],
            json!(["query: Input should be a valid string [string_type], got number"]),
            "{bad}"
        );
        c.call("loom_memory_pin", json!({"memory_key": "deploy_window"}))
            .await;
        let unpin = c
            .call(
                "loom_op",
                json!({"op": "memory.unpin", "arguments": {"memory_key": "deploy_window"}}),
            )
            .await;
        assert_eq!(unpin["isError"], false, "{unpin}");
        // A misspelt key of loom_op's own runs nothing, rather than the op
        // without its arguments.
        let typo = c
            .call(
                "loom_op",
                json!({"op": "memory.delete", "argumnts": {"memory_key": "deploy_window"}}),
            )
            .await;
        assert_eq!(
            (
                &typo["isError"],
                &typo["structuredContent"]["code"],
                &typo["structuredContent"]["did_you_mean"]
            ),
            (
                &json!(true),
                &json!("UNKNOWN_ARGUMENT"),
                &json!({"argumnts": "arguments"})
            ),
            "{typo}"
        );
        let still = c
            .call("loom_memory_get", json!({"memory_key": "deploy_window"}))
            .await;
        assert_eq!(still["isError"], false, "{still}");
        let extra = c.call("loom_activate", json!({"verbose": true})).await;
        assert_eq!(
            extra["structuredContent"]["code"], "INVALID_ARGUMENTS",
            "{extra}"
        );
        // each part a clause, the whole a sentence
        assert_eq!(
            extra["structuredContent"]["message"],
            "loom_activate: unknown 'verbose'. Nothing was run.",
            "{extra}"
        );
        assert!(
            typo["structuredContent"]["message"]
                .as_str()
                .unwrap()
                .ends_with("did you mean 'arguments'? Nothing was run."),
            "{typo}"
        );
        // An op without arguments names the one it was sent.
        let caps = c
            .call(
                "loom_op",
                json!({"op": "ops.capabilities", "arguments": {"opps": 1}}),
            )
            .await;
        assert_eq!(
            caps["structuredContent"]["unknown"],
            json!({"opps": null}),
            "{caps}"
        );
        let activate = c.call("loom_activate", json!({})).await;
        assert!(
            activate["structuredContent"]["primer"]
                .as_str()
                .unwrap()
                .contains("Default workspace: org default")
        );
        // One session primer: a new session's initialize instructions are
        // the loom prompt's text, the caller's profile in both.
        let set = c
            .call(
                "loom_op",
                json!({"op": "profile.set", "arguments": {"persona": "terse reviewer"}}),
            )
            .await;
        assert_eq!(set["isError"], false, "{set}");
        let mut again = McpClient::new(&t, Some(&token), "");
        let init = again.initialize("Cursor", "2025-11-25").await;
        let instructions = init.body["result"]["instructions"]
            .as_str()
            .unwrap()
            .to_owned();
        let prompt = again.request("prompts/get", json!({"name": "loom"})).await;
        assert_eq!(
            prompt.body["result"]["messages"][0]["content"]["text"], instructions,
            "{instructions}"
        );
        assert!(instructions.contains("terse reviewer"), "{instructions}");
        t.server.shutdown().await;
    }
}

/// NAMESPACE_NOT_ACCESSIBLE is worded by the namespace's kind: how to get
/// access for a shared namespace, none for someone's personal one; MCP adds
/// a next step for any but a collection.
#[tokio::test]
async fn an_inaccessible_namespace_is_refused_as_its_kind_calls_for() {
    for t in servers(generous).await {
        for (namespace, kind) in [
            ("team2", "memory"),
            ("shared", "collection"),
            ("alice", "personal"),
        ] {
            sqlx::query("INSERT INTO namespaces (org, namespace, kind, created_ms) VALUES ('default', $1, $2, 0)")
                .bind(namespace)
                .bind(kind)
                .execute(t.db.store.writer())
                .await
                .unwrap();
        }
        let token = t.token("default", "bob", Role::Writer, &["default"]);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("kinds", "2025-11-25").await;
        let refusal = |namespace: &'static str| {
            let c = &c;
            async move {
                let r = c
                    .call(
                        "loom_memory_get",
                        json!({"memory_key": "k", "namespace": namespace}),
                    )
                    .await;
                assert_eq!(
                    r["structuredContent"]["code"], "NAMESPACE_NOT_ACCESSIBLE",
                    "{r}"
                );
                r["structuredContent"].clone()
            }
        };
        let team = refusal("team2").await;
        assert!(
            team["message"].as_str().unwrap().contains("grants.set"),
            "{team}"
        );
        assert!(
            team["next_step"].as_str().unwrap().contains("grants.set"),
            "{team}"
        );
        let shared = refusal("shared").await;
        assert!(
            shared["message"].as_str().unwrap().contains("grants.set"),
            "{shared}"
        );
        assert_eq!(shared["kind"], "collection");
        assert!(shared.get("next_step").is_none(), "{shared}");
        let alice = refusal("alice").await;
        assert!(
            !alice["message"].as_str().unwrap().contains("grants.set"),
            "{alice}"
        );
        assert!(
            alice["message"].as_str().unwrap().contains("personal"),
            "{alice}"
        );
        let next = alice["next_step"].as_str().unwrap();
        assert!(
            next.contains("namespace.list_mine") && !next.contains("grants.set"),
            "{next}"
        );
        t.server.shutdown().await;
    }
}

/// Arguments MCP takes out before the op's check (the idempotency key) or
/// that are no object at all are refused in the same documented shape.
#[tokio::test]
async fn every_invalid_arguments_refusal_has_the_documented_parts() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("shape-check", "2025-11-25").await;
        for (tool, args) in [
            (
                "loom_memory_set",
                json!({"memory_key": "a", "content": "b", "_idempotency_key": 123}),
            ),
            ("loom_memory_get", json!([1])),
            (
                "loom_memory_get",
                json!({"memory_key": "a", "fields": "abc"}),
            ),
        ] {
            let r = c.call(tool, args.clone()).await;
            assert_eq!(r["isError"], true, "{r}");
            let s = &r["structuredContent"];
            assert_eq!(s["code"], "INVALID_ARGUMENTS", "{tool} {args}: {s}");
            for part in ["errors", "required", "optional", "example"] {
                assert!(s.get(part).is_some(), "{tool} {args}: no {part}: {s}");
            }
            assert!(!s["errors"].as_array().unwrap().is_empty(), "{s}");
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("\nexample: "), "{text}");
        }
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memories WHERE memory_key = 'a'")
                .await,
            0,
            "nothing written"
        );
        // An op that is not idempotent is refused a key as over HTTP,
        // saying so, not as an unknown argument; it runs nothing.
        let r = c
            .call(
                "loom_op",
                json!({"op": "run.begin", "arguments": {"run_id": "r1", "_idempotency_key": "k"}}),
            )
            .await;
        assert_eq!(r["structuredContent"]["code"], "BAD_REQUEST", "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("run.begin is not idempotent"), "{text}");
        assert_eq!(
            t.count("SELECT COUNT(*) FROM runs WHERE run_id = 'r1'")
                .await,
            0,
            "{}",
            t.name()
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn errors_are_results_the_model_can_act_on() {
    for t in servers(generous).await {
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        let r = c
            .call("loom_memory_get", json!({"key": "deploy_window"}))
            .await;
        assert_eq!(r["isError"], true);
        let text = r["content"][0]["text"].as_str().unwrap();
        // the spec's own example, word for word, then the class in words
        assert_eq!(
            text,
            "memory.get: invalid arguments.\n\
             memory_key: Field required [missing]\n\
             unknown 'key' — did you mean 'memory_key'?\n\
             required: memory_key\n\
             optional: if_version, include_recall_breakdown, as_of, fields, follow\n\
             example: {\"memory_key\": \"deploy_window\"}\n\
             (validation: fix the arguments before retrying)"
        );
        let s = &r["structuredContent"];
        assert_eq!(s["unknown"], json!({"key": "memory_key"}));
        assert_eq!(s["op"], "memory.get");
        assert!(s["example"]["memory_key"].is_string());
        // a near-miss key on a write is refused, nothing written
        let r = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "x", "contnet": "y"}),
            )
            .await;
        assert_eq!(r["structuredContent"]["code"], "UNKNOWN_ARGUMENT", "{r}");
        assert_eq!(t.count("SELECT COUNT(*) FROM memories").await, 0);
        // so is a near miss of the idempotency key MCP takes out
        let r = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y", "_idempotency_kye": "k1"}),
            )
            .await;
        assert_eq!(r["structuredContent"]["code"], "UNKNOWN_ARGUMENT", "{r}");
        assert_eq!(
            r["structuredContent"]["did_you_mean"],
            json!({"_idempotency_kye": "_idempotency_key"}),
            "{r}"
        );
        assert_eq!(t.count("SELECT COUNT(*) FROM memories").await, 0);
        // `key`, as close to it by its last word as to memory_key, means
        // the op's own field
        let r = c
            .call("loom_memory_set", json!({"key": "x", "content": "y"}))
            .await;
        assert_eq!(
            r["structuredContent"]["did_you_mean"],
            json!({"key": "memory_key"}),
            "{r}"
        );
        // a key that is only a word of the idempotency key MCP takes out is
        // no near miss of it: a write whose own arguments nothing like it
        // is refused as unknown, naming no suggestion
        let r = c
            .call(
                "loom_working_memory_set",
                json!({"key": "w1", "content": "x", "run_id": "r1"}),
            )
            .await;
        assert_eq!(
            (
                &r["structuredContent"]["code"],
                &r["structuredContent"]["unknown"]
            ),
            (&json!("INVALID_ARGUMENTS"), &json!({"key": null})),
            "{r}"
        );
        // the example of an op that previews previews, and runs as it is:
        // a filter sent wrong gets one that names something
        let r = c
            .call(
                "loom_memory_apply",
                json!({"action": "delete", "filter": {"kind": 5}}),
            )
            .await;
        let example = r["structuredContent"]["example"].clone();
        assert_eq!(
            example,
            json!({"action": "delete", "filter": {"key_prefix": "drafts/"}, "dry_run": true}),
            "{r}"
        );
        let r = c.call("loom_memory_apply", example).await;
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["dry_run"], true, "{r}");
        // hidden ops are not served; search.query is only loom_search
        let r = c.call("loom_memory_search", json!({"query": "x"})).await;
        assert_eq!(r["structuredContent"]["code"], "OP_NOT_ON_MCP");
        assert!(
            r["structuredContent"]["instead"]
                .as_str()
                .unwrap()
                .contains("loom_search")
        );
        let r = c
            .request(
                "tools/call",
                json!({"name": "loom_search_query", "arguments": {"query": "x"}}),
            )
            .await;
        assert_eq!(r.body["error"]["code"], -32602);
        // access refusals carry status, category and the class in words
        let viewer = t.token("default", "vic", Role::Viewer, &[]);
        let v = McpClient::new(&t, Some(&viewer), "");
        let r = v
            .call(
                "loom_memory_set",
                json!({"memory_key": "a", "content": "b"}),
            )
            .await;
        assert_eq!(r["isError"], true);
        assert_eq!(r["structuredContent"]["code"], "AUTH_INSUFFICIENT");
        assert_eq!(r["structuredContent"]["status"], 403);
        assert_eq!(r["structuredContent"]["category"], "auth");
        assert_eq!(r["structuredContent"]["required_role"], "writer");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("(auth: do not retry unchanged)")
        );
        // readonly: loom_op routes reads only; assistant: only its reads
        let ro = McpClient::new(&t, Some(&token), "toolset=readonly");
        let r = ro
            .call(
                "loom_op",
                json!({"op": "memory.delete", "arguments": {"memory_key": "a"}}),
            )
            .await;
        assert_eq!(r["isError"], true, "{r}");
        let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text["code"], "OP_NOT_ON_MCP",
            "loom_op's refusals are JSON text"
        );
        let asst = McpClient::new(&t, Some(&token), "toolset=assistant");
        for tool in ["loom_memory_set", "loom_op", "loom_search"] {
            let r = asst.call(tool, json!({})).await;
            assert_eq!(r["structuredContent"]["code"], "UNKNOWN_OP", "{tool}: {r}");
        }
        t.server.shutdown().await;
    }
}

/// JSON Schema counts `2.0` as an integer, so a client that checks its
/// call against the listed schema may send one: it is taken as the integer.
/// A whole number past an `i64` is refused by name, and nothing is written.
#[tokio::test]
async fn whole_numbers_sent_as_floats_are_taken_and_too_wide_ones_refused_by_name() {
    for t in servers(generous).await {
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        for content in ["one", "two", "three"] {
            let r = c
                .call(
                    "loom_memory_set",
                    json!({"memory_key": "k", "content": content}),
                )
                .await;
            assert_eq!(r["isError"], false, "{r}");
        }
        let r = c
            .call(
                "loom_memory_history",
                json!({"memory_key": "k", "limit": 2.0}),
            )
            .await;
        assert_eq!(r["isError"], false, "{r}");
        let versions = r["structuredContent"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 2, "{r}");
        let r = c
            .call(
                "loom_memory_update",
                json!({"memory_key": "k", "content": "four", "if_version": 3e0}),
            )
            .await;
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["version"], 4, "{r}");

        let r = c
            .call(
                "loom_memory_update",
                json!({"memory_key": "k", "content": "five", "if_version": 1e19}),
            )
            .await;
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["structuredContent"]["code"], "INVALID_ARGUMENTS", "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "memory.update: invalid arguments.\nif_version: Input should be an integer \
                 from -9223372036854775808 to 9223372036854775807 [int_range]"
            ),
            "{text}"
        );
        let r = c.call("loom_memory_get", json!({"memory_key": "k"})).await;
        assert_eq!(r["structuredContent"]["content"], "four", "{r}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn rate_limited_calls_refuse_with_the_wait() {
    for t in servers(|c| {
        generous(c);
        c.rate_write_per_min = 1;
        c.mcp.ratelimit_retry_max_wait = std::time::Duration::ZERO;
    })
    .await
    {
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        let first = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "a", "content": "b"}),
            )
            .await;
        assert_eq!(first["isError"], false);
        let second = c
            .call(
                "loom_memory_set",
                json!({"memory_key": "a", "content": "c"}),
            )
            .await;
        assert_eq!(second["structuredContent"]["code"], "RATE_LIMITED");
        assert!(
            second["structuredContent"]["retry_after_s"]
                .as_u64()
                .unwrap()
                >= 1
        );
        assert!(
            second["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("(rate limit: retry after the wait)")
        );
        t.server.shutdown().await;
    }
}

/// The wait a rate-limited call sits out is one for the whole request: in
/// a batch, the calls after the one that waited are refused with the wait
/// rather than each held for its own.
#[tokio::test]
async fn a_batch_sits_out_one_rate_limit_wait_in_all() {
    for t in servers(|c| {
        generous(c);
        // 30 a minute: a full bucket of 30, then a token every 2 s.
        c.rate_write_per_min = 30;
        c.mcp.ratelimit_retry_max_wait = std::time::Duration::from_secs(2);
    })
    .await
    {
        let n = t.name();
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        for i in 0..30 {
            let r = c
                .call(
                    "loom_memory_set",
                    json!({"memory_key": format!("k{i}"), "content": "x"}),
                )
                .await;
            assert_eq!(r["isError"], false, "{n} set {i}: {r}");
        }
        let calls: Vec<Value> = (0..3)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                    "name": "loom_memory_set",
                    "arguments": {"memory_key": format!("b{i}"), "content": "x"}}})
            })
            .collect();
        let batch = c.raw(Value::Array(calls)).await;
        let answers = batch.body.as_array().unwrap();
        let codes: Vec<&str> = answers
            .iter()
            .map(|a| {
                a["result"]["structuredContent"]["code"]
                    .as_str()
                    .unwrap_or("ok")
            })
            .collect();
        assert_eq!(
            codes,
            ["ok", "RATE_LIMITED", "RATE_LIMITED"],
            "{n}: {answers:?}"
        );
        t.server.shutdown().await;
    }
}

/// Each session a token opens is a row the store keeps: a client that
/// initializes in a loop spends the caller's write budget, and past it is
/// refused with the wait, no row added.
#[tokio::test]
async fn opening_sessions_is_rate_limited() {
    for t in servers(|c| {
        generous(c);
        c.rate_write_per_min = 2;
    })
    .await
    {
        let n = t.name();
        let token = admin(&t);
        for _ in 0..2 {
            let mut c = McpClient::new(&t, Some(&token), "");
            let a = c.initialize("Cursor", "2025-11-25").await;
            assert!(a.body["result"].is_object(), "{n}: {}", a.text);
        }
        let mut c = McpClient::new(&t, Some(&token), "");
        let a = c.initialize("Cursor", "2025-11-25").await;
        let error = &a.body["error"];
        assert_eq!(error["code"], -32000, "{n}: {}", a.text);
        assert_eq!(error["data"]["code"], "RATE_LIMITED", "{n}: {}", a.text);
        assert!(error["data"]["retry_after_s"].as_u64().unwrap() >= 1, "{n}");
        assert!(a.header("mcp-session-id").is_none(), "{n}");
        assert_eq!(t.count("SELECT COUNT(*) FROM mcp_sessions").await, 2, "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_short_rate_limit_wait_is_sat_out_once_in_one_call() {
    for t in servers(|c| {
        generous(c);
        // 60 a minute: a full bucket of 60, then a token a second.
        c.rate_write_per_min = 60;
        c.mcp.ratelimit_retry_max_wait = std::time::Duration::from_secs(2);
    })
    .await
    {
        let token = admin(&t);
        let c = McpClient::new(&t, Some(&token), "");
        for i in 0..61 {
            let r = c
                .call(
                    "loom_memory_set",
                    json!({"memory_key": format!("k{i}"), "content": "x"}),
                )
                .await;
            assert_eq!(r["isError"], false, "set {i}: {r}");
        }
        // The 61st waited for its token inside the call: one ledger row,
        // not a refusal and a second try.
        t.flush_ledger().await;
        assert_eq!(
            t.count("SELECT COUNT(*) FROM agent_events WHERE op = 'memory.set' AND outcome = 'ok'")
                .await,
            61
        );
        assert_eq!(
            t.count("SELECT COUNT(*) FROM agent_events WHERE outcome = 'RATE_LIMITED'")
                .await,
            0
        );
        t.server.shutdown().await;
    }
}

/// On the full profile each tool lists an `outputSchema`, and clients (the
/// TypeScript SDK's `callTool`) check every result's `structuredContent`
/// against it, a refusal's too: the lean answers, an `explain: true` answer
/// and refusals must all conform.
#[tokio::test]
async fn full_profile_results_conform_to_their_listed_output_schema() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "toolset=all&schema_profile=full");
        c.initialize("schema-check", "2025-11-25").await;
        let list = c.request("tools/list", json!({})).await.body["result"].clone();
        let schemas: std::collections::HashMap<String, jsonschema::Validator> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| {
                let schema = tool.get("outputSchema")?;
                let v = jsonschema::draft202012::new(schema)
                    .unwrap_or_else(|e| panic!("{}: {e}", tool["name"]));
                Some((tool["name"].as_str().unwrap().to_owned(), v))
            })
            .collect();
        assert!(schemas.len() > 20, "{}", schemas.len());
        let run = c.call("loom_run_begin", json!({"goal": "check"})).await;
        let run_id = run["structuredContent"]["run_id"].clone();
        let calls = [
            (
                "loom_memory_set",
                json!({"memory_key": "a", "content": "alpha beta", "labels": ["x"]}),
                true,
            ),
            (
                "loom_memory_set",
                json!({"memory_key": "b", "content": "beta gamma"}),
                true,
            ),
            (
                "loom_memory_update",
                json!({"memory_key": "a", "content": "alpha beta delta"}),
                true,
            ),
            ("loom_memory_get", json!({"memory_key": "a"}), true),
            (
                "loom_memory_get",
                json!({"memory_key": "a", "explain": true}),
                true,
            ),
            (
                "loom_memory_get",
                json!({"memory_key": "a", "fields": ["content_hash"], "include_recall_breakdown": true}),
                true,
            ),
            ("loom_memory_history", json!({"memory_key": "a"}), true),
            ("loom_memory_list", json!({}), true),
            ("loom_memory_inspect", json!({"memory_key": "a"}), true),
            ("loom_memory_provenance", json!({"memory_key": "a"}), true),
            ("loom_memory_ask", json!({"question": "what is beta"}), true),
            ("loom_memory_aggregate", json!({"group_by": "kind"}), true),
            ("loom_memory_pin", json!({"memory_key": "a"}), true),
            ("loom_memory_unpin", json!({"memory_key": "a"}), true),
            ("loom_memory_lock", json!({"memory_key": "b"}), true),
            ("loom_memory_unlock", json!({"memory_key": "b"}), true),
            (
                "loom_memory_apply",
                json!({"action": "label", "filter": {"key_prefix": "a"}, "labels": ["y"], "dry_run": true}),
                true,
            ),
            ("loom_memory_delete", json!({"memory_key": "b"}), true),
            ("loom_blacklist_add", json!({"pattern": "secret*"}), true),
            ("loom_context_pack", json!({"task": "alpha"}), true),
            ("loom_grants_list", json!({}), true),
            ("loom_namespace_get", json!({}), true),
            ("loom_namespace_list_mine", json!({}), true),
            ("loom_profile_set", json!({"persona": "tester"}), true),
            ("loom_profile_get", json!({}), true),
            (
                "loom_working_memory_set",
                json!({"content": "scratch", "run_id": run_id}),
                true,
            ),
            (
                "loom_working_memory_append",
                json!({"content": "more", "run_id": run_id}),
                true,
            ),
            ("loom_run_get", json!({"run_id": run_id}), true),
            ("loom_run_list", json!({}), true),
            (
                "loom_run_complete",
                json!({"run_id": run_id, "status": "succeeded"}),
                true,
            ),
            ("loom_ops_capabilities", json!({}), true),
            // The synthetic tools list their answers too.
            ("loom_search", json!({"query": "alpha beta"}), true),
            (
                "loom_search",
                json!({"query": "alpha", "explain": true, "bodies": "none"}),
                true,
            ),
            ("loom_activate", json!({}), true),
            (
                "loom_op",
                json!({"op": "memory.get", "arguments": {"memory_key": "a"}}),
                true,
            ),
            ("loom_op", json!({"op": "help", "query": "pin"}), true),
            ("loom_activate", json!({"x": 1}), false),
            // Refusals: invalid arguments, not found, a conflict.
            ("loom_memory_get", json!({"key": "a"}), false),
            ("loom_memory_get", json!({"memory_key": "nope"}), false),
            (
                "loom_memory_set",
                json!({"memory_key": "c", "content": "secret plan"}),
                false,
            ),
            ("loom_run_get", json!({"run_id": "no-such-run"}), false),
        ];
        for (tool, args, ok) in calls {
            let r = c.call(tool, args.clone()).await;
            assert_eq!(r["isError"], !ok, "{tool} {args}: {r}");
            let structured = &r["structuredContent"];
            assert!(structured.is_object(), "{tool} {args}: {r}");
            let errors: Vec<String> = schemas[tool]
                .iter_errors(structured)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{tool} {args}: {errors:?}\n{structured}");
        }
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn older_revisions_get_only_the_fields_they_know() {
    for t in servers(generous).await {
        let token = admin(&t);
        let mut c = McpClient::new(&t, Some(&token), "schema_profile=full");
        c.initialize("old", "2024-11-05").await;
        let list = c.request("tools/list", json!({})).await.body["result"].clone();
        for tool in list["tools"].as_array().unwrap() {
            assert!(
                tool.get("annotations").is_none()
                    && tool.get("outputSchema").is_none()
                    && tool.get("title").is_none(),
                "{tool}"
            );
        }
        let r = c.call("loom_ops_capabilities", json!({})).await;
        assert!(r.get("structuredContent").is_none());
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("ops.capabilities")
        );
        // A refusal's body (its code, status and wait) is a second text
        // block where there is no structuredContent to carry it.
        let r = c
            .call("loom_memory_get", json!({"memory_key": "nowhere"}))
            .await;
        assert_eq!(r["isError"], true, "{r}");
        assert!(r.get("structuredContent").is_none(), "{r}");
        let body: Value = serde_json::from_str(r["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            (body["code"].as_str(), body["status"].as_u64()),
            (Some("RESOURCE_NOT_FOUND"), Some(404)),
            "{r}"
        );
        t.server.shutdown().await;
    }
}

/// loom_search names no namespace: a caller whose default namespace does
/// not exist in its org searches the others it may read, rather than being
/// refused; with none to read, the missing default is said.
#[tokio::test]
async fn loom_search_goes_on_without_a_default_namespace_that_does_not_exist() {
    for t in servers(generous).await {
        let n = t.name();
        t.create_namespace("globex", "gx").await;
        let token = t.token("globex", "gia", Role::Writer, &[]);
        let set = t
            .post(
                "memory.set",
                Some(&token),
                json!({"namespace": "gx", "memory_key": "plan", "content": "the quarterly plan"}),
            )
            .await;
        assert_eq!(set.status, 200, "{n}: {}", set.text);
        let mut c = McpClient::new(&t, Some(&token), "");
        c.initialize("Cursor", "2025-11-25").await;
        let s = c
            .call("loom_search", json!({"query": "quarterly plan"}))
            .await;
        assert_eq!(s["isError"], false, "{n}: {s}");
        assert_eq!(
            s["structuredContent"]["namespaces"],
            json!(["gx"]),
            "{n}: {s}"
        );
        assert_eq!(
            s["structuredContent"]["memory"][0]["memory_key"], "plan",
            "{n}: {s}"
        );
        let lone = t.token("initech", "ian", Role::Writer, &[]);
        let refused = t
            .post("search.query", Some(&lone), json!({"query": "plan"}))
            .await;
        assert_eq!(
            (refused.status, refused.code()),
            (404, "RESOURCE_NOT_FOUND"),
            "{n}: {}",
            refused.text
        );
        t.server.shutdown().await;
    }
}
