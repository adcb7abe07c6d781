//! The bodies kubectl sends (shared/notes/local-api.md §5) applied to a Pod as the local API
//! stores it.

use podwright_patch::{CoreV1Schema, PatchError, PatchType, apply};
use serde_json::{Value, json};

fn pod() -> Value {
    serde_json::from_str(include_str!("fixtures/pod.json")).unwrap()
}

fn strategic(original: &Value, body: Value) -> Result<Value, PatchError> {
    apply(original, body.to_string().as_bytes(), PatchType::StrategicMerge, &CoreV1Schema)
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[test]
fn apply_with_a_new_image_keeps_the_other_container() {
    let pod = pod();
    let body = json!({
        "metadata": {"annotations": {LAST_APPLIED: "{\"new\":\"config\"}\n"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
            "containers": [{"image": "busybox:1.37", "name": "app"}]
        }
    });
    let mut expected = pod.clone();
    expected["metadata"]["annotations"][LAST_APPLIED] = json!("{\"new\":\"config\"}\n");
    expected["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    assert_eq!(strategic(&pod, body).unwrap(), expected);
}

#[test]
fn apply_dropping_env_a_ports_and_labels_and_adding_env_b() {
    let pod = pod();
    let body = json!({
        "metadata": {"annotations": {LAST_APPLIED: "{}\n"}, "labels": null},
        "spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "B"}],
                "env": [{"name": "B", "value": "2"}, {"$patch": "delete", "name": "A"}],
                "name": "app",
                "ports": null
            }]
        }
    });
    let mut expected = pod.clone();
    expected["metadata"]["annotations"][LAST_APPLIED] = json!("{}\n");
    expected["metadata"].as_object_mut().unwrap().remove("labels");
    let app = &mut expected["spec"]["containers"][0];
    app["env"] = json!([{"name": "B", "value": "2"}]);
    app.as_object_mut().unwrap().remove("ports");
    assert_eq!(strategic(&pod, body).unwrap(), expected);
}

#[test]
fn apply_reordering_and_adding_a_container() {
    let pod = pod();
    let body = json!({
        "spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "log"}, {"name": "app"}],
            "containers": [{"name": "log", "image": "busybox:1.37", "args": ["tail"], "ports": null}]
        }
    });
    let patched = strategic(&pod, body).unwrap();
    let names: Vec<&str> =
        patched["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["side", "log", "app"]);
    // The new element comes from the patch as it is, less its nulls.
    assert_eq!(patched["spec"]["containers"][1], json!({"name": "log", "image": "busybox:1.37", "args": ["tail"]}));
    assert_eq!(patched["spec"]["containers"][2], pod["spec"]["containers"][0]);
}

#[test]
fn set_image_merges_the_named_container() {
    let pod = pod();
    let body = json!({"spec": {"containers": [{"image": "busybox:1.37", "name": "side"}]}});
    let mut expected = pod.clone();
    expected["spec"]["containers"][1]["image"] = json!("busybox:1.37");
    assert_eq!(strategic(&pod, body).unwrap(), expected);
}

#[test]
fn atomic_lists_are_replaced_and_keyed_lists_merged() {
    let pod = pod();
    let body = json!({
        "spec": {
            "tolerations": [{"key": "example.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "app", "command": ["sh"], "ports": [{"containerPort": 9090}]}]
        },
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}
    });
    let mut expected = pod.clone();
    expected["spec"]["tolerations"] = json!([{"key": "example.com/gpu", "operator": "Exists"}]);
    expected["spec"]["containers"][0]["command"] = json!(["sh"]);
    // Without `$setElementOrder`, upstream puts the patch's new elements before the others.
    expected["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": 9090}, {"containerPort": 8080, "protocol": "TCP"}]);
    expected["status"]["conditions"][1]["status"] = json!("False");
    assert_eq!(strategic(&pod, body).unwrap(), expected);
}

