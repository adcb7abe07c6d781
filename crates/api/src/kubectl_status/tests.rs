use super::*;
use crate::manifest::parse_manifests;

const NOW: &str = "2024-05-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("timestamp")
}

/// `secs` seconds before NOW, as an RFC 3339 string.
fn ago(secs: i64) -> String {
    (now() - SignedDuration::from_secs(secs)).to_string()
}

/// A pod with the given init containers / containers (YAML flow lists) and
/// status (YAML lines indented by two spaces).
fn pod(init: &str, containers: &str, extra_meta: &str, status: &str) -> Pod {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  creationTimestamp: \"{}\"\n{extra_meta}spec:\n  initContainers: {init}\n  containers: {containers}\nstatus:\n{status}",
        ago(600)
    );
    parse_manifests("t.yaml", &yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}")).remove(0)
}

const TWO_INITS: &str = "[{name: init-myservice, image: busybox}, {name: init-mydb, image: busybox}]";
const SIDECAR_AND_INIT: &str = "[{name: side, image: b, restartPolicy: Always}, {name: init, image: b}]";
const ONE_APP: &str = "[{name: app, image: busybox}]";
const TWO_APPS: &str = "[{name: a, image: busybox}, {name: b, image: busybox}]";

struct Case {
    name: &'static str,
    pod: Pod,
    status: &'static str,
    ready: &'static str,
    restarts: String,
}

fn check(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let got = summarize(&c.pod, now());
        let want = (c.status, c.ready, c.restarts.as_str());
        if (got.status.as_str(), got.ready.as_str(), got.restarts.as_str()) != want {
            failures
                .push(format!("{}: got ({}, {}, {}), want {:?}", c.name, got.status, got.ready, got.restarts, want));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn case(name: &'static str, pod: Pod, status: &'static str, ready: &'static str, restarts: impl Into<String>) -> Case {
    Case { name, pod, status, ready, restarts: restarts.into() }
}

#[test]
fn init_container_columns() {
    let t12 = ago(12);
    check(vec![
        case(
            "Init:0/2 (first init running)",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {running: {startedAt: '2024-05-01T11:55:00Z'}}}
  - {name: init-mydb, state: {waiting: {reason: PodInitializing}}}
  containerStatuses:
  - {name: app, state: {waiting: {reason: PodInitializing}}}
",
            ),
            "Init:0/2",
            "0/1",
            "0",
        ),
        case(
            "Init:0/2 (no statuses yet is just Pending)",
            pod(TWO_INITS, ONE_APP, "", "  phase: Pending\n"),
            "Pending",
            "0/1",
            "0",
        ),
        case(
            "Init:1/2",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: init-mydb, state: {running: {}}}
",
            ),
            "Init:1/2",
            "0/1",
            "0",
        ),
        case(
            "Init:Error with restarts and age",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                &format!(
                    "  phase: Pending
  initContainerStatuses:
  - name: init-myservice
    restartCount: 3
    state: {{terminated: {{exitCode: 1, reason: Error}}}}
    lastState: {{terminated: {{exitCode: 1, reason: Error, finishedAt: '{t12}'}}}}
  - {{name: init-mydb, state: {{waiting: {{reason: PodInitializing}}}}}}
"
                ),
            ),
            "Init:Error",
            "0/1",
            "3 (12s ago)",
        ),
        case(
            "Init:ExitCode:N",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {terminated: {exitCode: 2}}}
",
            ),
            "Init:ExitCode:2",
            "0/1",
            "0",
        ),
        case(
            "Init:Signal:N",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {terminated: {exitCode: 137, signal: 9}}}
",
            ),
            "Init:Signal:9",
            "0/1",
            "0",
        ),
        case(
            "Init:OOMKilled",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: init-mydb, state: {terminated: {exitCode: 137, reason: OOMKilled}}}
",
            ),
            "Init:OOMKilled",
            "0/1",
            "0",
        ),
        case(
            "Init:CrashLoopBackOff",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, restartCount: 4, state: {waiting: {reason: CrashLoopBackOff}}}
",
            ),
            "Init:CrashLoopBackOff",
            "0/1",
            "4",
        ),
        case(
            "Init:ImagePullBackOff",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, state: {waiting: {reason: ImagePullBackOff}}}
",
            ),
            "Init:ImagePullBackOff",
            "0/1",
            "0",
        ),
        case(
            "PodInitializing",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: init-myservice, restartCount: 2, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: init-mydb, state: {terminated: {exitCode: 0, reason: Completed}}}
  containerStatuses:
  - {name: app, state: {waiting: {reason: PodInitializing}}}
