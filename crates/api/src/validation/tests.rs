use super::*;
use crate::defaults::apply_defaults;
use crate::manifest::parse_manifests;

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn parse(yaml: &str) -> Pod {
    parse_manifests("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}")).remove(0)
}

/// Parse, default and validate; the errors as strings.
fn errors_of(yaml: &str) -> Vec<String> {
    let mut pod = parse(yaml);
    apply_defaults(&mut pod);
    validate_pod(&pod).iter().map(|e| e.to_string()).collect()
}

/// A pod named `p` whose spec is `spec` (YAML lines indented by two spaces).
fn spec_pod(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n{spec}")
}

fn check(cases: &[(&str, String, Vec<String>)]) {
    let mut failures = Vec::new();
    for (name, yaml, want) in cases {
        let got = errors_of(yaml);
        if &got != want {
            failures.push(format!("case {name}:\n  got:  {got:#?}\n  want: {want:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn valid_pods() {
    let cases = vec![
        ("minimal", spec_pod("  containers: [{name: app, image: busybox}]\n"), vec![]),
        ("rich", crate::manifest::tests::RICH.to_string(), vec![]),
        (
            "init containers from the docs",
            "apiVersion: v1
kind: Pod
metadata:
  name: myapp-pod
  labels:
    app: myapp
spec:
  containers:
  - name: myapp-container
    image: busybox
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
  initContainers:
  - name: init-myservice
    image: busybox
    command: ['sh', '-c', 'until nslookup myservice; do echo waiting for myservice; sleep 2; done;']
  - name: init-mydb
    image: busybox
    command: ['sh', '-c', 'until nslookup mydb; do echo waiting for mydb; sleep 2; done;']
"
            .to_string(),
            vec![],
        ),
        (
            "sidecar with probes and hooks",
            spec_pod(
                "  initContainers:
  - name: side
    image: busybox
    restartPolicy: Always
    readinessProbe: {exec: {command: [cat, /ready]}, successThreshold: 3}
    livenessProbe: {tcpSocket: {port: 80}}
    startupProbe: {grpc: {port: 9000}}
    lifecycle: {preStop: {sleep: {seconds: 0}}, postStart: {httpGet: {port: http}}}
  containers: [{name: app, image: busybox}]
",
            ),
            vec![],
        ),
        (
            "sleep equal to grace period",
            spec_pod(
                "  terminationGracePeriodSeconds: 5
  containers: [{name: app, image: b, lifecycle: {preStop: {sleep: {seconds: 5}}}}]
",
            ),
            vec![],
        ),
        ("every restart policy", spec_pod("  restartPolicy: Never\n  containers: [{name: app, image: b}]\n"), vec![]),
        (
            "host port reused by separate init containers",
            spec_pod(
                "  initContainers:
  - {name: i1, image: b, ports: [{containerPort: 80, hostPort: 8080}]}
  - {name: i2, image: b, ports: [{containerPort: 80, hostPort: 8080}]}
  containers: [{name: app, image: b, ports: [{containerPort: 80, hostPort: 8080}]}]
",
            ),
            vec![],
        ),
    ];
    check(&cases);
}

#[test]
fn metadata_errors() {
    let cases = vec![
        (
            "missing name",
            "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: a, image: b}]}\n".to_string(),
            s(&["metadata.name: Required value: name or generateName is required"]),
        ),
        (
            "bad name",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: My_Pod}\nspec: {containers: [{name: a, image: b}]}\n".to_string(),
            vec![format!("metadata.name: Invalid value: \"My_Pod\": {SUBDOMAIN_MSG}")],
        ),
        (
            "dotted name is fine for pods",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: my.pod}\nspec: {containers: [{name: a, image: b}]}\n".to_string(),
            vec![],
        ),
        (
            "bad namespace",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: Bad_NS}\nspec: {containers: [{name: a, image: b}]}\n".to_string(),
            vec![format!("metadata.namespace: Invalid value: \"Bad_NS\": {LABEL_MSG}")],
        ),
        (
            "bad generateName",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, generateName: Gen-}\nspec: {containers: [{name: a, image: b}]}\n".to_string(),
            vec![format!("metadata.generateName: Invalid value: \"Gen-\": {SUBDOMAIN_MSG}")],
        ),
    ];
    check(&cases);
}

#[test]
fn label_and_annotation_keys_values_and_sizes() {
    const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let meta = |m: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, {m}}}\nspec: {{containers: [{{name: a, image: b}}]}}\n"
        )
    };
    let long = "x".repeat(64);
    let cases = vec![
        (
            "good labels and annotations",
            meta("labels: {app: web, example.com/Tier: '', a.b_c-D: '1.0'}, annotations: {Example.COM/Note: 'anything at all'}"),
            vec![],
        ),
        (
            "bad label key and value",
            meta("labels: {-app: 'no good', 'a/b/c': x}"),
            vec![
                format!("metadata.labels: Invalid value: \"-app\": {NAME_PART}"),
                format!("metadata.labels: Invalid value: \"no good\": {VALUE}"),
                "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string(),
            ],
        ),
        (
            "label key prefix and lengths",
            meta(&format!("labels: {{/a: x, Bad_Prefix/a: {long}, {long}: z}}")),
            vec![
                "metadata.labels: Invalid value: \"/a\": prefix part must be non-empty".to_string(),
                format!("metadata.labels: Invalid value: \"Bad_Prefix/a\": prefix part {SUBDOMAIN_MSG}"),
                format!("metadata.labels: Invalid value: \"{long}\": must be no more than 63 characters"),
                format!("metadata.labels: Invalid value: \"{long}\": name part must be no more than 63 characters"),
            ],
        ),
        ("annotation key", meta("annotations: {'a b': x}"), vec![format!("metadata.annotations: Invalid value: \"a b\": {NAME_PART}")]),
        (
            "annotations of 256 KiB are the most",
            meta(&format!("annotations: {{a: {}}}", "x".repeat(256 * 1024 - 1))),
            vec![],
        ),
        (
            "annotations over 256 KiB",
            meta(&format!("annotations: {{a: {}, b: ''}}", "x".repeat(256 * 1024 - 1))),
            s(&["metadata.annotations: Too long: must have at most 262144 bytes"]),
        ),
    ];
    check(&cases);
}

