//! A WAL file opened through the VFS: the buffer (the crate doc says when
//! it is written out) in front of the default VFS's file.

use std::ffi::{c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr;

use rusqlite::ffi;

/// The most the buffer holds before it is written out.
const CAP: usize = 4 << 20;

/// The buffer's capacity kept after it is written out: enough for a
/// commit of a few hundred frames without growing again, not the 4 MiB a
/// large transaction left behind.
const KEEP: usize = 1 << 20;

/// The most one write hands the default VFS: SQLite's unix VFS writes at
/// most 128 KiB a call (it masks the length to 17 bits), so a longer
/// buffer goes in pieces of whole 4 KiB pages under that.
const WRITE_MAX: usize = 31 * 4096;

/// A WAL frame header's size; its bytes 4..8 are the commit field.
const FRAME_HEADER: usize = 24;

/// A WAL file: ours, then the default VFS's file at [`REAL_AT`].
#[repr(C)]
pub(crate) struct WalFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// Bytes SQLite wrote that are not in the file yet, from `start` on.
    buf: Vec<u8>,
    start: i64,
    /// The last write was a commit frame's header: write the buffer out
    /// after the frame's page.
    commit_next: bool,
}

/// Where the default VFS's file sits in ours.
pub(crate) const REAL_AT: usize = size_of::<WalFile>().next_multiple_of(16);

impl WalFile {
    /// Makes `file` ours, over the default VFS's open file `real`.
    ///
    /// SAFETY (caller): `file` is the space SQLite gave the VFS's `xOpen`
    /// (at least `REAL_AT` bytes, aligned as SQLite aligns allocations) and
    /// `real` the default VFS's file opened at `REAL_AT` within it.
    pub(crate) unsafe fn init(file: *mut ffi::sqlite3_file, real: *mut ffi::sqlite3_file) {
        debug_assert_eq!(file as usize % align_of::<WalFile>(), 0);
        let wal = WalFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            real,
            buf: Vec::new(),
            start: 0,
            commit_next: false,
        };
        // SAFETY: the caller's.
        unsafe { file.cast::<WalFile>().write(wal) };
    }

    /// `file` as ours, when it is one of ours.
    ///
    /// SAFETY (caller): `file` is an open SQLite file, used only through
    /// the answer while the answer lives.
    pub(crate) unsafe fn of<'a>(file: *mut ffi::sqlite3_file) -> Option<&'a mut WalFile> {
        // SAFETY: an open file's methods are readable; only ours have our
        // methods, and then the file is a `WalFile`.
        unsafe { ptr::eq((*file).pMethods, &METHODS).then(|| &mut *file.cast::<WalFile>()) }
    }

    /// Drops the buffer unwritten.
    pub(crate) fn discard(&mut self) {
        self.buf.clear();
        self.commit_next = false;
    }

    /// How many bytes the buffer holds.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Writes the buffer out, and empties it whatever happened: a failed
    /// write fails the SQLite call that caused it, and SQLite then rolls
    /// the transaction back.
    fn flush(&mut self) -> c_int {
        let mut offset = self.start;
        let mut rc = ffi::SQLITE_OK;
        for chunk in self.buf.chunks(WRITE_MAX) {
            let len = c_int::try_from(chunk.len()).expect("at most WRITE_MAX");
            rc = real!(self.real, xWrite(chunk.as_ptr().cast(), len, offset));
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += i64::from(len);
        }
        self.buf.clear();
        self.buf.shrink_to(KEEP);
        rc
    }

    fn write(&mut self, bytes: &[u8], offset: i64) -> c_int {
        let end = self.start + self.buf.len() as i64;
        let len = bytes.len() as i64;
        if !self.buf.is_empty() && offset >= self.start && offset + len <= end {
            // A frame of this transaction written again: in place.
            let at = (offset - self.start) as usize;
            self.buf[at..at + bytes.len()].copy_from_slice(bytes);
        } else {
            if !self.buf.is_empty() && offset != end {
                let rc = self.flush();
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
            }
            if self.buf.is_empty() {
                self.start = offset;
            }
            self.buf.extend_from_slice(bytes);
        }
        let commit = bytes.len() == FRAME_HEADER && bytes[4..8] != [0; 4];
        if std::mem::replace(&mut self.commit_next, commit) || self.buf.len() >= CAP {
            return self.flush();
        }
        ffi::SQLITE_OK
    }
}

