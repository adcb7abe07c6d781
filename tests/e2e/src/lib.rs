//! End-to-end tests live in tests/; they drive target/release/podwright against real containerd.
//!
//! This library is their harness: it finds the binary and the test root, writes manifests to
//! temporary files, runs `podwright` (to completion or step by step), captures stdout, stderr and
//! the exit code, and picks apart what podwright prints: the `-o json` `List` (pods, then events),
//! the progress lines and the containers' output on stderr.
//!
//! Environment:
//! * `PODWRIGHT_BIN`: the binary (default `<workspace>/target/release/podwright`; build it with
//!   `cargo build --release -p podwright`). A missing binary fails the tests, it never skips them.
//! * `PODWRIGHT_TEST_ROOT`: podwright's `--root-dir` (default `/var/lib/podwright-test`). All
//!   tests share the embedded containerd under it, concurrently. `scripts/test` stops it at the
//!   end.
// The harness runs the real binary against a real containerd: real timeouts.
#![allow(clippy::disallowed_methods)]

pub mod cluster;
pub mod registry;
pub mod serve;
pub mod terminal;

use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `--timeout` given to podwright unless a test picks its own: far longer than any test pod
/// lives, so a hang shows up as exit code 124 rather than as a stuck test.
pub const DEFAULT_TIMEOUT_SECS: u64 = 90;

/// How much longer than podwright's own `--timeout` the harness waits before it kills podwright.
const HARNESS_GRACE: Duration = Duration::from_secs(60);

/// The podwright binary under test. Panics with instructions when it is missing.
pub fn binary() -> PathBuf {
    let path = match std::env::var_os("PODWRIGHT_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/podwright"),
    };
    assert!(
        path.is_file(),
        "the podwright binary is missing: {} does not exist.\n\
         Build it with `cargo build --release -p podwright` (scripts/test does this), \
         or point PODWRIGHT_BIN at a build.",
        path.display()
    );
    path
}

/// podwright's root directory for the tests (`PODWRIGHT_TEST_ROOT`, default
/// `/var/lib/podwright-test`).
pub fn test_root() -> PathBuf {
    std::env::var_os("PODWRIGHT_TEST_ROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/podwright-test"))
}

/// Where `scripts/setup` unpacks Debian's containerd 2, for the features containerd 1.6 lacks.
pub const CONTAINERD_2_BIN: &str = "/opt/containerd-2/usr/bin";

/// The root directory of an embedded containerd 2 (`<test root>-containerd2`), started once per
/// test process: `podwright run --root-dir` it to run a pod there (podwright reuses a running
/// embedded containerd whatever its version). `scripts/test` stops it with the others.
/// Panics when `scripts/setup` has not unpacked containerd 2: a test never skips.
pub fn containerd_2_root() -> &'static str {
    static ROOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let bin = Path::new(CONTAINERD_2_BIN);
        assert!(bin.join("containerd").is_file(), "{} is missing: run scripts/setup", bin.display());
        let root = format!("{}-containerd2", test_root().display());
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new(binary())
            .args(["runtime", "start", "--root-dir", &root])
            .env("PATH", path)
            .output()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary().display()));
        assert!(out.status.success(), "podwright runtime start: {}", String::from_utf8_lossy(&out.stderr));
        root
    })
}

/// The repository's top directory.
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A pod name unique to this test process: `<base>-<pid>`, so concurrent runs of the suite
/// against the same containerd never share a name.
pub fn pod_name(base: &str) -> String {
    format!("{base}-{}", std::process::id())
}

/// A manifest in a temporary file, removed on drop.
pub struct Manifest {
    pub path: PathBuf,
}

impl Manifest {
    pub fn new(text: &str) -> Manifest {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("podwright-e2e-{}-{n}.yaml", std::process::id()));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        Manifest { path }
    }

    pub fn path_str(&self) -> &str {
        self.path.to_str().expect("temporary path is UTF-8")
    }
}

