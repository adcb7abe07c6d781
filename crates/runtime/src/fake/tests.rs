// Tests: the wall clock checks that paused tests take no real time.
#![allow(clippy::disallowed_methods)]

use super::*;
use crate::cri_api::{ContainerStats, ImageSpec, PodSandboxMetadata, UInt64Value};
use std::time::Instant as WallInstant;
use tokio::sync::broadcast::error::TryRecvError;

const IMAGE: &str = "localhost/busybox:1.36";

fn epoch() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

fn fake() -> Arc<FakeRuntime> {
    let rt = FakeRuntime::new(Clock::starting_at(epoch()));
    rt.add_image(IMAGE);
    rt
}

fn pod(name: &str) -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: format!("/var/log/pods/{name}"),
        labels: [("pod".to_string(), name.to_string())].into(),
        ..Default::default()
    }
}

fn container(pod: &str, name: &str, attempt: u32) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata { name: name.into(), attempt }),
        image: Some(ImageSpec { image: IMAGE.into(), ..Default::default() }),
        labels: [("pod".to_string(), pod.to_string()), ("container".to_string(), name.to_string())].into(),
        annotations: [("hash".to_string(), "abc".to_string())].into(),
        log_path: format!("{name}/{attempt}.log"),
        ..Default::default()
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn at(offset: u64) -> i64 {
    nanos(epoch()) + i64::try_from(secs(offset).as_nanos()).unwrap()
}

async fn sandbox(rt: &FakeRuntime, name: &str) -> String {
    rt.run_pod_sandbox(&pod(name), "").await.unwrap()
}

/// Creates and starts `name` in a new or given sandbox; returns the container id.
async fn run(rt: &FakeRuntime, sandbox_id: &str, pod_name: &str, name: &str, attempt: u32) -> String {
    let id = rt.create_container(sandbox_id, &container(pod_name, name, attempt), &pod(pod_name)).await.unwrap();
    rt.start_container(&id).await.unwrap();
    id
}

fn state(status: &ContainerStatus) -> ContainerState {
    ContainerState::try_from(status.state).unwrap()
}

#[tokio::test(start_paused = true)]
async fn scripted_exit_happens_at_virtual_time() {
    let wall = WallInstant::now();
    let rt = fake();
    rt.script("job", vec![Behaviour::Exit { code: 0, after: secs(10) }]);
    let mut events = rt.subscribe();
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "job", 0).await;

    let status = rt.container_status(&id).await.unwrap();
    assert_eq!(state(&status), ContainerState::ContainerRunning);
    assert_eq!(status.started_at, at(0));

    // The sandbox's own start comes first.
    assert_eq!(
        events.recv().await.unwrap(),
        RuntimeEvent { container_id: sb.clone(), kind: RuntimeEventKind::Started }
    );
    assert_eq!(
        events.recv().await.unwrap(),
        RuntimeEvent { container_id: id.clone(), kind: RuntimeEventKind::Started }
    );
    assert_eq!(events.recv().await.unwrap(), RuntimeEvent { container_id: id.clone(), kind: RuntimeEventKind::Exited });
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(10));

    let status = rt.container_status(&id).await.unwrap();
    assert_eq!(state(&status), ContainerState::ContainerExited);
    assert_eq!((status.exit_code, status.reason.as_str()), (0, "Completed"));
    assert_eq!(status.finished_at, at(10));
    assert!(wall.elapsed() < Duration::from_secs(2), "virtual time must not cost wall time");
}

