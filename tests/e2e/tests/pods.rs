//! Pods run for real: target/release/podwright against the embedded containerd under
//! `$PODWRIGHT_TEST_ROOT`, every test in parallel against the same containerd (each pod has its
//! own name and uid). Expected results are the kubelet's (see /work/shared/notes/kubelet-semantics.md
//! §1, §3, §4, §5, §6, §14 and the init-containers concept page).
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const BUSYBOX: &str = "localhost/busybox:1.36";

/// Created and Started events, once each, with the kubelet's messages, for a container.
fn assert_created_and_started_once(o: &Outcome, pod: &Value, field_path: &str, container: &str) {
    let pod_name = name(pod);
    for (reason, message) in
        [("Created", format!("Created container: {container}")), ("Started", format!("Started container {container}"))]
    {
        let evs = o.events_with_reason(&pod_name, field_path, reason);
        assert_eq!(evs.len(), 1, "one {reason} event for {field_path}\n{}", o.context());
        let e = &evs[0];
        assert_eq!(e["type"], "Normal", "{reason} event type: {e}");
        assert_eq!(e["count"], 1, "{reason} event count: {e}");
        assert_eq!(e["message"], message.as_str(), "{reason} event message: {e}");
        assert_eq!(e["involvedObject"]["kind"], "Pod", "{e}");
        assert_eq!(e["involvedObject"]["uid"], pod["metadata"]["uid"], "{e}");
        assert_eq!(e["involvedObject"]["namespace"], "default", "{e}");
        let first = rfc3339(e["firstTimestamp"].as_str().expect("firstTimestamp"));
        let last = rfc3339(e["lastTimestamp"].as_str().expect("lastTimestamp"));
        assert!(first <= last, "{e}");
    }
}

/// Init containers ran one at a time, in order, each after the previous one finished, and the
/// app containers after the last: `finishedAt(i) <= startedAt(i+1)`. Each init container must
/// run for at least a second (`startedAt < finishedAt` at 1 s resolution), otherwise the check
/// could not tell "in order" from "at the same time".
fn assert_ran_in_order(pod: &Value, inits: &[&str], app: &str) {
    let mut previous_finish: Option<(String, i64)> = None;
    for n in inits.iter().chain(std::iter::once(&app)) {
        let s = container_status(pod, n);
        assert_eq!(s["state"]["terminated"]["exitCode"], 0, "{n} should have completed: {s}");
        let started = terminated_time(s, "startedAt");
        let finished = terminated_time(s, "finishedAt");
        assert!(started <= finished, "{n}: startedAt after finishedAt: {s}");
        if inits.contains(n) {
            assert!(started < finished, "{n} must run at least a second for the ordering check to mean anything: {s}");
        }
        if let Some((prev, prev_finish)) = &previous_finish {
            assert!(
                *prev_finish <= started,
                "{n} started ({started}) before {prev} finished ({prev_finish}):\n{}",
                serde_json::to_string_pretty(&pod["status"]).unwrap()
            );
        }
        previous_finish = Some((n.to_string(), finished));
    }
}

/// No Warning events but the one a node without cluster DNS (`run`) gives every ClusterFirst pod.
fn assert_no_warnings(o: &Outcome) {
    let warnings: Vec<Value> = o.warnings().into_iter().filter(|e| e["reason"] != "MissingClusterDNS").collect();
    assert!(warnings.is_empty(), "unexpected Warning events: {warnings:#?}\n{}", o.context());
}

/// A container that has not been created: waiting `PodInitializing` (the pod has init
/// containers), no containerID, never restarted.
fn assert_never_started(pod: &Value, container: &str) {
    let s = container_status(pod, container);
    assert_eq!(s["state"]["waiting"]["reason"], "PodInitializing", "{container}: {s}");
    assert!(s.get("containerID").is_none_or(Value::is_null), "{container} has a containerID: {s}");
    assert_eq!(s["restartCount"], 0, "{container}: {s}");
    assert_eq!(s["ready"], false, "{container}: {s}");
}

// 1 -------------------------------------------------------------------------------------------

