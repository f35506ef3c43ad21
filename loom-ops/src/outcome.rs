//! The audit row of an audited call that ends without committing a change.

use loom_core::{LoomError, OpCx, OpResult};

use crate::store::Store;

/// Passes `result` through; a refusal of an audited op first writes its
/// audit row with the refusal's code as its outcome, as the pipeline's
/// refusals before the handler do (a committed change already wrote `ok`),
/// but for one in a namespace that does not exist ([`logged`]).
pub async fn audited<T>(store: &Store, cx: &OpCx, result: OpResult<T>) -> OpResult<T> {
    if let Err(e) = &result
        && logged(e)
    {
        store.audit_outcome(cx, e.code().as_str()).await?;
    }
    result
}

/// Whether a refusal of an audited call gets an audit row: not when the
/// call's namespace does not exist. No log holds such a row (`audit.list`
/// of that namespace is 404 too), and written it would let a caller add
/// rows under every name it makes up; the call ledger keeps the call.
pub fn logged(refusal: &LoomError) -> bool {
    !crate::scope::is_namespace_not_found(refusal)
}