#[test]
fn container_names_and_images() {
    let cases = vec![
        ("no containers", spec_pod("  containers: []\n"), s(&["spec.containers: Required value"])),
        (
            "no spec at all",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n".to_string(),
            s(&["spec.containers: Required value"]),
        ),
        (
            "missing name",
            spec_pod("  containers: [{image: busybox}]\n"),
            s(&["spec.containers[0].name: Required value"]),
        ),
        (
            "invalid name",
            spec_pod("  containers: [{name: My_App, image: busybox}]\n"),
            vec![format!("spec.containers[0].name: Invalid value: \"My_App\": {LABEL_MSG}")],
        ),
        (
            "dotted name",
            spec_pod("  containers: [{name: a.b, image: busybox}]\n"),
            s(&["spec.containers[0].name: Invalid value: \"a.b\": must not contain dots"]),
        ),
        (
            "too long name",
            spec_pod(&format!("  containers: [{{name: {}, image: b}}]\n", "a".repeat(64))),
            vec![format!(
                "spec.containers[0].name: Invalid value: \"{}\": must be no more than 63 characters",
                "a".repeat(64)
            )],
        ),
        (
            "duplicate app containers",
            spec_pod("  containers: [{name: a, image: b}, {name: a, image: b}]\n"),
            s(&["spec.containers[1].name: Duplicate value: \"a\""]),
        ),
        (
            "init clashes with app: reported on the init path",
            spec_pod("  initContainers: [{name: a, image: b}]\n  containers: [{name: a, image: b}]\n"),
            s(&["spec.initContainers[0].name: Duplicate value: \"a\""]),
        ),
        (
            "duplicate init containers",
            spec_pod(
                "  initContainers: [{name: i, image: b}, {name: i, image: b}]\n  containers: [{name: a, image: b}]\n",
            ),
            s(&["spec.initContainers[1].name: Duplicate value: \"i\""]),
        ),
        (
            "missing image",
            spec_pod("  initContainers: [{name: i}]\n  containers: [{name: a}]\n"),
            s(&["spec.containers[0].image: Required value", "spec.initContainers[0].image: Required value"]),
        ),
        (
            "image with surrounding whitespace",
            spec_pod("  containers: [{name: a, image: ' busybox'}]\n"),
            s(&["spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace"]),
        ),
    ];
    check(&cases);
}

#[test]
fn init_container_rules() {
    const F: &str = "Forbidden: may not be set for init containers without restartPolicy=Always";
    let cases = vec![
        (
            "probes and lifecycle on a regular init container",
            spec_pod(
                "  initContainers:
  - name: i
    image: b
    readinessProbe: {exec: {command: [x]}}
    livenessProbe: {exec: {command: [x]}}
    startupProbe: {exec: {command: [x]}}
    lifecycle: {preStop: {exec: {command: [x]}}}
  containers: [{name: a, image: b}]
",
            ),
            vec![
                format!("spec.initContainers[0].lifecycle: {F}"),
                format!("spec.initContainers[0].livenessProbe: {F}"),
                format!("spec.initContainers[0].readinessProbe: {F}"),
                format!("spec.initContainers[0].startupProbe: {F}"),
            ],
        ),
        (
            "readinessProbe alone",
            spec_pod(
                "  initContainers: [{name: i, image: b, readinessProbe: {httpGet: {port: 80}}}]\n  containers: [{name: a, image: b}]\n",
            ),
            vec![format!("spec.initContainers[0].readinessProbe: {F}")],
        ),
        (
            // 1.37: an init container with restartPolicy Never is a regular one that overrides
            // the pod's policy, so its probes are refused as for any regular init container.
            "init restartPolicy Never is a regular init container",
            spec_pod(
                "  initContainers: [{name: i, image: b, restartPolicy: Never, startupProbe: {exec: {command: [x]}}}]\n  containers: [{name: a, image: b}]\n",
            ),
            vec![format!("spec.initContainers[0].startupProbe: {F}")],
        ),
        (
            "init restartPolicy of no known value",
            spec_pod("  initContainers: [{name: i, image: b, restartPolicy: Sometimes}]\n  containers: [{name: a, image: b}]\n"),
            s(&[
                "spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]),
        ),
        (
            "restartPolicy on an app container overrides the pod's",
            spec_pod("  containers: [{name: a, image: b, restartPolicy: Always}, {name: c, image: b, restartPolicy: Never}]\n"),
            vec![],
        ),
        (
            "restart rules on app and init containers",
            spec_pod(
                "  initContainers:
  - {name: i, image: b, restartPolicy: OnFailure, restartPolicyRules: [{action: Restart, exitCodes: {operator: NotIn, values: [1]}}]}
  containers:
  - {name: a, image: b, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}, {action: RestartAllContainers, exitCodes: {operator: In, values: [88]}}]}
",
            ),
            vec![],
        ),
        (
            "restart rules without a container restartPolicy",
            spec_pod(
                "  containers: [{name: a, image: b, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]\n",
            ),
            s(&["spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"]),
        ),
        (
            "restart rules with unknown words or no exit codes",
            spec_pod(
                "  containers:
  - name: a
    image: b
    restartPolicy: Never
    restartPolicyRules:
    - {action: Stop, exitCodes: {operator: Above, values: [1]}}
    - {action: Restart}
",
            ),
            s(&[
                "spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"Stop\": supported values: \"Restart\", \"RestartAllContainers\"",
                "spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: \"Above\": supported values: \"In\", \"NotIn\"",
                "spec.containers[0].restartPolicyRules[1].exitCodes: Required value: must be specified",
            ]),
        ),
        (
            "a sidecar's rules may only restart every container",
            spec_pod(
                "  initContainers:
  - name: side
    image: b
    restartPolicy: Always
    restartPolicyRules:
    - {action: RestartAllContainers, exitCodes: {operator: In, values: [88]}}
    - {action: Restart, exitCodes: {operator: In, values: [1]}}
  containers: [{name: a, image: b}]
",
            ),
            s(&[
                "spec.initContainers[0].restartPolicyRules[1].action: Unsupported value: \"Restart\": supported values: \"RestartAllContainers\"",
            ]),
        ),
        (
            "sidecar probes are validated like app probes",
            spec_pod(
                "  initContainers:
  - name: side
    image: b
    restartPolicy: Always
    livenessProbe: {exec: {command: [x]}, successThreshold: 2}
    readinessProbe: {exec: {command: [x]}, terminationGracePeriodSeconds: 3}
    lifecycle: {preStop: {}}
  containers: [{name: a, image: b}]
",
            ),
            s(&[
                "spec.initContainers[0].lifecycle.preStop: Required value: must specify a handler type",
                "spec.initContainers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.initContainers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 3: must not be set for readinessProbes",
            ]),
        ),
        (
            "errors of one init container come in upstream order",
            spec_pod(
                "  initContainers:
  - name: a
    restartPolicy: Sometimes
    readinessProbe: {exec: {command: [x]}}
  containers: [{name: a, image: b}]
",
            ),
            vec![
                "spec.initContainers[0].image: Required value".to_string(),
                "spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
                    .to_string(),
                "spec.initContainers[0].name: Duplicate value: \"a\"".to_string(),
                format!("spec.initContainers[0].readinessProbe: {F}"),
            ],
        ),
    ];
    check(&cases);
}

