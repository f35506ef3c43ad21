//! SQLite's own page cache (`pcache1`) behind a thin layer that skips the
//! truncations with nothing to drop.
//!
//! Why: at the end of every transaction SQLite truncates the connection's
//! page cache to the database's size, and `pcache1` decides how much of its
//! hash table to walk from the largest page number it was ever handed
//! since the last truncation. When a B-tree split takes its new pages out
//! of order (pages reused from the freelist, which Loom's full-text queue
//! and FTS5's merges keep full), `balance_nonroot` swaps their numbers
//! through a temporary one, the page holding SQLite's lock byte (page
//! 262,145 of 4 KiB pages, 1 GiB into the file, a page SQLite never
//! stores anything in). `pcache1` then remembers that number as its
//! largest, and the next truncation walks every slot of the hash table,
//! one cache miss after another: ~9% of the writer thread's time under
//! Loom's `memory.set` benchmark (bench/RESULTS.md). SQLite's later
//! sources swap through the same page.
//!
//! What it does: each cache remembers the largest page number it was
//! handed other than that temporary, and whether a page sits at the
//! temporary now. A truncation that can find nothing to drop (no page at
//! the temporary, and the limit above every other number) returns at
//! once; any other goes to `pcache1` as before. Every other method is
//! `pcache1`'s own, so what the cache holds, evicts and hands back is
//! unchanged.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use rusqlite::ffi;

/// The byte SQLite locks a database file at (`PENDING_BYTE`), whose page
/// never holds data; `balance_nonroot` renumbers pages through it.
const PENDING_BYTE: u32 = 0x4000_0000;

type Pcache = ffi::sqlite3_pcache;
type Page = ffi::sqlite3_pcache_page;

/// SQLite's default page cache, which ours wraps: set once, by [`install`],
/// before SQLite can call a method of ours.
static INNER: OnceLock<Inner> = OnceLock::new();

/// The default cache's argument and methods, every one of them present
/// (SQLite calls them all; [`install`] refuses a cache that lacks one).
/// They point to SQLite's own static functions and data, live for the
/// process.
struct Inner {
    arg: *mut c_void,
    init: unsafe extern "C" fn(*mut c_void) -> c_int,
    shutdown: unsafe extern "C" fn(*mut c_void),
    create: unsafe extern "C" fn(c_int, c_int, c_int) -> *mut Pcache,
    cachesize: unsafe extern "C" fn(*mut Pcache, c_int),
    pagecount: unsafe extern "C" fn(*mut Pcache) -> c_int,
    fetch: unsafe extern "C" fn(*mut Pcache, c_uint, c_int) -> *mut Page,
    unpin: unsafe extern "C" fn(*mut Pcache, *mut Page, c_int),
    rekey: unsafe extern "C" fn(*mut Pcache, *mut Page, c_uint, c_uint),
    truncate: unsafe extern "C" fn(*mut Pcache, c_uint),
    destroy: unsafe extern "C" fn(*mut Pcache),
    shrink: unsafe extern "C" fn(*mut Pcache),
}

// SAFETY: function pointers and `arg`, which `pcache1` never writes
// through after its init; SQLite itself shares them between threads in
// its global configuration.
unsafe impl Send for Inner {}
// SAFETY: as above: read only.
unsafe impl Sync for Inner {}

impl Inner {
    /// `default`'s methods, when it has every one.
    fn of(default: &ffi::sqlite3_pcache_methods2) -> Option<Inner> {
        Some(Inner {
            arg: default.pArg,
            init: default.xInit?,
            shutdown: default.xShutdown?,
            create: default.xCreate?,
            cachesize: default.xCachesize?,
            pagecount: default.xPagecount?,
            fetch: default.xFetch?,
            unpin: default.xUnpin?,
            rekey: default.xRekey?,
            truncate: default.xTruncate?,
            destroy: default.xDestroy?,
            shrink: default.xShrink?,
        })
    }
}

fn inner() -> &'static Inner {
    INNER
        .get()
        .expect("set before SQLite can call a method of ours")
}

