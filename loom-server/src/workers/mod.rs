//! Background workers. Each is optional (`LOOM_WORKERS=false` runs none)
//! and safe to run on every replica at once.

pub mod full_text;
pub mod retention;
pub mod session_runs;