#[tokio::test(start_paused = true)]
async fn status_carries_config() {
    let rt = fake();
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "app", 0).await;
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!(s.id, id);
    assert_eq!(s.metadata, Some(ContainerMetadata { name: "app".into(), attempt: 0 }));
    assert_eq!(s.image.as_ref().map(|i| i.image.as_str()), Some(IMAGE));
    assert_eq!(s.image_ref, images::fake_digest(IMAGE));
    assert_eq!(rt.image_status(IMAGE).await.unwrap(), Some(s.image_ref.clone()));
    assert_eq!(s.labels["container"], "app");
    assert_eq!(s.annotations["hash"], "abc");
    assert_eq!(s.log_path, "/var/log/pods/p/app/0.log");
    assert_eq!(s.created_at, at(0));

    let sbs = rt.pod_sandbox_status(&sb).await.unwrap();
    assert_eq!(sbs.state, PodSandboxState::SandboxReady as i32);
    assert_eq!(sbs.network.unwrap().ip, "10.0.0.1");
    assert_eq!(sbs.labels["pod"], "p");
    let other = sandbox(&rt, "q").await;
    assert_eq!(rt.pod_sandbox_status(&other).await.unwrap().network.unwrap().ip, "10.0.0.2");
}

#[tokio::test(start_paused = true)]
async fn default_is_run_forever_and_stop_sends_term() {
    let rt = fake();
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "app", 0).await;
    tokio::time::sleep(secs(3600)).await;
    assert_eq!(state(&rt.container_status(&id).await.unwrap()), ContainerState::ContainerRunning);

    rt.stop_container(&id, secs(30)).await.unwrap();
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!(state(&s), ContainerState::ContainerExited);
    assert_eq!((s.exit_code, s.reason.as_str()), (143, "Error"));
    assert_eq!(s.finished_at, at(3600), "SIGTERM ends it at once");

    // Stopping again, or a never-started container, is fine; an unknown one is not.
    rt.stop_container(&id, secs(30)).await.unwrap();
    let created = rt.create_container(&sb, &container("p", "other", 0), &pod("p")).await.unwrap();
    rt.stop_container(&created, secs(30)).await.unwrap();
    assert_eq!(state(&rt.container_status(&created).await.unwrap()), ContainerState::ContainerCreated);
    assert!(matches!(rt.stop_container("nope", secs(1)).await, Err(RuntimeError::NotFound(_))));
}

#[tokio::test(start_paused = true)]
async fn stop_cancels_a_pending_scripted_exit() {
    let rt = fake();
    rt.script("app", vec![Behaviour::Exit { code: 1, after: secs(10) }]);
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "app", 0).await;
    tokio::time::sleep(secs(2)).await;
    rt.stop_container(&id, secs(30)).await.unwrap();
    tokio::time::sleep(secs(20)).await;
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!((s.exit_code, s.finished_at), (143, at(2)));
}

#[tokio::test(start_paused = true)]
async fn ignore_term_dies_at_sigkill() {
    let rt = fake();
    rt.script("stubborn", vec![Behaviour::IgnoreTerm]);
    let mut events = rt.subscribe();
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "stubborn", 0).await;

    let stopping = {
        let rt = rt.clone();
        let id = id.clone();
        tokio::spawn(async move { rt.stop_container(&id, secs(30)).await })
    };
    tokio::time::sleep(secs(29)).await;
    assert_eq!(state(&rt.container_status(&id).await.unwrap()), ContainerState::ContainerRunning);
    stopping.await.unwrap().unwrap();
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!((s.exit_code, s.reason.as_str(), s.finished_at), (137, "Error", at(30)));

    let kinds: Vec<_> =
        std::iter::from_fn(|| events.try_recv().ok()).filter(|e| e.container_id == id).map(|e| e.kind).collect();
    assert_eq!(kinds, vec![RuntimeEventKind::Started, RuntimeEventKind::Exited]);
}

#[tokio::test(start_paused = true)]
async fn oom_kill() {
    let rt = fake();
    rt.script("hog", vec![Behaviour::Oom { after: secs(5) }]);
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "hog", 0).await;
    tokio::time::sleep(secs(6)).await;
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!((s.exit_code, s.reason.as_str(), s.finished_at), (137, "OOMKilled", at(5)));
}

