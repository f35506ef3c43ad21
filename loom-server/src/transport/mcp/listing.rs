//! `tools/list`: every op the connection's roster lists, shaped by its
//! profile and revision, plus the three synthetic tools (none on assistant).
//! Built once per (listing, profile, revision) and cached, with its JSON
//! text: the listing is read on every session and never changes while the
//! process runs, so `tools/list` answers the text it wrote the first time
//! instead of copying the value and serializing it again.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use loom_core::render::{loom_op_routes, render_op_names};
use loom_core::{Annotations, Listing, Op, Profile, Registry};
use serde_json::{Map, Value, json};

use super::jsonrpc::JsonText;
use super::protocol::Revision;

/// The registry op behind the synthetic `loom_search` tool.
pub const SEARCH_OP: &str = "search.query";
/// The synthetic tools.
pub const LOOM_SEARCH: &str = "loom_search";
/// The session primer as a tool.
pub const LOOM_ACTIVATE: &str = "loom_activate";
/// Runs any op the roster does not list.
pub const LOOM_OP: &str = "loom_op";
/// How long a client may cache a list result.
pub const LIST_TTL_MS: u64 = 600_000;

type Key = (Listing, Profile, Revision);

/// One cached listing: the `tools/list` result and its JSON text.
#[derive(Clone)]
struct Listed {
    value: Arc<Value>,
    text: Arc<str>,
}

/// The cached listings of one registry.
pub struct Listings {
    registry: &'static Registry,
    cache: RwLock<HashMap<Key, Listed>>,
}

impl Listings {
    /// An empty cache over `registry`.
    pub fn new(registry: &'static Registry) -> Self {
        Listings {
            registry,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &'static Registry {
        self.registry
    }

    /// The `tools/list` result for a connection.
    pub fn tools_list(
        &self,
        listing: &Listing,
        profile: Profile,
        revision: Revision,
    ) -> Arc<Value> {
        self.listed(listing, profile, revision).value
    }

    /// [`Listings::tools_list`] as the JSON text `tools/list` answers.
    pub fn tools_list_text(
        &self,
        listing: &Listing,
        profile: Profile,
        revision: Revision,
    ) -> Arc<str> {
        self.listed(listing, profile, revision).text
    }

    fn listed(&self, listing: &Listing, profile: Profile, revision: Revision) -> Listed {
        let key = (listing.clone(), profile, revision);
        if let Some(hit) = self
            .cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return hit.clone();
        }
        let value = json!({
            "tools": build(self.registry, listing, profile, revision),
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "public",
        });
        let built = Listed {
            text: Arc::from(JsonText::of(&value).into_string()),
            value: Arc::new(value),
        };
        self.cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, built.clone());
        built
    }
}

/// Whether the connection's listing carries this op as its own tool (a
/// synthetic one, `search.query`, is listed with the synthetic tools).
pub fn lists(op: &Op, listing: &Listing) -> bool {
    !op.synthetic() && op.listed_on(listing)
}

fn build(
    registry: &Registry,
    listing: &Listing,
    profile: Profile,
    revision: Revision,
) -> Vec<Value> {
    let mut tools: Vec<Value> = registry
        .ops()
        .iter()
        .filter(|op| lists(op, listing))
        .map(|op| op_tool(registry, op, listing, profile, revision))
        .collect();
    if *listing != Listing::Assistant {
        tools.extend(synthetic_tools(registry, listing, profile, revision));
    }
    tools
}

/// The op the assistant's listing searches memory with, in place of
/// `loom_search`, which it does not list.
const ASSISTANT_SEARCH_OP: &str = "memory.search";

/// A description as this listing shows it: op names as its tools
/// ([`render_op_names`]), and on the assistant's listing `loom_search`
/// pointed at the memory search it has instead.
fn render(text: &str, registry: &Registry, listing: &Listing) -> String {
    let rendered = render_op_names(text, registry, listing);
    match registry.get(ASSISTANT_SEARCH_OP) {
        Some(search) if *listing == Listing::Assistant && rendered.contains(LOOM_SEARCH) => {
            rendered.replace(LOOM_SEARCH, &search.tool_name)
        }
        _ => rendered,
    }
}

/// Renders op names inside every `description` of a schema.
fn render_descriptions(schema: &mut Value, registry: &Registry, listing: &Listing) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(s) if k == "description" => *s = render(s, registry, listing),
                    other => render_descriptions(other, registry, listing),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| render_descriptions(v, registry, listing)),
        _ => {}
    }
}