impl Drop for Manifest {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A static-pod manifest directory of a test's own under the test root
/// (`<root>-<tag>-<pid>-<n>`), removed on drop.
pub struct ManifestDir(pub PathBuf);

impl ManifestDir {
    pub fn new(tag: &str) -> ManifestDir {
        static DIRS: AtomicUsize = AtomicUsize::new(0);
        let n = DIRS.fetch_add(1, Ordering::SeqCst);
        let dir = PathBuf::from(format!("{}-{tag}-{}-{n}", test_root().display(), std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("manifest dir");
        ManifestDir(dir)
    }

    /// The path, as a flag's value.
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }

    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text).unwrap_or_else(|e| panic!("writing {file}: {e}"));
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.0.join(file)).unwrap_or_else(|e| panic!("removing {file}: {e}"));
    }

    /// Removes every file in it.
    pub fn empty(&self) {
        for entry in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Drop for ManifestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `--config` of a podwright that collects no images (`imageGCHighThresholdPercent: 100`;
/// a test's own config must say so too): the suite's containerd holds the local images every
/// test needs, which no registry gives back, and a nearly full disk must not let one test's
/// podwright remove them while another's pod is about to use them.
pub const KEEP_IMAGES: &str = "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\n";

/// A file holding [`KEEP_IMAGES`], written once per test process.
pub fn keep_images_config() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("podwright-e2e-keep-images-{}.yaml", std::process::id()));
        std::fs::write(&path, KEEP_IMAGES).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path.to_str().expect("temporary path is UTF-8").to_string()
    })
}

/// Arguments for `podwright run -f FILE --root-dir <test root> --timeout T -o json
/// --config <keep images>`, plus `extra`. A `--timeout` or `--config` in `extra` replaces the
/// default one.
pub fn run_args(file: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["run".into(), "-f".into(), file.into()];
    if !extra.contains(&"--config") {
        args.push("--config".into());
        args.push(keep_images_config().into());
    }
    if !extra.contains(&"--root-dir") && !extra.contains(&"--runtime-endpoint") {
        args.push("--root-dir".into());
        args.push(test_root().to_string_lossy().into_owned());
    }
    if !extra.contains(&"--timeout") {
        args.push("--timeout".into());
        args.push(DEFAULT_TIMEOUT_SECS.to_string());
    }
    if !extra.contains(&"-o") {
        args.push("-o".into());
        args.push("json".into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs `podwright run` on a manifest text (written to a temporary file) and waits for it.
pub fn run_manifest(manifest: &str, extra: &[&str]) -> Outcome {
    let m = Manifest::new(manifest);
    run_file(m.path_str(), extra)
}

/// Runs `podwright run` on a file and waits for it.
pub fn run_file(file: &str, extra: &[&str]) -> Outcome {
    Running::spawn(&run_args(file, extra), None).wait()
}

/// Runs `podwright run` on a manifest text, waits until stderr shows `needle`, then interrupts
/// it (Ctrl-C: the pods are deleted gracefully) and waits up to `limit` for it to end.
pub fn interrupt_when(manifest: &str, extra: &[&str], needle: &str, limit: Duration) -> Outcome {
    let m = Manifest::new(manifest);
    let mut r = Running::spawn(&run_args(m.path_str(), extra), None);
    assert!(r.wait_for_stderr(needle, Duration::from_secs(60)), "never saw {needle:?}:\n{}", r.stderr_so_far());
    r.signal(libc::SIGINT);
    r.wait_within(limit)
}

/// Runs podwright with exactly these arguments and waits for it.
pub fn podwright(args: &[&str]) -> Outcome {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    Running::spawn(&args, None).wait()
}

/// A captured output stream, filled by a reader thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn reader(mut from: impl Read + Send + 'static, into: Captured, done: mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => into.0.lock().unwrap().extend_from_slice(&buf[..n]),
            }
        }
        let _ = done.send(());
    });
}

