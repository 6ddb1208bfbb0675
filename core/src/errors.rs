//! The one way an error is shown with its causes. Errors carry their cause in `source()`
//! (never also interpolated in their own message), and the chain is rendered once, at the
//! top, by [`chain`].

use std::error::Error;
use std::fmt;

/// An error and its causes. `Display` gives one line (`a: b: c`); the alternate form (`{:#}`)
/// one cause per line (`a` then `  caused by: b`).
#[derive(Clone, Copy)]
pub struct Chain<'a>(&'a (dyn Error + 'a));

/// The error `err` with its causes, for `Display`.
pub fn chain<'a>(err: &'a (dyn Error + 'a)) -> Chain<'a> {
    Chain(err)
}

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            if f.alternate() {
                write!(f, "\n  caused by: {cause}")?;
            } else {
                write!(f, ": {cause}")?;
            }
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn a_chain_is_one_line_or_one_cause_a_line() {
        let e = Outer(Inner);
        assert_eq!(chain(&e).to_string(), "outer: inner");
        assert_eq!(format!("{:#}", chain(&e)), "outer\n  caused by: inner");
    }
}
