//! A YAML tree that remembers where every node came from.
//!
//! Built from `saphyr-parser` events so that every diagnostic about a case or fixture can
//! name its line and column. Scalars keep their text and whether they were quoted; they are
//! resolved to JSON values (YAML 1.2 core schema) only on request.

use std::borrow::Cow;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Pos {
    fn from_span(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// One node of a parsed YAML document.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// What it holds.
    pub value: NodeValue,
}

/// The content of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// A scalar: its text and whether it was written plain (unquoted).
    Scalar {
        /// The text after escape processing.
        text: String,
        /// Whether it was a plain (unquoted, non-block) scalar, so may be a number, bool or null.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order. Keys are scalars (checked when parsing).
    Map(Vec<(Node, Node)>),
}

/// A YAML syntax problem, or a construct this tree does not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub message: String,
}

impl Node {
    /// The scalar text, if the node is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Scalar { text, .. } => Some(text),
            NodeValue::Seq(_) | NodeValue::Map(_) => None,
        }
    }

    /// Whether the node is a plain `null`/`~`/empty scalar.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, NodeValue::Scalar { text, plain: true } if is_null_text(text))
    }

    /// A short description of the node's type for messages (`a mapping`, `a string`, ...).
    pub fn describe(&self) -> &'static str {
        match &self.value {
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
            NodeValue::Scalar { .. } => match self.to_json() {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) | Value::Array(_) | Value::Object(_) => "a string",
            },
        }
    }

    /// The node as JSON (YAML 1.2 core schema for plain scalars; quoted scalars are strings).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Scalar { text, plain } => {
                if *plain {
                    resolve_plain(text)
                } else {
                    Value::String(text.clone())
                }
            }
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                let mut map = Map::new();
                for (k, v) in entries {
                    map.insert(k.as_str().unwrap_or_default().to_owned(), v.to_json());
                }
                Value::Object(map)
            }
        }
    }

    /// The value of `key` in a mapping node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            NodeValue::Scalar { .. } | NodeValue::Seq(_) => None,
        }
    }
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Resolves a plain scalar per the YAML 1.2 core schema.
fn resolve_plain(text: &str) -> Value {
    if is_null_text(text) {
        return Value::Null;
    }
    match text {
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let int = if let Some(hex) = text.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = text.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else {
        let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
        (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
            .then(|| text.parse::<i64>().ok())
            .flatten()
    };
    if let Some(i) = int {
        return Value::Number(i.into());
    }
    let looks_float = text
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        && text.chars().any(|c| c.is_ascii_digit());
    if looks_float
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

/// Parses one YAML document into a [`Node`] tree.
///
/// Rejects multiple documents, anchors/aliases, tags other than the core ones, non-scalar
/// keys and duplicate keys, so that a case means exactly what it shows.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let mut builder = Builder::default();
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| YamlError {
            pos: Pos {
                line: e.marker().line(),
                column: e.marker().col() + 1,
            },
            message: format!("failed to parse YAML: {}", e.info()),
        })?;
        builder.event(event, &span)?;
    }
    match builder.root {
        Some(root) => Ok(root),
        None => Ok(Node {
            pos: Pos { line: 1, column: 1 },
            value: NodeValue::Scalar {
                text: String::new(),
                plain: true,
            },
        }),
    }
}