#[test]
fn pod_level_fields() {
    let c = "  containers: [{name: a, image: b}]\n";
    let cases = vec![
        (
            "unsupported restartPolicy",
            spec_pod(&format!("  restartPolicy: Sometimes\n{c}")),
            s(&[
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]),
        ),
        (
            "activeDeadlineSeconds zero",
            spec_pod(&format!("  activeDeadlineSeconds: 0\n{c}")),
            s(&["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"]),
        ),
        (
            "activeDeadlineSeconds too large",
            spec_pod(&format!("  activeDeadlineSeconds: 2147483648\n{c}")),
            s(&["spec.activeDeadlineSeconds: Invalid value: 2147483648: must be between 1 and 2147483647, inclusive"]),
        ),
        (
            "activeDeadlineSeconds bounds are inclusive",
            spec_pod(&format!("  activeDeadlineSeconds: 2147483647\n{c}")),
            vec![],
        ),
        (
            "negative grace period",
            spec_pod(&format!("  terminationGracePeriodSeconds: -1\n{c}")),
            s(&["spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"]),
        ),
        (
            "unsupported dnsPolicy",
            spec_pod(&format!("  dnsPolicy: Google\n{c}")),
            s(&[
                "spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
            ]),
        ),
        (
            "dnsPolicy None needs dnsConfig",
            spec_pod(&format!("  dnsPolicy: None\n{c}")),
            s(&["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]),
        ),
        (
            "bad hostname",
            spec_pod(&format!("  hostname: My_Host\n{c}")),
            vec![format!("spec.hostname: Invalid value: \"My_Host\": {LABEL_MSG}")],
        ),
        (
            "ephemeral containers on create",
            spec_pod(&format!("  ephemeralContainers: [{{name: dbg, image: b}}]\n{c}")),
            s(&["spec.ephemeralContainers: Forbidden: cannot be set on create"]),
        ),
    ];
    check(&cases);
}

#[test]
fn dns_config_and_host_aliases() {
    let c = "  containers: [{name: a, image: b}]\n";
    let ip_msg = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    let search_msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let numbered = |n: usize| (1..=n).map(|i| format!("d{i}.example")).collect::<Vec<_>>();
    let quoted = |v: &[String]| v.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(", ");
    let long: Vec<String> = (0..9).map(|i| format!("{i}{}", "a".repeat(226))).collect();
    let cases = vec![
        ("empty dnsConfig", spec_pod(&format!("  dnsConfig: {{}}\n{c}")), vec![]),
        (
            "None with a nameserver, searches and options",
            spec_pod(&format!(
                "  dnsPolicy: None\n  dnsConfig: {{nameservers: [1.2.3.4, \"2001:db8::1\", 010.000.000.001], searches: [custom.search., ., _sip._tcp.my_host.example], options: [{{name: ndots, value: \"3\"}}, {{name: edns0}}]}}\n{c}"
            )),
            vec![],
        ),
        (
            "32 search paths",
            spec_pod(&format!("  dnsConfig: {{searches: [{}]}}\n{c}", numbered(32).join(", "))),
            vec![],
        ),
        (
            "None without nameservers",
            spec_pod(&format!("  dnsPolicy: None\n  dnsConfig: {{searches: [a.example, \"bad?\"]}}\n{c}")),
            s(&["spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"]),
        ),
        (
            "four nameservers, one of them no IP",
            spec_pod(&format!("  dnsConfig: {{nameservers: [1.1.1.1, 1.0.0.1, 8.8.8.8, dns.example]}}\n{c}")),
            vec![
                "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \"1.0.0.1\", \"8.8.8.8\", \"dns.example\"}: must not have more than 3 nameservers".to_string(),
                format!("spec.dnsConfig.nameservers[3]: Invalid value: \"dns.example\": {ip_msg}"),
            ],
        ),
        (
            "33 search paths",
            spec_pod(&format!("  dnsConfig: {{searches: [{}]}}\n{c}", numbered(33).join(", "))),
            vec![format!(
                "spec.dnsConfig.searches: Invalid value: []string{{{}}}: must not have more than 32 search paths",
                quoted(&numbered(33))
            )],
        ),
        (
            "a search line over 2048 characters",
            spec_pod(&format!("  dnsConfig: {{searches: [{}]}}\n{c}", long.join(", "))),
            vec![format!(
                "spec.dnsConfig.searches: Invalid value: []string{{{}}}: must not have more than 2048 characters (including spaces) in the search list",
                quoted(&long)
            )],
        ),
        (
            "bad search domains, shown without their trailing dot, and an option without a name",
            spec_pod(&format!("  dnsConfig: {{searches: [\"Upper.example.\", \"a..b\"], options: [{{value: \"1\"}}]}}\n{c}")),
            vec![
                format!("spec.dnsConfig.searches[0]: Invalid value: \"Upper.example\": {search_msg}"),
                format!("spec.dnsConfig.searches[1]: Invalid value: \"a..b\": {search_msg}"),
                "spec.dnsConfig.options[0]: Required value: must not be empty".to_string(),
            ],
        ),
        (
            "host aliases",
            spec_pod(&format!(
                "  hostAliases: [{{ip: 10.1.2.3, hostnames: [foo.local, bar]}}, {{ip: \"::1\", hostnames: [ip6.local]}}]\n{c}"
            )),
            vec![],
        ),
        (
            "bad host aliases after the hostname",
            spec_pod(&format!(
                "  hostname: My_Host\n  hostAliases: [{{ip: 10.1.2, hostnames: [ok.local, Bad_Name]}}, {{ip: \"\", hostnames: [a.]}}]\n{c}"
            )),
            vec![
                format!("spec.hostname: Invalid value: \"My_Host\": {LABEL_MSG}"),
                format!("spec.hostAliases[0].ip: Invalid value: \"10.1.2\": {ip_msg}"),
                format!("spec.hostAliases[0].hostnames[1]: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"),
                format!("spec.hostAliases[1].ip: Invalid value: \"\": {ip_msg}"),
                format!("spec.hostAliases[1].hostnames[0]: Invalid value: \"a.\": {SUBDOMAIN_MSG}"),
            ],
        ),
    ];
    check(&cases);
}

#[test]
fn container_fields() {
    let cases = vec![
        (
            "unsupported imagePullPolicy",
            spec_pod("  containers: [{name: a, image: b, imagePullPolicy: Sometimes}]\n"),
            s(&["spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""]),
        ),
        (
            "unsupported terminationMessagePolicy",
            spec_pod("  containers: [{name: a, image: b, terminationMessagePolicy: Log}]\n"),
            s(&["spec.containers[0].terminationMessagePolicy: Unsupported value: \"Log\": supported values: \"File\", \"FallbackToLogsOnError\""]),
        ),
        (
            "ports",
            spec_pod(
                "  containers:
  - name: a
    image: b
    ports:
    - {name: web, protocol: TCP}
    - {name: web, containerPort: 70000, hostPort: 70000}
    - {name: Web, containerPort: 81, protocol: ICMP}
",
            ),
            s(&[
                "spec.containers[0].ports[0].containerPort: Required value",
                "spec.containers[0].ports[1].name: Duplicate value: \"web\"",
                "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[2].name: Invalid value: \"Web\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].ports[2].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]),
        ),
        (
            "host port conflict between app containers",
            spec_pod(
                "  containers:
  - {name: a, image: b, ports: [{containerPort: 80, hostPort: 8080}]}
  - {name: c, image: b, ports: [{containerPort: 81, hostPort: 8080}, {containerPort: 82, hostPort: 8080, protocol: UDP}]}
",
            ),
            s(&["spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\""]),
        ),
        (
            "host port conflict inside one init container",
            spec_pod(
                "  initContainers:
  - {name: i0, image: b}
  - {name: i1, image: b, ports: [{containerPort: 80, hostPort: 9090}, {containerPort: 81, hostPort: 9090}]}
  containers: [{name: a, image: b}]
",
            ),
            // upstream checks each init container as a one-element list: index 0
            s(&["spec.initContainers[0].ports[1].hostPort: Duplicate value: \"TCP//9090\""]),
        ),
        (
            "on the host's network a container port is its host port",
            spec_pod(
                "  hostNetwork: true
  initContainers: [{name: i, image: b, ports: [{containerPort: 80, hostPort: 8081}]}]
  containers:
  - {name: a, image: b, ports: [{containerPort: 80}, {containerPort: 81, hostPort: 81}, {containerPort: 82, hostPort: 8082}]}
",
            ),
            // The left-out hostPort defaults to the containerPort; init containers are not checked.
            s(&["spec.containers[0].ports[2].containerPort: Invalid value: 82: must match `hostPort` when `hostNetwork` is true"]),
        ),
        (
            "env names",
            spec_pod(
                "  containers:
  - name: a
    image: b
    env: [{name: A=B, value: x}, {name: '', value: yv}, {name: 1-ok.too, value: z}]
",
            ),
            s(&[
                "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                "spec.containers[0].env[1].name: Required value",
            ]),
        ),
        (
            "env valueFrom",
            spec_pod(
                "  containers:
  - name: a
    image: b
    env:
    - {name: A, valueFrom: {}}
    - {name: B, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: C, valueFrom: {fieldRef: {fieldPath: status.phase}}}
    - {name: D, valueFrom: {fieldRef: {fieldPath: spec.bogus}}}
    - {name: E, valueFrom: {fieldRef: {fieldPath: metadata.name}, secretKeyRef: {name: s, key: k}}}
    - {name: F, valueFrom: {resourceFieldRef: {resource: limits.gpu}}}
    - {name: G, valueFrom: {configMapKeyRef: {name: cm, key: ''}}}
    - {name: H, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}
",
            ),
            s(&[
                "spec.containers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Unsupported value: \"status.phase\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"",
                "spec.containers[0].env[3].valueFrom.fieldRef.fieldPath: Invalid value: \"spec.bogus\": error converting fieldPath: field label not supported: spec.bogus",
                "spec.containers[0].env[4].valueFrom: Invalid value: \"\": may not have more than one field specified at a time",
                "spec.containers[0].env[5].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.gpu\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\"",
                "spec.containers[0].env[6].valueFrom.configMapKeyRef.key: Required value",
            ]),
        ),
        (
            "envFrom",
            spec_pod(
                "  containers:
  - name: a
    image: b
    envFrom: [{prefix: P_}, {configMapRef: {name: cm}, secretRef: {name: s}}, {secretRef: {name: ''}}]
",
            ),
            s(&[
                "spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`",
                "spec.containers[0].envFrom: Invalid value: \"\": may not have more than one field specified at a time",
                "spec.containers[0].envFrom[2].secretRef.name: Required value",
            ]),
        ),
    ];
    check(&cases);
}

#[test]
fn probes_and_hooks() {
    let cases = vec![
        (
            "probe without handler",
            spec_pod("  containers: [{name: a, image: b, livenessProbe: {periodSeconds: 5}}]\n"),
            s(&["spec.containers[0].livenessProbe: Required value: must specify a handler type"]),
        ),
        (
            "probe with two handlers",
            spec_pod(
                "  containers: [{name: a, image: b, readinessProbe: {exec: {command: [x]}, tcpSocket: {port: 80}, grpc: {port: 90}}}]\n",
            ),
            s(&[
                "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].readinessProbe.grpc: Forbidden: may not specify more than 1 handler type",
            ]),
        ),
        (
            "negative probe numbers",
            spec_pod(
                "  containers:
  - name: a
    image: b
    livenessProbe: {exec: {command: [x]}, initialDelaySeconds: -1, timeoutSeconds: -2, periodSeconds: -3, failureThreshold: -4}
",
            ),
            s(&[
                "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.timeoutSeconds: Invalid value: -2: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -3: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.failureThreshold: Invalid value: -4: must be greater than or equal to 0",
            ]),
        ),
        (
            "liveness and startup successThreshold must be 1, readiness may be more",
            spec_pod(
                "  containers:
  - name: a
    image: b
    livenessProbe: {exec: {command: [x]}, successThreshold: 2}
    startupProbe: {exec: {command: [x]}, successThreshold: 3}
    readinessProbe: {exec: {command: [x]}, successThreshold: 4}
",
            ),
            s(&[
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1",
            ]),
        ),
        (
            "probe-level grace periods",
            spec_pod(
                "  containers:
  - name: a
    image: b
    livenessProbe: {exec: {command: [x]}, terminationGracePeriodSeconds: 0}
    readinessProbe: {exec: {command: [x]}, terminationGracePeriodSeconds: 5}
",
            ),
            s(&[
                "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
            ]),
        ),
        (
            "handler details",
            spec_pod(
                "  containers:
  - name: a
    image: b
    livenessProbe: {exec: {command: []}}
    readinessProbe: {httpGet: {port: 0, scheme: FTP, httpHeaders: [{name: 'X Bad', value: v}]}}
    startupProbe: {tcpSocket: {port: HTTP}}
",
            ),
            s(&[
                "spec.containers[0].livenessProbe.exec.command: Required value",
                "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
                "spec.containers[0].readinessProbe.httpGet.httpHeaders: Invalid value: \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
                "spec.containers[0].startupProbe.tcpSocket.port: Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].startupProbe.tcpSocket.port: Invalid value: \"HTTP\": must contain at least one letter (a-z)",
            ]),
        ),
        (
            "lifecycle handlers",
            spec_pod(
                "  containers:
  - name: a
    image: b
    lifecycle:
      postStart: {exec: {command: [x]}, sleep: {seconds: 1}}
      preStop: {}
",
            ),
            s(&[
                "spec.containers[0].lifecycle.postStart.sleep: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].lifecycle.preStop: Required value: must specify a handler type",
            ]),
        ),
        (
            "sleep longer than the grace period",
            spec_pod("  containers: [{name: a, image: b, lifecycle: {preStop: {sleep: {seconds: 31}}}}]\n"),
            s(&["spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)"]),
        ),
        (
            "negative sleep",
            spec_pod(
                "  terminationGracePeriodSeconds: 10\n  containers: [{name: a, image: b, lifecycle: {postStart: {sleep: {seconds: -1}}}}]\n",
            ),
            s(&["spec.containers[0].lifecycle.postStart.sleep: Invalid value: -1: must be non-negative and less than terminationGracePeriodSeconds (10)"]),
        ),
    ];
    check(&cases);
}

#[test]
fn volumes_and_mounts() {
    let cases = vec![
        (
            "mount of an unknown volume",
            spec_pod("  containers: [{name: a, image: b, volumeMounts: [{name: nope, mountPath: /x}]}]\n"),
            s(&["spec.containers[0].volumeMounts[0].name: Not found: \"nope\""]),
        ),
        (
            "mount of an init container",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}]\n  initContainers: [{name: i, image: b, volumeMounts: [{name: w, mountPath: /w}]}]\n  containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /v}]}]\n",
            ),
            s(&["spec.initContainers[0].volumeMounts[0].name: Not found: \"w\""]),
        ),
        (
            "duplicate volume names",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}, {name: v, hostPath: {path: /tmp}}]\n  containers: [{name: a, image: b}]\n",
            ),
            s(&["spec.volumes[1].name: Duplicate value: \"v\""]),
        ),
        (
            "volume with two sources (and mounts of it are not found)",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}, configMap: {name: c}}]\n  containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /v}]}]\n",
            ),
            s(&[
                "spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type",
                "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
            ]),
        ),
        (
            "bad volume names and sources",
            spec_pod(
                "  volumes:
  - {name: Bad_Name, emptyDir: {}}
  - {name: h, hostPath: {path: ''}}
  - {name: s, secret: {defaultMode: 1000}}
  - {name: c, configMap: {name: '', items: [{key: '', path: /abs}]}}
  - {name: p, persistentVolumeClaim: {claimName: ''}}
  containers: [{name: a, image: b}]
",
            ),
            vec![
                format!("spec.volumes[0].name: Invalid value: \"Bad_Name\": {LABEL_MSG}"),
                "spec.volumes[1].hostPath.path: Required value".to_string(),
                "spec.volumes[2].secret.secretName: Required value".to_string(),
                "spec.volumes[2].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive".to_string(),
                "spec.volumes[3].configMap.name: Required value".to_string(),
                "spec.volumes[3].configMap.items[0].key: Required value".to_string(),
                "spec.volumes[3].configMap.items[0].path: Invalid value: \"/abs\": must be a relative path".to_string(),
                "spec.volumes[4].persistentVolumeClaim.claimName: Required value".to_string(),
            ],
        ),
        (
            "mount details",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: a
    image: b
    volumeMounts:
    - {name: v, mountPath: /data, subPath: ../up}
    - {name: v, mountPath: /data}
    - {name: v, mountPath: '', subPath: x, subPathExpr: yy}
",
            ),
            s(&[
                "spec.containers[0].volumeMounts.subPath: Invalid value: \"../up\": must not contain '..'",
                "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique",
                "spec.containers[0].volumeMounts[2].mountPath: Required value",
                "spec.containers[0].volumeMounts[2].subPathExpr: Invalid value: \"yy\": subPathExpr and subPath are mutually exclusive",
            ]),
        ),
        (
            "mount propagation",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: a
    image: b
    volumeMounts:
    - {name: v, mountPath: /a, mountPropagation: HostToContainer}
    - {name: v, mountPath: /b, mountPropagation: Bidirectional}
    - {name: v, mountPath: /c, mountPropagation: Sideways}
  - name: p
    image: b
    securityContext: {privileged: true}
    volumeMounts: [{name: v, mountPath: /a, mountPropagation: Bidirectional}]
",
            ),
            s(&[
                "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
                "spec.containers[0].volumeMounts.mountPropagation: Unsupported value: \"Sideways\": supported values: \"Bidirectional\", \"HostToContainer\", \"None\"",
            ]),
        ),
        (
            "recursive read-only mounts",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: a
    image: b
    volumeMounts:
    - {name: v, mountPath: /a, readOnly: true, recursiveReadOnly: IfPossible}
    - {name: v, mountPath: /b, recursiveReadOnly: Enabled}
    - {name: v, mountPath: /c, readOnly: true, recursiveReadOnly: Enabled, mountPropagation: HostToContainer}
    - {name: v, mountPath: /d, recursiveReadOnly: Sometimes}
    - {name: v, mountPath: /e, recursiveReadOnly: Disabled, mountPropagation: None}
",
            ),
            s(&[
                "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true",
                "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified",
                "spec.containers[0].volumeMounts.recursiveReadOnly: Unsupported value: \"Sometimes\": supported values: \"Disabled\", \"Enabled\", \"IfPossible\"",
            ]),
        ),
        (
            "volume devices need a claim",
            spec_pod(
                "  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: a, image: b, volumeDevices: [{name: v, devicePath: /dev/x}, {name: w, devicePath: /dev/y}]}]\n",
            ),
            s(&[
                "spec.containers[0].volumeDevices[0].name: Invalid value: \"v\": can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
                "spec.containers[0].volumeDevices[1].name: Not found: \"w\"",
            ]),
        ),
    ];
    check(&cases);
}

