//! `#[loom_op]`: parse (`attr`), check the handler (`sig`) and the keys
//! against each other (`check`), then emit (`emit`).

mod attr;
mod check;
mod emit;
mod sig;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;

/// Expands `#[loom_op(attr)] item`. A broken attribute emits the original
/// item plus its errors and no entry, so call sites don't cascade.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let func = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(_) => {
            cx.error_spanned_by(
                &item,
                "`#[loom_op]` goes on an `async fn name(cx: &OpCx, input: Input) -> OpResult<Output>`",
            );
            let errors = cx.into_compile_errors();
            return quote! { #errors #item };
        }
    };
    let raw = attr::parse(&mut cx, attr);
    let handler = sig::check(&mut cx, &func);
    let validated = check::validate(&mut cx, raw, &func);
    match (validated, handler) {
        (Some(attr), Some(handler)) if !cx.has_errors() => {
            let entry = emit::entry(&attr, &handler, &func);
            quote! { #func #entry }
        }
        _ => {
            let errors = cx.into_compile_errors();
            quote! { #errors #func }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(tokens: TokenStream) -> String {
        prettyplease::unparse(&syn::parse2(tokens).expect("expansion parses as a file"))
    }

    #[test]
    fn golden_minimal() {
        let out = expand(
            quote! { role = "viewer", idempotent },
            quote! {
                async fn capabilities(cx: &OpCx, input: Empty) -> OpResult<Caps> { todo() }
            },
        );
        expectorate::assert_contents("tests/output/minimal.rs", &pretty(out));
    }

    #[test]
    fn golden_full() {
        let out = expand(
            quote! {
                name = "memory.get", role = "viewer", idempotent, audit, writes, destructive,
                toolsets(assistant), maturity = "experimental", mcp_hidden = "use loom_search",
                budget_ms = 250, rate = "heavy", run_scoped = false, tool = "loom_memory_read"
            },
            quote! {
                /// Reads one memory.
                ///
                /// Second paragraph.
                pub async fn memory_get(cx: &OpCx, input: MemoryGet) -> OpResult<MemoryGot> { todo() }
            },
        );
        expectorate::assert_contents("tests/output/full.rs", &pretty(out));
    }

    #[test]
    fn broken_attributes_emit_no_entry() {
        let out = expand(
            quote! { role = "viewer", bogus },
            quote! { async fn f(cx: &OpCx, i: I) -> OpResult<O> {} },
        );
        let s = out.to_string();
        assert!(s.contains("compile_error"), "{s}");
        assert!(!s.contains("OpMeta"), "{s}");
        assert!(s.contains("async fn f"), "{s}");
    }
}
