//! How a scenario reaches the server. Today: `POST /v1/<op>` with the
//! `Idempotency-Key` header. An MCP variant (`tools/call` with
//! `_idempotency_key`) plugs in here once `/mcp` serves calls.

use std::time::Duration;

use serde_json::Value;

/// A transport.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    /// `POST /v1/<op>`.
    Http,
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
        match self {
            Wire::Http => {
                let mut r = who
                    .http
                    .post(format!("{}/v1/{op}", who.base))
                    .bearer_auth(&who.token)
                    .json(args);
                if let Some(key) = key {
                    r = r.header("idempotency-key", key);
                }
                let send = async {
                    let resp = r.send().await.expect("the server answers");
                    let status = resp.status().as_u16();
                    let text = resp.text().await.expect("a body");
                    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
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
    }
}
