//! The init containers walk-through of the Kubernetes documentation, word for word with the
//! machine's unmodified kubectl against `podwright serve` on real containerd: the pod waits in
//! `Init:0/2` while its init containers look `myservice` and `mydb` up in the cluster DNS, and
//! runs once `kubectl create -f services.yaml` has made them. Only the image differs
//! (`localhost/busybox:1.36`: nothing can be pulled from Docker Hub here).

// Waits for a real pod: real time.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// The documentation's myapp.yaml, with the image replaced.
const MYAPP_YAML: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: myapp-pod
  labels:
    app: myapp
spec:
  containers:
  - name: myapp-container
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
  initContainers:
  - name: init-myservice
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'until nslookup myservice; do echo waiting for myservice; sleep 2; done;']
  - name: init-mydb
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'until nslookup mydb; do echo waiting for mydb; sleep 2; done;']
";

/// The documentation's services.yaml, as written.
const SERVICES_YAML: &str = "\
kind: Service
apiVersion: v1
metadata:
  name: myservice
spec:
  ports:
    - protocol: TCP
      port: 80
      targetPort: 9376
---
kind: Service
apiVersion: v1
metadata:
  name: mydb
spec:
  ports:
    - protocol: TCP
      port: 80
      targetPort: 9377
";

/// Long enough for a loaded machine; the pod usually waits a few seconds.
const LIMIT: Duration = Duration::from_secs(60);

/// kubectl with `args` in `dir` (where the walk-through's files are), as the doc types it.
fn kubectl_in(d: &Daemon, dir: &Path, args: &[&str]) -> Output {
    d.kubectl_cmd(None, args).current_dir(dir).output().expect("kubectl runs")
}

fn ok_in(d: &Daemon, dir: &Path, args: &[&str]) -> String {
    let out = kubectl_in(d, dir, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}\n--- daemon log:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        d.log()
    );
    text(&out.stdout)
}

