//! `loom_bm25`: SQLite FTS5's `bm25()` ranking, with the document
//! frequencies handed in by the caller instead of counted per query.
//!
//! Why: `bm25()` needs, for each phrase of the query, the number of rows
//! holding it, and FTS5 counts that on every query by walking the phrase's
//! whole doclist. For a common word over 100,000 memories that is tens of
//! thousands of entries per phrase per query — half of all the CPU a
//! search used, even though the number barely moves from one query to the
//! next. Loom's search counts each word once, keeps the count for a while
//! (loom-ops, `memory::doc_freq`) and passes the counts in:
//!
//! ```sql
//! SELECT -loom_bm25(memories_fts, '1520 87', m.fts_tokens, 2.0, 1.0, 0.5)
//! FROM memories_fts JOIN memories m ON m.id = -memories_fts.rowid
//! WHERE memories_fts MATCH '"deploy" OR "window"'
//! ```
//!
//! The first argument after the table is the frequencies, one per phrase of
//! the MATCH expression in order, as decimal integers separated by spaces.
//! The second is the row's size: the number of its tokens (an integer, as
//! [`TOKENS_FUNCTION`] counts them), or its `sz` blob from the table's
//! docsize table, or NULL to have FTS5 read it. The rest are column
//! weights, as for `bm25()`. The frequencies are read once, at the query's
//! first row, with the table's totals (as `bm25()` computes its own once
//! per query). With the counts FTS5 would have made, the score is
//! `bm25()`'s to the last bit (see the tests).
//!
//! Why the size as an argument: FTS5 reads a row's size for an auxiliary
//! function by running a statement of its own on the docsize table, per
//! row; under Loom's search load that was a tenth of the searching
//! threads' time. Read in the query it costs nothing more (Loom's table
//! keeps no docsize table at all: [`tokens`] says why, and
//! each memory keeps its size in its own row); a value that is neither a
//! count nor a docsize blob is read from FTS5 instead.
//!
//! [`install`] registers both functions with every SQLite connection the
//! process opens afterwards (an SQLite auto-extension), sqlx's and
//! rusqlite's alike, as both link this one bundled SQLite.
//!
//! This is one of the two crates of the workspace that may use `unsafe`
//! (with `loom-wal-buffer`): the FTS5 extension API exists only in C.
//! Each block says why it is sound.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

pub mod tokens;
pub use tokens::{FUNCTION as TOKENS_FUNCTION, TOKENIZER};

/// The SQL name of the function.
pub const FUNCTION: &str = "loom_bm25";

/// BM25's term-frequency saturation, as FTS5 uses it.
const K1: f64 = 1.2;
/// BM25's length normalisation, as FTS5 uses it.
const B: f64 = 0.75;

/// Registers [`FUNCTION`] with every SQLite connection opened from now on.
/// Call it before opening any; calling it again does nothing.
pub fn install() -> Result<(), String> {
    static RESULT: OnceLock<c_int> = OnceLock::new();
    // SAFETY: `register` has the signature SQLite calls auto-extensions
    // with, and it lives as long as the process.
    let rc = *RESULT.get_or_init(|| unsafe { ffi::sqlite3_auto_extension(Some(register)) });
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!(
            "cannot register {FUNCTION} with SQLite (code {rc})"
        ))
    }
}

/// The frequencies argument for `dfs`, in the form [`FUNCTION`] reads.
pub fn frequencies(dfs: &[i64]) -> String {
    dfs.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")
}