#[test]
fn volume_without_source_before_defaulting() {
    let mut pod = parse(&spec_pod("  volumes: [{name: v}]\n  containers: [{name: a, image: b}]\n"));
    let spec = pod.spec.as_mut().expect("spec");
    crate::defaults::default_container(&mut spec.containers[0]);
    spec.restart_policy = Some("Always".into());
    spec.dns_policy = Some("ClusterFirst".into());
    spec.termination_grace_period_seconds = Some(30);
    pod.metadata.namespace = Some("default".into());
    let got: Vec<String> = validate_pod(&pod).iter().map(|e| e.to_string()).collect();
    assert_eq!(got, ["spec.volumes[0]: Required value: must specify a volume type"]);
    // After defaulting it is an emptyDir.
    apply_defaults(&mut pod);
    assert!(validate_pod(&pod).is_empty());
}

#[test]
fn undefaulted_pod_reports_required_fields() {
    let pod = parse(&spec_pod("  containers: [{name: a, image: b, ports: [{containerPort: 80}]}]\n"));
    let got: Vec<String> = validate_pod(&pod).iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        [
            "metadata.namespace: Required value",
            "spec.terminationGracePeriodSeconds: Required value",
            "spec.containers[0].terminationMessagePolicy: Required value",
            "spec.containers[0].ports[0].protocol: Required value",
            "spec.containers[0].imagePullPolicy: Required value",
            "spec.restartPolicy: Required value",
            "spec.dnsPolicy: Required value",
        ]
    );
}

