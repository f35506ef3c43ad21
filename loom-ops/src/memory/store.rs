//! Memory rows in SQL. Every change goes through [`save`]: a conditional
//! UPDATE on the version the caller read (so two writers racing on one
//! version cannot both win) plus a snapshot row in `memory_versions`.

use std::sync::LazyLock;

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};
use sqlx::AnyConnection;

use super::chain;
use super::model::{Memory, MemoryVersion};
use super::usage::Served;
use super::validate::labels_from_json;
use crate::store::{
    Backend, Bind, OneStep, PerBackend, Store, Values, all_rows, db_error, one_step_sql, rfc3339,
};

/// The columns [`Row`] reads, in order.
pub const COLUMNS: &str = "org, namespace, agent, memory_key, content, kind, labels, source, content_hash, \
     version, pinned, locked, deleted, expires_ms, recall_count, last_recall_ms, created_ms, updated_ms";

/// A `memories` row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Row {
    pub org: String,
    pub namespace: String,
    pub agent: String,
    pub memory_key: String,
    pub content: String,
    pub kind: String,
    pub labels: String,
    pub source: String,
    pub content_hash: String,
    pub version: i64,
    pub pinned: i64,
    pub locked: i64,
    pub deleted: i64,
    pub expires_ms: Option<i64>,
    pub recall_count: i64,
    pub last_recall_ms: Option<i64>,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Row {
    /// Whether it is served at `now`: not deleted, not expired.
    pub fn live(&self, now: i64) -> bool {
        self.deleted == 0 && self.expires_ms.is_none_or(|e| e > now)
    }

    /// (namespace, agent, key, version): what a serving of this row records.
    pub fn coordinates(&self) -> (&str, &str, &str, i64) {
        (&self.namespace, &self.agent, &self.memory_key, self.version)
    }

    /// The API shape.
    pub fn to_memory(&self) -> Memory {
        Memory {
            memory_key: self.memory_key.clone(),
            namespace: self.namespace.clone(),
            agent: self.agent.clone(),
            content: self.content.clone(),
            kind: self.kind.clone(),
            labels: labels_from_json(&self.labels),
            source: self.source.clone(),
            version: self.version,
            pinned: self.pinned != 0,
            locked: self.locked != 0,
            deleted: self.deleted != 0,
            expires_at: self.expires_ms.map(rfc3339),
            recall_count: self.recall_count,
            content_hash: self.content_hash.clone(),
            created_at: rfc3339(self.created_ms),
            updated_at: rfc3339(self.updated_ms),
        }
    }
}

/// [`own`]'s statement.
static OWN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM memories WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4"
    )
});

/// The row of exactly this agent, deleted or not.
pub async fn own(
    conn: &mut AnyConnection,
    cx: &OpCx,
    agent: &str,
    key: &str,
) -> OpResult<Option<Row>> {
    sqlx::query_as::<_, Row>(OWN.as_str())
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(agent)
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(db_error)
}

/// The row a caller means by `key`: an explicitly named agent's row; else
/// the caller's own row, else the most recently changed row under any
/// agent. Only live rows unless `include_dead` (history reads deleted ones).
pub async fn resolve(
    conn: &mut AnyConnection,
    cx: &OpCx,
    explicit_agent: bool,
    key: &str,
    now: i64,
    include_dead: bool,
) -> OpResult<Option<Row>> {
    Ok(
        resolve_with_run(conn, cx, explicit_agent, key, now, include_dead)
            .await?
            .map(|r| r.row),
    )
}

/// The row a single-key change (`memory.update`, `delete`, `pin`, `lock`
/// and their undoings) means by `key`: the named agent's live row; else the
/// caller's own live row; else the live row of another agent changed most
/// recently, unless the caller's own row, deleted or expired, was changed
/// after it. That last rule keeps a change sent twice on the caller's own
/// row: a `memory.delete` retried after its answer was lost finds the row
/// it deleted (and answers not found) instead of deleting the next agent's.
pub async fn resolve_for_change(
    conn: &mut AnyConnection,
    cx: &OpCx,
    explicit_agent: bool,
    key: &str,
    now: i64,
) -> OpResult<Option<Row>> {
    let rows = resolve_query(RESOLVE_ROWS.as_str(), cx, explicit_agent, key, now, true)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
    let caller = cx.scope.agent.as_str();
    let (own, others): (Vec<Row>, Vec<Row>) = rows
        .into_iter()
        .map(|r| r.row)
        .partition(|r| r.agent == caller);
    let own = own.into_iter().next();
    if own.as_ref().is_some_and(|r| r.live(now)) {
        return Ok(own);
    }
    let other = others
        .into_iter()
        .filter(|r| r.live(now))
        .min_by(|a, b| serve_order(caller, a, b));
    Ok(other.filter(|o| own.is_none_or(|own| own.updated_ms < o.updated_ms)))
}

/// A row [`resolve_with_run`] found.
#[derive(Debug, sqlx::FromRow)]
pub struct RowWithRun {
    /// The row.
    #[sqlx(flatten)]
    pub row: Row,
    /// The run its current version was written in.
    pub run_id: Option<String>,
    /// The row's `id`: on SQLite where it lies in the table (its rowid),
    /// which the usage log's recall counts are written in the order of.
    pub memory_id: i64,
}

/// The key's rows [`resolve_with_run`] chooses from, one per agent (or
/// the named agent's alone), each with its version's run, in no order:
/// `memories_by_key` finds them. Its parameters are [`RESOLVE_WITH_RUN`]'s,
/// bound alike: `$5`, the caller, which only that order reads, unused.
static RESOLVE_ROWS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS}, m.run_id, m.id AS memory_id \
         FROM memories m WHERE org = $1 AND namespace = $2 AND memory_key = $3 \
         AND ($7 = '' OR agent = $7) \
         AND ($6 = 1 OR (deleted = 0 AND (expires_ms IS NULL OR expires_ms > $4)))"
    )
});

/// The statement of [`resolve_with_run`]: of [`RESOLVE_ROWS`], the one
/// [`serve_order`] puts first.
static RESOLVE_WITH_RUN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} ORDER BY CASE WHEN agent = $5 THEN 0 ELSE 1 END, updated_ms DESC, agent LIMIT 1",
        *RESOLVE_ROWS
    )
});

/// [`RESOLVE_WITH_RUN`]'s order: the caller's own row first, then the most
/// recently changed, then the agent first in byte order (SQLite's and
/// PostgreSQL's `COLLATE "C"` order of text alike).
fn serve_order(caller: &str, a: &Row, b: &Row) -> std::cmp::Ordering {
    (a.agent != caller)
        .cmp(&(b.agent != caller))
        .then(b.updated_ms.cmp(&a.updated_ms))
        .then_with(|| a.agent.cmp(&b.agent))
}

/// [`resolve`], with the run of the row's current version, in one statement
/// (memory.get answers both; a read's every statement is a round trip).
pub async fn resolve_with_run(
    conn: &mut AnyConnection,
    cx: &OpCx,
    explicit_agent: bool,
    key: &str,
    now: i64,
    include_dead: bool,
) -> OpResult<Option<RowWithRun>> {
    resolve_query(
        RESOLVE_WITH_RUN.as_str(),
        cx,
        explicit_agent,
        key,
        now,
        include_dead,
    )
    .fetch_optional(conn)
    .await
    .map_err(db_error)
}

