//! Roles: the minimum role an op needs, and the role a caller holds.
//!
//! The lowercase constants are what `#[loom_op(role = "…")]` expands to, so an
//! unknown role is rustc's "cannot find value" error on the attribute's own
//! token, with rustc's similar-name hint.
#![allow(non_upper_case_globals)]

use std::fmt;
use std::str::FromStr;

/// A role, ordered: a higher role may do everything a lower one may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads.
    Viewer,
    /// Reads and writes.
    Writer,
    /// Everything, including grants and policy.
    Admin,
}

/// `role = "viewer"`.
pub const viewer: Role = Role::Viewer;
/// `role = "writer"`.
pub const writer: Role = Role::Writer;
/// `role = "admin"`.
pub const admin: Role = Role::Admin;

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Writer, Role::Admin];

    /// The lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role `{s}` (expected viewer, writer or admin)"))
    }
}

impl serde::Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
