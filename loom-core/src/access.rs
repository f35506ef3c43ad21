//! The access rule: the role a caller holds in one namespace.
//!
//! The pipeline authorizes each call's own namespace with it, and an op
//! that reads further namespaces than the call's (search's fan-out, a
//! listing of namespaces) asks it of each: one rule, so what a search or a
//! listing shows is never more than the caller could read by naming the
//! namespace.
//!
//! The caller's role in a namespace is the higher of
//!
//! - the token's role claim, when the token covers the namespace: it names
//!   it (or `*`), or it names no namespace at all (such a token is scoped
//!   to every namespace of the org it acts in, with its role);
//! - the role of a grant to the token's subject on that namespace.
//!
//! A platform admin holds admin everywhere. A restricted namespace is shut
//! to every caller whose token belongs to another org (org-wide tokens and
//! platform admins included). With authentication off every call acts as
//! admin.

use crate::cx::Caller;
use crate::role::Role;

/// What the store holds of a namespace that the rule reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceFacts {
    /// The namespace is restricted to its own org.
    pub restricted: bool,
    /// The role a grant gives the caller's subject there.
    pub granted: Option<Role>,
}

/// What the rule finds for a caller in one namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The caller holds this role there.
    Role(Role),
    /// A restricted namespace of another org than the token's.
    OtherOrg,
    /// The token does not cover it and no grant gives a role there.
    Nothing,
}

impl Reach {
    /// The role held, if any.
    pub fn role(self) -> Option<Role> {
        match self {
            Reach::Role(role) => Some(role),
            Reach::OtherOrg | Reach::Nothing => None,
        }
    }
}

impl Caller {
    /// Whether the token covers `namespace` with its own role claim: it
    /// names it or `*`, or names none.
    pub fn covers(&self, namespace: &str) -> bool {
        self.covers_every_namespace() || self.namespaces.iter().any(|n| n == namespace)
    }

    /// Whether the token covers every namespace of its org: it names `*`,
    /// or names none.
    pub fn covers_every_namespace(&self) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == "*")
    }

    /// Whether `org`'s restricted namespaces are shut to this caller: its
    /// token belongs to another org.
    pub fn outside_restricted_of(&self, org: &str) -> bool {
        !self.anonymous && self.org != org
    }

    /// The access rule (module doc) for namespace `namespace` of org
    /// `org`, given what the store holds of it.
    pub fn reach(&self, org: &str, namespace: &str, facts: NamespaceFacts) -> Reach {
        if self.anonymous {
            return Reach::Role(Role::Admin);
        }
        if facts.restricted && self.outside_restricted_of(org) {
            return Reach::OtherOrg;
        }
        let role = if self.platform_admin {
            Some(Role::Admin)
        } else {
            let from_token = if self.covers(namespace) {
                self.role
            } else {
                None
            };
            from_token.max(facts.granted)
        };
        role.map_or(Reach::Nothing, Reach::Role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(org: &str, role: Role, namespaces: &[&str]) -> Caller {
        Caller {
            subject: "sam".into(),
            org: org.into(),
            role: Some(role),
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            ..Caller::default()
        }
    }

    const OPEN: NamespaceFacts = NamespaceFacts {
        restricted: false,
        granted: None,
    };
    const RESTRICTED: NamespaceFacts = NamespaceFacts {
        restricted: true,
        granted: None,
    };

    #[test]
    fn a_token_covers_what_it_names_or_everything_when_it_names_nothing() {
        let named = caller("acme", Role::Writer, &["team"]);
        assert_eq!(named.reach("acme", "team", OPEN), Reach::Role(Role::Writer));
        assert_eq!(named.reach("acme", "other", OPEN), Reach::Nothing);
        let granted = NamespaceFacts {
            restricted: false,
            granted: Some(Role::Viewer),
        };
        assert_eq!(
            named.reach("acme", "other", granted),
            Reach::Role(Role::Viewer)
        );
        let all = caller("acme", Role::Viewer, &[]);
        assert_eq!(all.reach("acme", "x", OPEN), Reach::Role(Role::Viewer));
        let star = caller("acme", Role::Viewer, &["*"]);
        assert_eq!(star.reach("acme", "x", OPEN), Reach::Role(Role::Viewer));
        // a grant above the token's claim wins
        let admin_grant = NamespaceFacts {
            restricted: false,
            granted: Some(Role::Admin),
        };
        assert_eq!(
            all.reach("acme", "x", admin_grant),
            Reach::Role(Role::Admin)
        );
    }

    #[test]
    fn a_restricted_namespace_is_shut_to_every_other_org() {
        let org_wide = caller("*", Role::Admin, &[]);
        assert_eq!(
            org_wide.reach("acme", "secret", RESTRICTED),
            Reach::OtherOrg
        );
        assert_eq!(
            org_wide.reach("acme", "open", OPEN),
            Reach::Role(Role::Admin)
        );
        let mut platform = caller("globex", Role::Viewer, &[]);
        platform.platform_admin = true;
        assert_eq!(
            platform.reach("acme", "secret", RESTRICTED),
            Reach::OtherOrg
        );
        assert_eq!(
            platform.reach("acme", "open", OPEN),
            Reach::Role(Role::Admin)
        );
        let own = caller("acme", Role::Viewer, &[]);
        assert_eq!(
            own.reach("acme", "secret", RESTRICTED),
            Reach::Role(Role::Viewer)
        );
        let anonymous = Caller {
            anonymous: true,
            ..Caller::default()
        };
        assert_eq!(
            anonymous.reach("acme", "secret", RESTRICTED),
            Reach::Role(Role::Admin)
        );
    }
}