/// `sql` ([`RESOLVE_WITH_RUN`] or [`RESOLVE_ROWS`]) with the parameters the
/// two share bound.
fn resolve_query<'q>(
    sql: &'static str,
    cx: &'q OpCx,
    explicit_agent: bool,
    key: &'q str,
    now: i64,
    include_dead: bool,
) -> sqlx::query::QueryAs<'q, sqlx::Any, RowWithRun, sqlx::any::AnyArguments> {
    sqlx::query_as(sql)
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(key)
        .bind(now)
        .bind(&cx.scope.agent)
        .bind(i64::from(include_dead))
        .bind(only_agent(cx, explicit_agent))
}

/// [`resolve_with_run`] of a live row, as a read of its own (no
/// transaction). A point read, so on SQLite it runs on the calling thread
/// ([`Store::read_inline`]).
///
/// The key's rows (nearly always one) are chosen here, by [`serve_order`],
/// not by the statement's `ORDER BY ... LIMIT 1`: for that SQLite sorts
/// even one row through a temporary B-tree it creates, with a zeroed page,
/// and drops for every statement (~24,000 of the ~285,000 instructions a
/// get cost, bench/instructions.sh), and PostgreSQL plans a sort whose
/// set-up costs more than the one-row index scan: the point read alone,
/// under pgbench at 32 connections, served 27-29k a second with it against
/// 34k without (bench/RESULTS.md).
pub async fn read_live_with_run(
    store: &Store,
    cx: &OpCx,
    explicit_agent: bool,
    key: &str,
    now: i64,
) -> OpResult<Option<RowWithRun>> {
    let only = only_agent(cx, explicit_agent);
    let first = |rows: Vec<RowWithRun>| {
        rows.into_iter()
            .min_by(|a, b| serve_order(&cx.scope.agent, &a.row, &b.row))
    };
    let inline = store.read_inline(|conn| {
        let rows = all_rows(
            conn,
            &RESOLVE_ROWS,
            &[
                &cx.scope.org,
                &cx.scope.namespace,
                &key,
                &now,
                &cx.scope.agent,
                &0_i64,
                &only,
            ],
            RowWithRun::from_sqlite,
        )?;
        Ok(first(rows))
    });
    if let Some(found) = inline {
        return found;
    }
    let rows = resolve_query(RESOLVE_ROWS.as_str(), cx, explicit_agent, key, now, false)
        .fetch_all(&mut *store.read().await?)
        .await
        .map_err(db_error)?;
    Ok(first(rows))
}

/// The agent a resolve is limited to: the caller's when named, else any ('').
fn only_agent(cx: &OpCx, explicit_agent: bool) -> &str {
    if explicit_agent {
        cx.scope.agent.as_str()
    } else {
        ""
    }
}

impl RowWithRun {
    /// Decodes a row of [`RESOLVE_WITH_RUN`] read through rusqlite: the
    /// columns of [`COLUMNS`] in order, then `run_id` and `memory_id`.
    fn from_sqlite(r: &rusqlite::Row<'_>) -> rusqlite::Result<RowWithRun> {
        Ok(RowWithRun {
            row: Row::from_sqlite(r)?,
            run_id: r.get(18)?,
            memory_id: r.get(19)?,
        })
    }
}

impl Row {
    /// Decodes the columns of [`COLUMNS`], in order, read through rusqlite.
    pub(super) fn from_sqlite(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        Ok(Row {
            org: r.get(0)?,
            namespace: r.get(1)?,
            agent: r.get(2)?,
            memory_key: r.get(3)?,
            content: r.get(4)?,
            kind: r.get(5)?,
            labels: r.get(6)?,
            source: r.get(7)?,
            content_hash: r.get(8)?,
            version: r.get(9)?,
            pinned: r.get(10)?,
            locked: r.get(11)?,
            deleted: r.get(12)?,
            expires_ms: r.get(13)?,
            recall_count: r.get(14)?,
            last_recall_ms: r.get(15)?,
            created_ms: r.get(16)?,
            updated_ms: r.get(17)?,
        })
    }
}

/// [`set_guards`]' statement: a row `(0, the agent of a locked row, or
/// '')`, then `(1, pattern)` per blacklist pattern in order.
const SET_GUARDS: &str = "SELECT CAST(0 AS BIGINT) AS part, COALESCE(MIN(agent), '') AS value FROM memories \
     WHERE org = $1 AND namespace = $2 AND memory_key = $3 AND locked = 1 \
     UNION ALL \
     SELECT CAST(1 AS BIGINT), pattern FROM blacklist WHERE org = $1 AND namespace = $2 \
     ORDER BY part, value";

/// What a `memory.set` of `key` must respect, in one statement (on SQLite
/// every statement of a write is a round trip the other writes wait on):
/// the agent whose row of the key is locked, if any, and the namespace's
/// blacklist patterns in order.
pub async fn set_guards(
    conn: &mut AnyConnection,
    cx: &OpCx,
    key: &str,
) -> OpResult<(Option<String>, Vec<String>)> {
    let rows: Vec<(i64, String)> = sqlx::query_as(SET_GUARDS)
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(key)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
    Ok(guards(rows))
}

/// The agent whose row of `key` is locked, if any: a lock holds the key,
/// not one row of it, for every change but lock and unlock.
pub async fn lock_holder(
    conn: &mut AnyConnection,
    cx: &OpCx,
    key: &str,
) -> OpResult<Option<String>> {
    let (holder,): (Option<String>,) = sqlx::query_as(
        "SELECT MIN(agent) FROM memories \
         WHERE org = $1 AND namespace = $2 AND memory_key = $3 AND locked = 1",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(key)
    .fetch_one(conn)
    .await
    .map_err(db_error)?;
    Ok(holder)
}

/// The advisory lock key of a namespace's blacklist on PostgreSQL: a
/// content write holds it shared from before it reads the patterns until
/// it commits, and blacklist.add holds it alone, so a pattern and its
/// sweep never fall between a write's check and its commit.
const BLACKLIST_LOCK_KEY: &str = "hashtextextended('loom.blacklist/' || $1 || '/' || $2, 0)";

/// Holds the namespace's blacklist for a write of content (`exclusive`:
/// for blacklist.add) until the transaction ends, on PostgreSQL, whose
/// writes run side by side. SQLite's writes run one at a time already.
pub async fn hold_blacklist(
    conn: &mut AnyConnection,
    store: &Store,
    cx: &OpCx,
    exclusive: bool,
) -> OpResult<()> {
    if store.backend() != Backend::Postgres {
        return Ok(());
    }
    static SHARED: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT CAST(1 AS BIGINT) FROM (SELECT pg_advisory_xact_lock_shared({BLACKLIST_LOCK_KEY})) AS held"
        )
    });
    static EXCLUSIVE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT CAST(1 AS BIGINT) FROM (SELECT pg_advisory_xact_lock({BLACKLIST_LOCK_KEY})) AS held"
        )
    });
    let sql = if exclusive { &EXCLUSIVE } else { &SHARED };
    sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Holds every row of `key` until the write's transaction ends, on
