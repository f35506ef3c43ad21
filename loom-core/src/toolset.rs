//! Toolsets: which rosters list an op, and what a connection's `?toolset=` selects.
//!
//! `toolsets(core, coding)` in `#[loom_op]` expands to the lowercase constants
//! below, so an unknown toolset is rustc's "cannot find value" error on the
//! attribute's own token. `readonly` and `all` are derived from the registry
//! and never declared; the attribute refuses them.
#![allow(non_upper_case_globals)]

use std::collections::BTreeSet;
use std::fmt;

/// A curated roster an op can declare membership of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Toolset {
    /// The memory loop, for chat clients (the default listing).
    Core,
    /// Coding agents.
    Coding,
    /// Sessions working a failing test, crash or PR.
    Tracker,
    /// A session acting as an agent with a task inbox.
    Tasks,
    /// Minimal, policy-shaped agents.
    Atomic,
    /// Reads for investigating Loom on a person's behalf.
    Assistant,
}

/// `toolsets(core)`.
pub const core: Toolset = Toolset::Core;
/// `toolsets(coding)`.
pub const coding: Toolset = Toolset::Coding;
/// `toolsets(tracker)`.
pub const tracker: Toolset = Toolset::Tracker;
/// `toolsets(tasks)`.
pub const tasks: Toolset = Toolset::Tasks;
/// `toolsets(atomic)`.
pub const atomic: Toolset = Toolset::Atomic;
/// `toolsets(assistant)`.
pub const assistant: Toolset = Toolset::Assistant;

impl Toolset {
    /// Every declarable toolset.
    pub const ALL: [Toolset; 6] = [
        Toolset::Core,
        Toolset::Coding,
        Toolset::Tracker,
        Toolset::Tasks,
        Toolset::Atomic,
        Toolset::Assistant,
    ];

    /// The rosters that combine in a union (`coding+tracker`).
    pub const CURATED: [Toolset; 5] = [
        Toolset::Core,
        Toolset::Coding,
        Toolset::Tracker,
        Toolset::Tasks,
        Toolset::Atomic,
    ];

    /// The lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Toolset::Core => "core",
            Toolset::Coding => "coding",
            Toolset::Tracker => "tracker",
            Toolset::Tasks => "tasks",
            Toolset::Atomic => "atomic",
            Toolset::Assistant => "assistant",
        }
    }

    fn curated_from_str(s: &str) -> Option<Toolset> {
        Toolset::CURATED.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a connection lists: a union of curated rosters, or one whole surface.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Listing {
    /// One or more curated rosters (`core`, `coding+tracker`).
    Curated(BTreeSet<Toolset>),
    /// The `all` listing minus every tool whose readOnlyHint is false;
    /// `loom_op` routes reads only.
    Readonly,
    /// The fixed reads of the assistant toolset; nothing else is callable.
    Assistant,
    /// Every non-hidden stable op plus the experimental ops core or atomic list.
    All,
}

impl Listing {
    /// The default listing: `core`.
    pub fn core() -> Listing {
        Listing::Curated(BTreeSet::from([Toolset::Core]))
    }

    /// Parses a `?toolset=` value. `None` for an unknown value: the caller
    /// falls back to the deployment default, so a typo never widens or
    /// narrows a listing silently.
    ///
    /// Curated rosters join with `+`, `,` or a space (an unescaped `+`
    /// arrives as a space); `all`, `readonly` and `assistant` are whole
    /// surfaces and join nothing; an unknown part makes the whole value
    /// unknown. Case does not matter.
    pub fn parse(value: &str) -> Option<Listing> {
        let value = value.trim().to_ascii_lowercase();
        match value.as_str() {
            "all" => return Some(Listing::All),
            "readonly" => return Some(Listing::Readonly),
            "assistant" => return Some(Listing::Assistant),
            _ => {}
        }
        let mut set = BTreeSet::new();
        for part in value.split(['+', ',', ' ']) {
            if part.is_empty() {
                continue;
            }
            set.insert(Toolset::curated_from_str(part)?);
        }
        (!set.is_empty()).then_some(Listing::Curated(set))
    }

    /// Parses a `?toolset=` value, falling back to `default` when unknown or absent.
    pub fn resolve(value: Option<&str>, default: &Listing) -> Listing {
        value
            .and_then(Listing::parse)
            .unwrap_or_else(|| default.clone())
    }

    /// The canonical name (`coding+tracker`, `readonly`, …).
    pub fn name(&self) -> String {
        match self {
            Listing::Curated(set) => set.iter().map(|t| t.as_str()).collect::<Vec<_>>().join("+"),
            Listing::Readonly => "readonly".into(),
            Listing::Assistant => "assistant".into(),
            Listing::All => "all".into(),
        }
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curated(ts: &[Toolset]) -> Option<Listing> {
        Some(Listing::Curated(ts.iter().copied().collect()))
    }

    #[test]
    fn single_rosters_parse() {
        assert_eq!(Listing::parse("core"), curated(&[Toolset::Core]));
        assert_eq!(Listing::parse("tasks"), curated(&[Toolset::Tasks]));
        assert_eq!(Listing::parse("all"), Some(Listing::All));
        assert_eq!(Listing::parse("readonly"), Some(Listing::Readonly));
        assert_eq!(Listing::parse("ASSISTANT"), Some(Listing::Assistant));
    }

    #[test]
    fn unions_join_with_plus_comma_or_space() {
        let want = curated(&[Toolset::Coding, Toolset::Tracker]);
        assert_eq!(Listing::parse("coding+tracker"), want);
        assert_eq!(Listing::parse("coding,tracker"), want);
        assert_eq!(Listing::parse("coding tracker"), want);
        assert_eq!(Listing::parse("tracker+coding+coding"), want);
        assert_eq!(want.unwrap().name(), "coding+tracker");
    }

    #[test]
    fn unknown_parts_and_whole_surfaces_do_not_join() {
        assert_eq!(Listing::parse("coding+trakcer"), None);
        assert_eq!(Listing::parse("assistant+core"), None);
        assert_eq!(Listing::parse("all+core"), None);
        assert_eq!(Listing::parse("readonly,core"), None);
        assert_eq!(Listing::parse(""), None);
        assert_eq!(Listing::parse("+"), None);
        assert_eq!(Listing::parse("asistant"), None);
    }

    #[test]
    fn resolve_falls_back_to_the_default() {
        let default = Listing::parse("atomic").unwrap();
        assert_eq!(Listing::resolve(Some("nope"), &default), default);
        assert_eq!(Listing::resolve(None, &default), default);
        assert_eq!(Listing::resolve(Some("all"), &default), Listing::All);
    }
}