/// Polls kubectl in `dir` until its stdout satisfies `done`, at most [`LIMIT`].
fn wait_in(d: &Daemon, dir: &Path, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let out = text(&kubectl_in(d, dir, args).stdout);
        if done(&out) {
            return out;
        }
        assert!(
            start.elapsed() < LIMIT,
            "kubectl {args:?} never got there; last output:\n{out}\n--- daemon log:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Each line with its runs of spaces made one (kubectl aligns columns).
fn squeezed(s: &str) -> Vec<String> {
    s.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
}

/// The lines of `describe` under the container `name` (up to the next container or section).
fn container_section(describe: &str, name: &str) -> Vec<String> {
    let lines: Vec<&str> = describe.lines().collect();
    let header = format!("  {name}:");
    let start = lines.iter().position(|l| *l == header).unwrap_or_else(|| panic!("no {name} in:\n{describe}"));
    let rest = &lines[start + 1..];
    let end = rest.iter().position(|l| !l.starts_with("   ")).unwrap_or(rest.len());
    squeezed(&rest[..end].join("\n"))
}

/// `state` and what follows it up to `Ready:` in a container's section, as one line.
fn state_of(section: &[String]) -> String {
    let start = section.iter().position(|l| l.starts_with("State:")).expect("a State line");
    let end = section.iter().position(|l| l.starts_with("Ready:")).expect("a Ready line");
    section[start..=end].iter().filter(|l| !l.starts_with("Started:")).cloned().collect::<Vec<_>>().join(" / ")
}

/// `myapp-pod 1/1 Running 0 9m` → `["myapp-pod", "1/1", "Running", "0"]` (the age goes).
fn row_of(get: &str) -> Vec<String> {
    let lines = squeezed(get);
    assert_eq!(lines.first().map(String::as_str), Some("NAME READY STATUS RESTARTS AGE"), "{get}");
    let row = lines.get(1).unwrap_or_else(|| panic!("no row in:\n{get}"));
    row.split(' ').take(4).map(str::to_string).collect()
}

#[test]
fn the_documentations_init_containers_walk_through() {
    let d = Daemon::start();
    assert!(
        !d.log().contains("cannot serve cluster DNS"),
        "the daemon has no cluster DNS (another podwright serve on this machine holds the pod bridge's port 53?):\n{}",
        d.log()
    );
    let dir = d.root.join("walkthrough");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("myapp.yaml"), MYAPP_YAML).unwrap();
    std::fs::write(dir.join("services.yaml"), SERVICES_YAML).unwrap();

    let created = ok_in(&d, &dir, &["create", "-f", "myapp.yaml"]);
    assert_eq!(created.trim(), "pod/myapp-pod created");

    // init-myservice runs and keeps asking: myservice is not in the cluster DNS yet.
    let logs =
        wait_in(&d, &dir, &["logs", "myapp-pod", "-c", "init-myservice"], |out| out.contains("waiting for myservice"));
    assert!(logs.contains("can't find myservice.default.svc.cluster.local: NXDOMAIN"), "{logs}");
    let get = ok_in(&d, &dir, &["get", "-f", "myapp.yaml"]);
    assert_eq!(row_of(&get), ["myapp-pod", "0/1", "Init:0/2", "0"], "{get}");

    let describe = ok_in(&d, &dir, &["describe", "-f", "myapp.yaml"]);
    let top = squeezed(&describe);
    for line in [
        "Name: myapp-pod",
        "Namespace: default",
        "Labels: app=myapp",
        "Status: Pending",
        "Init Containers:",
        "Containers:",
        "Events:",
    ] {
        assert!(top.iter().any(|l| l == line), "no {line:?} in:\n{describe}");
    }
    assert_eq!(
        state_of(&container_section(&describe, "init-myservice")),
        "State: Running / Ready: False",
        "{describe}"
    );
    let waiting = "State: Waiting / Reason: PodInitializing / Ready: False";
    assert_eq!(state_of(&container_section(&describe, "init-mydb")), waiting, "{describe}");
    assert_eq!(state_of(&container_section(&describe, "myapp-container")), waiting, "{describe}");
    let events = &top[top.iter().position(|l| l == "Events:").unwrap()..];
    let event = |reason: &str, message: &str| {
        assert!(
            events.iter().any(|l| l.starts_with(&format!("Normal {reason} ")) && l.ends_with(message)),
            "no {reason} event {message:?} in:\n{describe}"
        )
    };
    event(
        "Pulled",
        "kubelet Container image \"localhost/busybox:1.36\" already present on machine and can be accessed by the pod",
    );
    event("Created", "kubelet Created container: init-myservice");
    event("Started", "kubelet Started container init-myservice");

    let created = ok_in(&d, &dir, &["create", "-f", "services.yaml"]);
    assert_eq!(squeezed(&created), ["service/myservice created", "service/mydb created"]);

    let running = wait_in(&d, &dir, &["get", "-f", "myapp.yaml"], |out| {
        out.lines().nth(1).is_some_and(|l| l.contains("Running"))
    });
    assert_eq!(row_of(&running), ["myapp-pod", "1/1", "Running", "0"], "{running}");
    // Both init containers found their service at its cluster IP.
    for (container, service) in [("init-myservice", "myservice"), ("init-mydb", "mydb")] {
        let ip = ok_in(&d, &dir, &["get", "service", service, "-o", "jsonpath={.spec.clusterIP}"]);
        let logs = ok_in(&d, &dir, &["logs", "myapp-pod", "-c", container]);
        let found = format!("Name:\t{service}.default.svc.cluster.local\nAddress: {ip}\n");
        assert!(logs.contains(&found), "{container} did not find {service} at {ip}:\n{logs}");
    }
    assert_eq!(ok_in(&d, &dir, &["logs", "myapp-pod"]), "The app is running!\n");

    ok_in(&d, &dir, &["delete", "pod", "myapp-pod", "--grace-period=0", "--force"]);
    let deleted = ok_in(&d, &dir, &["delete", "-f", "services.yaml"]);
    assert_eq!(squeezed(&deleted), ["service \"myservice\" deleted", "service \"mydb\" deleted"]);
}