/// PostgreSQL: two writes that each check the key's lock before taking it
/// run one after the other, so the second sees the first's lock. On
/// SQLite writes run one at a time already.
///
/// The rows are taken in agent order, as `memory.apply` takes its rows
/// (by key, then agent): taken in the index's order, which an update of a
/// row changes, two lockers of one key could each hold a row the other
/// waited for, and PostgreSQL ended one of them as a deadlock.
pub async fn hold_key(
    conn: &mut AnyConnection,
    store: &Store,
    cx: &OpCx,
    key: &str,
) -> OpResult<()> {
    if store.backend() == Backend::Postgres {
        sqlx::query(
            "SELECT 1 FROM memories WHERE org = $1 AND namespace = $2 AND memory_key = $3 \
             ORDER BY agent FOR UPDATE",
        )
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(key)
        .execute(conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// The keys of the namespace a row of which is locked (what
/// `memory.apply` keeps, whichever agent's rows its filter matched): read
/// through the partial index of locked rows (migration 0020 on SQLite,
/// 0016 on PostgreSQL), not a walk of the namespace.
pub async fn locked_keys(
    conn: &mut AnyConnection,
    cx: &OpCx,
) -> OpResult<std::collections::HashSet<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT DISTINCT memory_key FROM memories WHERE org = $1 AND namespace = $2 AND locked = 1",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows.into_iter().map(|(k,)| k).collect())
}

/// [`SET_GUARDS`]' rows as (the lock's holder, the patterns).
fn guards(rows: Vec<(i64, String)>) -> (Option<String>, Vec<String>) {
    let mut holder = None;
    let mut patterns = Vec::new();
    for (part, value) in rows {
        match part {
            0 => holder = Some(value).filter(|agent| !agent.is_empty()),
            _ => patterns.push(value),
        }
    }
    (holder, patterns)
}

/// What `memory.set` reads before it writes: whether the key is locked,
/// the blacklist's patterns and the caller's own row ([`set_guards`] and
/// [`own`] in a write, [`set_view_inline`] on the calling thread).
pub struct SetView {
    /// The agent whose row of the key is locked, if any.
    pub locked_by: Option<String>,
    /// The namespace's blacklist patterns, in order.
    pub patterns: Vec<String>,
    /// The caller's own row, deleted or not, and its id (`memories.id`),
    /// which a one-step write finds it by ([`save_in_one_step`]).
    pub own: Option<(Row, i64)>,
}

/// The key's rows in the namespace, every agent's, deleted or not
/// (`memories_by_key`): [`set_view_inline`]'s locks and own row at once.
static KEY_ROWS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS}, id FROM memories WHERE org = $1 AND namespace = $2 AND memory_key = $3"
    )
});

/// The namespace's blacklist patterns in order (its primary key's).
const PATTERNS: &str =
    "SELECT pattern FROM blacklist WHERE org = $1 AND namespace = $2 ORDER BY pattern";

/// [`SetView`] as point reads on the calling thread, in the one read
/// snapshot [`Store::read_inline`] runs its reads in (SQLite), handed to
/// `then` with the connection, for what a write planned on the view asks
/// of SQLite ([`fts_tokens`]) in the same read; `None` where there are
/// none. What it reads is committed; a group's writes not yet committed
/// are not among it, so a write planned on it must be conditional
/// ([`insert_in_one_step`], [`save_in_one_step`]).
///
/// The key's locks and the caller's row come from one walk of
/// `memories_by_key` ([`KEY_ROWS`]), not a count of the locked rows and a
/// second walk of the primary key for the caller's row: under writes
/// every commit empties a reader's page cache, so each B-tree these reads
/// walk is pages fetched again (bench/RESULTS.md, "Changes after
/// 1a459e9").
pub fn set_view_inline<T>(
    store: &Store,
    cx: &OpCx,
    key: &str,
    then: impl FnOnce(&rusqlite::Connection, SetView) -> T,
) -> Option<OpResult<T>> {
    store.read_inline(|conn| {
        let (org, namespace) = (&cx.scope.org, &cx.scope.namespace);
        let rows = all_rows(conn, &KEY_ROWS, &[org, namespace, &key], |r| {
            Ok((Row::from_sqlite(r)?, r.get::<_, i64>(18)?))
        })?;
        let patterns = all_rows(conn, PATTERNS, &[org, namespace], |r| r.get(0))?;
        let locked_by = rows
            .iter()
            .filter(|(r, _)| r.locked != 0)
            .map(|(r, _)| r.agent.clone())
            .min();
        let own = rows.into_iter().find(|(r, _)| r.agent == cx.scope.agent);
        let view = SetView {
            locked_by,
            patterns,
            own,
        };
        Ok(then(conn, view))
    })
}

/// The new row's columns in `memories`, for [`insert`] and [`insert_args`].
const INSERT_COLUMNS: &str = "org, namespace, agent, memory_key, content, kind, labels, source, \
     content_hash, version, pinned, locked, deleted, expires_ms, recall_count, created_ms, updated_ms, \
     run_id";
/// [`INSERT_COLUMNS`]' values, by [`insert_args`]' parameters; the run is
/// `$18`, [`with_snapshot`]'s second parameter from `$17`.
const INSERT_VALUES: &str =
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 0, $15, $16, $18";
/// What SQLite's memories keep besides [`INSERT_COLUMNS`]: the row's size
/// for search (`fts_tokens`, migration 0017), counted by SQLite from the
/// key ($4), content ($5) and labels ($7) the row is written with.
const INSERT_TOKENS: &str = "loom_fts_tokens($4, $5, $7)";
/// The size for search of the text an update writes, key ($15), content
/// ($1) and labels ($3), counted by SQLite.
const UPDATE_TOKENS: &str = "loom_fts_tokens($15, $1, $3)";
/// A one-step write's size for search: counted before the write, on the
/// calling thread ([`fts_tokens`]), and bound after its other
/// parameters, as no SQL function may be called in one
/// ([`crate::store::one_step_sql`]).
const ONE_STEP_TOKENS: &str = "$22";
/// [`save_in_one_step`]'s row found by its id (`$23`, from the
/// [`SetView`]) rather than by its key through the table's unique index:
/// two index searches fewer a write. `memories.id` is `AUTOINCREMENT`, so
/// an id names one row for good; the key is still checked.
const ONE_STEP_ROW: &str = "id = $23 AND ";
/// The audit row's first parameter in [`insert_in_one_step`], after the
/// size for search.
const INSERT_AUDIT_FROM: usize = 23;
/// The audit row's first parameter in [`save_in_one_step`], after the size
/// for search and the row's id.
const SAVE_AUDIT_FROM: usize = 24;

/// The new row's columns and their values, for `backend`; on SQLite with
/// its size for search, `tokens` ([`INSERT_TOKENS`], [`ONE_STEP_TOKENS`]).
fn insert_columns_values(backend: Backend, tokens: &str) -> (String, String) {
    match backend {
        Backend::Sqlite => (
            format!("{INSERT_COLUMNS}, fts_tokens"),
            format!("{INSERT_VALUES}, {tokens}"),
        ),
        Backend::Postgres => (INSERT_COLUMNS.to_owned(), INSERT_VALUES.to_owned()),
    }
}

/// The row at its new version, by [`insert_args`]' parameters.
const INSERTED: &str =
    "org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4 AND version = $10";

/// Inserts a new row at version 1, with its snapshot; false when a row for
/// the key appeared meanwhile.
pub async fn insert(conn: &mut AnyConnection, cx: &OpCx, row: &Row) -> OpResult<bool> {
    fn sql(backend: Backend) -> String {
        let (columns, values) = insert_columns_values(backend, INSERT_TOKENS);
        let insert = format!(
            "INSERT INTO memories ({columns}) VALUES ({values}) \
             ON CONFLICT (org, namespace, agent, memory_key) DO NOTHING"
        );
        with_snapshot(backend, &insert, INSERTED, 17)
    }
    static SQL: PerBackend = PerBackend::new(|| sql(Backend::Sqlite), || sql(Backend::Postgres));
    let done = snapshot_args(
        insert_args(sqlx::query(SQL.get(Backend::of(conn))), row),
        cx,
        "create",
    )
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() > 0)
}

