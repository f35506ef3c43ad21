//! Argument checking: the "invalid arguments" answer the spec describes.
//!
//! Each check reports every fault at once: each field error, every unknown
//! key with the field it most likely meant (nested objects included), the
//! required and optional arguments, and one corrected example call built
//! from the schema and what the caller sent. A state-changing op given a
//! near-miss key is refused before validation (`UNKNOWN_ARGUMENT`), so a
//! typo never writes a row with a field silently dropped.

use serde_json::{Map, Value, json};

use crate::error::{ErrorCode, LoomError};
use crate::schema::{self, SERVER_FILLED};

/// How close a key must be to a field to be suggested (0..1).
const SUGGEST_THRESHOLD: f64 = 0.6;
/// Keys longer than this (in bytes) are no near miss of a field or tool
/// name (the longest are ~30), and are not compared: edit distance costs
/// the product of the two lengths, and a call is not to make the server
/// compare a megabyte of key with every field.
const MOST_NEAR_MISS_BYTES: usize = 128;
/// Unknown keys a refusal looks for near misses of and names, at most (a
/// call may send thousands): the first ones, then how many more there were.
const MOST_UNKNOWN_MATCHED: usize = 32;
/// Field errors a refusal names, at most: the first ones, then how many
/// more there were. A body under the size limit can hold hundreds of
/// thousands of wrong items, and a message each would make the answer
/// (and the server's memory while it is written) fifty times the call.
const MOST_FIELD_ERRORS: usize = 32;

/// The field errors of one call: the first [`MOST_FIELD_ERRORS`], and how
/// many more.
#[derive(Default)]
struct FieldErrors {
    named: Vec<String>,
    more: usize,
}

impl From<Vec<String>> for FieldErrors {
    /// A list an op made itself, short by construction.
    fn from(named: Vec<String>) -> Self {
        FieldErrors { named, more: 0 }
    }
}

impl FieldErrors {
    fn push(&mut self, error: String) {
        if self.named.len() < MOST_FIELD_ERRORS {
            self.named.push(error);
        } else {
            self.more += 1;
        }
    }
}

/// The arguments callers see in refusals: listed fields only, minus `namespace`
/// (every op takes it and the caller's default fills it).
fn visible_args(listed: &Value) -> (Vec<String>, Vec<String>) {
    let required: Vec<String> = schema::required(listed)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let optional = schema::properties(listed)
        .map(|(k, _)| k.clone())
        .filter(|k| k != "namespace" && !required.contains(k))
        .collect();
    (required, optional)
}

/// A compiled checker for one op's input.
pub struct Validator {
    compiled: Option<jsonschema::Validator>,
    schema: Value,
    required: Vec<String>,
    optional: Vec<String>,
    /// The top-level fields, read once from `schema`: every call's keys are
    /// looked up here (through `schema`, each was two hashed lookups in it).
    top: Option<TopLevel>,
    /// The [`SERVER_FILLED`] keys the input declares.
    declared_server_filled: Vec<&'static str>,
}

/// The object schema [`collect_unknown`] checks the top level against.
struct TopLevel {
    fields: Vec<String>,
    /// Any key is known (no fields listed, extra ones not refused).
    open: bool,
}

/// One unknown key and what it most likely meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    /// The dotted path of the key (`filter.lables`).
    pub path: String,
    /// The closest field at that level, when one is close enough.
    pub suggestion: Option<String>,
}

impl Validator {
    /// Compiles the checker from the whole input schema (hidden fields stay
    /// accepted) and the listed one (what refusals name).
    pub fn new(full: &Value, listed: &Value) -> Validator {
        let (required, optional) = visible_args(listed);
        let objects = object_schemas(full);
        let top = objects.first().map(|obj| TopLevel {
            fields: schema::properties(obj).map(|(k, _)| k.clone()).collect(),
            open: is_open(obj),
        });
        let declared_server_filled = SERVER_FILLED
            .iter()
            .copied()
            .filter(|key| {
                objects
                    .iter()
                    .any(|obj| obj.get("properties").and_then(|p| p.get(*key)).is_some())
            })
            .collect();
        Validator {
            compiled: jsonschema::draft202012::new(full).ok(),
            schema: full.clone(),
            required,
            optional,
            top,
            declared_server_filled,
        }
    }

    /// The required arguments callers see.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// The optional arguments callers see.
    pub fn optional(&self) -> &[String] {
        &self.optional
    }

    /// The arguments op `op`'s input decodes from, or why `args` are
    /// refused: the server-filled keys it does not declare dropped
    /// ([`Validator::without_undeclared_server_filled`]), whole numbers
    /// sent as floats made the integers its schema declares
    /// ([`Validator::integers_as_declared`]), then [`Validator::check`]ed.
    /// What the call pipeline hands an op, and what its tests should.
    pub fn accept(&self, op: &str, args: Value, state_changing: bool) -> Result<Value, LoomError> {
        let args = self.integers_as_declared(self.without_undeclared_server_filled(args));
        self.check(op, &args, state_changing)?;
        Ok(args)
    }

    /// `args` without the server-filled keys ([`SERVER_FILLED`]) the op's
    /// input does not declare. The checker accepts those on every op (the
    /// pipeline reads `org` and `agent` for identity whatever the op), so
    /// they must not reach an input that refuses unknown fields.
    fn without_undeclared_server_filled(&self, mut args: Value) -> Value {
        let dropped =
            |key: &str| SERVER_FILLED.contains(&key) && !self.declared_server_filled.contains(&key);
        if let Some(map) = args.as_object_mut()
            && map.keys().any(|key| dropped(key))
        {
            map.retain(|key, _| !dropped(key));
        }
        args
    }

    /// `args` with each whole number sent as a float (`10.0`, `1e3`) made
    /// an integer where the schema declares one, when it fits an `i64`.
    ///
    /// Why: JSON Schema counts `10.0` as an integer, so a client that checks
    /// its call against the listed schema sends it, and serde's integers
    /// refuse a float: the op's input would fail to decode after the check
    /// passed, with a message naming no field. One too large for an `i64`
    /// stays as sent, and [`Validator::check`] refuses it by name.
    fn integers_as_declared(&self, mut args: Value) -> Value {
        if !has_wide_number(&args) {
            return args;
        }
        let mut pointers = Vec::new();
        wide_integers(&self.schema, &args, "", &mut pointers);
        for pointer in pointers {
            if let Some(slot) = args.pointer_mut(&pointer)
                && let Some(whole) = slot.as_f64().and_then(whole_i64)
            {
                *slot = Value::from(whole);
            }
        }
        args
    }

    /// Every unknown key in `args`, at any depth the schema describes.
    pub fn unknown_keys(&self, args: &Value) -> Vec<Unknown> {
        // The common call: every key a top-level field holding no fields of
        // its own, or one the server fills. Nothing to look deeper into.
        if let (Some(top), Value::Object(map)) = (&self.top, args)
            && map.iter().all(|(key, v)| {
                if top.fields.iter().any(|f| f == key) {
                    !v.is_object() && !v.is_array()
                } else {
                    top.open || SERVER_FILLED.contains(&key.as_str())
                }
            })
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        collect_unknown(&self.schema, args, "", &mut out);
        out
    }

