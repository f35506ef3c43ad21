//! Collects every error an attribute has, so one compile shows them all.

use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Vec<syn::Error>,
}

impl Ctxt {
    /// An error spanned on `tokens`.
    pub(crate) fn error_spanned_by(&mut self, tokens: impl ToTokens, msg: impl Display) {
        self.errors.push(syn::Error::new_spanned(tokens, msg));
    }

    /// An error already built.
    pub(crate) fn push(&mut self, err: syn::Error) {
        self.errors.push(err);
    }

    /// Takes every error of another context.
    pub(crate) fn extend(&mut self, other: Ctxt) {
        self.errors.extend(other.errors);
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Every error as `compile_error!` invocations.
    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.errors
            .into_iter()
            .map(|e| e.to_compile_error())
            .collect()
    }
}
