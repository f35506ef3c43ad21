//! What an op does to state, derived once from its registry entry: the MCP
//! annotations, the export's effect class and the default rate-limit class
//! all read this one classifier.

use crate::naming::verb_of;
use crate::rate::RateClass;
use crate::role::Role;

/// Verbs whose ops are destructive unless declared otherwise: a call can
/// remove or irreversibly replace data.
pub const DESTRUCTIVE_VERBS: &[&str] = &[
    "delete", "purge", "forget", "wipe", "revoke", "restore", "expire", "remove", "drop",
    "truncate", "reset", "erase", "clear",
];

/// Whether a verb names a destructive action (`delete`, `delete_all`, `purge_old`).
pub fn is_destructive_verb(verb: &str) -> bool {
    DESTRUCTIVE_VERBS.iter().any(|d| {
        verb == *d
            || verb
                .strip_prefix(d)
                .is_some_and(|rest| rest.starts_with('_'))
    })
}

/// The effect class a policy engine sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Changes nothing.
    Read,
    /// Changes state.
    Write,
    /// Can remove or irreversibly replace data.
    Destructive,
}

impl Effect {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Destructive => "destructive",
        }
    }
}

/// MCP tool annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// True only for an idempotent viewer op that is neither audited nor
    /// marked `writes` nor declared `destructive`.
    pub read_only_hint: bool,
    /// True when a call can remove or irreversibly replace data.
    pub destructive_hint: bool,
    /// True when repeating a call with the same arguments has no further effect.
    pub idempotent_hint: bool,
    /// Loom talks to no outside system.
    pub open_world_hint: bool,
}

/// The facts the classifier reads.
#[derive(Clone, Copy, Debug)]
pub struct EffectInputs<'a> {
    /// The op name.
    pub name: &'a str,
    /// Minimum role.
    pub role: Role,
    /// Declared idempotent.
    pub idempotent: bool,
    /// Declared audited.
    pub audit: bool,
    /// Declared `writes`.
    pub writes: bool,
    /// Declared `destructive` (else derived from the verb).
    pub destructive: bool,
}

impl EffectInputs<'_> {
    /// readOnlyHint: an idempotent viewer op that is neither audited nor
    /// marked `writes`, nor declared `destructive`: its author says a call
    /// removes or replaces data, and a client that runs read-only tools
    /// unprompted must not run it.
    pub fn read_only(&self) -> bool {
        self.idempotent
            && self.role == Role::Viewer
            && !self.audit
            && !self.writes
            && !self.destructive
    }

    /// Declared destructive, or named by a destructive verb (and not
    /// read-only: a verb alone does not outweigh the rule above).
    pub fn destructive(&self) -> bool {
        !self.read_only() && (self.destructive || is_destructive_verb(verb_of(self.name)))
    }

    /// The effect class.
    pub fn effect(&self) -> Effect {
        if self.read_only() {
            Effect::Read
        } else if self.destructive() {
            Effect::Destructive
        } else {
            Effect::Write
        }
    }

    /// The MCP annotations.
    pub fn annotations(&self) -> Annotations {
        Annotations {
            read_only_hint: self.read_only(),
            destructive_hint: self.destructive(),
            idempotent_hint: self.idempotent,
            open_world_hint: false,
        }
    }

    /// The rate-limit class an op gets when it names none.
    pub fn default_rate(&self) -> RateClass {
        if self.read_only() {
            RateClass::Read
        } else {
            RateClass::Write
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(name: &str, role: Role) -> EffectInputs<'_> {
        EffectInputs {
            name,
            role,
            idempotent: true,
            audit: false,
            writes: false,
            destructive: false,
        }
    }

    #[test]
    fn read_only_needs_idempotent_viewer_without_audit_or_writes() {
        assert!(inputs("memory.get", Role::Viewer).read_only());
        assert!(
            !EffectInputs {
                idempotent: false,
                ..inputs("memory.get", Role::Viewer)
            }
            .read_only()
        );
        assert!(
            !EffectInputs {
                audit: true,
                ..inputs("memory.get", Role::Viewer)
            }
            .read_only()
        );
        assert!(
            !EffectInputs {
                writes: true,
                ..inputs("memory.get", Role::Viewer)
            }
            .read_only()
        );
        assert!(!inputs("memory.get", Role::Writer).read_only());
    }

    #[test]
    fn destructive_from_the_verb_or_the_flag() {
        assert_eq!(
            inputs("memory.delete", Role::Writer).effect(),
            Effect::Destructive
        );
        assert_eq!(
            inputs("memory.purge_old", Role::Admin).effect(),
            Effect::Destructive
        );
        assert_eq!(inputs("memory.set", Role::Writer).effect(), Effect::Write);
        assert_eq!(
            inputs("memory.deleted_list", Role::Writer).effect(),
            Effect::Write
        );
        let flagged = EffectInputs {
            destructive: true,
            ..inputs("memory.apply", Role::Writer)
        };
        assert_eq!(flagged.effect(), Effect::Destructive);
        assert!(flagged.annotations().destructive_hint);
    }

    #[test]
    fn a_read_only_op_is_never_destructive() {
        let a = inputs("token.revoke_preview", Role::Viewer).annotations();
        assert!(a.read_only_hint);
        assert!(!a.destructive_hint);
    }

    /// Declared destructive, an op that would be read-only by its role and
    /// flags is not: the declaration is the author's word on what it does.
    #[test]
    fn a_declared_destructive_op_is_never_read_only() {
        let wipe = EffectInputs {
            destructive: true,
            ..inputs("memory.wipe", Role::Viewer)
        };
        assert_eq!(wipe.effect(), Effect::Destructive);
        let a = wipe.annotations();
        assert!(!a.read_only_hint && a.destructive_hint);
        assert_eq!(wipe.default_rate(), RateClass::Write);
    }

    #[test]
    fn default_rate_class_follows_the_effect() {
        assert_eq!(
            inputs("memory.get", Role::Viewer).default_rate(),
            RateClass::Read
        );
        assert_eq!(
            inputs("memory.set", Role::Writer).default_rate(),
            RateClass::Write
        );
    }
}
