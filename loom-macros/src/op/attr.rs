//! Parses the attribute into per-key slots that remember the tokens that set
//! them, so "duplicate key" and "unknown key" point at the key itself.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Ident, LitBool, LitInt, LitStr};

use crate::ctxt::Ctxt;

/// Every key the attribute takes.
pub(crate) const KEYS: &[&str] = &[
    "name",
    "role",
    "idempotent",
    "audit",
    "writes",
    "destructive",
    "toolsets",
    "maturity",
    "mcp_hidden",
    "budget_ms",
    "rate",
    "run_scoped",
    "tool",
    "synthetic",
];

/// A key's value and the span of the key that set it.
pub(crate) struct Slot<T> {
    pub(crate) value: Option<(Span, T)>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot { value: None }
    }
}

impl<T> Slot<T> {
    fn set(&mut self, cx: &mut Ctxt, key: &Ident, value: T) {
        if self.value.is_some() {
            cx.error_spanned_by(key, format!("duplicate `#[loom_op]` key `{key}`"));
        } else {
            self.value = Some((key.span(), value));
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.value.as_ref().map(|(_, v)| v)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

/// The attribute as written.
#[derive(Default)]
pub(crate) struct OpAttr {
    pub(crate) name: Slot<LitStr>,
    pub(crate) role: Slot<LitStr>,
    pub(crate) idempotent: Slot<()>,
    pub(crate) audit: Slot<()>,
    pub(crate) writes: Slot<()>,
    pub(crate) destructive: Slot<()>,
    pub(crate) toolsets: Slot<Vec<Ident>>,
    pub(crate) maturity: Slot<LitStr>,
    pub(crate) mcp_hidden: Slot<LitStr>,
    pub(crate) budget_ms: Slot<LitInt>,
    pub(crate) rate: Slot<LitStr>,
    pub(crate) run_scoped: Slot<LitBool>,
    pub(crate) tool: Slot<LitStr>,
    pub(crate) synthetic: Slot<()>,
}

pub(crate) fn parse(cx: &mut Ctxt, tokens: TokenStream) -> OpAttr {
    let mut attr = OpAttr::default();
    let parser = syn::meta::parser(|meta| parse_key(cx, &mut attr, meta));
    if let Err(e) = parser.parse2(tokens) {
        cx.push(e);
    }
    attr
}

fn parse_key(cx: &mut Ctxt, attr: &mut OpAttr, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
    let Some(key) = meta.path.get_ident().cloned() else {
        cx.error_spanned_by(&meta.path, "unknown `#[loom_op]` key");
        return skip_value(&meta);
    };
    match key.to_string().as_str() {
        "name" => attr.name.set(cx, &key, meta.value()?.parse()?),
        "role" => attr.role.set(cx, &key, meta.value()?.parse()?),
        "maturity" => attr.maturity.set(cx, &key, meta.value()?.parse()?),
        "mcp_hidden" => attr.mcp_hidden.set(cx, &key, meta.value()?.parse()?),
        "rate" => attr.rate.set(cx, &key, meta.value()?.parse()?),
        "budget_ms" => attr.budget_ms.set(cx, &key, meta.value()?.parse()?),
        "run_scoped" => attr.run_scoped.set(cx, &key, meta.value()?.parse()?),
        "tool" => attr.tool.set(cx, &key, meta.value()?.parse()?),
        "idempotent" => flag(cx, &mut attr.idempotent, &key, &meta)?,
        "audit" => flag(cx, &mut attr.audit, &key, &meta)?,
        "writes" => flag(cx, &mut attr.writes, &key, &meta)?,
        "destructive" => flag(cx, &mut attr.destructive, &key, &meta)?,
        "synthetic" => flag(cx, &mut attr.synthetic, &key, &meta)?,
        "toolsets" => {
            let mut list = Vec::new();
            meta.parse_nested_meta(|inner| {
                match inner.path.get_ident() {
                    Some(ident) => list.push(ident.clone()),
                    None => {
                        cx.error_spanned_by(&inner.path, "a toolset is one name, such as `core`")
                    }
                }
                Ok(())
            })?;
            attr.toolsets.set(cx, &key, list);
        }
        other => {
            cx.error_spanned_by(
                &key,
                format!(
                    "unknown `#[loom_op]` key `{other}`\nnote: expected one of {}",
                    KEYS.join(", ")
                ),
            );
            skip_value(&meta)?;
        }
    }
    Ok(())
}

fn flag(
    cx: &mut Ctxt,
    slot: &mut Slot<()>,
    key: &Ident,
    meta: &ParseNestedMeta<'_>,
) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(
            key,
            format!("`{key}` is a flag: write it alone, without a value"),
        );
        return skip_value(meta);
    }
    slot.set(cx, key, ());
    Ok(())
}

/// Consumes an unknown key's value so parsing can go on to the next key.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
    }
    Ok(())
}
