//! Registry, roster, annotation, profile and export tests over a small set of
//! ops declared with the real attribute.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    Effect, Listing, Maturity, McpVisibility, OpCx, OpMeta, OpName, OpResult, Profile, RateClass,
    Registry, RegistryError, Role, TypeInfo, loom_op,
};

#[allow(dead_code)] // fields exist for their schemas
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyInput {
    /// The memory's key.
    memory_key: String,
    namespace: Option<String>,
    agent: Option<String>,
    /// Follow links.
    #[schemars(extend("x-loom-field" = "mcp_hidden"))]
    follow: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Serialize, JsonSchema)]
pub struct Done {
    /// Whether it worked.
    ok: bool,
}

mod memory {
    use super::*;

    /// Reads one memory by key.
    ///
    /// Falls back to any agent's row.
    #[loom_op(role = "viewer", idempotent, toolsets(core, coding, atomic, assistant))]
    pub async fn get(_cx: &OpCx, input: KeyInput) -> OpResult<Done> {
        Ok(Done {
            ok: !input.memory_key.is_empty(),
        })
    }

    /// Writes a memory.
    #[loom_op(role = "writer", idempotent, audit, toolsets(core))]
    pub async fn set(_cx: &OpCx, _input: KeyInput) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    #[loom_op(role = "writer", audit, toolsets(core))]
    pub async fn delete(_cx: &OpCx, _input: KeyInput) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    /// Bulk changes.
    #[loom_op(role = "writer", destructive, rate = "heavy", toolsets(core))]
    pub async fn apply(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    /// Per-store search.
    #[loom_op(
        role = "viewer",
        idempotent,
        mcp_hidden = "use loom_search",
        toolsets(assistant)
    )]
    pub async fn search(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }
}

mod run {
    use super::*;

    /// Begins a run.
    #[loom_op(role = "writer", toolsets(atomic), run_scoped = false)]
    pub async fn begin(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    /// Experimental, listed nowhere.
    #[loom_op(role = "viewer", idempotent, maturity = "experimental")]
    pub async fn peek(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    /// Experimental, listed by core.
    #[loom_op(role = "viewer", idempotent, maturity = "experimental", toolsets(core))]
    pub async fn trial(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }
}

mod search {
    use super::*;

    /// One search over every plane.
    #[loom_op(role = "viewer", idempotent, tool = "loom_search", synthetic)]
    pub async fn query(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }
}

mod namespace {
    use super::*;

    /// Every namespace of the org.
    #[loom_op(role = "viewer", idempotent, mcp_hidden = "use namespace.list_mine")]
    pub async fn list(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }

    #[loom_op(role = "viewer", idempotent, budget_ms = 300)]
    pub async fn list_mine(_cx: &OpCx, _input: Empty) -> OpResult<Done> {
        Ok(Done { ok: true })
    }
}

fn registry() -> &'static Registry {
    Registry::global().expect("the test registry is valid")
}

fn names<'a>(ops: impl Iterator<Item = &'a crate::Op>) -> Vec<&'a str> {
    ops.map(|o| o.name.as_str()).collect()
}

