//! `pulls`: pods that each need an image of their own, pulled from a local registry, started at
//! once through pod workers on containerd under each way the node may overlap its pulls (the
//! kubelet's `serializeImagePulls` and `maxParallelImagePulls`): the time until every pod is
//! Running; and podwright's own time per pull beside the runtime's `PullImage`.
//!
//! The images are busybox plus one layer of random bytes each, so that every pull fetches and
//! unpacks a layer nobody has (busybox's own layer is already in containerd's store). Before
//! every run they are removed from containerd (CRI `RemoveImage`), so that every run pulls all
//! of them.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::counted::{Counted, Counter};
use crate::measure::Summary;
use crate::real::{DEFAULT_ROOT, connect};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::{EventSink, EventType, ImagePulls, Node, PodUpdate, PodWorkers, StatusStream};
use podwright_registry::{Registry, image_dir};
use podwright_runtime::{CriRuntime, ImageService, Runtime};
use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long the pods may take to be Running, or to go once deleted.
const POD_LIMIT: Duration = Duration::from_secs(120);
/// The busybox archive the images are made from, and its tag in it.
const BASE_ARCHIVE: &str = "busybox-1.36.tar";
const BASE_TAG: &str = "1.36";

/// The node's pull policies measured, by the names the report gives them.
const MODES: [(&str, ImagePulls); 3] = [
    ("serial", ImagePulls::Serial),
    ("parallel", ImagePulls::Parallel { max: None }),
    ("max 2", ImagePulls::Parallel { max: NonZeroUsize::new(2) }),
];

#[derive(clap::Args)]
pub struct PullsArgs {
    /// Pods, each with an image of its own.
    #[arg(long, default_value_t = 8)]
    pub pods: usize,
    /// Measured runs of each policy (interleaved), after one unmeasured round.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Size of each image's own layer of random bytes, in KiB.
    #[arg(long, default_value_t = 1024)]
    pub layer_kib: usize,
    /// CRI endpoint; without it the embedded containerd under --root-dir is started or reused.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// podwright's root: pod directories, and the embedded containerd.
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root_dir: PathBuf,
}

/// One pull as the benchmark saw it, in ms from the start of its run: the executor's `Pulling`
/// event (it has decided to pull), its `Pulled` event (the image is ready), and the runtime's
/// `PullImage` call in between; and how long the `ImageStatus` calls after it (the image's size,
/// for the `Pulled` event, as the kubelet asks for it) took, a part of podwright's time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pull {
    asked: f64,
    ready: f64,
    call: (f64, f64),
    status_after: f64,
}

/// One run of one policy.
struct Run {
    /// From the first pod handed to the workers until the last is Running.
    wall: Duration,
    pulls: Vec<Pull>,
}

pub struct PullsReport {
    runtime: String,
    pods: usize,
    layer_kib: usize,
    /// Per policy, in [`MODES`] order: its measured runs.
    runs: Vec<Vec<Run>>,
}

/// The `Pulling` and `Pulled` events, with the moment each was recorded, by pod name.
#[derive(Default)]
struct PullEvents(Mutex<Vec<(Instant, String, String, String)>>);

impl EventSink for PullEvents {
    fn record(
        &self,
        pod: &Pod,
        _field_path: Option<String>,
        _kind: EventType,
        reason: &str,
        message: String,
        _now: Timestamp,
    ) {
        if matches!(reason, "Pulling" | "Pulled") {
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push((Instant::now(), name, reason.to_string(), message));
        }
    }

    /// The bench's nodes collect no images, so nothing is said of the node.
    fn record_node(&self, _node: &str, _kind: EventType, _reason: &str, _message: String, _now: Timestamp) {}
}

