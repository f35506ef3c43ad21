//! Memory search: lexical matching in the database (SQLite FTS5, PostgreSQL
//! full-text) re-ranked with recency, pins and recall counts.
//!
//! Only memories the query matches lexically are candidates, and the index
//! hands over a bounded set of them (see [`CANDIDATES`]): the newest rows
//! holding any term and, when those reach the bound, the newest holding
//! every term. When a query matches fewer rows than that bound, every match
//! is a candidate and the order below is exact. Candidates carry only what
//! ranks them; the rows of the page are loaded once ranked. Each candidate
//! gets
//!
//! ```text
//! score   = lexical + 0.25 × recency + 0.30 × pinned + 0.15 × recall
//! lexical = raw / (1 + raw)              raw = −bm25 (SQLite FTS5, key weighted 2, labels 0.5)
//!                                            or 10 × ts_rank (PostgreSQL), so lexical ∈ [0, 1)
//! recency = 0.5 ^ (days since last change / 30)      a 30-day half-life
//! pinned  = 1 when pinned, else 0
//! recall  = min(1, ln(1 + recall_count) / ln(101))   saturates at 100 recalls
//! ```
//!
//! `explain` returns these parts with each hit.

use std::collections::{HashMap, HashSet};

use loom_core::{OpCx, OpResult};
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::AnyConnection;

use super::store::{COLUMNS, Row};
use crate::store::{Backend, db_error, rfc3339};

/// Rows each retrieval pass takes from the full-text index, newest first,
/// before they are ranked in Rust.
///
/// Why a bound: scoring every lexical match is what made search slow. With
/// common words a 2-3 word query over 100,000 memories matches about a
/// third of them, and the database computed bm25 / ts_rank for each of
/// those ~36,000 rows, joined and sorted them (about 70 ms of CPU per query
/// on SQLite, 250 ms on PostgreSQL; seconds under load). Taking a bounded
/// number of rows in index order (FTS5 rowid, PostgreSQL's
/// `memories_by_update`) costs the same whatever the store's size. Why 200:
/// four times the largest page a caller may ask for (50), so recency, pins
/// and recall counts still have room to reorder what the text found; a pass
/// that matches fewer rows than this returns all of them, so small stores
/// rank exactly as an exhaustive scan would.
const CANDIDATES: i64 = 200;
const DAY_MS: f64 = 86_400_000.0;

/// Words too common to rank by.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "in",
    "is", "it", "of", "on", "or", "the", "to", "was", "we", "what", "when", "where", "which",
    "who", "why", "with",
];

/// The query's search terms: lowercase words of letters and digits, at most 16.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if w.is_empty() || STOPWORDS.contains(&w.as_str()) || out.contains(&w) {
            continue;
        }
        out.push(w);
        if out.len() == 16 {
            break;
        }
    }
    out
}

/// Why a hit ranked where it did.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ScoreParts {
    /// The database's own lexical score (−bm25 or 10 × ts_rank).
    pub raw_lexical: f64,
    /// raw / (1 + raw).
    pub lexical: f64,
    /// 0.5 ^ (days since last change / 30).
    pub recency: f64,
    /// 1 when pinned.
    pub pinned: f64,
    /// min(1, ln(1 + recall_count) / ln(101)).
    pub recall: f64,
}

/// One memory a search found.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryHit {
    /// The key.
    pub memory_key: String,
    /// The namespace.
    pub namespace: String,
    /// The agent holding the row.
    pub agent: String,
    /// The content.
    pub content: String,
    /// The kind.
    pub kind: String,
    /// Labels.
    pub labels: Vec<String>,
    /// The current version.
    pub version: i64,
    /// Pinned.
    pub pinned: bool,
    /// Last changed.
    pub updated_at: String,
    /// The rank score (higher first).
    pub score: f64,
    /// With explain: the parts of the score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<ScoreParts>,
}

/// What ranking needs of a lexical match; the page's rows are loaded
/// whole only once ranked ([`load`]), so the hundreds of candidates a
/// query weighs never carry their content out of the database.
#[derive(sqlx::FromRow)]
struct Candidate {
    id: i64,
    agent: String,
    memory_key: String,
    pinned: i64,
    recall_count: i64,
    updated_ms: i64,
    lex: f64,
}

