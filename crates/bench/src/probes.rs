//! `probes`: many long-running pods, each with an exec readiness probe (every 5 s) and an httpGet
//! liveness probe (every 1 s), run by the real `podwright run` on containerd. Measured over a
//! window of steady running that opens once every pod is ready: podwright's CPU and RSS, and how
//! late each probe ran against its schedule (`late_us` of the prober's `podwright::probe` trace).
//! The start-up ramp and the teardown are reported apart, so they do not blur the steady figures.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::measure::{self, ProcCpu, proc_cpu};
use crate::real::DEFAULT_ROOT;
use podwright_containerd::EmbeddedRuntime;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

const READINESS_PERIOD_S: u64 = 5;
const LIVENESS_PERIOD_S: u64 = 1;
/// How long podwright may take to tear the pods down before it is killed.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(120);
const RSS_SAMPLE: Duration = Duration::from_secs(1);

#[derive(clap::Args)]
pub struct ProbesArgs {
    /// Pods to run at once.
    #[arg(long, default_value_t = 50)]
    pub pods: usize,
    /// Seconds of steady running to measure, from the moment every pod is ready.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Give up when the pods are not all ready this many seconds after podwright started.
    #[arg(long, default_value_t = 120)]
    pub ramp_limit: u64,
    /// podwright's root: pod directories, and the embedded containerd (started or reused).
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root_dir: PathBuf,
    /// The podwright binary; by default the one next to this benchmark's.
    #[arg(long)]
    pub podwright: Option<PathBuf>,
}

/// What podwright did between two moments.
#[derive(Default)]
struct Phase {
    wall: Duration,
    cpu: Duration,
    /// How late each probe attempt started, in ms.
    late_ms: Vec<f64>,
}

pub struct ProbesReport {
    pods: usize,
    ramp: Phase,
    window: Phase,
    teardown: Phase,
    /// VmRSS sampled every second through the window.
    rss_kib: Vec<u64>,
    /// The whole run's peak: VmHWM at the end of the window, or the child's rusage if higher.
    rss_peak_kib: u64,
    /// containerd and its shims over the window, with the children they reaped (runc, probes).
    runtime_cpu: Duration,
    /// Container restarts seen by the end of the window (liveness kills would show here).
    restarts: u32,
    exit: String,
}

pub async fn run(args: &ProbesArgs) -> Result<ProbesReport, String> {
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    // Started here rather than by podwright, so that its start is not in podwright's figures.
    let embedded = EmbeddedRuntime::new(&args.root_dir);
    let containerd = embedded.ensure_running().await.map_err(|e| {
        format!(
            "could not start the embedded containerd under {}: {e}\nRun scripts/setup first.",
            args.root_dir.display()
        )
    })?;
    let manifest = std::env::temp_dir().join(format!("podwright-bench-probes-{}.yaml", std::process::id()));
    std::fs::write(&manifest, manifest_text(args.pods))
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    let watched = Watched {
        pods: args.pods,
        window: Duration::from_secs(args.seconds),
        ramp_limit: Duration::from_secs(args.ramp_limit),
        containerd: containerd.pid,
        socket: embedded.socket.to_string_lossy().into_owned(),
    };
    let command = podwright_command(&podwright, &manifest, args);
    let result = tokio::task::spawn_blocking(move || watched.run(command))
        .await
        .map_err(|e| format!("the measuring thread panicked: {e}"))
        .and_then(|r| r);
    let _ = std::fs::remove_file(&manifest);
    result
}

fn manifest_text(pods: usize) -> String {
    (0..pods)
        .map(|i| {
            format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: probe-{i:02}, namespace: default}}
spec:
  restartPolicy: Always
  # httpd as PID 1 ignores SIGTERM: keep the teardown short.
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: {image}
    command: [sh, -c, "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    readinessProbe: {{exec: {{command: ["true"]}}, periodSeconds: {READINESS_PERIOD_S}}}
    livenessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: {LIVENESS_PERIOD_S}}}
"#,
                image = crate::pod::IMAGE
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

