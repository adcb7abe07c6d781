//! `events`: the soak's load on serve's local API without containerd, in this process: the API
//! on its store on disk and the fake runtime, on the loopback; the soak's pods created (POST)
//! and deleted (DELETE, grace 0) in waves of 50, each reporting what a pod worker reports of
//! such a pod (four statuses and twelve events, from many tasks at once) on a clock of its own
//! that runs at the soak's pace, so that the store keeps an hour of events (`--kept`, about
//! 80,000 at 26 s a wave) while they expire; all events listed every 1,000 pods, as the soak
//! and `kubectl get events` do. It prints this process's RSS after the baseline and at the end:
//! what `soak_rss_growth_kib` measures, in minutes rather than hours.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::http;
use crate::measure;
use crate::soak::{self, Waves};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_node::{EventSink, EventType, PodUpdate, StatusSink};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::limits::Limits;
use podwright_server::server::EVENT_TTL;
use podwright_server::{ApiServer, ServerConfig, transport};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Events a soak pod leaves: pulled, created, started for each of its three containers, the
/// two kills at its deletion, and a failed readiness probe.
const EVENTS_PER_POD: usize = 12;

#[derive(clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    pub waves: soak::Waves,
    /// Events alive once an hour has passed: sets how much event time each pod takes.
    #[arg(long, default_value_t = 80_000)]
    pub kept: usize,
    /// All events are listed after every this many pods (0: never).
    #[arg(long, default_value_t = 1_000)]
    pub list_every: usize,
}

pub struct EventsReport {
    pods: usize,
    wall: std::time::Duration,
    baseline_pods: usize,
    rss_kib: (u64, u64),
    /// Heap bytes allocated and not freed between the baseline and the end: what RSS would grow
    /// by if the allocator handed back every page it could.
    heap_growth: isize,
    /// The most heap allocated at once over the same pods, above what was at the baseline.
    heap_peak: isize,
    /// Events in the store after the baseline and at the end.
    events: (usize, usize),
    store_bytes: u64,
    /// The longest that handing free memory back to the system took, after an expiry.
    release_max: std::time::Duration,
}

impl EventsReport {
    pub fn print(&self) {
        let growth = self.rss_kib.1 as i64 - self.rss_kib.0 as i64;
        println!(
            "events: {} soak pods through the local API over the fake runtime, {} events each, in {:.0} s",
            self.pods,
            EVENTS_PER_POD,
            self.wall.as_secs_f64()
        );
        println!(
            "  RSS after {} pods -> end: {} -> {} KiB ({growth:+}); events kept {} -> {}; store file {} bytes",
            self.baseline_pods, self.rss_kib.0, self.rss_kib.1, self.events.0, self.events.1, self.store_bytes
        );
        println!("events_pods: {}", self.pods);
        println!("events_kept: {}", self.events.1);
        println!("events_rss_kib: {}", self.rss_kib.1);
        println!(
            "  live heap {:+} KiB over the same pods, at most {:+} KiB on the way",
            self.heap_growth / 1024,
            self.heap_peak / 1024
        );
        println!("events_rss_growth_kib: {growth}");
        println!("events_heap_growth_kib: {}", self.heap_growth / 1024);
        println!("events_store_bytes: {}", self.store_bytes);
        println!("  handing free memory back took at most {:.1} ms", self.release_max.as_secs_f64() * 1e3);
        println!("events_release_max_ms: {:.1}", self.release_max.as_secs_f64() * 1e3);
    }
}

