//! The node layer against a real containerd: a pod updated while it runs. Runs when
//! `PODWRIGHT_CRI_ENDPOINT` names the runtime's socket (scripts/test sets it); otherwise it says
//! it was skipped and passes. Needs the local images of scripts/build-images.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podwright_node::{EventLog, Node, PodUpdate, StatusStream};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

const NEW_IMAGE: &str = "localhost/busybox-stopsignal:1.36";

fn pod(uid: &str) -> Pod {
    let c = |name: &str| {
        serde_json::json!({
            "name": name, "image": "localhost/busybox:1.36", "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"],
        })
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "node-update", "namespace": "default", "uid": uid},
        "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 5, "containers": [c("a"), c("b")]},
    }))
    .unwrap()
}

fn status<'a>(u: &'a PodUpdate, name: &str) -> Option<&'a ContainerStatus> {
    u.status.as_ref()?.container_statuses.iter().flatten().find(|s| s.name == name)
}

fn running(s: Option<&ContainerStatus>) -> bool {
    s.and_then(|s| s.state.as_ref()).is_some_and(|st| st.running.is_some())
}

/// The first status that satisfies `f`, within 60 s.
async fn until(statuses: &mut UnboundedReceiver<PodUpdate>, f: impl Fn(&PodUpdate) -> bool) -> PodUpdate {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let u = statuses.recv().await.expect("the status stream ended");
            if f(&u) {
                return u;
            }
        }
    })
    .await
    .expect("no such status within 60 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_app_image_restarts_only_that_container_on_containerd() {
    let Ok(endpoint) = std::env::var("PODWRIGHT_CRI_ENDPOINT") else {
        eprintln!("real_updates: skipped (PODWRIGHT_CRI_ENDPOINT is not set)");
        return;
    };
    let runtime = podwright_runtime::connect(&endpoint).await.expect("connect to the runtime");
    let root = std::env::temp_dir().join(format!("pw-node-real-{}", std::process::id()));
    let events = Arc::new(EventLog::default());
    let (stream, mut statuses) = StatusStream::new();
    let workers = Node::new(Arc::new(runtime), &root).events(events.clone()).status(Arc::new(stream)).build();
    let uid = format!("node-update-{}", std::process::id());
    let p = pod(&uid);
    workers.update(p.clone()).unwrap();

    let outcome = tokio::spawn(async move {
        let first = until(&mut statuses, |u| running(status(u, "a")) && running(status(u, "b"))).await;
        let mut changed = p.clone();
        changed.spec.as_mut().unwrap().containers[0].image = Some(NEW_IMAGE.into());
        (first, changed, statuses)
    })
    .await;
    let (first, changed, mut statuses) = match outcome {
        Ok(v) => v,
        Err(e) => {
            workers.delete(&uid, Some(0));
            workers.wait_finished().await;
            workers.remove(&uid).await;
            std::panic::resume_unwind(e.into_panic());
        }
    };
    workers.update(changed).unwrap();
    let after = tokio::spawn(async move {
        until(&mut statuses, |u| running(status(u, "a")) && status(u, "a").is_some_and(|s| s.restart_count == 1)).await
    })
    .await;
    workers.delete(&uid, Some(0));
    workers.wait_finished().await;
    workers.remove(&uid).await;
    let _ = std::fs::remove_dir_all(&root);
    let after = after.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));

    let (a, b) = (status(&after, "a").unwrap(), status(&after, "b").unwrap());
    assert_eq!(a.image, NEW_IMAGE);
    assert_ne!(a.container_id, status(&first, "a").unwrap().container_id);
    assert_eq!(b.restart_count, 0);
    assert_eq!(b.container_id, status(&first, "b").unwrap().container_id, "b kept running");
    assert!(running(Some(b)));
    let killing: Vec<String> = events
        .snapshot()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Killing"))
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(killing[0], "Container a definition changed, will be restarted");
}
