//! Op maturity: `maturity = "stable" | "experimental"` expands to these constants.
#![allow(non_upper_case_globals)]

/// How settled an op is. Experimental ops are left out of the `all` listing
/// unless the core or atomic roster lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Maturity {
    /// Settled.
    Stable,
    /// May change.
    Experimental,
}

/// `maturity = "stable"` (the default).
pub const stable: Maturity = Maturity::Stable;
/// `maturity = "experimental"`.
pub const experimental: Maturity = Maturity::Experimental;

impl Maturity {
    /// The lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Maturity::Stable => "stable",
            Maturity::Experimental => "experimental",
        }
    }
}
