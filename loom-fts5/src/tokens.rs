//! `loom_fts_tokens(text, ...)`: the tokens FTS5 counts in a row of Loom's
//! full-text table, the row's size for [`loom_bm25`](crate::FUNCTION).
//!
//! Why: FTS5 keeps each row's size in a `%_docsize` table of its own, a
//! row per document keyed by its rowid. A memory's rowid is random with
//! respect to when it is written, so every batch of writes handed to the
//! index rewrote a docsize leaf for nearly each memory in it: a page of
//! the write-ahead log each, later copied back by a checkpoint. Loom's
//! table is made with `columnsize = 0` (no docsize table) and each memory
//! keeps its size in its own row (`memories.fts_tokens`), a page the write
//! changes anyway; this function computes that size.
//!
//! The count is FTS5's own: each argument is tokenized by the table's
//! tokenizer ([`TOKENIZER`]) as a document is, and a token counts unless
//! it is a colocated one (a synonym at the position of the one before),
//! as FTS5's insert counts a column's size; the arguments' counts are
//! summed. NULL arguments count nothing, as an FTS5 column holding NULL.

use std::ffi::{CStr, c_int, c_void};
use std::ptr;

use rusqlite::ffi;

/// The SQL name of the function.
pub const FUNCTION: &str = "loom_fts_tokens";

/// The tokenizer of Loom's full-text table (`tokenize = 'porter
/// unicode61'`): its name, then its arguments. A table made with another
/// tokenizer would count differently.
pub const TOKENIZER: (&CStr, &[&CStr]) = (c"porter", &[c"unicode61"]);

/// One connection's instance of [`TOKENIZER`], kept as the function's user
/// data and deleted with it (when the connection closes).
struct Counter {
    methods: ffi::fts5_tokenizer_v2,
    instance: *mut ffi::Fts5Tokenizer,
}

impl Drop for Counter {
    fn drop(&mut self) {
        if let Some(delete) = self.methods.xDelete {
            // SAFETY: `instance` came from this tokenizer's `xCreate` and
            // is deleted once, here.
            unsafe { delete(self.instance) };
        }
    }
}

/// Registers [`FUNCTION`] on `db`, with an instance of [`TOKENIZER`] found
/// through `api`. Returns SQLite's code; an FTS5 without version 2
/// tokenizers (before SQLite 3.47) registers nothing.
///
/// # Safety
/// `db` is an open connection and `api` its FTS5 API.
pub(crate) unsafe fn register(db: *mut ffi::sqlite3, api: *mut ffi::fts5_api) -> c_int {
    // SAFETY: `api` is FTS5's, live while `db` is (the caller's promise);
    // the out-pointers are locals; the tokenizer's arguments are static C
    // strings, which `xCreate` reads during the call only.
    unsafe {
        if (*api).iVersion < 3 {
            return ffi::SQLITE_OK;
        }
        let Some(find) = (*api).xFindTokenizer_v2 else {
            return ffi::SQLITE_OK;
        };
        let (name, args) = TOKENIZER;
        let mut user: *mut c_void = ptr::null_mut();
        let mut methods: *mut ffi::fts5_tokenizer_v2 = ptr::null_mut();
        let rc = find(api, name.as_ptr(), &mut user, &mut methods);
        if rc != ffi::SQLITE_OK || methods.is_null() {
            return rc;
        }
        let methods = *methods;
        let Some(create) = methods.xCreate else {
            return ffi::SQLITE_MISUSE;
        };
        let mut argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let mut instance: *mut ffi::Fts5Tokenizer = ptr::null_mut();
        let argc = c_int::try_from(argv.len()).unwrap_or(c_int::MAX);
        let rc = create(user, argv.as_mut_ptr(), argc, &mut instance);
        if rc != ffi::SQLITE_OK || instance.is_null() {
            return rc;
        }
        let counter = Box::into_raw(Box::new(Counter { methods, instance }));
        // SQLite calls `drop_counter` when the function goes (the
        // connection closes or it is registered again), also when this
        // call fails, so the box is freed either way.
        ffi::sqlite3_create_function_v2(
            db,
            c"loom_fts_tokens".as_ptr(),
            -1,
            ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC,
            counter.cast(),
            Some(loom_fts_tokens),
            None,
            None,
            Some(drop_counter),
        )
    }
}

/// SQLite's destructor for a [`Counter`] it keeps.
unsafe extern "C" fn drop_counter(data: *mut c_void) {
    // SAFETY: SQLite calls this once, with the pointer `register` gave it,
    // which came from `Box::into_raw`.
    drop(unsafe { Box::from_raw(data.cast::<Counter>()) });
}

/// The scalar function (see the module doc).
unsafe extern "C" fn loom_fts_tokens(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls a scalar function with its context, whose user
    // data is the `Counter` `register` gave it (live until `drop_counter`),
    // and `argc` values in `argv`, all valid for the call. A connection is
    // used by one thread at a time, so the tokenizer is too.
    unsafe {
        let counter = &*ffi::sqlite3_user_data(ctx).cast::<Counter>();
        let args: &[*mut ffi::sqlite3_value] = match usize::try_from(argc) {
            Ok(n) if n > 0 && !argv.is_null() => std::slice::from_raw_parts(argv, n),
            _ => &[],
        };
        let mut total: i64 = 0;
        for &arg in args {
            match count(counter, arg) {
                Ok(n) => total += n,
                Err(rc) => return ffi::sqlite3_result_error_code(ctx, rc),
            }
        }
        ffi::sqlite3_result_int64(ctx, total);
    }
}

/// The tokens FTS5 counts in one column holding `value`.
///
/// # Safety
/// `counter` is live and `value` is a live SQL value of the current call.
unsafe fn count(counter: &Counter, value: *mut ffi::sqlite3_value) -> Result<i64, c_int> {
    let Some(tokenize) = counter.methods.xTokenize else {
        return Err(ffi::SQLITE_MISUSE);
    };
    // SAFETY: the type first, then the text and its length, as SQLite
    // documents (the bytes stay valid until the value is next converted,
    // after the tokenizer returns); `column` outlives the call that hands
    // its address to `on_token`.
    unsafe {
        if ffi::sqlite3_value_type(value) == ffi::SQLITE_NULL {
            return Ok(0);
        }
        let text = ffi::sqlite3_value_text(value);
        let len = ffi::sqlite3_value_bytes(value);
        if text.is_null() {
            return Ok(0);
        }
        let mut column: i64 = 0;
        let rc = tokenize(
            counter.instance,
            (&raw mut column).cast(),
            ffi::FTS5_TOKENIZE_DOCUMENT,
            text.cast(),
            len,
            ptr::null(),
            0,
            Some(on_token),
        );
        if rc == ffi::SQLITE_OK {
            Ok(column)
        } else {
            Err(rc)
        }
    }
}

/// The tokenizer's callback: counts a token as FTS5's insert counts a
/// column's size (a colocated token only when it is the column's first).
unsafe extern "C" fn on_token(
    column: *mut c_void,
    flags: c_int,
    _token: *const std::ffi::c_char,
    _len: c_int,
    _start: c_int,
    _end: c_int,
) -> c_int {
    // SAFETY: `count` passes the address of its `i64`, live for the call.
    let column = unsafe { &mut *column.cast::<i64>() };
    if flags & ffi::FTS5_TOKEN_COLOCATED == 0 || *column == 0 {
        *column += 1;
    }
    ffi::SQLITE_OK
}
