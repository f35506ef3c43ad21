//! Checks the handler's shape: `async fn name(cx: &OpCx, input: In) -> OpResult<Out>`.
//! Types are left to rustc (see `emit`), spanned on the author's tokens.

use proc_macro2::Span;
use syn::{FnArg, ItemFn, ReturnType, Type};

use crate::ctxt::Ctxt;

const USAGE: &str =
    "`#[loom_op]` handlers look like `async fn name(cx: &OpCx, input: Input) -> OpResult<Output>`";

pub(crate) struct Handler {
    pub(crate) input: Type,
    pub(crate) ret: Type,
}

pub(crate) fn check(cx: &mut Ctxt, func: &ItemFn) -> Option<Handler> {
    let sig = &func.sig;
    let name = &sig.ident;
    let mut errors = Ctxt::default();
    if sig.asyncness.is_none() {
        errors.error_spanned_by(
            sig.fn_token,
            format!("`#[loom_op]` handler `{name}` must be async"),
        );
    }
    if let Some(c) = &sig.constness {
        errors.error_spanned_by(c, format!("`#[loom_op]` handler `{name}` cannot be const"));
    }
    if let Some(u) = &sig.unsafety {
        errors.error_spanned_by(u, format!("`#[loom_op]` handler `{name}` cannot be unsafe"));
    }
    if let Some(abi) = &sig.abi {
        errors.error_spanned_by(
            abi,
            format!("`#[loom_op]` handler `{name}` cannot have an ABI"),
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.error_spanned_by(
            &sig.generics,
            format!("`#[loom_op]` handler `{name}` cannot be generic"),
        );
    }
    if let Some(v) = &sig.variadic {
        errors.error_spanned_by(
            v,
            format!("`#[loom_op]` handler `{name}` cannot be variadic"),
        );
    }
    let mut typed = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(r) => errors.error_spanned_by(
                r,
                format!("`#[loom_op]` handler `{name}` is a free function; it cannot take `self`"),
            ),
            FnArg::Typed(t) => typed.push(t),
        }
    }
    if typed.len() != 2 && !sig.inputs.iter().any(|a| matches!(a, FnArg::Receiver(_))) {
        errors.push(syn::Error::new(
            sig.paren_token.span.join(),
            format!("`#[loom_op]` handler `{name}` takes exactly two arguments, `cx: &OpCx` and its input; found {}", typed.len()),
        ));
    }
    if let Some(first) = typed.first()
        && !matches!(&*first.ty, Type::Reference(r) if r.mutability.is_none())
    {
        errors.error_spanned_by(
            &first.ty,
            format!("the first argument of `{name}` is the call context, `cx: &OpCx`"),
        );
    }
    let ret = match &sig.output {
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => {
            errors.error_spanned_by(
                &sig.ident,
                format!("`#[loom_op]` handler `{name}` must return `OpResult<Output>`"),
            );
            None
        }
    };
    if errors.has_errors() {
        // One extra error first shows the accepted signature.
        cx.push(syn::Error::new(Span::call_site(), USAGE));
        cx.extend(errors);
        return None;
    }
    Some(Handler {
        input: (*typed[1].ty).clone(),
        ret: ret?,
    })
}
