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
        None => Err(LoomError::new(
            ErrorCode::ResourceNotFound,
            format!(
                "namespace {:?} does not exist in org {:?}",
                cx.scope.namespace, cx.scope.org
            ),
        )
        .with_detail("namespace", cx.scope.namespace.clone())),
    }
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