    /// Checks `args` for op `op`. `state_changing` ops refuse near-miss keys
    /// first with `UNKNOWN_ARGUMENT`.
    pub fn check(&self, op: &str, args: &Value, state_changing: bool) -> Result<(), LoomError> {
        if !args.is_object() {
            return Err(self.not_an_object(op, args));
        }
        let unknown = self.unknown_keys(args);
        // A NUL anywhere is INVALID_ARGUMENTS naming it, near-miss keys
        // or not (one in a key would otherwise be suggested a field).
        if state_changing && !has_nul(args) {
            let near: Vec<&Unknown> = unknown.iter().filter(|u| u.suggestion.is_some()).collect();
            if !near.is_empty() {
                return Err(self.unknown_argument(op, &near));
            }
        }
        let mut errors = FieldErrors::default();
        if let Some(compiled) = &self.compiled {
            for e in compiled.iter_errors(args) {
                if let Some(msg) = field_error(&self.schema, &e) {
                    errors.push(msg);
                }
            }
        }
        if has_nul(args) {
            nul_errors(args, "", &mut errors);
        }
        if has_wide_number(args) {
            range_errors(&self.schema, args, &mut errors);
        }
        if errors.named.is_empty() && unknown.is_empty() {
            Ok(())
        } else {
            Err(self.invalid(op, args, errors, unknown))
        }
    }

    /// The refusal of arguments that are no object, as [`Validator::check`]
    /// answers it (a transport that takes keys out first refuses them so).
    pub fn not_an_object(&self, op: &str, args: &Value) -> LoomError {
        let error = format!(
            "arguments: Input should be an object [object_type], got {}",
            type_name(args)
        );
        self.invalid(op, args, vec![error].into(), Vec::new())
    }

    /// The invalid-arguments refusal of `args` for these field errors, in
    /// the shape [`Validator::check`] answers (the text, `errors`,
    /// `required`, `optional`, `unknown`, `example`): for an argument a
    /// transport takes out before the check (MCP's `_idempotency_key`).
    pub fn refusal(&self, op: &str, args: &Value, errors: Vec<String>) -> LoomError {
        self.invalid(op, args, errors.into(), Vec::new())
    }

    /// The refusal of a state-changing call that sent a top-level key the
    /// op does not take where it most likely meant one of `extra`,
    /// arguments its transport takes out before the check (MCP's
    /// `_idempotency_key`): `UNKNOWN_ARGUMENT`, as for a near miss of one
    /// of the op's own arguments.
    pub fn near_miss_of(
        &self,
        op: &str,
        args: &Map<String, Value>,
        extra: &[&str],
    ) -> Option<LoomError> {
        let takes = |key: &str| {
            self.top
                .as_ref()
                .is_some_and(|t| t.open || t.fields.iter().any(|f| f == key))
                || SERVER_FILLED.contains(&key)
        };
        // Only where one of `extra` is the closest: a key closer to one of
        // the op's own (`key`, to `memory_key`) is the check's to refuse,
        // naming that one.
        let own = self
            .top
            .iter()
            .flat_map(|t| t.fields.iter().map(String::as_str));
        // And only for a misspelling of the whole name: a key that is one
        // of its words (`key`, of `_idempotency_key`) was meant as an
        // argument of the op, which the check then names if it can.
        let unknown = args.keys().filter(|k| !takes(k)).find_map(|k| {
            let meant = *closest(k, own.clone().chain(extra.iter().copied()), 1).first()?;
            (extra.contains(&meant) && misspelling(k, meant)).then(|| Unknown {
                path: k.clone(),
                suggestion: Some(meant.to_owned()),
            })
        })?;
        Some(self.unknown_argument(op, &[&unknown]))
    }

    fn unknown_argument(&self, op: &str, near: &[&Unknown]) -> LoomError {
        let mut did_you_mean = Map::new();
        let mut parts = Vec::new();
        for u in near {
            let s = u.suggestion.clone().unwrap_or_default();
            parts.push(format!("unknown '{}' — did you mean '{s}'?", u.path));
            did_you_mean.insert(u.path.clone(), s.into());
        }
        let mut arguments = self.required.clone();
        arguments.extend(self.optional.iter().cloned());
        LoomError::new(
            ErrorCode::UnknownArgument,
            format!("{op}: {} Nothing was written.", parts.join(" ")),
        )
        .with_detail("op", op)
        .with_detail("did_you_mean", Value::Object(did_you_mean))
        .with_detail("arguments", arguments)
        .with_detail("required", self.required.clone())
        .with_detail("optional", self.optional.clone())
    }

    /// `error` in the documented "invalid arguments" shape when an op's own
    /// check refused an argument the schema let through (a key's
    /// characters, a time's format, a size): the text with the required
    /// and optional arguments and an example, and the parts beside the
    /// detail the op gave (`field`, `hint`); a field the op refused as
    /// missing (`agent: … [missing]`) is among the required arguments. The
    /// call's own values are not at hand: the example fills the required
    /// arguments in. Any other error is returned as it is.
    pub fn in_documented_shape(&self, op: &str, error: LoomError) -> LoomError {
        if error.code() != ErrorCode::InvalidArguments || error.detail().contains_key("errors") {
            return error;
        }
        let field = error.detail().get("field").and_then(Value::as_str);
        let no_args = Value::Object(Map::new());
        // A field the op needs that the schema leaves optional, refused
        // as missing (`<field>: <why> [missing]`): shown required.
        let missing = field.and_then(|f| {
            let why = error.message().strip_prefix(f)?.strip_prefix(": ")?;
            Some((f, why.strip_suffix(" [missing]")?))
        });
        let mut shaped = match (missing, field) {
            (Some((field, why)), _) => self.missing(op, &no_args, field, why),
            (None, Some(field)) if !error.message().starts_with(field) => {
                let line = format!("{field}: {}", error.message());
                self.invalid(op, &no_args, vec![line].into(), Vec::new())
            }
            (None, _) => self.invalid(
                op,
                &no_args,
                vec![error.message().to_owned()].into(),
                Vec::new(),
            ),
        };
        for (key, value) in error.detail() {
            if !shaped.detail().contains_key(key) {
                shaped = shaped.with_detail(key, value.clone());
            }
        }
        shaped
    }

