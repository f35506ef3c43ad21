//! `memory.apply`: one bulk change over a filter. The plan (what changes,
//! what is kept and why) is computed the same way for a dry run and a real
//! run, inside the transaction, so a dry run reports exactly what the real
//! run then changes.

use std::collections::HashSet;

use loom_core::{OpCx, OpResult};
use sqlx::AnyConnection;

use super::model::{Applied, AppliedMemory, ApplyAction, MemoryApply};
use super::store::{self as sql, ListFilter, Row};
use super::validate::{self, invalid, labels_from_json, labels_json};
use crate::scope::require_namespace;
use crate::store::{Store, db_error, now_ms};

/// Why a lock kept a row of a key whose other row it locks (one lock
/// holds a key); a key locked before the call keeps its rows as `locked`.
const ONE_LOCK: &str = "another row of the key takes the lock";

/// What happens to one row.
enum Step {
    Change(Box<Row>),
    Keep(&'static str),
    Same,
}

/// What `action` does to `row`. `key_locked`: a row of its key, this one
/// or another agent's, is locked, or is to be locked by this call: the
/// row is kept as it is, but for a lock the row itself already holds.
fn plan(action: ApplyAction, add: &[String], row: &Row, key_locked: bool, now: i64) -> Step {
    if key_locked && !(action == ApplyAction::Lock && row.locked != 0) {
        return Step::Keep("locked");
    }
    let mut new = row.clone();
    match action {
        ApplyAction::Delete | ApplyAction::Expire if row.pinned != 0 => {
            return Step::Keep("pinned");
        }
        ApplyAction::Delete => new.deleted = 1,
        ApplyAction::Expire => new.expires_ms = Some(now),
        ApplyAction::Lock if row.locked != 0 => return Step::Same,
        ApplyAction::Lock => {
            // As memory.lock: a locked memory does not expire either.
            new.locked = 1;
            new.expires_ms = None;
        }
        ApplyAction::Label => {
            let mut labels = labels_from_json(&row.labels);
            labels.extend(add.iter().cloned());
            labels.sort();
            labels.dedup();
            if labels_json(&labels) == row.labels {
                return Step::Same;
            }
            // A memory holds at most MAX_LABELS, as memory.set and
            // memory.update hold it: one past it is kept as it is.
            if labels.len() > validate::MAX_LABELS {
                return Step::Keep("too many labels");
            }
            new.labels = labels_json(&labels);
        }
        ApplyAction::Demote if row.pinned == 0 && row.recall_count == 0 => return Step::Same,
        ApplyAction::Demote => new.pinned = 0,
    }
    Step::Change(Box::new(new))
}

async fn reset_recall(conn: &mut AnyConnection, row: &Row) -> OpResult<()> {
    sqlx::query(
        "UPDATE memories SET recall_count = 0 WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4",
    )
    .bind(&row.org)
    .bind(&row.namespace)
    .bind(&row.agent)
    .bind(&row.memory_key)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// `memory.apply`.
pub async fn apply(store: &Store, cx: &OpCx, input: MemoryApply) -> OpResult<Applied> {
    let f = &input.filter;
    if f.labels.as_ref().is_none_or(Vec::is_empty)
        && f.key_prefix.as_deref().is_none_or(str::is_empty)
        && f.kind.is_none()
        && f.updated_before.is_none()
    {
        return Err(invalid(
            "filter",
            "filter names nothing: give labels, key_prefix, kind or updated_before",
        ));
    }
    let labels = f
        .labels
        .as_deref()
        .map(validate::labels)
        .transpose()?
        .unwrap_or_default();
    if let Some(p) = f.key_prefix.as_deref().filter(|p| !p.is_empty()) {
        validate::key("filter.key_prefix", p)?;
    }
    let kind = f.kind.as_deref().map(validate::kind).transpose()?;
    let before = f
        .updated_before
        .as_deref()
        .map(|s| validate::time("filter.updated_before", s))
        .transpose()?;
    let add = match (input.action, input.labels.as_deref()) {
        (ApplyAction::Label, Some(l)) if !l.is_empty() => validate::labels(l)?,
        (ApplyAction::Label, _) => {
            return Err(invalid("labels", "action label needs labels to add"));
        }
        (_, Some(_)) => return Err(invalid("labels", "labels is only for action label")),
        (_, None) => Vec::new(),
    };

    if input.action == ApplyAction::Demote {
        // A demotion plans by the rows' recall counts: every recall answered
        // before this call is in them first (`memory::usage`).
        cx.service::<super::usage::UsageLog>()?.flush().await;
    }
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    let filter = ListFilter {
        agent: input.agent.is_some().then_some(cx.scope.agent.as_str()),
        kind: kind.as_deref(),
        key_prefix: f.key_prefix.as_deref().filter(|p| !p.is_empty()),
        labels: &labels,
        updated_before: before,
        // A dry run changes nothing: it need not hold up other writers.
        for_update: !input.dry_run,
    };
    let rows = sql::list_all(tx.conn(), cx, &filter, now).await?;
    // A lock holds its key, whichever agent's row carries it.
    let locked = sql::locked_keys(tx.conn(), cx).await?;
    let caller = cx.scope.agent.as_str();
    // One lock holds a key, so a lock takes one row of each: the caller's
    // own where the filter matched it (its unlock is the caller's to
    // make), else the first matched; the key's other rows are kept.
    let own: HashSet<String> = if input.action == ApplyAction::Lock {
        rows.iter()
            .filter(|r| r.agent == caller)
            .map(|r| r.memory_key.clone())
            .collect()
    } else {
        HashSet::new()
    };
    let mut changes: Vec<(Row, Row)> = Vec::new();
    let mut skipped = Vec::new();
    let mut more = false;
    // Keys this call locks: their other rows are kept, for that reason.
    let mut locking: HashSet<String> = HashSet::new();
    for row in rows {
        let held = locked.contains(&row.memory_key);
        let taken = !held
            && (locking.contains(&row.memory_key)
                || (row.agent != caller && own.contains(&row.memory_key)));
        match plan(input.action, &add, &row, held || taken, now) {
            Step::Keep(_) if taken => skipped.push(AppliedMemory {
                memory_key: row.memory_key.clone(),
                agent: row.agent.clone(),
                reason: Some(ONE_LOCK.to_owned()),
            }),
            Step::Change(_) if changes.len() == super::MAX_BULK_CHANGES => {
                more = true;
                break;
            }
            Step::Change(mut new) => {
                if input.action == ApplyAction::Lock {
                    locking.insert(row.memory_key.clone());
                }
                new.updated_ms = now;
                changes.push((row, *new));
            }
            Step::Keep(reason) => skipped.push(AppliedMemory {
                memory_key: row.memory_key.clone(),
                agent: row.agent.clone(),
                reason: Some(reason.to_owned()),
            }),
            Step::Same => {}
        }
    }
    let changed: Vec<AppliedMemory> = changes
        .iter()
        .map(|(row, _)| AppliedMemory {
            memory_key: row.memory_key.clone(),
            agent: row.agent.clone(),
            reason: None,
        })
        .collect();
    let mut memory_keys: Vec<String> = changed.iter().map(|c| c.memory_key.clone()).collect();
    memory_keys.dedup();

    if input.dry_run || changes.is_empty() {
        tx.rollback().await?;
        store
            .audit_outcome(cx, if input.dry_run { "dry_run" } else { "noop" })
            .await?;
    } else {
        for (row, new) in &changes {
            if !sql::save(tx.conn(), cx, row.version, new, input.action.as_str()).await? {
                // Another writer changed a row after the plan was made: undo all.
                return Err(sql::conflict(tx.conn(), row, row.version).await?);
            }
            if input.action == ApplyAction::Demote {
                reset_recall(tx.conn(), row).await?;
            }
        }
        tx.commit(cx).await?;
        if input.action == ApplyAction::Demote && !changes.is_empty() {
            cx.service::<super::usage::UsageLog>()?.forget_answered();
        }
    }
    Ok(Applied {
        action: input.action.as_str().to_owned(),
        dry_run: input.dry_run,
        memory_keys,
        changed,
        skipped,
        more,
    })
}
