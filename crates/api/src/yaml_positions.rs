//! Source positions (line, column) of the keys and list items of a YAML
//! stream, by field path, so manifest errors can point at a line; and the
//! plain scalars that Kubernetes' YAML decoder (go-yaml v2, YAML 1.1 rules)
//! reads differently from [`crate::yaml`]'s reader (YAML 1.2 rules): `0644` is the octal
//! integer 420, `1_000` is 1000, `yes`/`no`/`on`/`off`/`y`/`n` are booleans.
//!
//! That reader's values carry no positions or scalar styles, so the text is
//! read a second time with a span-reporting event parser. This is best
//! effort: when the two parsers disagree about the shape of the stream, no
//! positions are given.
//!
//! That pass comes first and also bounds the nesting depth: libyaml's scanner (under
//! [`crate::yaml`]) does work for every token that grows with the number of open flow collections,
//! so deeply nested brackets cost time that grows with the square of the depth (a 200 KB
//! document took more than 30 s). This parser's cost is linear, and it stops at the limit.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// A field path inside one document, e.g. `spec.containers[0].name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DocPath(pub Vec<PathSegment>);

impl DocPath {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn with(&self, seg: PathSegment) -> DocPath {
        let mut v = self.0.clone();
        v.push(seg);
        DocPath(v)
    }
}

fn plain_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for DocPath {
    /// Keys are joined with `.`; list indexes and keys that are not plain
    /// identifiers (annotation keys, ...) are written in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                PathSegment::Key(k) if plain_key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                PathSegment::Key(k) => write!(f, "[{k}]")?,
                PathSegment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    fn from_span(span: &Span) -> Position {
        Position { line: span.start.line(), column: span.start.col() + 1 }
    }
}

/// A plain scalar value whose YAML 1.1 meaning differs from its YAML 1.2 one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Yaml11Scalar {
    Bool(bool),
    Int(i64),
}

/// How go-yaml v2 resolves a plain scalar, where that differs from [`crate::yaml`]'s reader
/// (which reads all of these as strings).
pub fn yaml11_scalar(text: &str) -> Option<Yaml11Scalar> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(Yaml11Scalar::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(Yaml11Scalar::Bool(false));
        }
        _ => {}
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    let (neg, digits) = match plain.as_bytes().first() {
        Some(b'-') => (true, &plain[1..]),
        Some(b'+') => (false, &plain[1..]),
        _ => (false, plain.as_str()),
    };
    let leading_zero = digits.len() > 1 && digits.starts_with('0') && digits.as_bytes()[1].is_ascii_digit();
    if !text.contains('_') && !leading_zero {
        return None; // the YAML reader already agrees
    }
    let value = if let Some(h) = digits.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(o) = digits.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if let Some(b) = digits.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // Go's ParseInt(s, 0, 64): a leading 0 means octal; a non-octal digit
        // string such as "08" still resolves, as a float, to its decimal value.
        if leading_zero {
            i64::from_str_radix(digits, 8).or_else(|_| digits.parse::<i64>()).ok()?
        } else {
            digits.parse::<i64>().ok()?
        }
    } else {
        return None;
    };
    Some(Yaml11Scalar::Int(if neg { -value } else { value }))
}

/// Positions of every mapping key and sequence item, per document
/// (documents numbered from 1 in stream order, empty ones included), and the
/// plain scalar values that YAML 1.1 reads differently.
#[derive(Debug, Default)]
pub struct PositionIndex {
    entries: HashMap<(usize, DocPath), Position>,
    doc_roots: Vec<Option<Position>>,
    yaml11: Vec<(usize, DocPath, String, Yaml11Scalar)>,
}

impl PositionIndex {
    /// Number of documents seen.
    pub fn documents(&self) -> usize {
        self.doc_roots.len()
    }

    /// Position of the key (or list item) at `path` in document `doc`;
    /// for an empty path, the position of the document's root node.
    pub fn get(&self, doc: usize, path: &DocPath) -> Option<Position> {
        if path.is_empty() {
            return self.doc_root(doc);
        }
        self.entries.get(&(doc, path.clone())).copied()
    }

    /// Position of the closest enclosing entry that has one (so an error deep
    /// inside a flow-style value still gets a line).
    pub fn get_nearest(&self, doc: usize, path: &DocPath) -> Option<Position> {
        let mut p = path.clone();
        loop {
            if let Some(pos) = self.get(doc, &p) {
                return Some(pos);
            }
            p.0.pop()?;
        }
    }