/// A podwright process that is still running; its output is captured as it comes.
pub struct Running {
    child: Child,
    args: Vec<String>,
    stdout: Captured,
    stderr: Captured,
    readers_done: mpsc::Receiver<()>,
    started: Instant,
    /// When the harness gives up and kills podwright.
    kill_after: Duration,
}

impl Running {
    /// Starts podwright with these arguments; `stdin` (if any) is written and closed.
    pub fn spawn(args: &[String], stdin: Option<&str>) -> Running {
        let bin = binary();
        let timeout = args
            .iter()
            .position(|a| a == "--timeout")
            .and_then(|i| args.get(i + 1))
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(DEFAULT_TIMEOUT_SECS as f64);
        let mut child = Command::new(&bin)
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            pipe.write_all(text.as_bytes()).expect("writing podwright's stdin");
            // Dropping the pipe closes it: podwright sees the end of the manifest.
        }
        let (done_tx, readers_done) = mpsc::channel();
        let stdout = Captured::default();
        let stderr = Captured::default();
        reader(child.stdout.take().expect("stdout pipe"), stdout.clone(), done_tx.clone());
        reader(child.stderr.take().expect("stderr pipe"), stderr.clone(), done_tx);
        Running {
            child,
            args: args.to_vec(),
            stdout,
            stderr,
            readers_done,
            started: Instant::now(),
            kill_after: Duration::from_secs_f64(timeout) + HARNESS_GRACE,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What podwright wrote to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.text()
    }