#[test]
fn many_errors_in_order_and_invalid_pod_message() {
    let yaml = spec_pod(
        "  restartPolicy: Sometimes
  activeDeadlineSeconds: 0
  initContainers: [{name: app, image: b, readinessProbe: {exec: {command: [x]}}}]
  containers: [{name: app}]
",
    );
    let mut pod = parse(&yaml);
    apply_defaults(&mut pod);
    let err = check_pod(&pod).expect_err("invalid");
    assert_eq!(
        err.to_string(),
        "The Pod \"p\" is invalid: \n\
         * spec.containers[0].image: Required value\n\
         * spec.initContainers[0].name: Duplicate value: \"app\"\n\
         * spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always\n\
         * spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"\n\
         * spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"
    );

    let mut one = parse(&spec_pod("  containers: []\n"));
    one.metadata.name = Some("myapp-pod".into());
    apply_defaults(&mut one);
    assert_eq!(
        check_pod(&one).expect_err("invalid").to_string(),
        "The Pod \"myapp-pod\" is invalid: spec.containers: Required value"
    );
    let mut ok = parse(&spec_pod("  containers: [{name: a, image: b}]\n"));
    apply_defaults(&mut ok);
    assert!(check_pod(&ok).is_ok());
}

#[test]
fn security_contexts() {
    check(&[
        (
            "ids out of range, a shared process namespace with the host's",
            spec_pod(
                "  hostPID: true
  shareProcessNamespace: true
  securityContext: {runAsUser: -1, runAsGroup: 2147483648, supplementalGroups: [1, -2], fsGroup: -3}
  containers:
  - name: a
    image: b
    securityContext: {runAsUser: -4, runAsGroup: 5, procMount: Masked}
",
            ),
            s(&[
                "spec.containers[0].securityContext.runAsUser: Invalid value: -4: must be between 0 and 2147483647, inclusive",
                "spec.containers[0].securityContext.procMount: Unsupported value: \"Masked\": supported values: \"Default\", \"Unmasked\"",
                "spec.securityContext.fsGroup: Invalid value: -3: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.runAsGroup: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
            ]),
        ),
        (
            "seccomp profiles",
            spec_pod(
                "  securityContext: {seccompProfile: {type: Localhost}}
  containers:
  - {name: a, image: b, securityContext: {seccompProfile: {type: Strict}}}
  - {name: c, image: b, securityContext: {seccompProfile: {type: Localhost, localhostProfile: ../up.json}}}
  - {name: d, image: b, securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/ok.json}}}
",
            ),
            s(&[
                "spec.containers[0].securityContext.seccompProfile.type: Unsupported value: \"Strict\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
                "spec.containers[1].securityContext.seccompProfile.localhostProfile: Invalid value: \"../up.json\": must not contain '..'",
                "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost",
            ]),
        ),
        (
            "sysctls, the fsGroup change policy",
            spec_pod(
                r#"  hostIPC: true
  securityContext:
    fsGroupChangePolicy: Sometimes
    sysctls:
    - {name: kernel.shm_rmid_forced, value: "1"}
    - {name: "", value: "1"}
    - {name: Net.Core, value: "1"}
    - {name: net/ipv4/ip_local_port_range, value: "1024 2048"}
    - {name: net/ipv4/ip_local_port_range, value: "1024 2048"}
    - {name: kernel/msgmax, value: "1"}
  containers: [{name: a, image: b}]
"#,
            ),
            s(&[
                "spec.securityContext.sysctls[0].name: Invalid value: \"kernel.shm_rmid_forced\": may not be specified when 'hostIPC' is true",
                "spec.securityContext.sysctls[1].name: Required value",
                "spec.securityContext.sysctls[2].name: Invalid value: \"Net.Core\": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
                "spec.securityContext.sysctls[4].name: Duplicate value: \"net/ipv4/ip_local_port_range\"",
                "spec.securityContext.sysctls[5].name: Invalid value: \"kernel/msgmax\": may not be specified when 'hostIPC' is true",
                "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
            ]),
        ),
        (
            "a net sysctl with the host's network",
            spec_pod(
                r#"  hostNetwork: true
  securityContext: {sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 2048"}]}
  containers: [{name: a, image: b}]
"#,
            ),
            s(&[
                "spec.securityContext.sysctls[0].name: Invalid value: \"net.ipv4.ip_local_port_range\": may not be specified when 'hostNetwork' is true",
            ]),
        ),
        (
            "an unmasked /proc in the host's user namespace",
            spec_pod(
                "  initContainers: [{name: i, image: b, securityContext: {procMount: Unmasked}}]
  containers: [{name: a, image: b, securityContext: {procMount: Unmasked}}]
",
            ),
            s(&[
                "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
                "spec.initContainers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
            ]),
        ),
    ]);
}

