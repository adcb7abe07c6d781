//! Volumes on the node in virtual time: a hostPath whose type check fails holds the pod back
//! and lets it go once the path is right; an emptyDir over its size limit, or a container over
//! its `ephemeral-storage` limit, gets the pod evicted.

mod common;
use common::*;
use podwright_runtime::fake::Call;
use std::time::Duration;

fn events(sim: &Sim, reason: &str) -> Vec<(String, String, i32)> {
    sim.events
        .snapshot()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default(), e.count.unwrap_or(0)))
        .collect()
}

fn scratch(sim: &Sim, name: &str) -> std::path::PathBuf {
    let dir = sim.root().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(start_paused = true)]
async fn a_hostpath_of_the_wrong_type_holds_the_pod_back_until_it_is_right() {
    let sim = Sim::new();
    let wanted = scratch(&sim, "host").join("later");
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "containers": [{"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "hostPath": {"path": wanted, "type": "Directory"}}],
    }));
    let make = wanted.clone();
    let steps: Vec<(f64, Step)> = vec![(15.0, Box::new(move |_| std::fs::create_dir(&make).unwrap()))];
    let history = sim.run_steps(p, Duration::from_secs(30), steps).await;

    // Refused at 0 s and at the retry 10 s later, then started at the retry after the
    // directory appeared.
    let message = format!(
        "MountVolume.SetUp failed for volume \"data\" : hostPath type check failed: {} is not a directory",
        wanted.display()
    );
    assert_eq!(events(&sim, "FailedMount"), vec![("Warning".to_string(), message, 2)]);
    let held: Vec<&str> = history.iter().take_while(|(t, _)| *t < 20.0).map(|(_, p)| phase(p)).collect();
    assert!(held.iter().all(|p| *p == "Pending"), "{held:?}");
    assert_eq!(waiting(app(&history[0].1)), Some("ContainerCreating"));
    assert_eq!(sim.starts().iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![20.0]);
    let sandboxes = sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::RunPodSandbox { .. })).count();
    assert_eq!(sandboxes, 1, "a sandbox is made once the volume is ready, not before");
}

/// The pod's emptyDir `cache` on the node.
fn cache_dir(sim: &Sim, uid: &str) -> std::path::PathBuf {
    podwright_node::layout::empty_dir(sim.root(), uid, "cache")
}

fn limited_pod(limit: &str) -> k8s_openapi::api::core::v1::Pod {
    pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}],
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": limit}}],
    }))
}

