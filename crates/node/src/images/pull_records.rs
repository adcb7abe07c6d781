//! The node's records of its image pulls, kept under the root directory across restarts (the
//! kubelet's `pkg/kubelet/images/pullmanager`): an intent per image being pulled, written
//! before the pull begins and removed once it ends, and per image pulled, the credentials that
//! pulled it ([`PulledRecord`]). A crash mid-pull leaves the intent: the image then counts as
//! pulled by the node with no credentials known, so that every pod must prove access to it.
//!
//! The files are read once and kept in memory in front of them, every write going through to
//! the disk first (upstream's `cachedPullRecordsAccessor`): a start of a container whose image
//! is present reads no file.

use super::verification::{self, Known, PullCredentials, PullSecret, PulledRecord, Verdict, VerificationPolicy};
use crate::{layout, whole_file};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An intent file's content (upstream's `ImagePullIntent`).
#[derive(Serialize, Deserialize)]
struct Intent {
    image: String,
}

pub(crate) struct PullRecords {
    pulling: PathBuf,
    pulled: PathBuf,
    policy: VerificationPolicy,
    /// Held across each decision and write, so that a record is never read and written by two
    /// at once (the kubelet's per-image locks; these are small files).
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Pulls under way per image: the intent file goes when the last one ends.
    under_way: HashMap<String, usize>,
    /// The images whose intents a previous run left, whose pulls' ends nobody saw; read from
    /// the disk at the first check.
    leftover: Option<HashSet<String>>,
    /// The records read or written, by image reference; `None` for one known to have no file.
    records: HashMap<String, Option<PulledRecord>>,
}