#[test]
fn every_op_is_collected_in_name_order() {
    assert_eq!(
        names(registry().ops().iter()),
        [
            "memory.apply",
            "memory.delete",
            "memory.get",
            "memory.search",
            "memory.set",
            "namespace.list",
            "namespace.list_mine",
            "run.begin",
            "run.peek",
            "run.trial",
            "search.query",
        ]
    );
    let get = registry().by_tool_name("loom_memory_get").unwrap();
    assert_eq!(get.name, "memory.get");
    assert_eq!(
        registry().get("namespace.list_mine").unwrap().tool_name,
        "loom_namespace_list_mine"
    );
    assert_eq!(
        registry().by_tool_name("loom_search").unwrap().name,
        "search.query"
    );
    assert!(registry().get("memory.nope").is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn the_shim_decodes_calls_and_encodes() {
    let op = registry().get("memory.get").unwrap();
    let cx = OpCx::new("memory.get", Default::default());
    let out = (op.meta.call)(&cx, json!({"memory_key": "k"}))
        .await
        .unwrap();
    assert_eq!(out.json().unwrap(), r#"{"ok":true}"#);
    assert_eq!(out.into_value().unwrap(), json!({"ok": true}));
    let err = (op.meta.call)(&cx, json!({"memory_key": 1}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), crate::ErrorCode::InvalidArguments);
}

#[test]
fn annotations_follow_the_entry() {
    let a = |n: &str| registry().get(n).unwrap().annotations;
    assert!(a("memory.get").read_only_hint);
    assert!(!a("memory.get").destructive_hint);
    assert!(
        !a("memory.set").read_only_hint,
        "audited ops are never read-only"
    );
    assert!(a("memory.set").idempotent_hint);
    assert!(!a("memory.set").destructive_hint);
    assert!(a("memory.delete").destructive_hint, "derived from the verb");
    assert!(a("memory.apply").destructive_hint, "declared");
    assert_eq!(
        registry().get("memory.apply").unwrap().effect,
        Effect::Destructive
    );
    assert_eq!(
        registry().get("memory.apply").unwrap().rate,
        RateClass::Heavy
    );
    assert_eq!(registry().get("memory.set").unwrap().rate, RateClass::Write);
    assert_eq!(registry().get("memory.get").unwrap().rate, RateClass::Read);
}

#[test]
fn rosters() {
    let r = registry();
    let listed =
        |l: &str| names(r.listed(Box::leak(Box::new(Listing::parse(l).unwrap())))).join(" ");
    assert_eq!(
        listed("core"),
        "memory.apply memory.delete memory.get memory.set run.trial search.query"
    );
    assert_eq!(listed("coding"), "memory.get search.query");
    assert_eq!(listed("atomic"), "memory.get run.begin search.query");
    assert_eq!(listed("coding+atomic"), "memory.get run.begin search.query");
    assert_eq!(
        listed("tasks"),
        "search.query",
        "a synthetic tool is on every roster"
    );
    assert_eq!(
        listed("all"),
        "memory.apply memory.delete memory.get memory.set namespace.list_mine run.begin run.trial search.query",
        "hidden ops and experimental ops no core/atomic roster lists are left out"
    );
    assert_eq!(
        listed("readonly"),
        "memory.get namespace.list_mine run.trial search.query"
    );
    assert_eq!(
        listed("assistant"),
        "memory.get memory.search",
        "assistant lists its hidden reads"
    );
}

#[test]
fn unknown_toolsets_fall_back_to_the_default() {
    let default = Listing::core();
    assert_eq!(Listing::resolve(Some("coding+nope"), &default), default);
    assert_eq!(Listing::resolve(Some("assistant+core"), &default), default);
}

#[test]
fn profiles_shape_the_listing() {
    let get = registry().get("memory.get").unwrap();
    assert_eq!(
        get.description_for(Profile::Standard),
        "Reads one memory by key.\n\nFalls back to any agent's row."
    );
    assert_eq!(
        get.description_for(Profile::Compact),
        "Reads one memory by key."
    );
    let standard = get.input_schema_for(Profile::Standard);
    let props: Vec<&String> = standard["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        props,
        ["memory_key", "namespace"],
        "agent is server-filled; follow is MCP-hidden"
    );
    assert_eq!(standard["required"], json!(["memory_key"]));
    assert_eq!(
        standard["properties"]["memory_key"]["description"],
        "The memory's key."
    );
    let compact = get.input_schema_for(Profile::Compact);
    assert_eq!(
        compact["properties"]["memory_key"],
        json!({"type": "string"})
    );
    assert_eq!(get.output_schema["properties"]["ok"]["type"], "boolean");
    // hidden fields stay accepted by name
    get.validator()
        .check(
            "memory.get",
            &json!({"memory_key": "k", "follow": true}),
            false,
        )
        .unwrap();
}

#[test]
fn an_op_without_docs_gets_the_fallback_line() {
    let op = registry().get("namespace.list_mine").unwrap();
    assert_eq!(
        op.description,
        "Loom op namespace.list_mine: latency budget 300 ms; idempotent; minimum role viewer."
    );
    let del = registry().get("memory.delete").unwrap();
    assert!(
        del.description
            .contains("latency budget 5000 ms; not idempotent; minimum role writer")
    );
}

fn leaked(name: OpName, handler: &'static str, mcp: McpVisibility) -> &'static OpMeta {
    fn call<'a>(_: &'a OpCx, _: Value) -> crate::BoxFuture<'a, OpResult<crate::Output>> {
        Box::pin(async { Ok(Value::Null.into()) })
    }
    Box::leak(Box::new(OpMeta {
        name,
        handler,
        role: Role::Viewer,
        idempotent: true,
        audit: false,
        writes: false,
        destructive: false,
        toolsets: &[],
        maturity: Maturity::Stable,
        mcp,
        budget_ms: None,
        rate: None,
        run_scoped: true,
        tool: None,
        doc: "",
        input: TypeInfo::of::<Empty>(),
        output: TypeInfo::of::<Done>(),
        call,
        file: "here.rs",
        line: 1,
    }))
}

#[test]
fn duplicate_names_and_tool_names_are_refused_together() {
    let errors = Registry::from_metas([
        leaked(OpName::Explicit("a.b"), "one", McpVisibility::Callable),
        leaked(OpName::Explicit("a.b"), "two", McpVisibility::Callable),
        leaked(OpName::Explicit("a.b_c"), "three", McpVisibility::Callable),
        leaked(OpName::Explicit("a_b.c"), "four", McpVisibility::Callable),
        leaked(OpName::Explicit("Bad"), "five", McpVisibility::Callable),
        leaked(
            OpName::Explicit("x.y"),
            "six",
            McpVisibility::Hidden { instead: " " },
        ),
    ])
    .unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, RegistryError::DuplicateName { name, .. } if name == "a.b"))
    );
    assert!(errors.iter().any(
        |e| matches!(e, RegistryError::DuplicateToolName { tool, .. } if tool == "loom_a_b_c")
    ));
    assert!(errors.iter().any(|e| matches!(
        e,
        RegistryError::BadName {
            handler: "five",
            ..
        }
    )));
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, RegistryError::HiddenWithoutInstead { .. }))
    );
    assert_eq!(errors.len(), 4, "{errors:?}");
}

