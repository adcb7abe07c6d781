//! YAML in and out: the one place podwright calls a YAML library, so that manifests, the
//! `--config` file, credential provider configs and `run -o yaml` share one grammar, one set of
//! error messages and one way of writing.
//!
//! The library is `yaml_serde`, the YAML organization's maintained continuation of serde_yaml
//! (libyaml translated to Rust), which serde_yaml's author deprecated. Its reading and writing
//! are serde_yaml's: the same documents accepted, the same errors with their line and column, and
//! the same text written (block style with list items level with their key, single quotes where
//! a string would read as another type, `|` for text of several lines), which kubectl reads
//! back. serde-saphyr (kube's YAML reader) was not taken: it writes double-quoted strings and
//! words its syntax errors (and places some) differently, so `-o yaml` and the errors would change.

use serde::Serialize;
use serde::de::{Deserialize, DeserializeOwned};

pub(crate) use yaml_serde::Value;

/// Text that is not the YAML asked for, or a value YAML cannot hold. The message ends with
/// the line and column where it has them, as in
/// ``unknown field `x`, expected one of `a`, `b` at line 1 column 1``.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct YamlError(#[from] yaml_serde::Error);

impl YamlError {
    /// The 1-based line and column the error is at, when it has one.
    pub fn location(&self) -> Option<(usize, usize)> {
        self.0.location().map(|at| (at.line(), at.column()))
    }
}

/// One YAML (or JSON) document read as a `T`: a field `T` does not have is an error when `T`
/// denies unknown fields, as the configuration files do.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    Ok(yaml_serde::from_str(text)?)
}

/// `value` as one YAML document, as `run -o yaml` prints it.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, YamlError> {
    Ok(yaml_serde::to_string(value)?)
}

/// The documents of a stream in order, each as an untyped value (an empty one as null). The
/// first error ends the stream: nothing after it can be read.
pub(crate) fn documents(text: &str) -> impl Iterator<Item = Result<Value, YamlError>> + '_ {
    let mut failed = false;
    yaml_serde::Deserializer::from_str(text).map_while(move |document| {
        if failed {
            return None;
        }
        let value = Value::deserialize(document).map_err(YamlError::from);
        failed = value.is_err();
        Some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run -o yaml`'s text is serde_yaml's to the byte: this List (a pod and an event with
    /// strings that need quoting, text of several lines, Unicode, empty collections) was
    /// written by serde_yaml 0.9.34 before the change of library.
    #[test]
    fn writes_what_serde_yaml_wrote() {
        let list: serde_json::Value =
            serde_json::from_str(include_str!("yaml/list.json")).expect("the fixture is JSON");
        let text = to_string(&list).expect("writes");
        assert_eq!(text, include_str!("yaml/list.yaml"));
        let back: serde_json::Value = from_str(&text).expect("reads back");
        assert_eq!(back, list);
    }

    #[test]
    fn strings_that_read_as_other_types_are_quoted() {
        let cases = [
            ("80", "'80'\n"),
            ("0644", "'0644'\n"),
            ("true", "'true'\n"),
            ("null", "'null'\n"),
            ("", "''\n"),
            ("a: b", "'a: b'\n"),
            ("- a", "'- a'\n"),
            ("tab\there", "\"tab\\there\"\n"),
            ("one\ntwo", "|-\n  one\n  two\n"),
            ("yes", "yes\n"),
            ("100m", "100m\n"),
        ];
        for (value, want) in cases {
            assert_eq!(to_string(value).expect("writes"), want, "{value:?}");
        }
    }

    #[test]
    fn errors_name_the_line_and_column() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Config {
            port: Option<u16>,
        }
        assert_eq!(from_str::<Config>("port: 80\n").expect("reads").port, Some(80));
        let err = from_str::<Config>("port: 1\nprot: 2\n").expect_err("unknown field");
        assert_eq!(err.to_string(), "unknown field `prot`, expected `port` at line 2 column 1");
        assert_eq!(err.location(), Some((2, 1)));
        let err = from_str::<Config>("port: [1]\n").expect_err("wrong type");
        assert_eq!(err.to_string(), "port: invalid type: sequence, expected u16 at line 1 column 7");
        let err = from_str::<Config>("port: 1\n- 2\n").expect_err("syntax");
        assert_eq!(err.to_string(), "did not find expected key at line 2 column 1, while parsing a block mapping");
        assert_eq!(err.location(), Some((2, 1)));
    }

    /// libyaml's stream repeats its error for ever; one is enough (`take` keeps a broken
    /// stream from filling the memory).
    #[test]
    fn documents_end_at_the_first_error() {
        let read: Vec<Result<Value, String>> =
            documents("a: 1\n---\n---\nb: [\n---\nc: 3\n").take(10).map(|d| d.map_err(|e| e.to_string())).collect();
        assert_eq!(read.len(), 3, "{read:?}");
        assert!(read[0].as_ref().is_ok_and(|v| v["a"] == 1));
        assert!(read[1].as_ref().is_ok_and(Value::is_null));
        assert!(read[2].is_err());
    }
}
