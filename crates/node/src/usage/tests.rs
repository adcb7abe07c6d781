use super::*;
use podwright_runtime::cri_api::{ContainerConfig, ContainerMetadata, ImageSpec, PodSandboxConfig, PodSandboxMetadata};
use podwright_runtime::{FakeRuntime, FakeUsage, RuntimeService};
use serde_json::json;

const IMAGE: &str = "localhost/busybox:1.36";
const ROOT: &str = "/var/lib/podwright-test";

fn epoch() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

#[test]
fn a_first_rate_counts_from_the_start_and_later_ones_from_the_kept_sample() {
    let start = epoch();
    // 2 s of CPU in the 4 s since the start: half a core.
    let first = advance(None, start, start + secs(4), 2_000_000_000).unwrap();
    assert_eq!((first.rate, first.window), (500_000_000, secs(4)));
    // 3 s more in the next 2 s.
    let second = advance(Some(first), start, start + secs(6), 5_000_000_000).unwrap();
    assert_eq!((second.rate, second.window), (1_500_000_000, secs(2)));
    // Too close to the last: the last rate stays, and so does its sample.
    let close = advance(Some(second), start, start + secs(6) + SignedDuration::from_millis(300), 5_100_000_000);
    assert_eq!(close, Some(second));
    // A counter that went back counts from the start again.
    let reset = advance(Some(second), start, start + secs(10), 1_000_000_000).unwrap();
    assert_eq!(reset.rate, 100_000_000);
    // No time since the start: no rate yet.
    assert_eq!(advance(None, start, start, 0), None);
}

fn labels(pod: &str, container: Option<&str>) -> std::collections::HashMap<String, String> {
    let mut l = std::collections::HashMap::from([
        (labels::POD_NAME.to_string(), pod.to_string()),
        (labels::POD_NAMESPACE.to_string(), "default".to_string()),
        (labels::POD_UID.to_string(), format!("uid-{pod}")),
        (labels::MANAGED.to_string(), "true".to_string()),
        (labels::ROOT_DIR.to_string(), ROOT.to_string()),
    ]);
    if let Some(c) = container {
        l.insert(labels::CONTAINER_NAME.to_string(), c.to_string());
    }
    l
}

async fn run_pod(rt: &FakeRuntime, pod: &str, containers: &[&str]) {
    let sandbox = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: pod.into(),
            uid: format!("uid-{pod}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        labels: labels(pod, None),
        ..Default::default()
    };
    let sb = rt.run_pod_sandbox(&sandbox, "").await.unwrap();
    for name in containers {
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata { name: name.to_string(), attempt: 0 }),
            image: Some(ImageSpec { image: IMAGE.into(), ..Default::default() }),
            labels: labels(pod, Some(name)),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &config, &sandbox).await.unwrap();
        rt.start_container(&id).await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn rates_come_from_consecutive_rounds_and_pods_sum_their_containers() {
    let clock = Clock::starting_at(epoch());
    let rt = FakeRuntime::new(clock);
    rt.add_image(IMAGE);
    rt.set_usage("busy", FakeUsage { millicores: 900, working_set_bytes: 3 << 20 });
    rt.set_usage("idle", FakeUsage { millicores: 0, working_set_bytes: 1 << 20 });
    run_pod(&rt, "top", &["busy", "idle"]).await;
    let collector = UsageCollector::new(rt.clone(), clock, "node-a", Path::new(ROOT));

    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    let first = collector.collect().await.unwrap();
    // Since the start: 9 s of CPU in 10 s.
    let busy = &first.summary.pods[0].containers[0];
    assert_eq!(busy.cpu.as_ref().unwrap().usage_nano_cores, Some(900_000_000));
    assert_eq!(busy.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(9_000_000_000));

    rt.set_usage("busy", FakeUsage { millicores: 1800, working_set_bytes: 3 << 20 });
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let second = collector.collect().await.unwrap();
    let pod = &second.summary.pods[0];
    assert_eq!(pod.pod_ref, PodReference { name: "top".into(), namespace: "default".into(), uid: "uid-top".into() });
    let names: Vec<_> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["busy", "idle"]);
    // The fake counts 1.8 cores over the whole run now: 27 s at 15 s, 9 s at 10 s; 18 s in 5 s.
    let busy = pod.containers[0].cpu.as_ref().unwrap();
    assert_eq!((busy.usage_core_nano_seconds, busy.usage_nano_cores), (Some(27_000_000_000), Some(3_600_000_000)));
    assert_eq!(pod.containers[1].cpu.as_ref().unwrap().usage_nano_cores, Some(0));
    assert_eq!(pod.cpu.as_ref().unwrap().usage_nano_cores, Some(3_600_000_000));
    assert_eq!(pod.memory.as_ref().unwrap().working_set_bytes, Some(4 << 20));
    assert_eq!(second.pod_windows["uid-top"], secs(5));
    assert_eq!(pod.start_time, Time(epoch()));
    assert_eq!(second.summary.node.node_name, "node-a");
    assert!(second.summary.node.memory.as_ref().unwrap().working_set_bytes.unwrap() > 0);
    assert_eq!(rt.stats().list_container_stats, 2);
}

