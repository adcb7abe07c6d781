//! Static pods: the kubelet's file source (`staticPodPath`, `--pod-manifest-path`;
//! `pkg/kubelet/config/{file,file_linux,common}.go`). Every regular file in the directory whose
//! name does not start with a dot (sorted, not recursive, at most 10 MiB, YAML or JSON) holds one
//! Pod, which the node runs as the kubelet does: named `<name>-<node>`, in `default` unless the
//! file says otherwise, bound to this node, with a UID derived from the file ([`uid`]) and the
//! `kubernetes.io/config.*` annotations. The path may also be a single file.
//!
//! A pod may not reference objects of the API (Secrets, ConfigMaps, service accounts, ...),
//! as since 1.37 ([`references`]). A file that cannot be read, parsed or admitted gives no pod and a log line naming it (and,
//! for YAML errors, the line); it does not stop the others. [`StaticPodSource`] reads the path at
//! start, again whenever it changes ([`DirWatch`]), and every `fileCheckFrequency`, each time
//! giving the whole set: what to add, change or remove is the caller's diff, as in the kubelet's
//! pod config: [`StaticPods`] takes each reading, runs the pods on the node and keeps their
//! mirror pods ([`mirror`]) on the mode's API.

pub mod mirror;
mod references;
mod set;
pub mod uid;
mod watch;

pub use set::{StaticPodHost, StaticPods};
pub(crate) use watch::DirWatch;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use podwright_api::annotations::{CONFIG_HASH, CONFIG_SOURCE, FILE_SOURCE};
use podwright_api::parse_manifests;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest static pod file read (the kubelet's limit); the API's own 3 MiB limit on a pod
/// applies after it.
pub(crate) const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// How often the path is read again without a change notice (`fileCheckFrequency`).
pub const DEFAULT_CHECK_FREQUENCY: Duration = Duration::from_secs(20);

/// Why a file gave no pod, or what to know about the pod it gave: one log line, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileProblem {
    pub path: PathBuf,
    pub message: String,
}

/// One reading of the static-pod path.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Every pod admitted, in file-name order.
    pub pods: Vec<Pod>,
    pub problems: Vec<FileProblem>,
}

/// The static-pod path of a node, read as the kubelet reads it.
pub(crate) struct ManifestDir {
    path: PathBuf,
    node: String,
}