/// What the layer did, over every cache of the process: for tests and
/// diagnostics.
static SKIPPED: AtomicU64 = AtomicU64::new(0);
static HANDED_ON: AtomicU64 = AtomicU64::new(0);
static THROUGH_LOCK_PAGE: AtomicU64 = AtomicU64::new(0);

/// What the layer has done in this process so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Truncations that could drop nothing, returned at once.
    pub skipped: u64,
    /// Truncations handed to `pcache1`.
    pub handed_on: u64,
    /// Pages renumbered to the lock byte's page (by `balance_nonroot`).
    pub through_lock_page: u64,
}

/// What the layer has done in this process so far.
pub fn counts() -> Counts {
    Counts {
        skipped: SKIPPED.load(Ordering::Relaxed),
        handed_on: HANDED_ON.load(Ordering::Relaxed),
        through_lock_page: THROUGH_LOCK_PAGE.load(Ordering::Relaxed),
    }
}

/// [`install`]'s outcome, once it has run.
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Puts the layer in front of SQLite's page cache for every connection the
/// process opens. SQLite takes a page cache only before it is first used
/// (`sqlite3_initialize`, which opening a connection, finding a VFS or
/// registering an extension does), and only while no other thread uses
/// SQLite (`sqlite3_config` is not thread-safe): call it first in `main`.
/// Called later, it answers why not and SQLite keeps its own cache, which
/// works the same, only slower. Calling it again answers the first call's
/// outcome.
pub fn install() -> Result<(), String> {
    INSTALLED.get_or_init(install_once).clone()
}

/// [`install`]'s outcome; `None` when nothing has called it.
pub fn installed() -> Option<Result<(), String>> {
    INSTALLED.get().cloned()
}

fn install_once() -> Result<(), String> {
    let mut default = ffi::sqlite3_pcache_methods2 {
        iVersion: 0,
        pArg: std::ptr::null_mut(),
        xInit: None,
        xShutdown: None,
        xCreate: None,
        xCachesize: None,
        xPagecount: None,
        xFetch: None,
        xUnpin: None,
        xRekey: None,
        xTruncate: None,
        xDestroy: None,
        xShrink: None,
    };
    // SAFETY: GETPCACHE2 copies the current methods into the struct given,
    // of the type it expects; before initialization it sets the default.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, &raw mut default) };
    if rc != ffi::SQLITE_OK {
        return Err(format!(
            "SQLite is already in use, its page cache stays (code {rc})"
        ));
    }
    let Some(methods) = Inner::of(&default) else {
        return Err("SQLite's page cache lacks a method".to_owned());
    };
    let _ = INNER.set(methods);
    let ours = ffi::sqlite3_pcache_methods2 {
        iVersion: 1,
        pArg: std::ptr::null_mut(),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        xCreate: Some(create),
        xCachesize: Some(cachesize),
        xPagecount: Some(pagecount),
        xFetch: Some(fetch),
        xUnpin: Some(unpin),
        xRekey: Some(rekey),
        xTruncate: Some(truncate),
        xDestroy: Some(destroy),
        xShrink: Some(shrink),
    };
    // SAFETY: PCACHE2 copies the struct given; its functions have the
    // signatures SQLite calls and live for the process.
    match unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &raw const ours) } {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(format!("SQLite refused the page cache (code {rc})")),
    }
}

/// One cache: `pcache1`'s, and what our truncations need to know of it.
struct Cache {
    inner: *mut Pcache,
    /// The lock byte's page for this cache's page size.
    temporary: u32,
    /// At least the largest page number handed to the cache, other than
    /// `temporary`, since its last truncation below it.
    largest: AtomicU32,
    /// Whether a page may sit at `temporary`.
    at_temporary: AtomicBool,
}

impl Cache {
    /// SQLite handed the cache page number `key` (a new page, or one
    /// renumbered to it).
    fn handed(&self, key: c_uint) {
        // A load and a store, not a read-modify-write: SQLite calls a
        // cache's methods one at a time (from the connection that owns
        // it), and this runs at every page a statement touches.
        if key == self.temporary {
            self.at_temporary.store(true, Ordering::Relaxed);
        } else if key > self.largest.load(Ordering::Relaxed) {
            self.largest.store(key, Ordering::Relaxed);
        }
    }
}

