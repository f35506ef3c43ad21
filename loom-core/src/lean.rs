//! Lean results: what MCP's `structuredContent` and text carry unless the
//! call asks `explain: true`. Some clients hand `structuredContent` to the
//! model as well as the text, and the full diagnostic shape costs thousands
//! of tokens for a short answer: score components, explanations, retrieval
//! plans, costs, hashes and empty fields are dropped; hits keep their key,
//! content, namespace, dates, similarity, source and status, and counts,
//! paging and abstain fields stay.

use std::io;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// Keys dropped at any depth.
pub const DIAGNOSTIC_KEYS: &[&str] = &[
    "score_parts",
    "score_breakdown",
    "recall_breakdown",
    "ranking",
    "explanation",
    "explain",
    "retrieval_plan",
    "plan",
    "cost",
    "costs",
    "content_hash",
    "hash",
    "debug",
    "timings",
];

/// Whether a call's arguments ask for a diagnostic by name: a `fields`
/// entry that is one (`content_hash`), or an `include_` flag set for one
/// (`include_recall_breakdown`). Such a call gets the full shape, as
/// `explain: true` does: what a caller asked for is not trimmed away.
pub fn asks_for_diagnostics(args: &serde_json::Map<String, Value>) -> bool {
    args.iter().any(|(k, v)| match k.strip_prefix("include_") {
        Some(name) => v == &Value::Bool(true) && DIAGNOSTIC_KEYS.contains(&name),
        None => {
            k == "fields"
                && v.as_array().is_some_and(|fields| {
                    fields
                        .iter()
                        .any(|f| f.as_str().is_some_and(|f| DIAGNOSTIC_KEYS.contains(&f)))
                })
        }
    })
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Trims a full result to its lean shape, in place (every tool call's
/// answer passes here; a copy of it was ~2% of memory.get's CPU). The top
/// level always stays an object (MCP's `structuredContent` must be one).
pub fn lean(mut full: Value) -> Value {
    trim(&mut full, true);
    if full.is_object() {
        full
    } else {
        serde_json::json!({})
    }
}

/// Trims `v`; `top` when it is the answer itself, whose lists stay even
/// when empty: an empty section of a list answer still says "nothing
/// found". An empty list deeper in (a hit's `labels: []`) is an empty
/// field like any other.
fn trim(v: &mut Value, top: bool) {
    match v {
        Value::Object(map) => {
            // One pass: each pass that drops a key rebuilds the map's
            // index.
            map.retain(|k, v| {
                if DIAGNOSTIC_KEYS.contains(&k.as_str()) {
                    return false;
                }
                trim(v, false);
                (top && v.is_array()) || !is_empty(v)
            });
        }
        Value::Array(items) => items.iter_mut().for_each(|item| trim(item, false)),
        _ => {}
    }
}

/// An op's output written straight to its lean JSON text: what
/// `lean(serde_json::to_value(output))` written out would be, without the
/// `Value` (every key of it allocated and hashed into a map, then walked
/// and written; ~10% of a memory.get's instructions with its text).
///
/// A member is written, then taken back when its key is a diagnostic one or
/// its value came out empty (`null`, `""`, `{}`); an object's members are
/// trimmed before the object itself is judged, as [`lean`] trims them.
pub fn lean_json<T: Serialize + ?Sized>(output: &T) -> serde_json::Result<Marked> {
    let mut lean = LeanFormatter {
        // Room for a typical answer (a memory is ~500 bytes): no regrowth.
        out: Vec::with_capacity(1024),
        specials: Vec::with_capacity(64),
        member: Member::default(),
        outer: Vec::new(),
    };
    // Every byte goes through the formatter, which keeps them (it must be
    // able to take a member back); the serializer's own writer is unused.
    output.serialize(&mut serde_json::Serializer::with_formatter(
        io::sink(),
        &mut lean,
    ))?;
    if lean.out.first() != Some(&b'{') {
        return Ok(Marked {
            text: "{}".to_owned(),
            specials: Vec::new(),
        });
    }
    // serde_json wrote the bytes, valid UTF-8; a member taken back is cut
    // at its own first byte (its comma or its key's quote).
    let text =
        String::from_utf8(lean.out).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
    Ok(Marked {
        text,
        specials: lean.specials,
    })
}

/// JSON text, and where its quotes and backslashes are ([`lean_json`]
/// notes them as it writes them): MCP answers the text twice, once as a
/// JSON string's contents, and finding the ~40 quotes of a memory's text
/// again was ~1% of a memory.get's instructions.
#[derive(Clone, Debug)]
pub struct Marked {
    text: String,
    /// The offset of every `"` and `\` in `text`, in order.
    specials: Vec<usize>,
}

impl Marked {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text and its specials' offsets.
    pub fn into_parts(self) -> (String, Vec<usize>) {
        (self.text, self.specials)
    }
}

/// The text [`lean_json`] writes, where its quotes and backslashes are,
/// the member being written of the innermost open object, and those of the
/// objects around it.
struct LeanFormatter {
    out: Vec<u8>,
    specials: Vec<usize>,
    member: Member,
    outer: Vec<Member>,
}

/// The member being written of one open object.
#[derive(Clone, Copy, Default)]
struct Member {
    /// Whether a member of the object has been kept (the next one needs a
    /// comma; serde_json's own `first` does not know of members taken back).
    kept: bool,
    /// Where the member began (its comma, or its key).
    start: usize,
    /// Where its value began.
    value: usize,
    /// Its key is a diagnostic one.
    dropped: bool,
}

impl LeanFormatter {
    /// Notes the quotes and backslashes of what was written from `from` on.
    fn note_specials(&mut self, from: usize) {
        for (at, b) in self.out[from..].iter().enumerate() {
            if matches!(b, b'"' | b'\\') {
                self.specials.push(from + at);
            }
        }
    }

    /// Writes a string's quote, noted.
    fn quote(&mut self) {
        self.specials.push(self.out.len());
        self.out.push(b'"');
    }
}

/// Forwards each piece of JSON to the compact formatter, into `out`.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $name<W: ?Sized + io::Write>(&mut self, _: &mut W $(, $arg: $ty)*) -> io::Result<()> {
                CompactFormatter.$name(&mut self.out $(, $arg)*)
            }
        )*
    };
}

