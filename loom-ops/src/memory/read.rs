//! The logic of the memory reads; handlers in `mod.rs` call these.

use loom_core::{OpCx, OpResult};

use super::model::{
    AgentCount, MemoryGet, MemoryGot, MemoryHistory, MemoryHistoryPage, MemoryList, MemoryPage,
    MemorySearch, MemorySearchResult, RecallBreakdown,
};
use super::rank::{self, SearchFilter};
use super::store::{self as sql, ListFilter, Row, VersionRow};
use super::usage::{self, Recalled, Served, UsageLog};
use super::validate::{self, invalid, labels_from_json};
use super::write::not_found;
use crate::scope::{require_namespace, require_namespace_in};
use crate::store::{Store, now_ms, rfc3339};

/// The output fields `fields` may name.
pub const FIELDS: &[&str] = &[
    "memory_key",
    "namespace",
    "agent",
    "content",
    "kind",
    "labels",
    "source",
    "version",
    "run_id",
    "pinned",
    "locked",
    "expires_at",
    "recall_count",
    "content_hash",
    "created_at",
    "updated_at",
];

/// The most `[[links]]` `follow` serves.
const MAX_FOLLOW: usize = 10;

fn got_from_row(row: &Row) -> MemoryGot {
    let m = row.to_memory();
    MemoryGot {
        memory_key: m.memory_key,
        namespace: Some(m.namespace),
        agent: Some(m.agent),
        content: Some(m.content),
        kind: Some(m.kind),
        labels: Some(m.labels),
        source: Some(m.source),
        version: Some(m.version),
        run_id: None,
        pinned: Some(m.pinned),
        locked: Some(m.locked),
        expires_at: m.expires_at,
        recall_count: Some(m.recall_count),
        content_hash: Some(m.content_hash),
        created_at: Some(m.created_at),
        updated_at: Some(m.updated_at),
        recall_breakdown: None,
        followed: None,
    }
}

fn got_from_version(cx: &OpCx, key: &str, agent: &str, v: &VersionRow) -> MemoryGot {
    MemoryGot {
        memory_key: key.to_owned(),
        namespace: Some(cx.scope.namespace.clone()),
        agent: Some(agent.to_owned()),
        content: Some(v.content.clone()),
        kind: Some(v.kind.clone()),
        labels: Some(labels_from_json(&v.labels)),
        source: Some(v.source.clone()),
        version: Some(v.version),
        run_id: v.run_id.clone(),
        pinned: Some(v.pinned != 0),
        locked: Some(v.locked != 0),
        expires_at: v.expires_ms.map(rfc3339),
        recall_count: None,
        content_hash: Some(v.content_hash.clone()),
        created_at: None,
        updated_at: Some(rfc3339(v.at_ms)),
        recall_breakdown: None,
        followed: None,
    }
}

fn keep_fields(got: &mut MemoryGot, fields: &[String]) {
    let keep = |f: &str| fields.iter().any(|x| x == f);
    macro_rules! drop_unless {
        ($($f:ident),*) => { $( if !keep(stringify!($f)) { got.$f = None; } )* };
    }
    drop_unless!(
        run_id,
        namespace,
        agent,
        content,
        kind,
        labels,
        source,
        version,
        pinned,
        locked,
        expires_at,
        recall_count,
        content_hash,
        created_at,
        updated_at
    );
}

/// The keys a content links as `[[memory_key]]`, in order, without repeats.
pub fn links(content: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("[[") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find("]]") else { break };
        let key = rest[..end].trim();
        if validate::key("link", key).is_ok() && !out.iter().any(|k| k == key) {
            out.push(key.to_owned());
        }
        rest = &rest[end + 2..];
    }
    out
}

