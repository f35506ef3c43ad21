//! The memory-plane ops carry the roles, flags and toolsets the MCP
//! reference's toolsets table and the op conventions give them.

use loom_core::{Registry, Role, Toolset};

fn op(name: &str) -> &'static loom_core::Op {
    loom_ops::link();
    Registry::global()
        .expect("valid registry")
        .get(name)
        .unwrap_or_else(|| panic!("no op {name}"))
}

#[test]
fn toolsets_follow_the_reference_table() {
    let rosters: [(Toolset, &[&str]); 4] = [
        (
            Toolset::Core,
            &[
                "memory.set",
                "memory.update",
                "memory.delete",
                "memory.pin",
                "memory.get",
                "memory.history",
                "memory.apply",
                "memory.lock",
                "blacklist.add",
                "context.pack",
            ],
        ),
        (
            Toolset::Coding,
            &[
                "memory.set",
                "memory.update",
                "memory.get",
                "memory.delete",
                "working_memory.set",
                "context.pack",
            ],
        ),
        (
            Toolset::Atomic,
            &[
                "memory.set",
                "memory.get",
                "memory.delete",
                "memory.ask",
                "working_memory.set",
                "working_memory.append",
                "run.begin",
                "run.complete",
            ],
        ),
        (
            Toolset::Assistant,
            &[
                "namespace.get",
                "grants.list",
                "memory.inspect",
                "memory.search",
                "memory.ask",
                "memory.get",
                "memory.list",
                "memory.history",
                "memory.provenance",
                "memory.aggregate",
            ],
        ),
    ];
    let registry = Registry::global().expect("valid registry");
    for (toolset, expected) in rosters {
        let mut want: Vec<&str> = expected.to_vec();
        want.sort();
        let got: Vec<&str> = registry
            .ops()
            .iter()
            .filter(|o| o.in_toolset(toolset) && !o.name.starts_with("ops."))
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(got, want, "{toolset:?}");
    }
}

#[test]
fn roles_and_flags_follow_the_conventions() {
    for name in [
        "memory.get",
        "memory.history",
        "memory.list",
        "memory.search",
        "search.query",
        "namespace.get",
    ] {
        let o = op(name);
        assert_eq!(
            (o.meta.role, o.meta.idempotent, o.read_only()),
            (Role::Viewer, true, true),
            "{name}"
        );
    }
    let set = op("memory.set");
    assert_eq!(
        (set.meta.role, set.meta.audit, set.meta.idempotent),
        (Role::Writer, true, true)
    );
    for name in [
        "memory.update",
        "memory.delete",
        "memory.pin",
        "memory.unpin",
        "memory.apply",
        "memory.lock",
        "blacklist.add",
    ] {
        assert_eq!(
            (op(name).meta.role, op(name).meta.audit),
            (Role::Writer, true),
            "{name}"
        );
    }
    assert!(op("memory.apply").meta.destructive);
    // A sweep soft-deletes what a new pattern matches.
    assert!(op("blacklist.add").meta.destructive);
    // Role none takes a grant away: never an auto-approved tool.
    assert!(op("grants.set").meta.destructive);
    assert!(op("grants.set").annotations.destructive_hint);
    assert_eq!(
        (
            op("blacklist.remove").meta.role,
            op("blacklist.remove").meta.audit
        ),
        (Role::Admin, true)
    );
    assert!(op("blacklist.list").read_only());
    for name in ["memory.apply", "context.pack", "search.query"] {
        assert_eq!(op(name).rate.as_str(), "heavy", "{name}");
    }
    for name in [
        "run.begin",
        "run.complete",
        "working_memory.set",
        "working_memory.append",
    ] {
        assert!(!op(name).meta.run_scoped, "{name}");
    }
    assert!(
        op("memory.search")
            .mcp_hidden()
            .unwrap()
            .contains("loom_search")
    );
    assert!(
        op("namespace.list")
            .mcp_hidden()
            .unwrap()
            .contains("namespace.list_mine")
    );
    assert!(op("namespace.list_mine").mcp_hidden().is_none());
    // loom_search: declared on no roster, listed on every one but assistant.
    assert!(op("search.query").meta.toolsets.is_empty());
    assert!(op("search.query").synthetic());
    assert_eq!(op("search.query").toolsets(), Toolset::CURATED);
}

#[test]
fn every_memory_plane_op_has_a_curated_description() {
    loom_ops::link();
    for o in Registry::global().unwrap().ops() {
        let doc = o.meta.doc.trim();
        assert!(!doc.is_empty(), "{} has no doc comment", o.name);
        assert!(
            doc.split(". ").count() <= 5,
            "{}: keep it to a few sentences",
            o.name
        );
    }
}

/// What clients are shown holds only JSON Schema 2020-12's formats: the
/// width formats schemars gives Rust's numbers (`uint64`, `int64`,
/// `double`) are OpenAPI's, which the MCP TypeScript SDK warns of as
/// unknown. The argument check still reads them from the full schema.
#[test]
fn listed_schemas_carry_no_width_formats() {
    fn formats(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(f)) = map.get("format") {
                    out.push(f.clone());
                }
                map.values().for_each(|v| formats(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| formats(v, out)),
            _ => {}
        }
    }
    loom_ops::link();
    let mut full = Vec::new();
    for op in Registry::global().expect("valid registry").ops() {
        let mut shown = Vec::new();
        formats(&op.listed_input, &mut shown);
        formats(&op.output_schema, &mut shown);
        assert!(shown.is_empty(), "{}: {shown:?}", op.name);
        formats(&op.input_schema, &mut full);
    }
    assert!(
        full.iter().any(|f| f == "int64"),
        "the full input schemas keep them for the check"
    );
}

/// A page size below 1 is refused: every `limit` says so in its listed
/// schema, so a client that checks its arguments against the listing
/// never sends one the server refuses. (Larger ones are clamped, not
/// refused: no maximum is listed unless the op refuses past one.)
#[test]
fn every_limit_lists_its_minimum() {
    loom_ops::link();
    let mut limits = 0;
    for op in Registry::global().expect("valid registry").ops() {
        let Some(limit) = op.listed_input["properties"].get("limit") else {
            continue;
        };
        limits += 1;
        assert_eq!(limit["minimum"], 1, "{}: {limit}", op.name);
    }
    assert!(limits >= 7, "{limits} ops take a limit");
}
