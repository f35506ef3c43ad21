//! Checks on the scope the pipeline resolved for a call.

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};

use crate::store::{Store, db_error};

/// Refuses a call whose namespace does not exist in its org. The
/// pipeline's authorization usually found it already
/// ([`loom_core::Scope::namespace_found`]); then this asks nothing.
pub async fn require_namespace(conn: &mut sqlx::AnyConnection, cx: &OpCx) -> OpResult<()> {
    if cx.scope.namespace_found {
        return Ok(());
    }
    let found: Option<(String,)> =
        sqlx::query_as("SELECT namespace FROM namespaces WHERE org = $1 AND namespace = $2")
            .bind(&cx.scope.org)
            .bind(&cx.scope.namespace)
            .fetch_optional(conn)
            .await
            .map_err(db_error)?;
    match found {
        Some(_) => Ok(()),
        None => Err(namespace_not_found(&cx.scope.org, &cx.scope.namespace)),
    }
}

/// RESOURCE_NOT_FOUND for a namespace `org` does not have.
pub fn namespace_not_found(org: &str, namespace: &str) -> LoomError {
    LoomError::new(
        ErrorCode::ResourceNotFound,
        format!("namespace {namespace:?} does not exist in org {org:?}"),
    )
    .with_detail("namespace", namespace.to_owned())
}

/// Whether `e` is [`namespace_not_found`]: the call named a namespace its
/// org does not have.
pub fn is_namespace_not_found(e: &LoomError) -> bool {
    e.code() == ErrorCode::ResourceNotFound && e.detail().contains_key("namespace")
}

/// [`require_namespace`] for an op that needs no connection of its own:
/// a connection is taken only when the pipeline has not found the
/// namespace already.
pub async fn require_namespace_in(store: &Store, cx: &OpCx) -> OpResult<()> {
    if cx.scope.namespace_found {
        return Ok(());
    }
    require_namespace(&mut *store.read().await?, cx).await
}