impl PullEvents {
    fn take(&self) -> Vec<(Instant, String, String, String)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One policy's pod workers, and what they publish.
struct Policy {
    name: &'static str,
    workers: PodWorkers,
    statuses: UnboundedReceiver<PodUpdate>,
}

struct Bench {
    cri: Arc<CriRuntime>,
    counted: Arc<Counted>,
    events: Arc<PullEvents>,
    /// `(pod name, image)`, one pod per image.
    pods: Vec<(String, String)>,
}

pub async fn run(args: &PullsArgs) -> Result<PullsReport, String> {
    if args.pods == 0 || args.runs == 0 {
        return Err("--pods and --runs must be at least 1".into());
    }
    let (cri, version) = connect(args.endpoint.as_deref(), &args.root_dir).await?;
    let cri = Arc::new(cri);
    // Started here, on the thread that lives as long as the benchmark: the registry dies with it.
    let registry = Registry::start("podwright-bench", None)?;
    let images = push_images(&registry, args.pods, args.layer_kib)?;
    let counted = Arc::new(Counted::new(cri.clone(), Counter::new(true)));
    let events = Arc::new(PullEvents::default());
    let pods = images.iter().enumerate().map(|(i, image)| (format!("pull-{i}"), image.clone())).collect();
    let bench = Bench { cri, counted, events, pods };
    let result = bench.measure(args).await;
    // Whatever happened: no image of this registry stays behind (the pods are gone already).
    let removed = bench.remove_images().await;
    drop(registry);
    let runs = result?;
    removed?;
    Ok(PullsReport { runtime: version, pods: args.pods, layer_kib: args.layer_kib, runs })
}

/// Makes `count` images (busybox and a layer of `layer_kib` KiB of random bytes each) and pushes
/// them to `registry`. Returns their references.
fn push_images(registry: &Registry, count: usize, layer_kib: usize) -> Result<Vec<String>, String> {
    let work = TempDir::new(std::env::temp_dir().join(format!("podwright-bench-pulls-{}", std::process::id())))?;
    let layout = work.0.join("layout");
    let base = image_dir().join(BASE_ARCHIVE);
    if !base.is_file() {
        return Err(format!("{} is missing (run scripts/setup)", base.display()));
    }
    std::fs::create_dir_all(&layout).map_err(|e| format!("cannot create {}: {e}", layout.display()))?;
    tool(Command::new("tar").arg("-C").arg(&layout).arg("-xf").arg(&base))?;
    let mut urandom = std::fs::File::open("/dev/urandom").map_err(|e| format!("cannot open /dev/urandom: {e}"))?;
    let mut images = vec![];
    for i in 0..count {
        let blob = work.0.join(format!("layer-{i}"));
        let mut file = std::fs::File::create(&blob).map_err(|e| format!("cannot create {}: {e}", blob.display()))?;
        std::io::copy(&mut std::io::Read::take(&mut urandom, layer_kib as u64 * 1024), &mut file)
            .map_err(|e| format!("cannot write {}: {e}", blob.display()))?;
        let tag = format!("pull-{i}");
        tool(
            Command::new("umoci")
                .arg("insert")
                .arg("--image")
                .arg(format!("{}:{BASE_TAG}", layout.display()))
                .args(["--tag", &tag])
                .arg(&blob)
                .arg("/podwright-bench/layer"),
        )?;
        images.push(registry.push(&format!("oci:{}:{tag}", layout.display()), &format!("podwright-bench/{tag}:1"))?);
    }
    Ok(images)
}

/// Runs a tool to its end, its output captured; Err with what it said when it fails.
fn tool(command: &mut Command) -> Result<(), String> {
    let name = command.get_program().to_string_lossy().into_owned();
    let out =
        command.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {name} (run scripts/setup): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)))
    }
}