/// The concept page's example, as shipped in examples/myapp-pod.yaml.
#[test]
fn spec_example_myapp_pod() {
    let file = workspace_dir().join("examples/myapp-pod.yaml");
    let o = run_file(file.to_str().unwrap(), &[]);
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(name(&pod), "myapp-pod");
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());

    // Init containers in spec order, one at a time, then the app.
    assert_eq!(init_status_names(&pod), ["init-myservice", "init-mydb"]);
    assert_ran_in_order(&pod, &["init-myservice", "init-mydb"], "myapp-container");
    for n in ["init-myservice", "init-mydb", "myapp-container"] {
        let s = container_status(&pod, n);
        assert_eq!(s["state"]["terminated"]["reason"], "Completed", "{n}: {s}");
        assert_eq!(s["restartCount"], 0, "{n}: {s}");
        let id = s["containerID"].as_str().unwrap_or_default();
        assert!(id.starts_with("containerd://"), "{n} containerID: {s}");
    }
    // Regular init containers that exited 0 are ready (kubelet prober manager).
    assert_eq!(container_status(&pod, "init-mydb")["ready"], true);

    let init = condition(&pod, "Initialized");
    assert_eq!(init["status"], "True", "{init}");
    assert_eq!(init["reason"], "PodCompleted", "{init}");
    assert_eq!(condition(&pod, "PodScheduled")["status"], "True");
    assert_eq!(condition(&pod, "ContainersReady")["reason"], "PodCompleted");
    assert_eq!(condition(&pod, "Ready")["status"], "False");

    // Output streamed with the container's name, in run order.
    for line in [
        "[init-myservice] waiting for myservice",
        "[init-myservice] myservice is up",
        "[init-mydb] mydb is up",
        "[myapp-container] The app is running!",
    ] {
        assert!(o.stderr.contains(line), "missing {line:?}\n{}", o.context());
    }
    let svc_up = o.stderr_line_index("[init-myservice] myservice is up").unwrap();
    let db_first = o.stderr_line_index("[init-mydb]").unwrap();
    let db_up = o.stderr_line_index("[init-mydb] mydb is up").unwrap();
    let app = o.stderr_line_index("[myapp-container]").unwrap();
    assert!(svc_up < db_first && db_up < app, "output out of order\n{}", o.context());

    // kubectl's STATUS over time.
    let statuses = o.statuses("myapp-pod");
    assert!(
        is_subsequence(&statuses, &["Init:0/2", "Init:1/2", "Completed"]),
        "progress should show Init:0/2, Init:1/2, then Completed; got {statuses:?}\n{}",
        o.context()
    );
    assert_eq!(statuses.last().map(String::as_str), Some("Completed"), "{statuses:?}");
    assert!(
        !statuses.iter().any(String::is_empty),
        "kubectl's STATUS is never blank (at least the phase, Pending): {statuses:?}"
    );
    let during_init: Vec<Progress> =
        o.progress("myapp-pod").into_iter().filter(|p| p.status.starts_with("Init:")).collect();
    assert!(during_init.iter().all(|p| p.ready == "0/1" && p.restarts == "0"), "{during_init:?}");

    // Created/Started once per container, on the right field path.
    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-myservice}", "init-myservice");
    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-mydb}", "init-mydb");
    assert_created_and_started_once(&o, &pod, "spec.containers{myapp-container}", "myapp-container");
    assert_no_warnings(&o);
    assert_nothing_left(&pod);
}

// 2 -------------------------------------------------------------------------------------------

/// Init containers hand data to the app through an emptyDir; their own filesystems are not
/// shared.
#[test]
fn init_containers_pass_data_through_empty_dir() {
    let pod_name = pod_name("e2e-emptydir");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Never
  volumes:
  - name: workdir
    emptyDir: {{}}
  initContainers:
  - name: init-write
    image: {BUSYBOX}
    command: ["sh", "-c"]
    args:
    - |
      echo written-by-init-write > /work/data.txt
      touch /tmp/private-to-init-write
      sleep 1
      echo wrote the data
    volumeMounts:
    - name: workdir
      mountPath: /work
  - name: init-append
    image: {BUSYBOX}
    command: ["sh", "-c"]
    args:
    - |
      grep -q written-by-init-write /stuff/data.txt || {{ echo data missing; exit 7; }}
      echo appended-by-init-append >> /stuff/data.txt
      sleep 1
      echo appended
    volumeMounts:
    - name: workdir
      mountPath: /stuff
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c"]
    args:
    - |
      echo "app read: $(tr '\n' ' ' < /data/data.txt)"
      if [ -e /tmp/private-to-init-write ]; then echo "init /tmp visible"; else echo "init /tmp not visible"; fi
    volumeMounts:
    - name: workdir
      mountPath: /data
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    assert_ran_in_order(&pod, &["init-write", "init-append"], "app");
    let app = o.output_of("app");
    assert!(
        app.iter().any(|l| l.trim_end() == "app read: written-by-init-write appended-by-init-append"),
        "the app should print both init containers' data; it printed {app:?}\n{}",
        o.context()
    );
    assert!(
        app.iter().any(|l| l == "init /tmp not visible"),
        "each container has its own root filesystem; app printed {app:?}"
    );
    assert_eq!(o.output_of("init-append"), ["appended"], "{}", o.context());
    assert_nothing_left(&pod);
}

