//! `kubectl exec`, `attach`, `cp` and `port-forward` against `podwright serve` on a real
//! containerd, with the machine's kubectl (1.32: WebSocket first, which podwright refuses so that
//! kubectl falls back to SPDY; and SPDY only when told so) and kubectl 1.27 (SPDY only).
//!
//! Environment, beside the harness's (`PODWRIGHT_BIN`, `PODWRIGHT_TEST_ROOT`):
//! * `PODWRIGHT_CRI_ENDPOINT`: a running containerd to use (`--runtime-endpoint`); without it
//!   the daemon starts its embedded one under its root.
//! * `PODWRIGHT_SERVE_ROOT`: the daemon's `--root-dir` (default `<test root>-streaming`, which
//!   scripts/test stops at the end).
//! * `PODWRIGHT_SERVE_PORT`: the daemon's `--port` (default 6502).
// Real processes, real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::{Running, pod_name, test_root};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long kubectl may take for one command before the test kills it (a guard against hangs,
/// never an assertion on speed).
const KUBECTL_LIMIT: &str = "60";
/// How long a pod may take to run its containers.
const START_LIMIT: Duration = Duration::from_secs(120);

fn serve_root() -> PathBuf {
    std::env::var_os("PODWRIGHT_SERVE_ROOT").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
        let mut root = test_root().into_os_string();
        root.push("-streaming");
        PathBuf::from(root)
    })
}

fn serve_port() -> u16 {
    std::env::var("PODWRIGHT_SERVE_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(6502)
}

/// The pod every test streams into: a shell that sleeps, a ticker that writes a line a second,
/// and busybox's httpd on 8080 serving one page.
fn pod_manifest(name: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}}, "spec": {{
  "terminationGracePeriodSeconds": 1,
  "containers": [
    {{"name": "shell", "image": "localhost/busybox:1.36", "command": ["sleep", "3600"]}},
    {{"name": "ticker", "image": "localhost/busybox:1.36",
      "command": ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"]}},
    {{"name": "web", "image": "localhost/busybox:1.36",
      "command": ["sh", "-c", "mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p 8080 -h /www"],
      "readinessProbe": {{"httpGet": {{"port": 8080, "path": "/index.html"}}, "periodSeconds": 1}}}}
  ]}}}}"#
    )
}

/// `podwright serve` on its own port and root, with one running pod, shared by the tests of
/// this file. The last test to finish deletes the pods and stops the daemon.
///
/// A helper of this file alone: it knows the one pod these tests use.
struct StreamingDaemon {
    root: PathBuf,
    pod: String,
    /// Shared between test threads; `Running` is not `Sync` by itself.
    _daemon: Mutex<Running>,
}

struct Lease {
    daemon: Arc<StreamingDaemon>,
}

static SHARED: OnceLock<Mutex<(Option<Arc<StreamingDaemon>>, usize)>> = OnceLock::new();

impl StreamingDaemon {
    fn lease() -> Lease {
        let mut shared = SHARED.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
        if shared.0.is_none() {
            shared.0 = Some(Arc::new(StreamingDaemon::start()));
        }
        shared.1 += 1;
        Lease { daemon: shared.0.clone().expect("just started") }
    }

    fn start() -> StreamingDaemon {
        let root = serve_root();
        let mut args: Vec<String> = vec!["serve".into(), "--port".into(), serve_port().to_string()];
        args.extend(["--root-dir".into(), root.to_string_lossy().into_owned()]);
        if let Some(endpoint) = std::env::var("PODWRIGHT_CRI_ENDPOINT").ok().filter(|e| !e.is_empty()) {
            args.extend(["--runtime-endpoint".into(), endpoint]);
        }
        let mut daemon = Running::spawn(&args, None);
        assert!(
            daemon.wait_for_stderr("serving the API on", Duration::from_secs(120)),
            "podwright serve did not start:\n{}",
            daemon.stderr_so_far()
        );
        let pod = pod_name("streaming");
        let this = StreamingDaemon { root, pod, _daemon: Mutex::new(daemon) };
        let manifest = std::env::temp_dir().join(format!("{}.json", this.pod));
        std::fs::write(&manifest, pod_manifest(&this.pod)).unwrap();
        this.kubectl(&["create", "--validate=false", "-f", &manifest.to_string_lossy()]).success();
        std::fs::remove_file(&manifest).unwrap();
        this.wait_running();
        this
    }

    fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    /// Waits until every container of the pod is ready (httpd answers once `web` is).
    fn wait_running(&self) {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let states = self.kubectl(&[
                "get",
                "pod",
                &self.pod,
                "-o",
                "jsonpath={.status.phase} {.status.containerStatuses[*].ready}",
            ]);
            let text = states.stdout_text();
            if text == "Running true true true" {
                return;
            }
            assert!(Instant::now() < deadline, "pod {} not running in time: {text}", self.pod);
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn kubectl(&self, args: &[&str]) -> Ran {
        Client::websocket_first().run(self, args, None)
    }
}

impl Drop for StreamingDaemon {
    fn drop(&mut self) {
        // Not forced: kubectl then waits until the node has stopped the pods' containers and
        // sandboxes and the objects are gone, so that stopping the daemon next leaves nothing
        // running in the runtime.
        let delete = ["delete", "pod", "--all", "--grace-period=1", "--timeout=60s"];
        let _ = Client::websocket_first().command(self, &delete).output();
        // `_daemon` is dropped next: SIGINT, then SIGKILL if it lingers.
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut shared = SHARED.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
        shared.1 -= 1;
        if shared.1 == 0 {
            shared.0 = None;
        }
    }
}

/// One kubectl: a binary and the environment that chooses its protocol.
#[derive(Clone, Debug)]
struct Client {
    name: &'static str,
    binary: PathBuf,
    env: &'static [(&'static str, &'static str)],
}

/// Where the versioned kubectl binaries live: beside the real `kubectl` on the PATH.
fn kubectl_dir() -> PathBuf {
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl is not on the PATH");
    std::fs::canonicalize(&found).unwrap().parent().unwrap().to_path_buf()
}

impl Client {
    fn versioned(name: &'static str, file: &str, env: &'static [(&'static str, &'static str)]) -> Client {
        let binary = kubectl_dir().join(file);
        assert!(binary.is_file(), "{} is missing", binary.display());
        Client { name, binary, env }
    }

    /// kubectl 1.32: WebSocket first for exec, attach, cp and port-forward.
    fn websocket_first() -> Client {
        Client::versioned("kubectl 1.32 (WebSocket first)", "kubectl.1.32", &[])
    }

    /// kubectl 1.32 told to speak SPDY only.
    fn spdy_only() -> Client {
        Client::versioned(
            "kubectl 1.32 (SPDY only)",
            "kubectl.1.32",
            &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false"), ("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
        )
    }

    /// kubectl 1.27, which speaks SPDY only.
    fn old() -> Client {
        Client::versioned("kubectl 1.27", "kubectl.1.27", &[])
    }

    fn all() -> [Client; 3] {
        [Client::websocket_first(), Client::spdy_only(), Client::old()]
    }

    fn bare_command(&self, d: &StreamingDaemon, args: &[&str]) -> Command {
        let mut c = Command::new(&self.binary);
        c.args(args).env("KUBECONFIG", d.kubeconfig()).envs(self.env.iter().copied());
        c
    }

    /// kubectl under `timeout`, so that a hang ends the test instead of stalling it.
    fn command(&self, d: &StreamingDaemon, args: &[&str]) -> Command {
        let mut c = Command::new("timeout");
        c.arg(KUBECTL_LIMIT)
            .arg(&self.binary)
            .args(args)
            .env("KUBECONFIG", d.kubeconfig())
            .envs(self.env.iter().copied());
        c
    }

    fn run(&self, d: &StreamingDaemon, args: &[&str], stdin: Option<&[u8]>) -> Ran {
        let mut c = self.command(d, args);
        c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting kubectl");
        if let Some(bytes) = stdin {
            // Dropping the pipe after writing closes kubectl's stdin.
            child.stdin.take().unwrap().write_all(bytes).unwrap();
        }
        Ran { what: format!("{} {args:?}", self.name), output: child.wait_with_output().unwrap() }
    }

