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

/// `value` as JSON with object keys sorted at every depth, so the same
/// arguments in any key order hash alike.
pub fn canonical(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// SHA-256 (hex) of the canonical arguments: the audit row's digest.
pub fn digest(args: &Value) -> String {
    hex::encode(Sha256::digest(canonical(args).as_bytes()))
}

/// The request hash a key is bound to: the op and its canonical arguments.
pub fn request_hash(op: &str, args: &Value) -> String {
    let mut h = Sha256::new();
    h.update(op.as_bytes());
    h.update(b"\n");
    h.update(canonical(args).as_bytes());
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
        assert_eq!(
            request_hash("grants.set", &a),
            request_hash("grants.set", &b)
        );
        assert_ne!(
            request_hash("grants.set", &a),
            request_hash("grants.list", &a)
        );
        assert_ne!(digest(&a), digest(&json!({"b": 2})));
    }

    #[test]
    fn keys_are_visible_ascii() {
        assert!(check_key("k-1").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a b").is_err());
        assert!(check_key(&"k".repeat(256)).is_err());
    }
}
