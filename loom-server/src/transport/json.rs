//! Request bodies as JSON values, refusing a key given twice in one object.
//!
//! Why: JSON leaves a repeated key's meaning open (RFC 8259 §4: names
//! SHOULD be unique), and serde_json keeps the last. A policy gateway in
//! front of Loom (`loom export-actions`) that reads the first could approve
//! `{"memory_key": "a", "memory_key": "b"}` as a write of `a` while Loom
//! wrote `b`. Refused, both read the same call.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// `bytes` as a JSON value; an error for bad JSON or a repeated key.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Unique.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Deserializes a value whose objects name each key once (for a field of
/// a derived struct: `#[serde(deserialize_with = "json::unique")]`).
pub fn unique<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Unique.deserialize(d)
}

/// Builds a [`Value`] as serde_json's own `Deserialize` does, but fails on
/// a key an object already holds.
#[derive(Clone, Copy)]
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(Unique)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Unique)?;
            match out.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(held) => {
                    return Err(de::Error::custom(format_args!(
                        "the key {:?} is given twice in one object",
                        held.key()
                    )));
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads() {
        for text in [
            r#"{"a": 1, "b": [true, null, 2.5, -3, "x\u00e9"], "c": {"d": {}}}"#,
            "[]",
            "18446744073709551615",
            r#""s""#,
        ] {
            let ours = from_slice(text.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        for text in [
            r#"{"memory_key": "a", "memory_key": "b"}"#,
            r#"{"params": {"arguments": {"k": 1, "k": 1}}}"#,
            r#"[{"x": 1}, {"y": 1, "y": 2}]"#,
        ] {
            let e = from_slice(text.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("given twice"), "{text}: {e}");
        }
        // the same key in two objects is no repeat
        assert_eq!(
            from_slice(br#"[{"k": 1}, {"k": 2}]"#).unwrap(),
            json!([{"k": 1}, {"k": 2}])
        );
        assert!(from_slice(b"{} x").is_err(), "trailing text");
    }
}