/// A directory removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(path: PathBuf) -> Result<TempDir, String> {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Bench {
    /// One unmeasured round of every policy, then `args.runs` measured ones, interleaved.
    async fn measure(&self, args: &PullsArgs) -> Result<Vec<Vec<Run>>, String> {
        let runtime: Arc<dyn Runtime> = self.counted.clone();
        let mut policies: Vec<Policy> = MODES
            .iter()
            .map(|&(name, pulls)| {
                let (stream, statuses) = StatusStream::new();
                let workers = Node::new(runtime.clone(), &args.root_dir)
                    .status(Arc::new(stream))
                    .events(self.events.clone())
                    .image_pulls(pulls)
                    .build();
                Policy { name, workers, statuses }
            })
            .collect();
        let mut runs: Vec<Vec<Run>> = MODES.iter().map(|_| vec![]).collect();
        for round in 0..=args.runs {
            for (i, policy) in policies.iter_mut().enumerate() {
                let run = self.run(policy).await.map_err(|e| format!("{}: {e}", policy.name))?;
                if round > 0 {
                    runs[i].push(run);
                }
            }
        }
        Ok(runs)
    }

    /// Every pod started at once on an empty image store, until all are Running; then removed.
    async fn run(&self, policy: &mut Policy) -> Result<Run, String> {
        self.remove_images().await?;
        let pods: Vec<Pod> = self
            .pods
            .iter()
            .map(|(name, image)| crate::pod::pull_template(image).map(|t| crate::pod::instance(&t, name)))
            .collect::<Result<_, _>>()?;
        self.counted.hook().take_timeline();
        self.events.take();
        let t0 = Instant::now();
        let started = async {
            for pod in &pods {
                policy.workers.update(pod.clone()).map_err(|e| e.to_string())?;
            }
            let mut running = BTreeSet::new();
            while running.len() < pods.len() {
                let Some(update) = policy.statuses.recv().await else {
                    return Err("the status stream ended before the pods ran".to_string());
                };
                let name = update.spec.metadata.name.clone().unwrap_or_default();
                match update.phase() {
                    Some("Running") => {
                        running.insert(name);
                    }
                    Some(phase @ ("Failed" | "Succeeded")) => {
                        return Err(format!("pod {name} ended ({phase}): {:?}", update.status));
                    }
                    _ => {}
                }
            }
            Ok(t0.elapsed())
        };
        let outcome = tokio::time::timeout(POD_LIMIT, started)
            .await
            .unwrap_or_else(|_| Err(format!("the pods were not all Running within {POD_LIMIT:?}")));
        let spans = self.counted.hook().take_timeline();
        let events = self.events.take();

        // Not timed: the pods go at once, whatever happened.
        for pod in &pods {
            policy.workers.delete(pod.metadata.uid.as_deref().unwrap_or_default(), Some(0));
        }
        if tokio::time::timeout(POD_LIMIT, policy.workers.wait_finished()).await.is_err() {
            return Err(format!("the pods did not finish within {POD_LIMIT:?} of their deletion"));
        }
        while policy.statuses.try_recv().is_ok() {}
        for pod in &pods {
            policy.workers.remove(pod.metadata.uid.as_deref().unwrap_or_default()).await;
        }

        let wall = outcome?;
        let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
        let mut pulls = vec![];
        for (name, image) in &self.pods {
            let event = |reason: &str| {
                events
                    .iter()
                    .find(|(_, pod, r, _)| pod == name && r == reason)
                    .map(|(at, _, _, message)| (*at, message))
            };
            let (Some((asked, _)), Some((ready, message))) = (event("Pulling"), event("Pulled")) else {
                return Err(format!("pod {name} has no Pulling and Pulled events: {events:?}"));
            };
            if !message.starts_with("Successfully pulled") {
                return Err(format!("pod {name} did not pull: {message}"));
            }
            let calls: Vec<_> =
                spans.iter().filter(|s| s.op == "PullImage" && s.image.as_ref() == Some(image)).collect();
            let [call] = calls.as_slice() else {
                return Err(format!("{image} was pulled {} times, not once", calls.len()));
            };
            let status_after = spans
                .iter()
                .filter(|s| s.op == "ImageStatus" && s.image.as_ref() == Some(image))
                .filter(|s| s.start >= call.end && s.end <= ready)
                .map(|s| s.end.duration_since(s.start).as_secs_f64() * 1e3)
                .sum();
            pulls.push(Pull { asked: ms(asked), ready: ms(ready), call: (ms(call.start), ms(call.end)), status_after });
        }
        Ok(Run { wall, pulls })
    }

    /// Removes the images from containerd and makes sure they are gone.
    async fn remove_images(&self) -> Result<(), String> {
        for (_, image) in &self.pods {
            self.cri.remove_image(image).await.map_err(|e| format!("cannot remove {image}: {e}"))?;
            if self.cri.image_status(image).await.map_err(|e| e.to_string())?.is_some() {
                return Err(format!("{image} is still in containerd's store after RemoveImage"));
            }
        }
        Ok(())
    }
}

/// How long of `[from, to]` at least `limit` of `calls` were under way at once.
fn covered(from: f64, to: f64, calls: &[(f64, f64)], limit: usize) -> f64 {
    let mut cuts: Vec<f64> = calls.iter().flat_map(|&(s, e)| [s, e]).filter(|&t| t > from && t < to).collect();
    cuts.push(from);
    cuts.push(to);
    cuts.sort_by(f64::total_cmp);
    cuts.windows(2)
        .filter(|w| {
            let mid = (w[0] + w[1]) / 2.0;
            calls.iter().filter(|&&(s, e)| s <= mid && mid < e).count() >= limit
        })
        .map(|w| w[1] - w[0])
        .sum()
}

/// podwright's overhead of each pull, in ms: its time from deciding to pull (`Pulling`) to the
/// image being ready (`Pulled`), less its wait in the node's queue, less the runtime's own
/// `PullImage` call. It waited in the queue while the other pulls' calls filled all `limit`
/// slots (no limit: it never waits); the time the queue takes to hand a slot on after a call
/// returns is podwright's, and counts, as does (for a pull waiting then) the holder's own
/// time between taking the slot and calling the runtime.
fn overheads(pulls: &[Pull], limit: Option<usize>) -> Vec<f64> {
    pulls
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let others: Vec<(f64, f64)> =
                pulls.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, o)| o.call).collect();
            let waited = limit.map_or(0.0, |limit| covered(p.asked, p.call.0, &others, limit));
            (p.ready - p.asked) - waited - (p.call.1 - p.call.0)
        })
        .collect()
}

