//! Diagnostics: one problem in a case, fixture or the catalog, with file:line:column.

use std::fmt;
use std::path::PathBuf;

use super::yaml::Pos;

/// One problem found while loading or linting the catalog.
///
/// Rendered as `file:line:column: field: message` (position and field when known), the form
/// editors and CI logs link to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// The file (or folder) concerned.
    pub file: PathBuf,
    /// Where in the file, when the problem has a place.
    pub pos: Option<Pos>,
    /// Dotted path of the field concerned (`steps[2].expect.objects[0].conditions`), or empty.
    pub field: String,
    /// What is wrong, lowercase.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic at a position.
    pub fn at(
        file: impl Into<PathBuf>,
        pos: Pos,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.into(),
            pos: Some(pos),
            field: field.into(),
            message: message.into(),
        }
    }

    /// A diagnostic about a whole file or folder.
    pub fn file(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.into(),
            pos: None,
            field: String::new(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(pos) = self.pos {
            write!(f, ":{}:{}", pos.line, pos.column)?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Renders diagnostics one per line, sorted by file and position.
pub fn render(diagnostics: &[Diagnostic]) -> String {
    let mut sorted: Vec<&Diagnostic> = diagnostics.iter().collect();
    sorted.sort();
    let mut out = String::new();
    for d in sorted {
        out.push_str(&d.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_a_compiler() {
        let d = Diagnostic::at(
            "cases/a.yaml",
            Pos { line: 3, column: 5 },
            "steps[0].apply",
            "unknown fixture `x`",
        );
        assert_eq!(
            d.to_string(),
            "cases/a.yaml:3:5: steps[0].apply: unknown fixture `x`"
        );
        assert_eq!(
            Diagnostic::file("cases", "no cases").to_string(),
            "cases: no cases"
        );
    }
}
