//! The `#[loom_op]` attribute. Thin by design: it parses the attribute,
//! checks what the attribute alone can tell, and emits a registry entry
//! beside the untouched handler. Every closed set (roles, toolsets,
//! maturities, rate classes) and every naming rule lives in `loom-core`;
//! the expansion points at them so rustc reports mistakes on the author's
//! own tokens. Documented on `loom_core::loom_op`.

mod ctxt;
mod op;

use proc_macro::TokenStream;

/// Registers an async handler as a Loom operation. See `loom_core` for the keys.
#[proc_macro_attribute]
pub fn loom_op(attr: TokenStream, item: TokenStream) -> TokenStream {
    op::expand(attr.into(), item.into()).into()
}
