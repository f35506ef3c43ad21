//! The registry: every op collected by `inventory`, validated and indexed
//! once, iterated in name order. The listing, `/v1`, `ops.capabilities`,
//! `loom export-actions` and the docs all read it.

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

use crate::args::Validator;
use crate::effect::{Annotations, Effect, EffectInputs};
use crate::maturity::Maturity;
use crate::naming::tool_name;
use crate::op::{McpVisibility, OpEntry, OpMeta};
use crate::rate::RateClass;
use crate::role::Role;
use crate::schema::{self, Profile};
use crate::toolset::{Listing, Toolset};

/// Default latency budget by minimum role.
pub fn default_budget(role: Role) -> Duration {
    Duration::from_millis(match role {
        Role::Viewer => 2_000,
        Role::Writer => 5_000,
        Role::Admin => 10_000,
    })
}

/// One op, resolved from its [`OpMeta`], with its schemas built once.
pub struct Op {
    /// The op name (`memory.get`).
    pub name: String,
    /// The MCP tool name (`loom_memory_get`).
    pub tool_name: String,
    /// The attribute's entry.
    pub meta: &'static OpMeta,
    /// The effect class.
    pub effect: Effect,
    /// The MCP annotations.
    pub annotations: Annotations,
    /// The rate-limit class.
    pub rate: RateClass,
    /// The latency budget.
    pub budget: Duration,
    /// The curated description, or the fallback one-liner.
    pub description: String,
    /// The input model's name.
    pub input_model: String,
    /// The output model's name.
    pub output_model: String,
    /// The whole input schema (what validation uses; hidden fields included).
    pub input_schema: Value,
    /// The output schema.
    pub output_schema: Value,
    /// The input schema MCP lists.
    pub listed_input: Value,
    /// The argument tree the compact profile lists.
    pub compact_input: Value,
    /// Whether the input declares `explain` (a per-hit score breakdown):
    /// MCP asks on every call, and the schema lookup was ~2% of a
    /// `memory.get`'s instructions.
    pub takes_explain: bool,
    /// Whether the input model declares `run_id` itself (`run.*`,
    /// `working_memory.*`), where it means what the op says; on every other
    /// run-scoped op the pipeline takes it as the run the call belongs to
    /// ([`schema::add_run_id`]).
    pub declares_run_id: bool,
    validator: Validator,
}

impl Op {
    fn from_meta(meta: &'static OpMeta, name: String) -> Op {
        let effect_inputs = EffectInputs {
            name: &name,
            role: meta.role,
            idempotent: meta.idempotent,
            audit: meta.audit,
            writes: meta.writes,
            destructive: meta.destructive,
        };
        let budget = meta.budget_ms.map_or(default_budget(meta.role), |ms| {
            Duration::from_millis(u64::from(ms))
        });
        let mut input_schema = schema::input_schema(&meta.input);
        let declares_run_id = input_schema.pointer("/properties/run_id").is_some();
        if meta.run_scoped && !declares_run_id {
            schema::add_run_id(&mut input_schema);
        }
        let listed_input = schema::listed_input(&input_schema);
        let description = match meta.doc.trim() {
            "" => fallback_description(&name, budget, meta.idempotent, meta.role),
            doc => schema::reflow(doc),
        };
        Op {
            tool_name: meta.tool.map_or_else(|| tool_name(&name), str::to_owned),
            effect: effect_inputs.effect(),
            annotations: effect_inputs.annotations(),
            rate: meta.rate.unwrap_or_else(|| effect_inputs.default_rate()),
            budget,
            description,
            input_model: (meta.input.name)().into_owned(),
            output_model: (meta.output.name)().into_owned(),
            output_schema: schema::output_schema(&meta.output),
            validator: Validator::new(&input_schema, &listed_input),
            compact_input: schema::compact_tree(&listed_input),
            takes_explain: input_schema.pointer("/properties/explain").is_some(),
            declares_run_id,
            input_schema,
            listed_input,
            meta,
            name,
        }
    }

