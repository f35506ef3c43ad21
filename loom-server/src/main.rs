//! The `loom` binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    loom_ops::link();
    loom_server::cli::run(std::env::args_os())
}
