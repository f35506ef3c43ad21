//! Memory search: lexical matching in the database (SQLite FTS5, PostgreSQL
//! full-text) re-ranked with recency, pins and recall counts.
//!
//! Only memories the query matches lexically are candidates, and the index
//! hands over a bounded set of them (see [`CANDIDATES`]): the newest rows
//! holding any term and the newest holding every term. When a query
//! matches fewer rows than that bound, every match is a candidate and the
//! order below is exact. Candidates are scored in the database, in the same
//! statement that finds them, and only the page leaves it. Each candidate
//! gets
//!
//! ```text
//! score   = lexical + 0.25 × recency + 0.30 × pinned + 0.15 × recall
//! lexical = raw / (1 + raw)              raw = −bm25 (SQLite FTS5, key weighted 2, labels 0.5;
//!                                            document frequencies kept a while, see doc_freq)
//!                                            or 10 × ts_rank (PostgreSQL), so lexical ∈ [0, 1)
//! recency = 0.5 ^ (days since last change / 30)      a 30-day half-life
//! pinned  = 1 when pinned, else 0
//! recall  = min(1, ln(1 + recall_count) / ln(101))   saturates at 100 recalls
//! ```
//!
//! `explain` returns these parts with each hit. That is the `balanced`
//! recipe; `search.query` may ask for another weighing of the same parts
//! ([`Recipe`]): `relevance` (the text match alone) or `recent` (newest
//! first among the candidates).

use std::sync::LazyLock;

use loom_core::{OpCx, OpResult};
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::AnyConnection;

use super::store::{COLUMNS, Row};

use crate::store::{Backend, Bind, Store, Values, all_rows, db_error, rfc3339};

/// Rows each retrieval pass takes from the full-text index, newest first,
/// before they are ranked.
///
/// Why a bound: scoring every lexical match is what made search slow. With
/// common words a 2-3 word query over 100,000 memories matches about a
/// third of them, and the database computed bm25 / ts_rank for each of
/// those ~36,000 rows, joined and sorted them (about 70 ms of CPU per query
/// on SQLite, 250 ms on PostgreSQL; seconds under load). Taking a bounded
/// number of rows in index order (FTS5's rowid, the id negated; PostgreSQL's
/// `memories_by_update`) costs the same whatever the store's size.
///
/// Why 50: the largest page a caller may ask for, so either pass alone can
/// fill any page and the two together weigh up to twice it, room for
/// recency, pins and recall counts to reorder what the text found. Each
/// row weighed is read, joined and scored, and on SQLite the every-word
/// pass also walks its words' posting lists until it has its rows, so a
/// search costs about in proportion to this bound: at 100 a pass (twice
/// the largest page, until the search benchmark showed it was the bound
/// on its p99) search served 55-60% of the queries it serves at 50, and at
/// 200 two thirds of those at 100. Why not fewer for smaller pages: the
/// bound is the same whatever the page, so a smaller page is always the
/// top of a larger one. A pass that matches fewer rows than this returns
/// all of them, so small stores rank exactly as an exhaustive scan would.
const CANDIDATES: i64 = LARGEST_PAGE;
/// The most hits one ranked search returns: `memory.search`'s limit,
/// `loom_search`'s top_k and the matches `context.pack` weighs are held to
/// it, and each retrieval pass takes as many rows ([`CANDIDATES`]).
pub const LARGEST_PAGE: i64 = 50;
/// How long a search may run on the calling thread (SQLite) before SQLite
/// interrupts it and it runs again on sqlx's threads.
///
/// Why on the calling thread: handed to sqlx's connection thread, a search
/// was a message there, one back per row of the page and a wake-up, on 2
/// cores shared with everything else; run here it served 20-30% more
/// searches a second (paired 10 s runs: 1,371-1,590 → 1,773-2,038), at the
/// same or a lower p99. Why a budget: the runtime's thread serves other
/// calls, and a search's cost is bounded by [`CANDIDATES`] in the usual
/// case, not always (the every-word pass walks posting lists until it has
/// enough rows, and words that are each common but rarely together make
/// it walk far on a large store). 5 ms is several times a search's usual
/// cost on 100,000 memories (under 1 ms of SQLite's time).
/// `tokio::task::block_in_place` instead (the runtime moves its other
/// calls to another thread meanwhile) gave back the whole gain.
const INLINE_BUDGET: std::time::Duration = std::time::Duration::from_millis(5);
const DAY_MS: f64 = 86_400_000.0;
/// ln(0.5), for the recency half-life in SQL (`exp(ln(0.5) × t)` = `0.5 ^ t`).
const LN_HALF: f64 = -std::f64::consts::LN_2;

