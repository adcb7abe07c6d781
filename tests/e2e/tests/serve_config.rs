//! What a container sees of ConfigMaps, Secrets and the downward API, through `podwright serve`
//! and kubectl: the init-containers proposal's templating use case (an init container renders a
//! config file into a shared volume for the app), environment from every kind of source, files
//! that follow their ConfigMap while the pod runs, secrets on tmpfs with their modes, and pods
//! that wait for a missing object and go on once it is created.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::Manifest;
use podwright_e2e::serve::{Daemon, text};
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/busybox:1.36";

fn apply(d: &Daemon, yaml: &str) {
    let m = Manifest::new(yaml);
    d.ok(&["apply", "-f", m.path_str()]);
}

fn wait_running(d: &Daemon, name: &str) {
    d.wait_for(&["get", "pod", name, "--no-headers"], Duration::from_secs(60), |o| o.contains("Running"));
}

fn exec(d: &Daemon, pod: &str, cmd: &[&str]) -> String {
    let mut args = vec!["exec", pod, "--"];
    args.extend_from_slice(cmd);
    d.ok(&args)
}

#[test]
fn an_init_container_renders_the_apps_config_from_a_config_map_a_secret_and_the_downward_api() {
    let d = Daemon::start();
    apply(
        &d,
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: app-template}
data:
  template: "greeting=GREETING password=PASSWORD"
  greeting: hello
  1bad: skipped
---
apiVersion: v1
kind: Secret
metadata: {name: app-creds}
stringData: {password: s3cr3t}
"#,
    );
    apply(
        &d,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: templating
  labels: {{app: web, tier: front}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: rendered, emptyDir: {{}}}}
  - {{name: tmpl, configMap: {{name: app-template, items: [{{key: template, path: app.tmpl}}]}}}}
  - name: info
    downwardAPI:
      items:
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: mem, resourceFieldRef: {{containerName: app, resource: limits.memory, divisor: 1Mi}}}}
  initContainers:
  - name: render
    image: {IMAGE}
    envFrom: [{{configMapRef: {{name: app-template}}}}]
    env:
    - {{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: app-creds, key: password}}}}}}
    - {{name: GREETING_TOO, value: "$(greeting)!"}}
    command: ['sh', '-c', 'sed "s/GREETING/$GREETING_TOO/; s/PASSWORD/$PASSWORD/" /tmpl/app.tmpl > /rendered/app.conf']
    volumeMounts:
    - {{name: rendered, mountPath: /rendered}}
    - {{name: tmpl, mountPath: /tmpl}}
  containers:
  - name: app
    image: {IMAGE}
    command: ['sh', '-c', 'cat /config/app.conf; echo; echo "$POD_NAME $POD_IP $NODE"; sleep 3600']
    resources: {{limits: {{memory: 64Mi}}}}
    env:
    - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
    - {{name: NODE, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}
    volumeMounts:
    - {{name: rendered, mountPath: /config, readOnly: true}}
    - {{name: info, mountPath: /etc/podinfo}}
"#
        ),
    );
    wait_running(&d, "templating");
    let logs = d.ok(&["logs", "templating", "-c", "app"]);
    assert!(logs.contains("greeting=hello! password=s3cr3t"), "{logs}");
    let ip = d.ok(&["get", "pod", "templating", "-o", "jsonpath={.status.podIP}"]);
    assert!(logs.contains(&format!("templating {ip} ")), "{logs}");
    assert_eq!(exec(&d, "templating", &["cat", "/etc/podinfo/labels"]), "app=\"web\"\ntier=\"front\"");
    assert_eq!(exec(&d, "templating", &["cat", "/etc/podinfo/mem"]), "64");
    // The key that is no variable name was skipped, with the kubelet's event.
    let events = d.ok(&["get", "events", "--field-selector", "involvedObject.name=templating"]);
    assert!(events.contains("InvalidEnvironmentVariableNames"), "{events}");
    assert!(events.contains("Keys [1bad] from the EnvFrom configMap default/app-template were skipped"), "{events}");
    // Volumes of objects are read-only.
    let write = d.kubectl(None, &["exec", "templating", "--", "sh", "-c", "echo x > /etc/podinfo/new"]);
    assert!(!write.status.success(), "wrote into a downward API volume");
    assert!(!events.contains("s3cr3t"), "the secret's value is in an event");
}

