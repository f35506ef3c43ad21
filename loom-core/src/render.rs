//! Names of other ops inside texts (descriptions, field descriptions, output
//! schemas, `instead` texts, the primer), rendered for the listing that
//! reads them: the tool name when the listing carries the op, else the op
//! name with "(via loom_op)" after its first mention when `loom_op` routes it
//! on that connection, else the op name alone.

use std::collections::HashSet;

use crate::registry::{Op, Registry};
use crate::toolset::Listing;

/// Whether `loom_op` runs `op` on a connection with `listing`: never a hidden
/// op, nothing on assistant, and only reads on readonly.
pub fn loom_op_routes(op: &Op, listing: &Listing) -> bool {
    match listing {
        Listing::Assistant => false,
        _ if op.mcp_hidden().is_some() => false,
        Listing::Readonly => op.read_only(),
        Listing::Curated(_) | Listing::All => true,
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

/// Renders every op name in `text` for `listing`.
pub fn render_op_names(text: &str, registry: &Registry, listing: &Listing) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut mentioned: HashSet<&str> = HashSet::new();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let starts_word = bytes[i].is_ascii_lowercase()
            && (i == 0 || !(is_name_byte(bytes[i - 1]) || bytes[i - 1] == b'.'));
        if !starts_word {
            i += 1;
            continue;
        }
        // The longest dotted run of name bytes from here.
        let mut end = i;
        while end < bytes.len()
            && (is_name_byte(bytes[end])
                || (bytes[end] == b'.'
                    && end + 1 < bytes.len()
                    && bytes[end + 1].is_ascii_lowercase()))
        {
            end += 1;
        }
        let candidate = &text[i..end];
        if let Some(op) = registry.get(candidate) {
            out.push_str(&text[copied..i]);
            if op.listed_on(listing) {
                out.push_str(&op.tool_name);
            } else {
                out.push_str(candidate);
                if loom_op_routes(op, listing) && mentioned.insert(op.name.as_str()) {
                    out.push_str(" (via loom_op)");
                }
            }
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

/// Renders op names inside every string of a JSON value (field
/// descriptions, output schemas).
pub fn render_in_json(value: &mut serde_json::Value, registry: &Registry, listing: &Listing) {
    match value {
        serde_json::Value::String(s) if s.contains('.') => {
            *s = render_op_names(s, registry, listing);
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .for_each(|v| render_in_json(v, registry, listing)),
        serde_json::Value::Object(map) => map
            .values_mut()
            .for_each(|v| render_in_json(v, registry, listing)),
        _ => {}
    }
}