impl Formatter for &mut LeanFormatter {
    forward! {
        write_null();
        write_bool(value: bool);
        write_i8(value: i8);
        write_i16(value: i16);
        write_i32(value: i32);
        write_i64(value: i64);
        write_i128(value: i128);
        write_u8(value: u8);
        write_u16(value: u16);
        write_u32(value: u32);
        write_u64(value: u64);
        write_u128(value: u128);
        write_f32(value: f32);
        write_f64(value: f64);
        write_number_str(value: &str);
        write_string_fragment(fragment: &str);
        write_byte_array(value: &[u8]);
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
    }

    // Strings: serde_json writes a string's quotes and escapes through
    // these, and its other fragments hold neither quotes nor backslashes.
    fn begin_string<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.quote();
        Ok(())
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.quote();
        Ok(())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        let from = self.out.len();
        CompactFormatter.write_char_escape(&mut self.out, char_escape)?;
        self.note_specials(from);
        Ok(())
    }

    fn write_raw_fragment<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let from = self.out.len();
        CompactFormatter.write_raw_fragment(&mut self.out, fragment)?;
        self.note_specials(from);
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.outer.push(std::mem::take(&mut self.member));
        self.out.push(b'{');
        Ok(())
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        // serde_json closes only what it opened.
        self.member = self.outer.pop().unwrap_or_default();
        self.out.push(b'}');
        Ok(())
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        _first: bool,
    ) -> io::Result<()> {
        self.member.start = self.out.len();
        if self.member.kept {
            self.out.push(b',');
        }
        Ok(())
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        // The key as written, `"name"`, ends the text, after the comma
        // begin_object_key wrote when a member was kept before it (a key
        // with escapes is no diagnostic one).
        let key = &self.out[self.member.start + usize::from(self.member.kept)..];
        let name = key.get(1..key.len().saturating_sub(1)).unwrap_or_default();
        self.member.dropped = DIAGNOSTIC_KEYS.iter().any(|d| d.as_bytes() == name);
        Ok(())
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push(b':');
        self.member.value = self.out.len();
        Ok(())
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        // The answer's own members sit one object deep (`outer` holds the
        // state from before it): its lists stay even when empty ([`trim`]).
        let value = &self.out[self.member.value..];
        let empty =
            matches!(value, b"null" | b"\"\"" | b"{}") || (value == b"[]" && self.outer.len() > 1);
        if self.member.dropped || empty {
            self.out.truncate(self.member.start);
            let kept = self.specials.partition_point(|&at| at < self.member.start);
            self.specials.truncate(kept);
        } else {
            self.member.kept = true;
        }
        Ok(())
    }
}

