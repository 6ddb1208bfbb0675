//! The `grove-conformance` binary: see [`cli`].

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
