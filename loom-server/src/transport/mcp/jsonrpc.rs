//! JSON-RPC 2.0 framing for `POST /mcp`: one message or a batch of 1 to 64.
//!
//! Ids are strings or integers (MCP never allows `null`); an error whose
//! request id is unknown omits `id`, since the 2025-11-25 schema has no null
//! id and the conformance suite validates every message against it.

use std::borrow::Cow;
use std::sync::Arc;

use loom_core::lean::Marked;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// The largest batch Loom runs.
pub const MAX_BATCH: usize = 64;

/// JSON-RPC and MCP error codes Loom answers with.
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request (or an empty or oversized batch).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad params: unknown tool or prompt, missing argument.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A fault in the server.
    pub const SERVER_ERROR: i64 = -32000;
    /// Resource not found.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The client cancelled the request (`notifications/cancelled`).
    pub const REQUEST_CANCELLED: i64 = -32800;
    /// Unsupported `MCP-Protocol-Version`.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A request id: a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    /// A string id.
    Str(String),
    /// An integer id.
    Num(serde_json::Number),
}

impl Id {
    /// The id a JSON value is, if it is one.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Id::Num(n.clone())),
            _ => None,
        }
    }

    /// The id as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            Id::Str(s) => Value::String(s.clone()),
            Id::Num(n) => Value::Number(n.clone()),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Str(id) => s.serialize_str(id),
            Id::Num(id) => id.serialize(s),
        }
    }
}

/// A method's result, as its response carries it.
#[derive(Debug)]
pub enum Reply {
    /// A JSON value.
    Value(Value),
    /// JSON text written already: a tool result, whose text block and
    /// `structuredContent` come from one serialization
    /// ([`super::outcome::tool_result`]), copied into the response as is.
    Json(JsonText),
    /// JSON text kept for every answer that carries it (the cached
    /// `tools/list` result).
    Shared(Arc<str>),
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Reply::Value(value)
    }
}

/// JSON text Loom wrote: serde_json's output ([`JsonText::of`]), or such
/// text joined with JSON punctuation by the few functions here and in
/// [`super::outcome`] that assemble an answer (their tests parse what they
/// write). An answer is written once and then copied as text, never parsed
/// or checked again.
#[derive(Clone, Debug)]
pub struct JsonText {
    text: String,
    /// Where the text's quotes and backslashes are, when its writer noted
    /// them ([`Marked`]).
    specials: Option<Vec<usize>>,
}

impl JsonText {
    /// `value` as JSON text. What Loom answers with (values, and structs of
    /// them with string keys) always serializes; were it not to, the answer
    /// would be `null`, logged.
    pub fn of(value: &impl Serialize) -> JsonText {
        let text = serde_json::to_string(value).unwrap_or_else(|e| {
            tracing::error!(cause = %e, "an answer did not serialize");
            "null".into()
        });
        JsonText::assembled(text)
    }

    /// An op's output as its [`loom_core::Output`] wrote it, quotes noted.
    pub(super) fn marked(marked: Marked) -> JsonText {
        let (text, specials) = marked.into_parts();
        JsonText {
            text,
            specials: Some(specials),
        }
    }