    /// readOnlyHint.
    pub fn read_only(&self) -> bool {
        self.annotations.read_only_hint
    }

    /// Whether the op is hidden on MCP.
    pub fn mcp_hidden(&self) -> Option<&'static str> {
        match self.meta.mcp {
            McpVisibility::Hidden { instead } => Some(instead),
            McpVisibility::Callable | McpVisibility::Synthetic => None,
        }
    }

    /// Whether the op is one of the transport's synthetic tools.
    pub fn synthetic(&self) -> bool {
        self.meta.mcp == McpVisibility::Synthetic
    }

    /// The curated rosters that list it: the declared ones, or for a
    /// synthetic tool every roster but assistant.
    pub fn toolsets(&self) -> Vec<Toolset> {
        if self.synthetic() {
            Toolset::CURATED.to_vec()
        } else {
            self.meta.toolsets.to_vec()
        }
    }

    /// The names of the listings that carry it: its curated rosters
    /// ([`Op::toolsets`]), then the derived `readonly` and `all` where they
    /// list it (what `ops.capabilities` and the export report).
    pub fn listing_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.toolsets().iter().map(|t| t.as_str()).collect();
        for (listing, name) in [(Listing::Readonly, "readonly"), (Listing::All, "all")] {
            if self.listed_on(&listing) {
                names.push(name);
            }
        }
        names
    }

    /// Whether a roster declares it.
    pub fn in_toolset(&self, t: Toolset) -> bool {
        self.meta.toolsets.contains(&t)
    }

    /// Whether `listing` lists this op.
    pub fn listed_on(&self, listing: &Listing) -> bool {
        match listing {
            Listing::Assistant => self.in_toolset(Toolset::Assistant),
            _ if self.mcp_hidden().is_some() => false,
            _ if self.synthetic() => true,
            Listing::Curated(set) => set.iter().any(|t| self.in_toolset(*t)),
            Listing::All => self.in_all(),
            Listing::Readonly => self.in_all() && self.read_only(),
        }
    }

    fn in_all(&self) -> bool {
        self.meta.maturity == Maturity::Stable
            || self.in_toolset(Toolset::Core)
            || self.in_toolset(Toolset::Atomic)
    }

    /// The description a profile shows.
    pub fn description_for(&self, profile: Profile) -> String {
        match profile {
            Profile::Compact => schema::first_paragraph(&self.description),
            Profile::Standard | Profile::Full => self.description.clone(),
        }
    }

    /// The input schema a profile shows (computed once, at registry build).
    pub fn input_schema_for(&self, profile: Profile) -> &Value {
        match profile {
            Profile::Compact => &self.compact_input,
            Profile::Standard | Profile::Full => &self.listed_input,
        }
    }

    /// The argument checker.
    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    /// The HTTP path.
    pub fn http_path(&self) -> String {
        format!("/v1/{}", self.name)
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Op")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The one-line description of an op without a curated one.
pub fn fallback_description(name: &str, budget: Duration, idempotent: bool, role: Role) -> String {
    format!(
        "Loom op {name}: latency budget {} ms; {}; minimum role {role}.",
        budget.as_millis(),
        if idempotent {
            "idempotent"
        } else {
            "not idempotent"
        },
    )
}

/// A fault in the set of ops.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A name that is not lowercase dotted `plane.verb`.
    #[error("op `{handler}` ({file}:{line}) has no valid name")]
    BadName {
        /// The handler.
        handler: &'static str,
        /// Where.
        file: &'static str,
        /// Where.
        line: u32,
    },
    /// Two ops with one name.
    #[error("op name `{name}` is declared twice: {first} and {second}")]
    DuplicateName {
        /// The name.
        name: String,
        /// One place.
        first: String,
        /// The other.
        second: String,
    },
    /// Two ops with one tool name (`memory.set` and `memory_set` both map to `loom_memory_set`).
    #[error("ops `{first}` and `{second}` share the tool name `{tool}`")]
    DuplicateToolName {
        /// The tool name.
        tool: String,
        /// One op.
        first: String,
        /// The other.
        second: String,
    },
    /// A hidden op with no `instead` text.
    #[error("op `{name}` is hidden on MCP without saying what to use instead")]
    HiddenWithoutInstead {
        /// The op.
        name: String,
    },
}

