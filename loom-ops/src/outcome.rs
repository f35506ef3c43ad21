//! The audit row of an audited call that ends without committing a change.

use loom_core::{OpCx, OpResult};

use crate::store::Store;

/// Passes `result` through; a refusal of an audited op first writes its
/// audit row with the refusal's code as its outcome, as the pipeline's
/// refusals before the handler do (a committed change already wrote `ok`).
pub async fn audited<T>(store: &Store, cx: &OpCx, result: OpResult<T>) -> OpResult<T> {
    if let Err(e) = &result {
        store.audit_outcome(cx, e.code().as_str()).await?;
    }
    result
}