    /// Waits until stderr contains `needle`; false if podwright exited first or `timeout` passed.
    pub fn wait_for_stderr(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stderr.text().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline || matches!(self.child.try_wait(), Ok(Some(_))) {
                return self.stderr.text().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a signal to podwright.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; the child is not reaped before `wait`.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed: {}", self.child.id(), std::io::Error::last_os_error());
    }

    /// Like [`Running::wait`], but kills podwright (and fails) if it has not exited within
    /// `limit` from now.
    pub fn wait_within(mut self, limit: Duration) -> Outcome {
        self.kill_after = self.started.elapsed() + limit;
        self.wait()
    }

    /// Waits for podwright to exit (killing it when it overstays its `--timeout` by a minute),
    /// then for its output pipes to close.
    pub fn wait(mut self) -> Outcome {
        let status: ExitStatus = loop {
            if let Some(s) = self.child.try_wait().expect("waiting for podwright") {
                break s;
            }
            if self.started.elapsed() > self.kill_after {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "podwright {:?} still ran {:?} after start, longer than it should have; killed it.\nstderr:\n{}",
                    self.args,
                    self.started.elapsed(),
                    self.stderr.text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        // Both pipes must reach end-of-file soon after podwright exits. If one does not, a
        // process podwright started (the embedded containerd, a log follower) inherited it.
        for _ in 0..2 {
            if self.readers_done.recv_timeout(Duration::from_secs(10)).is_err() {
                panic!(
                    "podwright {:?} exited ({status}) but its stdout/stderr stayed open for 10 s: \
                     a process it started inherited the pipe.\nstderr:\n{}",
                    self.args,
                    self.stderr.text()
                );
            }
        }
        let code = status.code().unwrap_or_else(|| {
            panic!("podwright {:?} was killed by a signal ({status}).\nstderr:\n{}", self.args, self.stderr.text())
        });
        Outcome {
            args: std::mem::take(&mut self.args),
            code,
            stdout: self.stdout.text(),
            stderr: self.stderr.text(),
            elapsed,
        }
    }
}

impl Drop for Running {
    /// A podwright not waited for (a test failed first) must not outlive the test: ask it to
    /// stop the way Ctrl-C does, so it removes its pods, and kill it if it does not within 15 s.
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        // SAFETY: kill(2) on our own child, which has not been reaped (try_wait said running).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A finished podwright run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

/// One progress line: `  1.98s  myapp-pod   Init:1/2   0/1   0`.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub elapsed: f64,
    pub pod: String,
    /// kubectl's STATUS column; empty before the pod has a phase.
    pub status: String,
    pub ready: String,
    pub restarts: String,
}

impl Progress {
    fn parse(line: &str) -> Option<Progress> {
        let mut tokens = line.split_whitespace();
        let elapsed: f64 = tokens.next()?.strip_suffix('s')?.parse().ok()?;
        if !line.starts_with(' ') && !line.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let rest: Vec<&str> = tokens.collect();
        if rest.len() < 3 {
            return None;
        }
        let ready_at = rest.iter().rposition(|t| is_ready_column(t))?;
        if ready_at == 0 {
            return None;
        }
        Some(Progress {
            elapsed,
            pod: rest[0].to_string(),
            status: rest[1..ready_at].join(" "),
            ready: rest[ready_at].to_string(),
            restarts: rest[ready_at + 1..].join(" "),
        })
    }
}

fn is_ready_column(t: &str) -> bool {
    match t.split_once('/') {
        Some((a, b)) => !a.is_empty() && !b.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit()),
        None => false,
    }
}

impl Outcome {
    /// stdout and stderr, for assertion messages.
    pub fn context(&self) -> String {
        let stdout = if self.stdout.len() > 6000 {
            format!("{}… ({} bytes)", &self.stdout[..self.stdout.floor_char_boundary(6000)], self.stdout.len())
        } else {
            self.stdout.clone()
        };
        format!(
            "podwright {:?} exited {} after {:.1?}\n--- stderr ---\n{}\n--- stdout ---\n{}",
            self.args, self.code, self.elapsed, self.stderr, stdout
        )
    }

    /// Panics (with the output) unless the exit code is `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code\n{}", self.context());
        self
    }

    /// The `-o json` `List`.
    pub fn list(&self) -> Value {
        let v: Value = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e})\n{}", self.context()));
        assert_eq!(v["apiVersion"], "v1", "List apiVersion\n{}", self.context());
        assert_eq!(v["kind"], "List", "List kind\n{}", self.context());
        assert!(v["items"].is_array(), "List has no items array\n{}", self.context());
        v
    }

    fn items_of_kind(&self, kind: &str) -> Vec<Value> {
        self.list()["items"].as_array().unwrap().iter().filter(|i| i["kind"] == kind).cloned().collect()
    }

    /// The final pods, in the List's order.
    pub fn pods(&self) -> Vec<Value> {
        self.items_of_kind("Pod")
    }

    /// The final pod named `name`.
    pub fn pod(&self, name: &str) -> Value {
        self.pods()
            .into_iter()
            .find(|p| p["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no pod {name:?} in the List\n{}", self.context()))
    }

    /// The only pod of the List.
    pub fn single_pod(&self) -> Value {
        let pods = self.pods();
        assert_eq!(pods.len(), 1, "expected one pod in the List\n{}", self.context());
        pods.into_iter().next().unwrap()
    }

    /// All events.
    pub fn events(&self) -> Vec<Value> {
        self.items_of_kind("Event")
    }

    /// The Warning events but `FailedKillPod`: a runtime failing for a moment to stop a
    /// sandbox, which podwright retries as the kubelet does (containerd 1.6's shim can answer
    /// "ttrpc: closed" to a kill as the container exits); no pod asks for it.
    pub fn warnings(&self) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["type"] == "Warning" && e["reason"] != "FailedKillPod").collect()
    }

    /// Events about pod `pod` (name) whose `involvedObject.fieldPath` is `field_path`.
    pub fn events_for(&self, pod: &str, field_path: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["involvedObject"]["name"] == pod && e["involvedObject"]["fieldPath"] == field_path)
            .collect()
    }

    /// Events about pod `pod`, field path `field_path`, with this reason.
    pub fn events_with_reason(&self, pod: &str, field_path: &str, reason: &str) -> Vec<Value> {
        self.events_for(pod, field_path).into_iter().filter(|e| e["reason"] == reason).collect()
    }

    /// The lines of stderr.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// Progress lines for pod `pod`, in order.
    pub fn progress(&self, pod: &str) -> Vec<Progress> {
        self.stderr.lines().filter_map(Progress::parse).filter(|p| p.pod == pod).collect()
    }

    /// Progress lines for any pod.
    pub fn all_progress(&self) -> Vec<Progress> {
        self.stderr.lines().filter_map(Progress::parse).collect()
    }

    /// The STATUS column of pod `pod`'s progress lines, in order.
    pub fn statuses(&self, pod: &str) -> Vec<String> {
        self.progress(pod).into_iter().map(|p| p.status).collect()
    }

    /// The lines container `container` printed (stderr lines `[container] …`, prefix removed).
    pub fn output_of(&self, container: &str) -> Vec<String> {
        let prefix = format!("[{container}] ");
        let bare = format!("[{container}]");
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix).or_else(|| (l == bare).then_some("")))
            .map(str::to_string)
            .collect()
    }

    /// Index of the first stderr line containing `needle`.
    pub fn stderr_line_index(&self, needle: &str) -> Option<usize> {
        self.stderr.lines().position(|l| l.contains(needle))
    }
}

