//! Schemas: generated once per op with schemars (JSON Schema 2020-12,
//! subschemas inlined so every schema stands alone), then shaped for each
//! listing profile.
//!
//! Input fields can be marked for the shaping with schemars' `extend`:
//!
//! ```ignore
//! #[schemars(extend("x-loom-field" = "mcp_hidden"))]  // or "dashboard", "server"
//! ```
//!
//! Marked fields, and the fields the server always fills by name
//! ([`SERVER_FILLED`]), are removed from what MCP lists yet still accepted by
//! name, since validation runs on the whole schema.

use schemars::generate::{Contract, SchemaSettings};
use schemars::transform::RecursiveTransform;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::op::TypeInfo;

/// Fields the server fills itself, whatever the op.
pub const SERVER_FILLED: &[&str] = &["org", "agent", "user_id", "session_id", "consumer"];

/// The schema key that marks a field for the shaping.
pub const FIELD_MARK: &str = "x-loom-field";

/// The schema key (`true`) that marks an op's `agent` as the writer whose
/// rows it reads: a listing whose calls' own agent cannot stand in for it
/// (the assistant's) lists it as required, as the op refuses a call there
/// that leaves it out.
pub const WRITER_MARK: &str = "x-loom-writer";

/// How much of each tool a listing shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// The curated description and the input schema (the default).
    #[default]
    Standard,
    /// Adds `outputSchema`.
    Full,
    /// The first paragraph and the argument tree.
    Compact,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 3] = [Profile::Standard, Profile::Full, Profile::Compact];

    /// Parses `?schema_profile=`; `None` when unknown (the caller falls back).
    pub fn parse(value: &str) -> Option<Profile> {
        match value.trim().to_ascii_lowercase().as_str() {
            "standard" => Some(Profile::Standard),
            "full" => Some(Profile::Full),
            "compact" => Some(Profile::Compact),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Standard => "standard",
            Profile::Full => "full",
            Profile::Compact => "compact",
        }
    }
}

fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings
        .transforms
        .push(Box::new(RecursiveTransform(reflow_description)));
    if contract == Contract::Deserialize {
        settings
            .transforms
            .push(Box::new(RecursiveTransform(bound_integers)));
    }
    settings.contract = contract;
    SchemaGenerator::new(settings)
}

/// A field's description as [`reflow`] writes an op's: the doc comment's
/// source line breaks cost a client tokens on every turn and mean nothing
/// to a model.
fn reflow_description(schema: &mut Schema) {
    if let Some(Value::String(text)) = schema
        .as_object_mut()
        .and_then(|o| o.get_mut("description"))
    {
        *text = reflow(text);
    }
}

/// Gives an input integer the bounds of its Rust type where schemars
/// leaves them open (`i32`, `u32`, `usize`), keeping any the field sets.
///
/// Why: a number past them passes the schema and then fails to decode,
/// with serde's message naming no field; bounded, the argument check
/// refuses it by name. `i64` and `u64` are checked by `args` instead (JSON
/// Schema bounds past 2^53 are not exact as floats).
fn bound_integers(schema: &mut Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let (min, max) = match obj.get("format").and_then(Value::as_str) {
        Some("int32") => (i64::from(i32::MIN), i32::MAX.unsigned_abs().into()),
        Some("uint32") => (0, u64::from(u32::MAX)),
        Some("uint") => (0, usize::MAX as u64),
        _ => return,
    };
    obj.entry("minimum").or_insert(min.into());
    obj.entry("maximum").or_insert(max.into());
}

/// The input schema of a model: what a call may send (whole, marks kept).
pub fn input_schema(info: &TypeInfo) -> Value {
    root_object((info.schema)(&mut generator(Contract::Deserialize)))
}

