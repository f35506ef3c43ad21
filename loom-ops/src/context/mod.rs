//! The context plane: what an agent should know before it starts a task.

pub mod model;
mod pack;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{ContextPack, ContextPackInput};
use crate::store::Store;

/// Builds a token-budgeted pack of what to know before a task: the
/// memories, decisions and procedures it matches, pinned memories and
/// recent runs, each with why it was included. Call it at the start of a
/// task; to look something up mid-task use loom_search or memory.get.
#[loom_op(role = "viewer", idempotent, rate = "heavy", toolsets(core, coding))]
async fn pack(cx: &OpCx, input: ContextPackInput) -> OpResult<ContextPack> {
    pack::pack(cx.service::<Store>()?, cx, input).await
}
