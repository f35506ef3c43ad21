//! Building a context pack: candidates, then a greedy fill of the budget.
//!
//! Candidates, in order: the pinned memories the task matches (ranked as
//! memory search ranks them), then the other pinned memories (newest
//! first), then the other memories the task matches (ranked), then the
//! namespace's three most recent runs. Each is taken when it fits in what
//! is left of the budget. Pins first: pinning a memory is how an agent
//! says it belongs in every context, so a long match must not push it out.
//! Tokens are estimated as characters / 4, rounded up: no tokenizer is
//! needed and it errs on the generous side for English prose.

use loom_core::{OpCx, OpResult};

use super::model::{ContextPack, ContextPackInput, PackItem};
use crate::memory::rank::{self, SearchFilter};
use crate::memory::read::record_exposures;
use crate::memory::store::{COLUMNS, Row};
use crate::scope::require_namespace;
use crate::store::{Store, db_error, now_ms};

const MATCHES: usize = rank::LARGEST_PAGE as usize;
const PINNED: i64 = 20;
const RUNS: i64 = 3;

/// The namespace's pinned live memories, newest first: read, on SQLite,
/// from the index of pinned rows alone (migration 0016).
static PINNED_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM memories WHERE org = $1 AND namespace = $2 AND pinned = 1 AND deleted = 0 \
         AND (expires_ms IS NULL OR expires_ms > $3) ORDER BY updated_ms DESC, memory_key LIMIT $4"
    )
});

/// Estimated tokens of a text: characters / 4, rounded up.
pub fn tokens(text: &str) -> i64 {
    (text.chars().count() as i64 + 3) / 4
}

fn section(kind: &str) -> &'static str {
    match kind {
        "decision" => "decision",
        "procedure" => "procedure",
        _ => "memory",
    }
}

fn memory_item(row: &Row, why: String) -> PackItem {
    PackItem {
        section: section(&row.kind).to_owned(),
        memory_key: Some(row.memory_key.clone()),
        version: Some(row.version),
        agent: Some(row.agent.clone()),
        run_id: None,
        content: row.content.clone(),
        tokens: tokens(&row.content),
        why,
    }
}

/// `context.pack`.
pub async fn pack(store: &Store, cx: &OpCx, input: ContextPackInput) -> OpResult<ContextPack> {
    let budget = input.budget_tokens.unwrap_or(2000).clamp(100, 32_000);
    let terms = rank::terms(&input.task);
    let now = now_ms();
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let hits = rank::search(
        &mut conn,
        store,
        cx,
        &terms,
        &SearchFilter::default(),
        MATCHES,
        now,
    )
    .await?;
    let pinned: Vec<Row> = sqlx::query_as(PINNED_SQL.as_str())
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(now)
        .bind(PINNED)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
    let runs = crate::run::store::recent(&mut conn, cx, RUNS).await?;
    drop(conn);

    let (mut candidates, mut unpinned) = (Vec::new(), Vec::new());
    for (row, parts) in &hits {
        let matched =
            crate::memory::ask::matched(&terms, &format!("{} {}", row.memory_key, row.content));
        let mut why = format!("matches the task ({})", matched.join(", "));
        if row.pinned != 0 {
            why.push_str("; pinned");
        }
        if row.recall_count > 0 {
            why.push_str(&format!("; recalled {} times", row.recall_count));
        }
        why.push_str(&format!("; score {:.2}", rank::score(parts)));
        let candidate = (memory_item(row, why), Some(row.clone()));
        if row.pinned != 0 {
            candidates.push(candidate);
        } else {
            unpinned.push(candidate);
        }
    }
    for row in pinned {
        if !hits
            .iter()
            .any(|(h, _)| h.agent == row.agent && h.memory_key == row.memory_key)
        {
            candidates.push((
                memory_item(&row, "pinned in this namespace".to_owned()),
                Some(row),
            ));
        }
    }
    candidates.append(&mut unpinned);
    for run in runs {
        let content = if run.summary.is_empty() {
            format!("{} ({})", run.goal, run.status)
        } else {
            format!("{} ({}): {}", run.goal, run.status, run.summary)
        };
        candidates.push((
            PackItem {
                section: "run".to_owned(),
                memory_key: None,
                version: None,
                agent: None,
                run_id: Some(run.run_id.clone()),
                tokens: tokens(&content),
                content,
                why: format!("recent run by {}, {}", run.agent, run.status),
            },
            None,
        ));
    }

    let (mut items, mut served, mut used, mut left_out) = (Vec::new(), Vec::new(), 0, 0);
    for (item, row) in candidates {
        if used + item.tokens > budget {
            left_out += 1;
            continue;
        }
        used += item.tokens;
        items.push(item);
        served.extend(row);
    }
    record_exposures(cx, served.iter(), now).await?;
    Ok(ContextPack {
        budget_tokens: budget,
        used_tokens: used,
        token_estimate: "characters / 4, rounded up".to_owned(),
        items,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned memories come from the index of pinned rows, newest
    /// first: no scan of the namespace; only a tie of times is sorted (by
    /// key).
    #[tokio::test]
    async fn pinned_memories_are_read_from_their_own_index_in_order() {
        let test = crate::store::testing::sqlite().await;
        let plan = test.query_plan(
            &PINNED_SQL,
            rusqlite::params!["default", "default", 0_i64, PINNED],
        );
        assert_eq!(
            plan,
            [
                "SEARCH memories USING INDEX memories_pinned_by_update (org=? AND namespace=?)",
                "USE TEMP B-TREE FOR LAST TERM OF ORDER BY"
            ]
        );
    }
}