/// The BM25 score of one row exactly as FTS5's `bm25()` computes it (a
/// negative number: better matches are lower).
///
/// `rows`: the rows in the table; `tokens`: the tokens in all of them;
/// `row_tokens`: the tokens in this row; `freqs[i]`: phrase i's weighted
/// occurrences in this row; `dfs[i]`: the rows holding phrase i.
pub fn bm25(rows: i64, tokens: i64, row_tokens: i64, freqs: &[f64], dfs: &[i64]) -> f64 {
    let n = rows as f64;
    let avgdl = tokens as f64 / n;
    let length = 1.0 - B + B * row_tokens as f64 / avgdl;
    let mut score = 0.0;
    for (&freq, &df) in freqs.iter().zip(dfs) {
        // A count kept from earlier may exceed today's rows (deletions).
        let hits = df.clamp(0, rows) as f64;
        // FTS5's floor: a phrase in over half the rows still weighs a little.
        let idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
        let idf = if idf <= 0.0 { 1e-6 } else { idf };
        // Grouped as FTS5 groups it, so the result is the same to the bit.
        score += idf * ((freq * (K1 + 1.0)) / (freq + K1 * length));
    }
    -score
}

/// Why a call failed.
enum Failure {
    /// An FTS5 API call returned this code.
    Sqlite(c_int),
    /// The SQL call was wrong.
    Usage(&'static CStr),
}

/// The SQLite auto-extension: registers [`FUNCTION`] with FTS5 on `db`,
/// and [`TOKENS_FUNCTION`]. A connection without FTS5 is left as it is
/// (the functions are then unknown there, and SQL naming them fails with
/// "no such function").
unsafe extern "C" fn register(
    db: *mut ffi::sqlite3,
    _message: *mut *mut c_char,
    _routines: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: SQLite calls this with the connection being opened.
    let Some(api) = (unsafe { fts5_api(db) }) else {
        return ffi::SQLITE_OK;
    };
    // SAFETY: `api` is FTS5's own, live while `db` is; the name is a
    // static C string FTS5 copies; no user data, so no destructor.
    let rc = unsafe {
        match (*api).xCreateFunction {
            Some(create) => create(
                api,
                c"loom_bm25".as_ptr(),
                ptr::null_mut(),
                Some(loom_bm25),
                None,
            ),
            None => ffi::SQLITE_OK,
        }
    };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    // SAFETY: `db` is open and `api` is its FTS5 API.
    unsafe { tokens::register(db, api) }
}

/// FTS5's extension API on `db`, the documented way: `SELECT fts5(?1)`
/// with a pointer bound to receive it. `None` without FTS5.
///
/// # Safety
/// `db` is an open connection.
unsafe fn fts5_api(db: *mut ffi::sqlite3) -> Option<*mut ffi::fts5_api> {
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: `db` is open (the caller's promise); `stmt` and `api` are
    // locals that outlive the statement, which is finalized before return.
    unsafe {
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            return None;
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&raw mut api).cast(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        (!api.is_null()).then_some(api)
    }
}

/// The auxiliary function FTS5 calls for each row (see the crate doc).
unsafe extern "C" fn loom_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls auxiliary functions with its live API, the
    // cursor's context and `argc` values in `argv`, all valid for the call.
    unsafe {
        let args: &[*mut ffi::sqlite3_value] = match usize::try_from(argc) {
            Ok(n) if n > 0 && !argv.is_null() => std::slice::from_raw_parts(argv, n),
            _ => &[],
        };
        match row_score(&*api, fts, args) {
            Ok(score) => ffi::sqlite3_result_double(ctx, score),
            Err(Failure::Sqlite(rc)) => ffi::sqlite3_result_error_code(ctx, rc),
            // SQLite copies the message.
            Err(Failure::Usage(message)) => ffi::sqlite3_result_error(ctx, message.as_ptr(), -1),
        }
    }
}

/// Calls one of FTS5's API methods, turning a missing one or an error
/// code into a [`Failure`].
macro_rules! call {
    ($api:expr, $method:ident ( $($arg:expr),* )) => {
        match $api.$method {
            Some(method) => method($($arg),*),
            None => return Err(Failure::Sqlite(ffi::SQLITE_MISUSE)),
        }
    };
}

macro_rules! check {
    ($rc:expr) => {
        match $rc {
            ffi::SQLITE_OK => {}
            rc => return Err(Failure::Sqlite(rc)),
        }
    };
}

/// What every row of one query shares, worked out at its first row and
/// kept by FTS5 with the cursor (its auxiliary data), as `bm25()` keeps
/// its own: the frequencies argument parsed, the table's totals, and room
/// for a row's phrase frequencies.
struct QueryData {
    dfs: Vec<i64>,
    rows: i64,
    tokens: i64,
    freqs: Vec<f64>,
}

/// FTS5's destructor for a [`QueryData`] it keeps.
unsafe extern "C" fn drop_query_data(data: *mut c_void) {
    // SAFETY: FTS5 calls this once, with the pointer `query_data` gave it,
    // which came from `Box::into_raw`.
    drop(unsafe { Box::from_raw(data.cast::<QueryData>()) });
}

/// The cursor's [`QueryData`], made and handed to FTS5 at the first row.
///
/// # Safety
/// `api`, `fts` and `dfs_arg` are what FTS5 passed to [`loom_bm25`]; the
/// reference does not outlive the call.
unsafe fn query_data<'a>(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    dfs_arg: *mut ffi::sqlite3_value,
) -> Result<&'a mut QueryData, Failure> {
    // SAFETY: FTS5's methods on its own context, out-pointers to locals;
    // the pointer kept is ours (a `QueryData` from `Box::into_raw`), freed
    // only by FTS5 through `drop_query_data` when the query ends, and FTS5
    // calls an auxiliary function for one row at a time.
    unsafe {
        let kept = call!(api, xGetAuxdata(fts, 0)).cast::<QueryData>();
        if !kept.is_null() {
            return Ok(&mut *kept);
        }
        let dfs = parse_frequencies(dfs_arg).ok_or(Failure::Usage(
            c"loom_bm25: the frequencies must be decimal integers separated by spaces",
        ))?;
        let phrases = call!(api, xPhraseCount(fts));
        if usize::try_from(phrases).ok() != Some(dfs.len()) {
            return Err(Failure::Usage(
                c"loom_bm25: give one document frequency per phrase of the query",
            ));
        }
        let (mut rows, mut tokens) = (0_i64, 0_i64);
        check!(call!(api, xRowCount(fts, &mut rows)));
        check!(call!(api, xColumnTotalSize(fts, -1, &mut tokens)));
        let data = Box::into_raw(Box::new(QueryData {
            freqs: vec![0.0; dfs.len()],
            dfs,
            rows,
            tokens,
        }));
        // On failure FTS5 has already called the destructor on `data`.
        check!(call!(
            api,
            xSetAuxdata(fts, data.cast(), Some(drop_query_data))
        ));
        Ok(&mut *data)
    }
}