#[tokio::test(start_paused = true)]
async fn the_summary_has_the_kubelets_json_shape() {
    let clock = Clock::starting_at(epoch());
    let rt = FakeRuntime::new(clock);
    rt.add_image(IMAGE);
    rt.set_usage("app", FakeUsage { millicores: 250, working_set_bytes: 4096 });
    run_pod(&rt, "web", &["app"]).await;
    let collector = UsageCollector::new(rt.clone(), clock, "node-a", Path::new(ROOT));
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let usage = collector.collect().await.unwrap();
    let v = serde_json::to_value(&usage.summary).unwrap();
    assert_eq!(v["node"]["nodeName"], "node-a");
    assert!(v["node"]["cpu"]["usageCoreNanoSeconds"].is_u64(), "{v}");
    assert!(v["node"]["memory"]["workingSetBytes"].is_u64(), "{v}");
    let cpu = json!({"time": "2024-01-01T00:00:04Z", "usageNanoCores": 250_000_000u64, "usageCoreNanoSeconds": 1_000_000_000u64});
    let memory = json!({"time": "2024-01-01T00:00:04Z", "usageBytes": 4096, "workingSetBytes": 4096});
    assert_eq!(
        v["pods"],
        json!([{
            "podRef": {"name": "web", "namespace": "default", "uid": "uid-web"},
            "startTime": "2024-01-01T00:00:00Z",
            "containers": [{"name": "app", "startTime": "2024-01-01T00:00:00Z", "cpu": cpu, "memory": memory}],
            "cpu": cpu,
            "memory": memory,
        }])
    );
}

#[test]
fn floats_are_written_as_go_writes_them() {
    for (f, text) in [
        (0.0, "0"),
        (1.0, "1"),
        (4096.0, "4096"),
        (123456.0, "123456"),
        (1_234_567.0, "1.234567e+06"),
        (3_145_728.0, "3.145728e+06"),
        (1e6, "1e+06"),
        (12.5, "12.5"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.7e9, "1.7e+09"),
    ] {
        assert_eq!(prometheus::go_float(f), text, "{f}");
    }
}

fn stats(at: Timestamp, cpu_nanos: u64, bytes: u64) -> (Option<CpuStats>, Option<MemoryStats>) {
    let cpu = CpuStats { time: Time(at), usage_nano_cores: None, usage_core_nano_seconds: Some(cpu_nanos) };
    let memory = MemoryStats {
        time: Time(at),
        available_bytes: None,
        usage_bytes: None,
        working_set_bytes: Some(bytes),
        rss_bytes: None,
        page_faults: None,
        major_page_faults: None,
    };
    (Some(cpu), Some(memory))
}

#[test]
fn resource_metrics_are_the_kubelets_families_sorted_and_stamped() {
    let at = epoch() + secs(100);
    let container = |name: &str, cpu_nanos, bytes| {
        let (cpu, memory) = stats(at, cpu_nanos, bytes);
        ContainerStats { name: name.into(), start_time: Time(epoch() + secs(1)), cpu, memory }
    };
    let (pod_cpu, pod_memory) = stats(at, 12_500_000_000, 3 << 20);
    let (node_cpu, node_memory) = stats(at, 1_234_567_000_000_000, 2 << 30);
    let summary = Summary {
        node: NodeStats { node_name: "n".into(), start_time: Time(epoch()), cpu: node_cpu, memory: node_memory },
        pods: vec![PodStats {
            pod_ref: PodReference { name: "top".into(), namespace: "default".into(), uid: "u".into() },
            start_time: Time(epoch()),
            containers: vec![container("idle", 0, 1 << 20), container("busy", 12_500_000_000, 2 << 20)],
            cpu: pod_cpu,
            memory: pod_memory,
        }],
    };
    let ms = at.as_millisecond();
    let start = (epoch() + secs(1)).as_second();
    let expected = format!(
        "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{{container=\"busy\",namespace=\"default\",pod=\"top\"}} 12.5 {ms}
container_cpu_usage_seconds_total{{container=\"idle\",namespace=\"default\",pod=\"top\"}} 0 {ms}
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{{container=\"busy\",namespace=\"default\",pod=\"top\"}} 2.097152e+06 {ms}
container_memory_working_set_bytes{{container=\"idle\",namespace=\"default\",pod=\"top\"}} 1.048576e+06 {ms}
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{{container=\"busy\",namespace=\"default\",pod=\"top\"}} {}
container_start_time_seconds{{container=\"idle\",namespace=\"default\",pod=\"top\"}} {}
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1.234567e+06 {ms}
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.147483648e+09 {ms}
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"top\"}} 12.5 {ms}
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{{namespace=\"default\",pod=\"top\"}} 3.145728e+06 {ms}
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
",
        prometheus::go_float(start as f64),
        prometheus::go_float(start as f64),
    );
    assert_eq!(prometheus::render(Some(&summary)), expected);

    let failed = prometheus::render(None);
    assert!(failed.contains("\nresource_scrape_error 1\n") && failed.contains("\nscrape_error 1\n"), "{failed}");
    assert!(!failed.contains("container_"), "{failed}");
}
