//! Inputs and outputs of the namespace ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `namespace.get`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceGet {
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// Arguments of `namespace.list` and `namespace.list_mine`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceList {
    /// Only this kind: personal, memory, collection, code or tracker.
    pub kind: Option<String>,
    /// Namespaces per page (default 50, at most 200).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// From a previous answer's next_cursor.
    pub cursor: Option<String>,
}

/// A namespace.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Namespace {
    /// Its name.
    pub namespace: String,
    /// personal, memory, collection, code or tracker.
    pub kind: String,
    /// Refuses every other org, platform admins included.
    pub restricted: bool,
    /// What it holds.
    pub description: String,
    /// Live memories in it.
    pub memories: i64,
    /// Created.
    pub created_at: String,
}

/// A page of namespaces, by name.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct NamespacePage {
    /// The namespaces.
    pub namespaces: Vec<Namespace>,
    /// Pass as cursor for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
