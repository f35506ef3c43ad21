//! Inputs and outputs of the profile ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `profile.get`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileGet {
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// Arguments of `profile.set`: the sections named are replaced, the others kept.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileSet {
    /// Who the person is, how to address them.
    pub persona: Option<String>,
    /// How they like things done.
    pub preferences: Option<String>,
    /// What they are working towards.
    pub goals: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// A namespace's profile.
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
pub struct Profile {
    /// The namespace.
    pub namespace: String,
    /// Who the person is.
    pub persona: String,
    /// How they like things done.
    pub preferences: String,
    /// What they are working towards.
    pub goals: String,
    /// Changes so far (0: never set).
    pub version: i64,
    /// Last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}
