//! Step 3: authorization. The caller's role in the call's namespace is the
//! higher of
//!
//! - the token's role claim, when the token covers the namespace: it names
//!   it (or `*`), or it names no namespace at all (such a token is scoped to
//!   every namespace of the org it acts in, with its role);
//! - the role of a `grants` row for (org, namespace, subject).
//!
//! A platform admin holds admin everywhere. No role at all is
//! NAMESPACE_NOT_ACCESSIBLE; a role below the op's minimum is
//! AUTH_INSUFFICIENT with `required_role`. A restricted namespace refuses
//! every caller whose token belongs to another org (org-wide tokens and
//! platform admins included) with ORG_MISMATCH.

use loom_core::{Caller, ErrorCode, LoomError, Op, Role, Scope};

use crate::app::App;

/// What authorization found for a scope.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    /// The caller's role there.
    pub role: Role,
    /// Whether the namespace exists (false when authentication is off:
    /// nothing was looked up).
    pub found: bool,
}

/// Fills `scope.role` or refuses the call. `known` is the scope's
/// [`access`] when the caller already asked it, so it is not asked twice.
pub async fn authorize(
    app: &App,
    op: &Op,
    caller: Option<&Caller>,
    scope: &mut Scope,
    known: Option<Access>,
) -> Result<(), LoomError> {
    let Access { role, found } = match known {
        Some(access) => access,
        None => access(app, caller, scope).await?,
    };
    if role < op.meta.role {
        return Err(LoomError::new(
            ErrorCode::AuthInsufficient,
            format!(
                "{} needs the {} role in '{}'; the caller holds {role}",
                op.name, op.meta.role, scope.namespace
            ),
        )
        .with_detail("required_role", op.meta.role.as_str())
        .with_detail("role", role.as_str()));
    }
    scope.role = Some(role);
    scope.namespace_found = found;
    Ok(())
}

/// The caller's role in the scope's namespace (every role reads) and
/// whether it exists, or the access refusal: ORG_MISMATCH for a restricted
/// namespace of another org, NAMESPACE_NOT_ACCESSIBLE for one it holds no
/// role in.
pub async fn access(
    app: &App,
    caller: Option<&Caller>,
    scope: &Scope,
) -> Result<Access, LoomError> {
    let Some(caller) = caller else {
        // Authentication is off: every call acts as admin.
        return Ok(Access {
            role: Role::Admin,
            found: false,
        });
    };
    let ns = app
        .store
        .namespace_access(&scope.org, &scope.namespace, &caller.subject)
        .await?;
    if caller.org != scope.org && ns.restricted {
        return Err(LoomError::new(
            ErrorCode::OrgMismatch,
            format!(
                "namespace '{}' is restricted to its own org '{}'",
                scope.namespace, scope.org
            ),
        )
        .with_detail("org", scope.org.clone())
        .with_detail("namespace", scope.namespace.clone())
        .with_detail("restricted", true));
    }
    let role = if caller.platform_admin {
        Some(Role::Admin)
    } else {
        let covered = caller.namespaces.is_empty()
            || caller
                .namespaces
                .iter()
                .any(|n| n == "*" || *n == scope.namespace);
        let from_token = if covered { caller.role } else { None };
        from_token.max(ns.granted)
    };
    let Some(role) = role else {
        return Err(not_accessible(app, scope).await);
    };
    Ok(Access {
        role,
        found: ns.exists,
    })
}

/// NAMESPACE_NOT_ACCESSIBLE, worded by the namespace's kind: how to get
/// access for a shared namespace (code, tracker, a collection, a team's
/// memory), none for someone's personal one, which no grant is asked for.
/// A collection's refusal carries its kind, so that MCP adds no next step
/// pointing elsewhere.
async fn not_accessible(app: &App, scope: &Scope) -> LoomError {
    let kind = app
        .store
        .namespace_kind(&scope.org, &scope.namespace)
        .await
        .unwrap_or_default();
    let namespace = &scope.namespace;
    let message = if kind.as_deref() == Some("personal") {
        format!(
            "namespace '{namespace}' is someone's personal namespace, which the token does not name"
        )
    } else {
        format!(
            "namespace '{namespace}' is not accessible: the token does not name it and holds no grant on it; \
             ask an admin of that namespace for a grant (grants.set)"
        )
    };
    let error = LoomError::new(ErrorCode::NamespaceNotAccessible, message)
        .with_detail("namespace", namespace.clone());
    match kind.as_deref() {
        Some(kind @ ("personal" | "collection" | "code" | "tracker")) => {
            error.with_detail("kind", kind)
        }
        _ => error,
    }
}