#[test]
fn a_config_map_volume_follows_its_object_atomically_while_the_pod_runs() {
    let d = Daemon::start();
    apply(&d, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: live}\ndata: {setting: one, other: kept}\n");
    apply(
        &d,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: follower}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: cfg, configMap: {{name: live}}}}]
  containers:
  - name: app
    image: {IMAGE}
    command: ['sleep', '3600']
    volumeMounts: [{{name: cfg, mountPath: /etc/live}}]
"#
        ),
    );
    wait_running(&d, "follower");
    assert_eq!(exec(&d, "follower", &["cat", "/etc/live/setting"]), "one");
    let before = exec(&d, "follower", &["readlink", "/etc/live/..data"]);
    assert!(before.starts_with("..20"), "{before}");
    assert_eq!(exec(&d, "follower", &["readlink", "/etc/live/setting"]).trim(), "..data/setting");

    apply(&d, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: live}\ndata: {setting: two, added: new}\n");
    let start = Instant::now();
    while exec(&d, "follower", &["cat", "/etc/live/setting"]) != "two" {
        assert!(start.elapsed() < Duration::from_secs(20), "the file never followed its ConfigMap\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    // One switch of `..data`: the new version whole, the removed key gone, the old version gone.
    assert_eq!(exec(&d, "follower", &["cat", "/etc/live/added"]), "new");
    let listing = exec(&d, "follower", &["ls", "-a", "/etc/live"]);
    assert!(!listing.contains("other"), "{listing}");
    assert!(!listing.contains(before.trim()), "{listing}");
    assert_ne!(exec(&d, "follower", &["readlink", "/etc/live/..data"]), before);
}

#[test]
fn secret_files_are_on_tmpfs_with_their_modes_and_projected_volumes_combine_sources() {
    let d = Daemon::start();
    apply(
        &d,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {id: abc, key: xyz}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {note: hi}\n",
    );
    apply(
        &d,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: secretive}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: keys, secret: {{secretName: keys, defaultMode: 0400, items: [{{key: key, path: private/key, mode: 0600}}, {{key: id, path: id}}]}}}}
  - name: all
    projected:
      sources:
      - {{secret: {{name: keys}}}}
      - {{configMap: {{name: extra}}}}
      - {{downwardAPI: {{items: [{{path: name, fieldRef: {{fieldPath: metadata.name}}}}]}}}}
  containers:
  - name: app
    image: {IMAGE}
    command: ['sleep', '3600']
    volumeMounts:
    - {{name: keys, mountPath: /etc/keys}}
    - {{name: all, mountPath: /etc/all}}