/// Filters on the candidates.
#[derive(Debug, Default)]
pub struct SearchFilter<'a> {
    /// Another namespace of the org than the call's (search.query's fan-out).
    pub namespace: Option<&'a str>,
    /// Only this agent's rows.
    pub agent: Option<&'a str>,
    /// Only this kind.
    pub kind: Option<&'a str>,
}

/// Which rows a retrieval pass asks the index for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Rows holding every term: the best lexical matches, found even when
    /// the newest rows holding some term crowd them out of the other pass.
    All,
    /// Rows holding any term.
    Any,
}

/// The full-text query for `terms` joined by `pass`'s operator, in the
/// backend's syntax. Terms are letters and digits only ([`terms`]), and
/// they are quoted (FTS5) or handed to a parser that raises no syntax
/// errors (PostgreSQL), so no user text is ever read as query syntax.
fn match_expr(backend: Backend, terms: &[String], pass: Pass) -> String {
    match backend {
        // FTS5: a "string" is a phrase; `"` inside one is written `""`.
        Backend::Sqlite => terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(if pass == Pass::All { " AND " } else { " OR " }),
        // websearch_to_tsquery never raises a syntax error: words are ANDed,
        // `or` between them ORs.
        Backend::Postgres => terms
            .iter()
            .map(|t| t.replace('"', " "))
            .collect::<Vec<_>>()
            .join(if pass == Pass::All { " " } else { " or " }),
    }
}

/// The live memories of the namespace (the call's, or `filter.namespace`) that match `terms`, best first, at most `limit`.
pub async fn search(
    conn: &mut AnyConnection,
    backend: Backend,
    cx: &OpCx,
    terms: &[String],
    filter: &SearchFilter<'_>,
    limit: usize,
    now: i64,
) -> OpResult<Vec<(Row, ScoreParts)>> {
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = candidates(conn, backend, cx, terms, filter, Pass::Any, now).await?;
    // A full any-word pass may have left out older rows holding every word;
    // a short one already holds every match.
    if terms.len() > 1 && found.len() as i64 >= CANDIDATES {
        let mut seen: HashSet<i64> = found.iter().map(|c| c.id).collect();
        for c in candidates(conn, backend, cx, terms, filter, Pass::All, now).await? {
            if seen.insert(c.id) {
                found.push(c);
            }
        }
    }
    let mut ranked: Vec<(Candidate, ScoreParts, f64)> = found
        .into_iter()
        .map(|c| {
            let parts = parts(c.updated_ms, c.pinned != 0, c.recall_count, c.lex, now);
            let score = score(&parts);
            (c, parts, score)
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.2.total_cmp(&a.2)
            .then_with(|| a.0.memory_key.cmp(&b.0.memory_key))
            .then_with(|| a.0.agent.cmp(&b.0.agent))
    });
    ranked.truncate(limit);
    let keys: Vec<(&str, &str)> = ranked
        .iter()
        .map(|(c, _, _)| (c.agent.as_str(), c.memory_key.as_str()))
        .collect();
    let namespace = filter.namespace.unwrap_or(&cx.scope.namespace);
    let mut rows = load(conn, &cx.scope.org, namespace, &keys, now).await?;
    // In rank order; a row deleted or expired since it was ranked is left out.
    Ok(ranked
        .into_iter()
        .filter_map(|(c, parts, _)| {
            rows.remove(&(c.agent, c.memory_key))
                .map(|row| (row, parts))
        })
        .collect())
}

/// The live rows of these (agent, key) pairs in the namespace, found by
/// primary key on both backends.
async fn load(
    conn: &mut AnyConnection,
    org: &str,
    namespace: &str,
    keys: &[(&str, &str)],
    now: i64,
) -> OpResult<HashMap<(String, String), Row>> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    // $1-$3 are org, namespace and the time; the pairs follow. At most a
    // page (50) of them.
    let sql = format!(
        "SELECT {COLUMNS} FROM memories WHERE org = $1 AND namespace = $2 \
         AND deleted = 0 AND (expires_ms IS NULL OR expires_ms > $3) \
         AND (agent, memory_key) IN (VALUES {})",
        crate::store::values_list(4, keys.len(), 2)
    );
    let mut query = sqlx::query_as::<_, Row>(&sql)
        .bind(org)
        .bind(namespace)
        .bind(now);
    for (agent, key) in keys {
        query = query.bind(*agent).bind(*key);
    }
    Ok(query
        .fetch_all(conn)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(|row| ((row.agent.clone(), row.memory_key.clone()), row))
        .collect())
}

