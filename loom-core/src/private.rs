//! What `#[loom_op]` expansions name. Not a public API: everything here may
//! change without notice.

pub use crate::cx::OpCx;
pub use crate::error::{LoomError, OpResult};
pub use crate::naming::{check_derived_name, check_op_name};
pub use crate::op::{BoxFuture, McpVisibility, OpEntry, OpMeta, OpName, TypeInfo};
pub use crate::output::Output;
pub use inventory;
pub use serde_json::Value;

use crate::error::ErrorCode;

/// The input of an op handler.
#[diagnostic::on_unimplemented(
    message = "`#[loom_op]` input `{Self}` must be `serde::Deserialize` and `schemars::JsonSchema`",
    label = "derive `Deserialize` and `JsonSchema` on this type"
)]
pub trait OpInput: serde::de::DeserializeOwned + schemars::JsonSchema {}
impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> OpInput for T {}

/// The output of an op handler (owned and `Send`: the transport writes it
/// after the handler has returned, on whichever thread).
#[diagnostic::on_unimplemented(
    message = "`#[loom_op]` output `{Self}` must be `serde::Serialize`, `schemars::JsonSchema`, `Send` and owned",
    label = "derive `Serialize` and `JsonSchema` on this type"
)]
pub trait OpOutput: serde::Serialize + schemars::JsonSchema + Send + 'static {}
impl<T: serde::Serialize + schemars::JsonSchema + Send + 'static> OpOutput for T {}

/// The return type of an op handler: `OpResult<Output>`.
#[diagnostic::on_unimplemented(
    message = "`#[loom_op]` handlers return `OpResult<Output>`, not `{Self}`",
    label = "return `loom_core::OpResult<YourOutput>`"
)]
pub trait OpReturn {
    /// The output.
    type Output;
}
impl<T> OpReturn for Result<T, LoomError> {
    type Output = T;
}

/// The `TypeInfo` of an input type.
pub const fn input_info<T: OpInput>() -> TypeInfo {
    TypeInfo::of::<T>()
}

/// The `TypeInfo` of an output type.
pub const fn output_info<T: OpOutput>() -> TypeInfo {
    TypeInfo::of::<T>()
}

/// Asserts a handler's future is `Send` (the server runs it on any worker).
pub fn assert_send<F: std::future::Future + Send>(_: &F) {}

/// Decodes the arguments (already checked against the schema).
pub fn decode<T: OpInput>(args: Value) -> OpResult<T> {
    serde_json::from_value(args).map_err(|e| {
        LoomError::new(
            ErrorCode::InvalidArguments,
            format!("invalid arguments: {e}"),
        )
    })
}

/// Wraps the output, to be written by the transport.
pub fn encode<T: OpOutput>(out: OpResult<T>) -> OpResult<Output> {
    out.map(Output::new)
}
