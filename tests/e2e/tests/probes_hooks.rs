//! Probes of each kind and lifecycle hooks of each kind, on real containerd. busybox serves the
//! probes: `httpd` for HTTP, `nc` for TCP, and `nc` replaying a canned HTTP/2 answer of the gRPC
//! health service.

use podwright_e2e::*;
use serde_json::Value;
use std::time::Duration;

/// A gRPC server in a shell: every connection gets SETTINGS, a SETTINGS ack, and the answer to
/// stream 1 of `grpc.health.v1.Health/Check` with this status (1 SERVING, 2 NOT_SERVING).
fn grpc_health_server(port: u16, status: u8) -> String {
    let frames = format!(
        r"\0\0\0\4\0\0\0\0\0\0\0\0\4\1\0\0\0\0\0\0\24\1\4\0\0\0\1\210\17\20\20application/grpc\0\0\7\0\0\0\0\0\1\0\0\0\0\2\10\{status:o}\0\0\17\1\5\0\0\0\1\0\13grpc-status\0010"
    );
    format!("printf '{frames}' > /tmp/grpc-answer; nc -ll -p {port} -e sh -c 'sleep 0.2; cat /tmp/grpc-answer' &")
}

fn messages(o: &Outcome, pod: &str, container: &str, reason: &str) -> Vec<String> {
    o.events_with_reason(pod, &format!("spec.containers{{{container}}}"), reason)
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn count(events: &[Value]) -> i64 {
    events.iter().map(|e| e["count"].as_i64().unwrap_or(0)).sum()
}

#[test]
fn probes_of_each_kind_make_containers_started_and_ready() {
    let pod = pod_name("probes-ok");
    let grpc = grpc_health_server(9000, 1);
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: web
    image: localhost/busybox:1.36
    ports: [{{name: http, containerPort: 8080}}]
    command: ['sh', '-c', 'mkdir -p /www && echo ok > /www/healthz && httpd -p 8080 -h /www && sleep 5']
    startupProbe:
      exec: {{command: ['test', '-f', '/www/healthz']}}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      httpGet: {{path: /healthz, port: http, httpHeaders: [{{name: X-Probe, value: e2e}}]}}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {{port: 8080}}
      periodSeconds: 1
  - name: grpc
    image: localhost/busybox:1.36
    command:
    - sh
    - -c
    - |
      {grpc}
      sleep 5
    readinessProbe:
      grpc: {{port: 9000}}
      periodSeconds: 1
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.single_pod();
    assert!(o.progress(&pod).iter().any(|l| l.status == "Running" && l.ready == "2/2"), "{}", o.context());
    for c in ["web", "grpc"] {
        let s = container_status(&p, c);
        assert_eq!((s["restartCount"].as_i64(), s["state"]["terminated"]["exitCode"].as_i64()), (Some(0), Some(0)));
        assert!(messages(&o, &pod, c, "Killing").is_empty(), "no probe killed {c}: {}", o.context());
    }
    // Liveness over TCP never failed while the container ran; readiness may have failed before
    // httpd was up. A probe in flight as the container exits can still see its port closed (the
    // kubelet's probe worker has the same race), so one failure at the end is allowed.
    let liveness: Vec<Value> = o
        .events_with_reason(&pod, "spec.containers{web}", "Unhealthy")
        .into_iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with("Liveness")))
        .collect();
    assert!(count(&liveness) <= 1, "{liveness:?}\n{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn probe_failures_report_unhealthy_and_liveness_restarts_the_container() {
    let pod = pod_name("probes-fail");
    let grpc = grpc_health_server(9000, 2);
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 2
  volumes: [{{name: data, emptyDir: {{}}}}]
  containers:
  - name: app
    image: localhost/busybox:1.36
    volumeMounts: [{{name: data, mountPath: /data}}]
    command:
    - sh
    - -c
    - |
      trap "exit 0" TERM
      if [ -f /data/ran ]; then echo second run; exit 0; fi
      touch /data/ran
      while true; do sleep 0.2; done
    livenessProbe:
      exec: {{command: ['sh', '-c', 'echo not feeling well; exit 1']}}
      periodSeconds: 1
      failureThreshold: 2
  - name: web
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'mkdir -p /www && httpd -p 8080 -h /www && sleep 4']
    readinessProbe:
      httpGet: {{path: /missing, port: 8080}}
      initialDelaySeconds: 1
      periodSeconds: 1
  - name: grpc
    image: localhost/busybox:1.36
    command:
    - sh
    - -c
    - |
      {grpc}
      sleep 4
    readinessProbe:
      grpc: {{port: 9000}}
      initialDelaySeconds: 1
      periodSeconds: 1
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.single_pod();
    let app = container_status(&p, "app");
    assert_eq!(app["restartCount"], 1, "{}", o.context());
    assert_eq!(app["lastState"]["terminated"]["exitCode"], 0, "killed with TERM, trapped: {}", o.context());
    assert_eq!(o.output_of("app"), vec!["second run"], "{}", o.context());
    let killing = messages(&o, &pod, "app", "Killing");
    assert_eq!(killing, vec!["Container app failed liveness probe, will be restarted"], "{}", o.context());
    let unhealthy = o.events_with_reason(&pod, "spec.containers{app}", "Unhealthy");
    assert_eq!(unhealthy[0]["message"], "Liveness probe failed: not feeling well\n", "{}", o.context());
    assert!(count(&unhealthy) >= 2, "{}", o.context());
    assert_eq!(unhealthy[0]["type"], "Warning");
    // (Before a server listens, or when it exits, a probe may fail differently.)
    let web = messages(&o, &pod, "web", "Unhealthy");
    let not_found = "Readiness probe failed: HTTP probe failed with statuscode: 404";
    assert!(web.iter().any(|m| m == not_found), "{}", o.context());
    let grpc = messages(&o, &pod, "grpc", "Unhealthy");
    let not_serving = r#"Readiness probe failed: service unhealthy (responded with "NOT_SERVING")"#;
    assert!(grpc.iter().any(|m| m == not_serving), "{}", o.context());
    // Never ready: READY stays below 3/3 all along.
    assert!(o.progress(&pod).iter().all(|l| l.ready != "3/3" && l.ready != "2/3"), "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn exec_and_sleep_hooks_run_around_the_container() {
    let pod = pod_name("hooks-exec");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: localhost/busybox:1.36
    command:
    - sh
    - -c
    - |
      trap "cat /tmp/pre-stop; echo got TERM; exit 0" TERM
      while [ ! -f /tmp/post-start ]; do sleep 0.1; done
      echo saw $(cat /tmp/post-start)
      while true; do sleep 0.2; done
    lifecycle:
      postStart:
        exec: {{command: ['sh', '-c', 'echo post-start > /tmp/post-start']}}
      preStop:
        exec: {{command: ['sh', '-c', 'echo pre-stop ran > /tmp/pre-stop']}}
  - name: slow-stop
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done']
    lifecycle:
      preStop:
        sleep: {{seconds: 3}}
"#
        ),
        &[],
        "[app] saw post-start",
        Duration::from_secs(30),
    );
    o.assert_code(0);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("app"), vec!["saw post-start", "pre-stop ran", "got TERM"], "{}", o.context());
    // The sleep hook held TERM back for 3 s.
    let killing = &o.events_with_reason(&pod, "spec.containers{slow-stop}", "Killing")[0];
    let asked = rfc3339(killing["firstTimestamp"].as_str().unwrap());
    let finished = terminated_time(container_status(&p, "slow-stop"), "finishedAt");
    assert!((2..=5).contains(&(finished - asked)), "stopped {}s after Killing: {}", finished - asked, o.context());
    assert_nothing_left(&p);
}

