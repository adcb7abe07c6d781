//! Label and field selectors of list and watch requests (apimachinery `pkg/labels` and
//! `pkg/fields`): equality, inequality, set-based (`in`, `notin`, `!key`, `key`).

use crate::errors::{ApiError, ApiResult};
use crate::store::meta_str;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (vec![], 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl Selector {
    /// Parses a label selector (`set_based`) or a field selector (equality only).
    pub fn parse(s: &str, set_based: bool, what: &str) -> ApiResult<Selector> {
        let bad = || ApiError::bad_request(format!("unable to parse requirement: invalid {what} selector: {s:?}"));
        let mut reqs = vec![];
        for term in split_terms(s) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==") {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once('=') {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if !set_based {
                return Err(bad());
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), set_values(rest).ok_or_else(bad)?)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                Requirement::In(k.trim().into(), set_values(rest).ok_or_else(bad)?)
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(term.into())
            };
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    /// Whether `lookup` (a label or field value by key) satisfies every requirement.
    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => lookup(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => lookup(k) != Some(v.as_str()),
            Requirement::In(k, vs) => lookup(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => lookup(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Requirement::Exists(k) => lookup(k).is_some(),
            Requirement::NotExists(k) => lookup(k).is_none(),
        })
    }
}

/// A field of an object by its field-selector name (`metadata.name`, `spec.nodeName`,
/// `involvedObject.uid`, ...): dotted JSON keys, as the API server's field label functions give.
pub fn field_value<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    if key == "metadata.namespace" {
        return meta_str(obj, "namespace");
    }
    key.split('.').try_fold(obj, |v, k| v.get(k))?.as_str()
}

/// Label lookup for [`Selector::matches`].
pub fn label_value<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")?.get("labels")?.get(key)?.as_str()
}

/// The list/watch filter of one request.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub labels: Selector,
    pub fields: Selector,
}

impl Filter {
    pub fn new(labels: Option<&str>, fields: Option<&str>) -> ApiResult<Filter> {
        Ok(Filter {
            labels: labels.map(|s| Selector::parse(s, true, "label")).transpose()?.unwrap_or_default(),
            fields: fields.map(|s| Selector::parse(s, false, "field")).transpose()?.unwrap_or_default(),
        })
    }

    /// Whether every object matches.
    pub fn is_empty(&self) -> bool {
        self.labels == Selector::default() && self.fields == Selector::default()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(|k| label_value(obj, k)) && self.fields.matches(|k| field_value(obj, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_of_every_form() {
        let pod = json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "front"}}});
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "app in (web, db)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier=front",
        ];
        for s in yes {
            assert!(Filter::new(Some(s), None).unwrap().matches(&pod), "{s}");
        }
        let no = ["app=db", "app notin (web)", "missing", "!app", "app=web,tier=back"];
        for s in no {
            assert!(!Filter::new(Some(s), None).unwrap().matches(&pod), "{s}");
        }
    }

    #[test]
    fn field_selectors_read_dotted_paths() {
        let ev =
            json!({"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {"name": "web", "uid": "u1"}});
        let f = Filter::new(None, Some("involvedObject.name=web,involvedObject.namespace!=x,involvedObject.uid=u1"))
            .unwrap();
        assert!(f.matches(&ev));
        assert!(!Filter::new(None, Some("metadata.name=f")).unwrap().matches(&ev));
        assert!(Filter::new(None, Some("metadata.namespace=default")).unwrap().matches(&ev));
        assert!(Filter::new(None, Some("app in (x)")).is_err());
    }
}