/// `memory.get`.
pub async fn get(store: &Store, cx: &OpCx, input: MemoryGet) -> OpResult<MemoryGot> {
    let key = input.memory_key.as_str();
    validate::key("memory_key", key)?;
    let as_of = input
        .as_of
        .as_deref()
        .map(|s| validate::time("as_of", s))
        .transpose()?;
    // if_version asks about the current version, as_of reads another: the
    // pair would check one and answer the other.
    if as_of.is_some() && input.if_version.is_some() {
        return Err(invalid(
            "if_version",
            "if_version checks the current version and as_of reads an earlier one: give one of them",
        ));
    }
    if let Some(fields) = &input.fields
        && let Some(bad) = fields.iter().find(|f| !FIELDS.contains(&f.as_str()))
    {
        return Err(invalid(
            "fields",
            format!(
                "unknown field {bad:?}; fields may name {}",
                FIELDS.join(", ")
            ),
        ));
    }
    let explicit = input.agent.is_some();
    let now = now_ms();
    // A read: no transaction. What the serving leaves behind (the recall,
    // the exposure rows) goes to the usage log.
    require_namespace_in(store, cx).await?;

    let mut served = Vec::new();
    let mut got =
        if let Some(at) = as_of {
            let mut conn = store.read().await?;
            let Some((agent, v)) = sql::version_at(&mut conn, cx, explicit, key, at).await? else {
                return Err(not_found(cx, key)
                    .with_detail("as_of", input.as_of.clone().unwrap_or_default()));
            };
            if v.deleted != 0 || v.expires_ms.is_some_and(|e| e <= at) {
                return Err(not_found(cx, key)
                    .with_detail("as_of", input.as_of.clone().unwrap_or_default()));
            }
            served.push(Served::new(
                cx,
                (&cx.scope.namespace, &agent, key, v.version),
                now,
                None,
            ));
            got_from_version(cx, key, &agent, &v)
        } else {
            let log = cx.service::<UsageLog>()?;
            let breakdown = input.include_recall_breakdown == Some(true);
            if breakdown {
                // Every serving answered before this call counts.
                log.flush().await;
            }
            // The plain get is one point read; the options below take a
            // connection for what they read besides.
            let Some(sql::RowWithRun {
                mut row,
                run_id,
                memory_id,
            }) = sql::read_live_with_run(store, cx, explicit, key, now).await?
            else {
                return Err(not_found(cx, key));
            };
            // What this caller was answered before, written or not yet.
            row.recall_count = log.recalls_seen(cx, &row);
            if let Some(expected) = input.if_version
                && expected != row.version
            {
                return Err(sql::version_conflict(key, expected, row.version));
            }
            // The recall count ranks results, so a read that records no usage
            // leaves it; who was served which row is still recorded.
            let recall = cx.records_usage();
            let recalled = Recalled {
                id: memory_id,
                born_ms: row.created_ms,
            };
            let mut serving = Served::new(cx, row.coordinates(), now, recall.then_some(recalled));
            if recall {
                // The answer counts this recall; the stored count catches up
                // when the usage log writes it.
                row.recall_count += 1;
                row.last_recall_ms = Some(now);
                serving.answered_recalls = row.recall_count;
            }
            served.push(serving);
            let mut got = got_from_row(&row);
            got.run_id = run_id;
            if breakdown {
                let mut by_agent = sql::exposures_by_agent(&mut *store.read().await?, &row).await?;
                // This serving's exposure is still queued: count it here.
                match by_agent.iter_mut().find(|(a, _)| *a == cx.scope.agent) {
                    Some((_, n)) => *n += 1,
                    None => by_agent.push((cx.scope.agent.clone(), 1)),
                }
                by_agent.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                got.recall_breakdown = Some(RecallBreakdown {
                    total: row.recall_count,
                    last_recalled_at: row.last_recall_ms.map(rfc3339),
                    by_agent: by_agent
                        .into_iter()
                        .map(|(agent, count)| AgentCount { agent, count })
                        .collect(),
                });
            }
            if input.follow == Some(true) {
                // Each link is a point read of its own, as the row was.
                let mut followed = Vec::new();
                for link in links(&row.content)
                    .into_iter()
                    .filter(|k| k != key)
                    .take(MAX_FOLLOW)
                {
                    if let Some(sql::RowWithRun { row: linked, .. }) =
                        sql::read_live_with_run(store, cx, false, &link, now).await?
                    {
                        served.push(Served::new(cx, linked.coordinates(), now, None));
                        followed.push(linked.to_memory());
                    }
                }
                got.followed = Some(followed);
            }
            got
        };
    usage::record(cx, served).await?;
    if let Some(fields) = &input.fields {
        keep_fields(&mut got, fields);
    }
    Ok(got)
}

fn parse_version_cursor(cursor: &str) -> OpResult<i64> {
    cursor
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| {
            invalid(
                "cursor",
                format!("cursor {cursor:?} is not one this op returned"),
            )
        })
}

