//! Checks on memory arguments: every bad value is `INVALID_ARGUMENTS`.

use loom_core::{ErrorCode, LoomError, OpResult};
use sha2::{Digest, Sha256};

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The longest content, in bytes (64 KiB).
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// The longest source, in bytes (2 KiB: a long URL or path).
pub const MAX_SOURCE_BYTES: usize = 2 * 1024;
/// The most labels on one memory.
pub const MAX_LABELS: usize = 32;
/// The kind a memory gets when none is named.
pub const DEFAULT_KIND: &str = "fact";

/// An `INVALID_ARGUMENTS` refusal naming the field.
pub fn invalid(field: &str, message: impl Into<String>) -> LoomError {
    LoomError::new(ErrorCode::InvalidArguments, message.into()).with_detail("field", field)
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'/' | b'-')
}

/// A key: 1 to 256 bytes of `[A-Za-z0-9_.:/-]`.
pub fn key(field: &str, key: &str) -> OpResult<()> {
    if key.is_empty() {
        return Err(invalid(field, format!("{field} is empty")));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(invalid(
            field,
            format!("{field} is {} bytes; at most {MAX_KEY_BYTES}", key.len()),
        ));
    }
    if !key.bytes().all(is_key_byte) {
        return Err(invalid(
            field,
            format!("{field} {key:?} may hold only letters, digits and _ . : / -"),
        ));
    }
    Ok(())
}

/// Content: not blank, at most 64 KiB.
pub fn content(content: &str) -> OpResult<()> {
    if content.trim().is_empty() {
        return Err(invalid("content", "content is empty"));
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(invalid(
            "content",
            format!(
                "content is {} bytes; at most {MAX_CONTENT_BYTES}",
                content.len()
            ),
        ));
    }
    Ok(())
}

/// A kind: 1 to 32 of `[a-z_]` (fact, decision, procedure, preference, …).
pub fn kind(kind: &str) -> OpResult<String> {
    let ok = !kind.is_empty()
        && kind.len() <= 32
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if ok {
        Ok(kind.to_owned())
    } else {
        Err(invalid(
            "kind",
            format!("kind {kind:?} must be 1-32 of a-z and _"),
        ))
    }
}

/// Labels: at most 32, each a key-shaped string of at most 64 bytes; sorted, deduplicated.
pub fn labels(labels: &[String]) -> OpResult<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(labels.len());
    for l in labels {
        if l.is_empty() || l.len() > 64 || !l.bytes().all(is_key_byte) {
            return Err(invalid(
                "labels",
                format!("label {l:?} must be 1-64 of letters, digits and _ . : / -"),
            ));
        }
        out.push(l.clone());
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_LABELS {
        return Err(invalid(
            "labels",
            format!("{} labels; at most {MAX_LABELS}", out.len()),
        ));
    }
    Ok(out)
}

/// Labels as stored: a JSON array.
pub fn labels_json(labels: &[String]) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "[]".to_owned())
}

/// Labels from their stored JSON.
pub fn labels_from_json(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

/// An RFC 3339 time as milliseconds.
pub fn time(field: &str, s: &str) -> OpResult<i64> {
    let ms = chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            invalid(
                field,
                format!("{field} {s:?} is not an RFC 3339 time (2026-01-31T09:00:00Z)"),
            )
        })?;
    // Loom answers times in UTC, where an offset can carry a time written
    // in year 9999 into year 10000 (or one in year 0 into year -1), which
    // RFC 3339 cannot write: refused, so every time stored can be sent back.
    if !(EARLIEST_MS..=LATEST_MS).contains(&ms) {
        return Err(invalid(
            field,
            format!("{field} {s:?} is outside years 0000 to 9999 in UTC"),
        ));
    }
    Ok(ms)
}

/// 0000-01-01T00:00:00.000Z, the earliest time RFC 3339 writes in UTC.
const EARLIEST_MS: i64 = -62_167_219_200_000;
/// 9999-12-31T23:59:59.999Z, the latest.
const LATEST_MS: i64 = 253_402_300_799_999;

/// What a write does to a memory's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// `expires_at` left out: the live row's expiry stays.
    Keep,
    /// `expires_at: null`: no expiry.
    Clear,
    /// An expiry, as milliseconds.
    At(i64),
}

