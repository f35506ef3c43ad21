//! The `loom` binary.

use std::process::ExitCode;

/// mimalloc rather than the system allocator: a call allocates and frees
/// many small buffers across the runtime's and the database's threads, and
/// glibc's malloc spent ~12% of the server's CPU on them under load
/// (`bench/RESULTS.md`). The `override` feature makes it the C allocator
/// too, so SQLite's own allocations (a few per row read) take the same path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // First, while the process has one thread and SQLite has not started.
    loom_ops::store::prepare_sqlite();
    loom_ops::link();
    loom_server::cli::run(std::env::args_os())
}
