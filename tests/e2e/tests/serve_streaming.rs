//! `kubectl exec`, `attach`, `cp` and `port-forward` against `podwright serve` on a real
//! containerd, with kubectl 1.32 and 1.33 over WebSocket (v5 for exec, attach and cp, the SPDY
//! tunnel for port-forward; their logs show that no SPDY retry happened), kubectl 1.32 told to
//! speak SPDY only, and kubectl 1.27 (SPDY only); interactive containers (`stdin`, `stdinOnce`,
//! `tty`) with `kubectl run -it --rm` and `kubectl attach -it`, with kubectl 1.32 and 1.20.
// Real processes, real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::pod_name;
use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::terminal::on_terminal;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// How long one kubectl command may take before the test kills it (a guard against hangs,
/// never an assertion on speed).
const KUBECTL_LIMIT: Duration = Duration::from_secs(60);
/// How long the pod may take to get ready.
const START_LIMIT: Duration = Duration::from_secs(120);

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

/// One daemon with the pod ready, shared by the tests of this file; the last test to finish
/// deletes the pod and stops the daemon.
struct Fixture {
    pod: String,
    daemon: Daemon,
}

/// The fixture while any test holds it. `Daemon` is not `Sync`: each kubectl command is built
/// under the fixture's lock, then run without it.
#[derive(Default)]
struct Shared {
    fixture: Option<Arc<Mutex<Fixture>>>,
    leases: usize,
}

static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();

fn shared() -> std::sync::MutexGuard<'static, Shared> {
    SHARED.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's hold on the fixture.
struct Lease {
    fixture: Arc<Mutex<Fixture>>,
    pod: String,
}

impl Lease {
    fn take() -> Lease {
        let mut shared = shared();
        let fixture = shared.fixture.get_or_insert_with(|| Arc::new(Mutex::new(Fixture::start()))).clone();
        shared.leases += 1;
        let pod = fixture.lock().unwrap_or_else(|e| e.into_inner()).pod.clone();
        Lease { fixture, pod }
    }

