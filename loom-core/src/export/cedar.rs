//! The Cedar schema: in namespace `Loom`, an `Agent` principal and a
//! `Namespace` resource, one record type per input and output model, the
//! action groups `Read`, `Write` and `Destructive` (in `Write`), and one
//! action per op in its group, whose context carries its input.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::effect::Effect;
use crate::registry::Registry;
use crate::schema;

/// Names Cedar reserves or that the schema already uses.
const RESERVED: &[&str] = &[
    "Bool",
    "Boolean",
    "Long",
    "String",
    "Set",
    "Record",
    "Entity",
    "Extension",
    "Agent",
    "Namespace",
    "Read",
    "Write",
    "Destructive",
    "in",
    "type",
    "entity",
    "action",
    "namespace",
    "appliesTo",
    "principal",
    "resource",
    "context",
    "__cedar",
];

/// A Cedar identifier for a model name: the name itself, unless Cedar or
/// this schema reserves it (`Namespace` is the resource entity), then with
/// `Model` after it. The JSON manifest names each op's two record types.
pub(super) fn type_ident(model: &str) -> String {
    let mut s: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'T');
    }
    if RESERVED.contains(&s.as_str()) {
        s.push_str("Model");
    }
    s
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// The non-null alternative of a nullable schema, and whether it was nullable.
fn strip_null(s: &Value) -> (&Value, bool) {
    if let Some(Value::Array(types)) = s.get("type")
        && types.iter().any(|t| t == "null")
    {
        return (s, true);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = s.get(key) {
            let non_null: Vec<&Value> = alts
                .iter()
                .filter(|a| a.get("type") != Some(&"null".into()))
                .collect();
            if non_null.len() == 1 && alts.len() == 2 {
                return (non_null[0], true);
            }
        }
    }
    (s, false)
}

/// The Cedar type of a JSON schema, `None` when Cedar cannot express it
/// (free-form values, unions of shapes): such attributes are left out. A
/// choice whose alternatives share one type (a Rust enum's `oneOf` of
/// string consts: `memory.apply`'s action, `grants.set`'s role) is that
/// type, so a policy can tell one choice from another.
fn cedar_type(s: &Value, indent: usize) -> Option<String> {
    let (s, _) = strip_null(s);
    if s.get("type").is_none()
        && let Some(Value::Array(alts)) = s.get("oneOf").or_else(|| s.get("anyOf"))
    {
        let mut types = alts
            .iter()
            .filter(|a| a.get("type") != Some(&"null".into()))
            .map(|a| cedar_type(a, indent));
        let first = types.next()??;
        return types.all(|t| t.as_ref() == Some(&first)).then_some(first);
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            let mut non_null = ts.iter().filter_map(Value::as_str).filter(|t| *t != "null");
            match (non_null.next(), non_null.next()) {
                (Some(one), None) => one,
                _ => return None,
            }
        }
        _ if s.get("properties").is_some() => "object",
        _ if s.get("enum").is_some() => "string",
        _ => return None,
    };
    Some(match ty {
        "string" => "String".into(),
        // Cedar has no type a JSON number with a fraction fills (its
        // `decimal` is an extension value written as a string): left
        // out, as free-form values are; typed as a String, a real call's
        // 0.73 would fail the schema.
        "number" => return None,
        "integer" => "Long".into(),
        "boolean" => "Bool".into(),
        "array" => format!("Set<{}>", cedar_type(s.get("items")?, indent)?),
        "object" => record(s, indent),
        _ => return None,
    })
}

fn record(s: &Value, indent: usize) -> String {
    let required = schema::required(s);
    let pad = "  ".repeat(indent + 1);
    let mut fields = Vec::new();
    for (name, prop) in schema::properties(s) {
        let Some(ty) = cedar_type(prop, indent + 1) else {
            continue;
        };
        let (_, nullable) = strip_null(prop);
        let optional = nullable || !required.contains(&name.as_str());
        fields.push(format!(
            "{pad}{}{}: {ty}",
            quote(name),
            if optional { "?" } else { "" }
        ));
    }
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{\n{}\n{}}}", fields.join(",\n"), "  ".repeat(indent))
    }
}

/// The Cedar schema of every op.
pub fn cedar_schema(registry: &Registry) -> String {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    for op in registry.ops() {
        let mut input = op.input_schema.clone();
        schema::strip_marks(&mut input);
        types
            .entry(type_ident(&op.input_model))
            .or_insert_with(|| record(&input, 1));
        types
            .entry(type_ident(&op.output_model))
            .or_insert_with(|| record(&op.output_schema, 1));
    }

    let mut out = String::new();
    out.push_str("// Generated by `loom export-actions --format cedar` from Loom's op registry.\n");
    out.push_str("namespace Loom {\n");
    out.push_str("  // The caller: a token subject acting in an org with a role.\n");
    out.push_str("  entity Agent = {\n    \"org\": String,\n    \"role\": String,\n    \"platform_admin\": Bool\n  };\n");
    out.push_str("  // Where a call acts.\n");
    out.push_str("  entity Namespace = {\n    \"org\": String,\n    \"kind\": String,\n    \"restricted\": Bool\n  };\n\n");
    for (name, body) in &types {
        let _ = writeln!(out, "  type {name} = {body};");
    }
    out.push_str(
        "\n  action \"Read\";\n  action \"Write\";\n  action \"Destructive\" in [\"Write\"];\n\n",
    );
    for op in registry.ops() {
        let group = match op.effect {
            Effect::Read => "Read",
            Effect::Write => "Write",
            Effect::Destructive => "Destructive",
        };
        let _ = writeln!(
            out,
            "  action {} in [{}] appliesTo {{\n    principal: [Agent],\n    resource: [Namespace],\n    context: {{ \"input\": {} }}\n  }};",
            quote(&op.name),
            quote(group),
            type_ident(&op.input_model),
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_idents_are_safe() {
        assert_eq!(type_ident("MemoryGet"), "MemoryGet");
        assert_eq!(type_ident("Vec<String>"), "Vec_String_");
        assert_eq!(type_ident("Record"), "RecordModel");
        assert_eq!(type_ident("3d"), "T3d");
    }

    #[test]
    fn json_schema_to_cedar_types() {
        let s = json!({
            "type": "object",
            "properties": {
                "k": {"type": "string"},
                "n": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "inner": {"anyOf": [{"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}, {"type": "null"}]},
                "free": {},
                "action": {"oneOf": [{"type": "string", "const": "delete"}, {"type": "string", "const": "label"}]},
                "status": {"anyOf": [{"oneOf": [{"type": "string", "const": "failed"}]}, {"type": "null"}]},
                "shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "score": {"type": "number"}
            },
            "required": ["k", "tags", "action"]
        });
        let r = record(&s, 0);
        assert!(r.contains("\"k\": String"), "{r}");
        assert!(r.contains("\"n\"?: Long"), "{r}");
        assert!(r.contains("\"tags\": Set<String>"), "{r}");
        assert!(r.contains("\"inner\"?: {"), "{r}");
        assert!(r.contains("\"b\": Bool"), "{r}");
        assert!(!r.contains("free"), "{r}");
        assert!(r.contains("\"action\": String"), "a choice of strings: {r}");
        assert!(r.contains("\"status\"?: String"), "{r}");
        assert!(!r.contains("shape"), "a union of types is left out: {r}");
        assert!(!r.contains("score"), "a fractional number is left out: {r}");
    }
}