impl Expiry {
    /// The expiry a row gets over `cur`'s (`None` for a new row); one
    /// already past at `now` is not kept (the memory had expired).
    pub fn over(self, cur: Option<i64>, now: i64) -> Option<i64> {
        match self {
            Expiry::Keep => cur.filter(|e| *e > now),
            Expiry::Clear => None,
            Expiry::At(ms) => Some(ms),
        }
    }
}

/// What a write may name besides the content, checked: the kind and the
/// labels (each `None` when not named) and the expiry.
pub type Fields = (Option<String>, Option<Vec<String>>, Expiry);

/// Checks [`Fields`] and the source (`memory.set`, `memory.update`).
pub fn fields(
    kind: Option<&str>,
    labels: Option<&[String]>,
    source: Option<&str>,
    expires_at: Option<Option<&str>>,
) -> OpResult<Fields> {
    if let Some(source) = source.filter(|s| s.len() > MAX_SOURCE_BYTES) {
        return Err(invalid(
            "source",
            format!(
                "source is {} bytes; at most {MAX_SOURCE_BYTES}",
                source.len()
            ),
        ));
    }
    let expiry = match expires_at {
        None => Expiry::Keep,
        Some(None) => Expiry::Clear,
        Some(Some(s)) => Expiry::At(future("expires_at", s)?),
    };
    Ok((
        kind.map(self::kind).transpose()?,
        labels.map(self::labels).transpose()?,
        expiry,
    ))
}

/// An expiry the write gives (`field`, RFC 3339): a time to come. One past
/// would make a memory that no read finds (or expire a live one by a
/// write meant to change it), most likely a client's clock or time zone
/// gone wrong; expiring now is `memory.delete`'s or `memory.apply`'s.
fn future(field: &str, s: &str) -> OpResult<i64> {
    let at = time(field, s)?;
    if at <= crate::store::now_ms() {
        return Err(invalid(
            field,
            format!(
                "{field} {s:?} is not in the future; to end a memory now use memory.delete \
                 (or memory.apply with action expire)"
            ),
        ));
    }
    Ok(at)
}

/// A page size: default `default`, at least 1, at most `max` (larger is clamped).
pub fn limit(limit: Option<i64>, default: i64, max: i64) -> OpResult<i64> {
    match limit {
        None => Ok(default),
        Some(n) if n < 1 => Err(invalid(
            "limit",
            format!("limit must be at least 1, got {n}"),
        )),
        Some(n) => Ok(n.min(max)),
    }
}

/// The content hash: SHA-256, hex.
pub fn content_hash(content: &str) -> String {
    hex::encode(Sha256::digest(content.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(key("memory_key", "deploy/window:v2-a_b.c").is_ok());
        assert!(key("memory_key", "").is_err());
        assert!(key("memory_key", "has space").is_err());
        assert!(key("memory_key", &"k".repeat(257)).is_err());
        assert!(key("memory_key", &"k".repeat(256)).is_ok());
    }

    #[test]
    fn labels_sort_and_dedup() {
        let l = labels(&["b".into(), "a".into(), "b".into()]).unwrap();
        assert_eq!(l, ["a", "b"]);
        assert_eq!(labels_from_json(&labels_json(&l)), l);
        assert!(labels(&["bad label".into()]).is_err());
    }

    /// Every time accepted is one `rfc3339` writes back as it was read.
    #[test]
    fn times_stay_within_what_rfc3339_writes() {
        for (s, back) in [
            ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
            ("9999-12-31T23:00:00-00:59", "9999-12-31T23:59:00.000Z"),
        ] {
            let ms = time("as_of", s).unwrap();
            assert_eq!(crate::store::rfc3339(ms), back);
            assert_eq!(time("as_of", back).ok(), Some(ms));
        }
        for s in ["9999-12-31T23:59:59-05:00", "0000-01-01T00:00:00+01:00"] {
            assert!(time("as_of", s).is_err(), "{s}");
        }
    }

    #[test]
    fn limits() {
        assert_eq!(limit(None, 50, 200).unwrap(), 50);
        assert_eq!(limit(Some(1000), 50, 200).unwrap(), 200);
        assert!(limit(Some(-1), 50, 200).is_err());
    }
}