impl ManifestDir {
    pub fn new(path: impl Into<PathBuf>, node_name: &str) -> Self {
        ManifestDir { path: path.into(), node: node_name.to_lowercase() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads every file now. A missing path is an empty set (the kubelet's source reports it
    /// so that the node does not wait for it), with a problem saying so.
    pub fn list(&self) -> Listing {
        let mut listing = Listing::default();
        let problem = |message: String| FileProblem { path: self.path.clone(), message };
        match std::fs::metadata(&self.path) {
            Ok(m) if m.is_dir() => self.read_dir(&mut listing),
            Ok(m) if m.is_file() => self.read_into(&self.path, &mut listing),
            Ok(_) => {
                listing.problems.push(problem(format!("{}: path is not a directory or file", self.path.display())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                listing.problems.push(problem(format!("{}: path does not exist, ignoring", self.path.display())))
            }
            Err(e) => listing.problems.push(problem(format!("{}: {e}", self.path.display()))),
        }
        listing
    }

    fn read_dir(&self, listing: &mut Listing) {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) => {
                let message = format!("{}: {e}", self.path.display());
                listing.problems.push(FileProblem { path: self.path.clone(), message });
                return;
            }
        };
        let mut names: Vec<_> =
            entries.flatten().map(|e| e.file_name()).filter(|n| !n.as_encoded_bytes().starts_with(b".")).collect();
        names.sort();
        for name in names {
            let path = self.path.join(name);
            // Followed, as os.Stat does: a symlink to a manifest is a manifest.
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => self.read_into(&path, listing),
                Ok(m) if m.is_dir() => listing.problems.push(FileProblem {
                    message: format!("{}: not recursing into manifest path", path.display()),
                    path,
                }),
                Ok(_) => listing
                    .problems
                    .push(FileProblem { message: format!("{}: not a regular file", path.display()), path }),
                Err(e) => listing.problems.push(FileProblem { message: format!("{}: {e}", path.display()), path }),
            }
        }
    }

    fn read_into(&self, path: &Path, listing: &mut Listing) {
        match self.read_file(path) {
            Ok((pod, notes)) => {
                listing.pods.push(pod);
                listing
                    .problems
                    .extend(notes.into_iter().map(|message| FileProblem { path: path.to_path_buf(), message }));
            }
            Err(message) => listing.problems.push(FileProblem { path: path.to_path_buf(), message }),
        }
    }

    /// The pod of one file, with notes on it (deprecations, documents ignored), or why there is
    /// none. Every message starts with the file's path.
    pub fn read_file(&self, path: &Path) -> Result<(Pod, Vec<String>), String> {
        let name = path.display().to_string();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| format!("{name}: {e}"))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("{name}: larger than {MAX_FILE_BYTES} bytes, the most a static pod file may have"));
        }
        // Each problem of a parse error reads `<file>:<line>:<column>: ...`.
        let mut pods = parse_manifests(&name, &text).map_err(|e| e.to_string())?;
        if pods.is_empty() {
            return Err(format!("{name}: couldn't parse as pod(no Pod in the file), please check config file"));
        }
        let mut notes = Vec::new();
        if pods.len() > 1 {
            // The kubelet decodes the first document only.
            notes.push(format!("{name}: {} Pods in one file; only the first is run", pods.len()));
        }
        let mut pod = pods.swap_remove(0);
        self.apply_defaults(&mut pod, &name);
        let warnings =
            podwright_api::admit_pod(&mut pod).map_err(|e| format!("{name}: invalid pod: {}", e.api_message()))?;
        if let Some(resource) = references::api_object_reference(&pod) {
            return Err(format!("{name}: static pods may not reference {resource}"));
        }
        notes.extend(warnings.into_iter().map(|w| format!("{name}: {w}")));
        Ok((pod, notes))
    }

    /// The kubelet's `applyDefaults` for a file: the UID (unless given) from the pod as
    /// decoded, then the name, namespace, node, toleration and annotations.
    fn apply_defaults(&self, pod: &mut Pod, source: &str) {
        let uid = match pod.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
            Some(given) => given.to_string(),
            None => uid::static_pod_uid(pod, &self.node, source),
        };
        let m = &mut pod.metadata;
        m.uid = Some(uid.clone());
        m.name = Some(format!("{}-{}", m.name.as_deref().unwrap_or_default(), self.node));
        if m.namespace.as_deref().is_none_or(str::is_empty) {
            m.namespace = Some("default".into());
        }
        let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(CONFIG_HASH.into(), uid);
        annotations.insert(CONFIG_SOURCE.into(), FILE_SOURCE.into());
        let spec = pod.spec.get_or_insert_default();
        spec.node_name = Some(self.node.clone());
        // Not evicted for node problems (`AddOrUpdateTolerationInPod`).
        let tolerate =
            Toleration { operator: Some("Exists".into()), effect: Some("NoExecute".into()), ..Default::default() };
        let tolerations = spec.tolerations.get_or_insert_default();
        let same = |t: &Toleration| {
            t.key.as_deref().unwrap_or_default().is_empty()
                && t.operator.as_deref() == Some("Exists")
                && t.effect.as_deref() == Some("NoExecute")
        };
        match tolerations.iter_mut().find(|t| same(t)) {
            Some(t) => *t = tolerate,
            None => tolerations.push(tolerate),
        }
    }
}

/// The kubelet's file source for `serve`: [`ManifestDir`] read at start, on every change and
/// every `period`. Each problem is logged once, and again only when it changes.
pub struct StaticPodSource {
    dir: ManifestDir,
    watch: DirWatch,
    /// The problems last logged, by file.
    reported: BTreeMap<PathBuf, Vec<String>>,
}

impl StaticPodSource {
    /// Watches `path` from now on, so that nothing changed after the first [`list`](Self::list)
    /// goes unseen.
    pub fn new(path: impl Into<PathBuf>, node_name: &str, period: Duration) -> Self {
        let dir = ManifestDir::new(path, node_name);
        let watch = DirWatch::new(dir.path(), period);
        StaticPodSource { dir, watch, reported: BTreeMap::new() }
    }

    /// Reads the path now: every pod it holds, in file-name order.
    pub fn list(&mut self) -> Vec<Pod> {
        let listing = self.dir.list();
        self.report(&listing.problems);
        listing.pods
    }

    /// Waits until the path changes or the period has passed, and reads it again.
    pub async fn next(&mut self) -> Vec<Pod> {
        self.watch.changed().await;
        self.list()
    }

    fn report(&mut self, problems: &[FileProblem]) {
        let mut now: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
        for p in problems {
            now.entry(p.path.clone()).or_default().push(p.message.clone());
        }
        for (path, messages) in &now {
            if self.reported.get(path) != Some(messages) {
                for m in messages {
                    tracing::warn!("static pod file: {m}");
                }
            }
        }
        self.reported = now;
    }
}

#[cfg(test)]
mod tests;
