//! A container's environment: its `env` entries resolved and `$(VAR)` references expanded, as the
//! kubelet's `makeEnvironmentVariables` does.

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use std::collections::BTreeMap;

fn meta(pod: &Pod) -> (&str, &str, &str) {
    let m = &pod.metadata;
    (
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default(),
    )
}

/// Expands `$(VAR)` references from `env`; `$$` escapes; unknown references stay as written.
pub fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let var = &inner[..end];
                    match env.get(var) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(var);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The value of an `env` entry: literal (with earlier variables expanded), from the pod's own
/// fields, or empty when it has neither (the kubelet sets such a variable to "", as an empty
/// `value` is the same as none).
fn env_value(pod: &Pod, pod_ip: &str, var: &EnvVar, env: &BTreeMap<String, String>) -> Option<String> {
    let value = var.value.as_deref().unwrap_or_default();
    let Some(from) = var.value_from.as_ref().filter(|_| value.is_empty()) else {
        return Some(expand(value, env));
    };
    let field = from.field_ref.as_ref()?;
    let (name, ns, uid) = meta(pod);
    Some(match field.field_path.as_str() {
        "metadata.name" => name.into(),
        "metadata.namespace" => ns.into(),
        "metadata.uid" => uid.into(),
        "status.podIP" => pod_ip.into(),
        "spec.nodeName" | "status.hostIP" => String::new(),
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone().unwrap_or_default(),
        _ => return None,
    })
}

pub fn container_env(pod: &Pod, c: &Container, pod_ip: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in c.env.iter().flatten() {
        if let Some(v) = env_value(pod, pod_ip, var, &env) {
            env.insert(var.name.clone(), v);
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec})).unwrap()
    }

    #[test]
    fn rule_14_an_env_entry_without_a_value_is_set_to_the_empty_string() {
        let p = pod(serde_json::json!({}));
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "env": [
                {"name": "EMPTY"},
                {"name": "BLANK", "value": ""},
                {"name": "NAME", "value": "", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "USES", "value": "[$(EMPTY)]"},
            ]
        }))
        .unwrap();
        let env = container_env(&p, &c, "10.0.0.1");
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!((get("EMPTY"), get("BLANK"), get("NAME"), get("USES")), (Some(""), Some(""), Some("u"), Some("[]")));
    }

    #[test]
    fn expands_references_like_the_kubelet() {
        let env = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)", &env), "x-$(B)");
        assert_eq!(expand("$$(A) $", &env), "$(A) $");
        assert_eq!(expand("a$(A", &env), "a$(A");
    }
}
