//! Manifests podwright must refuse before it starts anything (exit 2, Kubernetes-style
//! messages as kubectl prints them), and an unreachable runtime (exit 3).
//!
//! `run` gets a root directory that does not exist: if podwright started anything (the
//! embedded containerd, a pod directory) the directory would appear.

use podwright_e2e::*;
use std::path::PathBuf;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// A root directory that does not exist yet (removed again on drop, should it appear).
struct FreshRoot(PathBuf);

impl FreshRoot {
    fn new(case: &str) -> FreshRoot {
        let p = std::env::temp_dir().join(format!("podwright-e2e-{}-root-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        FreshRoot(p)
    }
    fn as_str(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for FreshRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `run` and `check` both refuse the manifest with exit code 2 and print every `expected`
/// substring on stderr; `run` starts nothing. Returns `run`'s stderr.
fn assert_refused(case: &str, manifest: &str, expected: &[&str]) -> (Manifest, String) {
    let m = Manifest::new(manifest);
    let root = FreshRoot::new(case);
    let o = run_file(m.path_str(), &["--root-dir", root.as_str()]);
    o.assert_code(2);
    for want in expected {
        assert!(o.stderr.contains(want), "{case}: run should print {want:?}\n{}", o.context());
    }
    assert!(o.all_progress().is_empty(), "{case}: run printed progress, so it started the pod\n{}", o.context());
    assert!(
        !root.0.exists(),
        "{case}: run created {} although the manifest is invalid\n{}",
        root.0.display(),
        o.context()
    );
    assert!(o.stdout.trim().is_empty(), "{case}: nothing on stdout (no List)\n{}", o.context());
    assert!(o.elapsed < Duration::from_secs(10), "{case}: refusing took {:?}", o.elapsed);

    let c = podwright(&["check", "-f", m.path_str()]);
    c.assert_code(2);
    for want in expected {
        assert!(c.stderr.contains(want), "{case}: check should print {want:?}\n{}", c.context());
    }
    let stderr = o.stderr.clone();
    (m, stderr)
}

#[test]
fn readiness_probe_on_init_container_is_forbidden() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid-probe
spec:
  containers:
  - name: app
    image: {BUSYBOX}
  initContainers:
  - name: init
    image: {BUSYBOX}
    readinessProbe:
      exec:
        command: ["true"]
"#
    );
    let (_m, stderr) = assert_refused(
        "probe",
        &manifest,
        &[
            r#"The Pod "invalid-probe" is invalid: spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"#,
        ],
    );
    assert_eq!(stderr.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one error, one line: {stderr}");
}

#[test]
fn duplicate_name_across_init_and_app_containers() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid-dup
spec:
  containers:
  - name: same
    image: {BUSYBOX}
  initContainers:
  - name: same
    image: {BUSYBOX}
"#
    );
    assert_refused(
        "dup",
        &manifest,
        &[r#"The Pod "invalid-dup" is invalid: spec.initContainers[0].name: Duplicate value: "same""#],
    );
}

/// Issue 8: a field podwright does not honour is refused, one line per field, instead of the
/// pod running without it.
#[test]
fn fields_podwright_does_not_honour_are_refused_one_line_each() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: unsupported
spec:
  securityContext: {{appArmorProfile: {{type: Unconfined}}}}
  volumes:
  - name: share
    nfs: {{server: nas, path: /export}}
  containers:
  - name: app
    image: {BUSYBOX}
    securityContext: {{appArmorProfile: {{type: RuntimeDefault}}}}
"#
    );
    let (_m, stderr) = assert_refused("unsupported", &manifest, &[]);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines,
        [
            r#"The Pod "unsupported" is invalid: "#,
            "* spec.containers[0].securityContext.appArmorProfile: Unsupported value: not supported by podwright yet",
            "* spec.securityContext.appArmorProfile: Unsupported value: not supported by podwright yet",
            "* spec.volumes[0].nfs: Unsupported value: not supported by podwright yet",
        ]
    );
}

/// Issue 8: a megabyte of nesting is refused at the depth limit, without reading the rest
/// (the refusal used to take time that grew with the square of the depth), and a manifest
/// over the API server's 3 MiB limit is not read at all.
#[test]
fn deep_nesting_and_oversized_manifests_are_refused() {
    let half = 512 * 1024;
    let nested = format!("{}{}", "[".repeat(half), "]".repeat(half));
    let (_m, stderr) = assert_refused("nested", &nested, &[":1:33: exceeded max depth of 32"]);
    assert_eq!(stderr.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one error, one line: {stderr}");

    let big = format!("# {}\n", "x".repeat(3 * 1024 * 1024));
    let (m, stderr) = assert_refused("big", &big, &["too large: must have at most 3145728 bytes"]);
    assert!(stderr.starts_with(m.path_str()), "the error names the file: {stderr}");
}

#[test]
fn unknown_field_is_rejected() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid-field
spec:
  containers:
  - name: app
    image: {BUSYBOX}
    bogusField: 1
"#
    );
    let (m, stderr) = assert_refused("field", &manifest, &["unknown field", "spec.containers[0].bogusField"]);
    assert!(stderr.contains(m.path_str()), "the message should name the file: {stderr}");
}

