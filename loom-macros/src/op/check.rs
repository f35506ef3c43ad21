//! Checks the keys against each other and turns literals into the idents
//! the expansion points at. Which values exist is `loom-core`'s business:
//! a literal only has to look like a name here.

use proc_macro2::Span;
use syn::{Ident, ItemFn, LitStr};

use super::attr::OpAttr;
use crate::ctxt::Ctxt;

/// Toolsets derived from the registry, never declared.
const DERIVED_TOOLSETS: &[&str] = &["readonly", "all"];

pub(crate) struct ValidatedOpAttr {
    pub(crate) name: Option<LitStr>,
    pub(crate) role: Ident,
    pub(crate) idempotent: bool,
    pub(crate) audit: bool,
    pub(crate) writes: bool,
    pub(crate) destructive: bool,
    pub(crate) toolsets: Vec<Ident>,
    pub(crate) maturity: Option<Ident>,
    pub(crate) mcp_hidden: Option<LitStr>,
    pub(crate) budget_ms: Option<u32>,
    pub(crate) rate: Option<Ident>,
    pub(crate) run_scoped: bool,
    pub(crate) tool: Option<LitStr>,
    pub(crate) synthetic: bool,
}

/// A string literal naming a value of a closed set, as an ident spanned on
/// the literal, so rustc resolves it in `loom_core::<module>`.
fn value_ident(cx: &mut Ctxt, lit: &LitStr, what: &str, allowed: &str) -> Option<Ident> {
    let value = lit.value();
    let ident_like = value.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ident_like {
        Some(Ident::new(&value, lit.span()))
    } else {
        cx.error_spanned_by(
            lit,
            format!("unknown {what} {value:?}\nnote: expected one of {allowed}"),
        );
        None
    }
}

pub(crate) fn validate(cx: &mut Ctxt, raw: OpAttr, func: &ItemFn) -> Option<ValidatedOpAttr> {
    let role = match raw.role.get() {
        Some(lit) => value_ident(cx, lit, "role", "\"viewer\", \"writer\", \"admin\""),
        None => {
            cx.push(syn::Error::new(
                Span::call_site(),
                format!(
                    "`#[loom_op]` handler `{}` needs a minimum role: `role = \"viewer\"`, `\"writer\"` or `\"admin\"`",
                    func.sig.ident
                ),
            ));
            None
        }
    };
    let maturity = raw
        .maturity
        .get()
        .and_then(|lit| value_ident(cx, lit, "maturity", "\"stable\", \"experimental\""));
    let rate = raw
        .rate
        .get()
        .and_then(|lit| value_ident(cx, lit, "rate class", "\"read\", \"write\", \"heavy\""));

    let mut toolsets: Vec<Ident> = Vec::new();
    for ident in raw.toolsets.get().into_iter().flatten() {
        let s = ident.to_string();
        if DERIVED_TOOLSETS.contains(&s.as_str()) {
            cx.error_spanned_by(
                ident,
                format!("toolset `{s}` is derived from the registry, never declared\nnote: `readonly` lists every read-only op of `all`; `all` lists every stable op"),
            );
        } else if toolsets.iter().any(|t| t == ident) {
            cx.error_spanned_by(ident, format!("duplicate toolset `{s}`"));
        } else {
            toolsets.push(ident.clone());
        }
    }

    let mcp_hidden = raw.mcp_hidden.get().cloned();
    if let Some(lit) = &mcp_hidden {
        if lit.value().trim().is_empty() {
            cx.error_spanned_by(
                lit,
                "`mcp_hidden` says what to use instead; it cannot be empty",
            );
        }
        if let Some(listed) = toolsets.iter().find(|t| *t != "assistant") {
            cx.error_spanned_by(
                listed,
                format!("a hidden op is listed on no toolset but `assistant`; remove `{listed}` or `mcp_hidden`"),
            );
        }
    }

    let budget_ms = match raw.budget_ms.get() {
        Some(lit) => match lit.base10_parse::<u32>() {
            Ok(0) => {
                cx.error_spanned_by(lit, "`budget_ms` must be greater than zero");
                None
            }
            Ok(ms) => Some(ms),
            Err(e) => {
                cx.error_spanned_by(
                    lit,
                    format!("`budget_ms` must be a whole number of milliseconds: {e}"),
                );
                None
            }
        },
        None => None,
    };

    // The MCP tool name, when not the one the op name gives (`loom_` and
    // the name with dots as underscores): what MCP's tool name rules allow,
    // in Loom's own prefix.
    let tool = raw.tool.get().cloned();
    if let Some(lit) = &tool {
        let value = lit.value();
        let well_formed = value.len() <= 64
            && value.strip_prefix("loom_").is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        if !well_formed {
            cx.error_spanned_by(
                lit,
                format!("tool name {value:?} must be `loom_` and lowercase letters, digits or `_`, at most 64 bytes"),
            );
        }
    }

    // A synthetic tool is listed by the transport on every listing but
    // assistant's, under its own name: rosters and hiding would contradict it.
    let synthetic = raw.synthetic.value.as_ref().map(|(span, ())| *span);
    if let Some(span) = synthetic {
        if tool.is_none() {
            cx.push(syn::Error::new(
                span,
                "a synthetic tool needs its tool name: add `tool = \"loom_…\"`",
            ));
        }
        if let Some(listed) = toolsets.first() {
            cx.error_spanned_by(
                listed,
                format!("a synthetic tool is listed on every toolset but `assistant`; remove `{listed}` or `synthetic`"),
            );
        }
        if let Some(lit) = &mcp_hidden {
            cx.error_spanned_by(
                lit,
                "a synthetic tool is listed on MCP; remove `mcp_hidden` or `synthetic`",
            );
        }
    }

    Some(ValidatedOpAttr {
        name: raw.name.get().cloned(),
        role: role?,
        idempotent: raw.idempotent.is_set(),
        audit: raw.audit.is_set(),
        writes: raw.writes.is_set(),
        destructive: raw.destructive.is_set(),
        toolsets,
        maturity,
        mcp_hidden,
        budget_ms,
        rate,
        run_scoped: raw.run_scoped.get().is_none_or(|b| b.value),
        tool,
        synthetic: synthetic.is_some(),
    })
}