/// How many pulls the policy lets run at once; `None`: any number.
fn slots(pulls: ImagePulls) -> Option<usize> {
    match pulls {
        ImagePulls::Serial => Some(1),
        ImagePulls::Parallel { max } => max.map(NonZeroUsize::get),
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

impl PullsReport {
    /// Per policy: its name, the summary of its walls, and per pull (means, ms) podwright's
    /// overhead, the part of it in `ImageStatus` calls for the size, and the `PullImage` call.
    fn rows(&self) -> Vec<(&'static str, Summary, f64, f64, f64)> {
        MODES
            .iter()
            .zip(&self.runs)
            .map(|(&(name, pulls), runs)| {
                let limit = slots(pulls);
                let walls: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
                let extra: Vec<f64> = runs.iter().flat_map(|r| overheads(&r.pulls, limit)).collect();
                let calls: Vec<f64> = runs.iter().flat_map(|r| r.pulls.iter().map(|p| p.call.1 - p.call.0)).collect();
                let sizes: Vec<f64> = runs.iter().flat_map(|r| r.pulls.iter().map(|p| p.status_after)).collect();
                (name, Summary::of(&walls), mean(&extra), mean(&sizes), mean(&calls))
            })
            .collect()
    }

    pub fn print(&self) {
        let rows = self.rows();
        let runs = self.runs.first().map_or(0, Vec::len);
        println!(
            "image pulls on {} from a local registry: {} pods, {} images (busybox + {} KiB of its own), {runs} runs each, interleaved",
            self.runtime, self.pods, self.pods, self.layer_kib
        );
        println!(
            "  {:<10} {:>9} {:>9} {:>9} {:>17} {:>16} {:>13}",
            "policy", "median s", "min s", "max s", "overhead ms/pull", "(ImageStatus ms)", "PullImage ms"
        );
        for (name, wall, extra, size, call) in &rows {
            println!(
                "  {name:<10} {:>9.2} {:>9.2} {:>9.2} {extra:>17.2} {size:>16.2} {call:>13.1}",
                wall.median / 1e3,
                wall.min / 1e3,
                wall.max / 1e3
            );
        }
        let (serial, parallel, max2) = (&rows[0], &rows[1], &rows[2]);
        // Serial pulls run alone: their overhead is podwright's own, not the machine's contention.
        println!(
            "pulls: {} pods, {} images: serial {:.2} s, parallel {:.2} s, max 2 {:.2} s; podwright overhead {:.1} ms per pull (runtime {:.0} ms)",
            self.pods,
            self.pods,
            serial.1.median / 1e3,
            parallel.1.median / 1e3,
            max2.1.median / 1e3,
            serial.2,
            serial.4
        );
        for (name, wall, extra, _, call) in &rows {
            let key = name.replace(' ', "");
            println!("pulls_{key}_s: {:.3}", wall.median / 1e3);
            println!("pull_overhead_{key}_ms: {extra:.3}");
            println!("pull_runtime_{key}_ms: {call:.1}");
        }
        println!("pull_overhead_ms: {:.3}", serial.2);
        println!("pull_overhead_image_status_ms: {:.3}", serial.3);
        println!("pull_runtime_ms: {:.1}", serial.4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(asked: f64, start: f64, end: f64, ready: f64) -> Pull {
        Pull { asked, ready, call: (start, end), status_after: 0.0 }
    }

    #[test]
    fn covered_counts_only_where_enough_calls_overlap() {
        let calls = [(0.0, 10.0), (5.0, 20.0)];
        assert_eq!(covered(0.0, 30.0, &calls, 1), 20.0);
        assert_eq!(covered(0.0, 30.0, &calls, 2), 5.0);
        assert_eq!(covered(12.0, 14.0, &calls, 1), 2.0);
        assert_eq!(covered(25.0, 30.0, &calls, 1), 0.0);
        assert_eq!(covered(3.0, 3.0, &calls, 1), 0.0);
    }

    #[test]
    fn serial_pulls_do_not_count_their_wait_as_overhead() {
        // Both asked at 0; the second waits for the first call (1..101), gets its slot 0.5 ms
        // after that call returned, and its own call runs 101.5..201.5.
        let pulls = [pull(0.0, 1.0, 101.0, 102.0), pull(0.0, 101.5, 201.5, 203.0)];
        let got = overheads(&pulls, Some(1));
        // First: 1 ms before its call, 1 ms after. Second: the first's 1 ms before its call,
        // 0.5 ms handing the slot on, 1.5 ms after its own call.
        assert_eq!(got, vec![2.0, 3.0]);
    }

    #[test]
    fn a_limit_of_two_waits_only_while_both_slots_are_busy() {
        let pulls = [pull(0.0, 0.0, 50.0, 51.0), pull(0.0, 0.0, 80.0, 81.0), pull(0.0, 50.0, 90.0, 91.0)];
        assert_eq!(overheads(&pulls, Some(2)), vec![1.0, 1.0, 1.0]);
        // Without a limit nothing waits: the third's 50 ms before its call are its own.
        assert_eq!(overheads(&pulls, None), vec![1.0, 1.0, 51.0]);
    }
}