/// What a run-scoped op's input holds besides its model's fields when the
/// model declares no `run_id` of its own: the run a call names, which the
/// pipeline takes out of the arguments and checks before the op runs (a
/// name as identities are: at most 256 bytes, no control characters;
/// null names none; bytes are no JSON Schema bound, so only the text says
/// so). Hidden on MCP, as `agent` is: accepted by name, and
/// in the whole schema that validation and `loom export-actions --format
/// cedar` read, so a policy engine's schema admits what Loom accepts.
const RUN_ID_DESCRIPTION: &str = "The run this call belongs to (at most 256 bytes): one begun \
    with run.begin in the call's namespace and not ended. Left out, a call over MCP belongs to \
    its session's implicit run.";

/// Adds [`RUN_ID_DESCRIPTION`]'s `run_id` to a run-scoped op's whole input
/// schema, unless the model declares one (`run.*` and `working_memory.*`
/// give it meanings of their own).
pub fn add_run_id(full: &mut Value) {
    let Some(root) = full.as_object_mut() else {
        return;
    };
    let props = root
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(props) = props.as_object_mut() else {
        return;
    };
    props.entry("run_id").or_insert_with(|| {
        serde_json::json!({
            "type": ["string", "null"],
            "description": RUN_ID_DESCRIPTION,
            FIELD_MARK: "mcp_hidden",
        })
    });
}

/// The output schema of a model: what a call answers.
pub fn output_schema(info: &TypeInfo) -> Value {
    let mut v = root_object((info.schema)(&mut generator(Contract::Serialize)));
    strip_marks(&mut v);
    strip_width_formats(&mut v);
    v
}

/// The `format`s schemars gives Rust's number types (`int64`, `uint64`,
/// `double`, …): OpenAPI's, not JSON Schema 2020-12's, so a client's
/// validator warns of each as unknown (the MCP TypeScript SDK's does).
/// What they say that a client can check is in `minimum` / `maximum`
/// already; the argument check keeps them (`args`).
const WIDTH_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
    "double",
];

/// Removes every [`WIDTH_FORMATS`] `format`, at any depth: from what
/// clients are shown.
pub fn strip_width_formats(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| WIDTH_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(strip_width_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_width_formats),
        _ => {}
    }
}

/// Root schemas lose `$schema`, `title` and `description` (the tool carries
/// its own name and description)
/// and always have `type: object`.
fn root_object(schema: Schema) -> Value {
    let mut v = schema.to_value();
    if let Value::Object(map) = &mut v {
        map.remove("$schema");
        map.remove("title");
        map.remove("description");
        map.entry("type").or_insert_with(|| "object".into());
    } else {
        // `true` / `false` schemas: an op without arguments.
        v = serde_json::json!({"type": "object"});
    }
    v
}

/// Whether a property is kept in the MCP listing.
pub fn is_listed_field(name: &str, prop: &Value) -> bool {
    !SERVER_FILLED.contains(&name) && prop.get(FIELD_MARK).is_none()
}

/// The input schema MCP lists: server-filled, dashboard-only and MCP-hidden
/// fields removed; `namespace` optional; marks stripped.
pub fn listed_input(full: &Value) -> Value {
    let mut v = full.clone();
    if let Some(map) = v.as_object_mut() {
        let mut removed = Vec::new();
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            props.retain(|name, prop| {
                let keep = is_listed_field(name, prop);
                if !keep {
                    removed.push(name.clone());
                }
                keep
            });
        }
        // A model with no fields lists none, as schemars writes it, even
        // with the hidden `run_id` its whole schema takes (`add_run_id`).
        if map
            .get("properties")
            .is_some_and(|p| p.as_object().is_some_and(Map::is_empty))
        {
            map.remove("properties");
        }
        removed.push("namespace".into());
        if let Some(Value::Array(required)) = map.get_mut("required") {
            required.retain(|r| !removed.iter().any(|x| r == x));
            if required.is_empty() {
                map.remove("required");
            }
        }
    }
    strip_marks(&mut v);
    strip_width_formats(&mut v);
    v
}

/// Removes every `x-loom-*` key, at any depth.
pub fn strip_marks(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !k.starts_with("x-loom-"));
            map.values_mut().for_each(strip_marks);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_marks),
        _ => {}
    }
}