/// Calls the default VFS's file method `$m` on its file `$real`.
macro_rules! real {
    ($real:expr, $m:ident($($arg:expr),*)) => {{
        let real = $real;
        // SAFETY: `real` is the default VFS's file, open while ours is,
        // and its methods (version 3, as SQLite's unix VFS's) are set;
        // the arguments are SQLite's, passed on as given.
        unsafe { ((*(*real).pMethods).$m.expect(stringify!($m)))(real, $($arg),*) }
    }};
}
pub(crate) use real;

/// Our file, from SQLite's pointer to it.
///
/// SAFETY (caller): SQLite calls the file's methods on a file `xOpen`
/// made ours and has not closed, from one thread at a time.
unsafe fn ours<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    // SAFETY: the caller's.
    unsafe { &mut *file.cast::<WalFile>() }
}

/// Writes the buffer out, then calls the default file's method `$m`.
macro_rules! flushed {
    ($file:expr, $m:ident($($arg:expr),*)) => {{
        // SAFETY: SQLite calls this method on a file of ours.
        let wal = unsafe { ours($file) };
        match wal.flush() {
            ffi::SQLITE_OK => real!(wal.real, $m($($arg),*)),
            rc => rc,
        }
    }};
}

/// Calls the default file's method `$m`, the buffer left as it is.
macro_rules! passed {
    ($file:expr, $m:ident($($arg:expr),*)) => {{
        // SAFETY: SQLite calls this method on a file of ours.
        let wal = unsafe { ours($file) };
        real!(wal.real, $m($($arg),*))
    }};
}

/// Defines file methods that call the default file's method of the same
/// role through `$via` (`flushed` or `passed`, each module's own), one
/// `fn name(args) -> ret = xMethod;` each.
macro_rules! forwarded {
    ($via:ident: $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $m:ident;)*) => {$(
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
            $via!(file, $m($($arg),*))
        }
    )*};
}
pub(crate) use forwarded;

/// A WAL file's methods: writes into the buffer, and everything else the
/// default file's, once the buffer is out. No shared-memory methods:
/// SQLite calls those on the database file, never on its WAL.
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
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file of ours once and never uses it after.
    let wal = unsafe { ours(file) };
    // Every commit wrote the buffer out: what is left was rolled back.
    wal.discard();
    let rc = real!(wal.real, xClose());
    // SAFETY: as above; the buffer is dropped once, here.
    unsafe { ptr::drop_in_place(&raw mut wal.buf) };
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this method on a file of ours, with `amount`
    // bytes to read at `data`.
    let (wal, bytes) = unsafe {
        (
            ours(file),
            std::slice::from_raw_parts(data.cast::<u8>(), usize::try_from(amount).unwrap_or(0)),
        )
    };
    wal.write(bytes, offset)
}

forwarded! {
    flushed:
    fn read(out: *mut c_void, amount: c_int, offset: i64) -> c_int = xRead;
    fn truncate(size: i64) -> c_int = xTruncate;
    fn sync(flags: c_int) -> c_int = xSync;
    fn file_size(size: *mut i64) -> c_int = xFileSize;
    fn lock(level: c_int) -> c_int = xLock;
    fn unlock(level: c_int) -> c_int = xUnlock;
    fn check_reserved_lock(out: *mut c_int) -> c_int = xCheckReservedLock;
    fn file_control(op: c_int, arg: *mut c_void) -> c_int = xFileControl;
    fn fetch(offset: i64, amount: c_int, out: *mut *mut c_void) -> c_int = xFetch;
}

forwarded! {
    passed:
    fn sector_size() -> c_int = xSectorSize;
    fn device_characteristics() -> c_int = xDeviceCharacteristics;
    fn unfetch(offset: i64, page: *mut c_void) -> c_int = xUnfetch;
}