/// One retrieval pass: at most [`CANDIDATES`] live rows that `pass` matches,
/// newest first, each with the database's lexical score for the whole query
/// (every term ORed), so rows from either pass compare on one scale.
async fn candidates(
    conn: &mut AnyConnection,
    backend: Backend,
    cx: &OpCx,
    terms: &[String],
    filter: &SearchFilter<'_>,
    pass: Pass,
    now: i64,
) -> OpResult<Vec<Candidate>> {
    let cols = "m.id, m.agent, m.memory_key, m.pinned, m.recall_count, m.updated_ms";
    // SQLite's bm25 sums over the query's phrases that a row holds, so a row
    // holding every term scores the same under AND as under OR. PostgreSQL's
    // ts_rank does not, so it ranks by the OR query ($8) whatever the pass.
    let (select, order) = match backend {
        Backend::Sqlite => (
            format!(
                "SELECT {cols}, -bm25(memories_fts, 2.0, 1.0, 0.5) AS lex \
                 FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
                 WHERE memories_fts MATCH $1 AND m.org = $2 AND m.namespace = $3"
            ),
            // FTS5 walks its index in rowid order and stops at the limit
            "memories_fts.rowid DESC",
        ),
        Backend::Postgres => (
            format!(
                "SELECT {cols}, CAST(10 * ts_rank(m.fts, websearch_to_tsquery('english', $8)) AS DOUBLE PRECISION) AS lex \
                 FROM memories m WHERE m.fts @@ websearch_to_tsquery('english', $1) AND m.org = $2 AND m.namespace = $3"
            ),
            // memories_by_update: read backwards, filtered, for common
            // words; the GIN index and a small sort for rare ones
            "m.updated_ms DESC",
        ),
    };
    let sql = format!(
        "{select} AND m.deleted = 0 AND (m.expires_ms IS NULL OR m.expires_ms > $4) \
         AND ($5 = '' OR m.agent = $5) AND ($6 = '' OR m.kind = $6) ORDER BY {order} LIMIT $7"
    );
    let mut query = sqlx::query_as::<_, Candidate>(&sql)
        .bind(match_expr(backend, terms, pass))
        .bind(&cx.scope.org)
        .bind(filter.namespace.unwrap_or(&cx.scope.namespace))
        .bind(now)
        .bind(filter.agent.unwrap_or(""))
        .bind(filter.kind.unwrap_or(""))
        .bind(CANDIDATES);
    if backend == Backend::Postgres {
        // Not a cached prepared statement: a generic plan cannot tell a
        // rare word (GIN index) from a common one (scan by recency), so
        // PostgreSQL plans each query with its words.
        query = query
            .bind(match_expr(backend, terms, Pass::Any))
            .persistent(false);
    }
    query.fetch_all(conn).await.map_err(db_error)
}

fn parts(updated_ms: i64, pinned: bool, recall_count: i64, raw: f64, now: i64) -> ScoreParts {
    let raw = raw.max(0.0);
    let age_days = ((now - updated_ms).max(0) as f64) / DAY_MS;
    ScoreParts {
        raw_lexical: raw,
        lexical: raw / (1.0 + raw),
        recency: 0.5_f64.powf(age_days / 30.0),
        pinned: if pinned { 1.0 } else { 0.0 },
        recall: ((1.0 + recall_count.max(0) as f64).ln() / 101_f64.ln()).min(1.0),
    }
}

/// The score from its parts (see the module doc).
pub fn score(p: &ScoreParts) -> f64 {
    p.lexical + 0.25 * p.recency + 0.30 * p.pinned + 0.15 * p.recall
}

/// The API shape of a hit.
pub fn hit(row: &Row, parts: ScoreParts, explain: bool) -> MemoryHit {
    MemoryHit {
        memory_key: row.memory_key.clone(),
        namespace: row.namespace.clone(),
        agent: row.agent.clone(),
        content: row.content.clone(),
        kind: row.kind.clone(),
        labels: super::validate::labels_from_json(&row.labels),
        version: row.version,
        pinned: row.pinned != 0,
        updated_at: rfc3339(row.updated_ms),
        score: score(&parts),
        explain: explain.then_some(parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stopwords_and_repeats() {
        assert_eq!(
            terms("What is the deploy-window? deploy!"),
            ["deploy", "window"]
        );
        assert!(terms("the of a").is_empty());
    }
}