#[test]
fn yaml_syntax_error_names_file_and_line() {
    // Line 8 opens a flow sequence that is never closed; the parser notices on line 9.
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid-yaml
spec:
  containers:
  - name: app
    image: [{BUSYBOX}
    command: ['sh']
"#
    );
    let (m, stderr) = assert_refused("yaml", &manifest, &[]);
    let path = m.path_str();
    let line = stderr
        .lines()
        .find(|l| l.contains(path))
        .unwrap_or_else(|| panic!("the message should name the file {path}: {stderr}"));
    assert!(
        line.contains(&format!("{path}:9:"))
            || line.contains(&format!("{path}:8:"))
            || line.contains("line 9")
            || line.contains("line 8"),
        "the message should give the line (8 or 9): {stderr}"
    );
}

#[test]
fn several_errors_are_listed_at_once() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid-many
spec:
  restartPolicy: Sometimes
  containers:
  - name: app
    image: {BUSYBOX}
  - name: app
    image: ""
  initContainers:
  - name: init
    image: {BUSYBOX}
    readinessProbe:
      exec:
        command: ["true"]
"#
    );
    let (_m, stderr) = assert_refused(
        "many",
        &manifest,
        &[
            r#"The Pod "invalid-many" is invalid: "#,
            "* spec.containers[1].image: Required value",
            r#"* spec.containers[1].name: Duplicate value: "app""#,
            "* spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            r#"* spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never""#,
        ],
    );
    // kubectl's multi-error layout: the header line, then one "* " line per error.
    let bullets = stderr.lines().filter(|l| l.starts_with("* ")).count();
    assert_eq!(bullets, 4, "{stderr}");
}

/// One invalid pod in a multi-document manifest: the valid one is not started either.
#[test]
fn invalid_second_document_starts_nothing() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: valid-first
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo must not run"]
---
apiVersion: v1
kind: Pod
metadata:
  name: invalid-second
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
  initContainers:
  - name: init
    image: {BUSYBOX}
    readinessProbe:
      exec:
        command: ["true"]
"#
    );
    assert_refused(
        "second",
        &manifest,
        &[r#"The Pod "invalid-second" is invalid: spec.initContainers[0].readinessProbe: Forbidden"#],
    );
}

/// A ConfigMap or Secret beside the pods is validated as the API server validates it: one
/// invalid object, or a name given twice, starts nothing.
#[test]
fn invalid_config_maps_and_secrets_start_nothing() {
    let pod = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: with-config
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo must not run"]
"#
    );
    let manifest = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  "bad key": x
---
apiVersion: v1
kind: Secret
metadata:
  name: tls
type: kubernetes.io/tls
stringData:
  tls.crt: cert
---
{pod}"#
    );
    assert_refused(
        "config-map",
        &manifest,
        &[
            r#"The ConfigMap "app-config" is invalid: data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters"#,
            r#"The Secret "tls" is invalid: data[tls.key]: Required value"#,
        ],
    );
    let twice = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n---\n{pod}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n"
    );
    assert_refused("config-map-twice", &twice, &[r#":16:1: document 3: configmaps "c" already exists"#]);
}

#[test]
fn check_accepts_config_maps_and_secrets_beside_a_pod() {
    let manifest = format!(
        r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {{name: app-config}}
  data: {{app.conf: "port=80"}}
- apiVersion: v1
  kind: Secret
  metadata: {{name: creds}}
  stringData: {{password: hunter2}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: with-config}}
  spec:
    containers: [{{name: app, image: {BUSYBOX}}}]
"#
    );
    let m = Manifest::new(&manifest);
    let o = podwright(&["check", "-f", m.path_str()]);
    o.assert_code(0);
    assert!(o.stdout.contains("pod/with-config"), "{}", o.context());
}

#[test]
fn check_accepts_the_example() {
    let file = workspace_dir().join("examples/myapp-pod.yaml");
    let o = podwright(&["check", "-f", file.to_str().unwrap()]);
    o.assert_code(0);
    assert!(o.stdout.contains("pod/myapp-pod") && o.stdout.contains("valid"), "{}", o.context());
    for n in ["init-myservice", "init-mydb", "myapp-container"] {
        assert!(o.stdout.contains(n), "check should list {n}\n{}", o.context());
    }
    assert!(
        o.stdout.find("init-myservice").unwrap() < o.stdout.find("init-mydb").unwrap(),
        "init containers in order\n{}",
        o.context()
    );
}

#[test]
fn unreachable_runtime_exits_3() {
    let file = workspace_dir().join("examples/myapp-pod.yaml");
    let root = FreshRoot::new("unreachable");
    let o = run_file(
        file.to_str().unwrap(),
        &["--runtime-endpoint", "unix:///nonexistent.sock", "--root-dir", root.as_str(), "--timeout", "30"],
    );
    o.assert_code(3);
    assert!(o.stderr.contains("unix:///nonexistent.sock"), "the message should name the endpoint\n{}", o.context());
    assert!(o.all_progress().is_empty(), "{}", o.context());
    assert!(o.stdout.trim().is_empty(), "{}", o.context());
    assert!(o.elapsed < Duration::from_secs(20), "giving up took {:?}", o.elapsed);
}
