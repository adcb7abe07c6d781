//! Environment from files (`fileKeyRef`, KEP-3721) and `hostnameOverride` (KEP-4762) for real:
//! an init container writes an env file into an emptyDir that the app container, which does not
//! mount it, reads its variables from; a missing key stops the container with the kubelet's
//! reason and message unless optional; the override is the host name the container sees and
//! its `/etc/hosts` entry.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;

const BUSYBOX: &str = "localhost/busybox:1.36";

fn env_file_pod(name: &str, key: &str) -> String {
    format!(
        r##"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  volumes: [{{name: config, emptyDir: {{}}}}]
  initContainers:
  - name: render
    image: {BUSYBOX}
    command: [sh, -c, "printf \"# rendered\\nDB_ADDRESS='db:5432'\\nGREETING='hello\\n  world'\\n\" > /config/app.env"]
    volumeMounts: [{{name: config, mountPath: /config}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'echo "$DB_ADDRESS|$GREETING|${{OPTIONAL-unset}}"']
    env:
    - {{name: DB_ADDRESS, valueFrom: {{fileKeyRef: {{volumeName: config, path: app.env, key: {key}}}}}}}
    - {{name: GREETING, valueFrom: {{fileKeyRef: {{volumeName: config, path: app.env, key: GREETING}}}}}}
    - {{name: OPTIONAL, valueFrom: {{fileKeyRef: {{volumeName: config, path: app.env, key: NOPE, optional: true}}}}}}
"##
    )
}

#[test]
fn variables_come_from_the_env_file_an_init_container_wrote() {
    let name = pod_name("envfile");
    let o = run_manifest(&env_file_pod(&name, "DB_ADDRESS"), &[]);
    o.assert_code(0);
    // The optional key the file lacks is left out; a quoted value keeps its newline.
    assert_eq!(o.output_of("app"), ["db:5432|hello", "  world|unset"], "{}", o.context());
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded");
    assert_nothing_left(&pod);
}

#[test]
fn a_key_the_env_file_lacks_stops_the_container_with_the_kubelets_message() {
    let name = pod_name("envfile-missing");
    let o = run_manifest(&env_file_pod(&name, "DB_HOST"), &["--timeout", "5"]);
    let pod = o.single_pod();
    assert_eq!(container_status(&pod, "render")["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    let waiting = &container_status(&pod, "app")["state"]["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError", "{}", o.context());
    let message = waiting["message"].as_str().unwrap_or_default();
    let file = test_root().join("pods").join(uid(&pod)).join("volumes/kubernetes.io~empty-dir/config/app.env");
    assert_eq!(
        message,
        format!("environment variable key \"DB_HOST\" not found in file {:?}", file),
        "{}",
        o.context()
    );
    let failed = o.events_with_reason(&name, "spec.containers{app}", "Failed");
    assert!(failed.iter().any(|e| e["message"] == format!("Error: {message}")), "{}", o.context());
}

#[test]
fn a_hostname_override_is_the_containers_host_name_and_hosts_entry() {
    let name = pod_name("hostname-override");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  hostname: db
  subdomain: cluster
  hostnameOverride: app.example.test
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'hostname; grep app.example.test /etc/hosts']
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    // The pod's IP, then the override alone: no FQDN from `hostname` and `subdomain`.
    let out = o.output_of("app");
    let entry = out.get(1).and_then(|l| l.split_once('\t'));
    assert_eq!(out.first().map(String::as_str), Some("app.example.test"), "{}", o.context());
    assert!(
        entry.is_some_and(|(ip, names)| ip.parse::<std::net::IpAddr>().is_ok() && names == "app.example.test"),
        "{}",
        o.context()
    );

    // With setHostnameAsFQDN the pod is refused, as the API server refuses it.
    let o = run_manifest(&manifest.replace("  hostname: db\n", "  setHostnameAsFQDN: true\n"), &[]);
    o.assert_code(2);
    assert!(
        o.context().contains(
            "spec.hostnameOverride: Invalid value: \"app.example.test\": may not be set when setHostnameAsFQDN is true"
        ),
        "{}",
        o.context()
    );
}