enum Frame {
    Seq(Pos, Vec<Node>),
    Map(Pos, Vec<(Node, Node)>, Option<Node>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    documents: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), YamlError> {
        let pos = Pos::from_span(span);
        let err = |message: &str| YamlError {
            pos,
            message: message.to_owned(),
        };
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    Err(err("expected a single YAML document, found another one"))
                } else {
                    Ok(())
                }
            }
            Event::Alias(_) => Err(err("anchors and aliases are not supported here")),
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 {
                    return Err(err("anchors and aliases are not supported here"));
                }
                check_tag(tag.as_ref(), pos)?;
                let plain = matches!(style, ScalarStyle::Plain);
                self.push(Node {
                    pos,
                    value: NodeValue::Scalar {
                        text: text.into_owned(),
                        plain,
                    },
                })
            }
            Event::SequenceStart(anchor, tag) => {
                if anchor != 0 {
                    return Err(err("anchors and aliases are not supported here"));
                }
                check_tag(tag.as_ref(), pos)?;
                self.stack.push(Frame::Seq(pos, Vec::new()));
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                if anchor != 0 {
                    return Err(err("anchors and aliases are not supported here"));
                }
                check_tag(tag.as_ref(), pos)?;
                self.stack.push(Frame::Map(pos, Vec::new(), None));
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq(start, items)) => self.push(Node {
                    pos: start,
                    value: NodeValue::Seq(items),
                }),
                Some(Frame::Map(..)) | None => Err(err("unbalanced YAML sequence")),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map(start, entries, _)) => self.push(Node {
                    pos: start,
                    value: NodeValue::Map(entries),
                }),
                Some(Frame::Seq(..)) | None => Err(err("unbalanced YAML mapping")),
            },
        }
    }

    fn push(&mut self, node: Node) -> Result<(), YamlError> {
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some(Frame::Seq(_, items)) => {
                items.push(node);
                Ok(())
            }
            Some(Frame::Map(_, entries, pending)) => match pending.take() {
                None => {
                    let Some(key) = node.as_str() else {
                        return Err(YamlError {
                            pos: node.pos,
                            message: "mapping keys must be plain strings".into(),
                        });
                    };
                    if let Some((first, _)) = entries.iter().find(|(k, _)| k.as_str() == Some(key))
                    {
                        return Err(YamlError {
                            pos: node.pos,
                            message: format!(
                                "duplicate key `{key}` (first at line {})",
                                first.pos.line
                            ),
                        });
                    }
                    *pending = Some(node);
                    Ok(())
                }
                Some(key) => {
                    entries.push((key, node));
                    Ok(())
                }
            },
        }
    }
}

fn check_tag(tag: Option<&Cow<'_, saphyr_parser::Tag>>, pos: Pos) -> Result<(), YamlError> {
    match tag {
        None => Ok(()),
        Some(tag) if tag.is_yaml_core_schema() => Ok(()),
        Some(tag) => Err(YamlError {
            pos,
            message: format!("YAML tag `{}{}` is not supported", tag.handle, tag.suffix),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_positions_and_resolves_scalars() {
        let text = "a: 1\nb:\n  - x\n  - \"2\"\n  - true\n  - ~\n  - 1.5\n";
        let root = parse(text).unwrap();
        assert_eq!(root.get("b").unwrap().pos, Pos { line: 3, column: 3 });
        let NodeValue::Seq(items) = &root.get("b").unwrap().value else {
            panic!("expected a sequence");
        };
        assert_eq!(items[1].pos, Pos { line: 4, column: 5 });
        assert_eq!(
            root.to_json(),
            json!({"a": 1, "b": ["x", "2", true, null, 1.5]})
        );
    }

    #[test]
    fn rejects_duplicates_aliases_and_bad_syntax() {
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.pos.line, 2);
        assert!(e.message.contains("duplicate key `a`"));
        let e = parse("a: &x 1\nb: *x\n").unwrap_err();
        assert!(e.message.contains("anchors"));
        let e = parse("a: [1, 2\n").unwrap_err();
        assert!(e.message.starts_with("failed to parse YAML"));
        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("single YAML document"));
    }

    #[test]
    fn plain_scalars_follow_the_core_schema() {
        for (text, want) in [
            ("0", json!(0)),
            ("-12", json!(-12)),
            ("0x1f", json!(31)),
            ("3s", json!("3s")),
            ("True", json!(true)),
            ("yes", json!("yes")),
            ("1e3", json!(1000.0)),
            ("-", json!("-")),
            ("", json!(null)),
        ] {
            assert_eq!(resolve_plain(text), want, "{text}");
        }
    }
}
