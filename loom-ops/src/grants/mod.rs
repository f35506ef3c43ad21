//! The `grants` plane: a subject's role in a namespace beyond what its
//! token names. The pipeline reads grants when it authorizes a call; these
//! ops list and change them in the call's namespace.

use loom_core::{OpCx, OpResult, Role, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::store::{Store, db_error, now_ms, rfc3339};

/// Lists the grants on a namespace.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantsListInput {
    /// The namespace (default: the caller's default workspace).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The org (filled from the token).
    #[serde(default)]
    pub org: Option<String>,
    /// The agent acting (default: the client's agent, else the token subject).
    #[serde(default)]
    pub agent: Option<String>,
}

/// One grant.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Grant {
    /// Who holds it.
    pub subject: String,
    /// viewer, writer or admin.
    pub role: String,
    /// Who granted it.
    pub granted_by: String,
    /// When (RFC 3339).
    pub granted_at: String,
}

/// The grants on one namespace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrantsList {
    /// The org.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// One row per subject, by subject.
    pub grants: Vec<Grant>,
}

/// Lists who holds a grant on the namespace and with which role. Tokens
/// that name the namespace need no grant; grants give other subjects access.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn list(cx: &OpCx, _input: GrantsListInput) -> OpResult<GrantsList> {
    let store = cx.service::<Store>()?;
    // As grants.set: a namespace that does not exist has no grants to list.
    crate::scope::require_namespace_in(store, cx).await?;
    let rows = store.grants(&cx.scope.org, &cx.scope.namespace).await?;
    Ok(GrantsList {
        org: cx.scope.org.clone(),
        namespace: cx.scope.namespace.clone(),
        grants: rows
            .into_iter()
            .map(|r| Grant {
                subject: r.subject,
                role: r.role.as_str().to_owned(),
                granted_by: r.granted_by,
                granted_at: rfc3339(r.created_ms),
            })
            .collect(),
    })
}

/// The role to grant, or `none` to remove the grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantRole {
    /// Reads.
    Viewer,
    /// Reads and writes.
    Writer,
    /// Everything, including grants.
    Admin,
    /// Removes the grant.
    None,
}

impl GrantRole {
    fn role(self) -> Option<Role> {
        match self {
            GrantRole::Viewer => Some(Role::Viewer),
            GrantRole::Writer => Some(Role::Writer),
            GrantRole::Admin => Some(Role::Admin),
            GrantRole::None => None,
        }
    }
}

/// Sets one subject's grant on a namespace.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantsSetInput {
    /// The subject (a token's `sub`).
    pub subject: String,
    /// viewer, writer, admin, or none to remove the grant.
    pub role: GrantRole,
    /// The namespace (default: the caller's default workspace).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The org (filled from the token).
    #[serde(default)]
    pub org: Option<String>,
    /// The agent acting (default: the client's agent, else the token subject).
    #[serde(default)]
    pub agent: Option<String>,
}

/// What the grant is now.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrantSet {
    /// The org.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// The subject.
    pub subject: String,
    /// The role now held through the grant (`null`: none).
    pub role: Option<String>,
    /// The role held before (`null`: none).
    pub previous_role: Option<String>,
}

/// Gives a subject a role on the namespace (viewer, writer or admin), or
/// removes its grant with role none. Admin only; every change is audited.
// Destructive: role none (or a lower role) takes access away, which a
// client auto-approving non-destructive tools must not do unprompted.
#[loom_op(role = "admin", audit, idempotent, destructive)]
async fn set(cx: &OpCx, input: GrantsSetInput) -> OpResult<GrantSet> {
    let subject = input.subject.trim();
    if subject.is_empty() || subject.len() > 256 || subject.chars().any(char::is_control) {
        return Err(loom_core::LoomError::new(
            loom_core::ErrorCode::InvalidArguments,
            "grants.set: subject must be 1 to 256 bytes with no control characters",
        )
        .with_detail("field", "subject"));
    }
    let store = cx.service::<Store>()?;
    let (org, namespace) = (&cx.scope.org, &cx.scope.namespace);
    let role = input.role.role();
    let mut tx = store.begin_write().await?;
    // A grant is on a namespace that exists: an admin of the whole org
    // passes authorization for any name, and a grant planted ahead of a
    // namespace would hand it out the moment someone creates it.
    crate::scope::require_namespace(tx.conn(), cx).await?;
    // The grant as it is, read in the transaction that changes it.
    let held: Option<String> = sqlx::query_scalar(
        "SELECT role FROM grants WHERE org = $1 AND namespace = $2 AND subject = $3",
    )
    .bind(org)
    .bind(namespace)
    .bind(subject)
    .fetch_optional(tx.conn())
    .await
    .map_err(db_error)?;
    let answer = GrantSet {
        org: org.clone(),
        namespace: namespace.clone(),
        subject: subject.to_owned(),
        role: role.map(|r| r.as_str().to_owned()),
        previous_role: held.clone(),
    };
    // The grant is as asked already (none to remove, or the same role):
    // nothing is written, and the audit row says so.
    if held.as_deref() == role.map(|r| r.as_str()) {
        tx.rollback().await?;
        store.audit_outcome(cx, "noop").await?;
        return Ok(answer);
    }
    match role {
        Some(role) => {
            sqlx::query(
                "INSERT INTO grants (org, namespace, subject, role, granted_by, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org, namespace, subject) \
                 DO UPDATE SET role = excluded.role, granted_by = excluded.granted_by, created_ms = excluded.created_ms",
            )
            .bind(org)
            .bind(namespace)
            .bind(subject)
            .bind(role.as_str())
            .bind(&cx.caller.subject)
            .bind(now_ms())
            .execute(tx.conn())
            .await
            .map_err(db_error)?;
        }
        None => {
            sqlx::query("DELETE FROM grants WHERE org = $1 AND namespace = $2 AND subject = $3")
                .bind(org)
                .bind(namespace)
                .bind(subject)
                .execute(tx.conn())
                .await
                .map_err(db_error)?;
        }
    }
    tx.commit(cx).await?;
    // The pipeline's next authorization reads the grant as it is now.
    store.forget_namespace_access();
    Ok(answer)
}