/// Binds `row`'s columns as `$1` … `$16` ([`INSERT_VALUES`]).
fn insert_args<'q, B: Bind<'q>>(query: B, row: &'q Row) -> B {
    query
        .arg(&row.org)
        .arg(&row.namespace)
        .arg(&row.agent)
        .arg(&row.memory_key)
        .arg(&row.content)
        .arg(&row.kind)
        .arg(&row.labels)
        .arg(&row.source)
        .arg(&row.content_hash)
        .arg(row.version)
        .arg(row.pinned)
        .arg(row.locked)
        .arg(row.deleted)
        .arg(row.expires_ms)
        .arg(row.created_ms)
        .arg(row.updated_ms)
}

/// [`save`]'s change of the row, by [`save_args`]' parameters; the run is
/// `$18`, as in [`INSERT_VALUES`]. A row written over while deleted or
/// expired (at `$11`, the write's time) is a new memory: its recalls and
/// its creation start again with it. On SQLite it also keeps the row's size
/// for search, `tokens` ([`UPDATE_TOKENS`], [`ONE_STEP_TOKENS`]), taken
/// only when the text changes (or was never counted): a pin or a lock
/// keeps it. `more` sets further columns (`, column = value`); `row` comes
/// first in the row's condition ([`ONE_STEP_ROW`], or nothing).
fn update_sql(backend: Backend, tokens: &str, more: &str, row: &str) -> String {
    let size = match backend {
        Backend::Sqlite => format!(
            ", fts_tokens = CASE WHEN fts_tokens IS NOT NULL AND content IS $1 AND labels IS $3 \
             THEN fts_tokens ELSE {tokens} END"
        ),
        Backend::Postgres => String::new(),
    };
    format!(
        "UPDATE memories SET content = $1, kind = $2, labels = $3, source = $4, \
         content_hash = $5, version = $6, pinned = $7, locked = $8, deleted = $9, expires_ms = $10, \
         updated_ms = $11, run_id = $18, {REVIVED}{size}{more} \
         WHERE {row}org = $12 AND namespace = $13 AND agent = $14 AND memory_key = $15 \
         AND version = $16"
    )
}

/// [`update_sql`]'s columns that start again when the row written over
/// was dead (SQLite and PostgreSQL both read the old row's values on the
/// right of `SET`). Its creation is the write's time, and always later
/// than the dead one's: `created_ms` tells the two memories' recalls
/// apart ([`same_life`]), even two made in one millisecond.
const REVIVED: &str = "\
    recall_count = CASE WHEN deleted = 1 OR expires_ms <= $11 THEN 0 ELSE recall_count END, \
    last_recall_ms = CASE WHEN deleted = 1 OR expires_ms <= $11 THEN NULL ELSE last_recall_ms END, \
    created_ms = CASE WHEN deleted = 1 OR expires_ms <= $11 \
      THEN CASE WHEN $11 > created_ms THEN $11 ELSE created_ms + 1 END ELSE created_ms END";

/// The row at its new version, by [`save_args`]' parameters.
const UPDATED: &str =
    "org = $12 AND namespace = $13 AND agent = $14 AND memory_key = $15 AND version = $6";

/// Writes `new` over the row if it is still at `read_version`, with
/// `new.version` = `read_version` + 1, and its snapshot. False when another
/// change got there first.
pub async fn save(
    conn: &mut AnyConnection,
    cx: &OpCx,
    read_version: i64,
    new: &Row,
    change: &str,
) -> OpResult<bool> {
    static SQL: PerBackend = PerBackend::new(sqlite_save, || {
        with_snapshot(
            Backend::Postgres,
            &update_sql(Backend::Postgres, "", "", ""),
            UPDATED,
            17,
        )
    });
    let query = sqlx::query(SQL.get(Backend::of(conn)));
    let done = snapshot_args(save_args(query, read_version, new), cx, change)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected() > 0)
}

/// Binds `new` over the row at `read_version` as `$1` … `$16` ([`update_sql`]).
fn save_args<'q, B: Bind<'q>>(query: B, read_version: i64, new: &'q Row) -> B {
    query
        .arg(&new.content)
        .arg(&new.kind)
        .arg(&new.labels)
        .arg(&new.source)
        .arg(&new.content_hash)
        .arg(read_version + 1)
        .arg(new.pinned)
        .arg(new.locked)
        .arg(new.deleted)
        .arg(new.expires_ms)
        .arg(new.updated_ms)
        .arg(&new.org)
        .arg(&new.namespace)
        .arg(&new.agent)
        .arg(&new.memory_key)
        .arg(read_version)
}

/// A statement that returns a row when no agent's row of the key (`$org`,
/// `$namespace`, `$key`) is locked and no blacklist pattern of the
/// namespace matches `$content`: the guard that starts the chain of a write
/// planned on a [`SetView`], checked where it lands (a lock or a pattern
/// added since the view was read stops the write, and the caller takes the
/// path that reads under the writer and says why). The patterns are
/// matched by the direct writer's SQL function
/// ([`crate::blacklist::pattern::SQL_FUNCTION`]): a `SELECT` writes
/// nothing, so calling it costs no statement journal, as it would inside
/// the write ([`crate::store::one_step_sql`]).
fn none_held(org: &str, namespace: &str, key: &str, content: &str) -> String {
    format!(
        "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM memories AS held WHERE held.org = {org} \
         AND held.namespace = {namespace} AND held.memory_key = {key} AND held.locked = 1) \
         AND NOT EXISTS (SELECT 1 FROM blacklist AS bl WHERE bl.org = {org} \
         AND bl.namespace = {namespace} AND {}(bl.pattern, {content}))",
        crate::blacklist::pattern::SQL_FUNCTION
    )
}

/// [`insert`] as the call's whole write, in one step on SQLite
/// ([`Store::write_in_one_step`]), with the audit row. False, and nothing
/// written, also when any agent's row of the key is locked or a blacklist
/// pattern matches ([`none_held`]): the caller then takes the path that
/// reads under the writer and says why. `tokens` is the row's size for
/// search ([`fts_tokens`]; `None` leaves it to be counted when the row is
/// handed to the full-text index).
pub async fn insert_in_one_step(
    store: &Store,
    cx: &OpCx,
    row: &Row,
    tokens: Option<i64>,
) -> OpResult<bool> {
    let values = snapshot_args(insert_args(Values::default(), row), cx, "create").arg(tokens);
    store
        .write_in_one_step(cx, &INSERT_IN_ONE_STEP, values)
        .await
}

/// [`insert_in_one_step`]'s statements.
static INSERT_IN_ONE_STEP: LazyLock<OneStep> = LazyLock::new(|| {
    let (columns, values) = insert_columns_values(Backend::Sqlite, ONE_STEP_TOKENS);
    let guard = none_held("$1", "$2", "$4", "$5");
    let insert = format!(
        "INSERT INTO memories ({columns}) VALUES ({values}) \
         ON CONFLICT (org, namespace, agent, memory_key) DO NOTHING"
    );
    let snapshot = snapshot_of("memories", &format!(" WHERE {INSERTED}"), 17);
    one_step_sql(&format!("{guard}; {insert}; {snapshot}"), INSERT_AUDIT_FROM)
});

