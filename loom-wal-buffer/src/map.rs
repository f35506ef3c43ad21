//! A database file opened through the VFS: the default VFS's file, with
//! its memory map kept across other connections' commits.
//!
//! Why: SQLite drops a connection's whole memory map of the database at
//! its next read transaction whenever the WAL changed
//! (`pagerBeginReadTransaction` calls `xUnfetch(0, NULL)`), to be safe
//! against a file truncated, or truncated and extended, behind its back.
//! Under writes that is every read: each maps the file again and faults
//! its pages back in, and each `munmap` interrupts the process's other
//! threads for their TLBs. Under Loom's `memory.set` benchmark that was
//! half of the cost of a set's read on the serving thread
//! (bench/RESULTS.md).
//!
//! What it does: that one call keeps the map while the file is neither
//! smaller than when the map was last dropped nor [`REMAP`] larger. The
//! map is `MAP_SHARED`, so it always shows the file's current pages; what
//! the drop guards against is reading a page past the end of a file that
//! shrank (a SIGBUS), and SQLite reads from the file only the pages of its
//! snapshot that are not in the WAL, which are in the file: a checkpoint
//! shrinks the file only once no reader's snapshot is older than the
//! shrink. Pages past the map's end (the file grew) are read with `pread`,
//! as SQLite does for them, until the file has grown [`REMAP`] and the map
//! is made again. A shrink drops the map as SQLite would.

use std::ffi::{c_int, c_void};

use rusqlite::ffi;

/// How much the file may grow past its size at the last drop before the
/// map is made again (pages past the map are read with `pread`).
const REMAP: i64 = 8 << 20;

/// A database file: ours, then the default VFS's file at
/// [`crate::file::REAL_AT`] (which is past this header too).
#[repr(C)]
pub(crate) struct DbFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// The file's size when the map was last dropped; -1 before.
    dropped_at: i64,
}

const _: () = assert!(size_of::<DbFile>() <= crate::file::REAL_AT);

impl DbFile {
    /// Makes `file` ours, over the default VFS's open file `real`.
    ///
    /// SAFETY (caller): as for [`crate::file::WalFile::init`].
    pub(crate) unsafe fn init(file: *mut ffi::sqlite3_file, real: *mut ffi::sqlite3_file) {
        let db = DbFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            real,
            dropped_at: -1,
        };
        // SAFETY: the caller's.
        unsafe { file.cast::<DbFile>().write(db) };
    }

    /// Whether SQLite's request to drop the whole map can be let go.
    fn keeps_map(&mut self) -> bool {
        let mut size: i64 = 0;
        if real!(self.real, xFileSize(&raw mut size)) != ffi::SQLITE_OK {
            return false;
        }
        let keep =
            self.dropped_at >= 0 && size >= self.dropped_at && size < self.dropped_at + REMAP;
        if !keep {
            self.dropped_at = size;
        }
        keep
    }
}

use crate::file::{forwarded, real};

/// Our file, from SQLite's pointer to it.
///
/// SAFETY (caller): SQLite calls the file's methods on a file `xOpen`
/// made ours and has not closed, from one thread at a time.
unsafe fn ours<'a>(file: *mut ffi::sqlite3_file) -> &'a mut DbFile {
    // SAFETY: the caller's.
    unsafe { &mut *file.cast::<DbFile>() }
}

/// Calls the default file's method `$m`.
macro_rules! passed {
    ($file:expr, $m:ident($($arg:expr),*)) => {{
        // SAFETY: SQLite calls this method on a file of ours.
        let db = unsafe { ours($file) };
        real!(db.real, $m($($arg),*))
    }};
}

/// Every method the default file's, but the drop of the whole map.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this method on a file of ours.
    let db = unsafe { ours(file) };
    if page.is_null() && db.keeps_map() {
        return ffi::SQLITE_OK;
    }
    real!(db.real, xUnfetch(offset, page))
}

forwarded! {
    passed:
    fn close() -> c_int = xClose;
    fn read(out: *mut c_void, amount: c_int, offset: i64) -> c_int = xRead;
    fn write(data: *const c_void, amount: c_int, offset: i64) -> c_int = xWrite;
    fn truncate(size: i64) -> c_int = xTruncate;
    fn sync(flags: c_int) -> c_int = xSync;
    fn file_size(size: *mut i64) -> c_int = xFileSize;
    fn lock(level: c_int) -> c_int = xLock;
    fn unlock(level: c_int) -> c_int = xUnlock;
    fn check_reserved_lock(out: *mut c_int) -> c_int = xCheckReservedLock;
    fn file_control(op: c_int, arg: *mut c_void) -> c_int = xFileControl;
    fn sector_size() -> c_int = xSectorSize;
    fn device_characteristics() -> c_int = xDeviceCharacteristics;
    fn shm_map(region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int = xShmMap;
    fn shm_lock(offset: c_int, n: c_int, flags: c_int) -> c_int = xShmLock;
    fn shm_barrier() -> () = xShmBarrier;
    fn shm_unmap(delete: c_int) -> c_int = xShmUnmap;
    fn fetch(offset: i64, amount: c_int, out: *mut *mut c_void) -> c_int = xFetch;
}
