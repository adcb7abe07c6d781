//! Static pods under `podwright serve --pod-manifest-path`: files added, edited and removed
//! while the daemon runs, a broken file beside a good one, the mirror pod kubectl sees (deleting
//! it stops nothing), and a SIGKILLed daemon adopting the static pod's containers on restart.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::{ManifestDir, containers_with_label_at};
use std::path::Path;
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/busybox:1.36";
const NODE: &str = "e2e-static";
const MIRROR: &str = "{.metadata.annotations.kubernetes\\.io/config\\.mirror}";
const CONTAINER_ID: &str = "{.status.containerStatuses[0].containerID}";

fn web(command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', '{command}']\n"
    )
}

/// A daemon on a manifest directory. Static pods outlive a daemon stopped with SIGTERM (the
/// daemon's own drop deletes API pods only), so dropping this empties the directory first and
/// waits until the daemon has removed their pods, also when a test failed.
struct Static {
    d: Daemon,
    dir: ManifestDir,
}

impl Drop for Static {
    fn drop(&mut self) {
        self.dir.empty();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let out = self.d.kubectl(None, &["get", "pods", "-A", "-o", "name"]);
            if out.status.success() && out.stdout.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn start(dir: ManifestDir) -> Static {
    let d = Daemon::start_with(&["--pod-manifest-path", dir.arg(), "--hostname-override", NODE]);
    Static { d, dir }
}

fn jsonpath(d: &Daemon, name: &str, path: &str) -> String {
    d.ok(&["get", "pod", name, "-o", &format!("jsonpath={path}")])
}

/// Waits until the pod `name` runs its container, with the mirror annotation not `old_hash`;
/// returns (config hash, container ID).
fn wait_running(d: &Daemon, name: &str, old_hash: &str) -> (String, String) {
    let path = format!("jsonpath={MIRROR} {CONTAINER_ID} {{.status.containerStatuses[0].ready}}");
    let out = d.wait_for(&["get", "pod", name, "-o", &path], Duration::from_secs(60), |o| {
        let f: Vec<&str> = o.split_whitespace().collect();
        f.len() == 3 && f[0] != old_hash && f[2] == "true"
    });
    let f: Vec<&str> = out.split_whitespace().collect();
    (f[0].to_string(), f[1].to_string())
}

/// Whether containerd holds a container or sandbox of pod `uid`.
fn holds(d: &Daemon, uid: &str) -> bool {
    let socket = d.endpoint().trim_start_matches("unix://");
    !containers_with_label_at(Path::new(socket), "io.kubernetes.pod.uid", uid).is_empty()
}

fn wait_removed(d: &Daemon, uid: &str) {
    let start = Instant::now();
    while holds(d, uid) {
        assert!(start.elapsed() < Duration::from_secs(30), "pod {uid} is still in containerd\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_gone(d: &Daemon, name: &str) {
    d.wait_for(&["get", "pods", "-o", "name"], Duration::from_secs(30), |o| !o.contains(name));
}

#[test]
fn static_pods_follow_their_files_and_their_mirror_pods_are_shown_and_made_again() {
    let dir = ManifestDir::new("static");
    let broken = dir.0.join("broken.yaml");
    std::fs::write(&broken, "apiVersion: v1\nkind: Pod\nmetadata:\n  nmae: broken\nspec: {}\n").unwrap();
    let file = dir.0.join("web.yaml");
    let s = start(dir);
    let d = &s.d;
    let name = format!("web-{NODE}");

    // Added while the daemon runs.
    std::fs::write(&file, web("trap \"exit 0\" TERM; sleep 3600 & wait")).unwrap();
    let (hash, id) = wait_running(d, &name, "");
    let row = d.ok(&["get", "pods", "--no-headers"]);
    assert!(row.starts_with(&format!("{name} ")) && row.contains("1/1") && row.contains("Running"), "{row}");
    assert_eq!(jsonpath(d, &name, "{.metadata.annotations.kubernetes\\.io/config\\.source}"), "file");
    assert_eq!(jsonpath(d, &name, "{.metadata.annotations.kubernetes\\.io/config\\.hash}"), hash);
    assert_eq!(
        jsonpath(d, &name, "{.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].name}"),
        format!("Node {NODE}")
    );
    assert_eq!(jsonpath(d, &name, "{.spec.nodeName}"), NODE);
    assert_ne!(jsonpath(d, &name, "{.metadata.uid}"), hash, "the mirror has a UID of its own");
    let log = d.log();
    let named = format!("{}:4:3: document 1: metadata.nmae: unknown field", broken.display());
    assert!(log.contains(&named), "the daemon log names the broken file and its line ({named}):\n{log}");

    // Deleting the mirror pod stops nothing; the mirror comes back.
    let mirror_uid = jsonpath(d, &name, "{.metadata.uid}");
    d.ok(&["delete", "pod", &name]);
    let again = d.wait_for(&["get", "pod", &name, "-o", "jsonpath={.metadata.uid}"], Duration::from_secs(30), |o| {
        !o.is_empty() && o != mirror_uid
    });
    assert_ne!(again, mirror_uid);
    assert_eq!(wait_running(d, &name, ""), (hash.clone(), id.clone()), "the static pod went on in the same container");

    // Edited: a new UID, the old pod stopped and removed, the new one running.
    std::fs::write(&file, web("trap \"exit 0\" TERM; echo edited; sleep 3600 & wait")).unwrap();
    let (new_hash, new_id) = wait_running(d, &name, &hash);
    assert_ne!(new_id, id, "a new container for the new pod");
    wait_removed(d, &hash);
    assert!(holds(d, &new_hash));
    let logs = d.ok(&["logs", &name]);
    assert_eq!(logs.trim(), "edited", "logs of the mirror are the static pod's");

    // Removed: gone from containerd and from the API.
    std::fs::remove_file(&file).unwrap();
    wait_gone(d, &name);
    wait_removed(d, &new_hash);
}

#[test]
fn a_restarted_daemon_adopts_the_static_pods_containers() {
    let dir = ManifestDir::new("static");
    let file = dir.0.join("web.yaml");
    std::fs::write(&file, web("trap \"exit 0\" TERM; sleep 3600 & wait")).unwrap();
    let mut s = start(dir);
    let d = &mut s.d;
    let name = format!("web-{NODE}");
    let (hash, id) = wait_running(d, &name, "");
    let mirror_uid = jsonpath(d, &name, "{.metadata.uid}");

    d.crash_and_restart();
    let (hash_after, id_after) = wait_running(d, &name, "");
    assert_eq!((hash_after, id_after), (hash.clone(), id), "the same pod in the same container");
    assert_eq!(jsonpath(d, &name, "{.status.containerStatuses[0].restartCount}"), "0");
    assert_eq!(jsonpath(d, &name, "{.metadata.uid}"), mirror_uid, "the mirror pod is kept");

    std::fs::remove_file(&file).unwrap();
    wait_gone(d, &name);
    wait_removed(d, &hash);
    assert!(text(&d.kubectl(None, &["get", "pods", "-o", "name"]).stdout).is_empty());
}

/// Since 1.37 a static pod may not reference objects of the API: a file naming a Secret gives
/// no pod, and the daemon's log says why in the kubelet's words, beside a good file that runs.
#[test]
fn a_static_pod_that_references_a_secret_is_refused() {
    let dir = ManifestDir::new("static-refs");
    let secret = dir.0.join("secret.yaml");
    std::fs::write(
        &secret,
        web("sleep 3600").replace("  containers:", "  imagePullSecrets: [{name: registry-login}]\n  containers:"),
    )
    .unwrap();
    std::fs::write(
        dir.0.join("web.yaml"),
        web("trap \"exit 0\" TERM; sleep 3600 & wait").replace("name: web", "name: good"),
    )
    .unwrap();
    let s = start(dir);
    let d = &s.d;
    wait_running(d, &format!("good-{NODE}"), "");
    let refused = format!("{}: static pods may not reference secrets", secret.display());
    let start = Instant::now();
    while !d.log().contains(&refused) {
        assert!(start.elapsed() < Duration::from_secs(30), "the log says why ({refused}):\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let pods = d.ok(&["get", "pods", "-o", "name"]);
    assert_eq!(pods.trim(), format!("pod/good-{NODE}"), "no pod for the refused file");
}