// 3 -------------------------------------------------------------------------------------------

/// restartPolicy Never: a failed init container fails the pod; nothing after it runs (§14.1).
#[test]
fn init_failure_with_restart_policy_never_fails_the_pod() {
    let pod_name = pod_name("e2e-init-never");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Never
  initContainers:
  - name: init-fails
    image: {BUSYBOX}
    command: ["sh", "-c", "echo init-fails is failing; exit 3"]
  - name: init-after
    image: {BUSYBOX}
    command: ["sh", "-c", "echo init-after must not run"]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo app must not run"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(1);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "{}", o.context());

    let failed = container_status(&pod, "init-fails");
    assert_eq!(failed["state"]["terminated"]["exitCode"], 3, "{failed}");
    assert_eq!(failed["state"]["terminated"]["reason"], "Error", "{failed}");
    assert_eq!(failed["restartCount"], 0, "{failed}");
    assert_eq!(failed["ready"], false, "{failed}");
    assert_never_started(&pod, "init-after");
    assert_never_started(&pod, "app");

    let init = condition(&pod, "Initialized");
    assert_eq!(init["status"], "False", "{init}");
    assert_eq!(init["reason"], "ContainersNotInitialized", "{init}");
    assert_eq!(init["message"], "containers with incomplete status: [init-fails init-after]", "{init}");
    let ready = condition(&pod, "ContainersReady");
    assert_eq!(ready["status"], "False", "{ready}");
    assert_eq!(condition(&pod, "Ready")["status"], "False");

    assert_eq!(o.output_of("init-fails"), ["init-fails is failing"], "{}", o.context());
    assert!(o.output_of("init-after").is_empty() && o.output_of("app").is_empty(), "{}", o.context());
    let statuses = o.statuses(&pod_name);
    assert!(statuses.iter().any(|s| s == "Init:Error"), "progress should show Init:Error: {statuses:?}");
    assert_eq!(statuses.last().map(String::as_str), Some("Init:Error"), "{statuses:?}");

    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-fails}", "init-fails");
    assert!(o.events_for(&pod_name, "spec.initContainers{init-after}").is_empty(), "{}", o.context());
    assert!(o.events_for(&pod_name, "spec.containers{app}").is_empty(), "{}", o.context());
    assert!(
        o.events().iter().all(|e| e["reason"] != "BackOff"),
        "no back-off under restartPolicy Never\n{}",
        o.context()
    );
    assert_nothing_left(&pod);
}

// 4 -------------------------------------------------------------------------------------------

/// restartPolicy Always and OnFailure: a failing init container is restarted at once, then
/// after 10 s, then 20 s… (§3.4, §14.2); the pod stays Pending and the app never starts. Both
/// policies run at the same time, each in its own podwright, stopped by `--timeout 25`.
#[test]
fn init_failure_with_always_and_on_failure_backs_off() {
    let runs: Vec<(String, Manifest, Running)> = ["Always", "OnFailure"]
        .into_iter()
        .map(|policy| {
            let pod_name = pod_name(&format!("e2e-init-crash-{}", policy.to_lowercase()));
            let manifest = format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 3
  initContainers:
  - name: init-crash
    image: {BUSYBOX}
    command: ["sh", "-c", "echo attempt; exit 1"]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo app must not run"]
"#
            );
            let m = Manifest::new(&manifest);
            let r = Running::spawn(&run_args(m.path_str(), &["--timeout", "25"]), None);
            (pod_name, m, r)
        })
        .collect();
    for (pod_name, _manifest, r) in runs {
        // 25 s, then a graceful stop of a pod whose init container is not even running.
        let o = r.wait_within(Duration::from_secs(50));
        check_init_crash_loop(&pod_name, &o);
    }
}