/// `memory.history`.
pub async fn history(
    store: &Store,
    cx: &OpCx,
    input: MemoryHistory,
) -> OpResult<MemoryHistoryPage> {
    let key = input.memory_key.as_str();
    validate::key("memory_key", key)?;
    let limit = validate::limit(input.limit, 20, 100)?;
    let before = input
        .cursor
        .as_deref()
        .map(parse_version_cursor)
        .transpose()?
        .unwrap_or(i64::MAX);
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let Some(row) = sql::resolve(&mut conn, cx, input.agent.is_some(), key, now_ms(), true).await?
    else {
        return Err(not_found(cx, key));
    };
    let rows = sql::versions(&mut conn, &row, before, limit + 1).await?;
    let more = rows.len() as i64 > limit;
    let versions: Vec<_> = rows
        .iter()
        .take(limit as usize)
        .map(VersionRow::to_version)
        .collect();
    let next_cursor = if more {
        versions.last().map(|v| v.version.to_string())
    } else {
        None
    };
    Ok(MemoryHistoryPage {
        memory_key: row.memory_key,
        agent: row.agent,
        versions,
        next_cursor,
    })
}

/// `memory.list`.
pub async fn list(store: &Store, cx: &OpCx, input: MemoryList) -> OpResult<MemoryPage> {
    let limit = validate::limit(input.limit, 50, 200)?;
    let kind = input.kind.as_deref().map(validate::kind).transpose()?;
    let labels = input
        .labels
        .as_deref()
        .map(validate::labels)
        .transpose()?
        .unwrap_or_default();
    if let Some(p) = input.key_prefix.as_deref().filter(|p| !p.is_empty()) {
        validate::key("key_prefix", p)?;
    }
    let after = match input.cursor.as_deref() {
        None => (String::new(), String::new()),
        Some(c) => match c.split_once('|') {
            Some((k, a)) if validate::key("cursor", k).is_ok() => (k.to_owned(), a.to_owned()),
            _ => {
                return Err(invalid(
                    "cursor",
                    format!("cursor {c:?} is not one this op returned"),
                ));
            }
        },
    };
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let filter = ListFilter {
        agent: input.agent.is_some().then_some(cx.scope.agent.as_str()),
        kind: kind.as_deref(),
        key_prefix: input.key_prefix.as_deref().filter(|p| !p.is_empty()),
        labels: &labels,
        updated_before: None,
        for_update: false,
    };
    let rows = sql::list(
        &mut conn,
        cx,
        &filter,
        (&after.0, &after.1),
        limit + 1,
        now_ms(),
    )
    .await?;
    let more = rows.len() as i64 > limit;
    // As memory.get: never less than the caller was last answered, the
    // recalls not written yet included (memory::usage).
    let log = cx.service::<UsageLog>()?;
    let memories: Vec<_> = rows
        .iter()
        .take(limit as usize)
        .map(|row| {
            let mut memory = row.to_memory();
            memory.recall_count = log.recalls_seen(cx, row);
            memory
        })
        .collect();
    let next_cursor = if more {
        memories
            .last()
            .map(|m| format!("{}|{}", m.memory_key, m.agent))
    } else {
        None
    };
    Ok(MemoryPage {
        memories,
        next_cursor,
    })
}

/// `memory.search`: ranked hits; each served hit leaves an exposure row
/// (recall counts are raised by memory.get only).
pub async fn search(store: &Store, cx: &OpCx, input: MemorySearch) -> OpResult<MemorySearchResult> {
    let limit = validate::limit(input.limit, 10, rank::LARGEST_PAGE)?;
    let kind = input.kind.as_deref().map(validate::kind).transpose()?;
    let terms = rank::terms(&input.query);
    let now = now_ms();
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let filter = SearchFilter {
        namespace: None,
        agent: input.agent.is_some().then_some(cx.scope.agent.as_str()),
        kind: kind.as_deref(),
        recipe: rank::Recipe::Balanced,
    };
    let found = rank::search(&mut conn, store, cx, &terms, &filter, limit as usize, now).await?;
    drop(conn);
    record_exposures(cx, found.iter().map(|(row, _)| row), now).await?;
    Ok(MemorySearchResult {
        hits: found
            .into_iter()
            .map(|(row, parts)| rank::hit(&row, parts, rank::Recipe::Balanced, input.explain))
            .collect(),
    })
}

/// Records one exposure per served row on the usage log.
pub async fn record_exposures<'a>(
    cx: &OpCx,
    rows: impl Iterator<Item = &'a Row>,
    now: i64,
) -> OpResult<()> {
    let served: Vec<Served> = rows
        .map(|row| Served::new(cx, row.coordinates(), now, None))
        .collect();
    usage::record(cx, served).await
}