impl PullRecords {
    pub(crate) fn new(root: &Path, policy: VerificationPolicy) -> Self {
        PullRecords {
            pulling: layout::image_pull_intents(root),
            pulled: layout::image_pulled_records(root),
            policy,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before pulling `image` (as the container asks for it): the intent, on disk first.
    pub(crate) fn pull_begins(&self, image: &str) -> io::Result<()> {
        let mut state = self.state();
        write(&self.pulling.join(file_name(image)), &Intent { image: image.to_string() })?;
        *state.under_way.entry(image.to_string()).or_default() += 1;
        Ok(())
    }

    /// After the pull of `image` as repository `name` succeeded: the credentials that pulled it
    /// are added to `image_ref`'s record, then the intent goes. When the record cannot be
    /// written the intent stays, so that the image still counts as pulled by the node.
    pub(crate) fn pulled(&self, image: &str, name: &str, image_ref: &str, credentials: &PullCredentials) {
        let mut state = self.state();
        if let Err(e) = self.add(&mut state, name, image_ref, credentials) {
            tracing::error!(%e, image_ref, "could not write the image's pulled record");
            return;
        }
        self.pull_ends(&mut state, image);
    }

    /// After the pull of `image` failed or was given up.
    pub(crate) fn pull_failed(&self, image: &str) {
        self.pull_ends(&mut self.state(), image);
    }

    fn pull_ends(&self, state: &mut State, image: &str) {
        let count = state.under_way.get(image).copied().unwrap_or_default();
        if count > 1 {
            state.under_way.insert(image.to_string(), count - 1);
            return;
        }
        match remove(&self.pulling.join(file_name(image))) {
            Ok(()) => {
                state.under_way.remove(image);
                if let Some(leftover) = &mut state.leftover {
                    leftover.remove(image);
                }
            }
            Err(e) => tracing::error!(%e, image, "could not remove the image's pull intent"),
        }
    }

    /// Whether a pod presenting `pod_secrets` may use `image_ref`, present, asked for as
    /// `image` (repository `name`), under the node's policy; a match found is remembered. The
    /// records cannot be read: it must pull, as the kubelet fails safe.
    pub(crate) fn check(&self, image: &str, name: &str, image_ref: &str, pod_secrets: &[PullSecret]) -> Verdict {
        let mut state = self.state();
        let intent = match self.intent(&mut state, image, name, image_ref) {
            Ok(intent) => intent,
            Err(e) => {
                tracing::error!(%e, image, "could not read the records of image pulls");
                return Verdict::MustPull;
            }
        };
        let record = match self.record(&mut state, image_ref) {
            Ok(record) => record,
            Err(e) => {
                tracing::error!(%e, image, "could not read the records of image pulls");
                return Verdict::MustPull;
            }
        };
        let known = Known { record: record.as_ref(), intent, by_id: asked_by_id(image, image_ref) };
        let verdict = verification::decide(&self.policy, name, known, pod_secrets);
        if let Verdict::PodCredentials { remember: Some(secret) } = &verdict
            && let Err(e) = self.add(&mut state, name, image_ref, &PullCredentials::of_pull(Some(secret.clone())))
        {
            tracing::error!(%e, image_ref, "could not write the image's pulled record");
        }
        verdict
    }

    /// Whether `image`'s pull is under way, or was when a previous run ended. Such an intent,
    /// the image now present as `image_ref`, is made an entry without credentials in the
    /// image's record (the kubelet turns these into records at start), so that the intent can
    /// go and the image stays the node's.
    fn intent(&self, state: &mut State, image: &str, name: &str, image_ref: &str) -> io::Result<bool> {
        if state.under_way.contains_key(image) {
            return Ok(true);
        }
        if state.leftover.is_none() {
            state.leftover = Some(self.read_intents()?);
        }
        if !state.leftover.as_ref().is_some_and(|leftover| leftover.contains(image)) {
            return Ok(false);
        }
        let record = self.record(state, image_ref)?;
        let known = record.unwrap_or_else(|| PulledRecord { image_ref: image_ref.to_string(), ..Default::default() });
        if !known.credential_mapping.contains_key(name) {
            let mut known = known;
            known.credential_mapping.insert(name.to_string(), PullCredentials::default());
            self.store(state, known)?;
        }
        tracing::info!(
            image,
            "a pull begun before a restart ended with the image present; its credentials are unknown"
        );
        remove(&self.pulling.join(file_name(image)))?;
        if let Some(leftover) = &mut state.leftover {
            leftover.remove(image);
        }
        Ok(true)
    }

    /// The images of the intents on disk.
    fn read_intents(&self) -> io::Result<HashSet<String>> {
        let entries = match std::fs::read_dir(&self.pulling) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
            Err(e) => return Err(e),
        };
        let mut images = HashSet::new();
        for entry in entries {
            let path = entry?.path();
            // A temporary file a crash left: its intent was never whole, its pull never began.
            if path.extension().is_some_and(|e| e == "tmp") {
                continue;
            }
            let intent: Option<Intent> = read(&path)?;
            // A file not named for its image is not ours.
            if let Some(intent) = intent.filter(|i| path.ends_with(file_name(&i.image))) {
                images.insert(intent.image);
            }
        }
        Ok(images)
    }

    fn record(&self, state: &mut State, image_ref: &str) -> io::Result<Option<PulledRecord>> {
        if let Some(known) = state.records.get(image_ref) {
            return Ok(known.clone());
        }
        let record: Option<PulledRecord> = read(&self.pulled.join(file_name(image_ref)))?;
        // A hash collision, or a file not ours: not this image's.
        let record = record.filter(|r| r.image_ref == image_ref);
        state.records.insert(image_ref.to_string(), record.clone());
        Ok(record)
    }

    /// `record` on disk, then in memory.
    fn store(&self, state: &mut State, record: PulledRecord) -> io::Result<()> {
        write(&self.pulled.join(file_name(&record.image_ref)), &record)?;
        state.records.insert(record.image_ref.clone(), Some(record));
        Ok(())
    }

    fn add(&self, state: &mut State, name: &str, image_ref: &str, credentials: &PullCredentials) -> io::Result<()> {
        match self.record(state, image_ref)? {
            Some(record) => match record.merged(name, credentials) {
                Some(merged) => self.store(state, merged),
                None => Ok(()),
            },
            // A new record with nothing proved is still written: the image is the node's.
            None => {
                let empty = PulledRecord { image_ref: image_ref.to_string(), credential_mapping: Default::default() };
                let record = empty.merged(name, credentials).unwrap_or(empty);
                self.store(state, record)
            }
        }
    }
}

/// Whether `image` names the image `image_ref` by its ID: whole (`sha256:<hex>`), or a prefix
/// of the hex, which containerd also resolves.
fn asked_by_id(image: &str, image_ref: &str) -> bool {
    let Some(id) = image_ref.strip_prefix("sha256:") else { return false };
    let asked = image.strip_prefix("sha256:").unwrap_or(image);
    !asked.is_empty() && id.starts_with(asked)
}

/// `sha256-<hex of the key>`, as the kubelet names these files: an image name or reference
/// holds characters a file name cannot.
fn file_name(key: &str) -> String {
    format!("sha256-{}", verification::sha256_hex(key.as_bytes()))
}

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Synced before it replaces the old file: a record or intent lost to a machine's crash would
/// let a pod use an image it has not proved it may.
fn write(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    whole_file::replace(path, &bytes, whole_file::Durability::Machine)
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "reg.io/team/app:1.0";
    const NAME: &str = "reg.io/team/app";
    const REF: &str = "sha256:0123";

    fn root(test: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("pw-pull-records-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        root
    }

    fn on_disk(root: &Path) -> Option<PulledRecord> {
        read(&layout::image_pulled_records(root).join(file_name(REF))).unwrap()
    }

    fn secret(hash: &str) -> PullSecret {
        PullSecret { namespace: "a".into(), name: "pull".into(), uid: "uid-a".into(), credential_hash: hash.into() }
    }

    #[test]
    fn records_survive_a_restart_and_an_intent_precedes_the_pull() {
        let root = root("restart");
        let records = PullRecords::new(&root, VerificationPolicy::default());
        // Preloaded: any pod.
        assert_eq!(records.check(IMAGE, NAME, REF, &[]), Verdict::Exempt);
        records.pull_begins(IMAGE).unwrap();
        assert!(layout::image_pull_intents(&root).join(file_name(IMAGE)).exists(), "written before the pull");
        // While it is pulled, the image is the node's: a pod without credentials must pull.
        assert_eq!(records.check(IMAGE, NAME, REF, &[]), Verdict::MustPull);
        records.pulled(IMAGE, NAME, REF, &PullCredentials::of_pull(Some(secret("h"))));
        assert!(!layout::image_pull_intents(&root).join(file_name(IMAGE)).exists(), "the intent goes after");
        drop(records);

        let records = PullRecords::new(&root, VerificationPolicy::default());
        assert_eq!(records.check(IMAGE, NAME, REF, &[]), Verdict::MustPull);
        assert_eq!(records.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::PodCredentials { remember: None });
        // A rotated credential of the same secret is remembered, on disk.
        let rotated = secret("h2");
        assert_eq!(
            records.check(IMAGE, NAME, REF, std::slice::from_ref(&rotated)),
            Verdict::PodCredentials { remember: Some(rotated.clone()) }
        );
        assert_eq!(on_disk(&root).unwrap().credential_mapping[NAME].kubernetes_secrets, [rotated]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_crash_mid_pull_leaves_an_image_no_pod_may_use_unproven() {
        let root = root("crash");
        let records = PullRecords::new(&root, VerificationPolicy::default());
        records.pull_begins(IMAGE).unwrap();
        // The node dies here, the pull ending without it.
        drop(records);
        let records = PullRecords::new(&root, VerificationPolicy::default());
        assert_eq!(records.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::MustPull);
        // The intent became a record without credentials.
        assert!(!layout::image_pull_intents(&root).join(file_name(IMAGE)).exists());
        assert_eq!(on_disk(&root).unwrap().credential_mapping[NAME], PullCredentials::default());
        assert_eq!(records.check(IMAGE, NAME, REF, &[]), Verdict::MustPull);
        // A pull with the pod's secret proves it.
        records.pull_begins(IMAGE).unwrap();
        records.pulled(IMAGE, NAME, REF, &PullCredentials::of_pull(Some(secret("h"))));
        assert_eq!(records.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::PodCredentials { remember: None });
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_image_is_asked_for_by_id_whole_or_by_a_prefix() {
        let id = "sha256:0123abcd";
        assert!(asked_by_id(id, id));
        assert!(asked_by_id("0123ab", id));
        assert!(!asked_by_id("0123ab:latest", id));
        assert!(!asked_by_id(IMAGE, id));
        assert!(!asked_by_id("", id));
        assert!(!asked_by_id("sha256:", id));
    }

    #[test]
    fn an_intent_stays_while_another_pull_of_the_image_is_under_way() {
        let root = root("two");
        let records = PullRecords::new(&root, VerificationPolicy::default());
        records.pull_begins(IMAGE).unwrap();
        records.pull_begins(IMAGE).unwrap();
        records.pull_failed(IMAGE);
        assert!(layout::image_pull_intents(&root).join(file_name(IMAGE)).exists());
        records.pull_failed(IMAGE);
        assert!(!layout::image_pull_intents(&root).join(file_name(IMAGE)).exists());
        // Failed pulls prove nothing and leave no record.
        assert_eq!(on_disk(&root), None);
        // An unreadable record fails safe.
        std::fs::create_dir_all(layout::image_pulled_records(&root)).unwrap();
        std::fs::write(layout::image_pulled_records(&root).join(file_name(REF)), "{").unwrap();
        let never = PullRecords::new(&root, VerificationPolicy::NeverVerify);
        assert_eq!(never.check(IMAGE, NAME, REF, &[]), Verdict::MustPull);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_record_once_read_is_not_read_again() {
        let root = root("cached");
        let records = PullRecords::new(&root, VerificationPolicy::default());
        records.pull_begins(IMAGE).unwrap();
        records.pulled(IMAGE, NAME, REF, &PullCredentials::of_pull(Some(secret("h"))));
        assert_eq!(records.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::PodCredentials { remember: None });
        // Were the file read again, it would now fail safe.
        std::fs::write(layout::image_pulled_records(&root).join(file_name(REF)), "{").unwrap();
        assert_eq!(records.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::PodCredentials { remember: None });
        let restarted = PullRecords::new(&root, VerificationPolicy::default());
        assert_eq!(restarted.check(IMAGE, NAME, REF, &[secret("h")]), Verdict::MustPull);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