#[tokio::test(start_paused = true)]
async fn script_steps_follow_creation_order_and_last_repeats() {
    let rt = fake();
    rt.script(
        "app",
        vec![
            Behaviour::FailCreate("boom".into()),
            Behaviour::Exit { code: 2, after: Duration::ZERO },
            Behaviour::RunForever,
        ],
    );
    let sb = sandbox(&rt, "p").await;
    let err = rt.create_container(&sb, &container("p", "app", 0), &pod("p")).await.unwrap_err();
    assert_eq!(err, RuntimeError::Failed("boom".into()));

    // `after: 0` has exited by the time start returns.
    let first = run(&rt, &sb, "p", "app", 0).await;
    let s = rt.container_status(&first).await.unwrap();
    assert_eq!((state(&s), s.exit_code, s.reason.as_str()), (ContainerState::ContainerExited, 2, "Error"));

    let second = run(&rt, &sb, "p", "app", 1).await;
    let third = run(&rt, &sb, "p", "app", 2).await;
    tokio::time::sleep(secs(100)).await;
    for id in [second, third] {
        assert_eq!(state(&rt.container_status(&id).await.unwrap()), ContainerState::ContainerRunning);
    }
}

#[tokio::test(start_paused = true)]
async fn pod_scripts_override_name_scripts() {
    let rt = fake();
    rt.script("app", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    rt.script_pod("special", "app", vec![Behaviour::Exit { code: 9, after: Duration::ZERO }]);
    let a = sandbox(&rt, "plain").await;
    let b = sandbox(&rt, "special").await;
    let in_a = run(&rt, &a, "plain", "app", 0).await;
    let in_b = run(&rt, &b, "special", "app", 0).await;
    assert_eq!(rt.container_status(&in_a).await.unwrap().exit_code, 0);
    assert_eq!(rt.container_status(&in_b).await.unwrap().exit_code, 9);
}

#[tokio::test(start_paused = true)]
async fn start_failure_is_start_error() {
    let rt = fake();
    rt.script("bad", vec![Behaviour::FailStart("exec: \"nope\": executable file not found in $PATH".into())]);
    let mut events = rt.subscribe();
    let sb = sandbox(&rt, "p").await;
    let id = rt.create_container(&sb, &container("p", "bad", 0), &pod("p")).await.unwrap();
    let err = rt.start_container(&id).await.unwrap_err();
    assert!(matches!(&err, RuntimeError::Failed(m) if m.contains("executable file not found")));
    let s = rt.container_status(&id).await.unwrap();
    assert_eq!((state(&s), s.exit_code, s.reason.as_str()), (ContainerState::ContainerExited, 128, "StartError"));
    assert!(s.message.contains("executable file not found"));
    // Only the sandbox's start: a failed start emits nothing.
    assert_eq!(events.try_recv().unwrap().container_id, sb);
    assert!(matches!(events.try_recv(), Err(TryRecvError::Empty)));
    // A second start is refused.
    assert!(rt.start_container(&id).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn create_checks_sandbox_image_and_name() {
    let rt = fake();
    assert!(matches!(
        rt.create_container("nope", &container("p", "app", 0), &pod("p")).await,
        Err(RuntimeError::NotFound(_))
    ));
    let sb = sandbox(&rt, "p").await;
    let mut missing = container("p", "app", 0);
    missing.image = Some(ImageSpec { image: "nginx".into(), ..Default::default() });
    let err = rt.create_container(&sb, &missing, &pod("p")).await.unwrap_err();
    assert_eq!(err, RuntimeError::NotFound("failed to resolve image \"nginx\": not found".into()));

    run(&rt, &sb, "p", "app", 0).await;
    let err = rt.create_container(&sb, &container("p", "app", 0), &pod("p")).await.unwrap_err();
    assert!(matches!(&err, RuntimeError::Failed(m) if m.contains("is reserved")), "{err:?}");

    rt.stop_pod_sandbox(&sb).await.unwrap();
    let err = rt.create_container(&sb, &container("p", "app", 1), &pod("p")).await.unwrap_err();
    assert!(matches!(&err, RuntimeError::Failed(m) if m.contains("not running")), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn sandbox_stop_kills_and_remove_cleans_up() {
    let rt = fake();
    rt.script("done", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    let sb = sandbox(&rt, "p").await;
    let running = run(&rt, &sb, "p", "app", 0).await;
    let exited = run(&rt, &sb, "p", "done", 0).await;
    let other_sb = sandbox(&rt, "q").await;
    let other = run(&rt, &other_sb, "q", "app", 0).await;

    rt.stop_pod_sandbox(&sb).await.unwrap();
    assert_eq!(rt.pod_sandbox_status(&sb).await.unwrap().state, PodSandboxState::SandboxNotready as i32);
    assert_eq!(rt.container_status(&running).await.unwrap().exit_code, 137);
    assert_eq!(rt.container_status(&exited).await.unwrap().exit_code, 0, "already exited: untouched");
    assert_eq!(state(&rt.container_status(&other).await.unwrap()), ContainerState::ContainerRunning);

    rt.remove_pod_sandbox(&sb).await.unwrap();
    assert!(matches!(rt.pod_sandbox_status(&sb).await, Err(RuntimeError::NotFound(_))));
    assert!(matches!(rt.container_status(&running).await, Err(RuntimeError::NotFound(_))));
    rt.remove_pod_sandbox(&sb).await.unwrap();
    rt.remove_container(&running).await.unwrap();
    assert!(matches!(rt.stop_pod_sandbox(&sb).await, Err(RuntimeError::NotFound(_))));
    assert_eq!(rt.stats().containers, 1);
}

#[tokio::test(start_paused = true)]
async fn lists_filter_by_labels() {
    let rt = fake();
    let a = sandbox(&rt, "a").await;
    let b = sandbox(&rt, "b").await;
    let a1 = run(&rt, &a, "a", "one", 0).await;
    let a2 = run(&rt, &a, "a", "two", 0).await;
    let b1 = run(&rt, &b, "b", "one", 0).await;
    let ids = |v: Vec<ContainerStatus>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let sel = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();

    assert_eq!(ids(rt.list_containers(&sel(&[("pod", "a")])).await.unwrap()), vec![a1.clone(), a2.clone()]);
    assert_eq!(ids(rt.list_containers(&sel(&[("container", "one")])).await.unwrap()), vec![a1.clone(), b1.clone()]);
    assert_eq!(ids(rt.list_containers(&sel(&[("pod", "b"), ("container", "one")])).await.unwrap()), vec![b1.clone()]);
    assert!(rt.list_containers(&sel(&[("pod", "c")])).await.unwrap().is_empty());
    assert_eq!(rt.list_containers(&BTreeMap::new()).await.unwrap().len(), 3);
    let sandboxes = rt.list_pod_sandboxes(&sel(&[("pod", "b")])).await.unwrap();
    assert_eq!(sandboxes.into_iter().map(|s| s.id).collect::<Vec<_>>(), vec![b.clone()]);

    rt.remove_container(&a2).await.unwrap();
    assert_eq!(ids(rt.list_containers(&sel(&[("pod", "a")])).await.unwrap()), vec![a1]);
    assert_eq!(rt.stats().list_containers, 6);
}

#[tokio::test(start_paused = true)]
async fn images_and_pulls() {
    let rt = FakeRuntime::new(Clock::starting_at(epoch()));
    let p = pod("p");
    let spec = |image: &str| ImageSpec { image: image.into(), ..Default::default() };
    assert_eq!(rt.image_status("busybox").await.unwrap(), None);
    rt.allow_pull_taking("busybox", secs(3));
    let image_ref = rt.pull_image(&spec("busybox"), None, &p).await.unwrap();
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(3));
    // Normalized as containerd does: the short and the full name are one image.
    assert_eq!(rt.image_status("docker.io/library/busybox:latest").await.unwrap(), Some(image_ref));

    let err = rt.pull_image(&spec("nope:1"), None, &p).await.unwrap_err();
    assert_eq!(
        err,
        RuntimeError::Failed(
            "failed to pull and unpack image \"docker.io/library/nope:1\": failed to resolve reference \
             \"docker.io/library/nope:1\": docker.io/library/nope:1: not found"
                .into()
        )
    );

    rt.allow_pull_with_auth("127.0.0.1:5000/private", "u", "p");
    let err = rt.pull_image(&spec("127.0.0.1:5000/private"), None, &p).await.unwrap_err();
    assert!(matches!(&err, RuntimeError::Failed(m) if m.contains("401 Unauthorized")));
    let auth = AuthConfig { username: "u".into(), password: "p".into(), ..Default::default() };
    rt.pull_image(&spec("127.0.0.1:5000/private"), Some(&auth), &p).await.unwrap();

    let pulls: Vec<_> = rt.calls_for_pod("p").into_iter().map(|(_, c)| c).collect();
    assert_eq!(pulls.len(), 4);
    assert_eq!(pulls[0], Call::PullImage { image: "busybox".into(), runtime_handler: String::new() });

    let alt = ImageSpec { runtime_handler: "runc-alt".into(), ..spec("busybox") };
    rt.pull_image(&alt, None, &p).await.unwrap();
    let last = rt.calls_for_pod("p").into_iter().map(|(_, c)| c).next_back();
    assert_eq!(last, Some(Call::PullImage { image: "busybox".into(), runtime_handler: "runc-alt".into() }));
}

#[tokio::test(start_paused = true)]
async fn exec_scripts() {
    let rt = fake();
    rt.script_exec("app", vec![ExecResult { exit_code: 1, ..Default::default() }, ExecResult::default()]);
    rt.script_exec("slow", vec![ExecBehaviour::Slow(secs(5), ExecResult::default())]);
    rt.script_exec_fn("echo", |cmd| {
        ExecBehaviour::Reply(ExecResult { stdout: cmd.join(" ").into_bytes(), ..Default::default() })
    });
    let sb = sandbox(&rt, "p").await;
    let app = run(&rt, &sb, "p", "app", 0).await;
    let slow = run(&rt, &sb, "p", "slow", 0).await;
    let echo = run(&rt, &sb, "p", "echo", 0).await;
    let plain = run(&rt, &sb, "p", "plain", 0).await;
    let cmd = vec!["cat".to_string(), "/tmp/ready".to_string()];

    assert_eq!(rt.exec_sync(&app, &cmd, secs(1)).await.unwrap().exit_code, 1);
    assert_eq!(rt.exec_sync(&app, &cmd, secs(1)).await.unwrap().exit_code, 0);
    assert_eq!(rt.exec_sync(&app, &cmd, secs(1)).await.unwrap().exit_code, 0);
    assert_eq!(rt.exec_sync(&plain, &cmd, secs(1)).await.unwrap(), ExecResult::default());
    assert_eq!(rt.exec_sync(&echo, &cmd, secs(1)).await.unwrap().stdout, b"cat /tmp/ready");

    let err = rt.exec_sync(&slow, &cmd, secs(1)).await.unwrap_err();
    assert_eq!(err, RuntimeError::DeadlineExceeded("timeout 1s exceeded".into()));
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(1));
    rt.exec_sync(&slow, &cmd, secs(10)).await.unwrap();
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(6));

    rt.stop_container(&plain, secs(1)).await.unwrap();
    assert!(matches!(rt.exec_sync(&plain, &cmd, secs(1)).await, Err(RuntimeError::Failed(_))));
}

#[tokio::test(start_paused = true)]
async fn call_log_records_actions_with_times() {
    let rt = fake();
    rt.script("init", vec![Behaviour::Exit { code: 0, after: secs(2) }]);
    let sb = sandbox(&rt, "p").await;
    let init = run(&rt, &sb, "p", "init", 0).await;
    let mut events = rt.subscribe();
    while events.recv().await.unwrap() != (RuntimeEvent { container_id: init.clone(), kind: RuntimeEventKind::Exited })
    {
    }
    rt.container_status(&init).await.unwrap();
    let app = run(&rt, &sb, "p", "app", 0).await;
    rt.stop_container(&app, secs(30)).await.unwrap();
    rt.remove_container(&app).await.unwrap();
    rt.stop_pod_sandbox(&sb).await.unwrap();
    rt.remove_pod_sandbox(&sb).await.unwrap();

    let t = |s: i64| epoch() + jiff::SignedDuration::from_secs(s);
    let name = |n: &str| n.to_string();
    assert_eq!(
        rt.calls(),
        vec![
            (t(0), Call::RunPodSandbox { name: name("p"), attempt: 0 }),
            (t(0), Call::CreateContainer { name: name("init"), attempt: 0 }),
            (t(0), Call::StartContainer { name: name("init") }),
            (t(2), Call::CreateContainer { name: name("app"), attempt: 0 }),
            (t(2), Call::StartContainer { name: name("app") }),
            (t(2), Call::StopContainer { name: name("app"), timeout: secs(30) }),
            (t(2), Call::RemoveContainer { name: name("app") }),
            (t(2), Call::StopPodSandbox { name: name("p") }),
            (t(2), Call::RemovePodSandbox { name: name("p") }),
        ]
    );
    assert_eq!(rt.stats().container_status, 1);
    rt.clear_calls();
    rt.set_call_log(false);
    sandbox(&rt, "q").await;
    assert!(rt.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn latency_applies_to_every_call() {
    let rt = fake();
    rt.set_latency(Duration::from_millis(10));
    let sb = sandbox(&rt, "p").await;
    run(&rt, &sb, "p", "app", 0).await;
    rt.list_containers(&BTreeMap::new()).await.unwrap();
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_millis(40));
}

#[tokio::test(start_paused = true)]
async fn runtime_handlers() {
    let rt = fake();
    let err = rt.run_pod_sandbox(&pod("p"), "kata").await.unwrap_err();
    assert_eq!(err, RuntimeError::Failed("no runtime for \"kata\" is configured".into()));
    rt.add_runtime_handler("kata");
    let sb = rt.run_pod_sandbox(&pod("p"), "kata").await.unwrap();
    assert_eq!(rt.pod_sandbox_status(&sb).await.unwrap().runtime_handler, "kata");
}

#[tokio::test(start_paused = true)]
async fn crash_and_sandbox_death_helpers() {
    let rt = fake();
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "app", 0).await;
    let mut events = rt.subscribe();
    assert!(rt.exit_container(&id, 2));
    assert!(!rt.exit_container(&id, 2));
    assert_eq!(rt.container_status(&id).await.unwrap().reason, "Error");
    assert!(rt.kill_sandbox(&sb));
    assert_eq!(events.try_recv().unwrap().container_id, id);
    assert_eq!(events.try_recv().unwrap(), RuntimeEvent { container_id: sb.clone(), kind: RuntimeEventKind::Exited });
    let err = rt.create_container(&sb, &container("p", "app", 1), &pod("p")).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed(_)));
}

/// Not a benchmark, a guard: a thousand pods through the fake must stay cheap and leave nothing
/// behind once removed.
#[tokio::test(start_paused = true)]
async fn thousand_pods_are_cheap_and_freed() {
    let rt = fake();
    rt.set_call_log(false);
    rt.script("init", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    let wall = WallInstant::now();
    let mut actions = 0u32;
    let mut sandboxes = Vec::new();
    for i in 0..1000 {
        let name = format!("pod-{i}");
        let sb = sandbox(&rt, &name).await;
        run(&rt, &sb, &name, "init", 0).await;
        run(&rt, &sb, &name, "app", 0).await;
        let sel = [("pod".to_string(), name.clone())].into();
        assert_eq!(rt.list_containers(&sel).await.unwrap().len(), 2);
        actions += 6;
        sandboxes.push(sb);
    }
    for sb in &sandboxes {
        rt.stop_pod_sandbox(sb).await.unwrap();
        rt.remove_pod_sandbox(sb).await.unwrap();
        actions += 2;
    }
    let per_action = wall.elapsed() / actions;
    eprintln!("fake runtime: {per_action:?} per action over {actions} actions");
    let stats = rt.stats();
    assert_eq!((stats.sandboxes, stats.containers), (0, 0));
    let state = rt.lock();
    assert!(state.container_labels.is_empty() && state.sandbox_labels.is_empty());
}

#[tokio::test(start_paused = true)]
async fn changes_record_effects_in_order_whatever_made_them() {
    let rt = fake();
    rt.record_changes(true);
    rt.script("init", vec![Behaviour::Exit { code: 0, after: secs(1) }]);
    rt.script("bad", vec![Behaviour::FailStart("no such file".into())]);
    let sb = sandbox(&rt, "p").await;
    let init = run(&rt, &sb, "p", "init", 0).await;
    tokio::time::sleep(secs(2)).await;
    let bad = rt.create_container(&sb, &container("p", "bad", 0), &pod("p")).await.unwrap();
    rt.start_container(&bad).await.unwrap_err();
    rt.kill_sandbox(&sb);
    rt.remove_pod_sandbox(&sb).await.unwrap();

    let s = |id: &str| id.to_string();
    let created = |id: &str, name: &str| Change::ContainerCreated {
        id: s(id),
        sandbox_id: sb.clone(),
        name: s(name),
        attempt: 0,
    };
    let changes: Vec<Change> = rt.changes(0).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        changes,
        vec![
            Change::SandboxReady { id: sb.clone(), uid: s("uid-p"), attempt: 0, ip: s("10.0.0.1") },
            created(&init, "init"),
            Change::ContainerStarted { id: init.clone() },
            Change::ContainerExited { id: init.clone(), exit_code: 0, reason: s("Completed") },
            created(&bad, "bad"),
            Change::ContainerExited { id: bad.clone(), exit_code: 128, reason: s("StartError") },
            Change::SandboxNotReady { id: sb.clone() },
            Change::ContainerRemoved { id: init.clone() },
            Change::ContainerRemoved { id: bad.clone() },
            Change::SandboxRemoved { id: sb.clone() },
        ]
    );
    assert_eq!(rt.changes(9), vec![(epoch() + jiff::SignedDuration::from_secs(2), Change::SandboxRemoved { id: sb })]);
}

#[tokio::test(start_paused = true)]
async fn call_faults_fail_lose_replies_or_slow_calls() {
    let rt = fake();
    rt.record_changes(true);
    rt.set_call_faults(|call| match call {
        Call::CreateContainer { name, .. } if name == "refused" => {
            Some(CallFault::Fail(RuntimeError::Failed("no".into())))
        }
        Call::CreateContainer { name, .. } if name == "lost" => {
            Some(CallFault::LoseReply(RuntimeError::DeadlineExceeded("timeout".into())))
        }
        Call::StartContainer { .. } => Some(CallFault::Slow(secs(3))),
        _ => None,
    });
    let sb = sandbox(&rt, "p").await;
    let err = rt.create_container(&sb, &container("p", "refused", 0), &pod("p")).await.unwrap_err();
    assert_eq!(err, RuntimeError::Failed("no".into()));
    let err = rt.create_container(&sb, &container("p", "lost", 0), &pod("p")).await.unwrap_err();
    assert_eq!(err, RuntimeError::DeadlineExceeded("timeout".into()));
    // The lost reply's container exists, created; the refused one does not.
    let listed = rt.list_containers(&BTreeMap::new()).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|c| c.metadata.as_ref().unwrap().name.as_str()).collect();
    assert_eq!(names, ["lost"]);
    rt.start_container(&listed[0].id).await.unwrap();
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(3));
    assert!(!rt.calls().iter().any(|(_, c)| matches!(c, Call::CreateContainer { name, .. } if name == "refused")));
    rt.clear_faults();
    run(&rt, &sb, "p", "refused", 0).await;
}

