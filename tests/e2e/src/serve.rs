//! `podwright serve` for the tests: a daemon on a free loopback port with a fresh root
//! directory, on the suite's containerd (`PODWRIGHT_CRI_ENDPOINT`, else the embedded one under
//! the test root), driven with the machine's kubectl or another version. Dropping it deletes
//! every pod it runs (1 s grace) and stops it once containerd holds nothing of them.

use crate::{Running, binary, test_root};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static DAEMONS: AtomicUsize = AtomicUsize::new(0);

/// Debian's kubectl 1.20 as scripts/setup unpacks it.
pub const KUBECTL_1_20: &str = "/opt/kubectl-1.20/usr/bin/kubectl";

pub struct Daemon {
    pub port: u16,
    pub root: PathBuf,
    /// kubectl's home (its discovery and HTTP caches), fresh for each daemon.
    pub home: PathBuf,
    /// Started with `--tls`: kubectl then uses the daemon's kubeconfig (CA and token).
    pub tls: bool,
    /// The CRI endpoint its pods run on.
    endpoint: String,
    /// `podwright serve`'s arguments, for a restart.
    args: Vec<String>,
    /// Runs on its own embedded containerd under its root, stopped with it.
    embedded: bool,
    process: Option<Running>,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("bound").port()
}

impl Daemon {
    /// Starts a daemon and waits until its API answers.
    pub fn start() -> Daemon {
        Self::start_with(&[])
    }

    /// Starts a daemon with extra `serve` arguments.
    pub fn start_with(extra: &[&str]) -> Daemon {
        Self::start_on(extra, false)
    }

    /// Starts a daemon on an embedded containerd of its own (no `--runtime-endpoint`), which
    /// it keeps running; dropping the daemon stops it.
    pub fn start_embedded() -> Daemon {
        Self::start_on(&[], true)
    }

    /// [`Daemon::start_embedded`] with extra `serve` arguments.
    pub fn start_embedded_with(extra: &[&str]) -> Daemon {
        Self::start_on(extra, true)
    }

    fn start_on(extra: &[&str], embedded: bool) -> Daemon {
        let n = DAEMONS.fetch_add(1, Ordering::SeqCst);
        let base = test_root();
        let root = PathBuf::from(format!("{}-serve-{}-{n}", base.display(), std::process::id()));
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("daemon home");
        let port = free_port();
        let mut args: Vec<String> = vec!["serve".into(), "--root-dir".into(), root.display().to_string()];
        args.extend(["--port".into(), port.to_string()]);
        let endpoint = std::env::var("PODWRIGHT_CRI_ENDPOINT").ok().filter(|e| !e.is_empty() && !embedded);
        let endpoint = endpoint.unwrap_or_else(|| {
            let base = if embedded { &root } else { &base };
            let out = Command::new(binary())
                .args(["runtime", "start", "--root-dir"])
                .arg(base)
                .output()
                .expect("runtime start");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        });
        if !embedded {
            args.extend(["--runtime-endpoint".into(), endpoint.clone()]);
        }
        if !extra.contains(&"--config") {
            args.extend(["--config".into(), crate::keep_images_config().into()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let tls = extra.contains(&"--tls");
        let process = Some(spawn_serve(&args));
        Daemon { port, root, home, tls, endpoint, args, embedded, process }
    }

    /// Kills the daemon with SIGKILL (nothing is cleaned up, as in a crash) and starts it
    /// again on the same root directory and port.
    pub fn crash_and_restart(&mut self) {
        if let Some(p) = self.process.take() {
            p.signal(libc::SIGKILL);
            // Reaps it; the killed process's output is of no interest.
            drop(p);
        }
        self.process = Some(spawn_serve(&self.args));
    }

    /// The CRI endpoint the daemon's pods run on.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn server(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        self.process.as_ref().map(|p| p.stderr_so_far()).unwrap_or_default()
    }

    /// Runs kubectl (`version` None: the machine's default, else e.g. "1.27", "1.20" for
    /// [`KUBECTL_1_20`], or a path) against this daemon.
    pub fn kubectl_cmd(&self, version: Option<&str>, args: &[&str]) -> Command {
        let program = match version {
            None => "kubectl".to_string(),
            Some("1.20") => KUBECTL_1_20.to_string(),
            Some(v) if v.starts_with('/') => v.to_string(),
            Some(v) => versioned_kubectl(v),
        };
        let mut cmd = Command::new(program);
        cmd.env("HOME", &self.home).env_remove("KUBECONFIG");
        if self.tls {
            cmd.arg("--kubeconfig").arg(self.kubeconfig());
        } else {
            cmd.arg("--server").arg(self.server());
        }
        cmd.args(args);
        cmd
    }

    pub fn kubectl(&self, version: Option<&str>, args: &[&str]) -> Output {
        self.kubectl_cmd(version, args).output().expect("kubectl runs")
    }

    /// kubectl with the default version; panics with its output unless it succeeds. Returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(None, args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}\n--- daemon log:\n{}",
            text(&out.stdout),
            text(&out.stderr),
            self.log()
        );
        text(&out.stdout)
    }