    /// Text serde_json wrote (an op's full output, as its
    /// [`loom_core::Output`] writes it), or such text assembled with JSON
    /// punctuation.
    pub(super) fn assembled(text: String) -> JsonText {
        JsonText {
            text,
            specials: None,
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.text
    }

    /// Appends this text to `out` as the contents of a JSON string (the
    /// quotes left to the caller). serde_json writes no control character
    /// raw, in a string or out of one (compact text has no whitespace), so
    /// only `"` and `\` are escaped, where the writer noted them, else found
    /// with memchr: about half the instructions of serde_json's byte-by-byte
    /// escaping of a string.
    pub fn push_string_contents(&self, out: &mut String) {
        let bytes = self.text.as_bytes();
        match &self.specials {
            Some(at) => escape_at(&self.text, at.iter().copied(), out),
            None => escape_at(&self.text, memchr::memchr2_iter(b'"', b'\\', bytes), out),
        }
    }
}

/// Appends `text` to `out` with a backslash before each byte at `specials`
/// (ascending offsets of ASCII bytes, so every cut is at a char boundary).
fn escape_at(text: &str, specials: impl Iterator<Item = usize>, out: &mut String) {
    let mut start = 0;
    for at in specials {
        out.push_str(&text[start..at]);
        out.push('\\');
        start = at;
    }
    out.push_str(&text[start..]);
}

/// One incoming message.
#[derive(Clone, Debug)]
pub enum Message {
    /// A request: it gets an answer.
    Request {
        /// Its id.
        id: Id,
        /// The method.
        method: String,
        /// The params (`{}` when absent).
        params: Value,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: String,
        /// The params.
        params: Value,
    },
    /// A response from the client (to a request Loom never sends): ignored.
    Response,
    /// Not a valid message: answered with -32600, with the id when one could be read.
    Invalid {
        /// The id, when readable.
        id: Option<Id>,
        /// Why.
        reason: String,
    },
}

/// A parsed body.
#[derive(Debug)]
pub enum Body {
    /// One message.
    Single(Message),
    /// A batch of 1 to 64 messages.
    Batch(Vec<Message>),
}

/// An error before any message could be read: answered id-less, unless
/// the body is one request whose id could still be read.
#[derive(Debug)]
pub struct FramingError {
    /// The JSON-RPC code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// The id of the one request the body holds, when it could be read.
    pub id: Option<Id>,
}

impl FramingError {
    /// The error as a JSON-RPC response.
    pub fn response(&self) -> Value {
        error_response(self.id.as_ref(), self.code, &self.message, None)
    }
}

/// The id of a body that is one request Loom's reading refused (a key
/// given twice, nesting past its depth, deep in the params): read the
/// lenient way, ignoring everything else, so the client waiting on that
/// id is answered rather than left to time out. `None` when even that
/// fails, or the id itself is given twice.
fn salvage_id(body: &[u8]) -> Option<Id> {
    #[derive(Deserialize)]
    struct IdOnly {
        id: Option<Value>,
    }
    let read: IdOnly = serde_json::from_slice(body).ok()?;
    Id::from_value(&read.id?)
}

/// Parses a body into a message or a batch.
pub fn parse(body: &[u8]) -> Result<Body, FramingError> {
    if let Some(message) = single_request(body) {
        return Ok(Body::Single(message));
    }
    let value: Value = crate::transport::json::from_slice(body).map_err(|e| FramingError {
        code: code::PARSE_ERROR,
        message: format!("parse error: {e}"),
        id: salvage_id(body),
    })?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(FramingError {
                    code: code::INVALID_REQUEST,
                    message: "invalid request: empty batch".into(),
                    id: None,
                });
            }
            if items.len() > MAX_BATCH {
                return Err(FramingError {
                    code: code::INVALID_REQUEST,
                    message: format!(
                        "invalid request: a batch holds at most {MAX_BATCH} messages, got {}",
                        items.len()
                    ),
                    id: None,
                });
            }
            Ok(Body::Batch(items.into_iter().map(message).collect()))
        }
        other => Ok(Body::Single(message(other))),
    }
}

/// A body that is one object naming its method as a string, the shape of
/// nearly every request, read straight into its parts: read as a JSON
/// value, its envelope was a map of its own (keys allocated and hashed) of
/// which only the params are kept. Anything else (a batch, a response, a
/// method or version that is not a string, a key given twice, bad JSON)
/// is `None`, left to [`message`], which answers it exactly as before;
/// what both read, they read alike ([`request`]).
fn single_request(body: &[u8]) -> Option<Message> {
    /// An optional member kept even when `null` (serde reads a `null`
    /// `Option` as absent; an `"id": null` is an invalid id, not a
    /// notification).
    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        crate::transport::json::unique(d).map(Some)
    }
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: Option<Cow<'a, str>>,
        #[serde(default, deserialize_with = "present")]
        id: Option<Value>,
        method: String,
        #[serde(default, deserialize_with = "present")]
        params: Option<Value>,
    }
    // Only an object: a derived struct would also read an array, by position.
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    Some(request(
        envelope.id.as_ref(),
        envelope.jsonrpc.as_deref() == Some("2.0"),
        envelope.method,
        envelope.params,
    ))
}

