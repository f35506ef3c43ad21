//! The profile plane: who the namespace's person is (persona, preferences, goals).

pub mod model;
pub mod store;

use loom_core::{ErrorCode, LoomError, OpCx, OpResult, loom_op};

use self::model::{Profile, ProfileGet, ProfileSet};
use crate::memory::validate;
use crate::scope::{require_namespace, require_namespace_in};
use crate::store::{Store, now_ms, rfc3339};

/// Reads the namespace's profile: persona, preferences and goals. Use it at
/// the start of a conversation to address the person as they asked.
#[loom_op(role = "viewer", idempotent)]
async fn get(cx: &OpCx, _input: ProfileGet) -> OpResult<Profile> {
    let store = cx.service::<Store>()?;
    require_namespace_in(store, cx).await?;
    store::read(store, cx).await
}

/// Replaces the profile sections it names (persona, preferences, goals) and
/// keeps the others. For a single fact or preference memory.set is lighter.
#[loom_op(role = "writer", idempotent)]
async fn set(cx: &OpCx, input: ProfileSet) -> OpResult<Profile> {
    let sections = [
        ("persona", &input.persona),
        ("preferences", &input.preferences),
        ("goals", &input.goals),
    ];
    if sections.iter().all(|(_, v)| v.is_none()) {
        return Err(validate::invalid(
            "persona",
            "nothing to change: name persona, preferences or goals",
        ));
    }
    for (field, value) in sections {
        if let Some(v) = value
            && v.len() > validate::MAX_CONTENT_BYTES
        {
            return Err(validate::invalid(
                field,
                format!("{field} is {} bytes; at most 64 KiB", v.len()),
            ));
        }
    }
    let store = cx.service::<Store>()?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    // Re-read and retry when a concurrent write lands between read and write.
    for _ in 0..8 {
        let cur = store::load(tx.conn(), cx).await?;
        let mut new = cur.clone();
        for (slot, value) in [
            (&mut new.persona, &input.persona),
            (&mut new.preferences, &input.preferences),
            (&mut new.goals, &input.goals),
        ] {
            if let Some(v) = value {
                slot.clone_from(v);
            }
        }
        if cur.version > 0
            && new.persona == cur.persona
            && new.preferences == cur.preferences
            && new.goals == cur.goals
        {
            tx.rollback().await?;
            return Ok(cur);
        }
        let now = now_ms();
        new.version = cur.version + 1;
        new.updated_at = Some(rfc3339(now));
        if store::save(tx.conn(), cx, &new, now).await? {
            tx.commit(cx).await?;
            return Ok(new);
        }
    }
    Err(LoomError::new(
        ErrorCode::BackendTimeout,
        "the profile kept changing under concurrent writes; retry",
    ))
}
