//! The call context every handler receives.

use std::any::{Any, TypeId};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use foldhash::HashMap;

use crate::error::{LoomError, OpResult};
use crate::role::Role;

/// Which transport a call came in on. Ops never branch on it; the pipeline
/// uses it to shape answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// `POST /v1/<op>`.
    Http,
    /// MCP `tools/call`.
    Mcp,
    /// In-process (CLI, tests).
    Local,
}

/// Who is calling, as the token says.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// The token subject.
    pub subject: String,
    /// The token's org (`*` for an org-wide token).
    pub org: String,
    /// The token's role claim.
    pub role: Option<Role>,
    /// Namespaces the token names (empty: its default workspace only).
    pub namespaces: Vec<String>,
    /// A platform admin (`LOOM_PLATFORM_ADMINS`) may act in any org.
    pub platform_admin: bool,
    /// The token's consumer claim.
    pub consumer: Option<String>,
    /// The token id.
    pub jti: Option<String>,
    /// No token was checked: authentication is off and every call acts as
    /// admin ([`crate::access`]). Never set for a caller a token named.
    pub anonymous: bool,
}

/// Where a call acts, after defaults: explicit arguments win.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// The org.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// The agent.
    pub agent: String,
    /// The caller's role in that namespace.
    pub role: Option<Role>,
    /// The pipeline found the namespace in the org while authorizing this
    /// call, so an op need not look it up again (false: it has not been
    /// looked up, e.g. with authentication off).
    pub namespace_found: bool,
}

/// What a call asks of the op beyond its arguments. The transport sets it
/// (the MCP assistant toolset turns both off); ops read it and never ask
/// which transport or toolset a call came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallOptions {
    /// Reads record usage: the recall counts that rank results. An
    /// investigation on someone's behalf must not change what ranks first.
    /// The exposure row a served memory leaves (who was served which row)
    /// is telemetry and is written either way.
    pub records_usage: bool,
    /// The call's own agent may stand in for an agent the read does not
    /// name. Off when the caller's agent writes nothing (the assistant): a
    /// read of one writer's rows must then name that writer.
    pub own_agent: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            records_usage: true,
            own_agent: true,
        }
    }
}

/// Services the server hands to ops (the store, clocks, …), keyed by type.
#[derive(Clone, Default)]
pub struct Services {
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Services {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a service; a second of the same type replaces the first.
    pub fn insert<T: Any + Send + Sync>(&mut self, service: T) -> &mut Self {
        self.map.insert(TypeId::of::<T>(), Arc::new(service));
        self
    }

    /// The service of type `T`.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|s| s.downcast_ref())
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Services({} registered)", self.map.len())
    }
}

/// The context of one call.
#[derive(Debug)]
pub struct OpCx {
    /// The request id, on every log line and answer.
    pub request_id: String,
    /// The transport.
    pub transport: Transport,
    /// The op being run.
    pub op: &'static str,
    /// Whether the op is declared `audit`.
    pub audit: bool,
    /// Who is calling.
    pub caller: Caller,
    /// Where the call acts.
    pub scope: Scope,
    /// The run the call belongs to (an MCP session's implicit run, or `run_id`).
    pub run_id: Option<String>,
    /// Whether the call named `run_id` itself (a run begun with
    /// `run.begin`): its writes commit only while that run is open. An MCP
    /// session's implicit run ends only when the session has gone idle; a
    /// write racing that end is kept in it rather than refused.
    pub run_named: bool,
    /// The MCP session, when there is one.
    pub session_id: Option<String>,
    /// A digest of the call's arguments, for the audit row (empty when the
    /// op is not audited).
    pub args_digest: String,
    /// What the call asks of the op beyond its arguments.
    pub options: CallOptions,
    services: Arc<Services>,
    audited: AtomicBool,
}

impl OpCx {
    /// A context for `op` with the given services; the pipeline fills the rest.
    pub fn new(op: &'static str, services: Arc<Services>) -> Self {
        OpCx {
            request_id: String::new(),
            transport: Transport::Local,
            op,
            audit: false,
            caller: Caller::default(),
            scope: Scope::default(),
            run_id: None,
            run_named: false,
            session_id: None,
            args_digest: String::new(),
            options: CallOptions::default(),
            services,
            audited: AtomicBool::new(false),
        }
    }

    /// Whether this call's reads record usage ([`CallOptions::records_usage`]).
    pub fn records_usage(&self) -> bool {
        self.options.records_usage
    }

    /// The service of type `T`; a missing one is a fault in the server's wiring.
    pub fn service<T: Any + Send + Sync>(&self) -> OpResult<&T> {
        self.services.get::<T>().ok_or_else(|| {
            LoomError::internal(format!(
                "service {} is not registered",
                std::any::type_name::<T>()
            ))
        })
    }

    /// The services.
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// Records that the op's audit row was written inside its transaction,
    /// so the pipeline does not write a second one.
    pub fn mark_audited(&self) {
        self.audited.store(true, Ordering::Release);
    }

    /// Whether the audit row was already written.
    pub fn audited(&self) -> bool {
        self.audited.load(Ordering::Acquire)
    }
}
