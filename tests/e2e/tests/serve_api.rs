//! `podwright serve` driven by the machine's unmodified kubectl against real containerd: the
//! Table columns, watch, describe, logs, the update rules, patches, graceful deletion, errors
//! in kubectl's words, config maps and secrets, namespaces, and the loopback-only rule.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::{Manifest, podwright};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/busybox:1.36";
const OTHER_IMAGE: &str = "localhost/busybox-stopsignal:1.36";

fn pod_yaml(name: &str, init_cmd: &str, app_cmd: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\nspec:\n  terminationGracePeriodSeconds: 5\n  initContainers:\n  - name: init\n    image: {IMAGE}\n    command: ['sh', '-c', '{init_cmd}']\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', '{app_cmd}']\n  - name: side\n    image: {IMAGE}\n    command: ['sleep', '3600']\n"
    )
}

/// The STATUS cell of `kubectl get pod NAME --no-headers`.
fn status_of(d: &Daemon, name: &str) -> String {
    let out = text(&d.kubectl(None, &["get", "pod", name, "--no-headers"]).stdout);
    out.split_whitespace().nth(2).unwrap_or_default().to_string()
}

#[test]
fn get_watch_describe_and_logs_show_init_progress() {
    let d = Daemon::start();
    // A watch started first sees every transition.
    let mut watch = d.kubectl_cmd(None, &["get", "pods", "-w"]).stdout(Stdio::piped()).spawn().expect("kubectl -w");
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let m = Manifest::new(&pod_yaml("steps", "echo init says hi; sleep 8", "echo app up; sleep 3600"));
    assert!(d.ok(&["create", "-f", m.path_str()]).contains("pod/steps created"));
    let row = d.wait_for(&["get", "-f", m.path_str()], Duration::from_secs(20), |o| o.contains("Init:0/1"));
    assert!(row.starts_with("NAME"), "{row}");
    assert!(row.contains("0/2"), "READY column: {row}");
    // Once the init container has printed, it runs (for 8 s more).
    let logs = d.wait_for(&["logs", "steps", "-c", "init"], Duration::from_secs(10), |o| o.contains("init says hi"));
    assert_eq!(logs, "init says hi\n");
    let describe = d.ok(&["describe", "-f", m.path_str()]);
    for needle in [
        "Init Containers:",
        "  init:",
        "State:          Running",
        "Reason:       PodInitializing",
        "Started container init",
        "Created container: init",
    ] {
        assert!(describe.contains(needle), "describe lacks {needle:?}:\n{describe}");
    }
    d.wait_for(&["get", "pod", "steps", "--no-headers"], Duration::from_secs(30), |o| {
        o.contains("Running") && o.contains("2/2")
    });
    // The watch saw the pod go from Init:0/1 through PodInitializing (or straight) to Running.
    let mut seen = vec![];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) && !seen.iter().any(|l: &String| l.contains("Running")) {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            seen.push(l);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let init = seen.iter().position(|l| l.contains("Init:0/1")).unwrap_or_else(|| panic!("no Init:0/1 in {seen:?}"));
    let running = seen.iter().position(|l| l.contains("Running")).unwrap_or_else(|| panic!("no Running in {seen:?}"));
    assert!(init < running, "{seen:?}");
    assert_eq!(d.ok(&["logs", "steps", "-c", "app"]), "app up\n");
    // The daemon keeps each pod's timeline.
    let uid = d.ok(&["get", "pod", "steps", "-o", "jsonpath={.metadata.uid}"]);
    let page = podwright(&["timeline", "steps", "--server", &d.server()]);
    assert_eq!(page.code, 0, "{}", page.stderr);
    assert!(page.stdout.contains(&format!("data-uid=\"{uid}\"")) && page.stdout.contains("<svg"), "{}", page.stdout);
    let missing = podwright(&["timeline", "nothing", "--server", &d.server()]);
    assert!(missing.code != 0 && missing.stderr.contains("pods \"nothing\" not found"), "{}", missing.stderr);
    let wide = d.ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.contains("IP") && wide.contains("NODE") && wide.contains("READINESS GATES"), "{wide}");
}