#[tokio::test(start_paused = true)]
async fn event_faults_drop_or_delay_events() {
    let rt = fake();
    let mut events = rt.subscribe();
    rt.script("dropped", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    rt.set_event_faults(|e| match e.kind {
        RuntimeEventKind::Started => EventFault::Drop,
        _ => EventFault::Delay(secs(5)),
    });
    let sb = sandbox(&rt, "p").await;
    let id = run(&rt, &sb, "p", "dropped", 0).await;
    assert_eq!(events.try_recv(), Err(TryRecvError::Empty), "started dropped, exit not yet sent");
    let exited = events.recv().await.unwrap();
    assert_eq!(exited, RuntimeEvent { container_id: id, kind: RuntimeEventKind::Exited });
    assert_eq!(rt.clock().now(), epoch() + jiff::SignedDuration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_start_whose_caller_goes_away_leaves_a_start_error() {
    let rt = fake();
    rt.set_latency(secs(1));
    let sb = sandbox(&rt, "p").await;
    let id = rt.create_container(&sb, &container("p", "app", 0), &pod("p")).await.unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(500), rt.start_container(&id)).await;
    assert!(cut.is_err(), "the caller gave up during the call");
    let status = rt.container_status(&id).await.unwrap();
    assert_eq!(
        (state(&status), status.exit_code, status.reason.as_str()),
        (ContainerState::ContainerExited, 128, "StartError")
    );
    assert!(status.message.contains("context canceled"), "{}", status.message);
    assert_eq!(status.started_at, 0, "it never ran");
}

#[tokio::test(start_paused = true)]
async fn container_stats_grow_with_scripted_usage() {
    let rt = fake();
    rt.set_usage("busy", FakeUsage { millicores: 1500, working_set_bytes: 4096 });
    let sb = sandbox(&rt, "p").await;
    let busy = run(&rt, &sb, "p", "busy", 0).await;
    run(&rt, &sb, "p", "idle", 0).await;
    rt.script("done", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    run(&rt, &sb, "p", "done", 0).await;
    tokio::time::sleep(secs(10)).await;

    let stats = rt.list_container_stats(&BTreeMap::new()).await.unwrap();
    let cpu = |s: &ContainerStats| s.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds.as_ref()).unwrap().value;
    let names: Vec<_> =
        stats.iter().map(|s| s.attributes.as_ref().unwrap().metadata.as_ref().unwrap().name.as_str()).collect();
    assert_eq!(names, ["busy", "idle"], "exited containers have no stats");
    assert_eq!(stats[0].attributes.as_ref().unwrap().id, busy);
    assert_eq!(cpu(&stats[0]), 15_000_000_000);
    assert_eq!(stats[0].cpu.as_ref().unwrap().timestamp, at(10));
    assert_eq!(stats[0].memory.as_ref().unwrap().working_set_bytes, Some(UInt64Value { value: 4096 }));
    assert_eq!(cpu(&stats[1]), 0);

    let only = [("container".to_string(), "idle".to_string())].into();
    assert_eq!(rt.list_container_stats(&only).await.unwrap().len(), 1);
    assert_eq!(rt.stats().list_container_stats, 2);
}

#[tokio::test(start_paused = true)]
async fn images_are_listed_sized_pinned_and_removed_and_the_filesystem_follows_them() {
    let rt = fake();
    assert_eq!(rt.image_fs_info().await, Err(RuntimeError::Unimplemented("ImageFsInfo".into())));
    rt.set_image_fs(1000, 100);
    rt.set_image_size(IMAGE, 300);
    rt.add_image("localhost/pause:3.9");
    rt.pin_image("localhost/pause:3.9");
    let listed = rt.list_images().await.unwrap();
    assert_eq!(listed.len(), 2);
    let busybox = listed.iter().find(|i| i.repo_tags == [IMAGE]).unwrap();
    assert_eq!((busybox.size, busybox.pinned), (300, false));
    assert_eq!(Some(busybox.id.clone()), rt.image_status(IMAGE).await.unwrap(), "listed by the id ImageStatus gives");
    assert!(listed.iter().any(|i| i.repo_tags == ["localhost/pause:3.9"] && i.pinned));
    let fs = rt.image_fs_info().await.unwrap();
    assert_eq!((fs.capacity_bytes, fs.available_bytes, fs.used_bytes), (1000, 600, 300));

    rt.remove_image(&busybox.id).await.unwrap();
    assert_eq!(rt.image_status(IMAGE).await.unwrap(), None);
    assert_eq!(rt.image_fs_info().await.unwrap().available_bytes, 900);
    assert!(rt.calls().iter().any(|(_, c)| *c == Call::RemoveImage { image: busybox.id.clone() }));
    // Removing what is not there succeeds, as in containerd.
    rt.remove_image("localhost/none:1").await.unwrap();
}
