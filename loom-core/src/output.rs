//! An op's answer, kept as the handler made it until a transport writes it.
//!
//! Why: a transport wants text (MCP's lean `structuredContent`, `/v1`'s
//! full body, the stored idempotent answer), and going through a
//! `serde_json::Value` first allocated and hashed every key of the output
//! into a map, walked it to trim it and walked it again to write it: ~10% of
//! a `memory.get`'s instructions. An output written straight to text skips
//! all of that; a caller that does want a `Value` (a search's summary, a
//! test) still gets one.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::error::{LoomError, OpResult};
use crate::lean::{self, Marked};

/// What an op answered: its typed output, or a JSON value (an answer
/// replayed from its stored text, a handler built on values).
pub struct Output(Repr);

enum Repr {
    Value(Value),
    Typed(Box<dyn Typed>),
}

/// A typed output, written on demand (`T: Serialize`, type-erased).
trait Typed: Send {
    fn to_value(&self) -> serde_json::Result<Value>;
    fn json(&self) -> serde_json::Result<String>;
    fn lean_json(&self) -> serde_json::Result<Marked>;
}

impl<T: Serialize + Send> Typed for T {
    fn to_value(&self) -> serde_json::Result<Value> {
        serde_json::to_value(self)
    }

    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }

    fn lean_json(&self) -> serde_json::Result<Marked> {
        lean::lean_json(self)
    }
}

/// An output that cannot be written as JSON (a map with keys that are not
/// strings, a `Serialize` impl that fails): the op's fault, not the caller's.
fn unwritable(e: serde_json::Error) -> LoomError {
    LoomError::internal(format!("the op's output cannot be written as JSON: {e}"))
}

impl Output {
    /// A handler's typed output.
    pub fn new<T: Serialize + Send + 'static>(output: T) -> Output {
        Output(Repr::Typed(Box::new(output)))
    }

    /// The full output as a JSON value.
    pub fn into_value(self) -> OpResult<Value> {
        match self.0 {
            Repr::Value(v) => Ok(v),
            Repr::Typed(t) => t.to_value().map_err(unwritable),
        }
    }

    /// The full output as JSON text.
    pub fn json(&self) -> OpResult<String> {
        match &self.0 {
            Repr::Value(v) => serde_json::to_string(v),
            Repr::Typed(t) => t.json(),
        }
        .map_err(unwritable)
    }

    /// The output's lean shape as JSON text ([`lean::lean`]: diagnostics and
    /// empty fields dropped; always an object), its quotes noted.
    pub fn lean_json(&self) -> OpResult<Marked> {
        match &self.0 {
            Repr::Value(v) => lean::lean_json(v),
            Repr::Typed(t) => t.lean_json(),
        }
        .map_err(unwritable)
    }
}

impl From<Value> for Output {
    fn from(value: Value) -> Output {
        Output(Repr::Value(value))
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Value(v) => f.debug_tuple("Output").field(v).finish(),
            Repr::Typed(t) => match t.json() {
                Ok(text) => f.debug_tuple("Output").field(&text).finish(),
                Err(e) => f.debug_tuple("Output").field(&e).finish(),
            },
        }
    }
}