fn podwright_command(podwright: &Path, manifest: &Path, args: &ProbesArgs) -> Command {
    let mut cmd = Command::new(podwright);
    // The window is ended by SIGTERM (the same teardown as a timeout); the timeout is only a
    // backstop in case this process dies first.
    let backstop = args.ramp_limit + args.seconds + TEARDOWN_LIMIT.as_secs();
    cmd.arg("run")
        .arg("-f")
        .arg(manifest)
        .arg("--root-dir")
        .arg(&args.root_dir)
        .args(["--timeout", &backstop.to_string(), "--quiet"])
        .env("PODWRIGHT_LOG", "warn,podwright::probe=trace")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

struct Watched {
    pods: usize,
    window: Duration,
    ramp_limit: Duration,
    containerd: u32,
    socket: String,
}

/// Where the run is; probe lines are counted in the phase they arrive in.
enum Stage {
    Ramp,
    /// Since `start`, when every pod was ready, with the CPU counters then.
    Window {
        start: Instant,
        cpu: ProcCpu,
        runtime: Duration,
        next_sample: Instant,
    },
    /// Since `start`, when podwright was asked to stop.
    Teardown {
        start: Instant,
        killed: bool,
    },
}

impl Watched {
    /// Runs podwright, following its stderr line by line, and stops it at the end of the window
    /// (or when something goes wrong), always waiting for it to tear the pods down.
    fn run(self, mut command: Command) -> Result<ProbesReport, String> {
        let program = command.get_program().to_string_lossy().into_owned();
        let t0 = Instant::now();
        let mut child = command.spawn().map_err(|e| format!("cannot run {program}: {e}"))?;
        let pid = child.id();
        let stderr = child.stderr.take().ok_or("podwright's stderr is not piped")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut buf = vec![];
            while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
                let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                if tx.send((Instant::now(), line)).is_err() {
                    return;
                }
                buf.clear();
            }
        });

        let mut report = ProbesReport {
            pods: self.pods,
            ramp: Phase::default(),
            window: Phase::default(),
            teardown: Phase::default(),
            rss_kib: vec![],
            rss_peak_kib: 0,
            runtime_cpu: Duration::ZERO,
            restarts: 0,
            exit: String::new(),
        };
        // Each pod's latest progress line: ready, and restarts.
        let mut pods: BTreeMap<String, (bool, u32)> = BTreeMap::new();
        let mut stage = Stage::Ramp;
        let mut failure = None;
        let mut window_end_cpu = ProcCpu::default();
        loop {
            let deadline = match &stage {
                Stage::Ramp => t0 + self.ramp_limit,
                Stage::Window { start, next_sample, .. } => (*next_sample).min(*start + self.window),
                Stage::Teardown { start, .. } => *start + TEARDOWN_LIMIT,
            };
            let line = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => Some(l),
                Err(RecvTimeoutError::Timeout) => None,
                // podwright closed its stderr: it is exiting.
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if let Some((at, line)) = line {
                if let Some(late_us) = late_us(&line) {
                    let phase = match &stage {
                        Stage::Ramp => &mut report.ramp,
                        Stage::Window { start, .. } if at < *start + self.window => &mut report.window,
                        Stage::Window { .. } | Stage::Teardown { .. } => &mut report.teardown,
                    };
                    phase.late_ms.push(late_us as f64 / 1e3);
                } else if let Some((name, ready, restarts)) = progress(&line) {
                    pods.insert(name.to_string(), (ready, restarts));
                } else {
                    eprintln!("{line}");
                }
            }
            let now = Instant::now();
            match &mut stage {
                Stage::Ramp if pods.len() == self.pods && pods.values().all(|(ready, _)| *ready) => {
                    report.ramp.wall = now - t0;
                    match (proc_cpu(pid), self.runtime_cpu()) {
                        (Ok(cpu), Ok(runtime)) => {
                            report.ramp.cpu = cpu.own;
                            stage = Stage::Window { start: now, cpu, runtime, next_sample: now };
                        }
                        (Err(e), _) | (_, Err(e)) => {
                            failure = Some(e);
                            stage = stop(pid);
                        }
                    }
                }
                Stage::Ramp if now >= t0 + self.ramp_limit => {
                    let ready = pods.values().filter(|(ready, _)| *ready).count();
                    failure = Some(format!(
                        "only {ready} of {} pods were ready {:?} after the start",
                        self.pods, self.ramp_limit
                    ));
                    stage = stop(pid);
                }
                Stage::Window { start, cpu, runtime, next_sample } => {
                    if now >= *next_sample {
                        match measure::status_kib(&pid.to_string(), "VmRSS") {
                            Ok(kib) => report.rss_kib.push(kib),
                            Err(e) => failure = Some(e),
                        }
                        *next_sample += RSS_SAMPLE;
                    }
                    if now >= *start + self.window {
                        match (proc_cpu(pid), self.runtime_cpu()) {
                            (Ok(end), Ok(runtime_end)) => {
                                report.window.wall = now - *start;
                                report.window.cpu = end.own.saturating_sub(cpu.own);
                                report.runtime_cpu = runtime_end.saturating_sub(*runtime);
                                window_end_cpu = end;
                            }
                            (Err(e), _) | (_, Err(e)) => failure = Some(e),
                        }
                        match measure::status_kib(&pid.to_string(), "VmHWM") {
                            Ok(kib) => report.rss_peak_kib = kib,
                            Err(e) => failure = Some(e),
                        }
                        report.restarts = pods.values().map(|(_, r)| r).sum();
                    }
                    if failure.is_some() || now >= *start + self.window {
                        stage = stop(pid);
                    }
                }
                Stage::Teardown { start, killed } if !*killed && now >= *start + TEARDOWN_LIMIT => {
                    failure = Some(format!("podwright did not exit within {TEARDOWN_LIMIT:?} of SIGTERM; killed"));
                    // SAFETY: kill has no memory effects; pid is our unreaped child.
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                    *killed = true;
                }
                Stage::Ramp | Stage::Teardown { .. } => {}
            }
        }

        let (status, usage) = reap(pid)?;
        // Dropping `child` neither waits nor kills; it was reaped above.
        drop(child);
        let ended = Instant::now();
        report.exit = status;
        // The kernel updates the high-water mark lazily, so the rusage alone can miss the peak.
        report.rss_peak_kib = report.rss_peak_kib.max(usage.maxrss_kib);
        match stage {
            Stage::Teardown { start, .. } => {
                report.teardown.wall = ended - start;
                report.teardown.cpu = usage.cpu.saturating_sub(window_end_cpu.own + window_end_cpu.reaped);
            }
            Stage::Ramp | Stage::Window { .. } => {
                failure.get_or_insert_with(|| format!("podwright exited early ({})", report.exit));
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// containerd and the shims it started, each with the children it reaped.
    fn runtime_cpu(&self) -> Result<Duration, String> {
        let total = |c: ProcCpu| c.own + c.reaped;
        let mut sum = total(proc_cpu(self.containerd)?);
        let procs = std::fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
        for pid in procs.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
            let cmdline = String::from_utf8_lossy(&cmdline);
            // A shim names its containerd's socket; other podwright roots run their own shims.
            if cmdline.contains("containerd-shim") && cmdline.contains(self.socket.as_str()) {
                // A shim may be gone by now.
                sum += proc_cpu(pid).map_or(Duration::ZERO, total);
            }
        }
        Ok(sum)
    }
}

