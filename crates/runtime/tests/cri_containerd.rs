//! `CriRuntime` against a real containerd. Runs when `PODWRIGHT_CRI_ENDPOINT` names its socket
//! (the test suite script sets it); otherwise it says it was skipped and passes. The runtime must
//! hold `localhost/busybox:1.36` and `localhost/pause:3.9` (scripts/build-images).
//!
//! `cargo test -p podwright-runtime --test cri_containerd -- --nocapture` prints the timings.
// Tests against a real containerd: real timeouts, timings and unique names.
#![allow(clippy::disallowed_methods)]

use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, ContainerState, ImageSpec, LinuxPodSandboxConfig, PodSandboxConfig,
    PodSandboxMetadata, PodSandboxState,
};
use podwright_runtime::{
    CriRuntime, EventStreamState, ImageService, RuntimeError, RuntimeEvent, RuntimeEventKind, RuntimeService,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

const BUSYBOX: &str = "localhost/busybox:1.36";
const PAUSE: &str = "localhost/pause:3.9";
const RUN_LABEL: &str = "podwright.test/run";
const NAME_LABEL: &str = "podwright.test/name";

type Sandboxes = Arc<Mutex<Vec<String>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cri_containerd() {
    let Ok(endpoint) = std::env::var("PODWRIGHT_CRI_ENDPOINT") else {
        eprintln!("cri_containerd: skipped (PODWRIGHT_CRI_ENDPOINT is not set)");
        return;
    };
    // RUST_LOG=podwright_runtime=trace shows each exit's event delay and CRI settle time.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let rt = Arc::new(podwright_runtime::connect(&endpoint).await.expect("connect to the runtime"));
    let run = format!("{}-{}", std::process::id(), jiff::Timestamp::now().as_millisecond());
    let log_dir = format!("/tmp/podwright-runtime-test-{run}");
    let sandboxes: Sandboxes = Arc::default();

    // In its own task so that a failed assertion still lets us clean up below.
    let outcome = tokio::spawn(exercise(rt.clone(), run.clone(), log_dir.clone(), sandboxes.clone())).await;

    let leftover = sandboxes.lock().unwrap().clone();
    for id in leftover {
        // Stop and remove take the sandbox's containers with it.
        let _ = rt.stop_pod_sandbox(&id).await;
        if let Err(e) = rt.remove_pod_sandbox(&id).await {
            eprintln!("cleanup: removing sandbox {id}: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&log_dir);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn labels(run: &str, name: &str) -> HashMap<String, String> {
    [(RUN_LABEL.to_string(), run.to_string()), (NAME_LABEL.to_string(), name.to_string())].into()
}

fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn container(run: &str, name: &str, command: &[&str]) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata { name: name.into(), attempt: 0 }),
        image: Some(ImageSpec { image: BUSYBOX.into(), ..Default::default() }),
        command: command.iter().map(|s| s.to_string()).collect(),
        labels: labels(run, name),
        annotations: [("podwright.test/annotation".to_string(), name.to_string())].into(),
        log_path: format!("{name}/0.log"),
        ..Default::default()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Waits for `kind` of `id`, skipping everything else.
async fn wait_event(events: &mut broadcast::Receiver<RuntimeEvent>, id: &str, kind: RuntimeEventKind) -> Instant {
    let wanted = RuntimeEvent { container_id: id.to_string(), kind };
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match events.recv().await {
                Ok(e) if e == wanted => return Instant::now(),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("event channel closed"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind:?} event for {id}"))
}

async fn exercise(rt: Arc<CriRuntime>, run: String, log_dir: String, sandboxes: Sandboxes) {
    let version = rt.version().await.unwrap();
    eprintln!("runtime: {version}");
    assert!(version.starts_with("containerd"), "{version}");

    // Images: present ones answer their id; a missing one answers None.
    let busybox_ref = rt.image_status(BUSYBOX).await.unwrap().expect("busybox image present");
    let pause_ref = rt.image_status(PAUSE).await.unwrap().expect("pause image present");
    assert!(busybox_ref.starts_with("sha256:") && pause_ref.starts_with("sha256:"));
    assert_ne!(busybox_ref, pause_ref);
    assert_eq!(rt.image_status("localhost/podwright-no-such-image:0").await.unwrap(), None);
    // RemoveImage of an image that is not there succeeds, as the CRI says (the benchmark
    // removes its images before every run).
    rt.remove_image("localhost/podwright-no-such-image:0").await.expect("RemoveImage of a missing image");

    // No registry answers for localhost here: the pull fails with the runtime's own message.
    let t = Instant::now();
    let err = rt
        .pull_image(
            &ImageSpec { image: "localhost/podwright-no-such-image:0".into(), ..Default::default() },
            None,
            &PodSandboxConfig::default(),
        )
        .await
        .unwrap_err();
    eprintln!("PullImage of a missing image: {err:?} after {}", ms(t.elapsed()));
    assert!(
        matches!(&err, RuntimeError::Failed(m) | RuntimeError::NotFound(m) if m.contains("podwright-no-such-image"))
    );

    let mut events = rt.subscribe();

    let sandbox_config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "runtime-test".into(),
            uid: format!("uid-{run}"),
            namespace: "podwright-test".into(),
            attempt: 0,
        }),
        hostname: "runtime-test".into(),
        log_directory: log_dir.clone(),
        labels: labels(&run, "sandbox"),
        linux: Some(LinuxPodSandboxConfig::default()),
        ..Default::default()
    };
    let t = Instant::now();
    let sandbox = rt.run_pod_sandbox(&sandbox_config, "").await.unwrap();
    sandboxes.lock().unwrap().push(sandbox.clone());
    eprintln!("RunPodSandbox: {}", ms(t.elapsed()));

    let status = rt.pod_sandbox_status(&sandbox).await.unwrap();
    assert_eq!(status.state, PodSandboxState::SandboxReady as i32);
    let ip = status.network.map(|n| n.ip).unwrap_or_default();
    eprintln!("sandbox IP: {ip}");
    assert!(!ip.is_empty());

    // The pause container's start is the first event containerd sends us: it makes the stream live.
    wait_event(&mut events, &sandbox, RuntimeEventKind::Started).await;
    assert_eq!(rt.event_stream_state(), EventStreamState::Live);

    // A container that exits 3 at once: its exit arrives as an event.
    let t = Instant::now();
    let exit3 = rt
        .create_container(&sandbox, &container(&run, "exit3", &["sh", "-c", "exit 3"]), &sandbox_config)
        .await
        .unwrap();
    let created = t.elapsed();
    rt.start_container(&exit3).await.unwrap();
    let started = t.elapsed();
    let exited_seen = wait_event(&mut events, &exit3, RuntimeEventKind::Exited).await;
    let seen_wall = jiff::Timestamp::now();
    let seen_after_create = exited_seen.duration_since(t);
    let status = rt.container_status(&exit3).await.unwrap();
    assert_eq!(status.state, ContainerState::ContainerExited as i32);
    assert_eq!((status.exit_code, status.reason.as_str()), (3, "Error"));
    // containerd stamps startedAt when the task's start returns, so a container that exits at
    // once can show a finishedAt slightly before its startedAt: only check that all are set.
    assert!(status.created_at > 0 && status.started_at >= status.created_at && status.finished_at > 0);
    assert_eq!(status.labels[NAME_LABEL], "exit3");
    assert_eq!(status.annotations["podwright.test/annotation"], "exit3");
    assert!(!status.image_ref.is_empty());
    let finished = jiff::Timestamp::from_nanosecond(i128::from(status.finished_at)).unwrap();
    let event_delay = seen_wall.duration_since(finished);
    eprintln!(
        "exit3: CreateContainer {}, StartContainer returned at {}, exit event at {} after create; \
         event {:.1} ms after the container's finished_at; image_ref {}",
        ms(created),
        ms(started),
        ms(seen_after_create),
        event_delay.as_secs_f64() * 1000.0,
        status.image_ref
    );

    // Exec in a running container.
    let sleeper = rt
        .create_container(
            &sandbox,
            &container(&run, "sleeper", &["sh", "-c", "trap '' TERM; sleep 30 & wait"]),
            &sandbox_config,
        )
        .await
        .unwrap();
    rt.start_container(&sleeper).await.unwrap();
    wait_event(&mut events, &sleeper, RuntimeEventKind::Started).await;
    let cmd = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let t = Instant::now();
    let result = rt.exec_sync(&sleeper, &cmd(&["true"]), Duration::from_secs(5)).await.unwrap();
    let exec_true = t.elapsed();
    assert_eq!(result.exit_code, 0);
    let t = Instant::now();
    let result = rt
        .exec_sync(&sleeper, &cmd(&["sh", "-c", "echo out; echo err >&2; exit 3"]), Duration::from_secs(5))
        .await
        .unwrap();
    let exec_exit3 = t.elapsed();
    assert_eq!(
        (result.exit_code, result.stdout.as_slice(), result.stderr.as_slice()),
        (3, &b"out\n"[..], &b"err\n"[..])
    );
    let t = Instant::now();
    let err = rt.exec_sync(&sleeper, &cmd(&["sleep", "5"]), Duration::from_secs(1)).await.unwrap_err();
    let exec_timeout = t.elapsed();
    assert!(matches!(err, RuntimeError::DeadlineExceeded(_)), "{err:?}");
    eprintln!(
        "ExecSync: true {}, exit 3 {}, sleep 5 with 1 s timeout gave up after {} ({err})",
        ms(exec_true),
        ms(exec_exit3),
        ms(exec_timeout)
    );
    assert!(exec_timeout < Duration::from_secs(4));

    // Exec'd processes exiting must not look like the container exiting.
    while let Ok(e) = events.try_recv() {
        assert!(
            !(e.container_id == sleeper && e.kind == RuntimeEventKind::Exited),
            "exec exit reported as container exit"
        );
    }
    let status = rt.container_status(&sleeper).await.unwrap();
    assert_eq!(status.state, ContainerState::ContainerRunning as i32);

    // A shell that traps SIGTERM ends with its own exit code.
    let script = "trap 'exit 7' TERM; while true; do sleep 1 & wait $!; done";
    let trapper = rt
        .create_container(&sandbox, &container(&run, "trapper", &["sh", "-c", script]), &sandbox_config)
        .await
        .unwrap();
    rt.start_container(&trapper).await.unwrap();
    wait_event(&mut events, &trapper, RuntimeEventKind::Started).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // let the shell install its trap
    let t = Instant::now();
    rt.stop_container(&trapper, Duration::from_secs(10)).await.unwrap();
    let stop_trapper = t.elapsed();
    let status = rt.container_status(&trapper).await.unwrap();
    assert_eq!(
        (status.state, status.exit_code, status.reason.as_str()),
        (ContainerState::ContainerExited as i32, 7, "Error")
    );

    // The sleeper ignores SIGTERM: SIGKILL after the 2 s timeout.
    let t = Instant::now();
    rt.stop_container(&sleeper, Duration::from_secs(2)).await.unwrap();
    let stop_sleeper = t.elapsed();
    let status = rt.container_status(&sleeper).await.unwrap();
    assert_eq!((status.exit_code, status.reason.as_str()), (137, "Error"));
    assert!(stop_sleeper >= Duration::from_millis(1900), "SIGKILL came after {}", ms(stop_sleeper));
    eprintln!(
        "StopContainer: TERM-trapping shell {}, TERM-ignoring sleep with 2 s timeout {}",
        ms(stop_trapper),
        ms(stop_sleeper)
    );
    // Stopping a stopped container is fine.
    rt.stop_container(&sleeper, Duration::from_secs(2)).await.unwrap();

    // Lists by label carry full statuses.
    let listed = rt.list_containers(&selector(&[(RUN_LABEL, &run)])).await.unwrap();
    let mut codes: Vec<_> =
        listed.iter().map(|c| (c.labels[NAME_LABEL].clone(), c.exit_code, c.reason.clone())).collect();
    codes.sort();
    assert_eq!(
        codes,
        vec![
            ("exit3".into(), 3, "Error".into()),
            ("sleeper".into(), 137, "Error".into()),
            ("trapper".into(), 7, "Error".into())
        ]
    );
    let one = rt.list_containers(&selector(&[(RUN_LABEL, &run), (NAME_LABEL, "trapper")])).await.unwrap();
    assert_eq!(one.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec![trapper.as_str()]);
    // The cheap listings (one call each) show the same objects, states and labels.
    let full = rt.list_containers(&selector(&[(RUN_LABEL, &run)])).await.unwrap();
    let cheap = rt.list_container_states(&selector(&[(RUN_LABEL, &run)])).await.unwrap();
    let summary = |v: Vec<(String, i32, String)>| {
        let mut v = v;
        v.sort();
        v
    };
    assert_eq!(
        summary(cheap.iter().map(|c| (c.id.clone(), c.state, c.labels[NAME_LABEL].clone())).collect()),
        summary(full.iter().map(|c| (c.id.clone(), c.state, c.labels[NAME_LABEL].clone())).collect())
    );
    assert!(cheap.iter().all(|c| c.state == ContainerState::ContainerExited as i32), "{cheap:?}");
    let cheap = rt.list_pod_sandbox_states(&selector(&[(RUN_LABEL, &run)])).await.unwrap();
    assert_eq!(cheap.len(), 1);
    assert_eq!((cheap[0].id.as_str(), cheap[0].state), (sandbox.as_str(), PodSandboxState::SandboxReady as i32));
    let listed = rt.list_pod_sandboxes(&selector(&[(RUN_LABEL, &run)])).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, sandbox);
    assert_eq!(listed[0].network.as_ref().map(|n| n.ip.as_str()), Some(ip.as_str()));

    // Not found, and removes are idempotent.
    assert!(matches!(rt.container_status("podwright-no-such-container").await, Err(RuntimeError::NotFound(_))));
    for id in [&exit3, &sleeper, &trapper] {
        rt.remove_container(id).await.unwrap();
    }
    rt.remove_container(&exit3).await.unwrap();
    assert!(rt.list_containers(&selector(&[(RUN_LABEL, &run)])).await.unwrap().is_empty());

    let t = Instant::now();
    rt.stop_pod_sandbox(&sandbox).await.unwrap();
    rt.remove_pod_sandbox(&sandbox).await.unwrap();
    eprintln!("StopPodSandbox + RemovePodSandbox: {}", ms(t.elapsed()));
    sandboxes.lock().unwrap().clear();
    assert!(rt.list_pod_sandboxes(&selector(&[(RUN_LABEL, &run)])).await.unwrap().is_empty());
}