#[test]
fn file_key_refs_name_a_key_a_path_and_an_empty_dir_of_the_pod() {
    check(&[
        (
            "valid",
            spec_pod(
                "  volumes: [{name: config, emptyDir: {}}]
  containers:
  - name: a
    image: b
    env:
    - {name: A, valueFrom: {fileKeyRef: {volumeName: config, path: sub/app.env, key: DB.host, optional: true}}}
",
            ),
            vec![],
        ),
        (
            "fields and volumes",
            spec_pod(
                "  volumes: [{name: host, hostPath: {path: /tmp}}]
  initContainers:
  - name: i
    image: b
    env:
    - {name: A, valueFrom: {fileKeyRef: {volumeName: nope, path: app.env, key: K}}}
  containers:
  - name: a
    image: b
    env:
    - {name: A, valueFrom: {fileKeyRef: {volumeName: '', path: '', key: ''}}}
    - {name: B, valueFrom: {fileKeyRef: {volumeName: Bad_Name, path: /abs/../x, key: 'A=B'}}}
    - {name: C, valueFrom: {fileKeyRef: {volumeName: host, path: app.env, key: K}}}
    - {name: D, value: x, valueFrom: {fileKeyRef: {volumeName: host, path: app.env, key: K}}}
",
            ),
            s(&[
                "spec.containers[0].env[0].valueFrom.fileKeyRef.key: Required value",
                "spec.containers[0].env[0].valueFrom.fileKeyRef.path: Required value",
                "spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Required value",
                "spec.containers[0].env[1].valueFrom.fileKeyRef.key: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                "spec.containers[0].env[1].valueFrom.fileKeyRef.path: Invalid value: \"/abs/../x\": must be a relative path",
                "spec.containers[0].env[1].valueFrom.fileKeyRef.path: Invalid value: \"/abs/../x\": must not contain '..'",
                "spec.containers[0].env[1].valueFrom.fileKeyRef.volumeName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.containers[0].env[3].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "spec.initContainers[0].env[0].valueFrom.fileKeyRef.volumeName: Not found: \"nope\"",
                "spec.containers[0].env[1].valueFrom.fileKeyRef.volumeName: Not found: \"Bad_Name\"",
                "spec.containers[0].env[2].valueFrom.fileKeyRef.volumeName: Invalid value: \"host\": referenced volume must be an emptyDir volume",
                "spec.containers[0].env[3].valueFrom.fileKeyRef.volumeName: Invalid value: \"host\": referenced volume must be an emptyDir volume",
            ]),
        ),
    ]);
}

