//! Live fuzzing of `/mcp` over a real socket: generated JSON-RPC batches
//! (mostly `tools/call` of real tools with arguments of any shape, beside
//! messages with every field sometimes wrong) and malformed bodies (the same
//! batches cut, spliced with random bytes, or arbitrary bytes). Every answer
//! must be a 4xx, a 202 for notifications only, or a 200 whose body is
//! JSON-RPC responses (each a result or an error, never an internal fault);
//! the server stays up, and control rows (one the caller may reach but the
//! generator never names, one in another org it names freely) read back
//! unchanged afterwards.

use loom_core::Role;
use loom_tests::{TestServer, servers};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::fuzz::{json_value, rpc_message};

const CASES: u32 = 96;

/// Argument values: mostly plausible, sometimes anything.
fn argument() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop_oneof![
            Just(json!("a")),
            Just(json!("secret")),
            Just(json!("globex")),
            Just(json!("vault")),
            Just(json!("default")),
            Just(json!(1)),
            Just(json!(-1)),
            Just(json!(true)),
            Just(json!("x".repeat(5000))),
            "[a-z0-9_.-]{0,16}".prop_map(Value::from),
        ],
        1 => json_value(),
    ]
}

/// `tools/call` of a real tool (or a near miss) with arguments of any shape.
fn tool_call() -> impl Strategy<Value = Value> {
    let tool = prop_oneof![
        Just("loom_memory_set"),
        Just("loom_memory_get"),
        Just("loom_memory_update"),
        Just("loom_memory_list"),
        Just("loom_memory_history"),
        Just("loom_memory_delete"),
        Just("loom_memory_pin"),
        Just("loom_search"),
        Just("loom_activate"),
        Just("loom_op"),
        Just("loom_nope"),
    ];
    let field = prop_oneof![
        Just("memory_key"),
        Just("key"),
        Just("content"),
        Just("agent"),
        Just("org"),
        Just("namespace"),
        Just("if_version"),
        Just("_idempotency_key"),
        Just("explain"),
        Just("query"),
        Just("top_k"),
        Just("limit"),
        Just("cursor"),
        Just("op"),
        Just("arguments"),
    ];
    let args = prop_oneof![
        6 => prop::collection::vec((field, argument()), 0..6).prop_map(|fs| {
            Value::Object(fs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>())
        }),
        1 => json_value(),
    ];
    (
        prop::option::of(prop_oneof![any::<i64>().prop_map(Value::from), ".{0,8}".prop_map(Value::from), json_value()]),
        tool,
        args,
    )
        .prop_map(|(id, tool, args)| {
            let mut m = json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": tool, "arguments": args}});
            if let Some(id) = id {
                m["id"] = id;
            }
            m
        })
}

/// A body: one message, a batch, or bytes that are neither.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let message = prop_oneof![3 => tool_call(), 1 => rpc_message()];
    let batch = prop::collection::vec(message, 0..70);
    prop_oneof![
        // a batch, or its first message alone
        4 => (batch.clone(), any::<bool>()).prop_map(|(b, single)| {
            if single && !b.is_empty() { b[0].to_string() } else { Value::Array(b).to_string() }.into_bytes()
        }),
        // cut short, or with random bytes spliced in
        2 => (batch, any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 0..8)).prop_map(
            |(b, at, junk)| {
                let mut bytes = Value::Array(b).to_string().into_bytes();
                let i = at.index(bytes.len() + 1);
                if junk.is_empty() {
                    bytes.truncate(i);
                } else {
                    bytes.splice(i..i, junk);
                }
                bytes
            }
        ),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

/// Whether `r` is one JSON-RPC response: a result or an error, and no
/// internal fault. A result answers a request, so it has its id (a string or
/// a number); an error has none when the message had no usable id (MCP's
/// `RequestId` cannot be null).
fn check_response(r: &Value) -> Result<(), String> {
    let id_ok = r
        .get("id")
        .is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64());
    if r["jsonrpc"] != "2.0" || !id_ok {
        return Err(format!("not a JSON-RPC response: {r}"));
    }
    match (r.get("result"), r.get("error")) {
        (Some(_), None) if r.get("id").is_some() => Ok(()),
        (None, Some(e)) if e["code"].is_i64() && e["message"].is_string() => {
            if e["data"]["code"] == "INTERNAL" {
                Err(format!("an internal fault: {r}"))
            } else {
                Ok(())
            }
        }
        _ => Err(format!("neither a result nor an error: {r}")),
    }
}