/// `items` appear in `seq` in this order (not necessarily adjacent).
pub fn is_subsequence(seq: &[String], items: &[&str]) -> bool {
    let mut it = seq.iter();
    items.iter().all(|want| it.any(|s| s == want))
}

// ---- pods -----------------------------------------------------------------------------------

pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

pub fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().expect("pod has a uid").to_string()
}

pub fn name(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().expect("pod has a name").to_string()
}

/// The status of container `name`, looked up among init then regular container statuses.
pub fn container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| pod["status"][*k].as_array())
        .flatten()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| {
            panic!(
                "pod has no status for container {name:?}: {}",
                serde_json::to_string_pretty(&pod["status"]).unwrap()
            )
        })
}

/// A container status's newest termination: its state if terminated, else its last state (a
/// container waiting to restart).
pub fn last_termination(status: &Value) -> &Value {
    if status["state"]["terminated"].is_object() {
        &status["state"]["terminated"]
    } else {
        &status["lastState"]["terminated"]
    }
}

/// Names in `status.initContainerStatuses`, in order.
pub fn init_status_names(pod: &Value) -> Vec<String> {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The pod condition of this type.
pub fn condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
    pod["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == type_)).unwrap_or_else(|| {
        panic!("pod has no {type_} condition: {}", serde_json::to_string_pretty(&pod["status"]["conditions"]).unwrap())
    })
}

/// `state.terminated.<field>` of a container status as RFC 3339 seconds since the epoch.
pub fn terminated_time(status: &Value, field: &str) -> i64 {
    let t = &status["state"]["terminated"][field];
    rfc3339(t.as_str().unwrap_or_else(|| panic!("no state.terminated.{field} in {status}")))
}

/// Parses an RFC 3339 timestamp (`2026-11-22T03:50:37Z`, fractions and offsets allowed) into
/// whole seconds since the Unix epoch.
pub fn rfc3339(s: &str) -> i64 {
    let bad = || -> ! { panic!("not an RFC 3339 timestamp: {s:?}") };
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        bad();
    }
    let num = |r: std::ops::Range<usize>| -> i64 { s.get(r).and_then(|x| x.parse().ok()).unwrap_or_else(|| bad()) };
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let (hour, min, sec) = (num(11..13), num(14..16), num(17..19));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        bad();
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            bad();
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) && &rest[3..4] == ":" => {
            let h: i64 = rest[1..3].parse().unwrap_or_else(|_| bad());
            let m: i64 = rest[4..6].parse().unwrap_or_else(|_| bad());
            let o = h * 3600 + m * 60;
            if rest.starts_with('-') { -o } else { o }
        }
        _ => bad(),
    };
    days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec - offset
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

