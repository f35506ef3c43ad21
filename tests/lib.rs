//! Shared helpers for Loom's end-to-end tests.

/// Makes sure every op crate is linked into the test binary.
pub fn link() {
    loom_ops::link();
}
