//! The namespace plane: what namespaces an org has and what they hold.

pub mod model;
pub mod store;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{Namespace, NamespaceGet, NamespaceList, NamespacePage};
use crate::memory::validate;
use crate::scope::namespace_not_found;
use crate::store::Store;

/// Describes one namespace: its kind (personal, memory, collection, code,
/// tracker), whether it is restricted, its description and how many live
/// memories it holds. To find namespaces use namespace.list_mine.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn get(cx: &OpCx, _input: NamespaceGet) -> OpResult<Namespace> {
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    let names = [cx.scope.namespace.clone()];
    let found = store::list(&mut conn, cx, Some(&names), None, "", 1).await?;
    found
        .into_iter()
        .next()
        .ok_or_else(|| namespace_not_found(&cx.scope.org, &cx.scope.namespace))
}

/// Lists the namespaces you work in: your default one, those your token
/// names (every one for `*`) and those a grant gives you. For one
/// namespace's details use namespace.get.
#[loom_op(role = "viewer", idempotent)]
async fn list_mine(cx: &OpCx, input: NamespaceList) -> OpResult<NamespacePage> {
    if cx.caller.covers_every_namespace() {
        return page(cx, input, None).await;
    }
    let store = cx.service::<Store>()?;
    let mut names = cx.caller.namespaces.clone();
    names.push(cx.scope.namespace.clone());
    names.extend(
        store
            .granted_namespaces(&cx.scope.org, &cx.caller.subject)
            .await?,
    );
    names.sort();
    names.dedup();
    page(cx, input, Some(&names)).await
}

/// Lists every namespace of the org by name, with kind and size. On MCP,
/// namespace.list_mine lists the ones the caller works in.
#[loom_op(
    role = "viewer",
    idempotent,
    mcp_hidden = "use namespace.list_mine, which lists the namespaces you work in"
)]
async fn list(cx: &OpCx, input: NamespaceList) -> OpResult<NamespacePage> {
    page(cx, input, None).await
}

/// The kinds a namespace may have.
pub const KINDS: &[&str] = &["personal", "memory", "collection", "code", "tracker"];

async fn page(
    cx: &OpCx,
    input: NamespaceList,
    names: Option<&[String]>,
) -> OpResult<NamespacePage> {
    let limit = validate::limit(input.limit, 50, 200)?;
    // A namespace is one of five kinds: another names none (a typo would
    // list nothing, as if the org had none of it).
    if let Some(kind) = input.kind.as_deref()
        && !KINDS.contains(&kind)
    {
        return Err(validate::invalid(
            "kind",
            format!("kind {kind:?} is none of {}", KINDS.join(", ")),
        ));
    }
    let kind = input.kind;
    let after = input.cursor.unwrap_or_default();
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    let mut namespaces =
        store::list(&mut conn, cx, names, kind.as_deref(), &after, limit + 1).await?;
    let more = namespaces.len() as i64 > limit;
    namespaces.truncate(limit as usize);
    let next_cursor = if more {
        namespaces.last().map(|n| n.namespace.clone())
    } else {
        None
    };
    Ok(NamespacePage {
        namespaces,
        next_cursor,
    })
}
