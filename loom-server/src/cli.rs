//! The command line: `loom <command>`.
//!
//! Usage errors (an unknown flag, a bad `--format`) print clap's message and
//! exit with code 2; failures while running exit with code 1.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use loom_core::Registry;
use loom_core::export::{self, Format};

#[derive(Debug, Parser)]
#[command(
    name = "loom",
    version,
    about = "Loom: long-term, shared memory and context for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes the action schema a policy gateway governs Loom's tools with.
    ExportActions {
        /// `json`: the MCP tools/list manifest plus a `loom` block per tool;
        /// `cedar`: a Cedar schema with one action per op.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Where to write; `-` (the default) is standard output.
        #[arg(short = 'o', long = "output", default_value = "-")]
        output: PathBuf,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    Json,
    Cedar,
}

impl From<ExportFormat> for Format {
    fn from(f: ExportFormat) -> Format {
        match f {
            ExportFormat::Json => Format::Json,
            ExportFormat::Cedar => Format::Cedar,
        }
    }
}

/// Runs the command line and returns the process's exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match cli.command {
        Command::ExportActions { format, output } => export_actions(format.into(), &output),
    }
}

/// The registry, or every fault in it on standard error.
pub fn registry_or_report() -> Option<&'static Registry> {
    match Registry::global() {
        Ok(r) => Some(r),
        Err(errors) => {
            eprintln!("loom: the op registry is invalid:");
            for e in errors {
                eprintln!("  - {e}");
            }
            None
        }
    }
}

fn export_actions(format: Format, output: &std::path::Path) -> ExitCode {
    let Some(registry) = registry_or_report() else {
        return ExitCode::FAILURE;
    };
    let text = export::render(registry, format);
    let written = if output.as_os_str() == "-" {
        std::io::stdout().lock().write_all(text.as_bytes())
    } else {
        std::fs::write(output, text)
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "loom export-actions: cannot write {}: {e}",
                output.display()
            );
            ExitCode::FAILURE
        }
    }
}