    /// The plain scalar values of document `doc` that go-yaml v2 reads
    /// differently: (path, original text, YAML 1.1 value).
    pub fn yaml11_values(&self, doc: usize) -> impl Iterator<Item = (&DocPath, &str, Yaml11Scalar)> {
        self.yaml11.iter().filter(move |(d, ..)| *d == doc).map(|(_, p, t, v)| (p, t.as_str(), *v))
    }

    /// Position of the root node of document `doc` (1-based).
    pub fn doc_root(&self, doc: usize) -> Option<Position> {
        doc.checked_sub(1).and_then(|i| self.doc_roots.get(i).copied().flatten())
    }
}

enum Frame {
    /// Inside a mapping; `key` is the pending key (None = next node is a key).
    Map {
        path: DocPath,
        key: Option<String>,
    },
    Seq {
        path: DocPath,
        next: usize,
    },
    /// Inside a complex (non-scalar) mapping key, which is not indexed.
    Skip {
        depth: usize,
    },
}

enum Node {
    /// Text, and whether it is an untagged plain scalar.
    Scalar(String, bool),
    MapStart,
    SeqStart,
    Alias,
}

struct Builder {
    index: PositionIndex,
    stack: Vec<Frame>,
}

impl Builder {
    fn doc(&self) -> usize {
        self.index.doc_roots.len()
    }

    fn node(&mut self, node: Node, span: &Span) {
        let pos = Position::from_span(span);
        let doc = self.doc();
        let node_path = match self.stack.last_mut() {
            None => {
                if let Some(root) = self.index.doc_roots.last_mut()
                    && root.is_none()
                {
                    *root = Some(pos);
                }
                DocPath::default()
            }
            Some(Frame::Skip { depth }) => {
                if matches!(node, Node::MapStart | Node::SeqStart) {
                    *depth += 1;
                }
                return;
            }
            Some(Frame::Map { path, key }) => match key.take() {
                None => {
                    // This node is a key.
                    match node {
                        Node::Scalar(s, _) => {
                            self.index.entries.insert((doc, path.with(PathSegment::Key(s.clone()))), pos);
                            *key = Some(s);
                        }
                        Node::Alias => *key = Some(String::from("\u{0}alias")),
                        Node::MapStart | Node::SeqStart => {
                            *key = Some(String::from("\u{0}complex"));
                            self.stack.push(Frame::Skip { depth: 0 });
                        }
                    }
                    return;
                }
                Some(k) => path.with(PathSegment::Key(k)),
            },
            Some(Frame::Seq { path, next }) => {
                let p = path.with(PathSegment::Index(*next));
                *next += 1;
                self.index.entries.insert((doc, p.clone()), pos);
                p
            }
        };
        match node {
            Node::MapStart => self.stack.push(Frame::Map { path: node_path, key: None }),
            Node::SeqStart => self.stack.push(Frame::Seq { path: node_path, next: 0 }),
            Node::Scalar(text, true) => {
                if let Some(v) = yaml11_scalar(&text) {
                    self.index.yaml11.push((doc, node_path, text, v));
                }
            }
            Node::Scalar(_, false) | Node::Alias => {}
        }
    }

    fn end(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Skip { depth }) if *depth > 0 => *depth -= 1,
            _ => {
                self.stack.pop();
            }
        }
    }
}

/// The deepest nesting of mappings and lists a manifest may have. The deepest field of a Pod
/// is about 12 levels down; the API server's decoders stop at 10,000, libyaml's reader at 128, and
/// libyaml's cost per token grows with the depth, so the limit is kept small.
pub const MAX_NESTING_DEPTH: usize = 32;

/// What reading a YAML stream for positions found.
#[derive(Debug)]
pub enum Scan {
    /// The stream parses: the positions of its entries.
    Indexed(PositionIndex),
    /// Mappings and lists nest deeper than [`MAX_NESTING_DEPTH`]; the position of the
    /// collection that goes too deep. Nothing after it was read.
    TooDeep(Position),
    /// This parser cannot read the stream (libyaml may still: it accepts a little more), and
    /// the stream's flow collections do not seem to nest deeper than the limit.
    Unparsable,
}