#[test]
fn a_hostname_override_is_a_dns_subdomain_without_fqdn_or_host_network() {
    let long = format!("{}.com", "a".repeat(61));
    check(&[
        ("valid", spec_pod("  hostnameOverride: app.example.com\n  containers: [{name: a, image: b}]\n"), vec![]),
        (
            "invalid",
            spec_pod(&format!(
                "  hostnameOverride: {long}\n  subdomain: s\n  setHostnameAsFQDN: true\n  containers: [{{name: a, image: b}}]\n"
            )),
            vec![
                "spec.hostnameOverride: Too long: must have at most 64 bytes".to_string(),
                format!(
                    "spec.hostnameOverride: Invalid value: \"{long}\": may not be set when setHostnameAsFQDN is true"
                ),
            ],
        ),
        (
            "host network",
            spec_pod("  hostnameOverride: Not_A_Name\n  hostNetwork: true\n  containers: [{name: a, image: b}]\n"),
            s(&[
                "spec.hostnameOverride: Invalid value: \"Not_A_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.hostnameOverride: Invalid value: \"Not_A_Name\": may not be set when hostNetwork is true",
            ]),
        ),
    ]);
}

#[test]
fn an_image_volume_needs_a_reference_and_a_known_pull_policy() {
    let pod = |volume: &str| {
        spec_pod(&format!(
            "  volumes: [{volume}]\n  containers: [{{name: a, image: busybox, volumeMounts: [{{name: v, mountPath: /v}}]}}]\n"
        ))
    };
    check(&[
        ("a tagged reference, its policy defaulted", pod("{name: v, image: {reference: 'tools:1'}}"), vec![]),
        (
            "no reference",
            pod("{name: v, image: {pullPolicy: Never}}"),
            // As upstream, an invalid volume is not one a mount may name.
            s(&[
                "spec.volumes[0].image.reference: Required value",
                "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
            ]),
        ),
        (
            "an unknown policy",
            pod("{name: v, image: {reference: tools, pullPolicy: Sometimes}}"),
            s(&[
                "spec.volumes[0].image.pullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
                "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
            ]),
        ),
    ]);
}

