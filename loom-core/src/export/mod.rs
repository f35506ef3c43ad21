//! `loom export-actions`: the action schema a policy gateway governs Loom with,
//! generated from the registry.

mod cedar;
mod json;

pub use cedar::cedar_schema;
pub use json::{json_manifest, mcp_visibility};

/// An export format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The MCP tools/list manifest plus a `loom` block per tool.
    Json,
    /// A Cedar schema: one action per op.
    Cedar,
}

impl Format {
    /// Parses `--format`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "json" => Some(Format::Json),
            "cedar" => Some(Format::Cedar),
            _ => None,
        }
    }
}

/// Renders the registry in `format`.
pub fn render(registry: &crate::Registry, format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&json_manifest(registry))
                .expect("a JSON value always serializes");
            s.push('\n');
            s
        }
        Format::Cedar => cedar_schema(registry),
    }
}
