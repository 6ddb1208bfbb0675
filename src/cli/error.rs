//! The one error of the command line: what a subcommand that stopped short says, printed once
//! by [`main`](super::main), and the [`Exit`] it ends with.

use std::error::Error;
use std::fmt;

use grove_conformance::errors;
use grove_conformance::report::Exit;

type Cause = Box<dyn Error + Send + Sync + 'static>;

/// Why a subcommand stopped before its verdict.
#[derive(Debug)]
pub(crate) struct CliError {
    exit: Exit,
    said: Said,
}

#[derive(Debug)]
enum Said {
    /// One line, `error: <message>`.
    Message(String),
    /// `error: <context>: <cause and its causes>`.
    Context(String, Cause),
    /// `error: <cause>`, one cause a line below it.
    Error(Cause),
    /// Printed as it is: the catalog's diagnostics, which say `error:` themselves.
    Diagnostics(String),
    /// Nothing more: the subcommand said it already (an interruption, as it happened).
    Already,
}

/// A subcommand's result: the exit code of its verdict, or why it stopped short.
pub(crate) type CliResult = Result<i32, CliError>;

impl CliError {
    /// Stopped with `message`, ending as `exit` says.
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> CliError {
        CliError {
            exit,
            said: Said::Message(message.into()),
        }
    }

    /// Stopped by `cause`, which says what happened.
    pub(crate) fn from_error(exit: Exit, cause: impl Into<Cause>) -> CliError {
        CliError {
            exit,
            said: Said::Error(cause.into()),
        }
    }

    /// Stopped by `cause` while doing what `context` says (`failed to create out/`).
    pub(crate) fn context(
        exit: Exit,
        context: impl Into<String>,
        cause: impl Into<Cause>,
    ) -> CliError {
        CliError {
            exit,
            said: Said::Context(context.into(), cause.into()),
        }
    }

    /// A bad command line or input refused before anything started.
    pub(crate) fn usage(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Usage, message)
    }

    /// The catalog does not load: its rendered diagnostics.
    pub(crate) fn diagnostics(rendered: String) -> CliError {
        CliError {
            exit: Exit::InvalidCatalog,
            said: Said::Diagnostics(rendered),
        }
    }

    /// Ended as `exit` after saying why itself.
    pub(crate) fn said(exit: Exit) -> CliError {
        CliError {
            exit,
            said: Said::Already,
        }
    }

    /// How the process ends.
    pub(crate) fn exit(&self) -> Exit {
        self.exit
    }
}

impl fmt::Display for CliError {
    /// What is printed to stderr (no trailing newline; empty when it was said already).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.said {
            Said::Message(m) => write!(f, "error: {m}"),
            Said::Context(context, cause) => {
                write!(f, "error: {context}: {}", errors::chain(cause.as_ref()))
            }
            Said::Error(cause) => write!(f, "error: {:#}", errors::chain(cause.as_ref())),
            Said::Diagnostics(rendered) => write!(f, "{rendered}"),
            Said::Already => Ok(()),
        }
    }
}

/// Prints what `result` says, once, and gives its exit code.
pub(crate) fn finish(result: CliResult) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            let text = e.to_string();
            if !text.is_empty() {
                eprintln!("{text}");
            }
            e.exit().code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_printed_once_with_its_causes_and_exits_by_the_table() {
        let io = std::io::Error::other("disk full");
        let e = CliError::context(Exit::SetupFailed, "failed to create out", io);
        assert_eq!(e.to_string(), "error: failed to create out: disk full");
        assert_eq!(e.exit().code(), 103);
        assert_eq!(CliError::said(Exit::Interrupted).to_string(), "");
        assert_eq!(finish(Err(CliError::usage("bad"))), 2);
        assert_eq!(finish(Ok(100)), 100);
    }
}