// ---- the runtime ----------------------------------------------------------------------------

/// The embedded containerd's socket under the test root.
pub fn containerd_socket() -> PathBuf {
    test_root().join("containerd/containerd.sock")
}

/// IDs of the containerd containers (CRI containers and sandboxes alike: a sandbox is a
/// containerd container too) in namespace `k8s.io` that carry label `key` = `value`.
pub fn containers_with_label(key: &str, value: &str) -> Vec<String> {
    containers_with_label_at(&containerd_socket(), key, value)
}

/// Runs `cmd` in the running container `name` of pod `uid` (through containerd, not the
/// node) and gives its trimmed output; panics unless it succeeds.
pub fn exec_in_container(uid: &str, name: &str, cmd: &[&str]) -> String {
    let sock = containerd_socket();
    let filter = format!("labels.\"io.kubernetes.pod.uid\"=={uid},labels.\"io.kubernetes.container.name\"=={name}");
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&sock)
        .args(["-n", "k8s.io", "containers", "ls", "-q", &filter])
        .output()
        .expect("ctr runs");
    let ids = String::from_utf8_lossy(&out.stdout).to_string();
    let id = ids.lines().next().unwrap_or_else(|| panic!("no container {name} of pod {uid}"));
    static EXECS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let exec_id = format!("e2e-{}-{}", std::process::id(), EXECS.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&sock)
        .args(["-n", "k8s.io", "tasks", "exec", "--exec-id", &exec_id, id])
        .args(cmd)
        .output()
        .expect("ctr runs");
    assert!(out.status.success(), "{cmd:?} in {name} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// [`containers_with_label`] in the containerd listening on `sock`.
pub fn containers_with_label_at(sock: &Path, key: &str, value: &str) -> Vec<String> {
    let filter = format!("labels.\"{key}\"=={value}");
    let out = Command::new("ctr")
        .arg("-a")
        .arg(sock)
        .args(["-n", "k8s.io", "containers", "ls", "-q", &filter])
        .output()
        .unwrap_or_else(|e| panic!("cannot run ctr (package containerd): {e}"));
    assert!(
        out.status.success(),
        "ctr -a {} containers ls {filter} failed: {}",
        sock.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// The CRI runtime handler of each sandbox of pod `pod` (by name) in the embedded containerd, as
/// its CRI plugin recorded it in the sandbox's metadata.
pub fn sandbox_runtime_handlers(pod: &str) -> Vec<String> {
    let sock = containerd_socket();
    let ctr = |args: &[&str]| {
        let out = Command::new("ctr").arg("-a").arg(&sock).args(["-n", "k8s.io"]).args(args).output();
        let out = out.unwrap_or_else(|e| panic!("cannot run ctr (package containerd): {e}"));
        assert!(out.status.success(), "ctr {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A comma joins the conditions of one filter (several filters would be alternatives).
    let filter = format!("labels.\"io.kubernetes.pod.name\"=={pod},labels.\"io.cri-containerd.kind\"==sandbox");
    let ids = ctr(&["containers", "ls", "-q", &filter]);
    ids.split_whitespace()
        .map(|id| {
            let info: Value = serde_json::from_str(&ctr(&["containers", "info", id])).expect("ctr's container info");
            let encoded =
                info["Extensions"]["io.cri-containerd.sandbox.metadata"]["value"].as_str().unwrap_or_default();
            let mut decode = Command::new("base64")
                .arg("-d")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("cannot run base64");
            decode.stdin.take().expect("stdin pipe").write_all(encoded.as_bytes()).expect("writing to base64");
            let decoded = decode.wait_with_output().expect("base64's output");
            let metadata: Value = serde_json::from_slice(&decoded.stdout).expect("the sandbox's CRI metadata");
            metadata["Metadata"]["RuntimeHandler"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// Panics unless containerd holds no container or sandbox of this pod (by uid and by name)
/// and its directory under the root is gone.
/// The cgroup directories of pod `uid` under every cgroup hierarchy of the host
/// (`<hierarchy>/podwright<root>/kubepods[/<qos>]/pod<uid>`, from any podwright).
pub fn pod_cgroup_dirs(uid: &str) -> Vec<PathBuf> {
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default()
    };
    let mut found = Vec::new();
    for hierarchy in entries(Path::new("/sys/fs/cgroup")) {
        let podwrights = entries(&hierarchy)
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("podwright")));
        for kubepods in podwrights.map(|p| p.join("kubepods")) {
            for level in [kubepods.clone(), kubepods.join("burstable"), kubepods.join("besteffort")] {
                let dir = level.join(format!("pod{uid}"));
                if dir.is_dir() {
                    found.push(dir);
                }
            }
        }
    }
    found
}

pub fn assert_nothing_left(pod: &Value) {
    let uid = uid(pod);
    let name = name(pod);
    let by_uid = containers_with_label("io.kubernetes.pod.uid", &uid);
    assert!(by_uid.is_empty(), "containers/sandboxes of pod {name} (uid {uid}) are left in containerd: {by_uid:?}");
    let by_name = containers_with_label("io.kubernetes.pod.name", &name);
    assert!(by_name.is_empty(), "containers/sandboxes of pod {name} are left in containerd: {by_name:?}");
    // The pod's directory (volumes, logs, checkpoint) goes too, as the kubelet removes it.
    let dir = test_root().join("pods").join(&uid);
    assert!(!dir.exists(), "pod {name}'s directory {} is left behind", dir.display());
    let cgroups = pod_cgroup_dirs(&uid);
    assert!(cgroups.is_empty(), "pod {name}'s cgroups are left behind: {cgroups:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_timestamps() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), 0);
        assert_eq!(rfc3339("2026-11-22T03:50:37Z"), 1_795_319_437);
        assert_eq!(rfc3339("2026-11-22T03:50:37.999Z"), 1_795_319_437);
        assert_eq!(rfc3339("2026-11-22T05:50:37+02:00"), 1_795_319_437);
        assert_eq!(rfc3339("2000-03-01T00:00:00Z") - rfc3339("2000-02-28T00:00:00Z"), 2 * 86400);
    }

    #[test]
    #[should_panic(expected = "not an RFC 3339 timestamp")]
    fn rejects_garbage_timestamps() {
        rfc3339("yesterday");
    }

    #[test]
    fn parses_progress_lines() {
        let p = Progress::parse("   1.98s  myapp-pod                Init:1/2                 0/1    0").unwrap();
        assert_eq!(
            p,
            Progress {
                elapsed: 1.98,
                pod: "myapp-pod".into(),
                status: "Init:1/2".into(),
                ready: "0/1".into(),
                restarts: "0".into()
            }
        );
        let p = Progress::parse("   0.00s  myapp-pod                                         0/1    0").unwrap();
        assert_eq!(p.status, "");
        let p = Progress::parse("  12.00s  p   Init:CrashLoopBackOff   0/1   2 (3s ago)").unwrap();
        assert_eq!((p.status.as_str(), p.restarts.as_str()), ("Init:CrashLoopBackOff", "2 (3s ago)"));
        assert_eq!(Progress::parse("[init-mydb] waiting for mydb"), None);
        assert_eq!(Progress::parse("Warning: something 1/2 3"), None);
    }

    #[test]
    fn subsequences() {
        let s: Vec<String> = ["", "Init:0/2", "Init:1/2", "Running", "Completed"].map(String::from).to_vec();
        assert!(is_subsequence(&s, &["Init:0/2", "Init:1/2", "Completed"]));
        assert!(!is_subsequence(&s, &["Init:1/2", "Init:0/2"]));
    }
}
