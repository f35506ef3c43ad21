//! The search plane: one query over memory, profile, knowledge and
//! conversations (the op behind the `loom_search` tool).

pub mod model;

use loom_core::{ErrorCode, OpCx, OpResult, loom_op};

use self::model::{Bodies, ProfileHit, SearchQuery, SearchResults};
use crate::memory::rank::{self, Recipe, SearchFilter};
use crate::memory::read::record_exposures;
use crate::scope::require_namespace_in;
use crate::store::{Store, now_ms};

/// The hits per section when top_k is not given.
const DEFAULT_TOP_K: i64 = 10;
/// The most namespaces one search reads unless the server says otherwise.
pub const FAN_OUT: usize = 5;

/// How wide a search reads, set by the server (`LOOM_SEARCH_FANOUT`).
#[derive(Clone, Copy, Debug)]
pub struct SearchSettings {
    /// The most namespaces one search reads (the caller's included).
    pub fan_out: usize,
}

/// The namespaces a search reads: the call's, then the caller's other
/// memory-kind (memory, personal) namespaces in name order, up to the
/// fan-out cap. The caller's are those it could read by naming them (the
/// access rule, [`loom_core::access`]): those its token names, or every
/// one of the org for a token that names none or `*`, and those a grant
/// gives it; never a restricted namespace of another org than the token's.
///
/// A search names no namespace: the caller's default one is left out
/// when it does not exist, as long as another is read.
async fn namespaces(store: &Store, cx: &OpCx) -> OpResult<Vec<String>> {
    let fan_out = cx
        .services()
        .get::<SearchSettings>()
        .map_or(FAN_OUT, |s| s.fan_out.max(1));
    let missing = match require_namespace_in(store, cx).await {
        Ok(()) => None,
        Err(e) if e.code() == ErrorCode::ResourceNotFound => Some(e),
        Err(e) => return Err(e),
    };
    // A default that does not exist is not among those listed below.
    let mut out = Vec::new();
    if missing.is_none() {
        out.push(cx.scope.namespace.clone());
    }
    let org = &cx.scope.org;
    for (ns, facts) in store.memory_namespaces(org, &cx.caller.subject).await? {
        if out.len() >= fan_out {
            break;
        }
        if !out.contains(&ns) && cx.caller.reach(org, &ns, facts).role().is_some() {
            out.push(ns);
        }
    }
    match missing {
        Some(e) if out.is_empty() => Err(e),
        _ => Ok(out),
    }
}

/// Searches memory, profile, knowledge and conversations at once and
/// returns a section for each (empty when a plane has nothing). Memory hits
/// come from your namespace and your other memory namespaces, ranked by
/// text match, recency, pins and recall counts (recipe: relevance or
/// recent weighs them otherwise); explain: true shows the parts, bodies:
/// snippet or none returns less of each text. To read one memory by key
/// use memory.get.
#[loom_op(
    role = "viewer",
    idempotent,
    rate = "heavy",
    tool = "loom_search",
    synthetic
)]
async fn query(cx: &OpCx, input: SearchQuery) -> OpResult<SearchResults> {
    let store = cx.service::<Store>()?;
    let top_k = input
        .top_k
        .unwrap_or(DEFAULT_TOP_K)
        .clamp(1, rank::LARGEST_PAGE);
    let recipe = Recipe::lenient(input.recipe.as_deref());
    let bodies = Bodies::lenient(input.bodies.as_deref());
    let terms = rank::terms(&input.query);
    let now = now_ms();
    let namespaces = namespaces(store, cx).await?;
    let profile = crate::profile::store::read(store, cx).await?;
    // The read connection goes back to the pool before the exposures are queued.
    let memory = {
        let mut conn = store.read().await?;
        // The words are counted once for every namespace read.
        let counted = rank::Counted::count(&mut conn, store, &terms).await?;
        let mut hits = Vec::new();
        for ns in &namespaces {
            let filter = SearchFilter {
                namespace: Some(ns),
                recipe,
                ..SearchFilter::default()
            };
            hits.extend(
                rank::search_counted(&mut conn, store, cx, &counted, &filter, top_k as usize, now)
                    .await?,
            );
        }
        hits.sort_by(|a, b| recipe.score(&b.1).total_cmp(&recipe.score(&a.1)));
        hits.truncate(top_k as usize);
        hits
    };
    record_exposures(cx, memory.iter().map(|(row, _)| row), now).await?;
    let mut profile_hits: Vec<ProfileHit> = [
        ("persona", profile.persona),
        ("preferences", profile.preferences),
        ("goals", profile.goals),
    ]
    .into_iter()
    .filter_map(|(section, content)| {
        // Every word of the section, not a query's first sixteen.
        let matched = crate::memory::ask::matched(&terms, &content);
        (!matched.is_empty()).then(|| ProfileHit {
            section: section.to_owned(),
            content: bodies.apply(content),
            matched,
        })
    })
    .collect();
    profile_hits.sort_by_key(|h| std::cmp::Reverse(h.matched.len()));
    profile_hits.truncate(top_k as usize);
    Ok(SearchResults {
        top_k,
        recipe,
        bodies,
        namespaces,
        memory: memory
            .into_iter()
            .map(|(row, parts)| {
                let mut hit = rank::hit(&row, parts, recipe, input.explain);
                hit.content = bodies.apply(hit.content);
                hit
            })
            .collect(),
        profile: profile_hits,
        knowledge: Vec::new(),
        conversations: Vec::new(),
    })
}