#[test]
fn logs_previous_follow_tail_and_timestamps() {
    let d = Daemon::start();
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', 'echo run $(cat /proc/uptime | cut -d. -f1); echo second; exit 1']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(
        &["get", "pod", "crash", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"],
        Duration::from_secs(40),
        |o| o.trim().parse::<i32>().is_ok_and(|n| n >= 1),
    );
    let previous = d.ok(&["logs", "crash", "-p"]);
    assert!(previous.starts_with("run ") && previous.ends_with("second\n"), "{previous}");
    assert_eq!(d.ok(&["logs", "crash", "--tail=1"]), "second\n");
    let stamped = d.ok(&["logs", "crash", "--timestamps", "--tail=1"]);
    let (ts, msg) = stamped.split_once(' ').expect("a timestamp");
    assert_eq!(msg, "second\n");
    assert_eq!(ts.len(), "2026-01-01T00:00:00.000000000Z".len(), "{ts}");

    // -f ends when the container does.
    let f = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: follow\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', 'for i in 1 2 3; do echo line $i; sleep 1; done']\n"
    ));
    d.ok(&["create", "-f", f.path_str()]);
    d.wait_for(&["get", "pod", "follow", "--no-headers"], Duration::from_secs(20), |o| o.contains("Running"));
    let started = Instant::now();
    let out = d.ok(&["logs", "-f", "follow"]);
    assert_eq!(out, "line 1\nline 2\nline 3\n");
    assert!(started.elapsed() < Duration::from_secs(15));
    let err = d.fails(&["logs", "follow", "-p"]);
    assert!(err.contains("previous terminated container \"app\" in pod \"follow\" not found"), "{err}");
}