/// # Safety
/// `p` is a cache [`create`] made and [`destroy`] has not freed.
unsafe fn cache<'a>(p: *mut Pcache) -> &'a Cache {
    // SAFETY: the caller's promise: `p` is a live `Cache` of ours.
    unsafe { &*p.cast::<Cache>() }
}

unsafe extern "C" fn init(_arg: *mut c_void) -> c_int {
    let m = inner();
    // SAFETY: the default cache's own init, with its own argument.
    unsafe { (m.init)(m.arg) }
}

unsafe extern "C" fn shutdown(_arg: *mut c_void) {
    let m = inner();
    // SAFETY: the default cache's own shutdown, with its own argument.
    unsafe { (m.shutdown)(m.arg) }
}

unsafe extern "C" fn create(page: c_int, extra: c_int, purgeable: c_int) -> *mut Pcache {
    // SAFETY: the default cache's create, with SQLite's arguments.
    let made = unsafe { (inner().create)(page, extra, purgeable) };
    if made.is_null() {
        return made;
    }
    let size = u32::try_from(page).unwrap_or(1).max(1);
    let cache = Cache {
        inner: made,
        temporary: PENDING_BYTE / size + 1,
        largest: AtomicU32::new(0),
        at_temporary: AtomicBool::new(false),
    };
    Box::into_raw(Box::new(cache)).cast()
}

unsafe extern "C" fn cachesize(p: *mut Pcache, n: c_int) {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    // SAFETY: the default method on the cache it made.
    unsafe { (inner().cachesize)(c.inner, n) }
}

unsafe extern "C" fn pagecount(p: *mut Pcache) -> c_int {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    // SAFETY: the default method on the cache it made.
    unsafe { (inner().pagecount)(c.inner) }
}

unsafe extern "C" fn fetch(p: *mut Pcache, key: c_uint, create: c_int) -> *mut Page {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    if create != 0 {
        // Before the call: a page it makes is then already counted.
        c.handed(key);
    }
    // SAFETY: the default method on the cache it made.
    unsafe { (inner().fetch)(c.inner, key, create) }
}

unsafe extern "C" fn unpin(p: *mut Pcache, page: *mut Page, discard: c_int) {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    // SAFETY: the default method on the cache it made and its page.
    unsafe { (inner().unpin)(c.inner, page, discard) }
}

unsafe extern "C" fn rekey(p: *mut Pcache, page: *mut Page, old: c_uint, new: c_uint) {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    c.handed(new);
    if new == c.temporary {
        THROUGH_LOCK_PAGE.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: the default method on the cache it made and its page.
    unsafe { (inner().rekey)(c.inner, page, old, new) }
    if old == c.temporary {
        // Page numbers are unique in a cache: the one page there left.
        c.at_temporary.store(false, Ordering::Relaxed);
    }
}

unsafe extern "C" fn truncate(p: *mut Pcache, limit: c_uint) {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    let temporary = c.at_temporary.load(Ordering::Relaxed);
    if !temporary && limit > c.largest.load(Ordering::Relaxed) {
        // Every page's number is below `limit`: nothing to drop.
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    HANDED_ON.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the default method on the cache it made.
    unsafe { (inner().truncate)(c.inner, limit) }
    // Every page at `limit` or above is gone.
    if c.largest.load(Ordering::Relaxed) >= limit {
        c.largest.store(limit.saturating_sub(1), Ordering::Relaxed);
    }
    if limit <= c.temporary {
        c.at_temporary.store(false, Ordering::Relaxed);
    }
}

unsafe extern "C" fn destroy(p: *mut Pcache) {
    // SAFETY: SQLite passes a cache of ours, for the last time: the box
    // `create` leaked is taken back and freed here.
    let c = unsafe { Box::from_raw(p.cast::<Cache>()) };
    // SAFETY: the default method on the cache it made, once.
    unsafe { (inner().destroy)(c.inner) }
}

unsafe extern "C" fn shrink(p: *mut Pcache) {
    // SAFETY: SQLite passes a live cache of ours.
    let c = unsafe { cache(p) };
    // SAFETY: the default method on the cache it made.
    unsafe { (inner().shrink)(c.inner) }
}
