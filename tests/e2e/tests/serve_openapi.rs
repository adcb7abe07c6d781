//! kubectl's writes with validation on (the default, no `--validate=false`) against
//! `podwright serve`: `apply` (create, then patch), `create -f`, `replace` and `edit` read the
//! daemon's OpenAPI documents first. kubectl 1.27+ find `fieldValidation` on the kinds' PATCH
//! operations and leave unknown fields to the server's strict decoding; kubectl 1.20 finds no
//! schema to check against, sends the object, and prints the server's `Warning`.

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::{Manifest, pod_name};
use serde_json::{Value, json};
use std::process::Output;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// A pod that stops within a second when its image changes or it is deleted.
fn pod(name: &str, tier: &str, image: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    tier: {tier}\nspec:\n  terminationGracePeriodSeconds: 1\n{extra_spec}  containers:\n  - name: app\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n"
    )
}

fn show(o: &Output) -> String {
    format!("exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}", o.status.code(), text(&o.stdout), text(&o.stderr))
}

/// kubectl `version` with `args` must succeed and print `expected`.
fn succeeds(d: &Daemon, version: &str, args: &[&str], expected: &str) {
    let o = d.kubectl(Some(version), args);
    assert!(o.status.success(), "kubectl {version} {args:?}: {}\n--- daemon log:\n{}", show(&o), d.log());
    assert_eq!(text(&o.stdout), expected, "kubectl {version} {args:?}: {}", show(&o));
}

fn get(d: &Daemon, version: &str, name: &str) -> Value {
    let o = d.kubectl(Some(version), &["get", "pod", name, "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", show(&o)))
}

/// The unknown field `spec.foo`: refused by the server under Strict (1.27+); for 1.20, which
/// sends no `fieldValidation`, a warning and a pod without it.
fn unknown_field(d: &Daemon, version: &str, tag: &str) {
    let name = pod_name(&format!("bad-{tag}"));
    let m = Manifest::new(&pod(&name, "bad", BUSYBOX, "  foo: bar\n"));
    let o = d.kubectl(Some(version), &["create", "-f", m.path_str()]);
    if version == "1.20" {
        assert!(o.status.success(), "{}", show(&o));
        assert!(text(&o.stderr).contains("Warning: unknown field \"spec.foo\""), "{}", show(&o));
        assert_eq!(text(&o.stdout), format!("pod/{name} created\n"));
        assert!(get(d, version, &name)["spec"].get("foo").is_none());
    } else {
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        let expected = format!(
            "Error from server (BadRequest): error when creating \"{}\": Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\"\n",
            m.path_str()
        );
        assert_eq!(text(&o.stderr), expected);
    }
}

fn validated_writes(version: &str) {
    let tag = version.replace('.', "");
    let d = Daemon::start();
    let name = pod_name(&format!("web-{tag}"));

    let created = Manifest::new(&pod(&name, "web", BUSYBOX, ""));
    succeeds(&d, version, &["apply", "-f", created.path_str()], &format!("pod/{name} created\n"));

    // A second apply sends a strategic merge patch of what changed (with fieldValidation=Strict
    // from 1.27 on, which its directives such as `$setElementOrder/containers` pass).
    let changed = Manifest::new(&pod(&name, "front", "localhost/pause:3.9", ""));
    succeeds(&d, version, &["apply", "-f", changed.path_str()], &format!("pod/{name} configured\n"));
    let applied = get(&d, version, &name);
    assert_eq!(applied["metadata"]["labels"], json!({"tier": "front"}));
    assert_eq!(applied["spec"]["containers"][0]["image"], "localhost/pause:3.9");
    assert_eq!(applied["spec"]["containers"][0]["command"], json!(["sleep", "3600"]));

    unknown_field(&d, version, &tag);

    // replace: the stored pod with an annotation added, without its resourceVersion so that
    // the node's status updates in between cannot make it a conflict.
    let mut stored = get(&d, version, &name);
    stored["metadata"]["annotations"]["replaced"] = json!("yes");
    stored["metadata"].as_object_mut().expect("metadata").remove("resourceVersion");
    let replacement = Manifest::new(&stored.to_string());
    succeeds(&d, version, &["replace", "-f", replacement.path_str()], &format!("pod/{name} replaced\n"));
    assert_eq!(get(&d, version, &name)["metadata"]["annotations"]["replaced"], "yes");

    // edit: the editor changes the label in the YAML kubectl hands it.
    let o = d
        .kubectl_cmd(Some(version), &["edit", "pod", &name])
        .env("KUBE_EDITOR", "sed -i -e 's/^    tier: front$/    tier: edited/'")
        .output()
        .expect("kubectl runs");
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(text(&o.stdout), format!("pod/{name} edited\n"), "{}", show(&o));
    assert_eq!(get(&d, version, &name)["metadata"]["labels"], json!({"tier": "edited"}));

    let cm = format!("cm-{tag}");
    succeeds(&d, version, &["create", "configmap", &cm, "--from-literal=a=b"], &format!("configmap/{cm} created\n"));
}

#[test]
fn kubectl_1_32_validates_through_the_server() {
    validated_writes("1.32");
}

#[test]
fn kubectl_1_33_validates_through_the_server() {
    validated_writes("1.33");
}

#[test]
fn kubectl_1_27_validates_through_the_server() {
    validated_writes("1.27");
}

#[test]
fn kubectl_1_20_applies_and_the_server_warns_of_unknown_fields() {
    validated_writes("1.20");
}