/// Words too common to rank by.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "in",
    "is", "it", "of", "on", "or", "the", "to", "was", "we", "what", "when", "where", "which",
    "who", "why", "with",
];

/// Whether `c` belongs to a word: a letter or digit, or a mark combining
/// with the one before it (a decomposed é is e then U+0301, as text from
/// some systems arrives; the full-text indexes keep such a word whole).
pub fn in_word(c: char) -> bool {
    c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(c)
}

/// The query's search terms: lowercase words of letters and digits, at most 16.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !in_word(c)) {
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
    /// The content (absent when a search asked for no bodies).
    #[serde(skip_serializing_if = "String::is_empty")]
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

/// How a search weighs what each candidate scores ([`ScoreParts`]):
/// `search.query`'s `recipe`. Every recipe ranks the same candidates (the
/// newest rows the query matches, see [`CANDIDATES`]); they differ in
/// what puts one ahead of another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Recipe {
    /// The text match, then recency, pins and recall counts (the default).
    #[default]
    Balanced,
    /// The text match alone: the best-matching rows first, however old.
    Relevance,
    /// Recency first: the newest matching rows first, the text match
    /// breaking near ties.
    Recent,
}

impl Recipe {
    /// Every recipe, by name.
    pub const ALL: [Recipe; 3] = [Recipe::Balanced, Recipe::Relevance, Recipe::Recent];

    /// The recipe `name` names (any case), else the default: an agent that
    /// guessed a name gets a ranking, not a refusal.
    pub fn lenient(name: Option<&str>) -> Recipe {
        name.and_then(|name| {
            Recipe::ALL
                .into_iter()
                .find(|r| r.name().eq_ignore_ascii_case(name.trim()))
        })
        .unwrap_or_default()
    }

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            Recipe::Balanced => "balanced",
            Recipe::Relevance => "relevance",
            Recipe::Recent => "recent",
        }
    }

    /// The weights of lexical, recency, pinned and recall.
    ///
    /// Why `recent` keeps a little of the text match: recency alone ties
    /// every row changed in the same instant (a bulk write), and the row
    /// that matches better should win such a tie. 1e-6 of a lexical score
    /// in [0, 1) moves a row ahead of another at most as far as ~4 s of
    /// age near the top of the scale (recency falls ~2.3% a day there), so
    /// rows changed further apart are newest first. (At 0.01 it was ~10
    /// hours: a row changed an hour before another came first on a better
    /// match.)
    const fn weights(self) -> [f64; 4] {
        match self {
            Recipe::Balanced => [1.0, 0.25, 0.30, 0.15],
            Recipe::Relevance => [1.0, 0.0, 0.0, 0.0],
            Recipe::Recent => [1e-6, 1.0, 0.0, 0.0],
        }
    }

    /// The score of `p` under this recipe (higher first).
    pub fn score(self, p: &ScoreParts) -> f64 {
        let [lexical, recency, pinned, recall] = self.weights();
        lexical * p.lexical + recency * p.recency + pinned * p.pinned + recall * p.recall
    }
}

/// Filters on the candidates, and the recipe that ranks them.
#[derive(Debug, Default)]
pub struct SearchFilter<'a> {
    /// Another namespace of the org than the call's (search.query's fan-out).
    pub namespace: Option<&'a str>,
    /// Only this agent's rows.
    pub agent: Option<&'a str>,
    /// Only this kind.
    pub kind: Option<&'a str>,
    /// How the candidates are weighed.
    pub recipe: Recipe,
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

/// A query's terms with their document frequencies (SQLite's ranking
/// input, see [`DocFreqs`](super::doc_freq::DocFreqs)): counted once,
/// for every namespace a search reads, on an index that holds every write
/// committed before (made only by [`Counted::count`]).
pub struct Counted<'a> {
    terms: &'a [String],
    /// `loom_bm25`'s frequencies argument; `None` on PostgreSQL.
    frequencies: Option<String>,
}

impl<'a> Counted<'a> {
    /// Counts what `terms` need for ranking on `store`'s backend.
    pub async fn count(
        conn: &mut AnyConnection,
        store: &Store,
        terms: &'a [String],
    ) -> OpResult<Counted<'a>> {
        let frequencies = match store.backend() {
            Backend::Sqlite if !terms.is_empty() => {
                // SQLite's index takes writes in batches: what is queued
                // goes in before anything reads it (the counts, then each
                // namespace's retrieval), so the search finds every write
                // committed before it. Once per search, however many
                // namespaces it reads.
                store.index_queued_writes().await?;
                Some(loom_fts5::frequencies(
                    &store.doc_freqs().counts(conn, terms).await?,
                ))
            }
            _ => None,
        };
        Ok(Counted { terms, frequencies })
    }
}