/// The score of the cursor's current row.
///
/// # Safety
/// `api`, `fts` and `args` are what FTS5 passed to [`loom_bm25`].
unsafe fn row_score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    args: &[*mut ffi::sqlite3_value],
) -> Result<f64, Failure> {
    let Some((&dfs_arg, rest)) = args.split_first() else {
        return Err(Failure::Usage(
            c"loom_bm25(table, frequencies, row size, weights...): the document frequencies are missing",
        ));
    };
    let Some((&size_arg, weights)) = rest.split_first() else {
        return Err(Failure::Usage(
            c"loom_bm25(table, frequencies, row size, weights...): the row size is missing",
        ));
    };
    // SAFETY: what FTS5 passed (the caller's promise); `data` lives until
    // the query ends, beyond this call.
    let data = unsafe { query_data(api, fts, dfs_arg) }?;
    // SAFETY: FTS5's methods, on its own context, with out-pointers to locals.
    unsafe {
        let mut instances: c_int = 0;
        check!(call!(api, xInstCount(fts, &mut instances)));
        data.freqs.fill(0.0);
        for i in 0..instances {
            let (mut phrase, mut column, mut offset): (c_int, c_int, c_int) = (0, 0, 0);
            check!(call!(
                api,
                xInst(fts, i, &mut phrase, &mut column, &mut offset)
            ));
            let weight = usize::try_from(column)
                .ok()
                .and_then(|c| weights.get(c))
                .map_or(1.0, |&w| ffi::sqlite3_value_double(w));
            if let Some(f) = usize::try_from(phrase)
                .ok()
                .and_then(|p| data.freqs.get_mut(p))
            {
                *f += weight;
            }
        }
        let row_tokens = match row_size(size_arg) {
            Some(n) => n,
            None => {
                let mut n: c_int = 0;
                check!(call!(api, xColumnSize(fts, -1, &mut n)));
                // A table without sizes (`columnsize = 0`, contentless)
                // answers -1 a column.
                if n < 0 {
                    return Err(Failure::Usage(
                        c"loom_bm25: the table keeps no row sizes; pass the row's size",
                    ));
                }
                i64::from(n)
            }
        };
        if data.rows <= 0 || data.tokens <= 0 {
            // Only an empty table has no tokens, and it matches nothing.
            return Ok(0.0);
        }
        Ok(bm25(
            data.rows,
            data.tokens,
            row_tokens,
            &data.freqs,
            &data.dfs,
        ))
    }
}

