//! Step 5: idempotency. An op declared `idempotent` takes a key (HTTP
//! `Idempotency-Key`; MCP `_idempotency_key`). The first call with a key
//! claims it and stores its answer when it succeeds; the same key from the
//! same principal (org, subject) with the same request replays that answer
//! (same status, same body) without running the op; with a different
//! request it is 422 IDEMPOTENCY_KEY_MISMATCH; while the first call runs,
//! 409 IDEMPOTENCY_KEY_IN_FLIGHT. Another principal's key of the same name
//! is a different key. A call that fails stores nothing (its key is
//! released), so a retry runs again. Answers are kept
//! `LOOM_IDEMPOTENCY_TTL_SECS` (default one day) in the database, so any
//! replica replays them.

use std::time::Duration;

use loom_core::{ErrorCode, LoomError};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// How long an in-flight claim is honoured before it counts as abandoned
/// (its call died with its replica).
pub const STALE_IN_FLIGHT: Duration = Duration::from_secs(300);

/// Writes `value` to `out` as JSON with object keys sorted at every
/// depth, so the same arguments in any key order hash alike: compact, as
/// `Value`'s own `to_string` writes it once its maps are sorted. It walks
/// the value in place: every audited call hashes its arguments, and a
/// sorted copy of the whole tree (every key and string cloned) cost more
/// than the hash.
fn write_canonical(out: &mut impl std::io::Write, value: &Value) -> std::io::Result<()> {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.write_all(b"{")?;
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, key)?;
                out.write_all(b":")?;
                write_canonical(out, &map[key])?;
            }
            out.write_all(b"}")
        }
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(out, item)?;
            }
            out.write_all(b"]")
        }
        // A whole number sent as a float (20.0) is the integer the op
        // takes it as: the same request as 20, replayed as one.
        Value::Number(n) if n.is_f64() => match n.as_f64().and_then(loom_core::whole_i64) {
            Some(i) => write!(out, "{i}"),
            None => Ok(serde_json::to_writer(&mut *out, n)?),
        },
        scalar => Ok(serde_json::to_writer(&mut *out, scalar)?),
    }
}

/// SHA-256 (hex) of the canonical arguments: the audit row's digest.
pub fn digest(args: &Value) -> String {
    finish(Sha256::new(), args)
}

/// The request hash a key is bound to: the op, the namespace and agent the
/// call resolved to and its canonical arguments. The resolved names, not
/// only the arguments: one subject's two tokens whose default workspaces
/// differ send the same `{}` to two namespaces, and a replay must not hand
/// one namespace's answer to a token for the other.
pub fn request_hash(op: &str, namespace: &str, agent: &str, args: &Value) -> String {
    let mut h = Sha256::new();
    for part in [op, namespace, agent] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    finish(h, args)
}

/// `h` fed `args`' canonical form, in hex.
fn finish(mut h: Sha256, args: &Value) -> String {
    // A hasher is an `io::Write` (sha2's std feature) that takes every
    // byte, so writing to it cannot fail.
    let _ = write_canonical(&mut h, args);
    hex::encode(h.finalize())
}

/// Checks a key's shape.
pub fn check_key(key: &str) -> Result<(), LoomError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(LoomError::new(
            ErrorCode::BadRequest,
            format!("an idempotency key is 1 to {MAX_KEY_LEN} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// The refusal for a key used with another request.
pub fn mismatch() -> LoomError {
    LoomError::new(
        ErrorCode::IdempotencyMismatch,
        "this idempotency key was already used with a different request; use a new key",
    )
}

/// The refusal while the key's first call still runs.
pub fn in_flight() -> LoomError {
    LoomError::new(
        ErrorCode::IdempotencyInFlight,
        "a request with this idempotency key is still running",
    )
    .with_retry_after(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, {"p": 2, "q": 1}]}, "b": 1});
        let hash = |op, ns, args| request_hash(op, ns, "ana", args);
        assert_eq!(hash("grants.set", "ns", &a), hash("grants.set", "ns", &b));
        assert_ne!(hash("grants.set", "ns", &a), hash("grants.list", "ns", &a));
        assert_ne!(
            hash("grants.set", "ns", &a),
            hash("grants.set", "other", &a)
        );
        assert_ne!(
            request_hash("grants.set", "ns", "ana", &a),
            request_hash("grants.set", "ns", "bot", &a)
        );
        assert_ne!(digest(&a), digest(&json!({"b": 2})));
    }

    fn canonical(value: &Value) -> String {
        let mut out = Vec::new();
        write_canonical(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The canonical form is the sorted tree as `Value` writes it (what
    /// stored digests and request hashes were made from), escapes,
    /// numbers and nesting included.
    #[test]
    fn the_canonical_form_is_the_sorted_tree_written_compactly() {
        let value = json!({
            "z": "quote \" and \\ and \u{1}",
            "a": [1.5, -2, 1e30, true, null, {"y": [], "x": {}}],
            "é": {"b": "ü", "a": 18446744073709551615u64},
        });
        let sorted = json!({
            "a": [1.5, -2, 1e30, true, null, {"x": {}, "y": []}],
            "z": "quote \" and \\ and \u{1}",
            "é": {"a": 18446744073709551615u64, "b": "ü"},
        });
        // `json!` keeps its keys in the order written (serde_json's
        // preserve_order), here the sorted one.
        assert_eq!(canonical(&value), sorted.to_string());
        assert_eq!(
            digest(&value),
            hex::encode(Sha256::digest(canonical(&value).as_bytes()))
        );
        assert_eq!(canonical(&json!("x")), "\"x\"");
        // whole numbers sent as floats are the integers they stand for
        assert_eq!(
            canonical(&json!({"limit": 20.0, "n": -0.0, "f": 2.5})),
            r#"{"f":2.5,"limit":20,"n":0}"#
        );
    }

    #[test]
    fn keys_are_visible_ascii() {
        assert!(check_key("k-1").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a b").is_err());
        assert!(check_key(&"k".repeat(256)).is_err());
    }
}