"#
        ),
    );
    wait_running(&d, "secretive");
    let mounts = exec(&d, "secretive", &["cat", "/proc/mounts"]);
    for path in ["/etc/keys", "/etc/all"] {
        let line = mounts.lines().find(|l| l.split(' ').nth(1) == Some(path)).unwrap_or_default();
        assert!(line.starts_with("tmpfs "), "{path} is not on tmpfs: {line:?}\n{mounts}");
        assert!(line.contains(" ro,") || line.contains(" ro "), "{path} is writable: {line}");
    }
    let modes = exec(&d, "secretive", &["stat", "-L", "-c", "%a %n", "/etc/keys/id", "/etc/keys/private/key"]);
    assert_eq!(modes.trim(), "400 /etc/keys/id\n600 /etc/keys/private/key");
    assert_eq!(exec(&d, "secretive", &["cat", "/etc/keys/private/key"]), "xyz");
    let all = exec(&d, "secretive", &["sh", "-c", "cat /etc/all/id /etc/all/note /etc/all/name"]);
    assert_eq!(all, "abchisecretive");

    // The secret's tmpfs goes with the pod.
    let uid = d.ok(&["get", "pod", "secretive", "-o", "jsonpath={.metadata.uid}"]);
    d.ok(&["delete", "pod", "secretive", "--wait=true"]);
    let pod_dir = d.root.join("pods").join(&uid);
    let start = Instant::now();
    while std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&*pod_dir.to_string_lossy()) {
        assert!(start.elapsed() < Duration::from_secs(10), "the pod's tmpfs stayed mounted");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_pod_waits_for_missing_objects_with_the_kubelets_reasons_and_goes_on_once_they_exist() {
    let d = Daemon::start();
    apply(
        &d,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: waits-env}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {IMAGE}
    command: ['sh', '-c', 'echo "mode=$MODE"; sleep 3600']
    env: [{{name: MODE, valueFrom: {{configMapKeyRef: {{name: late-env, key: mode}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: waits-volume}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: cfg, configMap: {{name: late-volume}}}}]
  containers:
  - name: app
    image: {IMAGE}
    command: ['sleep', '3600']
    volumeMounts: [{{name: cfg, mountPath: /etc/late}}]
"#
        ),
    );
    let waiting = d.wait_for(
        &["get", "pod", "waits-env", "-o", "jsonpath={.status.containerStatuses[0].state.waiting}"],
        Duration::from_secs(30),
        |o| o.contains("CreateContainerConfigError"),
    );
    assert!(
        waiting.contains(r#"configmap \"late-env\" not found"#) || waiting.contains("configmap \"late-env\" not found"),
        "{waiting}"
    );
    d.wait_for(
        &["get", "events", "--field-selector", "involvedObject.name=waits-volume"],
        Duration::from_secs(30),
        |o| {
            o.contains("FailedMount")
                && o.contains("MountVolume.SetUp failed for volume \"cfg\" : configmap \"late-volume\" not found")
        },
    );
    let status = text(&d.kubectl(None, &["get", "pod", "waits-volume", "--no-headers"]).stdout);
    assert!(status.contains("ContainerCreating"), "{status}");

    apply(
        &d,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late-env}\ndata: {mode: fast}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late-volume}\ndata: {x: \"yes\"}\n",
    );
    // Created: both go on at once, well before any retry timer of theirs.
    let start = Instant::now();
    wait_running(&d, "waits-env");
    wait_running(&d, "waits-volume");
    assert!(start.elapsed() < Duration::from_secs(8), "took {:?} to go on", start.elapsed());
    d.wait_for(&["logs", "waits-env"], Duration::from_secs(10), |o| o.contains("mode=fast"));
    assert_eq!(exec(&d, "waits-volume", &["cat", "/etc/late/x"]), "yes");
}

#[test]
fn a_finished_pods_secret_leaves_memory_while_its_logs_stay() {
    let d = Daemon::start();
    apply(&d, "apiVersion: v1\nkind: Secret\nmetadata: {name: once}\nstringData: {id: abc}\n");
    apply(
        &d,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: one-shot}}
spec:
  restartPolicy: Never
  volumes: [{{name: keys, secret: {{secretName: once}}}}]
  containers:
  - name: app
    image: {IMAGE}
    command: ['sh', '-c', 'wc -c < /etc/keys/id']
    volumeMounts: [{{name: keys, mountPath: /etc/keys}}]
"#
        ),
    );
    d.wait_for(&["get", "pod", "one-shot", "--no-headers"], Duration::from_secs(60), |o| o.contains("Completed"));
    let uid = d.ok(&["get", "pod", "one-shot", "-o", "jsonpath={.metadata.uid}"]);
    let pod_dir = d.root.join("pods").join(&uid);
    let start = Instant::now();
    while std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&*pod_dir.to_string_lossy()) {
        assert!(start.elapsed() < Duration::from_secs(10), "the finished pod's secret stayed mounted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(d.ok(&["logs", "one-shot"]).trim(), "3");
}