/// Responses seen: tool results served, tool refusals (`isError`), JSON-RPC errors.
#[derive(Debug, Default)]
struct Tally {
    served: usize,
    refused: usize,
    rpc_errors: usize,
}

impl Tally {
    fn count(&mut self, r: &Value) {
        match (r.get("error"), r["result"]["isError"].as_bool()) {
            (Some(_), _) => self.rpc_errors += 1,
            (None, Some(true)) => self.refused += 1,
            (None, _) => self.served += 1,
        }
    }
}

fn check_answer(status: u16, text: &str, tally: &mut Tally) -> Result<(), String> {
    match status {
        202 if text.is_empty() => Ok(()),
        200 => {
            let rs = match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(rs)) if !rs.is_empty() => rs,
                Ok(r @ Value::Object(_)) => vec![r],
                _ => return Err(format!("200 without JSON-RPC responses: {text}")),
            };
            rs.iter().try_for_each(|r| {
                tally.count(r);
                check_response(r)
            })
        }
        400..=499 => Ok(()),
        _ => Err(format!("{status}: {text}")),
    }
}

async fn read(t: &TestServer, token: &str, args: Value) -> (u16, Value, Value) {
    let a = t.post("memory.get", Some(token), args).await;
    (
        a.status,
        a.body["content"].clone(),
        a.body["version"].clone(),
    )
}

#[test]
fn generated_batches_and_broken_bodies_over_a_real_socket() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for t in rt.block_on(servers(loom_tests::generous)) {
        let n = t.name();
        let token = t.token("default", "fuzzer", Role::Writer, &["default"]);
        let (globex, control) = rt.block_on(async {
            sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ('globex', 0)")
                .execute(t.db.store.writer())
                .await
                .expect("org");
            sqlx::query(
                "INSERT INTO namespaces (org, namespace, created_ms) VALUES ('globex', 'vault', 0)",
            )
            .execute(t.db.store.writer())
            .await
            .expect("namespace");
            let globex = t.token("globex", "gina", Role::Writer, &["vault"]);
            for (tok, key) in [(&token, "fuzz-control"), (&globex, "secret")] {
                let a = t
                    .post(
                        "memory.set",
                        Some(tok),
                        json!({"memory_key": key, "content": "the control's content"}),
                    )
                    .await;
                assert_eq!(a.status, 200, "{n}: {}", a.text);
            }
            let control = (
                read(&t, &token, json!({"memory_key": "fuzz-control"})).await,
                read(&t, &globex, json!({"memory_key": "secret"})).await,
            );
            (globex, control)
        });
        let url = format!("{}/mcp", t.url());
        let client = reqwest::Client::new();
        let statuses = std::cell::RefCell::new(std::collections::BTreeMap::<u16, usize>::new());
        let tally = std::cell::RefCell::new(Tally::default());
        let mut runner = TestRunner::new(ProptestConfig {
            cases: CASES,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        runner
            .run(&body(), |bytes| {
                let (status, text, healthy) = rt.block_on(async {
                    let resp = client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .header("mcp-protocol-version", "2025-11-25")
                        .body(bytes.clone())
                        .send()
                        .await
                        .expect("the server answers");
                    let status = resp.status().as_u16();
                    let text = resp.text().await.unwrap_or_default();
                    let health = client
                        .get(format!("{}/healthz", t.url()))
                        .send()
                        .await
                        .map(|r| r.status().as_u16());
                    (status, text, health)
                });
                *statuses.borrow_mut().entry(status).or_default() += 1;
                check_answer(status, &text, &mut tally.borrow_mut()).map_err(|e| {
                    TestCaseError::fail(format!(
                        "{n}: {e}\nbody: {}",
                        String::from_utf8_lossy(&bytes)
                    ))
                })?;
                prop_assert_eq!(healthy.ok(), Some(200), "{}: down after a body", n);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let after = rt.block_on(async {
            (
                read(&t, &token, json!({"memory_key": "fuzz-control"})).await,
                read(&t, &globex, json!({"memory_key": "secret"})).await,
            )
        });
        assert_eq!(control, after, "{n}: a control row changed");
        assert_eq!(control.0.0, 200, "{n}: {control:?}");
        eprintln!(
            "{n}: {CASES} generated bodies to /mcp, statuses {:?}, responses {:?}, 0 faults",
            statuses.borrow(),
            tally.borrow()
        );
        rt.block_on(t.server.shutdown());
    }
}