fn check_init_crash_loop(pod_name: &str, o: &Outcome) {
    o.assert_code(124);
    assert!(o.stderr.contains("timed out"), "{}", o.context());
    assert!(o.elapsed < Duration::from_secs(45), "took {:?}", o.elapsed);
    let pod = o.pod(pod_name);

    // Crash at ~0 s, restarted at once (restart 1), crash, restarted 10 s later (restart 2),
    // crash, next restart 20 s after that: past the 25 s timeout.
    let init = container_status(&pod, "init-crash");
    assert_eq!(
        init["restartCount"],
        2,
        "expected 2 restarts within 25 s (immediately, then after 10 s): {init}\n{}",
        o.context()
    );
    let attempts = o.output_of("init-crash");
    assert_eq!(attempts, ["attempt", "attempt", "attempt"], "three runs of init-crash\n{}", o.context());
    let last_exit = last_termination(init);
    assert_eq!(last_exit["exitCode"], 1, "init-crash's last run: {init}");
    assert_eq!(last_exit["reason"], "Error", "init-crash's last run: {init}");
    assert_never_started(&pod, "app");
    assert!(o.output_of("app").is_empty(), "{}", o.context());
    let initialized = condition(&pod, "Initialized");
    assert_eq!(initialized["status"], "False", "{initialized}");
    assert_eq!(initialized["reason"], "ContainersNotInitialized", "{initialized}");
    // Reported as it was when time ran out, not after the teardown.
    assert_eq!(phase(&pod), "Pending", "{}", o.context());

    // Progress: back-off shows as Init:CrashLoopBackOff, with the restarts counted.
    let progress = o.progress(pod_name);
    let statuses: Vec<&str> = progress.iter().map(|p| p.status.as_str()).collect();
    assert!(statuses.contains(&"Init:CrashLoopBackOff"), "progress should show Init:CrashLoopBackOff: {statuses:?}");
    assert!(
        statuses.iter().all(|s| s.starts_with("Init:") || s.is_empty()),
        "the pod never gets past init: {statuses:?}"
    );
    assert!(
        progress.iter().any(|p| p.restarts.split_whitespace().next() == Some("2")),
        "RESTARTS should reach 2: {progress:?}"
    );

    // Events: Started three times (aggregated into one event, count 3) with the 10 s back-off
    // between the second and third start; a BackOff warning on the init container.
    let fp = "spec.initContainers{init-crash}";
    let started = o.events_with_reason(pod_name, fp, "Started");
    assert_eq!(started.len(), 1, "identical events are aggregated (count): {started:#?}");
    assert_eq!(started[0]["count"], 3, "{}", started[0]);
    let first = rfc3339(started[0]["firstTimestamp"].as_str().unwrap());
    let last = rfc3339(started[0]["lastTimestamp"].as_str().unwrap());
    assert!(
        (10..=17).contains(&(last - first)),
        "third start should come ~10 s (back-off) after the first two: first {first}, last {last}\n{}",
        o.context()
    );
    let backoff = o.events_with_reason(pod_name, fp, "BackOff");
    assert!(!backoff.is_empty(), "a BackOff event for {fp}\n{}", o.context());
    let uid = uid(&pod);
    for e in &backoff {
        assert_eq!(e["type"], "Warning", "{e}");
        assert_eq!(
            e["message"],
            format!("Back-off restarting failed container init-crash in pod {pod_name}_default({uid})").as_str(),
            "{e}"
        );
    }
    assert!(o.events_for(pod_name, "spec.containers{app}").is_empty(), "{}", o.context());
    assert_nothing_left(&pod);
}

// 5 -------------------------------------------------------------------------------------------