",
            ),
            "PodInitializing",
            "0/1",
            // regular init restarts are dropped once initialized
            "0",
        ),
        case(
            "Running after init (docs example)",
            pod(
                TWO_INITS,
                ONE_APP,
                "",
                "  phase: Running
  conditions: [{type: Initialized, status: 'True'}, {type: Ready, status: 'True'}]
  initContainerStatuses:
  - {name: init-myservice, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: init-mydb, state: {terminated: {exitCode: 0, reason: Completed}}}
  containerStatuses:
  - {name: app, ready: true, started: true, state: {running: {}}}
",
            ),
            "Running",
            "1/1",
            "0",
        ),
    ]);
}

#[test]
fn app_container_columns() {
    let t184 = ago(184);
    check(vec![
        case(
            "ContainerCreating",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Pending\n  containerStatuses: [{name: app, state: {waiting: {reason: ContainerCreating}}}]\n",
            ),
            "ContainerCreating",
            "0/1",
            "0",
        ),
        case(
            "Running and ready",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Running\n  containerStatuses: [{name: app, ready: true, state: {running: {}}}]\n",
            ),
            "Running",
            "1/1",
            "0",
        ),
        case(
            "Running but not ready",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Running\n  containerStatuses: [{name: app, ready: false, state: {running: {}}}]\n",
            ),
            "Running",
            "0/1",
            "0",
        ),
        case(
            "CrashLoopBackOff with last restart age",
            pod(
                "[]",
                ONE_APP,
                "",
                &format!(
                    "  phase: Running
  containerStatuses:
  - name: app
    restartCount: 4
    state: {{waiting: {{reason: CrashLoopBackOff, message: back-off}}}}
    lastState: {{terminated: {{exitCode: 1, reason: Error, finishedAt: '{t184}'}}}}
"
                ),
            ),
            "CrashLoopBackOff",
            "0/1",
            "4 (3m4s ago)",
        ),
        case(
            "Error",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Failed\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 1, reason: Error}}}]\n",
            ),
            "Error",
            "0/1",
            "0",
        ),
        case(
            "Completed",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Succeeded\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 0, reason: Completed}}}]\n",
            ),
            "Completed",
            "0/1",
            "0",
        ),
        case(
            "ExitCode without reason",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Failed\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 3}}}]\n",
            ),
            "ExitCode:3",
            "0/1",
            "0",
        ),
        case(
            "Signal without reason",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Failed\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 143, signal: 15}}}]\n",
            ),
            "Signal:15",
            "0/1",
            "0",
        ),
        case(
            "Completed + running, Ready condition True",
            pod(
                "[]",
                TWO_APPS,
                "",
                "  phase: Running
  conditions: [{type: Ready, status: 'True'}]
  containerStatuses:
  - {name: a, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: b, ready: true, state: {running: {}}}
",
            ),
            "Running",
            "1/2",
            "0",
        ),
        case(
            "Completed + running, not Ready: NotReady",
            pod(
                "[]",
                TWO_APPS,
                "",
                "  phase: Running
  conditions: [{type: Ready, status: 'False'}]
  containerStatuses:
  - {name: a, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: b, ready: true, state: {running: {}}}
",
            ),
            "NotReady",
            "1/2",
            "0",
        ),
        case(
            "first container (by name) wins",
            pod(
                "[]",
                TWO_APPS,
                "",
                "  phase: Running
  containerStatuses:
  - {name: a, state: {waiting: {reason: ErrImagePull}}}
  - {name: b, state: {waiting: {reason: CrashLoopBackOff}}}
",
            ),
            "ErrImagePull",
            "0/2",
            "0",
        ),
        case(
            "restarts summed, no time known",
            pod(
                "[]",
                TWO_APPS,
                "",
                "  phase: Running
  containerStatuses:
  - {name: a, restartCount: 1, ready: true, state: {running: {}}}
  - {name: b, restartCount: 2, ready: true, state: {running: {}}}
",
            ),
            "Running",
            "2/2",
            "3",
        ),
    ]);
}

