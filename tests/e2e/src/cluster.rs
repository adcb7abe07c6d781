//! Cluster mode for the tests: the real v1.20.2 control plane `scripts/control-plane up` runs
//! on this machine (built once from Debian's source, cached outside the repository), and
//! `podwright serve --kubeconfig` nodes joining it by TLS bootstrap, each with a fresh root
//! directory, on the suite's containerd. `scripts/test` stops the control plane at its end.

use crate::serve::{KUBECTL_1_20, text};
use crate::{Running, binary, test_root, workspace_dir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static NODES: AtomicUsize = AtomicUsize::new(0);

/// The control plane `scripts/control-plane up` started (or found running).
pub struct ControlPlane {
    /// `admin-kubeconfig`, `bootstrap-kubeconfig`, `kubelet-config`, `api-server`, `ca`.
    pub paths: BTreeMap<String, String>,
}

impl ControlPlane {
    /// Starts it, building what is missing (the first time on a machine: minutes).
    pub fn up() -> ControlPlane {
        let out = Command::new(workspace_dir().join("scripts/control-plane"))
            .arg("up")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("scripts/control-plane runs");
        assert!(out.status.success(), "scripts/control-plane up failed:\n{}{}", text(&out.stdout), text(&out.stderr));
        let paths = text(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        ControlPlane { paths }
    }

    pub fn path(&self, key: &str) -> &str {
        self.paths.get(key).unwrap_or_else(|| panic!("scripts/control-plane up printed no {key}: {:?}", self.paths))
    }

    /// Debian's kubectl 1.20 (the control plane's version) as the cluster's admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(KUBECTL_1_20)
            .arg("--kubeconfig")
            .arg(self.path("admin-kubeconfig"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?} failed: {}{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("kubectl prints JSON")
    }

    /// Polls `kubectl get ... -o json` until `done` holds, at most `limit`; returns the last.
    pub fn wait_json(&self, args: &[&str], limit: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let mut all = args.to_vec();
            all.extend(["-o", "json"]);
            let out = self.kubectl(&all);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if out.status.success() && done(&v) {
                return v;
            }
            assert!(
                start.elapsed() < limit,
                "{what}: not within {limit:?}; last answer:\n{v:#}\n{}",
                text(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A `podwright serve --kubeconfig` node of the control plane.
pub struct ClusterNode {
    pub name: String,
    pub root: PathBuf,
    pub port: u16,
    /// Runs on an embedded containerd of its own under its root (its pod network from its own
    /// pod CIDR), stopped with it.
    pub embedded: bool,
    args: Vec<String>,
    process: Option<Running>,
}

impl ClusterNode {
    /// Joins a node named `<base>-<pid>-<n>` with `extra` arguments, and waits until it says it
    /// joined.
    pub fn join(plane: &ControlPlane, base: &str, extra: &[&str]) -> ClusterNode {
        Self::join_on(plane, base, extra, false)
    }

    /// [`ClusterNode::join`] on an embedded containerd of its own.
    pub fn join_embedded(plane: &ControlPlane, base: &str, extra: &[&str]) -> ClusterNode {
        Self::join_on(plane, base, extra, true)
    }

    fn join_on(plane: &ControlPlane, base: &str, extra: &[&str], embedded: bool) -> ClusterNode {
        let mut node = Self::prepare_on(plane, base, extra, embedded);
        node.start();
        node
    }

    /// A node as [`ClusterNode::join`] makes it (its root directory made), not started yet: the
    /// test puts what it needs under its root, then calls [`ClusterNode::start`].
    pub fn prepare(plane: &ControlPlane, base: &str, extra: &[&str]) -> ClusterNode {
        Self::prepare_on(plane, base, extra, false)
    }

    fn prepare_on(plane: &ControlPlane, base: &str, extra: &[&str], embedded: bool) -> ClusterNode {
        let n = NODES.fetch_add(1, Ordering::SeqCst);
        let name = format!("{base}-{}-{n}", std::process::id());
        let root = PathBuf::from(format!("{}-cluster-{}-{n}", test_root().display(), std::process::id()));
        std::fs::create_dir_all(&root).expect("node root");
        let port = free_port();
        let endpoint =
            std::env::var("PODWRIGHT_CRI_ENDPOINT").ok().filter(|e| !e.is_empty() && !embedded).unwrap_or_else(|| {
                let out = Command::new(binary())
                    .args(["runtime", "start", "--root-dir"])
                    .arg(test_root())
                    .output()
                    .expect("runtime start");
                text(&out.stdout).trim().to_string()
            });
        let mut args: Vec<String> =
            ["serve", "--hostname-override", &name, "--node-ip", "127.0.0.1"].iter().map(|s| s.to_string()).collect();
        args.extend(["--root-dir".into(), root.display().to_string(), "--port".into(), port.to_string()]);
        if !embedded {
            args.extend(["--runtime-endpoint".into(), endpoint]);
        }
        args.extend(["--kubeconfig".into(), root.join("kubeconfig").display().to_string()]);
        args.extend(["--bootstrap-kubeconfig".into(), plane.path("bootstrap-kubeconfig").to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        ClusterNode { name, root, port, embedded, args, process: None }
    }

    /// Starts the agent and waits until it says it joined.
    pub fn start(&mut self) {
        let mut process = Running::spawn(&self.args, None);
        assert!(
            process.wait_for_stderr("joined the cluster", Duration::from_secs(120)),
            "node {} did not join:\n{}",
            self.name,
            process.stderr_so_far()
        );
        self.process = Some(process);
    }

    /// SIGKILL, as a crash: nothing is cleaned up.
    pub fn kill(&mut self) {
        if let Some(p) = self.process.take() {
            p.signal(libc::SIGKILL);
            drop(p);
        }
    }

    /// Starts it again with the same root directory and arguments.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    pub fn log(&self) -> String {
        self.process.as_ref().map(|p| p.stderr_so_far()).unwrap_or_default()
    }

    /// The containerd socket its pods run on.
    pub fn containerd_socket(&self) -> PathBuf {
        if self.embedded { self.root.join("containerd/containerd.sock") } else { crate::containerd_socket() }
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("bound").port()
}

impl Drop for ClusterNode {
    /// Stops the agent (the pods it ran are the test's to delete first) and removes its root.
    fn drop(&mut self) {
        // Running's own drop stops it as Ctrl-C does, and kills it if it lingers.
        drop(self.process.take());
        if self.embedded {
            for command in ["clean", "stop"] {
                let _ = Command::new(binary()).args(["runtime", command, "--root-dir"]).arg(&self.root).output();
            }
            // The bridge of its pod CIDR (CNI leaves bridges behind).
            let conflist =
                std::fs::read_to_string(self.root.join("cni/net.d/10-podwright.conflist")).unwrap_or_default();
            let bridge = serde_json::from_str::<Value>(&conflist)
                .ok()
                .and_then(|c| c["plugins"][0]["bridge"].as_str().map(str::to_string));
            if let Some(bridge) = bridge.filter(|b| b != "podwright0") {
                let _ = Command::new("ip").args(["link", "delete", &bridge]).output();
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
