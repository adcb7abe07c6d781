//! Why Go's `json.Unmarshal(data, &map[string]interface{}{})` refuses some bytes, in Go's
//! words: the API server puts that error in the message about a Docker configuration secret
//! that is not a JSON object. Go checks the syntax first with its scanner
//! (`encoding/json/scanner.go`, whose state machine this follows byte for byte), then the
//! type of the top-level value.

use crate::go;

/// Go's `maxNestingDepth`.
const MAX_NESTING_DEPTH: usize = 10_000;

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// At the start, after `:`, `,` in an array.
    BeginValue,
    /// After `[`.
    BeginValueOrEmpty,
    /// After `{`.
    BeginStringOrEmpty,
    /// After `,` in an object.
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// After `\u` and this many hex digits.
    InStringEscU(u8),
    Neg,
    /// In the integer part, after a non-zero first digit.
    One,
    /// After a `0` integer part.
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// In `true`, `false` or `null`, this many bytes read.
    Literal(&'static [u8], usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nesting {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

struct Scanner {
    step: Step,
    stack: Vec<Nesting>,
}

/// Go's `quoteChar`: the byte taken as a code point, in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let quoted = go::quote(&char::from(c).to_string());
            format!("'{}'", &quoted[1..quoted.len() - 1])
        }
    }
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scanner {
    fn push(&mut self, c: u8, nesting: Nesting, next: Step) -> Result<(), String> {
        self.stack.push(nesting);
        if self.stack.len() > MAX_NESTING_DEPTH {
            return Err(invalid(c, "exceeded max depth"));
        }
        self.step = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.stack.pop();
        self.step = if self.stack.is_empty() { Step::EndTop } else { Step::EndValue };
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        self.step = match c {
            _ if is_space(c) => return Ok(()),
            b'{' => return self.push(c, Nesting::ObjectKey, Step::BeginStringOrEmpty),
            b'[' => return self.push(c, Nesting::ArrayValue, Step::BeginValueOrEmpty),
            b'"' => Step::InString,
            b'-' => Step::Neg,
            b'0' => Step::Zero,
            b'1'..=b'9' => Step::One,
            b't' => Step::Literal(b"true", 1),
            b'f' => Step::Literal(b"false", 1),
            b'n' => Step::Literal(b"null", 1),
            _ => return Err(invalid(c, "looking for beginning of value")),
        };
        Ok(())
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(top) = self.stack.last_mut() else {
            self.step = Step::EndTop;
            return self.end_top(c);
        };
        if is_space(c) {
            self.step = Step::EndValue;
            return Ok(());
        }
        match (*top, c) {
            (Nesting::ObjectKey, b':') => {
                *top = Nesting::ObjectValue;
                self.step = Step::BeginValue;
            }
            (Nesting::ObjectKey, _) => return Err(invalid(c, "after object key")),
            (Nesting::ObjectValue, b',') => {
                *top = Nesting::ObjectKey;
                self.step = Step::BeginString;
            }
            (Nesting::ObjectValue, b'}') | (Nesting::ArrayValue, b']') => self.pop(),
            (Nesting::ObjectValue, _) => return Err(invalid(c, "after object key:value pair")),
            (Nesting::ArrayValue, b',') => self.step = Step::BeginValue,
            (Nesting::ArrayValue, _) => return Err(invalid(c, "after array element")),
        }
        Ok(())
    }

    fn end_top(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) { Ok(()) } else { Err(invalid(c, "after top-level value")) }
    }

    fn feed(&mut self, c: u8) -> Result<(), String> {
        let hex = c.is_ascii_hexdigit();
        match self.step {
            Step::BeginValue => self.begin_value(c),
            Step::BeginValueOrEmpty if is_space(c) => Ok(()),
            Step::BeginValueOrEmpty if c == b']' => self.end_value(c),
            Step::BeginValueOrEmpty => self.begin_value(c),
            Step::BeginStringOrEmpty | Step::BeginString if is_space(c) => Ok(()),
            Step::BeginStringOrEmpty if c == b'}' => {
                if let Some(top) = self.stack.last_mut() {
                    *top = Nesting::ObjectValue;
                }
                self.end_value(c)
            }
            Step::BeginStringOrEmpty | Step::BeginString if c == b'"' => {
                self.step = Step::InString;
                Ok(())
            }
            Step::BeginStringOrEmpty | Step::BeginString => {
                Err(invalid(c, "looking for beginning of object key string"))
            }
            Step::EndValue => self.end_value(c),
            Step::EndTop => self.end_top(c),
            Step::InString => {
                match c {
                    b'"' => self.step = Step::EndValue,
                    b'\\' => self.step = Step::InStringEsc,
                    ..0x20 => return Err(invalid(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            Step::InStringEsc => {
                self.step = match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Step::InString,
                    b'u' => Step::InStringEscU(0),
                    _ => return Err(invalid(c, "in string escape code")),
                };
                Ok(())
            }
            Step::InStringEscU(n) if hex => {
                self.step = if n == 3 { Step::InString } else { Step::InStringEscU(n + 1) };
                Ok(())
            }
            Step::InStringEscU(_) => Err(invalid(c, "in \\u hexadecimal character escape")),
            Step::Neg => {
                self.step = match c {
                    b'0' => Step::Zero,
                    b'1'..=b'9' => Step::One,
                    _ => return Err(invalid(c, "in numeric literal")),
                };
                Ok(())
            }
            Step::One if c.is_ascii_digit() => Ok(()),
            Step::One | Step::Zero => match c {
                b'.' => {
                    self.step = Step::Dot;
                    Ok(())
                }
                b'e' | b'E' => {
                    self.step = Step::E;
                    Ok(())
                }
                _ => self.end_value(c),
            },
            Step::Dot if c.is_ascii_digit() => {
                self.step = Step::Dot0;
                Ok(())
            }
            Step::Dot => Err(invalid(c, "after decimal point in numeric literal")),
            Step::Dot0 if c.is_ascii_digit() => Ok(()),
            Step::Dot0 if matches!(c, b'e' | b'E') => {
                self.step = Step::E;
                Ok(())
            }
            Step::Dot0 => self.end_value(c),
            Step::E if matches!(c, b'+' | b'-') => {
                self.step = Step::ESign;
                Ok(())
            }
            Step::E | Step::ESign if c.is_ascii_digit() => {
                self.step = Step::E0;
                Ok(())
            }
            Step::E | Step::ESign => Err(invalid(c, "in exponent of numeric literal")),
            Step::E0 if c.is_ascii_digit() => Ok(()),
            Step::E0 => self.end_value(c),
            Step::Literal(word, read) => {
                let want = word[read];
                if c != want {
                    let word = std::str::from_utf8(word).unwrap_or_default();
                    return Err(invalid(c, &format!("in literal {word} (expecting {})", quote_char(want))));
                }
                self.step = if read + 1 == word.len() { Step::EndValue } else { Step::Literal(word, read + 1) };
                Ok(())
            }
        }
    }
}

/// Go's `checkValid`: the first syntax error, or `unexpected end of JSON input`.
fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner { step: Step::BeginValue, stack: Vec::new() };
    for &c in data {
        if let Err(e) = s.feed(c) {
            return Some(e);
        }
    }
    if s.step == Step::EndTop {
        return None;
    }
    // Go's `eof` feeds a space, which ends a number at the very end, and is itself the
    // invalid character inside a literal (`tru` is "invalid character ' ' in literal true").
    match s.feed(b' ') {
        Err(e) => Some(e),
        Ok(()) if s.step == Step::EndTop => None,
        Ok(()) => Some("unexpected end of JSON input".to_string()),
    }
}

/// Go's error for unmarshalling `data` into a `map[string]interface{}`; `None` when it
/// succeeds (an object, or `null`).
pub fn unmarshal_object_error(data: &[u8]) -> Option<String> {
    if let Some(e) = syntax_error(data) {
        return Some(e);
    }
    let found = match data.iter().find(|c| !is_space(**c)) {
        Some(b'{' | b'n') | None => return None,
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(_) => "number",
    };
    Some(format!("json: cannot unmarshal {found} into Go value of type map[string]interface {{}}"))
}

#[cfg(test)]
mod tests {
    use super::unmarshal_object_error;

    #[test]
    fn messages_are_gos() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (br#"{"auths":{"r":{"auth":"eA=="}}}"#, None),
            (b" {} ", None),
            (b"null", None),
            (b"", Some("unexpected end of JSON input")),
            (b"   ", Some("unexpected end of JSON input")),
            (b"bad", Some("invalid character 'b' looking for beginning of value")),
            (b"{", Some("unexpected end of JSON input")),
            (b"{\"a\" 1}", Some("invalid character '1' after object key")),
            (b"{\"a\":1 \"b\"}", Some("invalid character '\"' after object key:value pair")),
            (b"{'a':1}", Some(r"invalid character '\'' looking for beginning of object key string")),
            (b"[1 2]", Some("invalid character '2' after array element")),
            (b"{} x", Some("invalid character 'x' after top-level value")),
            (b"{}}", Some("invalid character '}' after top-level value")),
            (b"{\"a\":\"\n\"}", Some(r"invalid character '\n' in string literal")),
            (b"\"\\q\"", Some("invalid character 'q' in string escape code")),
            (b"\"\\u12g4\"", Some(r"invalid character 'g' in \u hexadecimal character escape")),
            (b"-x", Some("invalid character 'x' in numeric literal")),
            (b"1.x", Some("invalid character 'x' after decimal point in numeric literal")),
            (b"1e+", Some("invalid character ' ' in exponent of numeric literal")),
            (b"1.", Some("invalid character ' ' after decimal point in numeric literal")),
            (b"\"abc", Some("unexpected end of JSON input")),
            (b"1ex", Some("invalid character 'x' in exponent of numeric literal")),
            (b"tru", Some("invalid character ' ' in literal true (expecting 'e')")),
            (b"trUe", Some("invalid character 'U' in literal true (expecting 'u')")),
            (b"nulL", Some("invalid character 'L' in literal null (expecting 'l')")),
            (b"\xff", Some("invalid character 'ÿ' looking for beginning of value")),
            (b"\x01", Some(r"invalid character '\x01' looking for beginning of value")),
            (b"[1,{}]", Some("json: cannot unmarshal array into Go value of type map[string]interface {}")),
            (b"12", Some("json: cannot unmarshal number into Go value of type map[string]interface {}")),
            (b"-0.5e3", Some("json: cannot unmarshal number into Go value of type map[string]interface {}")),
            (b"\"s\"", Some("json: cannot unmarshal string into Go value of type map[string]interface {}")),
            (b"false", Some("json: cannot unmarshal bool into Go value of type map[string]interface {}")),
        ];
        for (data, want) in cases {
            assert_eq!(unmarshal_object_error(data).as_deref(), *want, "{}", String::from_utf8_lossy(data));
        }
        let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
        assert_eq!(
            unmarshal_object_error(deep.as_bytes()).as_deref(),
            Some("invalid character '[' exceeded max depth")
        );
    }
}