#[tokio::test(start_paused = true)]
async fn an_emptydir_over_its_limit_gets_the_pod_evicted() {
    let sim = Sim::new();
    let p = limited_pod("64Ki");
    let dir = cache_dir(&sim, p.metadata.uid.as_deref().unwrap());
    let fill: Step = Box::new(move |_| std::fs::write(dir.join("big"), vec![1u8; 256 * 1024]).unwrap());
    let history = sim.run_steps(p, Duration::from_secs(60), vec![(3.0, fill)]).await;

    let message = "Usage of EmptyDir volume \"cache\" exceeds the limit \"64Ki\". ";
    assert_eq!(events(&sim, "Evicted"), vec![("Warning".to_string(), message.to_string(), 1)]);
    let last = &history.last().unwrap().1;
    let status = last.status.as_ref().unwrap();
    assert_eq!(
        (status.phase.as_deref(), status.reason.as_deref(), status.message.as_deref()),
        (Some("Failed"), Some("Evicted"), Some(message))
    );
    // Found at the first measurement after the write, 10 s in; stopped with the eviction's
    // grace period, not the pod's 30 s, and not restarted under Always.
    let stops: Vec<(f64, u64)> = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            Call::StopContainer { timeout, .. } => Some((sim.at(t), timeout.as_secs())),
            _ => None,
        })
        .collect();
    assert_eq!(stops, vec![(10.0, 2)]);
    assert_eq!(sim.starts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_emptydir_within_its_limit_is_left_alone() {
    let sim = Sim::new();
    let p = limited_pod("1Mi");
    let dir = cache_dir(&sim, p.metadata.uid.as_deref().unwrap());
    let fill: Step = Box::new(move |_| std::fs::write(dir.join("small"), vec![1u8; 64 * 1024]).unwrap());
    let history = sim.run_steps(p, Duration::from_secs(45), vec![(3.0, fill)]).await;
    assert_eq!(events(&sim, "Evicted"), vec![]);
    // Deleted at the end of the run, not evicted.
    let status = history.last().unwrap().1.status.clone().unwrap();
    assert_eq!(status.reason, None);
}

/// `app` limited to 8Mi of ephemeral storage, and beside it, when `roomy`, a container limited
/// to 64Mi that writes nothing.
fn storage_limited_pod(roomy: bool) -> k8s_openapi::api::core::v1::Pod {
    let limited = |name: &str, limit: &str| serde_json::json!({"name": name, "resources": {"limits": {"ephemeral-storage": limit}}});
    let mut containers = vec![limited("app", "8Mi")];
    if roomy {
        containers.push(limited("roomy", "64Mi"));
    }
    pod_with(serde_json::json!({"restartPolicy": "Always", "containers": containers}))
}

/// The pod's status and its stops' times once `app`'s writable layer grows to 16Mi at 13 s.
async fn fill_app(p: k8s_openapi::api::core::v1::Pod) -> (Sim, k8s_openapi::api::core::v1::PodStatus, Vec<f64>) {
    let sim = Sim::new();
    let fake = sim.fake.clone();
    let fill: Step = Box::new(move |_| fake.set_writable_layer("app", 16 << 20));
    let history = sim.run_steps(p, Duration::from_secs(60), vec![(13.0, fill)]).await;
    let status = history.last().unwrap().1.status.clone().unwrap();
    let stops = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(t, c)| matches!(c, Call::StopContainer { .. }).then(|| sim.at(t)))
        .collect();
    (sim, status, stops)
}

fn assert_evicted(sim: &Sim, status: &k8s_openapi::api::core::v1::PodStatus, message: &str) {
    assert_eq!(events(sim, "Evicted"), vec![("Warning".to_string(), message.to_string(), 1)]);
    assert_eq!(
        (status.phase.as_deref(), status.reason.as_deref(), status.message.as_deref()),
        (Some("Failed"), Some("Evicted"), Some(message))
    );
    // No DisruptionTarget: the local-storage checks give `evictPod` no condition.
    let conditions = status.conditions.clone().unwrap_or_default();
    assert!(conditions.iter().all(|c| c.type_ != "DisruptionTarget"), "{conditions:?}");
}

/// The only container over its limit puts the pod over its containers' limits together, which
/// the kubelet checks first: the pod's message. Measured every 10 s, the write at 13 s is found
/// at 20 s; not restarted under Always.
#[tokio::test(start_paused = true)]
async fn a_lone_container_over_its_ephemeral_storage_limit_gets_the_pod_evicted() {
    let (sim, status, stops) = fill_app(storage_limited_pod(false)).await;
    assert_evicted(&sim, &status, "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. ");
    assert_eq!(stops, vec![20.0]);
    assert_eq!(sim.starts().len(), 1);
}

/// With room left in the pod's total, the container's own limit evicts, in its words.
#[tokio::test(start_paused = true)]
async fn a_container_over_its_own_limit_within_the_pods_gets_the_pod_evicted() {
    let (sim, status, stops) = fill_app(storage_limited_pod(true)).await;
    assert_evicted(&sim, &status, "Container app exceeded its local ephemeral storage limit \"8Mi\". ");
    assert_eq!(stops, vec![20.0, 20.0]);
}

/// Within its limit (the layer and no logs), the container runs on.
#[tokio::test(start_paused = true)]
async fn a_container_within_its_ephemeral_storage_limit_is_left_alone() {
    let sim = Sim::new();
    sim.fake.set_writable_layer("app", 4 << 20);
    let history = sim.run_steps(storage_limited_pod(false), Duration::from_secs(45), vec![]).await;
    assert_eq!(events(&sim, "Evicted"), vec![]);
    assert_eq!(history.last().unwrap().1.status.clone().unwrap().reason, None);
}
