//! The benchmark's pods: two init containers that exit 0 at once, and one app container that
//! does too (or, for `serve`, runs until stopped).

use k8s_openapi::api::core::v1::Pod;

pub const IMAGE: &str = "localhost/busybox:1.36";

const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: bench
  namespace: default
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  initContainers:
  - {name: init1, image: localhost/busybox:1.36, command: [sh, -c, "exit 0"]}
  - {name: init2, image: localhost/busybox:1.36, command: [sh, -c, "exit 0"]}
  containers:
  - {name: app, image: localhost/busybox:1.36, command: [sh, -c, "exit 0"]}
"#;

/// The `serve` benchmark's pod, named `name`: the same init containers, and an app container
/// that runs until it is stopped (the pod stays Running).
pub fn running_manifest(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  initContainers:
  - {{name: init1, image: {IMAGE}, command: [sh, -c, "exit 0"]}}
  - {{name: init2, image: {IMAGE}, command: [sh, -c, "exit 0"]}}
  containers:
  - {{name: app, image: {IMAGE}, command: [sleep, "3600"]}}
"#
    )
}

/// The `pulls` benchmark's pod: one container of `image` that runs until it is stopped.
pub fn pull_template(image: &str) -> Result<Pod, String> {
    load(&format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: bench
  namespace: default
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 0
  containers:
  - {{name: app, image: "{image}", command: [sleep, "3600"]}}
"#
    ))
}

/// The admitted (defaulted, validated) template; give each copy its own name and uid.
pub fn template() -> Result<Pod, String> {
    load(MANIFEST)
}

/// [`running_manifest`] admitted, as [`template`].
pub fn running_template() -> Result<Pod, String> {
    load(&running_manifest("bench"))
}

fn load(manifest: &str) -> Result<Pod, String> {
    let mut pods = podwright_api::load_str("bench-pod.yaml", manifest)
        .map_err(|e| format!("the benchmark pod does not load: {e}"))?
        .pods;
    match pods.pop() {
        Some((pod, _warnings)) if pods.is_empty() => Ok(pod),
        _ => Err("the benchmark manifest must hold exactly one pod".into()),
    }
}

/// A copy of `template` named `name` with a fresh, unique uid.
pub fn instance(template: &Pod, name: &str) -> Pod {
    let mut pod = template.clone();
    pod.metadata.name = Some(name.to_string());
    pod.metadata.uid = Some(unique_uid());
    pod
}

/// `bench-<start of this process in ns, hex>-<n>`: unique within and across runs.
fn unique_uid() -> String {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    // The real wall clock (not engine time) makes the uids unique across runs.
    #[allow(clippy::disallowed_methods)]
    static START: LazyLock<i128> = LazyLock::new(|| jiff::Timestamp::now().as_nanosecond());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("bench-{:x}-{}", *START, NEXT.fetch_add(1, Ordering::Relaxed))
}
