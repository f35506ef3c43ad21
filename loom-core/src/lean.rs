//! Lean results: what MCP's `structuredContent` and text carry unless the
//! call asks `explain: true`. Some clients hand `structuredContent` to the
//! model as well as the text, and the full diagnostic shape costs thousands
//! of tokens for a short answer: score components, explanations, retrieval
//! plans, costs, hashes and empty fields are dropped; hits keep their key,
//! content, namespace, dates, similarity, source and status, and counts,
//! paging and abstain fields stay.

use serde_json::Value;

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
    trim(&mut full);
    if full.is_object() {
        full
    } else {
        serde_json::json!({})
    }
}

fn trim(v: &mut Value) {
    match v {
        Value::Object(map) => {
            // One pass: each pass that drops a key rebuilds the map's
            // index. Empty sections of a list answer still say "nothing
            // found".
            map.retain(|k, v| {
                if DIAGNOSTIC_KEYS.contains(&k.as_str()) {
                    return false;
                }
                trim(v);
                v.is_array() || !is_empty(v)
            });
        }
        Value::Array(items) => items.iter_mut().for_each(trim),
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
                "memory": [{"memory_key": "k", "content": "c", "similarity": 0.8, "labels": [], "status": "active", "pinned": false}],
                "profile": [],
                "abstain": false,
                "count": 1
            })
        );
    }

    #[test]
    fn a_non_object_becomes_an_empty_object() {
        assert_eq!(lean(json!(null)), json!({}));
    }
}