/// The live memories of the namespace (the call's, or `filter.namespace`)
/// that match `terms`, best first, at most `limit`: [`search_counted`]
/// for one namespace.
pub async fn search(
    conn: &mut AnyConnection,
    store: &Store,
    cx: &OpCx,
    terms: &[String],
    filter: &SearchFilter<'_>,
    limit: usize,
    now: i64,
) -> OpResult<Vec<(Row, ScoreParts)>> {
    let counted = Counted::count(conn, store, terms).await?;
    search_counted(conn, store, cx, &counted, filter, limit, now).await
}

/// [`search`] with the terms counted already.
///
/// One statement retrieves the candidates (both passes), scores them and
/// returns only the page, whole: the hundreds of candidates a query weighs
/// never leave the database. Fetched one by one through the driver (on
/// SQLite each row is a message from the connection's thread), they had
/// cost more than the full-text work itself.
pub async fn search_counted(
    conn: &mut AnyConnection,
    store: &Store,
    cx: &OpCx,
    counted: &Counted<'_>,
    filter: &SearchFilter<'_>,
    limit: usize,
    now: i64,
) -> OpResult<Vec<(Row, ScoreParts)>> {
    let terms = counted.terms;
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // With one term both passes are the same.
    let both = terms.len() > 1;
    let backend = store.backend();
    // On SQLite the statement runs on the calling thread, within a budget
    // (INLINE_BUDGET), like a point read; past it, on sqlx's threads.
    let inline = store.read_inline_within(INLINE_BUDGET, |c| {
        let values = ranked_args(Values::default(), backend, cx, counted, filter, limit, now)
            .into_inner()
            .map_err(|fault| rusqlite::Error::ToSqlConversionFailure(fault.into()))?;
        let values: Vec<&dyn rusqlite::ToSql> = values.iter().map(|v| v as _).collect();
        all_rows(c, ranked_sql(backend, filter.recipe, both), &values, |r| {
            Ok(Ranked {
                row: Row::from_sqlite(r)?,
                // after the row's 18 columns
                raw: r.get(18)?,
            })
        })
    });
    if let Some(found) = inline {
        return Ok(rank_page(found?, filter.recipe, now));
    }
    let mut query = ranked_args(
        sqlx::query_as::<_, Ranked>(ranked_sql(backend, filter.recipe, both)),
        backend,
        cx,
        counted,
        filter,
        limit,
        now,
    );
    if backend == Backend::Postgres {
        // Not a cached prepared statement: a generic plan cannot tell a
        // rare word (GIN index) from a common one (scan by recency), so
        // PostgreSQL plans each query with its words.
        query = query.persistent(false);
    }
    let found = query.fetch_all(conn).await.map_err(db_error)?;
    Ok(rank_page(found, filter.recipe, now))
}

/// [`ranked_sql`]'s parameters, in order, bound once for either driver.
fn ranked_args<'q, B: Bind<'q>>(
    b: B,
    backend: Backend,
    cx: &'q OpCx,
    counted: &'q Counted<'_>,
    filter: &SearchFilter<'q>,
    limit: usize,
    now: i64,
) -> B {
    let terms = counted.terms;
    let mut b = b
        .arg(match_expr(backend, terms, Pass::Any))
        .arg(cx.scope.org.as_str())
        .arg(filter.namespace.unwrap_or(&cx.scope.namespace))
        .arg(now)
        .arg(filter.agent.unwrap_or(""))
        .arg(filter.kind.unwrap_or(""))
        .arg(CANDIDATES)
        .arg(i64::try_from(limit).unwrap_or(i64::MAX));
    if let Some(frequencies) = &counted.frequencies {
        b = b.arg(frequencies.as_str());
    }
    if terms.len() > 1 {
        b = b.arg(match_expr(backend, terms, Pass::All));
    }
    b
}

fn rank_page(found: Vec<Ranked>, recipe: Recipe, now: i64) -> Vec<(Row, ScoreParts)> {
    // The database ordered by the same score; it is computed once more
    // here for the parts, and the page is put in that order, so the scores
    // a caller sees never run against the order they are listed in.
    let mut ranked: Vec<(Row, ScoreParts)> = found
        .into_iter()
        .map(|r| {
            let parts = parts(
                r.row.updated_ms,
                r.row.pinned != 0,
                r.row.recall_count,
                r.raw,
                now,
            );
            (r.row, parts)
        })
        .collect();
    ranked.sort_by(|a, b| {
        recipe
            .score(&b.1)
            .total_cmp(&recipe.score(&a.1))
            .then_with(|| a.0.memory_key.cmp(&b.0.memory_key))
            .then_with(|| a.0.agent.cmp(&b.0.agent))
    });
    ranked
}