/// Asks podwright to stop its pods, as at a timeout.
fn stop(pid: u32) -> Stage {
    // SAFETY: kill has no memory effects; pid is our unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    Stage::Teardown { start: Instant::now(), killed: false }
}

struct Usage {
    cpu: Duration,
    maxrss_kib: u64,
}

/// Waits for the child, with its whole-life CPU time and peak RSS.
fn reap(pid: u32) -> Result<(String, Usage), String> {
    // SAFETY: wait4 fills the zeroed status and rusage we pass; pid is our own child.
    let (status, usage) = unsafe {
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::wait4(pid as i32, &mut status, 0, &mut usage) != pid as i32 {
            return Err(format!("cannot wait for podwright (pid {pid}): {}", std::io::Error::last_os_error()));
        }
        (status, usage)
    };
    let exit = if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else {
        format!("killed by signal {}", libc::WTERMSIG(status))
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Ok((exit, Usage { cpu: tv(usage.ru_utime) + tv(usage.ru_stime), maxrss_kib: usage.ru_maxrss as u64 }))
}

/// `late_us` of a `podwright::probe` trace line.
fn late_us(line: &str) -> Option<i64> {
    if !line.contains("podwright::probe") {
        return None;
    }
    let value = line.split_once("late_us=")?.1;
    let end = value.find(|c: char| c != '-' && !c.is_ascii_digit()).unwrap_or(value.len());
    value[..end].parse().ok()
}

/// A progress line of one of our pods (`  12.34s  probe-07  Running  1/1  0`): its name, whether
/// it is ready, and its restarts.
fn progress(line: &str) -> Option<(&str, bool, u32)> {
    let mut words = line.split_whitespace();
    words.next()?.strip_suffix('s')?.parse::<f64>().ok()?;
    let name = words.next().filter(|n| n.starts_with("probe-"))?;
    let _status = words.next()?;
    let (ready, total) = words.next()?.split_once('/')?;
    let restarts = words.next()?.parse().ok()?;
    Some((name, ready == total && ready != "0", restarts))
}

impl ProbesReport {
    /// Probe attempts the schedule asks for over the window.
    fn expected(&self) -> f64 {
        let secs = self.window.wall.as_secs_f64();
        self.pods as f64 * (secs / LIVENESS_PERIOD_S as f64 + secs / READINESS_PERIOD_S as f64)
    }

    pub fn print(&self) {
        let pct = |p: &Phase, q: f64| measure::percentile(&p.late_ms, q).unwrap_or(f64::NAN);
        let show = |v: f64| if v.is_nan() { "-".to_string() } else { format!("{v:.2}") };
        let rss: Vec<f64> = self.rss_kib.iter().map(|&k| k as f64).collect();
        let rss_median = measure::median(&rss);
        let rss_max = self.rss_kib.iter().copied().max().unwrap_or(0);
        let cpu_s = self.window.cpu.as_secs_f64();
        let cpu_pct = 100.0 * cpu_s / self.window.wall.as_secs_f64();
        println!(
            "probes: {} pods (exec readiness every {READINESS_PERIOD_S} s, httpGet liveness every {LIVENESS_PERIOD_S} s) \
             run by `podwright run` on the embedded containerd; SIGTERM after the window: {}",
            self.pods, self.exit
        );
        println!(
            "  {:<28} {:>8} {:>8} {:>6} {:>7} {:>9} {:>9} {:>9}",
            "phase", "wall (s)", "CPU (s)", "CPU %", "probes", "late p50", "late p99", "late max"
        );
        for (name, p) in [
            ("start -> every pod ready", &self.ramp),
            ("steady window", &self.window),
            ("SIGTERM -> exit (teardown)", &self.teardown),
        ] {
            let (wall, cpu) = (p.wall.as_secs_f64(), p.cpu.as_secs_f64());
            println!(
                "  {name:<28} {wall:>8.2} {cpu:>8.2} {:>6.1} {:>7} {:>9} {:>9} {:>9}",
                100.0 * cpu / wall,
                p.late_ms.len(),
                show(pct(p, 50.0)),
                show(pct(p, 99.0)),
                show(pct(p, 100.0))
            );
        }
        println!("  (late: ms from a probe's scheduled time to its attempt starting)");
        println!("  {:<52} {:>10}", "figure (steady window)", "value");
        println!("  {:<52} {:>10.0}", "probe attempts the schedule asks for", self.expected());
        println!("  {:<52} {:>10}", "container restarts", self.restarts);
        println!("  {:<52} {:>10.0}", "podwright RSS, median of 1 s samples (KiB)", rss_median);
        println!("  {:<52} {:>10}", "podwright RSS, max of the samples (KiB)", rss_max);
        println!("  {:<52} {:>10}", "podwright peak RSS, whole run (KiB)", self.rss_peak_kib);
        println!(
            "  {:<52} {:>10.2}",
            "containerd + shims CPU, with reaped children (s)",
            self.runtime_cpu.as_secs_f64()
        );
        println!("probe_pods: {}", self.pods);
        println!("probe_ramp_s: {:.2}", self.ramp.wall.as_secs_f64());
        println!("probe_window_s: {:.2}", self.window.wall.as_secs_f64());
        println!("probe_cpu_s: {cpu_s:.2}");
        println!("probe_cpu_pct: {cpu_pct:.1}");
        println!("probe_rss_kib: {rss_median:.0}");
        println!("probe_rss_max_kib: {rss_max}");
        println!("probe_rss_peak_kib: {}", self.rss_peak_kib);
        println!("probe_count: {}", self.window.late_ms.len());
        println!("probe_expected: {:.0}", self.expected());
        println!("probe_jitter_p50_ms: {:.2}", pct(&self.window, 50.0));
        println!("probe_jitter_p99_ms: {:.2}", pct(&self.window, 99.0));
        println!("probe_jitter_max_ms: {:.2}", pct(&self.window, 100.0));
        println!("probe_restarts: {}", self.restarts);
        println!("probe_runtime_cpu_s: {:.2}", self.runtime_cpu.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_probe_lines() {
        let plain = "2026-01-01T00:00:00.000001Z TRACE podwright::probe: probe late_us=1234";
        assert_eq!(late_us(plain), Some(1234));
        assert_eq!(late_us("WARN podwright::worker: late_us=3"), None);
    }

    #[test]
    fn reads_progress_lines() {
        let line = "  12.34s  probe-07                 Running                  1/1    0";
        assert_eq!(progress(line), Some(("probe-07", true, 0)));
        let line = "   3.10s  probe-07                 ContainerCreating        0/1    2 (1s ago)";
        assert_eq!(progress(line), Some(("probe-07", false, 2)));
        assert_eq!(progress("podwright: timed out after 1s"), None);
    }

    #[test]
    fn manifest_loads() {
        let pods = podwright_api::load_str("probes.yaml", &manifest_text(3)).unwrap().pods;
        assert_eq!(pods.len(), 3);
    }
}