/// [`save`] as the call's whole write, in one step on SQLite, as
/// [`insert_in_one_step`]: of the row `id` ([`SetView::own`]) at
/// `read_version`.
pub async fn save_in_one_step(
    store: &Store,
    cx: &OpCx,
    (id, read_version): (i64, i64),
    new: &Row,
    change: &str,
    tokens: Option<i64>,
) -> OpResult<bool> {
    let values = snapshot_args(save_args(Values::default(), read_version, new), cx, change)
        .arg(tokens)
        .arg(id);
    store.write_in_one_step(cx, &SAVE_IN_ONE_STEP, values).await
}

/// [`save_in_one_step`]'s statements.
static SAVE_IN_ONE_STEP: LazyLock<OneStep> = LazyLock::new(|| {
    let guard = none_held("$12", "$13", "$15", "$1");
    // The version just inserted has the table's largest row id (SQLite
    // gives a new row the largest plus one): `last_insert_rowid()` without
    // a function call.
    let update = update_sql(
        Backend::Sqlite,
        ONE_STEP_TOKENS,
        ", history = (SELECT MAX(rowid) FROM memory_versions)",
        ONE_STEP_ROW,
    );
    one_step_sql(
        &format!("{guard}; {}; {update}", save_version(ONE_STEP_ROW)),
        SAVE_AUDIT_FROM,
    )
});

/// The size for search (`memories.fts_tokens`) of the text `row` is
/// written with, counted on `conn` as SQLite counts it (`loom_fts_tokens`,
/// loom-fts5), for a one-step write, on the calling thread in the read it
/// was planned on ([`set_view_inline`]): the direct writer's thread, which
/// every write waits for, is spared the tokenizing. `None` where it could
/// not be counted: the row is then counted when it is handed to the
/// full-text index (migration 0017's `unsized`).
pub fn fts_tokens(conn: &rusqlite::Connection, row: &Row) -> Option<i64> {
    const COUNT: &str = "SELECT loom_fts_tokens(?1, ?2, ?3)";
    let counted = conn.prepare_cached(COUNT).and_then(|mut count| {
        count.query_row([&row.memory_key, &row.content, &row.labels], |r| r.get(0))
    });
    counted
        .inspect_err(
            |e| tracing::debug!(error = %e, "a memory's size for search is left to the index"),
        )
        .ok()
}

/// The `VERSION_CONFLICT` refusal, naming the version now current.
pub async fn conflict(conn: &mut AnyConnection, row: &Row, expected: i64) -> OpResult<LoomError> {
    let current: Option<(i64,)> = sqlx::query_as(
        "SELECT version FROM memories WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4",
    )
    .bind(&row.org)
    .bind(&row.namespace)
    .bind(&row.agent)
    .bind(&row.memory_key)
    .fetch_optional(conn)
    .await
    .map_err(db_error)?;
    let current = current.map_or(row.version, |(v,)| v);
    Ok(version_conflict(&row.memory_key, expected, current))
}

/// `VERSION_CONFLICT` with `current_version`.
pub fn version_conflict(key: &str, expected: i64, current: i64) -> LoomError {
    LoomError::new(
        ErrorCode::VersionConflict,
        format!("{key} is at version {current}, not {expected}; re-read it and retry"),
    )
    .with_detail("memory_key", key)
    .with_detail("expected_version", expected)
    .with_detail("current_version", current)
}

/// `write` (an INSERT or UPDATE of one `memories` row, whose parameters
/// end at `$next - 1`; `written` names that row by them) followed by the
/// `memory_versions` snapshot of the row it wrote, as one round trip: on
/// SQLite each statement is a trip to the writer connection's thread that
/// every other write waits behind. The snapshot is taken from the written
/// row itself, only when `write` changed one, so rows affected is 0 when it
/// did not. PostgreSQL: one statement (the write in a CTE, `RETURNING` the
/// row). SQLite: two, the snapshot guarded by `changes()` (the rows the
/// write itself changed, the full-text triggers not counted). Parameters
/// `$next` on: the change, the run, the subject, the agent acting and the
/// request ([`snapshot_args`]). The run is the write's to store on the row
/// (`memories.run_id`, which `memory.get` answers); the snapshot copies it
/// from there, so the two never differ.
///
/// On SQLite this writes a new memory (a change of one is [`sqlite_save`]):
/// its first version names none before it, and the chain's trigger
/// (migration 0019) names it the row's newest.
fn with_snapshot(backend: Backend, write: &str, written: &str, next: usize) -> String {
    let run = next + 1;
    assert!(
        write.contains(&format!("run_id = ${run}")) || write.contains(&format!(", ${run}")),
        "the write must store the run (${run}) on the row"
    );
    if backend == Backend::Postgres {
        format!(
            "WITH written AS ({write} RETURNING *) {}",
            snapshot_of("written", "", next)
        )
    } else {
        format!(
            "{write}; {}",
            snapshot_of(
                "memories",
                &format!(" WHERE {written} AND changes() = 1"),
                next
            )
        )
    }
}

/// [`with_snapshot`]'s snapshot: the `memory_versions` row of the written
/// row, read from `from` (with `guard`), parameters `$next` on.
fn snapshot_of(from: &str, guard: &str, next: usize) -> String {
    let (change, subject, by, request) = (next, next + 2, next + 3, next + 4);
    format!(
        "INSERT INTO memory_versions ({WRITTEN_VERSION_COLUMNS}) \
         SELECT org, namespace, agent, memory_key, version, ${change}, content, kind, labels, source, \
         content_hash, pinned, locked, deleted, expires_ms, run_id, ${subject}, ${by}, ${request}, \
         updated_ms FROM {from}{guard}"
    )
}

/// A `memory_versions` row's columns as a write gives them.
const WRITTEN_VERSION_COLUMNS: &str = "org, namespace, agent, memory_key, version, change, content, kind, \
     labels, source, content_hash, pinned, locked, deleted, expires_ms, run_id, subject, changed_by, \
     request_id, at_ms";

/// [`save`] on SQLite, by [`save_args`]' and [`snapshot_args`]' parameters
/// ([`with_snapshot`]'s, from `$17`): the new version first
/// ([`save_version`]), then the row, which takes the version's row id as
/// its newest in the same write, only when the version was written
/// (`changes()`). [`save_in_one_step`] writes the same two, chained.
///
/// Why this order: with the row written first, the version was read back
/// from it, and the chain's trigger (migration 0018) then wrote the row a
/// second time to name the version its newest. A version Loom links
/// itself is left alone by the trigger (migration 0019).
fn sqlite_save() -> String {
    format!(
        "{}; {} AND changes() = 1",
        save_version(""),
        update_sql(
            Backend::Sqlite,
            UPDATE_TOKENS,
            ", history = last_insert_rowid()",
            ""
        )
    )
}

/// [`sqlite_save`]'s new version, made from the parameters and linked to
/// the row's newest (`history`), written only while the row is at `$16`;
/// `row` comes first in the row's condition, as in [`update_sql`].
fn save_version(row: &str) -> String {
    format!(
        "INSERT INTO memory_versions ({WRITTEN_VERSION_COLUMNS}, prev) \
         SELECT $12, $13, $14, $15, $6, $17, $1, $2, $3, $4, $5, $7, $8, $9, $10, $18, $19, $20, \
         $21, $11, history FROM memories \
         WHERE {row}org = $12 AND namespace = $13 AND agent = $14 AND memory_key = $15 \
         AND version = $16"
    )
}

/// Binds [`with_snapshot`]'s trailing parameters.
fn snapshot_args<'q, B: Bind<'q>>(query: B, cx: &'q OpCx, change: &'q str) -> B {
    query
        .arg(change)
        .arg(cx.run_id.as_deref())
        .arg(&cx.caller.subject)
        .arg(&cx.scope.agent)
        .arg(&cx.request_id)
}