#[test]
fn http_hooks_reach_a_server_in_the_pod() {
    let pod = pod_name("hooks-http");
    let answer = r"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let m = Manifest::new(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: server
    image: localhost/busybox:1.36
    restartPolicy: Always
    command: ['sh', '-c', 'trap "exit 0" TERM; nc -ll -p 8081 -e sh -c "read line; echo \"\${{line%?}}\" >&2; printf \"{answer}\"" & while true; do sleep 0.2; done']
    startupProbe:
      tcpSocket: {{port: 8081}}
      periodSeconds: 1
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'trap "exit 0" TERM; echo up; while true; do sleep 0.2; done']
    lifecycle:
      postStart:
        httpGet: {{path: /hello, port: 8081}}
      preStop:
        httpGet: {{path: /bye, port: 8081, httpHeaders: [{{name: X-From, value: app}}]}}
"#
    ));
    let mut r = Running::spawn(&run_args(m.path_str(), &[]), None);
    assert!(r.wait_for_stderr("[app] up", Duration::from_secs(30)), "{}", r.stderr_so_far());
    assert!(r.wait_for_stderr("GET /hello HTTP/1.1", Duration::from_secs(10)), "{}", r.stderr_so_far());
    r.signal(libc::SIGINT);
    let o = r.wait_within(Duration::from_secs(30));
    o.assert_code(0);
    let p = o.single_pod();
    // (Empty lines are the startup probe's bare TCP connections.)
    let requests: Vec<String> = o.output_of("server").into_iter().filter(|l| !l.is_empty()).collect();
    assert_eq!(requests, vec!["GET /hello HTTP/1.1", "GET /bye HTTP/1.1"], "{}", o.context());
    // The sidecar outlived the app it served.
    let (app, server) = (container_status(&p, "app"), container_status(&p, "server"));
    assert!(terminated_time(server, "finishedAt") >= terminated_time(app, "finishedAt"), "{}", o.context());
    assert!(o.events().iter().all(|e| e["reason"] != "FailedPreStopHook" && e["reason"] != "FailedPostStartHook"));
    assert_nothing_left(&p);
}

