use super::*;
use crate::process::{is_live_containerd, log_tail, parse_proc_stat, path_with_sbin};

#[test]
fn config_has_what_this_machine_needs() {
    let config = containerd_config(Path::new("/var/lib/podwright"));
    for line in [
        "version = 2",
        "root = \"/var/lib/podwright/containerd/root\"",
        "state = \"/var/lib/podwright/containerd/state\"",
        "address = \"/var/lib/podwright/containerd/containerd.sock\"",
        "restrict_oom_score_adj = true",
        "stream_server_address = \"127.0.0.1\"",
        "enable_tls_streaming = false",
        "sandbox_image = \"localhost/pause:3.9\"",
        "runtime_type = \"io.containerd.runc.v2\"",
        "default_runtime_name = \"runc\"",
        "bin_dir = \"/usr/lib/cni\"",
        "conf_dir = \"/var/lib/podwright/cni/net.d\"",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc-alt]",
    ] {
        assert!(config.lines().any(|l| l.trim() == line), "missing `{line}` in:\n{config}");
    }
}

#[test]
fn config_socket_matches_the_endpoint() {
    let runtime = EmbeddedRuntime::new(Path::new("/tmp/pw"));
    assert_eq!(runtime.endpoint(), "unix:///tmp/pw/containerd/containerd.sock");
    assert!(containerd_config(&runtime.root).contains("address = \"/tmp/pw/containerd/containerd.sock\""));
}

#[test]
fn config_paths_are_toml_escaped() {
    let config = containerd_config(Path::new("/odd\"dir\\x"));
    assert!(config.contains(r#"root = "/odd\"dir\\x/containerd/root""#), "{config}");
}

#[test]
fn conflist_is_one_bridge_network_with_portmap() {
    let text = cni_conflist(Path::new("/var/lib/podwright/cni/networks"), None);
    let conf: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let plugins = conf["plugins"].as_array().expect("plugins");
    assert_eq!(plugins[0]["type"], "bridge");
    assert_eq!(plugins[0]["bridge"], "podwright0");
    assert_eq!(plugins[0]["ipam"]["type"], "host-local");
    assert_eq!(plugins[0]["ipam"]["ranges"][0][0]["subnet"], "10.89.0.0/16");
    assert_eq!(plugins[0]["ipam"]["ranges"][0][0]["gateway"], "10.89.0.1");
    assert_eq!(plugins[0]["ipam"]["dataDir"], "/var/lib/podwright/cni/networks");
    assert_eq!(plugins[1]["type"], "portmap");
}

#[test]
fn a_nodes_pod_cidr_gets_a_bridge_of_its_own_and_its_first_address_is_the_gateway() {
    let text = cni_conflist(Path::new("/r/cni/networks"), Some("10.244.3.0/24"));
    let conf: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(conf["plugins"][0]["bridge"], "pw0af40300", "a bridge of its own");
    assert_eq!(conf["plugins"][0]["ipam"]["ranges"][0][0], serde_json::json!({"subnet": "10.244.3.0/24"}));
}

#[test]
fn archive_names_map_to_local_images() {
    assert_eq!(image_for_archive("busybox-1.36.tar").as_deref(), Some("localhost/busybox:1.36"));
    assert_eq!(image_for_archive("pause-3.9.tar").as_deref(), Some("localhost/pause:3.9"));
    assert_eq!(image_for_archive("my-app-v2.tar").as_deref(), Some("localhost/my-app:v2"));
    assert_eq!(image_for_archive("busybox.tar"), None);
    assert_eq!(image_for_archive("busybox-1.36.tar.tmp"), None);
    assert_eq!(image_for_archive("-1.tar"), None);
}

#[test]
fn proc_stat_gives_name_and_state() {
    assert_eq!(parse_proc_stat("4242 (containerd) S 1 4242 4242 0 -1"), Some(("containerd", 'S')));
    assert_eq!(parse_proc_stat("7 (a) b) Z 1 7"), Some(("a) b", 'Z')));
    assert_eq!(parse_proc_stat(""), None);
}

#[test]
fn the_pid_of_this_test_is_not_a_containerd() {
    assert!(!is_live_containerd(std::process::id()));
    assert!(!is_live_containerd(u32::MAX));
}

#[test]
fn status_reads_as_a_sentence() {
    let mut status = EmbeddedStatus {
        running: true,
        pid: Some(42),
        socket: PathBuf::from("/r/containerd/containerd.sock"),
        version: Some("containerd 1.6.20".into()),
        log: PathBuf::from("/r/containerd/containerd.log"),
    };
    assert_eq!(
        status.to_string(),
        "containerd 1.6.20 is running (pid 42) at unix:///r/containerd/containerd.sock\n\
         log: /r/containerd/containerd.log"
    );
    status.version = None;
    assert!(status.to_string().contains("does not answer"));
    status.pid = None;
    assert_eq!(status.to_string(), "not running (its socket would be unix:///r/containerd/containerd.sock)");
}

#[test]
fn path_gets_the_system_directories_once() {
    let path = path_with_sbin();
    assert_eq!(path.split(':').filter(|p| *p == "/usr/sbin").count(), 1);
}

#[test]
fn log_tail_starts_at_this_start() {
    let dir = std::env::temp_dir().join(format!("podwright-tail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("log");
    std::fs::write(&log, "old run\nnew 1\nnew 2\n").expect("write log");
    assert_eq!(log_tail(&log, 8), "new 1\nnew 2");
    assert!(log_tail(&dir.join("missing"), 0).starts_with("(cannot read"));
    let _ = std::fs::remove_dir_all(&dir);
}
