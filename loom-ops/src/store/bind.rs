//! Parameters written once for two drivers: a statement's values are bound
//! through [`Bind`], to a sqlx query or to owned [`Values`] that SQLite's
//! direct writer ([`super::direct`]) binds on its own thread, so a write's
//! list of parameters is not spelled twice.

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value};
use sqlx::Any;

use super::multirow::AnyQuery;

/// Something a statement's parameters bind to, in order.
pub(crate) trait Bind<'q>: Sized {
    /// Binds the next parameter.
    fn arg<T>(self, value: T) -> Self
    where
        T: 'q + Send + sqlx::Encode<'q, Any> + sqlx::Type<Any> + ToSql;
}

impl<'q> Bind<'q> for AnyQuery<'q> {
    fn arg<T>(self, value: T) -> Self
    where
        T: 'q + Send + sqlx::Encode<'q, Any> + sqlx::Type<Any> + ToSql,
    {
        self.bind(value)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryAs<'q, Any, O, sqlx::any::AnyArguments> {
    fn arg<T>(self, value: T) -> Self
    where
        T: 'q + Send + sqlx::Encode<'q, Any> + sqlx::Type<Any> + ToSql,
    {
        self.bind(value)
    }
}

/// A statement list's parameters as owned values: `$n` is `values[n - 1]`.
#[derive(Debug, Default)]
pub(crate) struct Values {
    values: Vec<Value>,
    /// A value that could not be converted (none of the types bound here
    /// can fail; kept so a new one that can fails the write, not the server).
    fault: Option<String>,
}

impl Values {
    /// The values, or why one could not be converted.
    pub(crate) fn into_inner(self) -> Result<Vec<Value>, String> {
        match self.fault {
            Some(fault) => Err(fault),
            None => Ok(self.values),
        }
    }
}

impl<'q> Bind<'q> for Values {
    fn arg<T>(mut self, value: T) -> Self
    where
        T: 'q + Send + sqlx::Encode<'q, Any> + sqlx::Type<Any> + ToSql,
    {
        match value.to_sql() {
            Ok(ToSqlOutput::Borrowed(v)) => match Value::try_from(v) {
                Ok(v) => self.values.push(v),
                Err(e) => {
                    self.fault.get_or_insert_with(|| e.to_string());
                    self.values.push(Value::Null);
                }
            },
            Ok(ToSqlOutput::Owned(v)) => self.values.push(v),
            Ok(other) => {
                self.fault
                    .get_or_insert_with(|| format!("a parameter of an unbindable kind: {other:?}"));
                self.values.push(Value::Null);
            }
            Err(e) => {
                self.fault.get_or_insert_with(|| e.to_string());
                self.values.push(Value::Null);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_each_type_in_order() {
        let text = "t".to_owned();
        let values = Values::default()
            .arg(&text)
            .arg(7_i64)
            .arg(true)
            .arg(None::<&str>)
            .arg(Some(2_i64))
            .into_inner()
            .unwrap();
        assert_eq!(
            values,
            [
                Value::Text("t".into()),
                Value::Integer(7),
                Value::Integer(1),
                Value::Null,
                Value::Integer(2)
            ]
        );
    }
}