    /// The refusal of a call that left out `field`, an argument the schema
    /// does not require but this call does (the assistant's read of one
    /// writer's rows needs the writer): the "invalid arguments" answer with
    /// `field` among the required arguments and in the example.
    fn missing(&self, op: &str, args: &Value, field: &str, why: &str) -> LoomError {
        let mut required = self.required.clone();
        required.push(field.to_owned());
        let optional: Vec<String> = self
            .optional
            .iter()
            .filter(|o| *o != field)
            .cloned()
            .collect();
        let mut example = self.example(args);
        if let Value::Object(fields) = &mut example {
            fields.insert(field.to_owned(), Value::String(format!("<{field}>")));
        }
        let errors = vec![format!("{field}: {why} [missing]")];
        refusal(op, errors.into(), Vec::new(), example, &required, &optional)
    }

    fn invalid(
        &self,
        op: &str,
        args: &Value,
        errors: FieldErrors,
        unknown: Vec<Unknown>,
    ) -> LoomError {
        let example = self.example(args);
        refusal(op, errors, unknown, example, &self.required, &self.optional)
    }

    /// One corrected call: what the caller sent that is valid, unknown keys
    /// renamed to their suggestion, and every missing required field filled
    /// from the schema's example or a placeholder of its type. An op that
    /// can preview its change (a `dry_run` argument) is shown previewing:
    /// a model that copies the example as it is sees what would change (a
    /// required choice filled in may be `delete`) before anything does.
    pub fn example(&self, args: &Value) -> Value {
        let mut example = corrected(&self.schema, args);
        let previews = object_schemas(&self.schema)
            .first()
            .is_some_and(|obj| schema::properties(obj).any(|(k, _)| k == DRY_RUN));
        if previews && let Value::Object(fields) = &mut example {
            fields.insert(DRY_RUN.into(), Value::Bool(true));
        }
        example
    }
}

/// The "invalid arguments" answer: its text and its parts.
fn refusal(
    op: &str,
    errors: FieldErrors,
    unknown: Vec<Unknown>,
    example: Value,
    required: &[String],
    optional: &[String],
) -> LoomError {
    let mut text = format!("{op}: invalid arguments.");
    for e in &errors.named {
        text.push('\n');
        text.push_str(e);
    }
    if errors.more > 0 {
        text.push_str(&format!("\n(and {} more errors)", errors.more));
    }
    let mut unknown_map = Map::new();
    for u in unknown.iter().take(MOST_UNKNOWN_MATCHED) {
        text.push('\n');
        match &u.suggestion {
            Some(s) => text.push_str(&format!("unknown '{}' — did you mean '{s}'?", u.path)),
            None => text.push_str(&format!("unknown '{}'", u.path)),
        }
        unknown_map.insert(
            u.path.clone(),
            u.suggestion.clone().map_or(Value::Null, Value::from),
        );
    }
    if unknown.len() > MOST_UNKNOWN_MATCHED {
        let more = unknown.len() - MOST_UNKNOWN_MATCHED;
        text.push_str(&format!("\n(and {more} more unknown keys)"));
    }
    text.push_str(&format!("\nrequired: {}", list_or_none(required)));
    text.push_str(&format!("\noptional: {}", list_or_none(optional)));
    text.push_str("\nexample: ");
    text.push_str(&spaced(&example));
    LoomError::new(ErrorCode::InvalidArguments, text)
        .with_detail("op", op)
        .with_detail("errors", errors.named)
        .with_detail("required", required.to_vec())
        .with_detail("optional", optional.to_vec())
        .with_detail("unknown", Value::Object(unknown_map))
        .with_detail("example", example)
}

/// An "invalid arguments" refusal told again for a listing that shows the
/// op's input otherwise (an MCP toolset that lists `agent` as required, or
/// leaves a field out): its `required`, `optional` and `example`, in the
/// detail and in the text, are the listed schema's, so that the corrected
/// call it shows is one the listing accepts. Any other error is returned
/// as it is.
pub fn as_listed(e: LoomError, listed: &Value) -> LoomError {
    let Some(Value::Object(sent_example)) = e.detail().get("example") else {
        return e;
    };
    if e.code() != ErrorCode::InvalidArguments || !e.detail().contains_key("required") {
        return e;
    }
    let (required, optional) = visible_args(listed);
    let properties: Map<String, Value> = schema::properties(listed)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut example: Map<String, Value> = sent_example
        .iter()
        .filter(|(k, _)| properties.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for name in &required {
        if !example.contains_key(name) {
            let value = placeholder(name, &properties[name]);
            example.insert(name.clone(), value);
        }
    }
    let example = Value::Object(example);
    let kept = e
        .message()
        .find("\nrequired: ")
        .map_or(e.message(), |i| &e.message()[..i]);
    let mut text = kept.to_owned();
    text.push_str(&format!("\nrequired: {}", list_or_none(&required)));
    text.push_str(&format!("\noptional: {}", list_or_none(&optional)));
    text.push_str("\nexample: ");
    text.push_str(&spaced(&example));
    let mut again = LoomError::new(e.code(), text);
    for (k, v) in e.detail() {
        again = again.with_detail(k, v.clone());
    }
    again
        .with_detail("required", required)
        .with_detail("optional", optional)
        .with_detail("example", example)
}

/// `value` as JSON text the way the documented refusal shows its example
/// (`{"memory_key": "deploy_window"}`): a space after each `:` and `,`,
/// as a person writes it and as most JSON a model has read is written.
fn spaced(value: &Value) -> String {
    /// serde_json's compact output with those two spaces.
    struct Spaced;
    /// What goes before an item of an array or an object.
    fn before_item<W: ?Sized + std::io::Write>(w: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            before_item(w, first)
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            before_item(w, first)
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut text = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut text, Spaced);
    // A `Value` always serializes, and into UTF-8.
    match serde::Serialize::serialize(value, &mut ser) {
        Ok(()) => String::from_utf8(text).unwrap_or_else(|_| value.to_string()),
        Err(_) => value.to_string(),
    }
}

/// The argument by which an op reports what it would change without
/// changing it.
const DRY_RUN: &str = "dry_run";

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".into()
    } else {
        items.join(", ")
    }
}

/// The JSON type of `v`, as a refusal names it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One line per field error, pydantic-style (`memory_key: Field required [missing]`).
/// `None` for unknown-key errors, which are reported with suggestions instead.
fn field_error(schema: &Value, e: &jsonschema::ValidationError<'_>) -> Option<String> {
    use jsonschema::error::ValidationErrorKind as K;
    let path = pointer_to_dotted(&e.instance_path().to_string());
    if let K::OneOfNotValid { .. } | K::AnyOf { .. } | K::Enum { .. } | K::Constant { .. } =
        e.kind()
        && let Some(choices) = choices_at(schema, &e.schema_path().to_string())
    {
        let named: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Some(format!(
            "{}: Input should be one of {} [enum], got {}",
            at(&path),
            named.join(", "),
            e.instance()
        ));
    }
    Some(match e.kind() {
        // `additionalProperties: false` refuses an unknown key as this (its
        // false schema) where the object lists no fields.
        K::AdditionalProperties { .. } | K::UnevaluatedProperties { .. } | K::FalseSchema => {
            return None;
        }
        K::Required { property } => {
            let name = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            format!("{}: Field required [missing]", join(&path, &name))
        }
        K::Type { .. } => format!(
            "{}: Input should be {} [type], got {}",
            at(&path),
            expected_type(e),
            type_name(e.instance())
        ),
        _ => format!("{}: {e}", at(&path)),
    })
}

