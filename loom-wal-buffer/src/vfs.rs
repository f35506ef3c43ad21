//! The VFS itself: the default VFS's methods, with WAL files opened as
//! [`WalFile`]s and main database files as [`DbFile`]s.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use crate::NAME;
use crate::file::{REAL_AT, WalFile};
use crate::map::DbFile;

const NAME_C: &CStr = c"loom-wal-buffer";

/// The default VFS, which ours wraps: set once, by [`register`].
static REAL: OnceLock<usize> = OnceLock::new();

fn real() -> *mut ffi::sqlite3_vfs {
    *REAL.get().expect("the VFS is registered before it is used") as *mut ffi::sqlite3_vfs
}

/// Registers the VFS with SQLite, once a process, over the default VFS of
/// that moment; answers its name ([`NAME`]) for opening connections, or
/// why it could not be registered. It does not become the default.
pub fn register() -> Result<&'static str, String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            // SAFETY: sqlite3_vfs_find may be called at any time.
            let real = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
            if real.is_null() {
                return Err("SQLite has no default VFS".to_owned());
            }
            REAL.get_or_init(|| real as usize);
            // SAFETY: `real` is registered, so live for the process.
            let vfs = Box::leak(Box::new(over(unsafe { &*real })));
            // SAFETY: the VFS is leaked, so it outlives every connection
            // that uses it; its methods have the signatures SQLite calls.
            match unsafe { ffi::sqlite3_vfs_register(vfs, 0) } {
                ffi::SQLITE_OK => Ok(()),
                rc => Err(format!("cannot register the {NAME} VFS (SQLite code {rc})")),
            }
        })
        .clone()
        .map(|()| NAME)
}

/// Our VFS over `real`: its sizes, our file in front of its file.
fn over(real: &ffi::sqlite3_vfs) -> ffi::sqlite3_vfs {
    ffi::sqlite3_vfs {
        // 2: no system-call overrides (xSetSystemCall is for SQLite's own
        // tests, and ours would have to forward them).
        iVersion: 2,
        szOsFile: c_int::try_from(REAL_AT).expect("a small header") + real.szOsFile,
        mxPathname: real.mxPathname,
        pNext: ptr::null_mut(),
        zName: NAME_C.as_ptr(),
        pAppData: ptr::null_mut(),
        xOpen: Some(open),
        xDelete: Some(delete),
        xAccess: Some(access),
        xFullPathname: Some(full_pathname),
        xDlOpen: Some(dl_open),
        xDlError: Some(dl_error),
        xDlSym: Some(dl_sym),
        xDlClose: Some(dl_close),
        xRandomness: Some(randomness),
        xSleep: Some(sleep),
        xCurrentTime: Some(current_time),
        xGetLastError: Some(get_last_error),
        xCurrentTimeInt64: Some(current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }
}

/// Calls the default VFS's method `$m`, given the default VFS itself (its
/// methods read their own `pAppData`).
macro_rules! real {
    ($m:ident($($arg:expr),*)) => {{
        let real = real();
        // SAFETY: the default VFS is live and sets every method of its
        // version (at least 2, as SQLite's unix and windows VFSes are);
        // the arguments are SQLite's, passed on as given.
        unsafe { ((*real).$m.expect(stringify!($m)))(real, $($arg),*) }
    }};
}

unsafe extern "C" fn open(
    _: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let main_db = flags & ffi::SQLITE_OPEN_MAIN_DB != 0;
    if !main_db && flags & ffi::SQLITE_OPEN_WAL == 0 {
        // Neither: the default VFS's own file, at the start of the space.
        return real!(xOpen(name, file, flags, out_flags));
    }
    // SAFETY: SQLite gives `szOsFile` bytes at `file`, aligned for any
    // file; the default VFS's file fits at REAL_AT.
    let inner = unsafe { file.cast::<u8>().add(REAL_AT).cast::<ffi::sqlite3_file>() };
    let rc = real!(xOpen(name, inner, flags, out_flags));
    if rc != ffi::SQLITE_OK {
        // SAFETY: as above; SQLite does not close a file whose open
        // failed, and reads its methods only to tell that it is not open.
        unsafe { (*file).pMethods = ptr::null() };
        return rc;
    }
    // SAFETY: as above; `inner` is open.
    unsafe {
        if main_db {
            DbFile::init(file, inner);
        } else {
            WalFile::init(file, inner);
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn delete(_: *mut ffi::sqlite3_vfs, name: *const c_char, sync: c_int) -> c_int {
    real!(xDelete(name, sync))
}

unsafe extern "C" fn access(
    _: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    real!(xAccess(name, flags, out))
}

unsafe extern "C" fn full_pathname(
    _: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    real!(xFullPathname(name, n, out))
}

unsafe extern "C" fn dl_open(_: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    real!(xDlOpen(name))
}

unsafe extern "C" fn dl_error(_: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    real!(xDlError(n, out))
}

type Symbol = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char);

unsafe extern "C" fn dl_sym(
    _: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<Symbol> {
    real!(xDlSym(handle, symbol))
}

unsafe extern "C" fn dl_close(_: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    real!(xDlClose(handle))
}

unsafe extern "C" fn randomness(_: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    real!(xRandomness(n, out))
}

unsafe extern "C" fn sleep(_: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    real!(xSleep(micros))
}

unsafe extern "C" fn current_time(_: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    real!(xCurrentTime(out))
}

unsafe extern "C" fn get_last_error(_: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    real!(xGetLastError(n, out))
}

unsafe extern "C" fn current_time_int64(_: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    real!(xCurrentTimeInt64(out))
}
