//! Inputs and outputs of `search.query`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::memory::rank::{MemoryHit, Recipe};

/// Arguments of `search.query`.
///
/// Its options are lenient, as an agent's guess at them should not cost a
/// turn: top_k out of range is clamped, an unknown recipe or bodies value
/// is read as the default, and the result says which were used.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    /// What to look for, in words.
    pub query: String,
    /// Hits per section (default 10; values outside 1-50 are clamped).
    pub top_k: Option<i64>,
    /// How memory hits are ranked: balanced (the default: text match,
    /// recency, pins and recall counts), relevance (the text match alone)
    /// or recent (newest first). Another value ranks as balanced.
    pub recipe: Option<String>,
    /// How much of each hit's text is returned: full (the default),
    /// snippet (about its first 200 characters) or none (keys and details
    /// only). Another value returns full.
    pub bodies: Option<String>,
    /// Add why each memory hit ranked where it did.
    #[serde(default)]
    pub explain: bool,
}

/// How much of each hit's text a search returns (`bodies`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Bodies {
    /// The whole text.
    #[default]
    Full,
    /// About the first 200 characters (`SNIPPET_CHARS`), cut at a word
    /// where one ends near there, with `…` when cut.
    Snippet,
    /// No text: each hit's key and details only.
    None,
}

/// The characters a snippet keeps at most (before its `…`).
pub const SNIPPET_CHARS: usize = 200;

impl Bodies {
    /// The value `name` names (any case), else the default: an agent that
    /// guessed a name gets whole texts, not a refusal.
    pub fn lenient(name: Option<&str>) -> Bodies {
        match name.map(|n| n.trim().to_ascii_lowercase()).as_deref() {
            Some("snippet") => Bodies::Snippet,
            Some("none") => Bodies::None,
            _ => Bodies::Full,
        }
    }

    /// `text` as this setting returns it (empty for none).
    pub fn apply(self, text: String) -> String {
        match self {
            Bodies::Full => text,
            Bodies::None => String::new(),
            Bodies::Snippet => snippet(text),
        }
    }
}

/// The first [`SNIPPET_CHARS`] characters of `text`, cut after the last
/// word that ends in the final fifth of them (else where the count ends),
/// with `…` when anything was cut.
fn snippet(text: String) -> String {
    let Some((end, _)) = text.char_indices().nth(SNIPPET_CHARS) else {
        return text;
    };
    let (head, rest) = text.split_at(end);
    // Only spaces past the count: nothing is cut.
    if rest.trim_start().is_empty() {
        return head.trim_end().to_owned();
    }
    let floor = head
        .char_indices()
        .nth(SNIPPET_CHARS * 4 / 5)
        .map_or(0, |(i, _)| i);
    // A word that ends where the count does is whole.
    let cut = if rest.starts_with(char::is_whitespace) {
        end
    } else {
        match head.rfind(char::is_whitespace) {
            Some(space) if space >= floor => space,
            _ => end,
        }
    };
    format!("{}…", head[..cut].trim_end())
}

/// A profile section the query matched.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ProfileHit {
    /// persona, preferences or goals.
    pub section: String,
    /// Its text.
    pub content: String,
    /// Query terms it contains.
    pub matched: Vec<String>,
}

/// Every plane's hits, one section each (empty for planes with nothing to offer).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The top_k used after clamping.
    pub top_k: i64,
    /// The recipe the memory hits were ranked by.
    pub recipe: Recipe,
    /// How much of each hit's text was returned.
    pub bodies: Bodies,
    /// The namespaces whose memories were searched, the call's first (at
    /// most the server's fan-out cap).
    pub namespaces: Vec<String>,
    /// Memories, best first.
    pub memory: Vec<MemoryHit>,
    /// Profile sections.
    pub profile: Vec<ProfileHit>,
    /// Document passages (none yet: the knowledge plane is not built).
    pub knowledge: Vec<serde_json::Value>,
    /// Conversation turns (none yet: the conversations plane is not built).
    pub conversations: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bodies_return_whole_texts() {
        assert_eq!(Bodies::lenient(None), Bodies::Full);
        assert_eq!(Bodies::lenient(Some("SNIPPET")), Bodies::Snippet);
        assert_eq!(Bodies::lenient(Some(" none ")), Bodies::None);
        assert_eq!(Bodies::lenient(Some("summaries")), Bodies::Full);
    }

    #[test]
    fn a_snippet_ends_at_a_word_near_its_length() {
        let short = "Deploys happen on Tuesdays.".to_owned();
        assert_eq!(Bodies::Snippet.apply(short.clone()), short);
        let words = "deploy ".repeat(60); // 420 characters
        let cut = Bodies::Snippet.apply(words);
        assert!(cut.ends_with("deploy…"), "{cut}");
        assert!(cut.chars().count() <= SNIPPET_CHARS + 1);
        // No space near the end: cut at the count, inside a character-safe boundary.
        let long = "é".repeat(300);
        let cut = Bodies::Snippet.apply(long);
        assert_eq!(cut.chars().count(), SNIPPET_CHARS + 1);
        assert!(cut.ends_with("é…"));
        assert_eq!(Bodies::None.apply("text".into()), "");
    }

    #[test]
    fn a_word_ending_at_the_count_is_kept_and_trailing_space_is_no_cut() {
        // "okapi ", 38 × "abcd " and "abcd": the last ends at character 200.
        let text = format!("okapi {}abcd", "abcd ".repeat(38));
        assert_eq!(text.chars().count(), 200);
        let more = format!("{text} more words");
        assert_eq!(Bodies::Snippet.apply(more), format!("{text}…"));
        assert_eq!(Bodies::Snippet.apply(format!("{text}   ")), text);
    }
}