#[test]
fn derived_names_resolve() {
    let r = Registry::from_metas([leaked(
        OpName::Derived {
            module_path: "loom_ops::working_memory",
            handler: "append",
        },
        "append",
        McpVisibility::Callable,
    )])
    .unwrap();
    assert_eq!(r.ops()[0].name, "working_memory.append");
    assert_eq!(r.ops()[0].tool_name, "loom_working_memory_append");
}

#[test]
fn op_suggestions() {
    assert_eq!(
        registry().suggest("memory.gte", 2),
        ["memory.get", "memory.set"]
    );
    assert!(registry().suggest("zzz", 3).is_empty());
}

#[test]
fn capabilities_report_every_op() {
    let caps = crate::capabilities(registry());
    assert_eq!(caps.len(), registry().ops().len());
    let search = caps.iter().find(|c| c.op == "memory.search").unwrap();
    assert_eq!(search.mcp, "hidden");
    assert_eq!(search.instead.as_deref(), Some("use loom_search"));
    let peek = caps.iter().find(|c| c.op == "run.peek").unwrap();
    assert_eq!(
        (peek.mcp.as_str(), peek.maturity.as_str()),
        ("callable", "experimental")
    );
    let get = caps.iter().find(|c| c.op == "memory.get").unwrap();
    // its curated rosters, then the derived listings that carry it
    assert_eq!(
        get.toolsets,
        ["core", "coding", "atomic", "assistant", "readonly", "all"]
    );
    // an experimental op no roster lists: on no listing
    assert!(peek.toolsets.is_empty(), "{:?}", peek.toolsets);
    assert_eq!(get.effect, "read");
    // A synthetic tool is reported as every listing but assistant's carries it.
    let search = caps.iter().find(|c| c.op == "search.query").unwrap();
    assert_eq!(
        (search.tool.as_str(), search.mcp.as_str()),
        ("loom_search", "listed")
    );
    assert_eq!(
        search.toolsets,
        [
            "core", "coding", "tracker", "tasks", "atomic", "readonly", "all"
        ]
    );
}