/// The values a choice allows, when the schema at `keyword_path` (a
/// `oneOf`, `anyOf`, `enum` or `const`) is one of fixed values (a `null`
/// alternative aside), as a Rust enum's is: what a refusal names.
fn choices_at(schema: &Value, keyword_path: &str) -> Option<Vec<Value>> {
    if keyword_path.contains("$ref") {
        return None;
    }
    let parent = &keyword_path[..keyword_path.rfind('/')?];
    let values = fixed_values(schema.pointer(parent)?)?;
    (!values.is_empty()).then_some(values)
}

fn fixed_values(s: &Value) -> Option<Vec<Value>> {
    if let Some(v) = s.get("const") {
        return Some(vec![v.clone()]);
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        return Some(e.iter().filter(|v| !v.is_null()).cloned().collect());
    }
    let alternatives = s
        .get("oneOf")
        .or_else(|| s.get("anyOf"))
        .and_then(Value::as_array)?;
    let mut out = Vec::new();
    for alt in alternatives {
        if alt.get("type").is_some_and(|t| t == "null") {
            continue;
        }
        out.extend(fixed_values(alt)?);
    }
    Some(out)
}

fn expected_type(e: &jsonschema::ValidationError<'_>) -> String {
    // The Display text names the expected type after "is not of type", or
    // the types after "is not of types".
    let text = e.to_string();
    if let Some((_, types)) = text.split_once("is not of types") {
        return format!("of one of the types {}", types.trim());
    }
    match text.split_once("is not of type") {
        Some((_, ty)) => format!("of type {}", ty.trim()),
        None => "of another type".into(),
    }
}

/// Whether a NUL is in any string or key of `v` ([`nul_errors`] writes the
/// path of each, which is worth doing only for one that has one).
fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Every string (object keys included) holding a NUL character. No op
/// means one, and PostgreSQL's text refuses it outright: checked here, it is
/// the caller's mistake on both backends instead of a failed statement on one.
fn nul_errors(v: &Value, path: &str, out: &mut FieldErrors) {
    const NUL: &str = "should not contain the NUL character (\\u0000) [string_nul]";
    match v {
        Value::String(s) if s.contains('\0') => out.push(format!("{}: String {NUL}", at(path))),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                nul_errors(item, &join(path, &i.to_string()), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let here = join(path, k);
                if k.contains('\0') {
                    out.push(format!("{}: Key {NUL}", at(&here)));
                }
                nul_errors(item, &here, out);
            }
        }
        _ => {}
    }
}

/// Whether any number in `v` is not an `i64` (a float, or an integer past
/// `i64::MAX`): only then is it worth looking where each one sits.
fn has_wide_number(v: &Value) -> bool {
    match v {
        Value::Number(n) => !n.is_i64(),
        Value::Array(items) => items.iter().any(has_wide_number),
        Value::Object(map) => map.values().any(has_wide_number),
        _ => false,
    }
}

/// `f` as an `i64` when it is a whole number in its range: how a whole
/// number sent as a float (`20.0`) is taken where an integer is declared.
pub fn whole_i64(f: f64) -> Option<i64> {
    // 2^63 is exactly representable; i64::MAX is not.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&f)).then_some(f as i64)
}

/// Whether `s` declares an integer, alone or beside `null` (an `Option`).
fn declares_integer(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => ["anyOf", "oneOf"]
            .iter()
            .filter_map(|k| s.get(*k).and_then(Value::as_array))
            .flatten()
            .any(declares_integer),
    }
}