/// restartPolicy OnFailure: the app fails once, is restarted at once (no back-off before the
/// first restart), succeeds; init containers do not run again.
#[test]
fn app_failure_with_on_failure_restarts_then_succeeds() {
    let pod_name = pod_name("e2e-app-retry");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: OnFailure
  volumes:
  - name: state
    emptyDir: {{}}
  initContainers:
  - name: init-prepare
    image: {BUSYBOX}
    command: ["sh", "-c", "echo prepared"]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c"]
    args:
    - |
      if [ -e /state/failed-once ]; then echo second attempt succeeds; exit 0; fi
      touch /state/failed-once
      echo first attempt fails
      exit 1
    volumeMounts:
    - name: state
      mountPath: /state
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    let app = container_status(&pod, "app");
    assert_eq!(app["restartCount"], 1, "{app}");
    assert_eq!(app["state"]["terminated"]["exitCode"], 0, "{app}");
    assert_eq!(app["state"]["terminated"]["reason"], "Completed", "{app}");
    assert_eq!(app["lastState"]["terminated"]["exitCode"], 1, "{app}");
    assert_eq!(app["lastState"]["terminated"]["reason"], "Error", "{app}");
    assert_eq!(o.output_of("app"), ["first attempt fails", "second attempt succeeds"], "{}", o.context());

    let init = container_status(&pod, "init-prepare");
    assert_eq!(init["restartCount"], 0, "{init}");
    assert_eq!(o.output_of("init-prepare"), ["prepared"], "init containers run once\n{}", o.context());

    // The first restart is immediate: no back-off, so no BackOff event and a quick pod.
    assert!(o.events().iter().all(|e| e["reason"] != "BackOff"), "{}", o.context());
    let failed_at = rfc3339(app["lastState"]["terminated"]["finishedAt"].as_str().expect("lastState finishedAt"));
    let restarted_at = terminated_time(app, "startedAt");
    assert!(
        restarted_at - failed_at <= 3,
        "the first restart should not wait for a back-off: failed at {failed_at}, restarted at {restarted_at}\n{}",
        o.context()
    );
    let started = o.events_with_reason(&pod_name, "spec.containers{app}", "Started");
    assert_eq!(started.len(), 1, "{started:#?}");
    assert_eq!(started[0]["count"], 2, "{}", started[0]);
    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-prepare}", "init-prepare");
    let progress = o.progress(&pod_name);
    let last = progress.last().expect("progress lines");
    assert_eq!(
        (last.status.as_str(), last.restarts.split_whitespace().next()),
        ("Completed", Some("1")),
        "{progress:?}"
    );
    assert_nothing_left(&pod);
}

// 8 -------------------------------------------------------------------------------------------

/// SIGINT while an init container runs: the pod is deleted gracefully (SIGTERM to the
/// container), podwright exits promptly with 1 (the pod ends Failed) and leaves nothing behind.
#[test]
fn sigint_during_init_deletes_the_pod() {
    let pod_name = pod_name("e2e-sigint");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: init-slow
    image: {BUSYBOX}
    command: ["sh", "-c"]
    args:
    - |
      trap 'echo got SIGTERM; exit 143' TERM
      echo sleeping
      sleep 60 &
      wait
  - name: init-next
    image: {BUSYBOX}
    command: ["sh", "-c", "echo init-next must not run"]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo app must not run"]
"#
    );
    let m = Manifest::new(&manifest);
    let mut r = Running::spawn(&run_args(m.path_str(), &[]), None);
    assert!(
        r.wait_for_stderr("Init:0/2", Duration::from_secs(60))
            && r.wait_for_stderr("[init-slow] sleeping", Duration::from_secs(30)),
        "init-slow never ran:\n{}",
        r.stderr_so_far()
    );
    // The check below for leftovers means something only if the label filter finds the
    // pod's sandbox and container while they exist.
    let live = containers_with_label("io.kubernetes.pod.name", &pod_name);
    assert!(live.len() >= 2, "expected the sandbox and init-slow in containerd, found {live:?}");

    let signalled = Instant::now();
    r.signal(libc::SIGINT);
    let o = r.wait_within(Duration::from_secs(30));
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(10), "podwright took {took:?} to stop after SIGINT\n{}", o.context());
    o.assert_code(1);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "a pod deleted before it finished ends Failed\n{}", o.context());

    assert!(
        o.output_of("init-slow").iter().any(|l| l == "got SIGTERM"),
        "init-slow should get SIGTERM\n{}",
        o.context()
    );
    let slow = container_status(&pod, "init-slow");
    assert_eq!(slow["state"]["terminated"]["exitCode"], 143, "{slow}");
    assert_eq!(slow["state"]["terminated"]["reason"], "Error", "{slow}");
    assert_eq!(slow["restartCount"], 0, "no restart while the pod is being deleted: {slow}");
    assert_never_started(&pod, "init-next");
    assert_never_started(&pod, "app");
    assert!(o.output_of("init-next").is_empty() && o.output_of("app").is_empty(), "{}", o.context());

    let killing = o.events_with_reason(&pod_name, "spec.initContainers{init-slow}", "Killing");
    assert_eq!(killing.len(), 1, "a Killing event for init-slow\n{}", o.context());
    assert_eq!(killing[0]["message"], "Stopping container init-slow", "{}", killing[0]);
    assert_eq!(killing[0]["type"], "Normal", "{}", killing[0]);
    assert_nothing_left(&pod);
}

