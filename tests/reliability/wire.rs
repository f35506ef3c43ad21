//! How a scenario reaches the server: `POST /v1/<op>` with the
//! `Idempotency-Key` header, or MCP `tools/call` (stateless, on the current
//! protocol revision) with the `_idempotency_key` argument. Both answer in
//! the HTTP shape: status and body, `{"error": {...}}` on a refusal.

use std::time::Duration;

use serde_json::{Value, json};

/// A transport.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    /// `POST /v1/<op>`.
    Http,
    /// `POST /mcp`, `tools/call` of the op's tool (`loom_memory_set` …).
    Mcp,
}

/// One caller: a server's address, a client (its connections) and a bearer.
#[derive(Clone, Debug)]
pub struct Caller {
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// The client.
    pub http: reqwest::Client,
    /// The bearer token.
    pub token: String,
}

/// What a call answered.
#[derive(Debug)]
pub enum Reply {
    /// An answer: status, body.
    Answered(u16, Value),
    /// The client gave up first (its own timeout): nothing is known.
    GaveUp,
}

impl Wire {
    /// Calls `op` with `args` as `who`, with an optional
    /// idempotency key; gives up after `give_up` when set.
    pub async fn call(
        self,
        who: &Caller,
        op: &str,
        args: &Value,
        key: Option<&str>,
        give_up: Option<Duration>,
    ) -> Reply {
        let request = match self {
            Wire::Http => {
                let mut r = who
                    .http
                    .post(format!("{}/v1/{op}", who.base))
                    .bearer_auth(&who.token)
                    .json(args);
                if let Some(key) = key {
                    r = r.header("idempotency-key", key);
                }
                r
            }
            Wire::Mcp => {
                let mut arguments = args.clone();
                if let Some(key) = key {
                    arguments["_idempotency_key"] = json!(key);
                }
                who.http
                    .post(format!("{}/mcp", who.base))
                    .bearer_auth(&who.token)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-11-25")
                    .json(&json!({
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": format!("loom_{}", op.replace('.', "_")), "arguments": arguments},
                    }))
            }
        };
        let send = async {
            let resp = request.send().await.expect("the server answers");
            let status = resp.status().as_u16();
            let text = resp.text().await.expect("a body");
            let body = serde_json::from_str(&text).unwrap_or(Value::Null);
            match self {
                Wire::Http => (status, body),
                Wire::Mcp => from_mcp(status, body),
            }
        };
        match give_up {
            None => {
                let (s, b) = send.await;
                Reply::Answered(s, b)
            }
            // Dropping the future closes the connection mid-request.
            Some(d) => match tokio::time::timeout(d, send).await {
                Ok((s, b)) => Reply::Answered(s, b),
                Err(_) => Reply::GaveUp,
            },
        }
    }
}

/// A `tools/call` answer in the HTTP shape: a result is 200 with its
/// structured content, a refusal (`isError`) or a JSON-RPC error the status
/// and detail it carries.
fn from_mcp(status: u16, body: Value) -> (u16, Value) {
    if status != 200 {
        return (status, body);
    }
    let detail_status = |d: &Value| {
        d["status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(500)
    };
    if let Some(result) = body.get("result") {
        let content = result["structuredContent"].clone();
        if result["isError"] == true {
            (detail_status(&content), json!({"error": content}))
        } else {
            (200, content)
        }
    } else {
        let data = body["error"]["data"].clone();
        (
            detail_status(&data),
            json!({"error": data, "rpc": body["error"].clone()}),
        )
    }
}