/// Index a YAML stream, stopping at a syntax error or at nesting deeper than
/// [`MAX_NESTING_DEPTH`].
pub fn index_positions(text: &str) -> Scan {
    let mut parser = Parser::new_from_str(text);
    let mut b = Builder { index: PositionIndex::default(), stack: Vec::new() };
    let mut depth = 0;
    while let Some(item) = parser.next_event() {
        let (event, span) = match item {
            Ok(ok) => ok,
            Err(_) => return flow_depth_estimate(text).map_or(Scan::Unparsable, Scan::TooDeep),
        };
        match event {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                b.stack.clear();
                b.index.doc_roots.push(None);
                depth = 0;
            }
            Event::Scalar(value, style, _, tag) => {
                let plain = style == ScalarStyle::Plain && tag.is_none();
                b.node(Node::Scalar(value.into_owned(), plain), &span)
            }
            Event::Alias(_) => b.node(Node::Alias, &span),
            Event::MappingStart(..) | Event::SequenceStart(..) if depth == MAX_NESTING_DEPTH => {
                return Scan::TooDeep(Position::from_span(&span));
            }
            Event::MappingStart(..) => {
                depth += 1;
                b.node(Node::MapStart, &span)
            }
            Event::SequenceStart(..) => {
                depth += 1;
                b.node(Node::SeqStart, &span)
            }
            Event::MappingEnd | Event::SequenceEnd => {
                depth -= 1;
                b.end()
            }
        }
    }
    Scan::Indexed(b.index)
}