/// A `memory_versions` row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct VersionRow {
    pub version: i64,
    pub change: String,
    pub content: String,
    pub kind: String,
    pub labels: String,
    pub source: String,
    pub content_hash: String,
    pub pinned: i64,
    pub locked: i64,
    pub deleted: i64,
    pub expires_ms: Option<i64>,
    pub run_id: Option<String>,
    pub changed_by: String,
    pub at_ms: i64,
}

const VERSION_COLUMNS: &str = "version, change, content, kind, labels, source, content_hash, pinned, locked, \
     deleted, expires_ms, run_id, changed_by, at_ms";

impl VersionRow {
    /// The API shape.
    pub fn to_version(&self) -> MemoryVersion {
        MemoryVersion {
            version: self.version,
            change: self.change.clone(),
            content: self.content.clone(),
            kind: self.kind.clone(),
            labels: labels_from_json(&self.labels),
            pinned: self.pinned != 0,
            locked: self.locked != 0,
            deleted: self.deleted != 0,
            content_hash: self.content_hash.clone(),
            changed_by: self.changed_by.clone(),
            run_id: self.run_id.clone(),
            at: rfc3339(self.at_ms),
        }
    }
}

/// Versions of one row below `before`, newest first.
pub async fn versions(
    conn: &mut AnyConnection,
    row: &Row,
    before: i64,
    limit: i64,
) -> OpResult<Vec<VersionRow>> {
    fn sql(backend: Backend) -> String {
        match backend {
            // The chain walked back only until it has the page.
            Backend::Sqlite => format!(
                "{}SELECT {VERSION_COLUMNS} FROM chain JOIN memory_versions v ON v.rowid = chain.vid \
                 WHERE v.version < $5 ORDER BY v.version DESC LIMIT $6",
                chain::chain(chain::ONE_MEMORY, "v.version < $5", Some("$6"))
            ),
            Backend::Postgres => format!(
                "SELECT {VERSION_COLUMNS} FROM memory_versions \
                 WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4 AND version < $5 \
                 ORDER BY version DESC LIMIT $6"
            ),
        }
    }
    static SQL: PerBackend = PerBackend::new(|| sql(Backend::Sqlite), || sql(Backend::Postgres));
    sqlx::query_as::<_, VersionRow>(SQL.get(Backend::of(conn)))
        .bind(&row.org)
        .bind(&row.namespace)
        .bind(&row.agent)
        .bind(&row.memory_key)
        .bind(before)
        .bind(limit)
        .fetch_all(conn)
        .await
        .map_err(db_error)
}

/// The version of `key` current at `at_ms`: the caller's row if it was
/// live then, else the newest of any agent's live then, as a read without
/// `as_of` picks among the rows live now; when none was, the caller's (or
/// the newest) version of then, deleted or expired.
pub async fn version_at(
    conn: &mut AnyConnection,
    cx: &OpCx,
    explicit_agent: bool,
    key: &str,
    at_ms: i64,
) -> OpResult<Option<(String, VersionRow)>> {
    #[derive(sqlx::FromRow)]
    struct Hit {
        agent: String,
        version: i64,
        /// SQLite: the row id of the version the chain's walk found, read
        /// by it below rather than walked to again; NULL on PostgreSQL.
        vid: Option<i64>,
    }
    fn sql(backend: Backend) -> String {
        match backend {
            // Each agent's row's chain, walked back to its first version
            // of then.
            Backend::Sqlite => format!(
                "{}SELECT v.agent AS agent, v.version AS version, v.rowid AS vid FROM chain \
                 JOIN memory_versions v ON v.rowid = chain.vid WHERE v.at_ms <= $4 \
                 ORDER BY CASE WHEN v.agent = $6 THEN 0 ELSE 1 END, v.at_ms DESC, v.agent",
                chain::chain(
                    "m.org = $1 AND m.namespace = $2 AND m.memory_key = $3 AND ($5 = 0 OR m.agent = $6)",
                    "v.at_ms <= $4",
                    Some("1")
                )
            ),
            Backend::Postgres => {
                "SELECT agent, MAX(version) AS version, CAST(NULL AS BIGINT) AS vid \
                 FROM memory_versions \
                 WHERE org = $1 AND namespace = $2 AND memory_key = $3 AND at_ms <= $4 \
                 AND ($5 = 0 OR agent = $6) GROUP BY agent \
                 ORDER BY CASE WHEN agent = $6 THEN 0 ELSE 1 END, MAX(at_ms) DESC, agent"
                    .to_owned()
            }
        }
    }
    static SQL: PerBackend = PerBackend::new(|| sql(Backend::Sqlite), || sql(Backend::Postgres));
    // One version an agent: the caller's first, then the newest.
    let hits: Vec<Hit> = sqlx::query_as(SQL.get(Backend::of(conn)))
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(key)
        .bind(at_ms)
        .bind(i64::from(explicit_agent))
        .bind(&cx.scope.agent)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
    static BY_ROWID: LazyLock<String> =
        LazyLock::new(|| format!("SELECT {VERSION_COLUMNS} FROM memory_versions WHERE rowid = $1"));
    static BY_KEY: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {VERSION_COLUMNS} FROM memory_versions \
             WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4 AND version = $5"
        )
    });
    let mut first = None;
    for hit in hits {
        let query = match hit.vid {
            Some(vid) => sqlx::query_as::<_, VersionRow>(BY_ROWID.as_str()).bind(vid),
            None => sqlx::query_as::<_, VersionRow>(BY_KEY.as_str())
                .bind(&cx.scope.org)
                .bind(&cx.scope.namespace)
                .bind(&hit.agent)
                .bind(key)
                .bind(hit.version),
        };
        let row = query.fetch_one(&mut *conn).await.map_err(db_error)?;
        if row.deleted == 0 && row.expires_ms.is_none_or(|e| e > at_ms) {
            return Ok(Some((hit.agent, row)));
        }
        first.get_or_insert((hit.agent, row));
    }
    Ok(first)
}

/// Inserts one `memory_exposures` row per serving.
pub async fn insert_exposures(conn: &mut AnyConnection, served: &[Served]) -> OpResult<()> {
    crate::store::execute_chunked(conn, served, 11, insert_exposures_sql, |q, s| {
        q.bind(&s.org)
            .bind(&s.namespace)
            .bind(&s.agent)
            .bind(&s.memory_key)
            .bind(s.version)
            .bind(&s.served_to)
            .bind(&s.subject)
            .bind(s.op)
            .bind(s.run_id.as_deref())
            .bind(&s.request_id)
            .bind(s.at_ms)
    })
    .await
}

/// One row's recalls: its `id`, its coordinates, when it was created, how
/// many, the latest.
pub type Recall<'a> = (i64, (&'a str, &'a str, &'a str, &'a str), i64, i64, i64);

/// A `memory_exposures` row's columns, as both writes of the usage log
/// bind them.
const EXPOSURE_COLUMNS: &str = "org, namespace, agent, memory_key, version, served_to, subject, op, \
     run_id, request_id, at_ms";

/// What a recall count's update sets: `n` more recalls, the latest at
/// `last_ms` (SQL expressions).
fn add_recall(n: &str, last_ms: &str) -> String {
    format!(
        "recall_count = recall_count + {n}, \
         last_recall_ms = CASE WHEN memories.last_recall_ms IS NULL OR memories.last_recall_ms < {last_ms} \
           THEN {last_ms} ELSE memories.last_recall_ms END"
    )
}