/// The output schema MCP lists for an op (the full profile): what its
/// tool results' `structuredContent` can hold, where the op's own schema
/// ([`crate::schema::output_schema`], what HTTP answers) says what the whole
/// output holds.
///
/// - A lean result drops diagnostic keys and empty values at any depth, so a
///   property is required only where lean never drops it: an integer, a
///   boolean, or a list of the answer's own (a float can be NaN, written
///   `null`; a string, an object, a reference, a nullable type or a list
///   deeper in can come out empty). The properties stay listed:
///   `explain: true` answers the whole output.
/// - A refusal is a tool result too, its body (`code`, `message`, category,
///   status, the op's detail) in `structuredContent`, and clients check a
///   result against the listed schema whether it is an error or not (the
///   TypeScript SDK's `callTool` does): so the schema is either shape.
pub fn listed_output_schema(full: &Value) -> Value {
    let mut answer = full.clone();
    let defs = answer.as_object_mut().and_then(|root| root.remove("$defs"));
    relax_required(&mut answer, true);
    let mut root = serde_json::Map::new();
    root.insert("type".into(), "object".into());
    if let Some(mut defs) = defs {
        relax_required(&mut defs, false);
        root.insert("$defs".into(), defs);
    }
    root.insert("anyOf".into(), Value::Array(vec![answer, refusal_schema()]));
    Value::Object(root)
}

/// What a refused call's `structuredContent` always holds (the HTTP error
/// envelope's fields; the rest is the refusal's own detail).
fn refusal_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The refusal's stable code."},
            "message": {"type": "string"},
            "category": {"type": "string"},
            "retryable": {"type": "boolean"},
            "status": {"type": "integer", "description": "The HTTP status the same refusal has over /v1."},
            "retry_after_s": {"type": "number"}
        },
        "required": ["code", "message", "category", "retryable", "status"]
    })
}