// 9 -------------------------------------------------------------------------------------------

/// `-f -`: a multi-document manifest on stdin; both pods run side by side.
#[test]
fn two_pods_from_stdin() {
    let a = pod_name("e2e-stdin-a");
    let b = pod_name("e2e-stdin-b");
    let manifest = format!(
        r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {a}
spec:
  restartPolicy: Never
  initContainers:
  - name: init-a
    image: {BUSYBOX}
    command: ["sh", "-c", "echo init of pod a"]
  containers:
  - name: app-a
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 1; echo app of pod a"]
---
apiVersion: v1
kind: Pod
metadata:
  name: {b}
spec:
  restartPolicy: OnFailure
  containers:
  - name: app-b
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 1; echo app of pod b"]
"#
    );
    let o = Running::spawn(&run_args("-", &[]), Some(&manifest)).wait();
    o.assert_code(0);
    let pods = o.pods();
    let names: Vec<String> = pods.iter().map(name).collect();
    assert_eq!(names, [a.clone(), b.clone()], "the List holds both pods, in manifest order\n{}", o.context());
    assert_ne!(uid(&pods[0]), uid(&pods[1]));
    for p in &pods {
        assert_eq!(phase(p), "Succeeded", "{}", o.context());
        assert!(o.statuses(&name(p)).iter().all(|s| !s.is_empty()), "kubectl's STATUS is never blank\n{}", o.context());
        assert_eq!(o.statuses(&name(p)).last().map(String::as_str), Some("Completed"), "{}", o.context());
    }
    assert_eq!(o.output_of("init-a"), ["init of pod a"]);
    assert_eq!(o.output_of("app-a"), ["app of pod a"]);
    assert_eq!(o.output_of("app-b"), ["app of pod b"]);
    assert_created_and_started_once(&o, &pods[0], "spec.initContainers{init-a}", "init-a");
    assert_created_and_started_once(&o, &pods[0], "spec.containers{app-a}", "app-a");
    assert_created_and_started_once(&o, &pods[1], "spec.containers{app-b}", "app-b");
    // Pod b has no init containers: its app is created straight away (ContainerCreating).
    let b_statuses = o.statuses(&b);
    assert!(b_statuses.iter().all(|s| !s.starts_with("Init:")), "{b_statuses:?}");
    for p in &pods {
        assert_nothing_left(p);
    }
}

// 10 ------------------------------------------------------------------------------------------

/// The pre-1.6 `pod.beta.kubernetes.io/init-containers` annotation still declares init
/// containers (with a deprecation warning), which run in order before the app.
#[test]
fn beta_annotation_init_containers_run_first() {
    let pod_name = pod_name("e2e-annotation");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
  annotations:
    pod.beta.kubernetes.io/init-containers: '[
        {{
            "name": "init-first",
            "image": "{BUSYBOX}",
            "command": ["sh", "-c", "echo first init; sleep 1"]
        }},
        {{
            "name": "init-second",
            "image": "{BUSYBOX}",
            "command": ["sh", "-c", "echo second init; sleep 1"]
        }}
    ]'