/// The row recalled, created at `born_ms`, is still the one stored: a
/// memory set again after a delete is created anew ([`REVIVED`]), and the
/// recalls of the deleted one still queued then are not its own.
fn same_life(born_ms: &str) -> String {
    format!("memories.created_ms = {born_ms}")
}

/// How an exposure count is added to the one stored.
const ADD_EXPOSURE_COUNT: &str = "ON CONFLICT (org, namespace, agent, memory_key, served_to) \
     DO UPDATE SET n = memory_exposure_counts.n + excluded.n";

/// The exposures' insert of the `VALUES` rows `values`, on either path.
fn insert_exposures_sql(values: &str) -> String {
    format!("INSERT INTO memory_exposures ({EXPOSURE_COLUMNS}) VALUES {values}")
}

/// The exposure counts' upsert of the `VALUES` rows `values`.
fn add_exposure_counts_sql(values: &str) -> String {
    format!(
        "INSERT INTO memory_exposure_counts (org, namespace, agent, memory_key, served_to, n) \
         VALUES {values} {ADD_EXPOSURE_COUNT}"
    )
}

/// The usage log's batch on SQLite's direct writer ([`insert_exposures`],
/// [`add_exposure_counts`] and [`add_recalls`] in one write): the inserts a
/// statement per chunk of rows (`store::multirow` says why), the recall
/// counts a statement per row.
pub(crate) fn write_usage_direct(
    conn: &rusqlite::Connection,
    served: &[Served],
    seen: &[Seen<'_>],
    recalls: &[Recall<'_>],
) -> rusqlite::Result<usize> {
    use crate::store::execute_chunked_direct;
    use rusqlite::types::ValueRef;
    execute_chunked_direct(conn, served, insert_exposures_sql, |s| {
        [
            ValueRef::from(s.org.as_str()),
            ValueRef::from(s.namespace.as_str()),
            ValueRef::from(s.agent.as_str()),
            ValueRef::from(s.memory_key.as_str()),
            ValueRef::Integer(s.version),
            ValueRef::from(s.served_to.as_str()),
            ValueRef::from(s.subject.as_str()),
            ValueRef::from(s.op),
            ValueRef::from(s.run_id.as_deref()),
            ValueRef::from(s.request_id.as_str()),
            ValueRef::Integer(s.at_ms),
        ]
    })?;
    execute_chunked_direct(
        conn,
        seen,
        add_exposure_counts_sql,
        |((org, namespace, agent, key, served_to), n)| {
            [
                ValueRef::from(*org),
                ValueRef::from(*namespace),
                ValueRef::from(*agent),
                ValueRef::from(*key),
                ValueRef::from(*served_to),
                ValueRef::Integer(*n),
            ]
        },
    )?;
    // A statement per row here: by its id, one descent of the table each.
    // As one `UPDATE … FROM (VALUES …)` per chunk (`add_recalls`) the
    // recalls cost SQLite half as much again (bench/instructions.sh): it
    // joins the chunk's rows to the table and collects what to change
    // before changing it.
    static RECALL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE memories SET {} WHERE id = ?1 AND org = ?2 AND namespace = ?3 \
             AND agent = ?4 AND memory_key = ?5 AND {}",
            add_recall("?7", "?8"),
            same_life("?6")
        )
    });
    let mut recall = conn.prepare_cached(&RECALL)?;
    for (id, (org, namespace, agent, key), born_ms, n, last_ms) in recalls {
        recall.execute(rusqlite::params![
            id, org, namespace, agent, key, born_ms, n, last_ms
        ])?;
    }
    Ok(served.len())
}

/// Adds each row's recalls to its `recall_count` and moves its
/// `last_recall_ms` forward, a statement per chunk of rows. One `UPDATE`
/// per row made a batch hundreds of round trips long, and the task driving
/// them took turns on the runtime's threads with the calls being served: on
/// 2 cores that alone made the p99 of memory.get five times its p50.
///
/// SQLite finds each row by its `id` (its rowid: one descent of the table,
/// not one of an index of four text columns and then the table), the
/// coordinates guarding against an id reused by a row deleted and written
/// again since; PostgreSQL does not index `id` and finds rows by key.
pub async fn add_recalls(conn: &mut AnyConnection, recalls: &[Recall<'_>]) -> OpResult<()> {
    let by_id = match Backend::of(conn) {
        Backend::Sqlite => "memories.id = v.id AND ",
        Backend::Postgres => "",
    };
    crate::store::execute_chunked(
        conn,
        recalls,
        8,
        |values| {
            format!(
                "WITH v (id, org, namespace, agent, memory_key, born_ms, n, last_ms) AS (VALUES {values}) \
                 UPDATE memories SET {} FROM v WHERE {by_id}memories.org = v.org AND memories.namespace = v.namespace \
                 AND memories.agent = v.agent AND memories.memory_key = v.memory_key AND {}",
                add_recall("v.n", "v.last_ms"),
                same_life("v.born_ms")
            )
        },
        |q, (id, (org, namespace, agent, key), born_ms, count, last_ms)| {
            q.bind(*id)
                .bind(*org)
                .bind(*namespace)
                .bind(*agent)
                .bind(*key)
                .bind(*born_ms)
                .bind(*count)
                .bind(*last_ms)
        },
    )
    .await
}

/// One row's exposures to one calling agent in a batch: (org, namespace,
/// agent, key, served_to), how many.
pub type Seen<'a> = ((&'a str, &'a str, &'a str, &'a str, &'a str), i64);