    /// Creates a pod `name` of this test's from `manifest` and waits until `jsonpath` reads
    /// `ready`; the daemon deletes it when it stops.
    fn start_pod(&self, name: &str, manifest: &str, jsonpath: &str, ready: &str) {
        let file = podwright_e2e::Manifest::new(manifest);
        let created = self.kubectl(&["create", "-f", file.path_str()]);
        assert!(created.status.success(), "{}", text(&created.stderr));
        let deadline = Instant::now() + START_LIMIT;
        loop {
            // Polled without holding the fixture, which the other tests use meanwhile.
            let now = text(&self.kubectl(&["get", "pod", name, "-o", &format!("jsonpath={jsonpath}")]).stdout);
            if now == ready {
                return;
            }
            assert!(Instant::now() < deadline, "pod {name}: {jsonpath} is {now:?}, not {ready:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The machine's kubectl, run to its end.
    fn kubectl(&self, args: &[&str]) -> Output {
        self.fixture.lock().unwrap_or_else(|e| e.into_inner()).daemon.kubectl_cmd(None, args).output().unwrap()
    }

    fn command(&self, client: &Client, args: &[&str]) -> Command {
        let fixture = self.fixture.lock().unwrap_or_else(|e| e.into_inner());
        // -v=6 logs each request with its method and status: what tells WebSocket from SPDY.
        let verbose = client.websocket.then_some("-v=6");
        let args: Vec<&str> = verbose.into_iter().chain(args.iter().copied()).collect();
        let mut cmd = fixture.daemon.kubectl_cmd(client.version, &args);
        cmd.envs(client.env.iter().copied());
        cmd
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut shared = shared();
        shared.leases -= 1;
        if shared.leases == 0 {
            shared.fixture = None;
        }
    }
}

impl Fixture {
    fn start() -> Fixture {
        let daemon = Daemon::start();
        let pod = pod_name("streaming");
        let manifest = std::env::temp_dir().join(format!("{pod}.json"));
        std::fs::write(&manifest, pod_manifest(&pod)).unwrap();
        daemon.ok(&["create", "-f", &manifest.to_string_lossy()]);
        std::fs::remove_file(&manifest).unwrap();
        let jsonpath = "jsonpath={.status.phase} {.status.containerStatuses[*].ready}";
        daemon.wait_for(&["get", "pod", &pod, "-o", jsonpath], START_LIMIT, |s| s == "Running true true true");
        Fixture { pod, daemon }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Not forced: kubectl waits until the node has stopped the pod's containers and sandbox
        // and the object is gone, so that stopping the daemon next leaves nothing running.
        let delete = ["delete", "pod", &self.pod, "--grace-period=1", "--timeout=60s"];
        let _ = self.daemon.kubectl(None, &delete);
    }
}

/// One kubectl: a version and the environment that chooses its protocol.
#[derive(Clone, Debug)]
struct Client {
    name: &'static str,
    /// As `Daemon::kubectl_cmd` takes it: None for the machine's default (1.32).
    version: Option<&'static str>,
    env: &'static [(&'static str, &'static str)],
    /// Whether podwright must serve it over WebSocket, with no fallback to SPDY.
    websocket: bool,
}

impl Client {
    /// kubectl 1.32: WebSocket first for exec, attach, cp and port-forward.
    const WEBSOCKET: Client = Client { name: "kubectl 1.32 (WebSocket)", version: None, env: &[], websocket: true };
    /// kubectl 1.33, WebSocket first too.
    const WEBSOCKET_1_33: Client =
        Client { name: "kubectl 1.33 (WebSocket)", version: Some("1.33"), env: &[], websocket: true };
    /// kubectl 1.32 told to speak SPDY only.
    const SPDY_ONLY: Client = Client {
        name: "kubectl 1.32 (SPDY only)",
        version: None,
        env: &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false"), ("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
        websocket: false,
    };
    /// kubectl 1.27, which speaks SPDY only.
    const OLD: Client = Client { name: "kubectl 1.27", version: Some("1.27"), env: &[], websocket: false };

    /// kubectl 1.20, the oldest podwright serves: SPDY only.
    const V1_20: Client = Client { name: "kubectl 1.20", version: Some("1.20"), env: &[], websocket: false };

    fn all() -> [Client; 4] {
        [Client::WEBSOCKET, Client::WEBSOCKET_1_33, Client::SPDY_ONLY, Client::OLD]
    }

    /// The clients of the interactive tests: the newest over WebSocket, the oldest over SPDY.
    fn interactive() -> [Client; 2] {
        [Client::WEBSOCKET, Client::V1_20]
    }

    fn run(&self, l: &Lease, args: &[&str], stdin: Option<&[u8]>) -> Ran {
        let mut cmd = l.command(self, args);
        let mut ran = bounded(format!("{} {args:?}", self.name), &mut cmd, stdin);
        ran.websocket = self.websocket;
        ran
    }

    /// kubectl with a terminal of 30 rows and 90 columns: `script` runs it on a pseudo-terminal.
    fn run_on_tty(&self, l: &Lease, args: &[&str]) -> Ran {
        let mut ran = bounded(format!("{} on a tty {args:?}", self.name), &mut self.on_tty(l, args), None);
        ran.websocket = self.websocket;
        ran
    }

    /// kubectl on a terminal ([`on_terminal`]).
    fn on_tty(&self, l: &Lease, args: &[&str]) -> Command {
        on_terminal(&l.command(self, args))
    }

    /// A kubectl that runs until the test is done with it (attach, port-forward).
    fn start(&self, l: &Lease, args: &[&str]) -> Background {
        Background::spawn(format!("{} {args:?}", self.name), self.websocket, l.command(self, args), Stdio::null())
    }

    /// [`Client::start`] with a stdin the test writes to ([`Background::send`]) and closes.
    fn start_with_input(&self, l: &Lease, args: &[&str]) -> Background {
        Background::spawn(format!("{} {args:?}", self.name), self.websocket, l.command(self, args), Stdio::piped())
    }

    /// [`Client::start_with_input`] on a terminal ([`Client::on_tty`]).
    fn start_on_tty(&self, l: &Lease, args: &[&str]) -> Background {
        let what = format!("{} on a tty {args:?}", self.name);
        Background::spawn(what, self.websocket, self.on_tty(l, args), Stdio::piped())
    }
}

/// Runs `cmd` to its end, feeding it `stdin` (then closing it); kills it and fails the test
/// when it runs longer than [`KUBECTL_LIMIT`].
fn bounded(what: String, cmd: &mut Command, stdin: Option<&[u8]>) -> Ran {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting kubectl");
    if let Some(bytes) = stdin {
        // Dropping the pipe after writing closes the command's stdin.
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(KUBECTL_LIMIT) {
        Ok(output) => Ran { what, output: output.unwrap(), websocket: false },
        Err(_) => {
            // SAFETY: kill(2) on our own child, not yet reaped: its waiter has not returned.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("{what} still ran after {KUBECTL_LIMIT:?}; killed it");
        }
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
    /// Run by a WebSocket client: its log shows the protocol, and is no part of its stderr.
    websocket: bool,
}

/// Whether `line` is one of kubectl's log lines (klog: `I1123 23:19:13.449222 …`).
fn is_log_line(line: &str) -> bool {
    let mut chars = line.chars();
    matches!(chars.next(), Some('I' | 'W' | 'E' | 'F'))
        && chars.by_ref().take(4).filter(char::is_ascii_digit).count() == 4
        && chars.next() == Some(' ')
}

/// Asserts that kubectl's log (-v=6) shows every streaming request it made answered `101` to
/// its WebSocket GET, and no SPDY retry (a POST).
fn assert_served_over_websocket(what: &str, log: &str) {
    let streaming = |l: &&str| ["/exec?", "/attach?", "/portforward\""].iter().any(|p| l.contains(p));
    let requests: Vec<&str> = log.lines().filter(|l| is_log_line(l)).filter(streaming).collect();
    assert!(!requests.is_empty(), "{what}: no streaming request in kubectl's log:\n{log}");
    for r in requests {
        assert!(r.contains(r#"verb="GET""#) && r.contains(r#"status="101 Switching Protocols""#), "{what}: {r}\n{log}");
    }
    assert!(!log.contains("fallback"), "{what}: kubectl fell back to SPDY:\n{log}");
}

impl Ran {
    fn stdout_text(&self) -> String {
        text(&self.output.stdout)
    }

    /// stderr without kubectl's log lines.
    fn stderr_text(&self) -> String {
        let all = text(&self.output.stderr);
        all.split_inclusive('\n').filter(|l| !is_log_line(l)).collect()
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
        self.streamed()
    }

    /// For a WebSocket client, asserts that podwright served it over WebSocket.
    fn streamed(&self) -> &Self {
        if self.websocket {
            // On a terminal, the log shares stdout with the command's output.
            let log = format!("{}{}", text(&self.output.stderr), self.stdout_text());
            assert_served_over_websocket(&self.what, &log);
        }
        self
    }
}

/// A kubectl still running; killed when dropped.
struct Background {
    what: String,
    websocket: bool,
    child: Child,
    /// Open until [`Background::close_stdin`], when piped.
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Background {
    fn spawn(what: String, websocket: bool, mut cmd: Command, stdin: Stdio) -> Background {
        let mut child =
            cmd.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting kubectl");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().unwrap(), stdout.clone());
        collect(child.stderr.take().unwrap(), stderr.clone());
        Background { what, websocket, stdin: child.stdin.take(), child, stdout, stderr }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap_or_else(|| panic!("{}: stdin is not open", self.what));
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits until kubectl exits, at most [`KUBECTL_LIMIT`]: its status and stdout.
    fn finish(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + KUBECTL_LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The readers see the end of the pipes just after the exit.
                std::thread::sleep(Duration::from_millis(200));
                return (status, text(&self.stdout.lock().unwrap()));
            }
            assert!(
                Instant::now() < deadline,
                "{} still ran after {KUBECTL_LIMIT:?}\nstdout:\n{}\nstderr:\n{}",
                self.what,
                text(&self.stdout.lock().unwrap()),
                text(&self.stderr.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until stdout contains `needle`; panics with the output when kubectl exits first
    /// or `limit` passes.
    fn wait_for_stdout(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let out = text(&self.stdout.lock().unwrap());
            if out.contains(needle) {
                return out;
            }
            let exited = self.child.try_wait().unwrap();
            if exited.is_some() || Instant::now() >= deadline {
                panic!(
                    "{}: no {needle:?} on stdout (exit {exited:?})\nstdout:\n{out}\nstderr:\n{}",
                    self.what,
                    text(&self.stderr.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Background {
    /// For a WebSocket client, asserts that podwright served it over WebSocket.
    fn streamed(&self) {
        if self.websocket {
            // On a terminal, the log shares stdout with the command's output.
            let log = format!("{}{}", text(&self.stderr.lock().unwrap()), text(&self.stdout.lock().unwrap()));
            assert_served_over_websocket(&self.what, &log);
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
    let l = Lease::take();
    for client in Client::all() {
        let out = client.run(&l, &["exec", &l.pod, "-c", "shell", "--", "echo", "hi"], None);
        out.success();
        assert_eq!(out.stdout_text(), "hi\n", "{}", out.context());

        // stdin's end reaches the command: `cat` ends and the script goes on.
        let args = ["exec", "-i", &l.pod, "-c", "shell", "--", "sh", "-c", "cat; echo done"];
        let out = client.run(&l, &args, Some(b"abc\nxyz\n"));
        out.success();
        assert_eq!(out.stdout_text(), "abc\nxyz\ndone\n", "{}", out.context());

        // stderr stays apart from stdout.
        let out = client.run(&l, &["exec", &l.pod, "-c", "shell", "--", "sh", "-c", "echo out; echo err >&2"], None);
        out.success();
        assert_eq!((out.stdout_text().as_str(), out.stderr_text().as_str()), ("out\n", "err\n"), "{}", out.context());
    }
}

#[test]
fn exec_exit_codes_reach_kubectl() {
    let l = Lease::take();
    for client in Client::all() {
        let out = client.run(&l, &["exec", &l.pod, "-c", "shell", "--", "sh", "-c", "exit 3"], None);
        assert_eq!(out.streamed().code(), Some(3), "{}", out.context());
        assert!(out.stderr_text().contains("command terminated with exit code 3"), "{}", out.context());
    }
}

#[test]
fn exec_with_a_tty() {
    let l = Lease::take();
    // The terminal's size comes through the resize stream, after the start: the script waits
    // for it (at most 10 s; busybox's `stty size` on a terminal of no size prints an error and
    // nothing on stdout).
    let script = "tty; test -t 0 && echo stdin-is-a-tty; \
        for i in $(seq 100); do s=$(stty size 2>/dev/null); case \"$s\" in [1-9]*) break;; esac; sleep 0.1; done; \
        echo \"size=$s\"";
    for client in Client::all() {
        let out = client.run_on_tty(&l, &["exec", "-it", &l.pod, "-c", "shell", "--", "sh", "-c", script]);
        out.success();
        let text = out.stdout_text();
        assert!(text.contains("/dev/pts/"), "{}", out.context());
        assert!(text.contains("stdin-is-a-tty"), "{}", out.context());
        assert!(text.contains("size=30 90"), "{}", out.context());
    }
}

#[test]
fn cp_copies_a_file_in_and_out() {
    let l = Lease::take();
    let dir = std::env::temp_dir().join(format!("podwright-cp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, client) in Client::all().iter().enumerate() {
        let content = format!("copied by {}\n{}\n", client.name, "x".repeat(100_000));
        let local_in = dir.join(format!("in-{i}.txt"));
        let local_out = dir.join(format!("out-{i}.txt"));
        std::fs::write(&local_in, &content).unwrap();
        let remote = format!("{}:/tmp/cp-{i}.txt", l.pod);
        client.run(&l, &["cp", "-c", "shell", &path(&local_in), &remote], None).success();
        let out = client.run(&l, &["exec", &l.pod, "-c", "shell", "--", "cat", &format!("/tmp/cp-{i}.txt")], None);
        assert_eq!(out.success().stdout_text(), content, "{}", out.context());
        client.run(&l, &["cp", "-c", "shell", &remote, &path(&local_out)], None).success();
        assert_eq!(std::fs::read_to_string(&local_out).unwrap(), content);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Attach follows the output of a container without `stdin` or `tty`; with `-i` kubectl also
/// opens stdin, whose end (it reads /dev/null) closes that stream and nothing else.
#[test]
fn attach_follows_a_running_containers_output() {
    let l = Lease::take();
    for client in Client::all() {
        for stdin in [None, Some("-i")] {
            let args: Vec<&str> = ["attach"].into_iter().chain(stdin).chain([l.pod.as_str(), "-c", "ticker"]).collect();
            let mut attached = client.start(&l, &args);
            let first = attached.wait_for_stdout("tick ", Duration::from_secs(30));
            // Lines that were written after the attach began: the stream is live.
            let n: u64 = first.lines().find_map(|l| l.strip_prefix("tick ")?.parse().ok()).unwrap();
            attached.wait_for_stdout(&format!("tick {}", n + 1), Duration::from_secs(30));
            attached.streamed();
        }
    }
}

#[test]
fn port_forward_reaches_a_port_in_the_pod() {
    let l = Lease::take();
    for client in Client::all() {
        let mut forward = client.start(&l, &["port-forward", &l.pod, ":8080"]);
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
        forward.streamed();
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
    let l = Lease::take();
    for client in Client::all() {
        let out = client.run(&l, &["exec", &l.pod, "-c", "nope", "--", "true"], None);
        assert_eq!(out.code(), Some(1), "{}", out.context());
        let expected = format!("Error from server (BadRequest): container nope is not valid for pod {}", l.pod);
        assert!(out.stderr_text().contains(&expected), "{}", out.context());
    }
}

/// What kubectl attach prints (on stderr) before the session, when stdin is asked for.
const PROMPT_HINT: &str = "If you don't see a command prompt, try pressing enter.";

/// A pod whose containers are `containers` (the fields of a YAML flow mapping, `name` and
/// `command` among them), each on busybox, ready when this returns; its name is `base` made
/// unique.
fn interactive_pod(l: &Lease, base: &str, containers: &[&str]) -> String {
    let name = pod_name(base);
    let list: Vec<String> =
        containers.iter().map(|c| format!("  - {{image: localhost/busybox:1.36, {c}}}\n")).collect();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n{}",
        list.concat()
    );
    let running = vec!["true"; containers.len()].join(" ");
    l.start_pod(
        &name,
        &manifest,
        "{.status.phase} {.status.containerStatuses[*].ready}",
        &format!("Running {running}"),
    );
    name
}

/// A loop that answers each line of stdin, then says when stdin has ended and stays up.
const ECHO_LOOP: &str = "command: [sh, -c, 'while read x; do echo got $x; done; echo stdin-closed; exec sleep 3600']";

/// `kubectl run -i --rm` makes a pod with `stdin` and `stdinOnce` (and `tty` with `-t`), attaches
/// to it once it runs, waits for its end, then deletes it.
#[test]
fn run_it_rm_attaches_to_the_pod_it_made_then_deletes_it() {
    let l = Lease::take();
    for (i, client) in Client::interactive().iter().enumerate() {
        // Without a terminal: the end of kubectl's input closes the container's (stdinOnce).
        let name = pod_name(&format!("run-i-{i}"));
        let script = "read x; echo got $x; read y || echo stdin-closed";
        let image = "--image=localhost/busybox:1.36";
        let args = ["run", &name, image, "--restart=Never", "-i", "--rm", "--command", "--", "sh", "-c", script];
        let out = client.run(&l, &args, Some(b"hello\n"));
        out.success();
        let expected = format!("got hello\nstdin-closed\npod \"{name}\" deleted\n");
        assert!(out.stdout_text().ends_with(&expected), "{}", out.context());

        // On a terminal: what is typed reaches the container's own terminal.
        let name = pod_name(&format!("run-it-{i}"));
        let script = "read x; echo got $x; test -t 0 && echo stdin-is-a-tty";
        let args = ["run", &name, image, "--restart=Never", "-it", "--rm", "--command", "--", "sh", "-c", script];
        let mut session = client.start_on_tty(&l, &args);
        session.wait_for_stdout(PROMPT_HINT, START_LIMIT);
        session.send(b"hello\r");
        let (status, out) = session.finish();
        assert!(status.success(), "{}: {status}\n{out}", session.what);
        for line in ["got hello\r\n", "stdin-is-a-tty\r\n", &format!("pod \"{name}\" deleted")] {
            assert!(out.contains(line), "{}: no {line:?} in\n{out}", session.what);
        }
        session.streamed();
    }
}

/// `kubectl attach -it` to a shell on its own terminal, sized as kubectl's; `attach -i` to a
/// container with stdin: lines in, answers out. Ending a session leaves the container running
/// with its stdin open for the next one (no stdinOnce).
#[test]
fn attach_carries_stdin_and_a_terminal_to_a_running_container() {
    let l = Lease::take();
    let shell = "name: shell, stdin: true, tty: true, command: [sh]";
    let echo = format!("name: echo, stdin: true, {ECHO_LOOP}");
    let pod = interactive_pod(&l, "attach-stdin", &[shell, &echo]);
    // The size arrives on the resize stream, after the start: the shell waits for it.
    let size = r#"for i in $(seq 100); do s=$(stty size); [ "$s" = "30 90" ] && break; sleep 0.1; done; echo size=$s"#;
    for (i, client) in Client::interactive().iter().enumerate() {
        let mut session = client.start_on_tty(&l, &["attach", "-it", &pod, "-c", "shell"]);
        session.wait_for_stdout(PROMPT_HINT, Duration::from_secs(30));
        session.send(format!("echo hello-$((40+{i})); {size}\r").as_bytes());
        session.wait_for_stdout(&format!("hello-{}\r\n", 40 + i), Duration::from_secs(30));
        session.wait_for_stdout("size=30 90\r\n", Duration::from_secs(30));
        session.streamed();
        drop(session);

        let mut session = client.start_with_input(&l, &["attach", "-i", &pod, "-c", "echo"]);
        session.send(format!("line-{i}\n").as_bytes());
        session.wait_for_stdout(&format!("got line-{i}\n"), Duration::from_secs(30));
        session.close_stdin();
        let (status, out) = session.finish();
        assert!(status.success(), "{}: {status}\n{out}", session.what);
        session.streamed();
    }
    assert_eq!(text(&l.kubectl(&["logs", &pod, "-c", "echo"]).stdout), "got line-0\ngot line-1\n");
    let restarts = ["get", "pod", &pod, "-o", "jsonpath={.status.containerStatuses[*].restartCount}"];
    assert_eq!(text(&l.kubectl(&restarts).stdout), "0 0");
}

/// `stdinOnce`: when the first attach's input ends, the runtime closes the container's stdin
/// (containerd 1.6 does so for a container without a TTY); that session follows the output
/// until the container ends.
#[test]
fn stdin_once_closes_the_containers_stdin_after_the_first_attach() {
    let l = Lease::take();
    let clients = Client::interactive();
    let containers: Vec<String> =
        (0..clients.len()).map(|i| format!("name: once-{i}, stdin: true, stdinOnce: true, {ECHO_LOOP}")).collect();
    let containers: Vec<&str> = containers.iter().map(String::as_str).collect();
    let pod = interactive_pod(&l, "attach-once", &containers);
    for (i, client) in clients.iter().enumerate() {
        let container = format!("once-{i}");
        let mut session = client.start_with_input(&l, &["attach", "-i", &pod, "-c", &container]);
        session.send(b"first\n");
        session.wait_for_stdout("got first\n", Duration::from_secs(30));
        session.close_stdin();
        session.wait_for_stdout("got first\nstdin-closed\n", Duration::from_secs(30));
        assert!(session.child.try_wait().unwrap().is_none(), "{}: ended with the input", session.what);
        session.streamed();
        drop(session);
        let logs = l.kubectl(&["logs", &pod, "-c", &container]);
        assert_eq!(text(&logs.stdout), "got first\nstdin-closed\n", "{}", client.name);
    }
}