#[test]
fn a_synthetic_tool_is_named_by_its_tool_wherever_it_is_listed() {
    let text = "Prefer search.query to memory.search.";
    let render =
        |l: &str| crate::render::render_op_names(text, registry(), &Listing::parse(l).unwrap());
    assert_eq!(render("core"), "Prefer loom_search to memory.search.");
    assert_eq!(render("readonly"), "Prefer loom_search to memory.search.");
    assert_eq!(
        render("assistant"),
        "Prefer search.query to loom_memory_search.",
        "assistant lists no synthetic tool"
    );
}

#[test]
fn json_manifest_has_the_tools_list_shape_and_a_loom_block() {
    let m = crate::export::json_manifest(registry());
    let tools = m["tools"].as_array().unwrap();
    assert_eq!(tools.len(), registry().ops().len());
    let apply = tools
        .iter()
        .find(|t| t["name"] == "loom_memory_apply")
        .unwrap();
    assert_eq!(apply["inputSchema"]["type"], "object");
    assert_eq!(apply["outputSchema"]["type"], "object");
    assert_eq!(
        apply["loom"],
        json!({
            "op": "memory.apply", "http_path": "/v1/memory.apply", "required_role": "writer",
            "effect": "destructive", "idempotent": false, "audit": false, "run_scoped": true,
            "mcp_visibility": "listed",
            "toolsets": ["core", "all"], "maturity": "stable", "input_model": "Empty", "output_model": "Done",
            "cedar_input_type": "Empty", "cedar_output_type": "Done"
        })
    );
    let search = tools
        .iter()
        .find(|t| t["name"] == "loom_memory_search")
        .unwrap();
    assert_eq!(search["loom"]["mcp_visibility"], "hidden");
    assert_eq!(search["loom"]["mcp_instead"], "use loom_search");
    let synthetic = tools.iter().find(|t| t["name"] == "loom_search").unwrap();
    assert_eq!(synthetic["loom"]["op"], "search.query");
    assert_eq!(synthetic["loom"]["mcp_visibility"], "listed");
    assert_eq!(
        synthetic["loom"]["toolsets"],
        json!([
            "core", "coding", "tracker", "tasks", "atomic", "readonly", "all"
        ])
    );
}

#[test]
fn cedar_schema_parses_with_cedar() {
    let text = crate::export::cedar_schema(registry());
    let (schema, warnings) = cedar_policy::Schema::from_cedarschema_str(&text)
        .unwrap_or_else(|e| panic!("cedar refused the schema: {e:?}\n{text}"));
    let _ = warnings.count();
    let actions: Vec<String> = schema.actions().map(|a| a.to_string()).collect();
    for op in registry().ops() {
        assert!(
            actions
                .iter()
                .any(|a| a.contains(&format!("\"{}\"", op.name))),
            "{} missing in {actions:?}",
            op.name
        );
    }
    assert!(text.contains("action \"Destructive\" in [\"Write\"];"));
    assert!(text.contains("action \"memory.delete\" in [\"Destructive\"]"));
    assert!(text.contains("action \"memory.get\" in [\"Read\"]"));
    assert!(text.contains("action \"memory.set\" in [\"Write\"]"));
    assert!(text.contains("type KeyInput = {"));
    assert!(
        text.contains("\"follow\"?: Bool"),
        "records keep every input field:\n{text}"
    );
}

#[test]
fn op_names_render_for_the_listing_that_reads_them() {
    let r = registry();
    let core = Listing::core();
    let text = "Use memory.set to write; memory.peek is not an op; see run.begin, then run.begin again. \
                Not namespace.list or memory.search.";
    assert_eq!(
        crate::render::render_op_names(text, r, &core),
        "Use loom_memory_set to write; memory.peek is not an op; see run.begin (via loom_op), then run.begin again. \
         Not namespace.list or memory.search."
    );
    let readonly = Listing::Readonly;
    assert_eq!(
        crate::render::render_op_names("memory.get then memory.set", r, &readonly),
        "loom_memory_get then memory.set",
        "readonly routes reads only"
    );
    assert_eq!(
        crate::render::render_op_names("run.trial and memory.get", r, &Listing::Assistant),
        "run.trial and loom_memory_get",
        "assistant routes nothing through loom_op"
    );
    assert_eq!(
        crate::render::render_op_names("xmemory.set", r, &core),
        "xmemory.set"
    );
}