fn op_tool(
    registry: &Registry,
    op: &Op,
    listing: &Listing,
    profile: Profile,
    revision: Revision,
) -> Value {
    let mut input = if *listing == Listing::Assistant {
        assistant_input(op, profile)
    } else {
        op.input_schema_for(profile).clone()
    };
    render_descriptions(&mut input, registry, listing);
    let mut tool = Map::new();
    tool.insert("name".into(), op.tool_name.clone().into());
    if revision.has_structured_output() {
        tool.insert("title".into(), op.name.clone().into());
    }
    tool.insert(
        "description".into(),
        render(&op.description_for(profile), registry, listing).into(),
    );
    tool.insert("inputSchema".into(), input);
    if profile == Profile::Full && revision.has_structured_output() {
        let mut output = loom_core::lean::listed_output_schema(&op.output_schema);
        render_descriptions(&mut output, registry, listing);
        tool.insert("outputSchema".into(), output);
    }
    if revision.has_annotations() {
        tool.insert(
            "annotations".into(),
            serde_json::to_value(op.annotations).unwrap_or_default(),
        );
    }
    Value::Object(tool)
}

/// An op's input as the assistant's listing shows it: `agent` offered
/// ([`offer_agent`]), and no `explain`, since its calls run with explain
/// off whatever they send (`tools::without_explain`).
pub fn assistant_input(op: &Op, profile: Profile) -> Value {
    let mut input = op.input_schema_for(profile).clone();
    offer_agent(op, &mut input, profile);
    if op.takes_explain
        && let Some(props) = input.get_mut("properties").and_then(Value::as_object_mut)
    {
        props.remove("explain");
    }
    input
}

/// The assistant's reads are not narrowed to its client's agent, and a read
/// of one writer's rows must name the writer (a search hit's agent), so
/// its listing offers `agent` on every read that takes one, which the
/// other listings leave for the server to fill.
/// One that reads one writer's rows (its `agent` marked
/// [`loom_core::schema::WRITER_MARK`]) lists it as required, as the op
/// refuses a call of the assistant's that leaves it out.
fn offer_agent(op: &Op, input: &mut Value, profile: Profile) {
    let Some(agent) = op.input_schema.pointer("/properties/agent") else {
        return;
    };
    let writer = agent.get(loom_core::schema::WRITER_MARK) == Some(&Value::Bool(true));
    let mut agent = agent.clone();
    loom_core::schema::strip_marks(&mut agent);
    if profile == Profile::Compact {
        agent = loom_core::schema::compact_tree(&agent);
    }
    if let Some(Value::Object(props)) = input.get_mut("properties") {
        props.insert("agent".into(), agent);
    }
    if writer {
        match input.get_mut("required") {
            Some(Value::Array(required)) => required.push("agent".into()),
            _ => input["required"] = json!(["agent"]),
        }
    }
}

/// What a synthetic tool lists beside its name: its title, description,
/// input, what its `structuredContent` holds (listed with the full
/// profile) and its hints.
struct Synthetic<'a> {
    title: &'a str,
    description: String,
    input: Value,
    output: Value,
    hints: Annotations,
}

fn synthetic(name: &str, tool: Synthetic<'_>, profile: Profile, revision: Revision) -> Value {
    let Synthetic {
        title,
        description,
        input,
        output,
        hints,
    } = tool;
    let description = match profile {
        Profile::Compact => loom_core::schema::first_paragraph(&description),
        _ => description,
    };
    let input = match profile {
        Profile::Compact => loom_core::schema::compact_tree(&input),
        _ => input,
    };
    let mut tool = json!({"name": name, "description": description, "inputSchema": input});
    if revision.has_structured_output() {
        tool["title"] = title.into();
    }
    if profile == Profile::Full && revision.has_structured_output() {
        // An answer or a refusal's body, as every listed tool's.
        tool["outputSchema"] = loom_core::lean::listed_output_schema(&output);
    }
    if revision.has_annotations() {
        tool["annotations"] = serde_json::to_value(hints).unwrap_or_default();
    }
    tool
}

