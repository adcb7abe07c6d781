//! `--log-format json` and `-v N`: log lines as JSON objects, each from a pod's worker naming
//! the pod; the default verbosity keeps what the node does out of the log.

use podwright_e2e::*;
use serde_json::Value;

/// A pod the node refuses at admission, which its worker logs at info.
fn refused_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  securityContext:
    sysctls:
    - {{name: kernel.msgmax, value: "65536"}}
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ["true"]
"#
    )
}

#[test]
fn json_log_lines_name_their_pod_and_verbosity_decides_what_is_logged() {
    let name = pod_name("e2e-log-json");
    let o = run_manifest(&refused_pod(&name), &["--log-format", "json", "-v", "2"]);
    o.assert_code(1);
    // The progress table shares stderr: the log lines are the JSON objects among it.
    let lines: Vec<Value> = o.stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ended = lines.iter().find(|l| l["fields"]["message"] == "the node ends the pod");
    let ended = ended.unwrap_or_else(|| panic!("no log line of the pod's end:\n{}", o.context()));
    assert_eq!(ended["level"], "INFO");
    assert_eq!(ended["fields"]["reason"], "SysctlForbidden");
    assert_eq!(ended["span"]["pod"], format!("default/{name}").as_str());
    let uid = o.single_pod()["metadata"]["uid"].clone();
    assert_eq!(ended["span"]["uid"], uid);
    assert_nothing_left(&o.single_pod());

    let name = pod_name("e2e-log-quiet");
    let o = run_manifest(&refused_pod(&name), &[]);
    o.assert_code(1);
    assert!(!o.stderr.contains("the node ends the pod"), "{}", o.context());
}