/// The tokens in a row: `value` itself when it is a non-negative integer
/// (what [`TOKENS_FUNCTION`] counts, as Loom's memories keep it), or the
/// sum of a `%_docsize.sz` blob (a varint per column, as FTS5 writes it);
/// `None` for anything else (NULL: FTS5 reads the row's size itself), a
/// malformed blob included.
///
/// # Safety
/// `value` is a live SQL value of the current call.
unsafe fn row_size(value: *mut ffi::sqlite3_value) -> Option<i64> {
    // SAFETY: the type first; an integer's value; a blob's pointer, then
    // its length, as SQLite documents; the bytes stay valid until the
    // value is next converted, after this function.
    let blob = unsafe {
        match ffi::sqlite3_value_type(value) {
            ffi::SQLITE_INTEGER => {
                let n = ffi::sqlite3_value_int64(value);
                return (n >= 0).then_some(n);
            }
            ffi::SQLITE_BLOB => {}
            _ => return None,
        }
        let data = ffi::sqlite3_value_blob(value).cast::<u8>();
        let len = usize::try_from(ffi::sqlite3_value_bytes(value)).ok()?;
        if data.is_null() || len == 0 {
            return None;
        }
        std::slice::from_raw_parts(data, len)
    };
    let mut total: i64 = 0;
    let mut rest = blob;
    while !rest.is_empty() {
        let (n, used) = varint(rest)?;
        total = total.checked_add(i64::try_from(n).ok()?)?;
        rest = &rest[used..];
    }
    Some(total)
}

/// One SQLite varint (big-endian groups of 7 bits, the high bit set on all
/// but the last; a ninth byte holds 8 bits) and the bytes it took.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut n: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((n << 8) | u64::from(b), 9));
        }
        n = (n << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

/// The frequencies argument, or `None` when it is not a list of integers.
///
/// # Safety
/// `value` is a live SQL value of the current call.
unsafe fn parse_frequencies(value: *mut ffi::sqlite3_value) -> Option<Vec<i64>> {
    // SAFETY: text first, then its length, as SQLite documents; the bytes
    // stay valid until the value is next converted, after this function.
    let text = unsafe {
        let text = ffi::sqlite3_value_text(value);
        if text.is_null() {
            return None;
        }
        let len = usize::try_from(ffi::sqlite3_value_bytes(value)).ok()?;
        std::slice::from_raw_parts(text, len)
    };
    std::str::from_utf8(text)
        .ok()?
        .split_ascii_whitespace()
        .map(|n| n.parse().ok())
        .collect()
}
