//! Protocol revisions Loom serves, negotiation, and the `MCP-Protocol-Version` check.

use serde_json::{Value, json};

/// A served revision, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// 2024-11-05: no annotations, no titles.
    V2024_11_05,
    /// 2025-03-26: annotations, batching.
    V2025_03_26,
    /// 2025-06-18: titles, `outputSchema`, `structuredContent`.
    V2025_06_18,
    /// 2025-11-25: the newest Loom serves.
    V2025_11_25,
}

/// Every served revision, newest first (as `data.supported` lists them).
pub const SUPPORTED: [Revision; 4] = [
    Revision::V2025_11_25,
    Revision::V2025_06_18,
    Revision::V2025_03_26,
    Revision::V2024_11_05,
];

/// What a session is assumed to speak when nothing says otherwise.
pub const ASSUMED: Revision = Revision::V2025_03_26;

impl Revision {
    /// The date string.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
        }
    }

    /// A served revision from its date string.
    pub fn parse(s: &str) -> Option<Revision> {
        SUPPORTED.into_iter().find(|r| r.as_str() == s.trim())
    }

    /// What `initialize` answers: the client's revision when served, else the newest.
    pub fn negotiate(requested: Option<&str>) -> Revision {
        requested
            .and_then(Revision::parse)
            .unwrap_or(Revision::V2025_11_25)
    }

    /// Tool annotations exist from 2025-03-26.
    pub fn has_annotations(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Titles, `outputSchema` and `structuredContent` exist from 2025-06-18.
    pub fn has_structured_output(self) -> bool {
        self >= Revision::V2025_06_18
    }
}

/// The served revisions as strings.
pub fn supported_strings() -> Vec<&'static str> {
    SUPPORTED.iter().map(|r| r.as_str()).collect()
}

/// The `-32022` error data for an unserved `MCP-Protocol-Version` header:
/// `supported` and `requested`, which the Python SDK needs both of.
pub fn unsupported_data(requested: &str) -> Value {
    json!({"supported": supported_strings(), "requested": requested})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_answers_the_clients_revision_or_the_newest() {
        assert_eq!(
            Revision::negotiate(Some("2024-11-05")),
            Revision::V2024_11_05
        );
        assert_eq!(
            Revision::negotiate(Some("2025-06-18")).as_str(),
            "2025-06-18"
        );
        assert_eq!(
            Revision::negotiate(Some("2026-07-28")),
            Revision::V2025_11_25
        );
        assert_eq!(Revision::negotiate(None), Revision::V2025_11_25);
    }

    #[test]
    fn features_by_revision() {
        assert!(!Revision::V2024_11_05.has_annotations());
        assert!(Revision::V2025_03_26.has_annotations());
        assert!(!Revision::V2025_03_26.has_structured_output());
        assert!(Revision::V2025_11_25.has_structured_output());
    }

    #[test]
    fn unsupported_data_lists_both() {
        let d = unsupported_data("2026-07-28");
        assert_eq!(d["requested"], "2026-07-28");
        assert_eq!(d["supported"][0], "2025-11-25");
        assert_eq!(d["supported"].as_array().unwrap().len(), 4);
    }
}