/// A container's amounts as `ValidateContainerResourceRequirements` checks them: none negative,
/// no request above its limit (ephemeral storage like any other resource).
#[test]
fn resource_amounts() {
    let c = |resources: &str| {
        spec_pod(&format!("  containers:\n  - name: c\n    image: busybox\n    resources: {resources}\n"))
    };
    check(&[
        (
            "requests within limits",
            c("{requests: {ephemeral-storage: 64Mi}, limits: {ephemeral-storage: 1Gi, cpu: 1}}"),
            vec![],
        ),
        (
            "a request above its limit",
            c("{requests: {ephemeral-storage: 2Gi, memory: 2048Mi}, limits: {ephemeral-storage: 1Gi, memory: 1Gi}}"),
            s(&[
                "spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to ephemeral-storage limit of 1Gi",
                "spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
            ]),
        ),
        (
            // Defaulting copies the limit to the request: both are negative.
            "a negative limit",
            c("{limits: {ephemeral-storage: -1k}}"),
            s(&[
                "spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: \"-1k\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests[ephemeral-storage]: Invalid value: \"-1k\": must be greater than or equal to 0",
            ]),
        ),
    ]);
}

/// A defaulted pod with pod-level resources `resources` and one container without its own.
fn pod_level_pod(resources: &str) -> Pod {
    let spec = format!("  resources: {resources}\n  containers:\n  - name: app\n    image: busybox\n");
    let mut pod = parse(&spec_pod(&spec));
    apply_defaults(&mut pod);
    pod
}

/// The resize subresource's errors for `old` resized to `new`, the QoS class left out.
fn resize_errors(new: &Pod, old: &Pod) -> Vec<String> {
    let resized = resize_update(new, old);
    validate_pod_resize(&resized, old, |_| "Guaranteed").iter().map(|e| e.to_string()).collect()
}

#[test]
fn pod_level_resources_resize_through_the_subresource() {
    let old = pod_level_pod("{limits: {cpu: 500m, memory: 128Mi}}");
    let new = pod_level_pod("{limits: {cpu: 800m, memory: 160Mi}}");
    assert_eq!(resize_errors(&new, &old), Vec::<String>::new());
    assert_eq!(resize_update(&new, &old).spec.unwrap().resources, new.spec.clone().unwrap().resources);
    // A pod-level amount may not be removed, nor a resource other than cpu and memory added.
    let mut removed = new.clone();
    let r = removed.spec.as_mut().unwrap().resources.as_mut().unwrap();
    r.limits.as_mut().unwrap().remove("memory");
    r.requests.as_mut().unwrap().remove("memory");
    assert_eq!(
        resize_errors(&removed, &old),
        s(&[
            "spec.resources.requests[memory]: Forbidden: resource requests cannot be removed",
            "spec.resources.limits[memory]: Forbidden: resource limits cannot be removed",
        ])
    );
    let hugepages = pod_level_pod("{limits: {cpu: 500m, memory: 128Mi, hugepages-2Mi: 2Mi}}");
    assert_eq!(
        resize_errors(&hugepages, &old),
        s(&["spec.resources: Forbidden: only cpu and memory resources are mutable"])
    );
    // The pod's limits still hold every container's, as on create.
    let mut below = parse(&spec_pod(
        "  resources: {limits: {cpu: 500m, memory: 128Mi}}\n  containers:\n  - name: app\n    image: busybox\n    resources: {limits: {memory: 100Mi}}\n",
    ));
    apply_defaults(&mut below);
    let mut lowered = below.clone();
    lowered
        .spec
        .as_mut()
        .unwrap()
        .resources
        .as_mut()
        .unwrap()
        .limits
        .as_mut()
        .unwrap()
        .insert("memory".into(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("64Mi".into()));
    assert_eq!(
        resize_errors(&lowered, &below),
        s(&[
            "spec.resources.requests: Invalid value: \"100Mi\": must be less than or equal to memory limit of 64Mi",
            "spec.resources.containers[0][memory].limits: Invalid value: \"100Mi\": must be less than or equal to pod limits of 64Mi",
        ])
    );
}