/// Where the flow collections (`[`, `{`) of `text` first nest deeper than the limit, counting
/// brackets outside quoted scalars and comments: for text the event parser rejects, so that
/// libyaml never scans deep flow nesting. Brackets in plain or block scalars are counted too,
/// which errs towards refusing.
fn flow_depth_estimate(text: &str) -> Option<Position> {
    #[derive(PartialEq)]
    enum In {
        Text,
        Single,
        Double,
        Comment,
    }
    let mut state = In::Text;
    let (mut depth, mut line, mut column) = (0usize, 1, 0);
    let mut prev = ' ';
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        column += 1;
        let starts_token = prev.is_whitespace() || matches!(prev, '[' | '{' | ',');
        match (&state, c) {
            (_, '\n') => {
                (line, column) = (line + 1, 0);
                if state == In::Comment {
                    state = In::Text;
                }
            }
            (In::Text, '[' | '{') => {
                depth += 1;
                if depth > MAX_NESTING_DEPTH {
                    return Some(Position { line, column });
                }
            }
            (In::Text, ']' | '}') => depth = depth.saturating_sub(1),
            (In::Text, '\'') if starts_token => state = In::Single,
            (In::Text, '"') if starts_token => state = In::Double,
            (In::Text, '#') if prev.is_whitespace() => state = In::Comment,
            (In::Single, '\'') | (In::Double, '"') => state = In::Text,
            // An escaped character never ends the scalar.
            (In::Double, '\\') => match chars.next() {
                Some('\n') => (line, column) = (line + 1, 0),
                Some(_) => column += 1,
                None => {}
            },
            _ => {}
        }
        prev = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segs: &[&str]) -> DocPath {
        DocPath(
            segs.iter()
                .map(|s| match s.parse::<usize>() {
                    Ok(n) => PathSegment::Index(n),
                    Err(_) => PathSegment::Key((*s).to_string()),
                })
                .collect(),
        )
    }

    fn indexed(text: &str) -> PositionIndex {
        match index_positions(text) {
            Scan::Indexed(idx) => idx,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn indexes_keys_and_items() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: x
spec:
  containers:
  - name: a
    image: busybox
    ports:
    - containerPort: 80
---
kind: Pod
spec: {containers: [{name: b}]}
";
        let idx = indexed(text);
        assert_eq!(idx.documents(), 2);
        let at = |doc, p: &[&str]| idx.get(doc, &path(p)).map(|p| (p.line, p.column));
        assert_eq!(at(1, &["kind"]), Some((2, 1)));
        assert_eq!(at(1, &["metadata", "name"]), Some((4, 3)));
        assert_eq!(at(1, &["spec", "containers", "0"]), Some((7, 5)));
        assert_eq!(at(1, &["spec", "containers", "0", "name"]), Some((7, 5)));
        assert_eq!(at(1, &["spec", "containers", "0", "image"]), Some((8, 5)));
        assert_eq!(at(1, &["spec", "containers", "0", "ports", "0", "containerPort"]), Some((10, 7)));
        assert_eq!(at(2, &["kind"]), Some((12, 1)));
        assert_eq!(at(2, &["spec", "containers", "0", "name"]), Some((13, 22)));
        assert_eq!(at(1, &[]), Some((1, 1)));
        assert_eq!(idx.doc_root(2).map(|p| p.line), Some(12));
        assert_eq!(idx.get_nearest(1, &path(&["spec", "containers", "0", "nope", "deeper"])).map(|p| p.line), Some(7));
    }

    #[test]
    fn counts_empty_documents() {
        let idx = indexed("---\n---\na: 1\n");
        assert_eq!(idx.documents(), 2);
        assert_eq!(idx.doc_root(2).map(|p| p.line), Some(3));
    }

    #[test]
    fn bad_yaml_is_unparsable_unless_its_brackets_nest_too_deep() {
        assert!(matches!(index_positions("a: b: c\n"), Scan::Unparsable));
        let deep = format!("a: b: c\nd: {}\n", "[".repeat(MAX_NESTING_DEPTH + 1));
        let Scan::TooDeep(at) = index_positions(&deep) else { panic!("not too deep") };
        assert_eq!(at, Position { line: 2, column: 4 + MAX_NESTING_DEPTH });
        // Brackets in quoted scalars and comments do not count; closed ones do not add up.
        let quoted = format!(
            "a: b: c\nd: ['{0}', \"{0}\\\"{0}\", {1}] # {0}\n",
            "[".repeat(MAX_NESTING_DEPTH + 1),
            "[[]]".repeat(MAX_NESTING_DEPTH)
        );
        assert!(matches!(index_positions(&quoted), Scan::Unparsable));
    }

    #[test]
    fn nesting_stops_at_the_limit() {
        let nested = |n: usize| format!("a: {}{}", "[".repeat(n - 1), "]".repeat(n - 1));
        assert!(matches!(index_positions(&nested(MAX_NESTING_DEPTH)), Scan::Indexed(_)));
        let Scan::TooDeep(at) = index_positions(&nested(MAX_NESTING_DEPTH + 1)) else { panic!("not too deep") };
        assert_eq!(at, Position { line: 1, column: 4 + MAX_NESTING_DEPTH - 1 });
        // Block lists count the same way, and each document starts again at the top.
        let block = |n: usize| format!("{}x\n", "- ".repeat(n));
        assert!(matches!(
            index_positions(&[block(MAX_NESTING_DEPTH), block(MAX_NESTING_DEPTH)].join("---\n")),
            Scan::Indexed(_)
        ));
        assert!(matches!(index_positions(&block(MAX_NESTING_DEPTH + 1)), Scan::TooDeep(_)));
    }

    #[test]
    fn yaml11_scalars() {
        use Yaml11Scalar::{Bool, Int};
        let cases = [
            ("0644", Some(Int(420))),
            ("0400", Some(Int(256))),
            ("-012", Some(Int(-10))),
            ("08", Some(Int(8))),
            ("1_000", Some(Int(1000))),
            ("0x_1F", Some(Int(31))),
            ("yes", Some(Bool(true))),
            ("On", Some(Bool(true))),
            ("y", Some(Bool(true))),
            ("NO", Some(Bool(false))),
            ("off", Some(Bool(false))),
            ("644", None),
            ("0", None),
            ("0x1A", None),
            ("true", None),
            ("abc", None),
            ("1_a", None),
        ];
        for (text, want) in cases {
            assert_eq!(yaml11_scalar(text), want, "{text}");
        }
        let idx = indexed("a: 0644\nb: '0644'\nc: [yes, \"no\", !!str on]\nd: {e: 1_0}\n");
        let got: Vec<(String, &str, Yaml11Scalar)> =
            idx.yaml11_values(1).map(|(p, t, v)| (p.to_string(), t, v)).collect();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), "0644", Int(420)),
                ("c[0]".to_string(), "yes", Bool(true)),
                ("d.e".to_string(), "1_0", Int(10)),
            ]
        );
    }

    #[test]
    fn path_display() {
        assert_eq!(
            path(&["spec", "initContainers", "0", "imagePullPolicyy"]).to_string(),
            "spec.initContainers[0].imagePullPolicyy"
        );
        let p = DocPath(vec![
            PathSegment::Key("metadata".into()),
            PathSegment::Key("annotations".into()),
            PathSegment::Key("example.com/x".into()),
        ]);
        assert_eq!(p.to_string(), "metadata.annotations[example.com/x]");
    }
}