/// The argument tree: types, properties, required, items and enums only.
pub fn compact_tree(v: &Value) -> Value {
    let Some(map) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    for key in ["type", "enum", "const", "required"] {
        if let Some(x) = map.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        let props = props
            .iter()
            .map(|(k, p)| (k.clone(), compact_tree(p)))
            .collect();
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(items) = map.get("items") {
        out.insert("items".into(), compact_tree(items));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = map.get(key) {
            out.insert(
                key.into(),
                Value::Array(alts.iter().map(compact_tree).collect()),
            );
        }
    }
    Value::Object(out)
}

/// A doc comment as one line per paragraph: source line breaks cost tokens
/// and mean nothing to a model. Lists (`- `, `* `, `1. `) keep their lines.
pub fn reflow(text: &str) -> String {
    text.trim()
        .split("\n\n")
        .map(|para| {
            let mut out = String::new();
            for line in para.lines().map(str::trim) {
                let item = line.starts_with("- ")
                    || line.starts_with("* ")
                    || line.split_once(". ").is_some_and(|(n, _)| {
                        n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty()
                    });
                if !out.is_empty() {
                    out.push(if item { '\n' } else { ' ' });
                }
                out.push_str(line);
            }
            out
        })
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The first paragraph of a description.
pub fn first_paragraph(text: &str) -> String {
    text.trim()
        .split("\n\n")
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The properties of an object schema, in declaration order.
pub fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The required property names of an object schema.
pub fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Input {
        /// The key.
        memory_key: String,
        namespace: Option<String>,
        agent: Option<String>,
        #[schemars(extend("x-loom-field" = "mcp_hidden"))]
        follow: Option<bool>,
        #[schemars(extend("x-loom-field" = "dashboard"))]
        ui_hint: Option<String>,
        nested: Option<Inner>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Inner {
        labels: Vec<String>,
    }

    #[test]
    fn generated_schemas_are_2020_12_objects_without_root_title() {
        let s = input_schema(&TypeInfo::of::<Input>());
        assert_eq!(s["type"], "object");
        assert!(s.get("$schema").is_none());
        assert!(s.get("title").is_none());
        assert!(s.get("$defs").is_none(), "subschemas are inlined: {s}");
        assert_eq!(
            s["properties"]["nested"]["properties"]["labels"]["type"],
            "array"
        );
    }

    #[test]
    fn listing_removes_server_filled_and_marked_fields() {
        let full = input_schema(&TypeInfo::of::<Input>());
        let listed = listed_input(&full);
        let names: Vec<_> = properties(&listed).map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["memory_key", "namespace", "nested"]);
        assert_eq!(required(&listed), ["memory_key"]);
        assert!(!listed.to_string().contains("x-loom"));
        // the whole schema still accepts them by name
        assert!(full["properties"].get("follow").is_some());
    }

    #[test]
    fn compact_keeps_only_the_tree() {
        let full = input_schema(&TypeInfo::of::<Input>());
        let c = compact_tree(&listed_input(&full));
        assert_eq!(c["properties"]["memory_key"], json!({"type": "string"}));
        assert!(!c.to_string().contains("The key."));
    }

    #[test]
    fn reflow_joins_paragraph_lines_but_keeps_lists() {
        assert_eq!(
            reflow("Reads one\nmemory.\n\n- a\n- b\n"),
            "Reads one memory.\n\n- a\n- b"
        );
    }

    #[test]
    fn first_paragraph_joins_lines() {
        assert_eq!(
            first_paragraph("Reads one\nmemory.\n\nMore text."),
            "Reads one memory."
        );
    }

    #[test]
    fn profiles_parse() {
        assert_eq!(Profile::parse("FULL"), Some(Profile::Full));
        assert_eq!(Profile::parse("compact"), Some(Profile::Compact));
        assert_eq!(Profile::parse("tiny"), None);
    }
}
