//! How a call's answer becomes MCP: a tool result (the op's output, or a
//! refusal the model can act on, `isError: true`), or a JSON-RPC error for
//! faults. Many clients drop state on a JSON-RPC error frame, so refusals are
//! results and only faults are errors.

use loom_core::{ErrorCode, LoomError};
use serde_json::{Map, Value, json};

use super::jsonrpc::{JsonText, Reply, code};
use super::protocol::Revision;

/// Faults Loom names: their code and message are stated in the JSON-RPC error.
const NAMED_FAULTS: &[&str] = &[
    "OVERLOADED",
    "BACKEND_TIMEOUT",
    "SCHEMA_PENDING",
    "EMBED_TIMEOUT",
    "NOT_READY",
];

/// Whether a result is an answer stored for the call's idempotency key and
/// replayed, not the op run again: `_meta` says so (`loom/replayed`),
/// as `idempotent-replayed: true` does over HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replayed(pub bool);

/// A successful tool result. `structured` is what `structuredContent` and
/// `content[0].text` carry; `summary` adds a second text block.
///
/// `structured` is serialized once: the text block is that JSON text
/// escaped as a string, and `structuredContent` is the same text, copied
/// into the answer as is. Written through serde, the text block's escaping
/// was ~4% of a memory.get's instructions.
pub fn tool_result(
    json: JsonText,
    summary: Option<String>,
    replayed: Replayed,
    revision: Revision,
) -> Reply {
    let summary = summary.map(|s| JsonText::of(&s));
    let len = json.as_str().len();
    let mut out =
        String::with_capacity(2 * len + summary.as_ref().map_or(0, |s| s.as_str().len()) + 128);
    out.push_str(r#"{"content":[{"type":"text","text":""#);
    json.push_string_contents(&mut out);
    out.push_str(r#""}"#);
    if let Some(summary) = &summary {
        out.push_str(r#",{"type":"text","text":"#);
        out.push_str(summary.as_str());
        out.push('}');
    }
    out.push_str(r#"],"isError":false"#);
    if revision.has_structured_output() {
        out.push_str(r#","structuredContent":"#);
        out.push_str(json.as_str());
    }
    if replayed.0 {
        out.push_str(r#","_meta":{"loom/replayed":true}"#);
    }
    out.push('}');
    Reply::Json(JsonText::assembled(out))
}

/// Whether an error is a refusal (a tool result) rather than a fault (a JSON-RPC error).
pub fn is_refusal(err: &LoomError) -> bool {
    (400..500).contains(&err.status())
}

/// A refusal as a tool result: the text the model reads ends with the class
/// in words; the body is the HTTP detail plus status, `retry_after_s`,
/// category and retryable: `structuredContent`, or, on a revision before
/// structured output, a second text block of that JSON (a client of 2025-03-26
/// would otherwise learn neither the code nor how long to wait).
pub fn refusal_result(err: &LoomError, revision: Revision) -> Value {
    let body = Value::Object(err.body());
    let text = format!("{}\n({})", err.message(), err.code().category().advice());
    if revision.has_structured_output() {
        json!({"content": [{"type": "text", "text": text}], "isError": true, "structuredContent": body})
    } else {
        json!({
            "content": [{"type": "text", "text": text}, {"type": "text", "text": body.to_string()}],
            "isError": true,
        })
    }
}

/// A fault as a JSON-RPC error: -32000 "tool execution failed". A named
/// fault states its code and message, and `data` is the HTTP detail plus
/// status, tool and request id; any other fault says only "internal error"
/// and the request id.
pub fn fault_error(err: &LoomError, tool: &str, request_id: &str) -> (i64, String, Value) {
    let named = NAMED_FAULTS.contains(&err.code().as_str());
    let mut data: Map<String, Value> = if named {
        err.body()
    } else {
        let mut m = Map::new();
        m.insert("code".into(), ErrorCode::Internal.as_str().into());
        m.insert("status".into(), err.status().into());
        m.insert("category".into(), err.code().category().as_str().into());
        m.insert("retryable".into(), err.code().retryable().into());
        m
    };
    data.insert("tool".into(), tool.into());
    data.insert("request_id".into(), request_id.into());
    let message = if named {
        format!("tool execution failed: {}: {}", err.code(), err.message())
    } else {
        format!("tool execution failed: internal error (request id {request_id})")
    };
    (code::SERVER_ERROR, message, Value::Object(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn refusals_end_with_their_class_and_carry_the_detail() {
        let err = LoomError::new(ErrorCode::RateLimited, "too many write calls")
            .with_retry_after(Duration::from_secs(3))
            .with_detail("rate_class", "write");
        let r = refusal_result(&err, Revision::V2025_11_25);
        assert_eq!(r["isError"], true);
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("(rate limit: retry after the wait)")
        );
        let s = &r["structuredContent"];
        assert_eq!(
            (
                s["code"].as_str(),
                s["status"].as_u64(),
                s["retry_after_s"].as_u64()
            ),
            (Some("RATE_LIMITED"), Some(429), Some(3))
        );
        assert_eq!(
            (s["category"].as_str(), s["retryable"].as_bool()),
            (Some("rate_limit"), Some(true))
        );
        // Before structured output, the body is a second text block.
        let older = refusal_result(&err, Revision::V2025_03_26);
        assert!(older.get("structuredContent").is_none());
        assert_eq!(older["content"][0], r["content"][0]);
        let body: Value =
            serde_json::from_str(older["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&body, s);
    }

    #[test]
    fn named_faults_say_what_happened_others_only_the_request_id() {
        let (c, msg, data) = fault_error(
            &LoomError::new(
                ErrorCode::BackendTimeout,
                "the store could not finish in time",
            ),
            "loom_memory_get",
            "req-1",
        );
        assert_eq!(c, -32000);
        assert!(msg.contains("BACKEND_TIMEOUT"));
        assert_eq!(
            (data["status"].as_u64(), data["tool"].as_str()),
            (Some(504), Some("loom_memory_get"))
        );
        let (_, msg, data) = fault_error(
            &LoomError::internal("disk on fire at /x"),
            "loom_memory_get",
            "req-2",
        );
        assert_eq!(
            msg,
            "tool execution failed: internal error (request id req-2)"
        );
        assert!(!data.to_string().contains("fire"));
        assert_eq!(data["request_id"], "req-2");
    }

    fn as_value(reply: Reply) -> Value {
        let Reply::Json(text) = reply else {
            panic!("a tool result is JSON text")
        };
        serde_json::from_str(text.as_str()).unwrap()
    }

    #[test]
    fn results_carry_text_and_structured_content() {
        let structured = json!({
            "a": 1,
            "s": "say \"hi\"\n\\ \\\" \u{0}\u{1f}\t é 😀 \u{2028} </script>",
            "\"k\\": [1.5, null, {"z": true, "": "\\"}]
        });
        // Written by serde_json's serializer, and by the lean writer of an
        // op's output (nothing here is dropped by lean).
        let lean = loom_core::Output::from(structured.clone())
            .lean_json()
            .unwrap();
        for json in [JsonText::of(&structured), JsonText::marked(lean)] {
            let r = as_value(tool_result(
                json,
                Some("one \"hit\" \\ \n".into()),
                Replayed(false),
                Revision::V2025_06_18,
            ));
            let text = r["content"][0]["text"].as_str().unwrap();
            assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
            assert_eq!(r["content"][1]["text"], "one \"hit\" \\ \n");
            assert_eq!(r["structuredContent"], structured);
            assert_eq!(r["isError"], false);
            assert!(r.get("_meta").is_none(), "{r}");
        }
    }

    #[test]
    fn results_before_2025_06_18_have_no_structured_content() {
        let json = JsonText::of(&json!({"a": 1}));
        let r = as_value(tool_result(
            json,
            None,
            Replayed(true),
            Revision::V2025_03_26,
        ));
        assert_eq!(r["content"][0]["text"], "{\"a\":1}");
        assert_eq!(r["content"].as_array().map(Vec::len), Some(1));
        assert!(r.get("structuredContent").is_none());
        // a replayed answer says so, on every revision
        assert_eq!(r["_meta"], json!({"loom/replayed": true}));
    }
}