pub async fn run(args: &EventsArgs) -> Result<EventsReport, String> {
    let clock = Clock::new();
    let root = std::env::temp_dir().join(format!("podwright-bench-events-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let result = load(args, clock, &root).await;
    let _ = std::fs::remove_dir_all(&root);
    result
}

async fn load(args: &EventsArgs, clock: Clock, root: &std::path::Path) -> Result<EventsReport, String> {
    let config = ServerConfig { node_name: "bench".into(), root: root.to_path_buf(), host_ip: Some("10.0.0.1".into()) };
    let (api, feed) = ApiServer::open(config, clock, FakeRuntime::new(clock)).map_err(|e| e.to_string())?;
    // The node's end: pod changes read and dropped, removed pods forgotten, as serve does.
    let podwright_server::NodeFeed { mut source, mut removals } = feed;
    tokio::spawn(async move {
        use podwright_node::PodSource;
        while source.next().await.is_some() {}
    });
    let forget = api.clone();
    tokio::spawn(async move {
        while let Some(uid) = removals.recv().await {
            forget.pod_removed(&uid);
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let limits = Limits::default();
    tokio::spawn(transport::serve(listener, limits.apply(api.router()), limits));
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "soak-config", "namespace": "default"}, "data": {"greeting": "hello"}});
    http::exchange(addr, "POST", "/api/v1/namespaces/default/configmaps", Some(&config.to_string())).await?;

    // The event time each pod takes, so that an hour holds `kept` events.
    let per_pod = EVENT_TTL / (args.kept / EVENTS_PER_POD).max(1) as i32;
    let t0 = Timestamp::now();
    let Waves { pods, wave, baseline: baseline_at } = args.waves;
    let (wave, baseline_at) = (wave.max(1), baseline_at.min(pods / 2));
    let started = Instant::now();
    let (mut done, mut baseline, mut release_max) = (0, None, std::time::Duration::ZERO);
    while done < pods {
        let count = wave.min(pods - done);
        let tasks: Vec<_> = (done..done + count)
            .map(|i| {
                let now = t0 + per_pod * i as i32;
                tokio::spawn(one_pod(addr, api.clone(), format!("soak-{i:05}"), now))
            })
            .collect();
        for t in tasks {
            t.await.map_err(|e| format!("a pod's task panicked: {e}"))??;
        }
        done += count;
        // As serve's expiry does, once a minute.
        api.expire_events_at(t0 + per_pod * done as i32);
        let release = Instant::now();
        podwright_server::allocator::release_free_memory();
        release_max = release_max.max(release.elapsed());
        if args.list_every > 0 && done % args.list_every < count {
            count_events(addr).await?;
        }
        if baseline.is_none() && done >= baseline_at {
            let rss = measure::status_kib("self", "VmRSS")?;
            baseline = Some((done, rss, count_events(addr).await?));
            crate::alloc::start();
        }
    }
    let wall = started.elapsed();
    let (baseline_pods, rss0, events0) = baseline.ok_or("no pods were run")?;
    let rss1 = measure::status_kib("self", "VmRSS")?;
    let (heap_growth, heap_peak) = (crate::alloc::live(), crate::alloc::peak());
    let store_bytes = std::fs::metadata(root.join(podwright_server::server::STORE_FILE)).map_or(0, |m| m.len());
    Ok(EventsReport {
        pods: done,
        wall,
        baseline_pods,
        rss_kib: (rss0, rss1),
        heap_growth,
        heap_peak,
        events: (events0, count_events(addr).await?),
        store_bytes,
        release_max,
    })
}

/// Lists every event, as `kubectl get events -A` and the soak do; returns how many. Counted
/// without parsing them into values: this process's RSS is what is measured, and the soak's
/// client is another process.
async fn count_events(addr: SocketAddr) -> Result<usize, String> {
    /// An event list, its items read and dropped one at a time.
    #[derive(serde::Deserialize)]
    struct Counted {
        items: Vec<serde::de::IgnoredAny>,
    }
    let r = http::exchange(addr, "GET", "/api/v1/events", None).await?;
    let list: Counted = serde_json::from_slice(&r.body).map_err(|e| format!("an event list: {e}"))?;
    Ok(list.items.len())
}

/// One soak pod: created, its statuses and events reported as its worker would at `now`,
/// deleted at once, and its end reported.
async fn one_pod(addr: SocketAddr, api: ApiServer, name: String, now: Timestamp) -> Result<(), String> {
    let r =
        http::exchange(addr, "POST", "/api/v1/namespaces/default/pods", Some(&soak::pod(&name).to_string())).await?;
    if r.status != 201 {
        return Err(format!("creating {name}: HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body)));
    }
    let pod: Arc<Pod> = Arc::new(serde_json::from_slice(&r.body).map_err(|e| format!("{name}: {e}"))?);
    let sink = api.sink();
    let report = |stage: usize, finished: bool| {
        sink.publish(&PodUpdate { spec: pod.clone(), status: Some(Arc::new(status(stage, now))), finished });
    };
    let event = |path: &str, kind: EventType, reason: &str, message: String| {
        sink.record(&pod, Some(path.to_string()), kind, reason, message, now);
    };
    let image = crate::pod::IMAGE;
    for (stage, (container, path)) in [
        ("init", "spec.initContainers{init}"),
        ("sidecar", "spec.initContainers{sidecar}"),
        ("app", "spec.containers{app}"),
    ]
    .into_iter()
    .enumerate()
    {
        report(stage, false);
        event(path, EventType::Normal, "Pulled", format!("Container image \"{image}\" already present on machine"));
        event(path, EventType::Normal, "Created", format!("Created container: {container}"));
        event(path, EventType::Normal, "Started", format!("Started container {container}"));
    }
    event(
        "spec.containers{app}",
        EventType::Warning,
        "Unhealthy",
        "Readiness probe failed: cat: can't open '/config/greeting': No such file or directory".into(),
    );
    report(3, false);
    let r = http::exchange(
        addr,
        "DELETE",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        Some(r#"{"gracePeriodSeconds":0,"propagationPolicy":"Background"}"#),
    )
    .await?;
    if !matches!(r.status, 200 | 202) {
        return Err(format!("deleting {name}: HTTP {}", r.status));
    }
    for (container, path) in [("app", "spec.containers{app}"), ("sidecar", "spec.initContainers{sidecar}")] {
        event(path, EventType::Normal, "Killing", format!("Stopping container {container}"));
    }
    report(4, true);
    Ok(())
}

/// The status a soak pod's worker reports at `stage`: 0 to 2 while its init containers and
/// app start, 3 Running and ready, 4 finished.
fn status(stage: usize, now: Timestamp) -> PodStatus {
    let at = now.to_string();
    let container = |name: &str, n: usize| {
        let running = n < stage && stage < 4;
        let state = match (running, name) {
            (true, _) => json!({"running": {"startedAt": at}}),
            (false, "init") if stage > 0 => {
                json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at,
                    "containerID": format!("containerd://{:064x}", n)}})
            }
            _ => json!({"waiting": {"reason": "PodInitializing"}}),
        };
        json!({"name": name, "image": crate::pod::IMAGE,
            "imageID": "localhost/busybox@sha256:7c3c3cea5d4d6133d6a694d23382f6a7b32652f23855abdba3eb039ca5995447",
            "containerID": format!("containerd://{:064x}", n + stage * 7), "state": state, "lastState": {},
            "ready": running && name != "init", "restartCount": 0, "started": running})
    };
    let condition = |kind: &str, ok: bool| {
        json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null,
            "lastTransitionTime": at})
    };
    let phase = match stage {
        0..=2 => "Pending",
        3 => "Running",
        _ => "Succeeded",
    };
    let value = json!({
        "phase": phase,
        "conditions": [condition("PodReadyToStartContainers", true), condition("Initialized", stage >= 2),
            condition("Ready", stage == 3), condition("ContainersReady", stage == 3), condition("PodScheduled", true)],
        "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.88.0.17", "podIPs": [{"ip": "10.88.0.17"}],
        "startTime": at, "qosClass": "BestEffort",
        "initContainerStatuses": [container("init", 0), container("sidecar", 1)],
        "containerStatuses": [container("app", 2)],
    });
    serde_json::from_value(value).unwrap_or_default()
}