#[test]
fn a_pre_stop_hook_that_overruns_the_grace_period_is_cut_short_and_the_container_killed() {
    let pod = pod_name("prestop-overrun");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: stubborn
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'trap "" TERM; echo up; while true; do sleep 0.2; done']
    lifecycle:
      preStop:
        exec: {{command: ['sleep', '30']}}
"#
        ),
        &[],
        "[stubborn] up",
        Duration::from_secs(30),
    );
    o.assert_code(1);
    let p = o.single_pod();
    let s = container_status(&p, "stubborn");
    assert_eq!(s["state"]["terminated"]["exitCode"], 137, "{}", o.context());
    // 2 s for the hook, then the kubelet's minimum of 2 s between TERM and KILL.
    let asked = rfc3339(
        o.events_with_reason(&pod, "spec.containers{stubborn}", "Killing")[0]["firstTimestamp"].as_str().unwrap(),
    );
    let took = terminated_time(s, "finishedAt") - asked;
    assert!((3..=6).contains(&took), "killed {took}s after Killing: {}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn a_failing_post_start_hook_kills_the_container() {
    let pod = pod_name("poststart-fail");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'trap "exit 3" TERM; while true; do sleep 0.2; done']
    lifecycle:
      postStart:
        exec: {{command: ['sh', '-c', 'echo no; exit 1']}}
"#
        ),
        &[],
    );
    o.assert_code(1);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    assert_eq!(container_status(&p, "app")["state"]["terminated"]["exitCode"], 3, "{}", o.context());
    assert_eq!(messages(&o, &pod, "app", "FailedPostStartHook"), vec!["PostStartHook failed"], "{}", o.context());
    assert_eq!(messages(&o, &pod, "app", "Killing"), vec!["FailedPostStartHook"], "{}", o.context());
    assert!(!o.statuses(&pod).iter().any(|s| s == "Running"), "never Running: {}", o.context());
    assert_nothing_left(&p);
}

/// The example shipped in examples/web-with-sidecar.yaml: a sidecar server gated by its startup
/// probe, a client that uses it, and the sidecar stopped once the client is done.
#[test]
fn example_web_with_sidecar() {
    let file = workspace_dir().join("examples/web-with-sidecar.yaml");
    let o = run_file(file.to_str().unwrap(), &[]);
    o.assert_code(0);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("client"), vec!["hello from the sidecar"; 3], "{}", o.context());
    assert_eq!(o.output_of("web"), vec!["web: stopping"], "{}", o.context());
    let (web, client) = (container_status(&p, "web"), container_status(&p, "client"));
    assert!(terminated_time(web, "startedAt") <= terminated_time(client, "startedAt"), "{}", o.context());
    assert!(terminated_time(web, "finishedAt") >= terminated_time(client, "finishedAt"), "{}", o.context());
    assert_eq!(web["state"]["terminated"]["exitCode"], 0, "stopped by TERM, trapped: {}", o.context());
    // While the client ran, both were ready.
    assert!(
        o.progress("web-with-sidecar").iter().any(|l| l.status == "Running" && l.ready == "2/2"),
        "{}",
        o.context()
    );
    assert_nothing_left(&p);
}