/// The input schema of `loom_search`: its own, lenient (an out-of-range
/// `top_k` is clamped, an unknown `recipe` or `bodies` read as the
/// default, not refused), with no namespace.
pub fn search_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in plain words."},
            "top_k": {"type": "integer", "description": "Hits per section (1-50, default 10)."},
            "recipe": {"type": "string", "description": "Memory ranking: balanced (default), relevance (text match only) or recent (newest first)."},
            "bodies": {"type": "string", "description": "Hit text: full (default), snippet or none."},
            "explain": {"type": "boolean", "description": "Add why each memory hit ranked."}
        },
        "required": ["query"],
        // As every tool's: an argument it does not name is refused.
        "additionalProperties": false
    })
}

/// The hints of a synthetic tool that only reads.
const READ: Annotations = Annotations {
    read_only_hint: true,
    destructive_hint: false,
    idempotent_hint: true,
    open_world_hint: false,
};

fn synthetic_tools(
    registry: &Registry,
    listing: &Listing,
    profile: Profile,
    revision: Revision,
) -> Vec<Value> {
    let search_output = registry
        .get(SEARCH_OP)
        .map_or_else(|| json!({"type": "object"}), |op| op.output_schema.clone());
    let search = synthetic(
        LOOM_SEARCH,
        Synthetic {
            title: "Search Loom",
            description: "Searches memory, profile, knowledge and conversations in one call and returns all four sections. \
             Use it before answering from what Loom may already know; explain: true adds why each memory hit ranked."
                .into(),
            input: search_input_schema(),
            output: search_output,
            hints: READ,
        },
        profile,
        revision,
    );
    let activate = synthetic(
        LOOM_ACTIVATE,
        Synthetic {
            title: "Start a Loom session",
            description: "Returns the session primer: your profile, preferences and default workspace, and how to use \
             Loom's tools. Call it once at the start of a session."
                .into(),
            input: json!({"type": "object", "additionalProperties": false}),
            output: json!({
                "type": "object",
                "properties": {"primer": {"type": "string", "description": "The session primer."}},
                "required": ["primer"]
            }),
            hints: READ,
        },
        profile,
        revision,
    );
    let readonly = *listing == Listing::Readonly;
    let mut about = String::from(
        "Runs a Loom op this listing does not show, through the same checks as a listed tool: \
         {\"op\": \"<op name>\", \"arguments\": {...}}. {\"op\": \"help\", \"query\": \"<words>\"} lists up to 15 \
         matching ops with their required and optional arguments.",
    );
    if readonly {
        about.push_str(" On this connection it runs read ops only.");
    }
    let routed: Vec<&Op> = registry
        .ops()
        .iter()
        .filter(|op| loom_op_routes(op, listing))
        .collect();
    // What it reaches that the listing does not show, and one of those as
    // the example of an op name: none on a listing that shows every op it
    // routes (all, readonly), where it is for help alone.
    let unlisted: Vec<&&Op> = routed.iter().filter(|op| !op.listed_on(listing)).collect();
    let example = unlisted
        .iter()
        .find(|op| op.name == "memory.unpin")
        .or_else(|| unlisted.first());
    if unlisted.is_empty() {
        about.push_str(
            " This listing shows every op it runs as a tool of its own: use it for help.",
        );
    } else {
        about.push_str(&format!(
            " {} ops are reachable this way; ops.capabilities lists them all.",
            unlisted.len()
        ));
    }
    let op_field = match example {
        Some(op) => format!("The op name, such as {}, or \"help\".", op.name),
        None => "\"help\", or the name of an op this listing shows.".to_owned(),
    };
    // Its hints are those of the most any op it routes here may do, the
    // listed ones included: it runs those too (on `all`, every op).
    let destructive = routed.iter().any(|op| op.annotations.destructive_hint);
    let op = synthetic(
        LOOM_OP,
        Synthetic {
            title: "Run a Loom op",
            description: render_op_names(&about, registry, listing),
            input: json!({
                "type": "object",
                "properties": {
                    "op": {"type": "string", "description": op_field},
                    "arguments": {"type": "object", "description": "The op's arguments."},
                    "query": {"type": "string", "description": "With op \"help\": what to look for."}
                },
                "required": ["op"],
                "additionalProperties": false
            }),
            // The routed op's own answer, or help's list of ops: an object
            // whose shape ops.capabilities gives per op.
            output: json!({"type": "object"}),
            hints: Annotations {
                read_only_hint: readonly,
                destructive_hint: destructive,
                idempotent_hint: readonly,
                open_world_hint: false,
            },
        },
        profile,
        revision,
    );
    vec![search, activate, op]
}