/// A ranked row: the row, with the database's lexical score.
#[derive(sqlx::FromRow)]
struct Ranked {
    #[sqlx(flatten)]
    row: Row,
    raw: f64,
}

/// The ranking statement. Parameters: $1 the any-term query, $2 org,
/// $3 namespace, $4 now, $5 agent ('' for any), $6 kind ('' for any),
/// $7 rows per pass ([`CANDIDATES`]), $8 the page size; on SQLite $9 the
/// terms' document frequencies ([`DocFreqs`](super::doc_freq::DocFreqs));
/// and, with `both`, the every-term query ($10 on SQLite, $9 on PostgreSQL).
///
/// Each pass is at most [`CANDIDATES`] live rows that it matches, newest
/// first, each with the lexical score of the whole query (every term
/// ORed), so rows from either pass compare on one scale. SQLite's bm25
/// sums over the query's phrases that a row holds, so a row holding every
/// term scores the same under AND as under OR; PostgreSQL's ts_rank does
/// not, so it ranks by the OR query ($1) whatever the pass. A row both
/// passes found counts once. The score is the module doc's, weighed by
/// the recipe, written in SQL; ties go to the key, then the agent, in byte
/// order. Written once per backend, recipe and shape.
fn ranked_sql(backend: Backend, recipe: Recipe, both: bool) -> &'static str {
    // [backend][recipe][both]: twelve texts, written together on first use.
    static TEXTS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut texts = Vec::with_capacity(12);
        for backend in [Backend::Sqlite, Backend::Postgres] {
            for recipe in Recipe::ALL {
                for both in [false, true] {
                    texts.push(build_ranked_sql(backend, recipe, both));
                }
            }
        }
        texts
    });
    let b = match backend {
        Backend::Sqlite => 0,
        Backend::Postgres => 1,
    };
    // Recipe::ALL lists the variants in their declared order.
    &TEXTS[(b * Recipe::ALL.len() + recipe as usize) * 2 + usize::from(both)]
}

