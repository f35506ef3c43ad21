//! Rate-limit classes: `rate = "read" | "write" | "heavy"` expands to these
//! constants. An op that names none is `read` when its role is viewer and it
//! changes nothing, else `write`.
#![allow(non_upper_case_globals)]

/// The bucket a call draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateClass {
    /// Cheap reads.
    Read,
    /// Writes.
    Write,
    /// Expensive calls (bulk changes, packs, wide searches).
    Heavy,
}

/// `rate = "read"`.
pub const read: RateClass = RateClass::Read;
/// `rate = "write"`.
pub const write: RateClass = RateClass::Write;
/// `rate = "heavy"`.
pub const heavy: RateClass = RateClass::Heavy;

impl RateClass {
    /// Every class.
    pub const ALL: [RateClass; 3] = [RateClass::Read, RateClass::Write, RateClass::Heavy];

    /// The lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            RateClass::Read => "read",
            RateClass::Write => "write",
            RateClass::Heavy => "heavy",
        }
    }
}
