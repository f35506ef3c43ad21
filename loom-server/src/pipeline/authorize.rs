//! Step 3: authorization, by the access rule ([`loom_core::access`]): the
//! caller's role in the call's namespace, from its token's claims and the
//! namespace's grants. No role at all is NAMESPACE_NOT_ACCESSIBLE (or
//! RESOURCE_NOT_FOUND when the namespace does not exist); a role below the
//! op's minimum is AUTH_INSUFFICIENT with `required_role`; a restricted
//! namespace of another org than the token's is ORG_MISMATCH.

use loom_core::{Caller, ErrorCode, LoomError, NamespaceFacts, Op, Reach, Role, Scope};

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
/// role in, RESOURCE_NOT_FOUND for one that does not exist and the token
/// does not cover.
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
    let facts = NamespaceFacts {
        restricted: ns.restricted,
        granted: ns.granted,
    };
    match caller.reach(&scope.org, &scope.namespace, facts) {
        Reach::Role(role) => Ok(Access {
            role,
            found: ns.exists,
        }),
        Reach::OtherOrg => Err(LoomError::new(
            ErrorCode::OrgMismatch,
            format!(
                "namespace '{}' is restricted to its own org '{}'",
                scope.namespace, scope.org
            ),
        )
        .with_detail("org", scope.org.clone())
        .with_detail("namespace", scope.namespace.clone())
        .with_detail("restricted", true)),
        // Which namespaces an org has is no secret inside it (every role
        // lists them), so a missing one is said to be missing, not kept
        // from the caller with advice to ask for a grant on it.
        Reach::Nothing if !ns.exists => Err(loom_ops::scope::namespace_not_found(
            &scope.org,
            &scope.namespace,
        )),
        Reach::Nothing => Err(not_accessible(app, scope).await),
    }
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
