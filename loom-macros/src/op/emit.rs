//! Writes the registry entry beside the handler: a name check, a shim that
//! decodes, calls and encodes, type checks spanned on the author's types,
//! and the `inventory` submission. Generated code names only
//! `::loom_core::__private`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

use super::check::ValidatedOpAttr;
use super::sig::Handler;

/// The handler's doc comment, one leading space per line removed.
fn doc_of(func: &ItemFn) -> String {
    let lines: Vec<String> = func
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').map(str::to_owned).unwrap_or(l))
        .collect();
    lines.join("\n").trim().to_owned()
}

pub(crate) fn entry(attr: &ValidatedOpAttr, handler: &Handler, func: &ItemFn) -> TokenStream {
    let lp = quote!(::loom_core::__private);
    let fn_ident = &func.sig.ident;
    let fn_name = fn_ident.to_string();
    let input = &handler.input;
    let ret = &handler.ret;

    let (name, name_check) = match &attr.name {
        Some(lit) => (
            quote!(#lp::OpName::Explicit(#lit)),
            quote_spanned!(lit.span()=> const _: () = ::loom_core::__private::check_op_name(#lit);),
        ),
        None => (
            quote!(#lp::OpName::Derived { module_path: ::core::module_path!(), handler: #fn_name }),
            quote_spanned!(fn_ident.span()=>
                const _: () = ::loom_core::__private::check_derived_name(::core::module_path!(), #fn_name);
            ),
        ),
    };
    let role = &attr.role;
    let role = quote_spanned!(role.span()=> ::loom_core::role::#role);
    let toolsets = attr
        .toolsets
        .iter()
        .map(|t| quote_spanned!(t.span()=> ::loom_core::toolset::#t));
    let maturity = match &attr.maturity {
        Some(m) => quote_spanned!(m.span()=> ::loom_core::maturity::#m),
        None => quote!(::loom_core::maturity::stable),
    };
    let rate = match &attr.rate {
        Some(r) => {
            let path = quote_spanned!(r.span()=> ::loom_core::rate::#r);
            quote!(::core::option::Option::Some(#path))
        }
        None => quote!(::core::option::Option::None),
    };
    let mcp = match &attr.mcp_hidden {
        Some(instead) => quote!(#lp::McpVisibility::Hidden { instead: #instead }),
        None if attr.synthetic => quote!(#lp::McpVisibility::Synthetic),
        None => quote!(#lp::McpVisibility::Callable),
    };
    let tool = match &attr.tool {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    };
    let budget = match attr.budget_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let (idempotent, audit, writes, destructive, run_scoped) = (
        attr.idempotent,
        attr.audit,
        attr.writes,
        attr.destructive,
        attr.run_scoped,
    );
    let doc = doc_of(func);
    let input_info = quote_spanned!(input.span()=> #lp::input_info::<#input>());
    let output_info =
        quote_spanned!(ret.span()=> #lp::output_info::<<#ret as #lp::OpReturn>::Output>());

    quote_spanned! {fn_ident.span()=>
        #[doc(hidden)]
        #[allow(non_upper_case_globals, clippy::all)]
        const _: () = {
            #name_check

            fn __loom_op_shim<'a>(
                cx: &'a #lp::OpCx,
                args: #lp::Value,
            ) -> #lp::BoxFuture<'a, #lp::OpResult<#lp::Output>> {
                ::std::boxed::Box::pin(async move {
                    let input: #input = #lp::decode(args)?;
                    #lp::encode::<<#ret as #lp::OpReturn>::Output>(#fn_ident(cx, input).await)
                })
            }

            #[allow(dead_code)]
            fn __loom_op_send_check(cx: &#lp::OpCx, input: #input) {
                #lp::assert_send(&#fn_ident(cx, input));
            }

            static __LOOM_OP_META: #lp::OpMeta = #lp::OpMeta {
                name: #name,
                handler: #fn_name,
                role: #role,
                idempotent: #idempotent,
                audit: #audit,
                writes: #writes,
                destructive: #destructive,
                toolsets: &[#(#toolsets),*],
                maturity: #maturity,
                mcp: #mcp,
                budget_ms: #budget,
                rate: #rate,
                run_scoped: #run_scoped,
                tool: #tool,
                doc: #doc,
                input: #input_info,
                output: #output_info,
                call: __loom_op_shim,
                file: ::core::file!(),
                line: ::core::line!(),
            };

            #lp::inventory::submit! { #lp::OpEntry(&__LOOM_OP_META) }
        };
    }
}