fn build_ranked_sql(backend: Backend, recipe: Recipe, both: bool) -> String {
    let (join, greatest, least, float, bytes) = match backend {
        Backend::Sqlite => ("m.id = page.id", "MAX", "MIN", "REAL", ""),
        Backend::Postgres => (
            // by primary key: PostgreSQL does not index id
            "m.org = $2 AND m.namespace = $3 AND m.agent = page.agent AND m.memory_key = page.memory_key",
            "GREATEST",
            "LEAST",
            "DOUBLE PRECISION",
            " COLLATE \"C\"",
        ),
    };
    let mut passes = pass_sql(backend, "$1");
    if both {
        passes.push_str(" UNION ALL ");
        let all = match backend {
            Backend::Sqlite => "$10",
            Backend::Postgres => "$9",
        };
        passes.push_str(&pass_sql(backend, all));
    }
    let raw = format!("{greatest}(raw, 0.0)");
    let days = format!("CAST({greatest}($4 - updated_ms, 0) AS {float}) / {DAY_MS:.1}");
    // The recipe's weights, written as literals with a decimal point (a
    // weight of 0 leaves its term to the planner to fold away).
    let [w_lexical, w_recency, w_pinned, w_recall] = recipe.weights();
    let score = format!(
        "{w_lexical:?} * {raw} / (1.0 + {raw}) \
         + {w_recency:?} * exp({LN_HALF} * {days} / 30.0) \
         + {w_pinned:?} * (CASE WHEN pinned <> 0 THEN 1.0 ELSE 0.0 END) \
         + {w_recall:?} * {least}(1.0, ln(1.0 + {greatest}(recall_count, 0)) / ln(101.0))"
    );
    let columns = COLUMNS
        .split(',')
        .map(|c| format!("m.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let ties = |of: &str| format!("{of}memory_key{bytes}, {of}agent{bytes}");
    // hits: each candidate once, with what scores it; page: the best $8;
    // only the page's rows are read whole
    format!(
        "WITH hits AS (\
           SELECT id, agent, memory_key, pinned, recall_count, updated_ms, MAX(raw) AS raw \
           FROM ({passes}) passes GROUP BY id, agent, memory_key, pinned, recall_count, updated_ms), \
         page AS (SELECT id, agent, memory_key, raw, {score} AS score FROM hits \
           ORDER BY score DESC, {} LIMIT $8) \
         SELECT {columns}, page.raw AS raw FROM page JOIN memories m ON {join} \
         ORDER BY page.score DESC, {}",
        ties(""),
        ties("page.")
    )
}

/// One retrieval pass of [`ranked_sql`]: the rows `expr` (a parameter)
/// matches, newest first, at most $7, each with its raw lexical score.
fn pass_sql(backend: Backend, expr: &str) -> String {
    let cols = "m.id AS id, m.agent AS agent, m.memory_key AS memory_key, m.pinned AS pinned, \
                m.recall_count AS recall_count, m.updated_ms AS updated_ms";
    let live = "AND m.org = $2 AND m.namespace = $3 AND m.deleted = 0 \
                AND (m.expires_ms IS NULL OR m.expires_ms > $4) \
                AND ($5 = '' OR m.agent = $5) AND ($6 = '' OR m.kind = $6)";
    match backend {
        // FTS5 walks its index in rowid order and stops at the limit. Its
        // rowid is the memory's id negated (migration 0009), so that order
        // is newest first and FTS5 reads its doclists forwards: walked
        // backwards (ORDER BY rowid DESC) the same pass cost up to twice as
        // much, most on an index of many segments. The row's size for
        // loom_bm25 is the memory's own (`fts_tokens`, migration 0017),
        // counted here from its text when a row lacks it.
        Backend::Sqlite => format!(
            "SELECT * FROM (SELECT {cols}, -loom_bm25(memories_fts, $9, \
             COALESCE(m.fts_tokens, loom_fts_tokens(m.memory_key, m.content, m.labels)), \
             2.0, 1.0, 0.5) AS raw \
             FROM memories_fts JOIN memories m ON m.id = -memories_fts.rowid \
             WHERE memories_fts MATCH {expr} {live} ORDER BY memories_fts.rowid LIMIT $7)"
        ),
        // memories_by_update: read backwards, filtered, for common words;
        // the GIN index and a small sort for rare ones.
        Backend::Postgres => format!(
            "(SELECT {cols}, \
             CAST(10 * ts_rank(m.fts, websearch_to_tsquery('english', $1)) AS DOUBLE PRECISION) AS raw \
             FROM memories m WHERE m.fts @@ websearch_to_tsquery('english', {expr}) {live} \
             ORDER BY m.updated_ms DESC LIMIT $7)"
        ),
    }
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

/// The score from its parts under the default recipe (see the module doc).
pub fn score(p: &ScoreParts) -> f64 {
    Recipe::Balanced.score(p)
}

/// The API shape of a hit.
pub fn hit(row: &Row, parts: ScoreParts, recipe: Recipe, explain: bool) -> MemoryHit {
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
        score: recipe.score(&parts),
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
        assert_eq!(
            terms("nai\u{308}ve re\u{301}sume\u{301}"),
            ["nai\u{308}ve", "re\u{301}sume\u{301}"],
            "a decomposed word is one term"
        );
    }

    /// The ranking statement stays prepared from one search to the next,
    /// whatever its page size: unless built with `SQLITE_ENABLE_QPSG`,
    /// SQLite 3.51 and later plan it with some of the values bound (its
    /// `LIMIT $8`; in 3.54 also `m.org = $2`) and re-prepare it each time
    /// they are bound again, which made every search parse and plan it
    /// anew (a quarter of the server's CPU under the search benchmark,
    /// bench/RESULTS.md).
    #[tokio::test]
    async fn the_ranking_statement_is_not_prepared_again_for_each_search() {
        let test = crate::store::testing::sqlite().await;
        let sql = ranked_sql(Backend::Sqlite, Recipe::Balanced, true);
        let frequencies = loom_fts5::frequencies(&[1, 1]);
        let reprepared = test
            .store
            .read_inline(|c| {
                for page in [10_i64, 20, 10] {
                    let values: [&dyn rusqlite::ToSql; 10] = [
                        &"\"deploy\" OR \"window\"",
                        &"default",
                        &"default",
                        &1_i64,
                        &"",
                        &"",
                        &CANDIDATES,
                        &page,
                        &frequencies,
                        &"\"deploy\" AND \"window\"",
                    ];
                    all_rows(c, sql, &values, |_| Ok(()))?;
                }
                // The statement all_rows ran, from the connection's cache.
                let stmt = c.prepare_cached(sql)?;
                Ok(stmt.get_status(rusqlite::StatementStatus::RePrepare))
            })
            .expect("inline reads on a SQLite file")
            .unwrap();
        assert_eq!(reprepared, 0);
    }
}
