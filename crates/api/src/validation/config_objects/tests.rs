//! Upstream's `TestValidateConfigMap`, `TestValidateConfigMapUpdate`, `TestValidateSecret`,
//! `TestValidateSecretUpdate`, `TestValidateDockerConfigSecret`, `TestValidateBasicAuthSecret`
//! and `TestValidateSSHAuthSecret` cases (validation_test.go), with the exact messages.

use super::*;
use crate::defaults::default_secret;
use serde_json::{Value, json};

const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const BAD_NAME: &str = "NoUppercaseOrSpecialCharsLike=Equals";

fn config_map(name: &str, namespace: &str, data: Value, binary: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace}, "data": data, "binaryData": binary,
    }))
    .expect("config map")
}

fn strings(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn b64(bytes: &[u8]) -> String {
    let owned = k8s_openapi::ByteString(bytes.to_vec());
    serde_json::to_value(owned).expect("base64").as_str().expect("string").to_string()
}

#[test]
fn config_maps() {
    let long_key = "a".repeat(254);
    let big = "a".repeat(MAX_SECRET_SIZE + 1);
    let cases: Vec<(&str, ConfigMap, Vec<String>)> = vec![
        ("valid", config_map("validname", "validns", json!({"key": "value"}), json!({"bin": b64(b"value")})), vec![]),
        ("max key length", config_map("validname", "validns", json!({"a".repeat(253): "value"}), Value::Null), vec![]),
        ("leading dot key", config_map("validname", "validns", json!({".ab": "value"}), Value::Null), vec![]),
        (
            "binary data leading dot key",
            config_map("validname", "validns", Value::Null, json!({".ab": b64(b"value")})),
            vec![],
        ),
        (
            "binary data non utf-8 bytes",
            config_map("validname", "validns", Value::Null, json!({"key": b64(&[0, 0xfe, 0, 0xff])})),
            vec![],
        ),
        (
            "empty name",
            config_map("", "validns", Value::Null, Value::Null),
            vec!["metadata.name: Required value: name or generateName is required".into()],
        ),
        (
            "invalid name",
            config_map(BAD_NAME, "validns", Value::Null, Value::Null),
            vec![format!("metadata.name: Invalid value: \"{BAD_NAME}\": {SUBDOMAIN_MSG}")],
        ),
        (
            "empty namespace",
            config_map("validname", "", Value::Null, Value::Null),
            vec!["metadata.namespace: Required value".into()],
        ),
        (
            "invalid namespace",
            config_map("validname", BAD_NAME, Value::Null, Value::Null),
            vec![format!("metadata.namespace: Invalid value: \"{BAD_NAME}\": {LABEL_MSG}")],
        ),
        (
            "invalid key",
            config_map("validname", "validns", json!({"a*b": "value"}), Value::Null),
            vec![format!("data[a*b]: Invalid value: \"a*b\": {KEY_MSG}")],
        ),
        (
            "dot key",
            config_map("validname", "validns", json!({".": "value"}), Value::Null),
            vec!["data[.]: Invalid value: \".\": must not be '.'".into()],
        ),
        (
            "double dot key",
            config_map("validname", "validns", json!({"..": "value"}), Value::Null),
            vec!["data[..]: Invalid value: \"..\": must not be '..'".into()],
        ),
        (
            "double dot prefix",
            config_map("validname", "validns", json!({"..data": "value"}), Value::Null),
            vec!["data[..data]: Invalid value: \"..data\": must not start with '..'".into()],
        ),
        (
            "over max key length",
            config_map("validname", "validns", json!({long_key.clone(): "value"}), Value::Null),
            vec![format!("data[{long_key}]: Invalid value: \"{long_key}\": must be no more than 253 characters")],
        ),
        (
            "over max size",
            config_map("validname", "validns", json!({"key": big}), Value::Null),
            vec!["[]: Too long: must have at most 1048576 bytes".into()],
        ),
        (
            "data and binary data together over max size",
            config_map(
                "validname",
                "validns",
                json!({"key": "a".repeat(MAX_SECRET_SIZE / 2)}),
                json!({"bin": b64(&vec![b'a'; MAX_SECRET_SIZE / 2 + 1])}),
            ),
            vec!["[]: Too long: must have at most 1048576 bytes".into()],
        ),
        (
            "duplicated key",
            config_map("validname", "validns", json!({"key": "value1"}), json!({"key": b64(b"value2")})),
            vec!["data[key]: Invalid value: \"key\": duplicate of key present in binaryData".into()],
        ),
        (
            "binary data invalid key",
            config_map("validname", "validns", Value::Null, json!({"a*b": b64(b"value")})),
            vec![format!("binaryData[a*b]: Invalid value: \"a*b\": {KEY_MSG}")],
        ),
        (
            "binary data dot key",
            config_map("validname", "validns", Value::Null, json!({".": b64(b"value")})),
            vec!["binaryData[.]: Invalid value: \".\": must not be '.'".into()],
        ),
        (
            "binary data double dot key",
            config_map("validname", "validns", Value::Null, json!({"..": b64(b"value")})),
            vec!["binaryData[..]: Invalid value: \"..\": must not be '..'".into()],
        ),
        (
            "binary data over max size",
            config_map("validname", "validns", Value::Null, json!({"bin": b64(&vec![b'a'; MAX_SECRET_SIZE + 1])})),
            vec!["[]: Too long: must have at most 1048576 bytes".into()],
        ),
    ];
    let mut failures = vec![];
    for (name, cm, want) in cases {
        let got = strings(&validate_config_map(&cm));
        if got != want {
            failures.push(format!("{name}:\n  got:  {got:?}\n  want: {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn config_map_updates() {
    let plain = config_map("validname", "validns", json!({"key": "value"}), Value::Null);
    let immutable = ConfigMap { immutable: Some(true), ..plain.clone() };
    let mutable = ConfigMap { immutable: Some(false), ..plain.clone() };
    let with = |cm: &ConfigMap, key: &str, value: &str| {
        let mut cm = cm.clone();
        cm.data.get_or_insert_default().insert(key.into(), value.into());
        cm
    };
    let forbidden = |field: &str| format!("{field}: Forbidden: field is immutable when `immutable` is set");
    let cases: Vec<(&str, &ConfigMap, ConfigMap, Vec<String>)> = vec![
        ("valid", &plain, plain.clone(), vec![]),
        ("mark configmap immutable", &plain, immutable.clone(), vec![]),
        ("revert immutable configmap", &immutable, plain.clone(), vec![forbidden("immutable")]),
        ("mark immutable configmap mutable", &immutable, mutable, vec![forbidden("immutable")]),
        ("add data in configmap", &plain, with(&plain, "key-2", "value-2"), vec![]),
        ("add data in immutable configmap", &immutable, with(&immutable, "key-2", "value-2"), vec![forbidden("data")]),
        ("change data in configmap", &plain, with(&plain, "key", "foo"), vec![]),
        ("change data in immutable configmap", &immutable, with(&immutable, "key", "foo"), vec![forbidden("data")]),
        (
            "change binary data in immutable configmap",
            &immutable,
            ConfigMap { binary_data: Some([("b".into(), ByteString(vec![1]))].into()), ..immutable.clone() },
            vec![forbidden("binaryData")],
        ),
        (
            "invalid after the change",
            &plain,
            with(&plain, "a*b", "x"),
            vec![format!("data[a*b]: Invalid value: \"a*b\": {KEY_MSG}")],
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(strings(&validate_config_map_update(&new, old)), want, "{name}");
    }
}

/// A secret as the API server validates it: decoded, then defaulted.
fn secret(value: Value) -> Secret {
    let mut s: Secret = serde_json::from_value(value).expect("secret");
    default_secret(&mut s);
    s
}

fn valid_secret() -> Value {
    json!({"metadata": {"name": "foo", "namespace": "bar"}, "data": {"data-1": b64(b"bar")}})
}

fn with_data(mut base: Value, key: &str, value: &[u8]) -> Value {
    base["data"][key] = json!(b64(value));
    base
}

#[test]
fn secrets() {
    let token = |annotations: Value| {
        json!({"metadata": {"name": "foo", "namespace": "bar", "annotations": annotations},
            "type": SERVICE_ACCOUNT_TOKEN, "data": {"data-1": b64(b"bar")}})
    };
    let typed = |type_: &str, data: Value| json!({"metadata": {"name": "foo", "namespace": "bar"}, "type": type_, "data": data});
    let docker =
        br#"{"https://index.docker.io/v1/": {"auth": "Y2x1ZWRyb29sZXIwMDAxOnBhc3N3b3Jk","email": "fake@example.com"}}"#;
    let docker_json = br#"{"auths":{"https://index.docker.io/v1/": {"auth": "Y2x1ZWRyb29sZXIwMDAxOnBhc3N3b3Jk","email": "fake@example.com"}}}"#;
    let redacted = |key: &str, why: &str| format!("data[{key}]: Invalid value: \"<secret contents redacted>\": {why}");
    let mut empty_name = valid_secret();
    empty_name["metadata"]["name"] = json!("");
    let mut invalid_ns = valid_secret();
    invalid_ns["metadata"]["namespace"] = json!(BAD_NAME);
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        ("valid", valid_secret(), vec![]),
        ("empty name", empty_name, vec!["metadata.name: Required value: name or generateName is required".into()]),
        (
            "invalid namespace",
            invalid_ns,
            vec![format!("metadata.namespace: Invalid value: \"{BAD_NAME}\": {LABEL_MSG}")],
        ),
        (
            "over max size",
            json!({"metadata": {"name": "foo", "namespace": "bar"}, "data": {"over": b64(&vec![0; MAX_SECRET_SIZE + 1])}}),
            vec!["data: Too long: must have at most 1048576 bytes".into()],
        ),
        (
            "invalid key",
            with_data(valid_secret(), "a*b", b"whoops"),
            vec![format!("data[a*b]: Invalid value: \"a*b\": {KEY_MSG}")],
        ),
        ("leading dot key", with_data(valid_secret(), ".key", b"bar"), vec![]),
        (
            "dot key",
            with_data(valid_secret(), ".", b"bar"),
            vec!["data[.]: Invalid value: \".\": must not be '.'".into()],
        ),
        (
            "double dot key",
            with_data(valid_secret(), "..", b"bar"),
            vec!["data[..]: Invalid value: \"..\": must not be '..'".into()],
        ),
        (
            "stringData keys are data keys",
            json!({"metadata": {"name": "foo", "namespace": "bar"}, "stringData": {"a b": "x"}}),
            vec![format!("data[a b]: Invalid value: \"a b\": {KEY_MSG}")],
        ),
        ("valid service-account-token secret", token(json!({SERVICE_ACCOUNT_NAME_KEY: "foo"})), vec![]),
        (
            "empty service-account-token annotation",
            token(json!({SERVICE_ACCOUNT_NAME_KEY: ""})),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value".into()],
        ),
        (
            "missing service-account-token annotations",
            token(Value::Null),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value".into()],
        ),
        ("valid dockercfg", typed(DOCKERCFG, json!({".dockercfg": b64(docker)})), vec![]),
        ("missing dockercfg", typed(DOCKERCFG, json!({})), vec!["data[.dockercfg]: Required value".into()]),
        (
            "empty dockercfg",
            typed(DOCKERCFG, json!({".dockercfg": ""})),
            vec![redacted(".dockercfg", "unexpected end of JSON input")],
        ),
        (
            "invalid dockercfg",
            typed(DOCKERCFG, json!({".dockercfg": b64(b"bad")})),
            vec![redacted(".dockercfg", "invalid character 'b' looking for beginning of value")],
        ),
        ("valid config.json", typed(DOCKER_CONFIG_JSON, json!({".dockerconfigjson": b64(docker_json)})), vec![]),
        (
            "missing config.json",
            typed(DOCKER_CONFIG_JSON, Value::Null),
            vec!["data[.dockerconfigjson]: Required value".into()],
        ),
        (
            "empty config.json",
            typed(DOCKER_CONFIG_JSON, json!({".dockerconfigjson": ""})),
            vec![redacted(".dockerconfigjson", "unexpected end of JSON input")],
        ),
        (
            "invalid config.json",
            typed(DOCKER_CONFIG_JSON, json!({".dockerconfigjson": b64(b"bad")})),
            vec![redacted(".dockerconfigjson", "invalid character 'b' looking for beginning of value")],
        ),
        (
            "config.json that is a list",
            typed(DOCKER_CONFIG_JSON, json!({".dockerconfigjson": b64(b"[]")})),
            vec![redacted(
                ".dockerconfigjson",
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            )],
        ),
        (
            "valid basic auth",
            typed(BASIC_AUTH, json!({"username": b64(b"username"), "password": b64(b"password")})),
            vec![],
        ),
        ("basic auth with only a password", typed(BASIC_AUTH, json!({"password": ""})), vec![]),
        (
            "missing username and password",
            typed(BASIC_AUTH, json!({})),
            vec!["data[username]: Required value".into(), "data[password]: Required value".into()],
        ),
        ("valid ssh auth", typed(SSH_AUTH, json!({"ssh-privatekey": b64(b"foo-bar-baz")})), vec![]),
        ("missing private key", typed(SSH_AUTH, json!({})), vec!["data[ssh-privatekey]: Required value".into()]),
        (
            "empty private key",
            typed(SSH_AUTH, json!({"ssh-privatekey": ""})),
            vec!["data[ssh-privatekey]: Required value".into()],
        ),
        ("valid tls", typed(TLS, json!({"tls.crt": "", "tls.key": ""})), vec![]),
        (
            "tls without its keys",
            typed(TLS, json!({})),
            vec!["data[tls.crt]: Required value".into(), "data[tls.key]: Required value".into()],
        ),
        ("a type of another name", typed("example.com/custom", Value::Null), vec![]),
    ];
    let mut failures = vec![];
    for (name, value, want) in cases {
        let got = strings(&validate_secret(&secret(value)));
        if got != want {
            failures.push(format!("{name}:\n  got:  {got:?}\n  want: {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn secret_updates() {
    let plain = secret(valid_secret());
    let immutable = Secret { immutable: Some(true), ..plain.clone() };
    let mutable = Secret { immutable: Some(false), ..plain.clone() };
    let with = |s: &Secret, key: &str, value: &str| {
        let mut s = s.clone();
        s.data.get_or_insert_default().insert(key.into(), ByteString(value.as_bytes().to_vec()));
        s
    };
    let forbidden = |field: &str| format!("{field}: Forbidden: field is immutable when `immutable` is set");
    let cases: Vec<(&str, &Secret, Secret, Vec<String>)> = vec![
        ("mark secret immutable", &plain, immutable.clone(), vec![]),
        ("revert immutable secret", &immutable, plain.clone(), vec![forbidden("immutable")]),
        ("mark immutable secret mutable", &immutable, mutable, vec![forbidden("immutable")]),
        ("add data in secret", &plain, with(&plain, "data-2", "baz"), vec![]),
        ("add data in immutable secret", &immutable, with(&immutable, "data-2", "baz"), vec![forbidden("data")]),
        ("change data in secret", &plain, with(&plain, "data-1", "foo"), vec![]),
        ("change data in immutable secret", &immutable, with(&immutable, "data-1", "foo"), vec![forbidden("data")]),
        (
            "change the type",
            &plain,
            Secret { type_: Some(SSH_AUTH.into()), ..plain.clone() },
            vec![
                "type: Invalid value: \"kubernetes.io/ssh-auth\": field is immutable".into(),
                "data[ssh-privatekey]: Required value".into(),
            ],
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(strings(&validate_secret_update(&new, old)), want, "{name}");
    }
}

#[test]
fn string_data_overrides_data_and_the_type_defaults_to_opaque() {
    let s = secret(json!({
        "metadata": {"name": "foo", "namespace": "bar"},
        "data": {"a": b64(b"from data"), "b": b64(b"kept")},
        "stringData": {"a": "from stringData"},
    }));
    assert_eq!(s.string_data, None);
    let data = s.data.expect("data");
    assert_eq!(data["a"].0, b"from stringData");
    assert_eq!(data["b"].0, b"kept");
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
}

#[test]
fn runtime_classes() {
    let rc = |value: Value| -> RuntimeClass { serde_json::from_value(value).expect("runtime class") };
    assert_eq!(
        strings(&validate_runtime_class(&rc(json!({"metadata": {"name": "gvisor"}, "handler": "runsc"})))),
        [""; 0]
    );
    assert_eq!(
        strings(&validate_runtime_class(&rc(
            json!({"metadata": {"name": "x", "namespace": "default"}, "handler": "Bad_Handler"})
        ))),
        [
            "metadata.namespace: Forbidden: not allowed on this type".to_string(),
            format!("handler: Invalid value: \"Bad_Handler\": {LABEL_MSG}"),
        ]
    );
}
