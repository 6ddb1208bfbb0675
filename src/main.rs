//! The `grove-conformance` binary: see [`cli`]. Invoked as `grove-reference-operator` (a link
//! to it, as in the image the `image` command builds) it is the reference operator's own
//! command line instead.

mod cli;

fn main() -> std::process::ExitCode {
    let program = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&program).file_name() == Some("grove-reference-operator".as_ref()) {
        return match grove_reference_operator::cli::main_with(std::env::args_os()) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    cli::main()
}