spec:
  restartPolicy: Never
  containers:
  - name: annotated-app
    image: {BUSYBOX}
    command: ['sh', '-c', 'echo The app is running!']
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let warning = o
        .stderr_lines()
        .into_iter()
        .find(|l| l.contains("pod.beta.kubernetes.io/init-containers"))
        .unwrap_or_else(|| panic!("no deprecation warning naming the annotation\n{}", o.context()))
        .to_string();
    assert!(warning.starts_with("Warning:") && warning.contains("deprecated"), "{warning}");
    assert!(warning.contains("spec.initContainers"), "the warning should point at the replacement: {warning}");

    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    assert_eq!(init_status_names(&pod), ["init-first", "init-second"]);
    assert_ran_in_order(&pod, &["init-first", "init-second"], "annotated-app");
    assert_eq!(o.output_of("init-first"), ["first init"]);
    assert_eq!(o.output_of("init-second"), ["second init"]);
    assert_eq!(o.output_of("annotated-app"), ["The app is running!"]);
    assert!(
        o.stderr_line_index("[init-second]").unwrap() < o.stderr_line_index("[annotated-app]").unwrap(),
        "{}",
        o.context()
    );
    let statuses = o.statuses(&pod_name);
    assert!(is_subsequence(&statuses, &["Init:0/2", "Init:1/2", "Completed"]), "{statuses:?}");
    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-first}", "init-first");
    assert_created_and_started_once(&o, &pod, "spec.initContainers{init-second}", "init-second");
    assert_created_and_started_once(&o, &pod, "spec.containers{annotated-app}", "annotated-app");
    assert_nothing_left(&pod);
}

/// The init-containers proposal's templating use case from one `run` manifest: an init
/// container renders the app's config file into an emptyDir from a ConfigMap (a volume and an
/// env value) and a Secret beside the pod in the file; the app reads it. Missing objects stop
/// the container with the kubelet's reason, and nothing of the secret shows in the output.
#[test]
fn an_init_container_renders_config_from_objects_in_the_same_manifest() {
    let pod_name = pod_name("e2e-render");
    let manifest = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: {pod_name}-tmpl}}
data:
  app.tmpl: "listen=PORT token=TOKEN"
  port: "8080"
---
apiVersion: v1
kind: Secret
metadata: {{name: {pod_name}-token}}
stringData: {{token: t0ps3cret}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Never
  volumes:
  - {{name: config, emptyDir: {{}}}}
  - {{name: tmpl, configMap: {{name: {pod_name}-tmpl}}}}
  initContainers:
  - name: render
    image: {BUSYBOX}
    env:
    - {{name: PORT, valueFrom: {{configMapKeyRef: {{name: {pod_name}-tmpl, key: port}}}}}}
    - {{name: TOKEN, valueFrom: {{secretKeyRef: {{name: {pod_name}-token, key: token}}}}}}
    command: ['sh', '-c', 'sed "s/PORT/$PORT/; s/TOKEN/$TOKEN/" /tmpl/app.tmpl > /config/app.conf']
    volumeMounts:
    - {{name: config, mountPath: /config}}
    - {{name: tmpl, mountPath: /tmpl}}
  containers:
  - name: app
    image: {BUSYBOX}
    command: ['sh', '-c', 'grep -q "listen=8080 token=t0p.3cret" /config/app.conf && echo rendered']
    volumeMounts: [{{name: config, mountPath: /config}}]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("app"), ["rendered"], "{}", o.context());
    assert!(!o.context().contains("t0ps3cret"), "the secret's value shows in podwright's output");
    assert_nothing_left(&pod);

    // Without the Secret the init container cannot be created: the kubelet's reason and message.
    let without = manifest.split("---\n").filter(|doc| !doc.contains("kind: Secret")).collect::<Vec<_>>().join("---\n");
    let o = run_manifest(&without, &["--timeout", "3"]);
    let pod = o.single_pod();
    let waiting = &container_status(&pod, "render")["state"]["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError", "{}", o.context());
    assert_eq!(waiting["message"], format!("secret \"{pod_name}-token\" not found").as_str(), "{}", o.context());
}

/// `subPath` and `subPathExpr`: a container mounts only its own directory of a shared emptyDir,
/// named from its environment, and one key of a ConfigMap as a single file; the image's own
/// environment stays underneath the pod's.
#[test]
fn sub_paths_named_from_the_environment_and_single_files_of_a_config_map() {
    let pod_name = pod_name("e2e-subpath");
    let manifest = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: {pod_name}-files}}