    /// kubectl with the default version that must fail; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(None, args);
        assert!(!out.status.success(), "kubectl {args:?} succeeded: {}", text(&out.stdout));
        text(&out.stderr)
    }

    /// Polls `kubectl args` until its stdout satisfies `done`, at most `limit`; returns the last stdout.
    pub fn wait_for(&self, args: &[&str], limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let out = text(&self.kubectl(None, args).stdout);
            if done(&out) {
                return out;
            }
            assert!(
                start.elapsed() < limit,
                "kubectl {args:?} never satisfied the test; last output:\n{out}\n--- daemon log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Starts `podwright serve` and waits until its API answers.
fn spawn_serve(args: &[String]) -> Running {
    let mut process = Running::spawn(args, None);
    assert!(
        process.wait_for_stderr("serving the API", Duration::from_secs(30)),
        "podwright serve did not start:\n{}",
        process.stderr_so_far()
    );
    process
}

/// `kubectl.<version>` from the PATH, else where Google's kubectl package keeps them.
fn versioned_kubectl(v: &str) -> String {
    let name = format!("kubectl.{v}");
    let on_path =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(&name).is_file())).unwrap_or(false);
    if on_path { name } else { format!("/usr/lib/google-cloud-sdk/bin/{name}") }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let uids = self.pod_uids();
        // Not forced: a pod's object goes only once its containers have stopped, so that
        // nothing runs on after the daemon.
        let _ = self.kubectl(None, &["delete", "pods", "--all", "-A", "--grace-period=1", "--wait=false"]);
        let _ = self.wait_quiet();
        let _ = self.wait_removed(&uids);
        if let Some(p) = self.process.take() {
            p.signal(libc::SIGTERM);
            // Waiting may panic, which must not happen while a failed test unwinds.
            if !std::thread::panicking() {
                let _ = p.wait_within(Duration::from_secs(10));
            }
        }
        if self.embedded {
            let _ = Command::new(binary()).args(["runtime", "stop", "--root-dir"]).arg(&self.root).output();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Daemon {
    fn pod_uids(&self) -> Vec<String> {
        let out = self.kubectl(None, &["get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.uid}"]);
        text(&out.stdout).split_whitespace().map(str::to_string).collect()
    }

    /// Whether containerd still holds a container or sandbox of pod `uid` (false when `ctr`
    /// cannot tell: this runs in `drop`, where nothing may panic).
    fn holds(&self, uid: &str) -> bool {
        let socket = self.endpoint.strip_prefix("unix://").unwrap_or(&self.endpoint);
        let filter = format!("labels.\"io.kubernetes.pod.uid\"=={uid}");
        Command::new("ctr")
            .args(["-a", socket, "-n", "k8s.io", "containers", "ls", "-q", &filter])
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty())
    }

    /// Waits (up to 20 s) until containerd holds nothing of these pods: the node removes a
    /// deleted pod's containers and sandbox after its object is gone, and a daemon stopped
    /// before that would leave them in the suite's containerd.
    fn wait_removed(&self, uids: &[String]) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if !uids.iter().any(|uid| self.holds(uid)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// Waits (up to 20 s) until no pod is left.
    fn wait_quiet(&self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let out = self.kubectl(None, &["get", "pods", "-A", "-o", "name"]);
            if out.status.success() && out.stdout.is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }
}