#[test]
fn pod_level_reasons() {
    let del = format!("  deletionTimestamp: \"{}\"\n", ago(5));
    check(vec![
        case(
            "Terminating",
            pod(
                "[]",
                ONE_APP,
                &del,
                "  phase: Running\n  containerStatuses: [{name: app, ready: true, state: {running: {}}}]\n",
            ),
            "Terminating",
            "1/1",
            "0",
        ),
        case(
            "deleted but already Succeeded",
            pod(
                "[]",
                ONE_APP,
                &del,
                "  phase: Succeeded\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 0, reason: Completed}}}]\n",
            ),
            "Completed",
            "0/1",
            "0",
        ),
        case(
            "Unknown (node lost)",
            pod("[]", ONE_APP, &del, "  phase: Running\n  reason: NodeLost\n"),
            "Unknown",
            "0/1",
            "0",
        ),
        case(
            "Evicted (pod reason, no container reason)",
            pod("[]", ONE_APP, "", "  phase: Failed\n  reason: Evicted\n"),
            "Evicted",
            "0/1",
            "0",
        ),
        case(
            "DeadlineExceeded overridden by a container reason",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Failed\n  reason: DeadlineExceeded\n  containerStatuses: [{name: app, state: {terminated: {exitCode: 137, reason: Error}}}]\n",
            ),
            "Error",
            "0/1",
            "0",
        ),
        case(
            "SchedulingGated",
            pod(
                "[]",
                ONE_APP,
                "",
                "  phase: Pending\n  conditions: [{type: PodScheduled, status: 'False', reason: SchedulingGated}]\n",
            ),
            "SchedulingGated",
            "0/1",
            "0",
        ),
        case("no status at all", pod("[]", ONE_APP, "", "  {}\n"), "", "0/1", "0"),
    ]);
}

#[test]
fn sidecar_columns() {
    let (t30, t60, t90) = (ago(30), ago(60), ago(90));
    check(vec![
        case(
            "started sidecar counts as ready while the next init runs",
            pod(
                SIDECAR_AND_INIT,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: side, started: true, ready: true, state: {running: {}}}
  - {name: init, state: {running: {}}}
  containerStatuses:
  - {name: app, state: {waiting: {reason: PodInitializing}}}
",
            ),
            "Init:1/2",
            "1/2",
            "0",
        ),
        case(
            "sidecar not started yet",
            pod(
                SIDECAR_AND_INIT,
                ONE_APP,
                "",
                "  phase: Pending
  initContainerStatuses:
  - {name: side, started: false, state: {running: {}}}
  - {name: init, state: {waiting: {reason: PodInitializing}}}
",
            ),
            "Init:0/2",
            "0/2",
            "0",
        ),
        case(
            "all running: sidecar restarts kept, regular init restarts dropped",
            pod(
                SIDECAR_AND_INIT,
                ONE_APP,
                "",
                &format!(
                    "  phase: Running
  conditions: [{{type: Initialized, status: 'True'}}, {{type: Ready, status: 'True'}}]
  initContainerStatuses:
  - name: side
    started: true
    ready: true
    restartCount: 2
    state: {{running: {{}}}}
    lastState: {{terminated: {{exitCode: 1, finishedAt: '{t60}'}}}}
  - name: init
    restartCount: 5
    state: {{terminated: {{exitCode: 0, reason: Completed}}}}
    lastState: {{terminated: {{exitCode: 1, finishedAt: '{t30}'}}}}
  containerStatuses:
  - name: app
    ready: true
    restartCount: 1
    state: {{running: {{}}}}
    lastState: {{terminated: {{exitCode: 1, finishedAt: '{t90}'}}}}
"
                ),
            ),
            "Running",
            "2/2",
            "3 (60s ago)",
        ),
        case(
            "crashed sidecar after initialization",
            pod(
                SIDECAR_AND_INIT,
                ONE_APP,
                "",
                "  phase: Running
  conditions: [{type: Initialized, status: 'True'}]
  initContainerStatuses:
  - {name: side, started: false, restartCount: 1, state: {waiting: {reason: CrashLoopBackOff}}}
  - {name: init, state: {terminated: {exitCode: 0, reason: Completed}}}
  containerStatuses:
  - {name: app, ready: true, state: {running: {}}}
",
            ),
            "Init:CrashLoopBackOff",
            "1/2",
            "1",
        ),
    ]);
}

#[test]
fn age_column() {
    let p = pod("[]", ONE_APP, "", "  phase: Running\n");
    assert_eq!(summarize(&p, now()).age, "10m");
    let mut q = p.clone();
    q.metadata.creation_timestamp = None;
    assert_eq!(summarize(&q, now()).age, "<unknown>");
    let s = summarize(&p, now());
    assert_eq!(s.restart_count, 0);
}

#[test]
fn human_durations() {
    let cases: [(i64, &str); 27] = [
        (-5, "<invalid>"),
        (-2, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (12, "12s"),
        (119, "119s"),
        (120, "2m"),
        (184, "3m4s"),
        (599, "9m59s"),
        (600, "10m"),
        (3599, "59m"),
        (10799, "179m"),
        (10800, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600 - 1, "7h59m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (8 * 86400 - 1, "7d23h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (365 * 8 * 86400 - 1, "7y364d"),
        (365 * 8 * 86400, "8y"),
        (365 * 20 * 86400, "20y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(SignedDuration::from_secs(secs)), want, "{secs}s");
    }
    // sub-second negative deviations count as now
    assert_eq!(human_duration(SignedDuration::from_millis(-1500)), "0s");
    assert_eq!(translate_timestamp_since(None, now()), "<unknown>");
}