/// Every op, validated and indexed.
pub struct Registry {
    ops: Vec<Op>,
    by_name: HashMap<String, usize>,
    by_tool: HashMap<String, usize>,
}

static GLOBAL: OnceLock<Result<Registry, Vec<RegistryError>>> = OnceLock::new();

impl Registry {
    /// The registry of every op linked into this binary, built on first use.
    pub fn global() -> Result<&'static Registry, &'static [RegistryError]> {
        GLOBAL
            .get_or_init(|| {
                Registry::from_metas(inventory::iter::<OpEntry>.into_iter().map(|e| e.0))
            })
            .as_ref()
            .map_err(Vec::as_slice)
    }

    /// Builds a registry from entries, reporting every fault at once.
    pub fn from_metas(
        metas: impl IntoIterator<Item = &'static OpMeta>,
    ) -> Result<Registry, Vec<RegistryError>> {
        let mut errors = Vec::new();
        let mut named: Vec<(String, &'static OpMeta)> = Vec::new();
        for meta in metas {
            match meta.name.resolve() {
                Some(name) => named.push((name, meta)),
                None => errors.push(RegistryError::BadName {
                    handler: meta.handler,
                    file: meta.file,
                    line: meta.line,
                }),
            }
        }
        named.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(a.1.file.cmp(b.1.file))
                .then(a.1.line.cmp(&b.1.line))
        });
        let at = |m: &OpMeta| format!("`{}` at {}:{}", m.handler, m.file, m.line);
        for pair in named.windows(2) {
            if pair[0].0 == pair[1].0 {
                errors.push(RegistryError::DuplicateName {
                    name: pair[0].0.clone(),
                    first: at(pair[0].1),
                    second: at(pair[1].1),
                });
            }
        }
        named.dedup_by(|a, b| a.0 == b.0);

        let mut by_tool: HashMap<String, usize> = HashMap::new();
        let mut by_name = HashMap::new();
        let mut ops: Vec<Op> = Vec::with_capacity(named.len());
        for (name, meta) in named {
            if matches!(meta.mcp, McpVisibility::Hidden { instead } if instead.trim().is_empty()) {
                errors.push(RegistryError::HiddenWithoutInstead { name: name.clone() });
            }
            let op = Op::from_meta(meta, name);
            if let Some(&i) = by_tool.get(&op.tool_name) {
                errors.push(RegistryError::DuplicateToolName {
                    tool: op.tool_name.clone(),
                    first: ops[i].name.clone(),
                    second: op.name.clone(),
                });
                continue;
            }
            by_tool.insert(op.tool_name.clone(), ops.len());
            by_name.insert(op.name.clone(), ops.len());
            ops.push(op);
        }
        if errors.is_empty() {
            Ok(Registry {
                ops,
                by_name,
                by_tool,
            })
        } else {
            Err(errors)
        }
    }

    /// Every op, in name order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The op of that name.
    pub fn get(&self, name: &str) -> Option<&Op> {
        self.by_name.get(name).map(|&i| &self.ops[i])
    }

    /// The op behind an MCP tool name.
    pub fn by_tool_name(&self, tool: &str) -> Option<&Op> {
        self.by_tool.get(tool).map(|&i| &self.ops[i])
    }

    /// The ops a listing shows, in name order.
    pub fn listed<'a>(&'a self, listing: &'a Listing) -> impl Iterator<Item = &'a Op> + 'a {
        self.ops.iter().filter(move |op| op.listed_on(listing))
    }

    /// Up to `limit` op names closest to `name`, best first.
    pub fn suggest(&self, name: &str, limit: usize) -> Vec<&str> {
        crate::args::closest(name, self.ops.iter().map(|o| o.name.as_str()), limit)
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.ops.iter().map(|o| &o.name))
            .finish()
    }
}
