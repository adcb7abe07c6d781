//! Go's rendering of decoded JSON, for error messages that quote the patch the way the API server
//! does (`fmt`'s `%v` and `%s` over `map[string]interface{}` values, `reflect.TypeOf` names).
//!
//! The API server decodes patches keeping integers (`int64`) apart from other numbers (`float64`),
//! so both are told apart here too.

use serde_json::{Number, Value};

/// The Go dynamic type a decoded JSON value has; two values of one list must share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoType {
    Nil,
    Bool,
    Int,
    Float,
    String,
    Slice,
    Map,
}

impl GoType {
    pub(crate) fn of(value: &Value) -> Self {
        match value {
            Value::Null => GoType::Nil,
            Value::Bool(_) => GoType::Bool,
            Value::Number(n) if n.is_f64() => GoType::Float,
            Value::Number(_) => GoType::Int,
            Value::String(_) => GoType::String,
            Value::Array(_) => GoType::Slice,
            Value::Object(_) => GoType::Map,
        }
    }

    /// `%s` of `reflect.TypeOf(v)`; a nil interface has no type and prints as `%!s(<nil>)`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GoType::Nil => "%!s(<nil>)",
            GoType::Bool => "bool",
            GoType::Int => "int64",
            GoType::Float => "float64",
            GoType::String => "string",
            GoType::Slice => "[]interface {}",
            GoType::Map => "map[string]interface {}",
        }
    }
}

/// `fmt.Sprintf("%v", v)`: `map[k:v ...]` with sorted keys, `[a b]`, bare strings, `<nil>`.
pub(crate) fn v(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, Verb::V);
    out
}

/// `fmt.Sprintf("%s", v)`: like `%v` for strings and containers; other scalars are reported as
/// a bad verb (`%!s(int64=1)`).
pub(crate) fn s(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, Verb::S);
    out
}

/// `fmt.Sprint` of a `[]interface{}` built from the given lists: `[[a b] [c]]`.
pub(crate) fn v_lists(lists: &[&[Value]]) -> String {
    let parts: Vec<String> = lists.iter().map(|l| v(&Value::Array(l.to_vec()))).collect();
    format!("[{}]", parts.join(" "))
}

/// `encoding/json`'s error for a JSON value that does not fit the Go type it is decoded into.
pub(crate) fn cannot_unmarshal(value: &Value, go_type: &str) -> String {
    let kind = match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        // `null` decodes into anything.
        Value::Object(_) | Value::Null => "object",
    };
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

#[derive(Clone, Copy)]
enum Verb {
    V,
    S,
}

fn write(out: &mut String, value: &Value, verb: Verb) {
    match value {
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write(out, item, verb);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push_str("map[");
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write(out, item, verb);
            }
            out.push(']');
        }
        scalar => {
            let text = match scalar {
                Value::Null => "<nil>".to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => number(n),
                _ => unreachable!("strings and containers are handled above"),
            };
            match verb {
                Verb::V => out.push_str(&text),
                Verb::S if scalar.is_null() => out.push_str("%!s(<nil>)"),
                Verb::S => out.push_str(&format!("%!s({}={text})", GoType::of(scalar).name())),
            }
        }
    }
}

/// Integers print in full; floats as Go's `%v`, which is `%g` with the shortest precision:
/// shortest digits, exponent form when the decimal exponent is below -4 or at least 6.
fn number(n: &Number) -> String {
    if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        return float(f);
    }
    n.to_string()
}

fn float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    if (-4..6).contains(&exponent) {
        format!("{f}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_print_sorted_like_go() {
        let value = json!({"value": "b", "name": 1, "list": [1, "x", null], "nested": {}});
        assert_eq!(v(&value), "map[list:[1 x <nil>] name:1 nested:map[] value:b]");
    }

    #[test]
    fn s_verb_flags_non_strings() {
        assert_eq!(s(&json!("foo")), "foo");
        assert_eq!(s(&json!(1)), "%!s(int64=1)");
        assert_eq!(s(&json!(true)), "%!s(bool=true)");
        assert_eq!(s(&Value::Null), "%!s(<nil>)");
    }

    #[test]
    fn floats_use_go_g_format() {
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(100000.0), "100000");
        assert_eq!(float(1_000_000.0), "1e+06");
        assert_eq!(float(1_234_567.0), "1.234567e+06");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001), "1e-05");
    }

    #[test]
    fn lists_of_lists_print_nested() {
        assert_eq!(v_lists(&[&[json!(1), json!(2)], &[json!({"a": "b"})]]), "[[1 2] [map[a:b]]]");
    }
}