#[test]
fn updates_follow_the_api_servers_rules() {
    let d = Daemon::start();
    let yaml = pod_yaml("upd", "true", "sleep 3600");
    let m = Manifest::new(&yaml);
    d.ok(&["apply", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "upd", "--no-headers"], Duration::from_secs(30), |o| {
        o.contains("Running") && o.contains("2/2")
    });

    // apply again with a changed image: a strategic merge patch; the other container stays.
    let changed = Manifest::new(&yaml.replacen(
        &format!("image: {IMAGE}\n    command: ['sh', '-c', 'sleep 3600']"),
        &format!("image: {OTHER_IMAGE}\n    command: ['sh', '-c', 'sleep 3600']"),
        1,
    ));
    assert!(d.ok(&["apply", "-f", changed.path_str()]).contains("pod/upd configured"));
    let images = d.ok(&["get", "pod", "upd", "-o", "jsonpath={.spec.containers[*].image}"]);
    assert_eq!(images, format!("{OTHER_IMAGE} {IMAGE}"));
    // The changed container is restarted with its new image.
    d.wait_for(
        &[
            "get",
            "pod",
            "upd",
            "-o",
            "jsonpath={.status.containerStatuses[0].image} {.status.containerStatuses[0].restartCount}",
        ],
        Duration::from_secs(30),
        |o| o == format!("{OTHER_IMAGE} 1"),
    );
    assert!(
        d.ok(&["get", "events", "--field-selector", "involvedObject.name=upd"])
            .contains("Container app definition changed, will be restarted")
    );

    // set image (strategic merge patch from kubectl set).
    assert!(d.ok(&["set", "image", "pod/upd", &format!("side={OTHER_IMAGE}")]).contains("image updated"));
    // Anything else is refused in the API server's words.
    let err = d.fails(&["patch", "pod", "upd", "--type=merge", "-p", r#"{"spec":{"restartPolicy":"Never"}}"#]);
    assert!(err.contains("The Pod \"upd\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{err}");
    d.ok(&["patch", "pod", "upd", "--type=merge", "-p", r#"{"spec":{"activeDeadlineSeconds":3000}}"#]);
    let err = d.fails(&[
        "patch",
        "pod",
        "upd",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/activeDeadlineSeconds","value":4000}]"#,
    ]);
    assert!(
        err.contains("spec.activeDeadlineSeconds: Invalid value: 4000: must be less than or equal to previous value"),
        "{err}"
    );
    let err = d.fails(&["patch", "pod", "upd", "-p", r#"{"spec":{"containers":[{"name":"extra","image":"x"}]}}"#]);
    assert!(err.contains("pod updates may not add or remove containers"), "{err}");
    d.ok(&["label", "pod", "upd", "tier=web"]);
    assert!(d.ok(&["get", "pods", "-l", "tier=web", "-o", "name"]).contains("pod/upd"));
    // A replace from a stale copy conflicts.
    let stale = d.ok(&["get", "pod", "upd", "-o", "json"]);
    d.ok(&["label", "pod", "upd", "tier=db", "--overwrite"]);
    let stale_file = Manifest::new(&stale);
    let err = d.fails(&["replace", "-f", stale_file.path_str()]);
    assert!(err.contains("Operation cannot be fulfilled on pods \"upd\": the object has been modified; please apply your changes to the latest version and try again"), "{err}");
}

#[test]
fn deletion_is_graceful_then_the_pod_is_gone() {
    let d = Daemon::start();
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: slow\nspec:\n  terminationGracePeriodSeconds: 20\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', 'trap \"sleep 3; exit 0\" TERM; while true; do sleep 0.2; done']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "slow", "--no-headers"], Duration::from_secs(20), |o| o.contains("Running"));
    let started = Instant::now();
    assert!(d.ok(&["delete", "pod", "slow", "--grace-period=10", "--wait=false"]).contains("pod \"slow\" deleted"));
    assert_eq!(status_of(&d, "slow"), "Terminating");
    let obj = d.ok(&[
        "get",
        "pod",
        "slow",
        "-o",
        "jsonpath={.metadata.deletionGracePeriodSeconds} {.metadata.deletionTimestamp}",
    ]);
    assert!(obj.starts_with("10 "), "{obj}");
    // kubectl delete waits until the object is gone.
    d.ok(&["wait", "--for=delete", "pod/slow", "--timeout=30s"]);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "the trap's 3 s, not the grace: {took:?}"
    );
    let err = d.fails(&["get", "pod", "slow"]);
    assert!(err.contains("Error from server (NotFound): pods \"slow\" not found"), "{err}");
}

#[test]
fn errors_read_as_kubectl_prints_them() {
    let d = Daemon::start();
    let bad = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers:\n  - name: Bad_Name\n    image: {IMAGE}\n  - name: x\n    image: ''\n"
    ));
    let err = d.fails(&["create", "-f", bad.path_str()]);
    assert!(
        err.contains("The Pod \"bad\" is invalid: \n* spec.containers[0].name: Invalid value: \"Bad_Name\""),
        "{err}"
    );
    assert!(err.contains("* spec.containers[1].image: Required value"), "{err}");
    let m = Manifest::new(&pod_yaml("twice", "true", "sleep 3600"));
    d.ok(&["create", "-f", m.path_str()]);
    let err = d.fails(&["create", "-f", m.path_str()]);
    assert!(err.contains("Error from server (AlreadyExists): error when creating"), "{err}");
    assert!(err.contains("pods \"twice\" already exists"), "{err}");
    let err = d.fails(&["logs", "twice", "-c", "nope"]);
    // kubectl 1.32 may say it itself, before asking.
    assert!(err.contains("container nope is not valid for pod twice"), "{err}");
    let err = d.fails(&["get", "pods", "nothing"]);
    assert!(err.contains("Error from server (NotFound): pods \"nothing\" not found"), "{err}");
    // kubectl asks about the namespace itself when a get in it finds nothing.
    let err = d.fails(&["get", "pods", "-n", "nowhere", "nothing"]);
    assert!(err.contains("Error from server (NotFound): namespaces \"nowhere\" not found"), "{err}");
    let unsupported = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: root\nspec:\n  securityContext:\n    appArmorProfile: {{type: Unconfined}}\n  containers:\n  - name: app\n    image: {IMAGE}\n"
    ));
    let err = d.fails(&["create", "-f", unsupported.path_str()]);
    assert!(
        err.contains("spec.securityContext.appArmorProfile: Unsupported value: not supported by podwright yet"),
        "{err}"
    );
}

#[test]
fn config_maps_secrets_and_namespaces() {
    let d = Daemon::start();
    // kubectl 1.32 sends these as protobuf.
    assert!(
        d.ok(&["create", "configmap", "cfg", "--from-literal=a=b", "--from-literal=c=d"])
            .contains("configmap/cfg created")
    );
    assert_eq!(d.ok(&["get", "configmap", "cfg", "-o", "jsonpath={.data.a}"]), "b");
    assert!(d.ok(&["get", "configmaps"]).contains("cfg    2"));
    d.ok(&["create", "secret", "generic", "pw", "--from-literal=password=hunter2"]);
    assert_eq!(d.ok(&["get", "secret", "pw", "-o", "jsonpath={.data.password}"]), "aHVudGVyMg==");
    assert!(d.ok(&["get", "secrets"]).contains("Opaque"));
    // Validated as the API server validates them.
    let bad = Manifest::new("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: badkey}\ndata: {\"a b\": x}\n");
    let err = d.fails(&["create", "-f", bad.path_str()]);
    assert!(
        err.contains("The ConfigMap \"badkey\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'"),
        "{err}"
    );
    d.ok(&["create", "configmap", "frozen", "--from-literal=k=v"]);
    d.ok(&["patch", "configmap", "frozen", "-p", r#"{"immutable": true}"#]);
    let err = d.fails(&["patch", "configmap", "frozen", "-p", r#"{"data": {"k": "new"}}"#]);
    assert!(
        err.contains(
            "The ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        ),
        "{err}"
    );
    // kubectl 1.27 sends JSON.
    let out = d.kubectl(Some("1.27"), &["create", "configmap", "old", "--from-literal=x=y"]);
    assert!(out.status.success(), "kubectl 1.27: {}", text(&out.stderr));
    d.ok(&["create", "namespace", "team"]);
    let m = Manifest::new(&pod_yaml("inns", "true", "sleep 3600"));
    d.ok(&["create", "-f", m.path_str(), "-n", "team"]);
    assert!(d.ok(&["get", "pods", "-A"]).contains("team"));
    assert!(d.ok(&["get", "pods"]).is_empty());
    d.ok(&["delete", "namespace", "team", "--wait=false"]);
    let err = d.fails(&["delete", "namespace", "default"]);
    assert!(err.contains("namespaces \"default\" is forbidden: this namespace may not be deleted"), "{err}");
    let err = d.fails(&["create", "configmap", "x", "-n", "missing", "--from-literal=a=b"]);
    assert!(err.contains("namespaces \"missing\" not found"), "{err}");
}

#[test]
fn older_kubectls_drive_it_too() {
    let d = Daemon::start();
    let m = Manifest::new(&pod_yaml("oldies", "true", "sleep 3600"));
    let out = d.kubectl(Some("1.27"), &["create", "-f", m.path_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    d.wait_for(&["get", "pod", "oldies", "--no-headers"], Duration::from_secs(30), |o| o.contains("Running"));
    let out = d.kubectl(Some("1.27"), &["get", "pods"]);
    assert!(text(&out.stdout).contains("Running"), "{}", text(&out.stderr));
    let out = d.kubectl(Some("1.27"), &["delete", "pod", "oldies", "--grace-period=1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn serving_beyond_loopback_needs_tls_and_a_token() {
    let out = podwright(&["serve", "--address", "0.0.0.0", "--port", "1", "--root-dir", "/nonexistent-podwright"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("without TLS and a bearer token"), "{}", out.stderr);

    let d = Daemon::start_with(&["--address", "0.0.0.0", "--tls"]);
    // kubectl with the kubeconfig (certificate authority and token) gets in, over HTTPS.
    assert!(d.ok(&["get", "namespaces"]).contains("default"));
    let kc = std::fs::read_to_string(d.kubeconfig()).expect("kubeconfig");
    assert!(kc.contains("server: https://127.0.0.1:") && kc.contains("token: "), "{kc}");
    // Without the token: 401, whatever the path.
    let curl = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", &format!("{}/api/v1/pods", d.server())])
        .output()
        .expect("curl");
    assert_eq!(text(&curl.stdout), "401");
    let anonymous = d.kubectl_cmd(None, &["get", "pods", "--token", "wrong"]).output().expect("kubectl");
    assert!(text(&anonymous.stderr).contains("Unauthorized"), "{}", text(&anonymous.stderr));
}

#[test]
fn container_logs_rotate_by_the_config() {
    let config = Manifest::new(
        "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncontainerLogMaxSize: 2Ki\ncontainerLogMaxFiles: 3\nimageGCHighThresholdPercent: 100\n",
    );
    let d = Daemon::start_with(&["--config", config.path_str()]);
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: chatty\nspec:\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo line $i of a chatty container that fills its log; sleep 0.01; done']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    let uid = d.wait_for(&["get", "pod", "chatty", "-o", "jsonpath={.metadata.uid}"], Duration::from_secs(10), |o| {
        !o.is_empty()
    });
    let dir = d.root.join("pods").join(&uid).join("logs/app");
    // The kubelet checks every 10 s; two rotations within 40 s.
    let start = Instant::now();
    let rotated = loop {
        let names: Vec<String> = std::fs::read_dir(&dir)
            .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let rotated: Vec<&String> = names.iter().filter(|n| n.starts_with("0.log.")).collect();
        assert!(names.len() <= 3, "at most containerLogMaxFiles files: {names:?}");
        if rotated.len() >= 2 {
            break rotated.len();
        }
        assert!(start.elapsed() < Duration::from_secs(40), "no rotation: {names:?}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(rotated, 2);
    // The current file goes on after the rotation: kubectl logs shows fresh lines only.
    let logs = d.ok(&["logs", "chatty", "--tail=1"]);
    assert!(logs.starts_with("line ") && logs.ends_with("fills its log\n"), "{logs}");
    let first = d.ok(&["logs", "chatty"]);
    assert!(!first.starts_with("line 1 of"), "the oldest lines were rotated away");
}

/// `crashLoopBackOff.maxContainerRestartPeriod` (KEP-5593): with a 2 s cap a crashing container
/// is restarted every 2 s, where the default curve waits 10 s, then 20 s.
#[test]
fn the_crash_loop_back_off_is_capped_by_the_config() {
    let config = Manifest::new(
        "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 2s\n",
    );
    let d = Daemon::start_with(&["--config", config.path_str()]);
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crasher\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['false']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    let start = Instant::now();
    d.wait_for(
        &["get", "pod", "crasher", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"],
        Duration::from_secs(20),
        |o| o.parse::<u32>().is_ok_and(|n| n >= 4),
    );
    // Four restarts within 20 s: 0 + 2 + 2 + 2 s of back-off (the default needs 10 + 20 + 40 s).
    assert!(start.elapsed() < Duration::from_secs(20), "{:?}\n{}", start.elapsed(), d.log());
    let message =
        d.ok(&["get", "pod", "crasher", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}"]);
    assert!(message.is_empty() || message.starts_with("back-off 2s restarting failed container=app"), "{message}");

    // Outside 1s..300s the daemon does not start, with the kubelet's words.
    let bad = Manifest::new("kind: KubeletConfiguration\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 301s\n");
    let o = podwright(&["serve", "--config", bad.path_str()]);
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .contains("CrashLoopBackOff.MaxContainerRestartPeriod (got: 301 seconds) must be set between 1s and 300s"),
        "{}",
        o.stderr
    );
}
