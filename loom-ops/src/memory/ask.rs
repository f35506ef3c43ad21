//! `memory.ask`: an extractive answer. The evidence is the best search hits;
//! the answer is the sentence of the best hit that shares the most question
//! terms, quoted verbatim. It abstains when no hit contains at least half of
//! the question's terms (at least one), so it never answers from a weak match.

use loom_core::{OpCx, OpResult};

use super::model::{Evidence, MemoryAnswer, MemoryAsk};
use super::rank::{self, SearchFilter};
use super::read::record_exposures;
use super::validate;
use crate::scope::require_namespace;
use crate::store::{Store, now_ms};

/// A word reduced for comparison: lowercase, common English endings dropped.
fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(base) = w.strip_suffix(suffix)
            && base.len() >= 3
        {
            return base.to_owned();
        }
    }
    w
}

/// The question terms `text` contains (compared by stem), anywhere in it:
/// every word of the text is looked at, where a query's terms stop at the
/// sixteenth (`rank::terms`, what a search is asked).
pub fn matched(terms: &[String], text: &str) -> Vec<String> {
    let wanted: std::collections::HashSet<String> = terms.iter().map(|t| stem(t)).collect();
    let found: std::collections::HashSet<String> = text
        .split(|c: char| !super::rank::in_word(c))
        .filter(|w| !w.is_empty())
        .map(stem)
        .filter(|w| wanted.contains(w))
        .collect();
    terms
        .iter()
        .filter(|t| found.contains(&stem(t)))
        .cloned()
        .collect()
}

fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?' | '\n') {
            let s = text[start..i + c.len_utf8()].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = i + c.len_utf8();
        }
    }
    let tail = text[start..].trim();
    if !tail.is_empty() {
        out.push(tail);
    }
    out
}

/// The sentence of `text` sharing the most of `terms`, the first of
/// those that share as many; `None` when none shares one.
fn best_sentence<'t>(terms: &[String], text: &'t str) -> Option<&'t str> {
    let mut best: Option<(usize, &str)> = None;
    for s in sentences(text) {
        let n = matched(terms, s).len();
        if n > 0 && best.is_none_or(|(most, _)| n > most) {
            best = Some((n, s));
        }
    }
    best.map(|(_, s)| s)
}

/// `memory.ask`.
pub async fn ask(store: &Store, cx: &OpCx, input: MemoryAsk) -> OpResult<MemoryAnswer> {
    let limit = validate::limit(input.limit, 5, 20)?;
    let terms = rank::terms(&input.question);
    let now = now_ms();
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let filter = SearchFilter {
        namespace: None,
        agent: input.agent.is_some().then_some(cx.scope.agent.as_str()),
        kind: None,
        recipe: rank::Recipe::Balanced,
    };
    let found = rank::search(&mut conn, store, cx, &terms, &filter, limit as usize, now).await?;
    drop(conn);
    record_exposures(cx, found.iter().map(|(row, _)| row), now).await?;
    let evidence: Vec<Evidence> = found
        .iter()
        .map(|(row, parts)| Evidence {
            memory_key: row.memory_key.clone(),
            agent: row.agent.clone(),
            version: row.version,
            content_hash: row.content_hash.clone(),
            content: row.content.clone(),
            matched: matched(&terms, &format!("{} {}", row.memory_key, row.content)),
            score: rank::score(parts),
        })
        .collect();
    let needed = terms.len().div_ceil(2).max(1);
    // The first strong enough hit with a sentence sharing a question term:
    // a hit found by its key alone has no sentence to quote.
    let found = evidence
        .iter()
        .filter(|e| e.matched.len() >= needed)
        .find_map(|e| best_sentence(&terms, &e.content).map(|s| (e, s)));
    Ok(MemoryAnswer {
        abstain: found.is_none(),
        cited: found.map(|(e, _)| format!("{}@v{}", e.memory_key, e.version)),
        answer: found.map(|(_, s)| s.to_owned()),
        evidence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_ends() {
        assert_eq!(sentences("One. Two!\nThree"), ["One.", "Two!", "Three"]);
    }

    #[test]
    fn a_term_late_in_a_long_text_is_matched() {
        let text = (0..40)
            .map(|i| format!("filler{i}"))
            .collect::<Vec<_>>()
            .join(" ")
            + " the backup target is narwhalstore.";
        assert_eq!(matched(&["narwhalstore".into()], &text), ["narwhalstore"]);
    }

    #[test]
    fn the_sentence_quoted_shares_a_term_and_the_first_wins_ties() {
        let terms = ["backup".to_owned(), "nightly".to_owned()];
        assert_eq!(
            best_sentence(&terms, "Backup runs nightly. Backup is kept. Owner is ops."),
            Some("Backup runs nightly.")
        );
        assert_eq!(
            best_sentence(
                &terms,
                "Kept 30 days. Backup goes offsite. Backup is checked."
            ),
            Some("Backup goes offsite.")
        );
        assert_eq!(best_sentence(&terms, "Runs at 2am. Owner is ops."), None);
    }

    #[test]
    fn stems_match_plurals() {
        assert_eq!(
            matched(&["deploys".into(), "cat".into()], "we deploy on fridays"),
            ["deploys"]
        );
    }
}