/// Drops from every `required` list, at any depth, what lean may drop;
/// `top` for the answer's own schema, whose lists lean keeps.
fn relax_required(schema: &mut Value, top: bool) {
    match schema {
        Value::Object(map) => {
            let kept_types: &[&str] = if top {
                &["integer", "boolean", "array"]
            } else {
                &["integer", "boolean"]
            };
            if let Some(Value::Array(required)) = map.get("required") {
                let props = map.get("properties");
                let kept: Vec<Value> = required
                    .iter()
                    .filter(|name| {
                        let name = name.as_str().unwrap_or_default();
                        !DIAGNOSTIC_KEYS.contains(&name)
                            && props
                                .and_then(|p| p.get(name))
                                .and_then(|p| p.get("type"))
                                .and_then(Value::as_str)
                                .is_some_and(|t| kept_types.contains(&t))
                    })
                    .cloned()
                    .collect();
                if kept.is_empty() {
                    map.remove("required");
                } else {
                    map.insert("required".into(), Value::Array(kept));
                }
            }
            map.values_mut().for_each(|v| relax_required(v, false));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| relax_required(v, false)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_diagnostics_and_empty_fields_keeps_answers() {
        let full = json!({
            "memory": [{"memory_key": "k", "content": "c", "similarity": 0.8, "score_parts": {"bm25": 1},
                        "content_hash": "ab", "labels": [], "source": "", "status": "active", "pinned": false}],
            "profile": [],
            "abstain": false,
            "plan": {"steps": 3},
            "next_cursor": null,
            "count": 1
        });
        assert_eq!(
            lean(full),
            json!({
                "memory": [{"memory_key": "k", "content": "c", "similarity": 0.8, "status": "active", "pinned": false}],
                "profile": [],
                "abstain": false,
                "count": 1
            })
        );
    }

    #[test]
    fn a_diagnostic_asked_for_by_name_asks_for_the_full_shape() {
        let asks = |v: Value| asks_for_diagnostics(v.as_object().unwrap());
        assert!(asks(
            json!({"memory_key": "k", "include_recall_breakdown": true})
        ));
        assert!(asks(json!({"fields": ["content", "content_hash"]})));
        assert!(!asks(json!({"include_recall_breakdown": false})));
        assert!(!asks(
            json!({"fields": ["content"], "include_history": true})
        ));
        assert!(!asks(json!({"memory_key": "content_hash"})));
    }

    #[test]
    fn the_listed_output_schema_takes_lean_answers_and_refusals() {
        let full = json!({
            "type": "object",
            "properties": {
                "memory_key": {"type": "string"},
                "version": {"type": "integer"},
                "changed": {"type": "boolean"},
                "content_hash": {"type": "string"},
                "hit": {"$ref": "#/$defs/Hit"}
            },
            "required": ["memory_key", "version", "changed", "content_hash", "hit"],
            "$defs": {"Hit": {"type": "object", "properties": {"labels": {"type": "array"}, "source": {"type": "string"}}, "required": ["labels", "source"]}}
        });
        let listed = listed_output_schema(&full);
        assert_eq!(listed["type"], "object");
        assert_eq!(
            listed["anyOf"][0]["required"],
            json!(["version", "changed"])
        );
        assert!(listed["$defs"]["Hit"].get("required").is_none(), "{listed}");
        assert!(listed["anyOf"][0].get("$defs").is_none());
        let v = jsonschema::draft202012::new(&listed).unwrap();
        let answer = json!({"memory_key": "k", "content_hash": "ab", "version": 1, "changed": true,
                            "hit": {"labels": [], "source": ""}});
        assert!(v.is_valid(&lean(answer.clone())), "{}", lean(answer));
        assert!(
            v.is_valid(&answer),
            "the whole output (explain: true) still conforms"
        );
        let refusal = json!({"code": "LOCKED", "message": "locked", "category": "conflict",
                             "retryable": false, "status": 409, "version": "not a number"});
        assert!(v.is_valid(&refusal));
        assert!(!v.is_valid(&json!({"version": "x"})), "neither shape");
    }

    #[test]
    fn a_non_object_becomes_an_empty_object() {
        assert_eq!(lean(json!(null)), json!({}));
        for v in [json!(null), json!([{"a": 1}]), json!("s"), json!(3)] {
            assert_eq!(lean_json(&v).unwrap().as_str(), "{}");
        }
    }

    /// What `lean` makes of `v`, as text.
    fn lean_text(v: &Value) -> String {
        lean(v.clone()).to_string()
    }

    #[derive(serde::Serialize)]
    struct Hit {
        memory_key: String,
        content_hash: String,
        labels: Vec<String>,
        source: String,
        expires_at: Option<String>,
        score: f64,
        plan: Plan,
        nested: Nested,
    }

    #[derive(serde::Serialize)]
    struct Plan {
        steps: u32,
    }

    #[derive(serde::Serialize)]
    struct Nested {
        note: Option<String>,
        empty: std::collections::BTreeMap<String, u8>,
    }

    #[test]
    fn a_typed_output_is_written_as_its_value_would_be() {
        let hit = |source: &str, score: f64, note: Option<&str>| Hit {
            memory_key: "k \"quoted\" \\ \u{1}".into(),
            content_hash: "ab".into(),
            labels: vec![],
            source: source.into(),
            expires_at: None,
            score,
            plan: Plan { steps: 3 },
            nested: Nested {
                note: note.map(str::to_owned),
                empty: Default::default(),
            },
        };
        for h in [
            hit("", 0.5, None),
            hit("cli", f64::NAN, Some("n")),
            hit("", -0.0, Some("")),
        ] {
            let value = serde_json::to_value(&h).unwrap();
            assert_eq!(lean_json(&h).unwrap().as_str(), lean_text(&value));
            assert_eq!(lean_json(&vec![&h]).unwrap().as_str(), "{}");
        }
        let h = hit("", 0.5, None);
        assert_eq!(
            lean_json(&h).unwrap().as_str(),
            r#"{"memory_key":"k \"quoted\" \\ \u0001","labels":[],"score":0.5}"#
        );
    }

    /// Any JSON value, with keys that lean drops or escapes among them.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "",
            "a",
            "b",
            "plan",
            "hash",
            "content_hash",
            "explain",
            "\"q\\",
            "é",
            "plans",
        ])
        .prop_map(str::to_owned);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop::sample::select(vec!["", " ", "x", "\"", "\u{0}\n", "null", "{}"])
                .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn lean_json_writes_what_lean_keeps(v in any_value()) {
            let (text, noted) = lean_json(&v).unwrap().into_parts();
            proptest::prop_assert_eq!(&text, &lean_text(&v));
            // Every quote and backslash of the text is noted, nothing else.
            let specials: Vec<usize> = text
                .bytes()
                .enumerate()
                .filter(|(_, b)| matches!(b, b'"' | b'\\'))
                .map(|(at, _)| at)
                .collect();
            proptest::prop_assert_eq!(noted, specials);
        }
    }
}