    /// kubectl with a terminal: `script` runs it on a pseudo-terminal.
    fn run_on_tty(&self, d: &StreamingDaemon, args: &[&str]) -> Ran {
        let line = std::iter::once(self.binary.to_string_lossy().into_owned())
            .chain(args.iter().map(|a| format!("'{a}'")))
            .collect::<Vec<_>>()
            .join(" ");
        let output = Command::new("timeout")
            .args([KUBECTL_LIMIT, "script", "-qec", &line, "/dev/null"])
            .env("KUBECONFIG", d.kubeconfig())
            .envs(self.env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Ran { what: format!("{} on a tty {args:?}", self.name), output }
    }

    /// A kubectl that runs until the test is done with it (attach, port-forward).
    fn start(&self, d: &StreamingDaemon, args: &[&str]) -> Background {
        let mut child = self
            .bare_command(d, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting kubectl");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().unwrap(), stdout.clone());
        collect(child.stderr.take().unwrap(), stderr.clone());
        Background { what: format!("{} {args:?}", self.name), child, stdout, stderr }
    }
}

fn collect(mut from: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
}

/// A finished kubectl.
struct Ran {
    what: String,
    output: Output,
}

impl Ran {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn context(&self) -> String {
        format!(
            "{}: exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.what,
            self.code(),
            self.stdout_text(),
            self.stderr_text()
        )
    }

    fn success(&self) -> &Self {
        assert_eq!(self.code(), Some(0), "{}", self.context());
        self
    }
}

/// A kubectl still running; killed when dropped.
struct Background {
    what: String,
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Background {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// Waits until stdout contains `needle`; panics with the output when kubectl exits first
    /// or `limit` passes.
    fn wait_for_stdout(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let text = self.stdout_text();
            if text.contains(needle) {
                return text;
            }
            let exited = self.child.try_wait().unwrap();
            if exited.is_some() || Instant::now() >= deadline {
                panic!(
                    "{}: no {needle:?} on stdout (exit {exited:?})\nstdout:\n{text}\nstderr:\n{}",
                    self.what,
                    String::from_utf8_lossy(&self.stderr.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn exec_runs_a_command_and_carries_stdin_to_its_end() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let out = client.run(d, &["exec", &d.pod, "-c", "shell", "--", "echo", "hi"], None);
        out.success();
        assert_eq!(out.stdout_text(), "hi\n", "{}", out.context());

        // stdin's end reaches the command: `cat` ends and the script goes on.
        let args = ["exec", "-i", &d.pod, "-c", "shell", "--", "sh", "-c", "cat; echo done"];
        let out = client.run(d, &args, Some(b"abc\nxyz\n"));
        out.success();
        assert_eq!(out.stdout_text(), "abc\nxyz\ndone\n", "{}", out.context());

        // stderr stays apart from stdout.
        let out = client.run(d, &["exec", &d.pod, "-c", "shell", "--", "sh", "-c", "echo out; echo err >&2"], None);
        out.success();
        assert_eq!((out.stdout_text().as_str(), out.stderr_text().as_str()), ("out\n", "err\n"), "{}", out.context());
    }
}

#[test]
fn exec_exit_codes_reach_kubectl() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let out = client.run(d, &["exec", &d.pod, "-c", "shell", "--", "sh", "-c", "exit 3"], None);
        assert_eq!(out.code(), Some(3), "{}", out.context());
        assert!(out.stderr_text().contains("command terminated with exit code 3"), "{}", out.context());
    }
}

#[test]
fn exec_with_a_tty() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let args = ["exec", "-it", &d.pod, "-c", "shell", "--", "sh", "-c", "tty; test -t 0 && echo stdin-is-a-tty"];
        let out = client.run_on_tty(d, &args);
        out.success();
        let text = out.stdout_text();
        assert!(text.contains("/dev/pts/"), "{}", out.context());
        assert!(text.contains("stdin-is-a-tty"), "{}", out.context());
    }
}

#[test]
fn cp_copies_a_file_in_and_out() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    let dir = std::env::temp_dir().join(format!("podwright-cp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, client) in Client::all().iter().enumerate() {
        let content = format!("copied by {}\n{}\n", client.name, "x".repeat(100_000));
        let local_in = dir.join(format!("in-{i}.txt"));
        let local_out = dir.join(format!("out-{i}.txt"));
        std::fs::write(&local_in, &content).unwrap();
        let remote = format!("{}:/tmp/cp-{i}.txt", d.pod);
        client.run(d, &["cp", "-c", "shell", &path(&local_in), &remote], None).success();
        let out = client.run(d, &["exec", &d.pod, "-c", "shell", "--", "cat", &format!("/tmp/cp-{i}.txt")], None);
        assert_eq!(out.success().stdout_text(), content, "{}", out.context());
        client.run(d, &["cp", "-c", "shell", &remote, &path(&local_out)], None).success();
        assert_eq!(std::fs::read_to_string(&local_out).unwrap(), content);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// podwright refuses `stdin` and `tty` on containers (crates/api honoured_fields), so attach
/// follows the output of a container that has neither.
#[test]
fn attach_follows_a_running_containers_output() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let mut attached = client.start(d, &["attach", &d.pod, "-c", "ticker"]);
        let first = attached.wait_for_stdout("tick ", Duration::from_secs(30));
        // Lines that were written after the attach began: the stream is live.
        let n: u64 = first.lines().find_map(|l| l.strip_prefix("tick ")?.parse().ok()).unwrap();
        attached.wait_for_stdout(&format!("tick {}", n + 1), Duration::from_secs(30));
    }
}

#[test]
fn port_forward_reaches_a_port_in_the_pod() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let mut forward = client.start(d, &["port-forward", &d.pod, ":8080"]);
        let text = forward.wait_for_stdout(" -> 8080", Duration::from_secs(30));
        let port: u16 = text
            .lines()
            .find_map(|l| l.strip_prefix("Forwarding from 127.0.0.1:")?.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{}: no local port in {text:?}", client.name));
        // Two connections: each is a stream of its own in the one forwarded session.
        for _ in 0..2 {
            let page = http_get(port);
            assert!(page.starts_with("HTTP/1.") && page.contains("hello from httpd"), "{}: {page}", client.name);
        }
    }
}

fn http_get(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page
}

#[test]
fn refusals_read_as_the_kubelets() {
    let lease = StreamingDaemon::lease();
    let d = &*lease.daemon;
    for client in Client::all() {
        let out = client.run(d, &["exec", &d.pod, "-c", "nope", "--", "true"], None);
        assert_eq!(out.code(), Some(1), "{}", out.context());
        let expected = format!("Error from server (BadRequest): container nope is not valid for pod {}", d.pod);
        assert!(out.stderr_text().contains(&expected), "{}", out.context());
    }
}