data: {{app.conf: "key=value", other: "not mounted"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Never
  volumes:
  - {{name: logs, emptyDir: {{}}}}
  - {{name: files, configMap: {{name: {pod_name}-files}}}}
  initContainers:
  - name: writer
    image: {BUSYBOX}
    env:
    - {{name: POD, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    command: ['sh', '-c', 'echo from-writer > /own/line; ls /etc/app']
    volumeMounts:
    - {{name: logs, mountPath: /own, subPathExpr: "writers/$(POD)"}}
    - {{name: files, mountPath: /etc/app/app.conf, subPath: app.conf}}
  containers:
  - name: reader
    image: {BUSYBOX}
    env: [{{name: EXTRA, value: "1"}}]
    command: ['sh', '-c', 'cat /all/writers/{pod_name}/line; cat /etc/app/app.conf; echo; echo "path=$PATH"']
    volumeMounts:
    - {{name: logs, mountPath: /all}}
    - {{name: files, mountPath: /etc/app/app.conf, subPath: app.conf}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    // Only the one key is in the directory: the mount is of a single file.
    assert_eq!(o.output_of("writer"), ["app.conf"], "{}", o.context());
    let reader = o.output_of("reader");
    assert_eq!(reader[..2], ["from-writer", "key=value"], "{}", o.context());
    assert!(reader[2].starts_with("path=/") && reader[2].contains("/bin"), "the image's PATH: {reader:?}");
    assert_nothing_left(&pod);
}

// 11 ------------------------------------------------------------------------------------------

/// `-o yaml` prints the final `List` in the block style kubectl writes: list items level with
/// their key, a string that would read as a number quoted, text of several lines as a `|` block.
#[test]
fn the_final_list_as_yaml() {
    let pod_name = pod_name("e2e-yaml");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
  labels: {{port: "80"}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: ['sh', '-c', 'printf "a: b\nsecond line\n" > /dev/termination-log']
"#
    );
    let o = run_manifest(&manifest, &["-o", "yaml"]);
    o.assert_code(0);
    let yaml = &o.stdout;
    let head = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n";
    assert!(yaml.starts_with(head), "{}", o.context());
    let pod_lines = [
        "    labels:\n      port: '80'\n".to_string(),
        format!("    name: {pod_name}\n"),
        "    containerStatuses:\n    - containerID: containerd://".to_string(),
        "          message: |\n            a: b\n            second line\n".to_string(),
        "    phase: Succeeded\n".to_string(),
        "  kind: Event\n".to_string(),
    ];
    for lines in pod_lines {
        assert!(yaml.contains(&lines), "-o yaml should hold {lines:?}\n{}", o.context());
    }
    assert!(yaml.ends_with("kind: List\nmetadata: {}\n"), "{}", o.context());
}

// 12 ------------------------------------------------------------------------------------------

/// Interactive containers under `run`: `tty` gives the container a terminal (stdout and stderr
/// are one stream on it), `stdin` an open stdin that delivers nothing unless attached. `run`'s
/// own stdin is not the container's: what is written to it never arrives, and the pod ends.
#[test]
fn stdin_and_tty_containers_run_to_their_end() {
    let pod_name = pod_name("e2e-interactive");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod_name}
spec:
  restartPolicy: Never
  containers:
  - name: term
    image: {BUSYBOX}
    stdin: true
    stdinOnce: true
    tty: true
    command: ['sh', '-c', 'test -t 0 && echo stdin-is-a-tty; test -t 1 && echo stdout-is-a-tty; echo to-stderr >&2']
  - name: piped
    image: {BUSYBOX}
    stdin: true
    command: ['sh', '-c', 'test -p /dev/stdin && echo stdin-is-a-pipe; read -t 2 x && echo "read $x" || echo nothing-read']
"#
    );
    let m = Manifest::new(&manifest);
    let o = Running::spawn(&run_args(m.path_str(), &[]), Some("typed into run\n")).wait();
    o.assert_code(0);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    let term: Vec<String> = o.output_of("term").iter().map(|l| l.trim_end_matches('\r').to_string()).collect();
    assert_eq!(term, ["stdin-is-a-tty", "stdout-is-a-tty", "to-stderr"], "{}", o.context());
    assert_eq!(o.output_of("piped"), ["stdin-is-a-pipe", "nothing-read"], "{}", o.context());
    assert_nothing_left(&pod);
}
