//! Resource usage through `podwright serve`: an unmodified `kubectl top pod` and `kubectl top
//! node` against the `metrics.k8s.io` API it serves (no metrics server), and the kubelet's
//! `/metrics/resource` and `/stats/summary`, with a container that burns a CPU beside one that
//! sleeps.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::Manifest;
use podwright_e2e::serve::Daemon;
use std::time::Duration;

const IMAGE: &str = "localhost/busybox:1.36";

/// Millicores from a `kubectl top` CPU cell (`950m`, `1`, `0`).
fn millicores(cell: &str) -> u64 {
    match cell.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => cell.parse::<u64>().unwrap() * 1000,
    }
}

/// The CPU of container `name` in `kubectl top pod --containers --no-headers` output.
fn container_cpu(top: &str, name: &str) -> Option<u64> {
    let line = top.lines().find(|l| l.split_whitespace().nth(1) == Some(name))?;
    Some(millicores(line.split_whitespace().nth(2)?))
}

#[test]
fn kubectl_top_shows_a_busy_container_above_an_idle_one() {
    let d = Daemon::start();
    let m = Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: burner, labels: {{app: burn}}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {{name: busy, image: {IMAGE}, command: ['sh', '-c', 'while :; do :; done']}}
  - {{name: idle, image: {IMAGE}, command: ['sleep', '3600']}}
"#
    ));
    d.ok(&["apply", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "burner", "--no-headers"], Duration::from_secs(60), |o| o.contains("Running"));

    // `POD NAME CPU MEMORY` lines. The first reading counts from each container's start, which
    // on a loaded machine can make the sleeper's start-up look busy: later readings are rates
    // between samples, and the sleeper's falls to nothing.
    let busier = |o: &str| match (container_cpu(o, "busy"), container_cpu(o, "idle")) {
        (Some(busy), Some(idle)) => busy >= 100 && busy > 10 * idle.max(1),
        _ => false,
    };
    d.wait_for(&["top", "pod", "burner", "--containers", "--no-headers"], Duration::from_secs(60), busier);

    let pods = d.ok(&["top", "pod", "-l", "app=burn"]);
    assert!(pods.starts_with("NAME") && pods.contains("CPU(cores)") && pods.contains("burner"), "{pods}");
    let none = d.kubectl(None, &["top", "pod", "-l", "app=other"]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("No resources found"), "{none:?}");

    let node = d.ok(&["top", "node", "--no-headers"]);
    let cells: Vec<&str> = node.split_whitespace().collect();
    assert_eq!(cells.len(), 5, "NAME CPU CPU% MEMORY MEMORY%: {node}");
    assert!(millicores(cells[1]) >= 100 && cells[2].ends_with('%') && cells[4].ends_with('%'), "{node}");

    // The kubelet's endpoints, straight and through the node proxy path.
    let metrics = d.ok(&["get", "--raw", "/metrics/resource"]);
    let series = metrics
        .lines()
        .find(|l| {
            l.starts_with("container_cpu_usage_seconds_total{container=\"busy\",namespace=\"default\",pod=\"burner\"}")
        })
        .unwrap_or_else(|| panic!("{metrics}"));
    let seconds: f64 = series.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(seconds > 0.1, "{series}");
    assert!(metrics.contains("\npod_memory_working_set_bytes{namespace=\"default\",pod=\"burner\"} "), "{metrics}");
    assert!(metrics.contains("\nnode_cpu_usage_seconds_total ") && metrics.contains("\nresource_scrape_error 0\n"));

    let nodes: serde_json::Value = serde_json::from_str(&d.ok(&["get", "--raw", "/api/v1/nodes"])).unwrap();
    let node_name = nodes["items"][0]["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(d.ok(&["get", "nodes", "-o", "name"]).trim(), format!("node/{node_name}"));
    // The machine's and the runtime's facts, as `describe node` shows them; containerd 1.6
    // reports no runtime handlers, so the Node lists none.
    let info = &nodes["items"][0]["status"]["nodeInfo"];
    assert!(info["containerRuntimeVersion"].as_str().is_some_and(|v| v.starts_with("containerd://1.")), "{info}");
    for fact in ["kernelVersion", "osImage", "bootID"] {
        assert!(info[fact].as_str().is_some_and(|v| !v.is_empty()), "{fact}: {info}");
    }
    assert!(nodes["items"][0]["status"].get("runtimeHandlers").is_none(), "{}", nodes["items"][0]["status"]);
    let described = d.ok(&["describe", "node"]);
    assert!(described.contains(info["containerRuntimeVersion"].as_str().unwrap()), "{described}");
    let summary = d.ok(&["get", "--raw", &format!("/api/v1/nodes/{node_name}/proxy/stats/summary")]);
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["node"]["nodeName"], node_name.as_str());
    let pod = summary["pods"].as_array().unwrap().iter().find(|p| p["podRef"]["name"] == "burner").unwrap();
    let names: Vec<_> = pod["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["busy", "idle"]);
    assert!(pod["cpu"]["usageNanoCores"].as_u64().unwrap() > 50_000_000, "{pod}");
    assert!(pod["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{pod}");
}
