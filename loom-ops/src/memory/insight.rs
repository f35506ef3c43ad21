//! `memory.inspect`, `memory.provenance` and `memory.aggregate`: reads that
//! explain a memory or a namespace rather than serve content.

use std::collections::BTreeMap;

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};

use super::chain;
use super::model::{
    Aggregates, Group, GroupBy, MemoryAggregate, MemoryInspection, MemoryLookup, MemoryProvenance,
    ProvenanceLookup, ProvenanceStep,
};
use super::store::{self as sql, COLUMNS, Row};
use super::usage::UsageLog;
use super::validate::{self, labels_from_json};
use super::write::not_found;
use crate::scope::require_namespace;
use crate::store::{PerBackend, Store, db_error, now_ms, rfc3339};

async fn count(conn: &mut sqlx::AnyConnection, sql_text: &'static str, row: &Row) -> OpResult<i64> {
    let (n,): (i64,) = sqlx::query_as(sql_text)
        .bind(&row.org)
        .bind(&row.namespace)
        .bind(&row.agent)
        .bind(&row.memory_key)
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
    Ok(n)
}

/// A read of one writer's rows names the writer when the caller's own
/// agent cannot stand in for it ([`loom_core::CallOptions::own_agent`] is
/// off on the assistant toolset, whose client writes nothing): guessing
/// would answer about the wrong writer's rows.
fn require_writer(cx: &OpCx, agent: Option<&str>) -> OpResult<()> {
    if agent.is_some() || cx.options.own_agent {
        return Ok(());
    }
    // The pipeline answers it as every invalid-arguments refusal, `agent`
    // among the required arguments (`Validator::in_documented_shape`).
    Err(LoomError::new(
        ErrorCode::InvalidArguments,
        "agent: name the writer whose rows to read [missing]",
    )
    .with_detail("field", "agent")
    .with_detail(
        "hint",
        "pass the agent of a memory.search or memory.list hit for this memory",
    ))
}

/// `memory.inspect`.
pub async fn inspect(store: &Store, cx: &OpCx, input: MemoryLookup) -> OpResult<MemoryInspection> {
    validate::key("memory_key", &input.memory_key)?;
    // Servings and recalls answered before this call count.
    cx.service::<UsageLog>()?.flush().await;
    let now = now_ms();
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let Some(row) = sql::resolve(
        &mut conn,
        cx,
        input.agent.is_some(),
        &input.memory_key,
        now,
        true,
    )
    .await?
    else {
        return Err(not_found(cx, &input.memory_key));
    };
    static VERSIONS: PerBackend = PerBackend::new(
        || {
            format!(
                "{}SELECT COUNT(*) FROM chain",
                chain::chain(chain::ONE_MEMORY, "1", None)
            )
        },
        || {
            "SELECT COUNT(*) FROM memory_versions \
             WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4"
                .to_owned()
        },
    );
    let versions = count(&mut conn, VERSIONS.get(store.backend()), &row).await?;
    let exposures = count(
        &mut conn,
        "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM memory_exposure_counts \
         WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4",
        &row,
    )
    .await?;
    let served_agents = count(
        &mut conn,
        "SELECT COUNT(*) FROM memory_exposure_counts \
         WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4",
        &row,
    )
    .await?;
    let others: Vec<(String,)> = sqlx::query_as(
        "SELECT agent FROM memories WHERE org = $1 AND namespace = $2 AND memory_key = $3 AND agent <> $4 \
         ORDER BY agent",
    )
    .bind(&row.org)
    .bind(&row.namespace)
    .bind(&row.memory_key)
    .bind(&row.agent)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(MemoryInspection {
        live: row.live(now),
        memory: row.to_memory(),
        versions,
        exposures,
        served_agents,
        other_agents: others.into_iter().map(|(a,)| a).collect(),
    })
}

#[derive(sqlx::FromRow)]
struct StepRow {
    version: i64,
    change: String,
    changed_by: String,
    subject: String,
    run_id: Option<String>,
    request_id: String,
    content_hash: String,
    at_ms: i64,
}

/// `memory.provenance`.
pub async fn provenance(
    store: &Store,
    cx: &OpCx,
    input: ProvenanceLookup,
) -> OpResult<MemoryProvenance> {
    validate::key("memory_key", &input.memory_key)?;
    require_writer(cx, input.agent.as_deref())?;
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let Some(row) = sql::resolve(
        &mut conn,
        cx,
        input.agent.is_some(),
        &input.memory_key,
        now_ms(),
        true,
    )
    .await?
    else {
        return Err(not_found(cx, &input.memory_key));
    };
    const STEP: &str =
        "version, change, changed_by, subject, run_id, request_id, content_hash, at_ms";
    static STEPS: PerBackend = PerBackend::new(
        || {
            format!(
                "{}SELECT {STEP} FROM chain JOIN memory_versions v ON v.rowid = chain.vid \
                 ORDER BY v.version",
                chain::chain(chain::ONE_MEMORY, "1", None)
            )
        },
        || {
            format!(
                "SELECT {STEP} FROM memory_versions \
                 WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4 ORDER BY version"
            )
        },
    );
    let steps: Vec<StepRow> = sqlx::query_as(STEPS.get(store.backend()))
        .bind(&row.org)
        .bind(&row.namespace)
        .bind(&row.agent)
        .bind(&row.memory_key)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
    let mut runs: Vec<String> = Vec::new();
    for s in &steps {
        if let Some(r) = &s.run_id
            && !runs.contains(r)
        {
            runs.push(r.clone());
        }
    }
    Ok(MemoryProvenance {
        memory_key: row.memory_key,
        agent: row.agent,
        source: row.source,
        runs,
        changes: steps
            .into_iter()
            .map(|s| ProvenanceStep {
                version: s.version,
                change: s.change,
                changed_by: s.changed_by,
                subject: s.subject,
                run_id: s.run_id,
                request_id: s.request_id,
                content_hash: s.content_hash,
                at: rfc3339(s.at_ms),
            })
            .collect(),
    })
}

/// `memory.aggregate`: counted over the live rows, in Rust, so that label
/// grouping (labels are a JSON array) works the same on both backends.
pub async fn aggregate(store: &Store, cx: &OpCx, input: MemoryAggregate) -> OpResult<Aggregates> {
    require_writer(cx, input.agent.as_deref())?;
    // Recalls answered before this call count.
    cx.service::<UsageLog>()?.flush().await;
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories WHERE org = $1 AND namespace = $2 AND deleted = 0 \
         AND (expires_ms IS NULL OR expires_ms > $3) AND ($4 = '' OR agent = $4)"
    )))
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(now_ms())
    .bind(if input.agent.is_some() {
        cx.scope.agent.as_str()
    } else {
        ""
    })
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for row in &rows {
        let values = match input.group_by {
            GroupBy::Kind => vec![row.kind.clone()],
            GroupBy::Agent => vec![row.agent.clone()],
            GroupBy::Label => labels_from_json(&row.labels),
        };
        for value in values {
            let g = groups.entry(value.clone()).or_insert(Group {
                value,
                memories: 0,
                pinned: 0,
                locked: 0,
                recalls: 0,
            });
            g.memories += 1;
            g.pinned += row.pinned;
            g.locked += row.locked;
            g.recalls += row.recall_count;
        }
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        b.memories
            .cmp(&a.memories)
            .then_with(|| a.value.cmp(&b.value))
    });
    Ok(Aggregates {
        groups,
        total: rows.len() as i64,
    })
}
