//! `grove-reference-operator`: the reference operator binary ([`grove_reference_operator::cli`]).

fn main() -> anyhow::Result<std::process::ExitCode> {
    grove_reference_operator::cli::main_with(std::env::args_os())
}
