//! The search plane: one query over memory, profile, knowledge and
//! conversations (the op behind the `loom_search` tool).

pub mod model;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{ProfileHit, SearchQuery, SearchResults};
use crate::memory::rank::{self, SearchFilter};
use crate::memory::read::record_exposures;
use crate::scope::require_namespace;
use crate::store::{Store, db_error, now_ms};

/// The hits per section when top_k is not given.
const DEFAULT_TOP_K: i64 = 10;

/// Searches memory, profile, knowledge and conversations at once and
/// returns a section for each (empty when a plane has nothing). Memory hits
/// are ranked by text match, recency, pins and recall counts; explain: true
/// shows the parts. To read one memory by key use memory.get.
#[loom_op(role = "viewer", idempotent, rate = "heavy")]
async fn query(cx: &OpCx, input: SearchQuery) -> OpResult<SearchResults> {
    let store = cx.service::<Store>()?;
    let top_k = input.top_k.unwrap_or(DEFAULT_TOP_K).clamp(1, 50);
    let terms = rank::terms(&input.query);
    let now = now_ms();
    let mut conn = store.reader().acquire().await.map_err(db_error)?;
    require_namespace(&mut conn, cx).await?;
    drop(conn);
    let memory = async {
        let mut conn = store.reader().acquire().await.map_err(db_error)?;
        rank::search(
            &mut conn,
            store.backend(),
            cx,
            &terms,
            &SearchFilter::default(),
            top_k as usize,
            now,
        )
        .await
    };
    let profile = async {
        let mut conn = store.reader().acquire().await.map_err(db_error)?;
        crate::profile::store::load(&mut conn, cx).await
    };
    let (memory, profile) = tokio::join!(memory, profile);
    let (memory, profile) = (memory?, profile?);
    record_exposures(store, cx, memory.iter().map(|(row, _)| row), now).await?;
    let mut profile_hits: Vec<ProfileHit> = [
        ("persona", profile.persona),
        ("preferences", profile.preferences),
        ("goals", profile.goals),
    ]
    .into_iter()
    .filter_map(|(section, content)| {
        let words = rank::terms(&content);
        let matched: Vec<String> = terms
            .iter()
            .filter(|t| words.contains(t))
            .cloned()
            .collect();
        (!matched.is_empty()).then(|| ProfileHit {
            section: section.to_owned(),
            content,
            matched,
        })
    })
    .collect();
    profile_hits.sort_by_key(|h| std::cmp::Reverse(h.matched.len()));
    profile_hits.truncate(top_k as usize);
    Ok(SearchResults {
        top_k,
        memory: memory
            .into_iter()
            .map(|(row, parts)| rank::hit(&row, parts, input.explain))
            .collect(),
        profile: profile_hits,
        knowledge: Vec::new(),
        conversations: Vec::new(),
    })
}
