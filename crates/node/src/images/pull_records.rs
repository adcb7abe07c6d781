//! The node's records of its image pulls, kept under the root directory across restarts (the
//! kubelet's `pkg/kubelet/images/pullmanager`): an intent per image being pulled, written
//! before the pull begins and removed once it ends, and per image pulled, the credentials that
//! pulled it ([`PulledRecord`]). A crash mid-pull leaves the intent: the image then counts as
//! pulled by the node with no credentials known, so that every pod must prove access to it.

use super::verification::{self, Known, PullCredentials, PullSecret, PulledRecord, Verdict, VerificationPolicy};
use crate::layout;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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
    /// Pulls under way per image: the intent file goes when the last one ends. An intent on
    /// disk without a count here is a previous run's, whose pull's end nobody saw.
    ///
    /// Held across each decision and write, so that a record is never read and written by two
    /// at once (the kubelet's per-image locks; these are small files).
    under_way: Mutex<HashMap<String, usize>>,
}

impl PullRecords {
    pub(crate) fn new(root: &Path, policy: VerificationPolicy) -> Self {
        PullRecords {
            pulling: layout::image_pull_intents(root),
            pulled: layout::image_pulled_records(root),
            policy,
            under_way: Mutex::new(HashMap::new()),
        }
    }

    /// Before pulling `image` (as the container asks for it): the intent, on disk first.
    pub(crate) fn pull_begins(&self, image: &str) -> io::Result<()> {
        let mut under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        write_atomic(&self.pulling, &file_name(image), &Intent { image: image.to_string() })?;
        *under_way.entry(image.to_string()).or_default() += 1;
        Ok(())
    }

    /// After the pull of `image` as repository `name` succeeded: the credentials that pulled it
    /// are added to `image_ref`'s record, then the intent goes. When the record cannot be
    /// written the intent stays, so that the image still counts as pulled by the node.
    pub(crate) fn pulled(&self, image: &str, name: &str, image_ref: &str, credentials: &PullCredentials) {
        let mut under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = self.add(name, image_ref, credentials) {
            tracing::error!(%e, image_ref, "could not write the image's pulled record");
            return;
        }
        self.pull_ends(&mut under_way, image);
    }

    /// After the pull of `image` failed or was given up.
    pub(crate) fn pull_failed(&self, image: &str) {
        let mut under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        self.pull_ends(&mut under_way, image);
    }

    fn pull_ends(&self, under_way: &mut HashMap<String, usize>, image: &str) {
        let count = under_way.get(image).copied().unwrap_or_default();
        if count > 1 {
            under_way.insert(image.to_string(), count - 1);
            return;
        }
        match remove(&self.pulling.join(file_name(image))) {
            Ok(()) => {
                under_way.remove(image);
            }
            Err(e) => tracing::error!(%e, image, "could not remove the image's pull intent"),
        }
    }

    /// Whether a pod presenting `pod_secrets` may use `image_ref`, present, asked for as
    /// `image` (repository `name`), under the node's policy; a match found is remembered. The
    /// records cannot be read: it must pull, as the kubelet fails safe.
    pub(crate) fn check(&self, image: &str, name: &str, image_ref: &str, pod_secrets: &[PullSecret]) -> Verdict {
        let under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        let read = self.record(image_ref).and_then(|mut record| {
            let intent = under_way.contains_key(image) || self.leftover_intent(image, name, image_ref, &mut record)?;
            Ok((record, intent))
        });
        let (record, intent) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::error!(%e, image, "could not read the records of image pulls");
                return Verdict::MustPull;
            }
        };
        let known = Known { record: record.as_ref(), intent, by_id: asked_by_id(image, image_ref) };
        let verdict = verification::decide(&self.policy, name, known, pod_secrets);
        if let Verdict::PodCredentials { remember: Some(secret) } = &verdict
            && let Err(e) = self.add(name, image_ref, &PullCredentials::of_pull(Some(secret.clone())))
        {
            tracing::error!(%e, image_ref, "could not write the image's pulled record");
        }
        verdict
    }

    /// An intent a previous run left for `image`, now present as `image_ref`: made an entry
    /// without credentials in the image's record (the kubelet turns these into records at
    /// start), so that the intent can go and the image stays the node's. Whether there was one.
    fn leftover_intent(
        &self,
        image: &str,
        name: &str,
        image_ref: &str,
        record: &mut Option<PulledRecord>,
    ) -> io::Result<bool> {
        let path = self.pulling.join(file_name(image));
        let intent: Option<Intent> = read(&path)?;
        if intent.is_none_or(|i| i.image != image) {
            return Ok(false);
        }
        let known =
            record.get_or_insert_with(|| PulledRecord { image_ref: image_ref.to_string(), ..Default::default() });
        if !known.credential_mapping.contains_key(name) {
            known.credential_mapping.insert(name.to_string(), PullCredentials::default());
            write_atomic(&self.pulled, &file_name(image_ref), known)?;
        }
        tracing::info!(
            image,
            "a pull begun before a restart ended with the image present; its credentials are unknown"
        );
        remove(&path)?;
        Ok(true)
    }

    fn record(&self, image_ref: &str) -> io::Result<Option<PulledRecord>> {
        let record: Option<PulledRecord> = read(&self.pulled.join(file_name(image_ref)))?;
        // A hash collision, or a file not ours: not this image's.
        Ok(record.filter(|r| r.image_ref == image_ref))
    }

    fn add(&self, name: &str, image_ref: &str, credentials: &PullCredentials) -> io::Result<()> {
        let record = self.record(image_ref)?.unwrap_or_else(|| PulledRecord {
            image_ref: image_ref.to_string(),
            credential_mapping: Default::default(),
        });
        match record.merged(name, credentials) {
            Some(merged) => write_atomic(&self.pulled, &file_name(image_ref), &merged),
            // A new record with nothing proved is still written: the image is the node's.
            None if !self.pulled.join(file_name(image_ref)).exists() => {
                write_atomic(&self.pulled, &file_name(image_ref), &record)
            }
            None => Ok(()),
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

/// Written whole or not at all: a temporary file, synced, then renamed over the old one.
fn write_atomic(dir: &Path, name: &str, value: &impl Serialize) -> io::Result<()> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    let target = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec(value).map_err(io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, &target)
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
        assert_eq!(records.record(REF).unwrap().unwrap().credential_mapping[NAME].kubernetes_secrets, [rotated]);
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
        assert_eq!(records.record(REF).unwrap().unwrap().credential_mapping[NAME], PullCredentials::default());
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
        assert_eq!(records.record(REF).unwrap(), None);
        // An unreadable record fails safe.
        std::fs::create_dir_all(layout::image_pulled_records(&root)).unwrap();
        std::fs::write(layout::image_pulled_records(&root).join(file_name(REF)), "{").unwrap();
        let never = PullRecords::new(&root, VerificationPolicy::NeverVerify);
        assert_eq!(never.check(IMAGE, NAME, REF, &[]), Verdict::MustPull);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