#[test]
fn finalizers_merge_as_a_set() {
    let pod = pod();
    let added = strategic(&pod, json!({"metadata": {"finalizers": ["example.com/keep", "example.com/b"]}})).unwrap();
    assert_eq!(added["metadata"]["finalizers"], json!(["example.com/keep", "example.com/b"]));
    let removed =
        strategic(&added, json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/keep"]}})).unwrap();
    assert_eq!(removed["metadata"]["finalizers"], json!(["example.com/b"]));
}

#[test]
fn retain_keys_switches_a_volume_source() {
    let pod = pod();
    let body = json!({
        "spec": {
            "$setElementOrder/volumes": [{"name": "data"}],
            "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "settings"}, "name": "data"}]
        }
    });
    let patched = strategic(&pod, body).unwrap();
    assert_eq!(patched["spec"]["volumes"], json!([{"name": "data", "configMap": {"name": "settings"}}]));
}

#[test]
fn replace_directive_on_a_map() {
    let pod = pod();
    let body = json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}});
    assert_eq!(strategic(&pod, body).unwrap()["metadata"]["labels"], json!({"only": "this"}));
}

#[test]
fn container_without_its_merge_key_is_refused() {
    let err = strategic(&pod(), json!({"spec": {"containers": [{"image": "busybox:1.37"}]}})).unwrap_err();
    assert_eq!(err.to_string(), "map: map[image:busybox:1.37] does not contain declared merge key: name");
    assert_eq!((err.code(), err.reason()), (500, ""));
}

#[test]
fn unknown_directives_are_refused() {
    let err = strategic(&pod(), json!({"metadata": {"labels": {"$patch": "merge"}}})).unwrap_err();
    assert_eq!(err.to_string(), "unknown patch type: merge in map: map[$patch:merge]");
    let err = strategic(&pod(), json!({"spec": {"containers": [{"$patch": "keep", "name": "app"}]}})).unwrap_err();
    assert_eq!(err.to_string(), "unknown patch type: keep in map: map[$patch:keep name:app]");
    let err = strategic(&pod(), json!({"spec": {"containers": [{"$patch": "merge", "name": "app"}]}})).unwrap_err();
    assert_eq!(err.to_string(), "merging lists cannot yet be specified in the patch");
}

#[test]
fn malformed_directives_are_bad_requests() {
    for (body, message) in [
        (json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}), "invalid patch format of primitive list"),
        (json!({"spec": {"$setElementOrder": [{"name": "app"}]}}), "invalid patch format of setElementOrder list"),
        (json!({"spec": {"$retainKeys": "volumes"}}), "invalid patch format of retainKeys"),
        (json!({"spec": {"$retainKeys": ["containers"], "volumes": []}}), "invalid patch format of retainKeys"),
    ] {
        let err = strategic(&pod(), body).unwrap_err();
        assert_eq!((err.code(), err.to_string().as_str()), (400, message));
    }
}

#[test]
fn json_patch_replaces_an_image_and_fails_a_test() {
    let pod = pod();
    let body = br#"[{"op":"replace","path":"/spec/containers/0/image","value":"busybox:1.37"}]"#;
    let patched = apply(&pod, body, PatchType::Json, &CoreV1Schema).unwrap();
    assert_eq!(patched["spec"]["containers"][0]["image"], "busybox:1.37");

    let body = br#"[{"op":"test","path":"/metadata/resourceVersion","value":"11"}]"#;
    let err = apply(&pod, body, PatchType::Json, &CoreV1Schema).unwrap_err();
    assert_eq!(err.code(), 422);
}

#[test]
fn merge_patch_as_kubectl_label_sends_it() {
    let pod = pod();
    let body = br#"{"metadata":{"labels":{"tier":null,"env":"prod"}}}"#;
    let patched = apply(&pod, body, PatchType::Merge, &CoreV1Schema).unwrap();
    assert_eq!(patched["metadata"]["labels"], json!({"app": "web", "env": "prod"}));
    // Merge patches replace lists whole, unlike strategic ones.
    let body = br#"{"spec":{"containers":[{"name":"app","image":"busybox:1.37"}]}}"#;
    let patched = apply(&pod, body, PatchType::Merge, &CoreV1Schema).unwrap();
    assert_eq!(patched["spec"]["containers"], json!([{"name": "app", "image": "busybox:1.37"}]));
}