/// The JSON pointer of each number in `value` that is not an `i64` where
/// `schema` declares an integer (a `u64` field takes any `u64`).
fn wide_integers(schema: &Value, value: &Value, pointer: &str, out: &mut Vec<String>) {
    match value {
        Value::Number(n)
            if !n.is_i64()
                && declares_integer(schema)
                && !(n.is_u64() && schema.get("format").is_some_and(|f| f == "uint64")) =>
        {
            out.push(pointer.to_owned());
        }
        Value::Object(map) => {
            let Some(fields) = object_schemas(schema)
                .into_iter()
                .next()
                .and_then(|obj| obj.get("properties"))
            else {
                return;
            };
            for (key, v) in map {
                if let Some(sub) = fields.get(key) {
                    let key = key.replace('~', "~0").replace('/', "~1");
                    wide_integers(sub, v, &format!("{pointer}/{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = item_schema(schema) {
                for (i, v) in items.iter().enumerate() {
                    wide_integers(item, v, &format!("{pointer}/{i}"), out);
                }
            }
        }
        _ => {}
    }
}

/// Every whole number where the schema declares an integer that an `i64`
/// cannot hold (the others [`Validator::integers_as_declared`] makes
/// integers). A number with a fraction is the schema's type error already.
fn range_errors(schema: &Value, args: &Value, out: &mut FieldErrors) {
    let mut pointers = Vec::new();
    wide_integers(schema, args, "", &mut pointers);
    for pointer in pointers {
        let Some(Value::Number(n)) = args.pointer(&pointer) else {
            continue;
        };
        if n.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && whole_i64(f).is_none())
        {
            out.push(format!(
                "{}: Input should be an integer from {} to {} [int_range], got {n}",
                at(&pointer_to_dotted(&pointer)),
                i64::MIN,
                i64::MAX
            ));
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A dotted path as a refusal shows it: `arguments` for the whole object,
/// and a NUL in a key written as its escape.
fn at(path: &str) -> String {
    if path.is_empty() {
        "arguments".to_owned()
    } else {
        path.replace('\0', "\\u0000")
    }
}

fn pointer_to_dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// The object schema(s) a value is checked against: the schema itself, or
/// its `anyOf`/`oneOf` alternatives that describe objects (`Option<Struct>`).
fn object_schemas(s: &Value) -> Vec<&Value> {
    // An object that lists no fields and refuses any (an op without
    // arguments) is one too: every key sent it is unknown.
    if s.get("properties").is_some() || s.get("additionalProperties") == Some(&Value::Bool(false)) {
        return vec![s];
    }
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array))
        .flatten()
        .filter(|alt| alt.get("properties").is_some())
        .collect()
}

/// Whether an object schema knows any key: it lists no fields and does
/// not refuse extra ones.
fn is_open(obj: &Value) -> bool {
    obj.get("additionalProperties")
        .is_some_and(|a| a != &Value::Bool(false))
        && schema::properties(obj).next().is_none()
}

fn item_schema(s: &Value) -> Option<&Value> {
    s.get("items").or_else(|| {
        ["anyOf", "oneOf"]
            .iter()
            .filter_map(|k| s.get(*k).and_then(Value::as_array))
            .flatten()
            .find_map(|alt| alt.get("items"))
    })
}

fn collect_unknown(schema: &Value, value: &Value, prefix: &str, out: &mut Vec<Unknown>) {
    match value {
        Value::Object(map) => {
            let Some(obj) = object_schemas(schema).into_iter().next() else {
                return;
            };
            let fields = || schema::properties(obj).map(|(k, _)| k.as_str());
            let open = is_open(obj);
            // The path is written only for a field that holds fields of its
            // own or is unknown: every call checks its arguments here.
            let path = |key: &str| {
                if prefix.is_empty() {
                    key.to_owned()
                } else {
                    format!("{prefix}.{key}")
                }
            };
            for (key, v) in map {
                match obj.get("properties").and_then(|p| p.get(key)) {
                    Some(sub) if v.is_object() || v.is_array() => {
                        collect_unknown(sub, v, &path(key), out);
                    }
                    Some(_) => {}
                    None if open || SERVER_FILLED.contains(&key.as_str()) && prefix.is_empty() => {}
                    None => out.push(Unknown {
                        suggestion: if out.len() < MOST_UNKNOWN_MATCHED {
                            closest(key, fields(), 1).first().map(|s| (*s).to_owned())
                        } else {
                            None
                        },
                        path: path(key),
                    }),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = item_schema(schema) {
                for (i, v) in items.iter().enumerate() {
                    collect_unknown(item, v, &format!("{prefix}.{i}"), out);
                }
            }
        }
        _ => {}
    }
}

fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// How likely `key` was meant as `field` (0..1): separators and case do not
/// count, a key that is one of the field's `_` words scores high, else edit
/// similarity.
pub fn similarity(key: &str, field: &str) -> f64 {
    if key.len() > MOST_NEAR_MISS_BYTES || field.len() > MOST_NEAR_MISS_BYTES {
        return 0.0;
    }
    let (k, f) = (normalize(key), normalize(field));
    if k.is_empty() || f.is_empty() {
        return 0.0;
    }
    if k == f {
        return 1.0;
    }
    let edit = strsim::normalized_damerau_levenshtein(&k, &f);
    let words = field
        .split(['_', '.', '-'])
        .filter(|w| !w.is_empty())
        .count();
    let word_hit = words > 1
        && field.split(['_', '.', '-']).any(|w| {
            normalize(w) == k
                || (k.len() >= 3
                    && strsim::normalized_damerau_levenshtein(&normalize(w), &k) >= 0.75)
        });
    if word_hit {
        edit.max(0.75)
    } else {
        edit.max(strsim::jaro_winkler(&k, &f) - 0.15)
    }
}

/// Whether `key` is `name` misspelt (or spelt with other separators or
/// case): close by edit distance over the whole name, not by sharing a word.
fn misspelling(key: &str, name: &str) -> bool {
    let (k, n) = (normalize(key), normalize(name));
    !k.is_empty() && strsim::normalized_damerau_levenshtein(&k, &n) >= SUGGEST_THRESHOLD
}

/// Up to `limit` candidates closest to `key` above the suggestion threshold,
/// best first. Of candidates as close, those that start with `_` as `key`
/// does (or does not) come first, then the shorter: `key` shares a word
/// with both `memory_key` and the transport's `_idempotency_key`, and
/// means the op's own field; `_idempotency_kye` means the one with `_`.
pub fn closest<'a>(
    key: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    limit: usize,
) -> Vec<&'a str> {
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .map(|c| (similarity(key, c), c))
        .filter(|(s, _)| *s >= SUGGEST_THRESHOLD)
        .collect();
    let unlike = |c: &str| c.starts_with('_') != key.starts_with('_');
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(unlike(a.1).cmp(&unlike(b.1)))
            .then(a.1.len().cmp(&b.1.len()))
            .then(a.1.cmp(b.1))
    });
    scored.into_iter().take(limit).map(|(_, c)| c).collect()
}

/// A placeholder value for a schema: its first example, default, enum value
/// or const, else one of its type.
pub fn placeholder(name: &str, s: &Value) -> Value {
    if let Some(Value::Array(ex)) = s.get("examples")
        && let Some(first) = ex.first()
    {
        return first.clone();
    }
    for key in ["default", "const"] {
        if let Some(v) = s.get(key) {
            return v.clone();
        }
    }
    if let Some(Value::Array(e)) = s.get("enum")
        && let Some(first) = e.iter().find(|v| !v.is_null())
    {
        return first.clone();
    }
    // A choice of fixed values (a Rust enum's `oneOf` of consts): its first.
    if let Some(first) = fixed_values(s).and_then(|v| v.into_iter().next()) {
        return first;
    }
    if s.get("properties").is_some() {
        return corrected(s, &json!({}));
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ => {
            return object_schemas(s)
                .first()
                .map_or(Value::String(format!("<{name}>")), |o| placeholder(name, o));
        }
    };
    match ty {
        "string" => Value::String(format!("<{name}>")),
        "integer" => json!(1),
        "number" => json!(1.0),
        "boolean" => json!(true),
        "array" => match item_schema(s) {
            Some(item) => json!([placeholder(name, item)]),
            None => json!([]),
        },
        "object" => json!({}),
        _ => Value::Null,
    }
}

fn corrected(schema: &Value, args: &Value) -> Value {
    let Some(obj) = object_schemas(schema).into_iter().next() else {
        return json!({});
    };
    let fields: Vec<&str> = schema::properties(obj).map(|(k, _)| k.as_str()).collect();
    let mut out = Map::new();
    if let Value::Object(sent) = args {
        let mut unknown = 0;
        for (key, v) in sent {
            let target = if fields.contains(&key.as_str()) {
                Some(key.as_str())
            } else if unknown < MOST_UNKNOWN_MATCHED {
                unknown += 1;
                closest(key, fields.iter().copied(), 1).first().copied()
            } else {
                None
            };
            let Some(target) = target else { continue };
            let sub = &obj["properties"][target];
            // Valid as the checker sees it: the schema, no NUL, and an
            // integer an i64 holds.
            let mut wide = Vec::new();
            wide_integers(sub, v, "", &mut wide);
            let valid = wide.is_empty()
                && !has_nul(v)
                && jsonschema::draft202012::new(sub)
                    .map(|c| c.is_valid(v))
                    .unwrap_or(false);
            let value = if valid {
                if v.is_object() {
                    corrected(sub, v)
                } else {
                    v.clone()
                }
            } else if schema::required(obj).contains(&target) {
                placeholder(target, sub)
            } else {
                // An optional argument sent wrong is left out: the call is
                // valid without it.
                continue;
            };
            out.entry(target.to_owned()).or_insert(value);
        }
    }
    for req in schema::required(obj) {
        if !out.contains_key(req) {
            out.insert(req.to_owned(), placeholder(req, &obj["properties"][req]));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::TypeInfo;
    use schemars::JsonSchema;

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Get {
        #[schemars(example = &"deploy_window")]
        memory_key: String,
        namespace: Option<String>,
        if_version: Option<i64>,
        include_recall_breakdown: Option<bool>,
        as_of: Option<String>,
        fields: Option<Vec<String>>,
        follow: Option<bool>,
        agent: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Apply {
        action: String,
        filter: Filter,
        dry_run: Option<bool>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Filter {
        labels: Option<Vec<String>>,
        key_prefix: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Page {
        limit: Option<i64>,
        weight: Option<f64>,
        before: Vec<i64>,
        meta: Option<Value>,
        bytes: Option<u64>,
    }

    /// How a run ended.
    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Status {
        /// It did what it set out to.
        Succeeded,
        /// It did not.
        Failed,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Complete {
        run_id: String,
        status: Status,
        outcome: Option<Status>,
        goal: Option<String>,
        limit: Option<i64>,
    }

    fn validator<T: JsonSchema>() -> Validator {
        let full = schema::input_schema(&TypeInfo::of::<T>());
        Validator::new(&full, &schema::listed_input(&full))
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoArguments {}

    #[test]
    fn an_op_without_arguments_names_the_unknown_ones() {
        let v = validator::<NoArguments>();
        let err = v
            .check("ops.capabilities", &json!({"opps": 1}), false)
            .unwrap_err();
        assert!(
            err.message().contains("unknown 'opps'"),
            "{}",
            err.message()
        );
        assert!(!err.message().contains("False schema"), "{}", err.message());
        assert_eq!(err.detail()["unknown"], json!({"opps": null}));
        assert!(v.check("ops.capabilities", &json!({}), false).is_ok());
    }

    #[test]
    fn a_choice_refused_names_the_values_it_takes() {
        let v = validator::<Complete>();
        let err = v
            .check(
                "run.complete",
                &json!({"run_id": "r", "status": "done", "outcome": "meh"}),
                true,
            )
            .unwrap_err();
        let errors = err.detail()["errors"].clone();
        assert_eq!(
            errors,
            json!([
                "status: Input should be one of \"succeeded\", \"failed\" [enum], got \"done\"",
                "outcome: Input should be one of \"succeeded\", \"failed\" [enum], got \"meh\"",
            ]),
            "{err:?}"
        );
    }

    #[test]
    fn the_example_leaves_out_what_the_checker_refuses() {
        let v = validator::<Complete>();
        let err = v
            .check(
                "run.complete",
                &json!({"run_id": "r\u{0}x", "status": "done", "goal": "a\u{0}b", "limit": 1e30}),
                true,
            )
            .unwrap_err();
        // A required field sent wrong gets a placeholder; an optional one
        // is left out; the example passes the checker.
        let example = err.detail()["example"].clone();
        assert_eq!(
            example,
            json!({"run_id": "<run_id>", "status": "succeeded"}),
            "{err:?}"
        );
        v.check("run.complete", &example, true).unwrap();
    }

    #[test]
    fn whole_numbers_sent_as_floats_are_integers_where_the_schema_says_so() {
        let v = validator::<Page>();
        let sent = json!({"limit": 10.0, "weight": 2.0, "before": [1e3, 7], "meta": {"n": 4.0}});
        // As sent, the schema passes it and the input does not decode.
        v.check("x.page", &sent, false).unwrap();
        assert!(serde_json::from_value::<Page>(sent.clone()).is_err());

        let args = v.integers_as_declared(sent);
        assert!(args["limit"].is_i64() && args["limit"] == 10);
        assert_eq!(args["before"], json!([1000, 7]));
        assert!(args["weight"].is_f64(), "a float field keeps its float");
        assert!(args["meta"]["n"].is_f64(), "free-form JSON is kept as sent");
        v.check("x.page", &args, false).unwrap();
        let page: Page = serde_json::from_value(args).unwrap();
        assert_eq!((page.limit, page.before), (Some(10), vec![1000, 7]));

        let plain = json!({"limit": 3, "before": []});
        assert_eq!(v.integers_as_declared(plain.clone()), plain);
    }

    #[test]
    fn a_whole_number_too_wide_for_an_i64_is_refused_by_name() {
        let v = validator::<Page>();
        for wide in [
            json!(1e19),
            json!(9_223_372_036_854_775_808_u64),
            json!(-1e19),
        ] {
            let args = v.integers_as_declared(json!({"limit": 1, "before": [2, wide]}));
            let err = v.check("x.page", &args, false).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArguments);
            assert_eq!(
                err.detail()["errors"],
                json!([format!(
                    "before.1: Input should be an integer from -9223372036854775808 to \
                     9223372036854775807 [int_range], got {wide}"
                )]),
            );
            assert!(
                err.message()
                    .starts_with("x.page: invalid arguments.\nbefore.1: ")
            );
        }
        // A u64 field takes what an i64 cannot hold.
        let big = json!({"before": [], "bytes": 18_446_744_073_709_551_615_u64});
        v.check("x.page", &v.integers_as_declared(big.clone()), false)
            .unwrap();
        assert!(serde_json::from_value::<Page>(big).is_ok());
        // Narrower integers are bounded in the schema (schema::bound_integers).
        #[allow(dead_code)]
        #[derive(serde::Deserialize, JsonSchema)]
        struct Narrow {
            count: Option<u32>,
            offset: i32,
        }
        let v32 = validator::<Narrow>();
        let err = v32
            .check(
                "x.narrow",
                &json!({"count": 4_294_967_296_u64, "offset": -2_147_483_649_i64}),
                false,
            )
            .unwrap_err();
        assert_eq!(
            err.detail()["errors"],
            json!([
                "count: 4294967296 is greater than the maximum of 4294967295",
                "offset: -2147483649 is less than the minimum of -2147483648"
            ])
        );
        let edge = json!({"count": 4_294_967_295_u64, "offset": -2_147_483_648_i64});
        v32.check("x.narrow", &edge, false).unwrap();
        assert!(serde_json::from_value::<Narrow>(edge).is_ok());
        // A fraction is the schema's type error, and only that.
        let err = v
            .check("x.page", &json!({"limit": 10.5, "before": []}), false)
            .unwrap_err();
        let errors = err.detail()["errors"].clone();
        assert_eq!(errors.as_array().map(Vec::len), Some(1), "{errors}");
        assert!(
            errors[0]
                .as_str()
                .unwrap()
                .starts_with("limit: Input should be of one of the types"),
            "{errors}"
        );
    }

    #[test]
    fn undeclared_server_filled_keys_are_accepted_and_not_handed_on() {
        let v = validator::<Get>();
        let args = json!({"memory_key": "k", "agent": "bob", "consumer": "x", "org": "acme"});
        v.check("memory.get", &args, false).unwrap();
        let handed = v.without_undeclared_server_filled(args);
        // agent is Get's own field; consumer and org are not
        assert_eq!(handed, json!({"memory_key": "k", "agent": "bob"}));
        let get: Result<Get, _> = serde_json::from_value(handed);
        assert!(get.is_ok(), "the op's input takes what is handed on");
    }

    #[test]
    fn the_quick_look_at_top_level_keys_agrees_with_the_full_walk() {
        for (v, args) in [
            (validator::<Get>(), json!({"memory_key": "k", "agent": "a"})),
            (
                validator::<Get>(),
                json!({"memory_key": "k", "org": "o", "consumer": "c"}),
            ),
            (
                validator::<Get>(),
                json!({"memory_key": "k", "fields": ["content"]}),
            ),
            (validator::<Get>(), json!({"memory_key": "k", "key": "k"})),
            (validator::<Get>(), json!({"memory_key": {"nested": 1}})),
            (
                validator::<Apply>(),
                json!({"action": "pin", "filter": {"lables": []}}),
            ),
            (
                validator::<Apply>(),
                json!({"action": "pin", "filter": {"labels": []}}),
            ),
            (
                validator::<Apply>(),
                json!({"action": "pin", "agent": "a", "dry_run": true}),
            ),
            (
                validator::<Apply>(),
                json!({"action": "pin", "filter": [{"x": 1}]}),
            ),
        ] {
            let mut walked = Vec::new();
            collect_unknown(&v.schema, &args, "", &mut walked);
            assert_eq!(v.unknown_keys(&args), walked, "{args}");
        }
    }

    #[test]
    fn the_spec_example() {
        let v = validator::<Get>();
        let err = v
            .check("memory.get", &json!({"key": "deploy_window"}), false)
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArguments);
        assert_eq!(
            err.message(),
            "memory.get: invalid arguments.\n\
             memory_key: Field required [missing]\n\
             unknown 'key' — did you mean 'memory_key'?\n\
             required: memory_key\n\
             optional: if_version, include_recall_breakdown, as_of, fields, follow\n\
             example: {\"memory_key\": \"deploy_window\"}"
        );
        let d = err.detail();
        assert_eq!(d["unknown"], json!({"key": "memory_key"}));
        assert_eq!(d["example"], json!({"memory_key": "deploy_window"}));
        assert_eq!(d["required"], json!(["memory_key"]));
        assert_eq!(d["op"], "memory.get");
    }

    #[test]
    fn an_ops_own_refusal_is_put_in_the_documented_shape() {
        let v = validator::<Get>();
        let own = LoomError::new(
            ErrorCode::InvalidArguments,
            "memory_key \"a b\" may hold only letters",
        )
        .with_detail("field", "memory_key");
        let shaped = v.in_documented_shape("memory.get", own);
        assert!(
            shaped.message().starts_with("memory.get: invalid arguments.\nmemory_key \"a b\" may hold only letters\nrequired: memory_key\n"),
            "{}",
            shaped.message()
        );
        let d = shaped.detail();
        assert_eq!(d["field"], "memory_key");
        assert_eq!(d["example"], json!({"memory_key": "deploy_window"}));
        for part in ["op", "errors", "required", "optional", "unknown"] {
            assert!(d.contains_key(part), "{part}");
        }
        // one in the shape already, and any other code, stay as they are
        let again = v.in_documented_shape("memory.get", shaped.clone());
        assert_eq!(again.message(), shaped.message());
        let locked = LoomError::new(ErrorCode::Locked, "held");
        assert_eq!(
            v.in_documented_shape("memory.get", locked).message(),
            "held"
        );
    }

    #[test]
    fn a_missing_argument_the_call_needs_is_shown_required() {
        let v = validator::<Get>();
        let err = v.missing("memory.get", &json!({}), "agent", "name the writer");
        let d = err.detail();
        assert_eq!(d["required"], json!(["memory_key", "agent"]));
        assert!(!d["optional"].as_array().unwrap().contains(&json!("agent")));
        assert_eq!(d["errors"], json!(["agent: name the writer [missing]"]));
        assert_eq!(
            d["example"],
            json!({"memory_key": "deploy_window", "agent": "<agent>"})
        );
        assert!(err.message().starts_with("memory.get: invalid arguments.\nagent: name the writer [missing]\nrequired: memory_key, agent\n"), "{}", err.message());
    }

    #[test]
    fn an_op_that_previews_is_shown_previewing() {
        let v = validator::<Apply>();
        for args in [
            json!({"filter": {"key_prefix": "p"}}),
            json!({"action": "delete", "filter": {"key_prefix": "p"}, "dry_run": false, "x": 1}),
        ] {
            let err = v.check("memory.apply", &args, false).unwrap_err();
            let example = &err.detail()["example"];
            assert_eq!(example["dry_run"], true, "{args}: {example}");
            assert_eq!(example["filter"], json!({"key_prefix": "p"}), "{args}");
        }
        let get = validator::<Get>().example(&json!({}));
        assert!(get.get("dry_run").is_none(), "{get}");
    }

    #[test]
    fn a_nul_in_any_string_or_key_is_a_field_error() {
        let v = validator::<Apply>();
        let args =
            json!({"action": "a\u{0}", "filter": {"labels": ["ok", "\u{0}"], "key_prefix": "p"}});
        let err = v.check("memory.apply", &args, true).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArguments);
        let errors = err.detail()["errors"].clone();
        assert_eq!(
            errors,
            json!([
                "action: String should not contain the NUL character (\\u0000) [string_nul]",
                "filter.labels.1: String should not contain the NUL character (\\u0000) [string_nul]"
            ])
        );
        let err = v
            .check(
                "memory.apply",
                &json!({"action": "a", "filter": {}, "x\u{0}": 1}),
                false,
            )
            .unwrap_err();
        assert_eq!(
            err.detail()["errors"],
            json!(["x\\u0000: Key should not contain the NUL character (\\u0000) [string_nul]"])
        );
        v.check(
            "memory.apply",
            &json!({"action": "a", "filter": {"labels": ["é 🧵"]}}),
            true,
        )
        .unwrap();
    }

    #[test]
    fn every_field_error_is_reported() {
        let v = validator::<Get>();
        let err = v
            .check(
                "memory.get",
                &json!({"memory_key": 3, "if_version": "x", "fields": [1]}),
                false,
            )
            .unwrap_err();
        let errors = err.detail()["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors.iter().any(|e| {
            e.as_str()
                .unwrap()
                .starts_with("memory_key: Input should be")
        }));
        assert!(
            errors
                .iter()
                .any(|e| e.as_str().unwrap().starts_with("fields.0:"))
        );
        // the example keeps nothing invalid
        assert_eq!(err.detail()["example"]["memory_key"], "deploy_window");
    }

    #[test]
    fn type_errors_name_the_types_and_a_nul_key_is_invalid_not_a_near_miss() {
        let v = validator::<Get>();
        let err = v
            .check(
                "memory.get",
                &json!({"memory_key": "k", "fields": "abc"}),
                false,
            )
            .unwrap_err();
        assert!(
            err.message()
                .contains("fields: Input should be of one of the types"),
            "{}",
            err.message()
        );
        let err = v
            .check(
                "memory.get",
                &json!({"memory_key": "k", "namespac\u{0}": "x"}),
                true,
            )
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArguments, "{}", err.message());
        assert!(err.message().contains("[string_nul]"), "{}", err.message());
    }

    #[test]
    fn hostile_unknown_keys_are_not_matched_without_end() {
        let v = validator::<Get>();
        // A megabyte of key is compared with no field: no suggestion.
        let long = "memory_key".repeat(100_000);
        let err = v
            .check(
                "memory.get",
                &json!({"memory_key": "k", long.clone(): 1}),
                false,
            )
            .unwrap_err();
        assert_eq!(err.detail()["unknown"][&long], Value::Null);
        assert_eq!(similarity(&long, "memory_key"), 0.0);
        // Thousands of keys: the first ones are named, then how many more.
        let mut args = Map::new();
        args.insert("memory_key".into(), json!("k"));
        for i in 0..20_000 {
            args.insert(format!("memory_kee{i}"), json!(1));
        }
        let err = v
            .check("memory.get", &Value::Object(args), false)
            .unwrap_err();
        let named = err.detail()["unknown"].as_object().unwrap().len();
        assert_eq!(named, MOST_UNKNOWN_MATCHED);
        let more = 20_000 - MOST_UNKNOWN_MATCHED;
        assert!(
            err.message()
                .contains(&format!("(and {more} more unknown keys)")),
            "{}",
            err.message()
        );
        assert_eq!(err.detail()["example"], json!({"memory_key": "k"}));
    }

    #[test]
    fn hostile_wrong_items_are_not_each_named() {
        let v = validator::<Get>();
        // 250,000 items of the wrong type (750 kB, under the body limit):
        // the first ones are named, then how many more, and the whole
        // refusal stays the size of a refusal.
        let args = json!({"memory_key": "k", "fields": vec![1; 250_000]});
        let err = v.check("memory.get", &args, false).unwrap_err();
        let errors = err.detail()["errors"].as_array().unwrap().clone();
        assert_eq!(errors.len(), MOST_FIELD_ERRORS);
        assert!(
            errors[0].as_str().unwrap().starts_with("fields.0: "),
            "{errors:?}"
        );
        let more = 250_000 - MOST_FIELD_ERRORS;
        assert!(
            err.message().contains(&format!("(and {more} more errors)")),
            "{}",
            err.message()
        );
        let size = err.message().len() + serde_json::to_string(err.detail()).unwrap().len();
        assert!(size < 20_000, "{size} bytes");
        // As many NULs.
        let args = json!({"memory_key": "k", "fields": vec!["\u{0}"; 250_000]});
        let err = v.check("memory.get", &args, false).unwrap_err();
        assert_eq!(
            err.detail()["errors"].as_array().map(Vec::len),
            Some(MOST_FIELD_ERRORS)
        );
    }

    #[test]
    fn state_changing_ops_refuse_near_misses_before_validation() {
        let v = validator::<Apply>();
        let err = v
            .check(
                "memory.apply",
                &json!({"action": "delete", "filter": {"lables": ["x"]}}),
                true,
            )
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::UnknownArgument);
        assert_eq!(
            err.detail()["did_you_mean"],
            json!({"filter.lables": "labels"})
        );
        assert!(err.message().contains("Nothing was written"));
    }

    #[test]
    fn nested_unknowns_are_found_on_reads_too() {
        let v = validator::<Apply>();
        let err = v
            .check(
                "memory.apply",
                &json!({"action": "x", "filter": {"key_prefx": "a"}, "zzz": 1}),
                false,
            )
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArguments);
        assert_eq!(
            err.detail()["unknown"],
            json!({"filter.key_prefx": "key_prefix", "zzz": null})
        );
        assert_eq!(
            err.detail()["example"],
            json!({"action": "x", "filter": {"key_prefix": "a"}, "dry_run": true})
        );
    }

    #[test]
    fn valid_arguments_pass_and_server_filled_keys_are_accepted() {
        let v = validator::<Get>();
        v.check(
            "memory.get",
            &json!({"memory_key": "k", "agent": "a", "follow": true}),
            true,
        )
        .unwrap();
    }

    #[test]
    fn non_objects_are_refused() {
        let v = validator::<Get>();
        let err = v.check("memory.get", &json!([1]), false).unwrap_err();
        assert!(err.message().contains("Input should be an object"));
    }

    /// A state-changing call's key is refused as a near miss of the
    /// transport's idempotency key only when it misspells that key; a key
    /// that is one of its words is left to the check, which names none of
    /// the op's own arguments for it rather than the transport's.
    #[test]
    fn only_a_misspelt_idempotency_key_is_its_near_miss() {
        let v = validator::<Complete>();
        let extra = ["_idempotency_key"];
        let args = |key: &str| {
            let mut m = Map::new();
            m.insert("run_id".into(), json!("r1"));
            m.insert(key.into(), json!("k1"));
            m
        };
        let refused = v
            .near_miss_of("run.complete", &args("_idempotency_kye"), &extra)
            .expect("a misspelling is a near miss");
        assert_eq!(refused.code(), ErrorCode::UnknownArgument);
        assert_eq!(
            refused.detail()["did_you_mean"],
            json!({"_idempotency_kye": "_idempotency_key"})
        );
        assert!(
            v.near_miss_of("run.complete", &args("IdempotencyKey"), &extra)
                .is_some()
        );
        for word in ["key", "idem_key"] {
            assert!(
                v.near_miss_of("run.complete", &args(word), &extra)
                    .is_none(),
                "{word}"
            );
        }
        let err = v
            .check(
                "run.complete",
                &json!({"run_id": "r1", "status": "failed", "key": "k1"}),
                false,
            )
            .unwrap_err();
        assert_eq!(err.detail()["unknown"], json!({"key": null}));
    }

    #[test]
    fn an_example_reads_with_a_space_after_each_colon_and_comma() {
        let example = json!({"a": [1, "x"], "b": {"c": null, "d": []}, "e": {}});
        assert_eq!(
            spaced(&example),
            r#"{"a": [1, "x"], "b": {"c": null, "d": []}, "e": {}}"#
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("key", ["memory_key", "content"], 1), ["memory_key"]);
        assert_eq!(
            closest("key", ["_idempotency_key", "memory_key"], 1),
            ["memory_key"],
            "an op's own field before the transport's, as close"
        );
        assert_eq!(
            closest("memoryKey", ["memory_key", "content"], 1),
            ["memory_key"]
        );
        assert_eq!(
            closest("contnet", ["memory_key", "content"], 1),
            ["content"]
        );
        assert!(closest("zebra", ["memory_key", "content"], 1).is_empty());
        assert_eq!(
            closest("memory.gte", ["memory.get", "memory.set", "run.begin"], 2),
            ["memory.get", "memory.set"]
        );
    }
}