/// Adds to each row's exposure count per calling agent, a statement per
/// chunk of rows, in key order as the caller lists them.
pub async fn add_exposure_counts(conn: &mut AnyConnection, seen: &[Seen<'_>]) -> OpResult<()> {
    crate::store::execute_chunked(
        conn,
        seen,
        6,
        add_exposure_counts_sql,
        |q, ((org, namespace, agent, key, served_to), n)| {
            q.bind(*org)
                .bind(*namespace)
                .bind(*agent)
                .bind(*key)
                .bind(*served_to)
                .bind(*n)
        },
    )
    .await
}

/// Exposure counts of `row` per calling agent, most first.
pub async fn exposures_by_agent(
    conn: &mut AnyConnection,
    row: &Row,
) -> OpResult<Vec<(String, i64)>> {
    sqlx::query_as(
        "SELECT served_to, n FROM memory_exposure_counts \
         WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = $4 \
         ORDER BY n DESC, served_to",
    )
    .bind(&row.org)
    .bind(&row.namespace)
    .bind(&row.agent)
    .bind(&row.memory_key)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// A page of live rows in (key, agent) order after `after`.
pub async fn list(
    conn: &mut AnyConnection,
    cx: &OpCx,
    filter: &ListFilter<'_>,
    after: (&str, &str),
    limit: i64,
    now: i64,
) -> OpResult<Vec<Row>> {
    let mut sql = format!(
        "SELECT {COLUMNS} FROM memories WHERE org = $1 AND namespace = $2 AND deleted = 0 \
         AND (expires_ms IS NULL OR expires_ms > $3) \
         AND (memory_key > $4 OR (memory_key = $4 AND agent > $5))"
    );
    let mut binds: Vec<String> = Vec::new();
    let mut n = 6;
    let mut push = |sql: &mut String, clause: &str, value: String| {
        sql.push_str(&clause.replace('?', &format!("${n}")));
        binds.push(value);
        n += 1;
    };
    if let Some(agent) = filter.agent {
        push(&mut sql, " AND agent = ?", agent.to_owned());
    }
    if let Some(kind) = filter.kind {
        push(&mut sql, " AND kind = ?", kind.to_owned());
    }
    if let Some(prefix) = filter.key_prefix {
        push(
            &mut sql,
            " AND substr(memory_key, 1, length(?)) = ?",
            prefix.to_owned(),
        );
    }
    for label in filter.labels {
        // Labels are stored as a JSON array: the row holds the quoted label.
        // Not LIKE, which ignores case on SQLite (and not PostgreSQL): a
        // label is matched as written on both.
        let quoted = serde_json::Value::from(label.as_str()).to_string();
        push(&mut sql, " AND replace(labels, ?, '') <> labels", quoted);
    }
    if let Some(before) = filter.updated_before {
        push(
            &mut sql,
            " AND updated_ms < CAST(? AS BIGINT)",
            before.to_string(),
        );
    }
    sql.push_str(&format!(" ORDER BY memory_key, agent LIMIT ${n}"));
    if filter.for_update && Backend::of(conn) == Backend::Postgres {
        sql.push_str(" FOR UPDATE");
    }
    let mut q = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(sql))
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(now)
        .bind(after.0)
        .bind(after.1);
    for b in binds {
        q = q.bind(b);
    }
    q.bind(limit).fetch_all(conn).await.map_err(db_error)
}

/// Every live row the filter matches, in key order: [`list`] page by page
/// (`memory.apply`, the blacklist's sweep).
pub async fn list_all(
    conn: &mut AnyConnection,
    cx: &OpCx,
    filter: &ListFilter<'_>,
    now: i64,
) -> OpResult<Vec<Row>> {
    const PAGE: i64 = 500;
    let mut out: Vec<Row> = Vec::new();
    let mut after = (String::new(), String::new());
    loop {
        let page = list(conn, cx, filter, (&after.0, &after.1), PAGE, now).await?;
        let full = page.len() as i64 == PAGE;
        if let Some(last) = page.last() {
            after = (last.memory_key.clone(), last.agent.clone());
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

/// What [`list`] keeps.
#[derive(Debug, Default)]
pub struct ListFilter<'a> {
    /// Only this agent.
    pub agent: Option<&'a str>,
    /// Only this kind.
    pub kind: Option<&'a str>,
    /// Only keys with this prefix.
    pub key_prefix: Option<&'a str>,
    /// Rows carrying all these labels.
    pub labels: &'a [String],
    /// Rows last changed before this (ms).
    pub updated_before: Option<i64>,
    /// Hold the rows read until the transaction ends, so that a change
    /// planned on them cannot lose a race with a write of one (PostgreSQL;
    /// SQLite's one writer holds the whole store already).
    pub for_update: bool,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use loom_core::Services;

    use super::*;
    use crate::store::testing;

    /// A memory `deploy-notes` of agent `a`, at `version`.
    fn row(content: &str, version: i64) -> Row {
        Row {
            org: "default".into(),
            namespace: "default".into(),
            agent: "a".into(),
            memory_key: "deploy-notes".into(),
            content: content.into(),
            kind: "note".into(),
            labels: r#"["ops"]"#.into(),
            source: String::new(),
            content_hash: "h".into(),
            version,
            pinned: 0,
            locked: 0,
            deleted: 0,
            expires_ms: None,
            recall_count: 0,
            last_recall_ms: None,
            created_ms: version,
            updated_ms: version,
        }
    }

    /// One-step writes on SQLite's direct writer: the row takes the size
    /// for search counted on the calling thread, each write its version,
    /// linked to the one before, and its audit row; a write that lost its
    /// race (the key taken, the version moved on) writes nothing at all.
    #[tokio::test]
    async fn one_step_writes_chain_their_statements() {
        let test = testing::sqlite().await;
        let store = &test.store;
        // Each write a call of its own, audited.
        let cx = || {
            let mut cx = OpCx::new("memory.set", Arc::new(Services::default()));
            cx.audit = true;
            cx.scope.org = "default".into();
            cx.scope.namespace = "default".into();
            cx.scope.agent = "a".into();
            cx
        };

        // The size for search, counted as a one-step set counts it.
        let counted = |row: &Row| {
            store
                .read_inline(|c| Ok(fts_tokens(c, row)))
                .unwrap()
                .unwrap()
        };

        let first = row("the deploy window is friday", 1);
        // deploy, notes; the, deploy, window, is, friday; ops
        assert_eq!(counted(&first), Some(8));
        assert!(
            insert_in_one_step(store, &cx(), &first, Some(8))
                .await
                .unwrap()
        );
        assert!(
            !insert_in_one_step(store, &cx(), &first, Some(8))
                .await
                .unwrap()
        );

        let second = row("friday", 2);
        let tokens = counted(&second);
        assert_eq!(tokens, Some(4));
        let saved = cx();
        assert!(
            save_in_one_step(store, &saved, (1, 1), &second, "set", tokens)
                .await
                .unwrap()
        );
        assert!(saved.audited());
        let lost = cx();
        assert!(
            !save_in_one_step(store, &lost, (1, 1), &second, "set", tokens)
                .await
                .unwrap()
        );
        assert!(!lost.audited());

        let path = test.options.url.strip_prefix("sqlite://").unwrap();
        let conn = rusqlite::Connection::open(path).unwrap();
        let one = |sql: &str| -> String { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            one("SELECT version || ' ' || fts_tokens || ' ' || content FROM memories"),
            "2 4 friday"
        );
        assert_eq!(
            one(
                "SELECT group_concat(v.version || ':' || COALESCE(p.version, '-'), ' ') \
                 FROM memory_versions v LEFT JOIN memory_versions p ON p.rowid = v.prev"
            ),
            "1:- 2:1"
        );
        assert_eq!(
            one("SELECT CAST(v.version AS TEXT) FROM memories m \
                 JOIN memory_versions v ON v.rowid = m.history"),
            "2"
        );
        assert_eq!(one("SELECT CAST(COUNT(*) AS TEXT) FROM audit_log"), "2");
    }

    /// A one-step set's writes call no SQL function: SQLite would keep a
    /// statement journal for each (`crate::store::one_step_sql`). Only the
    /// guard that starts each, a `SELECT`, does.
    #[tokio::test]
    async fn one_step_writes_call_no_sql_function() {
        let test = testing::sqlite().await;
        for step in [&*INSERT_IN_ONE_STEP, &*SAVE_IN_ONE_STEP] {
            let mut writes = 0;
            for statement in step.statements().filter(|s| !s.starts_with("SELECT")) {
                let opcodes = test.opcodes(statement);
                assert!(
                    !opcodes
                        .iter()
                        .any(|op| op == "Function" || op == "PureFunc"),
                    "{statement}: {opcodes:?}"
                );
                writes += 1;
            }
            assert_eq!(writes, 3, "two writes and the audit row");
        }
    }

    /// A one-step save finds the caller's row by its id ([`ONE_STEP_ROW`]),
    /// both to copy it into its version and to write it.
    #[tokio::test]
    async fn a_one_step_save_finds_its_row_by_id() {
        let test = testing::sqlite().await;
        let writes: Vec<&str> = SAVE_IN_ONE_STEP
            .statements()
            .filter(|s| s.contains(" memories "))
            .filter(|s| !s.starts_with("SELECT"))
            .collect();
        assert_eq!(writes.len(), 2, "{writes:?}");
        for statement in writes {
            let plan = test.query_plan_unbound(statement);
            assert!(
                plan.iter()
                    .any(|s| s.starts_with("SEARCH memories USING INTEGER PRIMARY KEY")),
                "{statement}: {plan:?}"
            );
        }
    }
}