/// One message of a body, taken apart: its params move into the message
/// (a copy of them was a deep clone of every call's arguments).
fn message(v: Value) -> Message {
    let Value::Object(mut obj) = v else {
        return invalid(None, "a message is a JSON object");
    };
    let raw_id = obj.remove("id");
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(raw_id.as_ref(), WRONG_VERSION);
    }
    let method = match obj.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return invalid(raw_id.as_ref(), "method must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Message::Response;
        }
        None => return invalid(raw_id.as_ref(), "a request names its method"),
    };
    request(raw_id.as_ref(), true, method, obj.remove("params"))
}

const WRONG_VERSION: &str = "jsonrpc must be \"2.0\"";

/// An invalid message, with its id when that is readable.
fn invalid(raw_id: Option<&Value>, reason: &str) -> Message {
    Message::Invalid {
        id: raw_id.and_then(Id::from_value),
        reason: reason.into(),
    }
}

/// A message that names its method, checked for its version, params and
/// id in that order.
fn request(
    raw_id: Option<&Value>,
    version_ok: bool,
    method: String,
    params: Option<Value>,
) -> Message {
    if !version_ok {
        return invalid(raw_id, WRONG_VERSION);
    }
    let has_id = raw_id.is_some();
    let id = raw_id.and_then(Id::from_value);
    let params = match params {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Message::Invalid {
                id,
                reason: "params must be an object".into(),
            };
        }
    };
    match (has_id, id) {
        (false, _) => Message::Notification { method, params },
        (true, Some(id)) => Message::Request { id, method, params },
        (true, None) => Message::Invalid {
            id: None,
            reason: "id must be a string or an integer".into(),
        },
    }
}

/// A successful response, as the text sent: written once, the result
/// copied in (no JSON value is built for the envelope).
pub fn result_response(id: &Id, result: &Reply) -> JsonText {
    let value;
    let result = match result {
        Reply::Value(v) => {
            value = JsonText::of(v);
            value.as_str()
        }
        Reply::Json(text) => text.as_str(),
        Reply::Shared(text) => text,
    };
    let id = JsonText::of(id);
    let mut out = String::with_capacity(result.len() + id.as_str().len() + 32);
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id.as_str());
    out.push_str(r#","result":"#);
    out.push_str(result);
    out.push('}');
    JsonText::assembled(out)
}

