//! Whether a rejection message names a field.

use crate::vocab::Vocabulary;

/// Whether a rejection's `message` names `field` (default-revision spelling, translated). It
/// must contain a field path that, segment by segment, is
/// - the whole of `field`, or a suffix of it of at least two segments (`failure.maxRestarts`,
///   `podSpec.restartPolicy`): validation messages name a field relative to what they check;
/// - or a path below `field` (`…targetNames[1]`, `…podSpec.containers`): an element or a part
///   of it is at fault.
///
/// Segments compare by name and index, where a wildcard `[]` (CEL's notation) or a missing
/// index on either side matches any index. One word (`replicas`) is not enough, and a path
/// naming another field (`spec.template.cliques[0].spec.replicas` for `spec.replicas`) does
/// not count.
pub fn message_names_field(message: &str, field: &str, vocab: &Vocabulary) -> bool {
    let field = vocab
        .translate_field_path(field)
        .unwrap_or_else(|| field.to_owned());
    let wanted = path_segments(&field);
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']');
    message
        .split(|c: char| !is_path_char(c))
        .map(|token| token.trim_matches('.'))
        .filter(|token| !token.is_empty())
        .any(|token| {
            let named = path_segments(token);
            let same = |a: &[Segment], b: &[Segment]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
            };
            let whole_or_suffix = named.len() <= wanted.len()
                && (named.len() >= 2 || named.len() == wanted.len())
                && same(&named, &wanted[wanted.len() - named.len()..]);
            let below = named.len() > wanted.len() && same(&named[..wanted.len()], &wanted);
            whole_or_suffix || below
        })
}

/// One segment of a field path: a name and an index (`None`: none given, `Some(None)`: the
/// wildcard `[]`).
#[derive(Debug, PartialEq)]
struct Segment<'a> {
    name: &'a str,
    index: Option<Option<&'a str>>,
}

impl Segment<'_> {
    fn matches(&self, other: &Segment<'_>) -> bool {
        self.name == other.name
            && match (self.index, other.index) {
                (Some(Some(a)), Some(Some(b))) => a == b,
                _ => true,
            }
    }
}

/// `a.b[0].c[]` → `a`, `b[0]`, `c[]`; a trailing index on its own (`…targetNames[1]`) stays
/// with its name.
fn path_segments(path: &str) -> Vec<Segment<'_>> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('[') {
            Some((name, rest)) => {
                let index = rest.split(']').next().unwrap_or_default();
                Segment {
                    name,
                    index: Some((!index.is_empty()).then_some(index)),
                }
            }
            None => Segment {
                name: s,
                index: None,
            },
        })
        .collect()
}