/// An error response; `id` omitted when unknown.
pub fn error_response(id: Option<&Id>, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    let mut out = json!({"jsonrpc": "2.0", "error": error});
    if let Some(id) = id {
        out["id"] = id.to_value();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_requests_and_notifications() {
        let Body::Single(Message::Request { id, method, params }) =
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (id, method.as_str(), params),
            (Id::Num(7.into()), "ping", json!({}))
        );
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
            Body::Single(Message::Notification { .. })
        ));
        // The params arrive whole, in a batch as alone.
        let call = r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t","arguments":{"k":[1,{"x":null}]}}}"#;
        let params = json!({"name": "t", "arguments": {"k": [1, {"x": null}]}});
        for body in [call.to_owned(), format!("[{call}]")] {
            let message = match parse(body.as_bytes()).unwrap() {
                Body::Single(m) => m,
                Body::Batch(mut v) => v.remove(0),
            };
            let Message::Request { params: got, .. } = message else {
                panic!("{body}")
            };
            assert_eq!(got, params, "{body}");
        }
    }

    #[test]
    fn framing_errors() {
        assert_eq!(parse(b"{").unwrap_err().code, code::PARSE_ERROR);
        assert_eq!(parse(b"[]").unwrap_err().code, code::INVALID_REQUEST);
        let big = format!(
            "[{}]",
            vec![r#"{"jsonrpc":"2.0","method":"ping","id":1}"#; 65].join(",")
        );
        assert_eq!(
            parse(big.as_bytes()).unwrap_err().code,
            code::INVALID_REQUEST
        );
        let ok = format!(
            "[{}]",
            vec![r#"{"jsonrpc":"2.0","method":"ping","id":1}"#; 64].join(",")
        );
        assert!(matches!(parse(ok.as_bytes()).unwrap(), Body::Batch(v) if v.len() == 64));
    }

    #[test]
    fn a_refused_request_is_answered_with_its_id_when_it_can_be_read() {
        let id_of = |body: &str| parse(body.as_bytes()).unwrap_err().id;
        // a key twice inside the arguments
        let twice = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#;
        assert_eq!(id_of(twice), Some(Id::Num(7.into())));
        // nesting past the parser's depth, after the id
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let e = parse(deep.as_bytes()).unwrap_err();
        assert_eq!(e.code, code::PARSE_ERROR);
        assert_eq!(e.id, Some(Id::Str("x".into())), "{}", e.message);
        assert_eq!(e.response()["id"], "x");
        // no id to be had: bad JSON, the id itself twice, a batch
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":7,"#), None);
        assert_eq!(id_of(r#"{"id":1,"id":2,"method":"ping"}"#), None);
        assert_eq!(id_of(r#"[{"id":1,"method":"ping","a":1,"a":2}]"#), None);
        assert!(parse(b"{").unwrap_err().response().get("id").is_none());
    }

    #[test]
    fn invalid_messages_keep_a_readable_id() {
        for (body, id) in [
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                Some(Id::Str("a".into())),
            ),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":5}"#,
                Some(Id::Num(2.into())),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":[1]}"#,
                Some(Id::Num(3.into())),
            ),
            (r#"7"#, None),
        ] {
            match parse(body.as_bytes()).unwrap() {
                Body::Single(Message::Invalid { id: got, .. }) => assert_eq!(got, id, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_typed_read_of_one_request_agrees_with_the_value_read() {
        let read = |body: &str| message(serde_json::from_str(body).unwrap());
        let bodies = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"k":"v"}}}"#,
            r#" {"method":"ping","id":"a","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"ping","params":null,"id":18446744073709551615}"#,
            r#"{"jsonrpc":"2\u002e0","method":"ping","id":2}"#,
            r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
            r#"{"id":3,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":"x","extra":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"x","result":{}}"#,
        ];
        for body in bodies {
            let typed = single_request(body.as_bytes()).unwrap_or_else(|| panic!("{body}"));
            assert_eq!(format!("{typed:?}"), format!("{:?}", read(body)), "{body}");
        }
        // What the typed read leaves to the value read: not an object, no
        // method or one that is not a string, a version that is not a
        // string, a key given twice, bad JSON.
        for body in [
            r#"{"jsonrpc":2,"id":3,"method":"ping"}"#,
            r#"["2.0",1,"ping",{}]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a""#,
        ] {
            assert!(single_request(body.as_bytes()).is_none(), "{body}");
        }
        let refused = parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#).unwrap_err();
        assert_eq!(
            refused.code,
            code::PARSE_ERROR,
            "a key given twice: neither is read"
        );
    }

    #[test]
    fn responses_from_the_client_are_recognised() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap(),
            Body::Single(Message::Response)
        ));
    }

    #[test]
    fn error_responses_omit_unknown_ids() {
        let e = error_response(None, code::PARSE_ERROR, "parse error", None);
        assert!(e.get("id").is_none());
        let e = error_response(
            Some(&Id::Str("x".into())),
            code::METHOD_NOT_FOUND,
            "nope",
            Some(json!({"a": 1})),
        );
        assert_eq!(e["id"], "x");
        assert_eq!(e["error"]["data"]["a"], 1);
    }
}
