//! Whether a pod may use an image already on the node without pulling it with its own
//! credentials (KEP-2535, the kubelet's `KubeletEnsureSecretPulledImages`, on since 1.35): the
//! `imagePullCredentialsVerificationPolicy` and its allowlist, the records of which credentials
//! pulled an image, and the decision itself, [`decide`], pure. The records are kept on disk by
//! [`super::pull_records`].

use super::credentials::{Credential, SecretSource};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `imagePullCredentialsVerificationPolicy`: which present images a pod must prove it may pull.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VerificationPolicy {
    /// Any pod may use any image on the node (the kubelet before 1.35).
    NeverVerify,
    /// Images the node did not pull itself (preloaded) need no proof; the ones it pulled do.
    #[default]
    NeverVerifyPreloadedImages,
    /// Only the images of `preloadedImagesVerificationAllowlist` need no proof.
    NeverVerifyAllowlistedImages(Allowlist),
    /// Every image needs proof.
    AlwaysVerify,
}

const POLICIES: [&str; 4] =
    ["NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"];

impl VerificationPolicy {
    /// From a `KubeletConfiguration`'s `imagePullCredentialsVerificationPolicy` and
    /// `preloadedImagesVerificationAllowlist`, refused as the kubelet's configuration
    /// validation refuses them.
    pub fn from_config(policy: Option<&str>, allowlist: &[String]) -> Result<Self, String> {
        let policy = policy.unwrap_or("NeverVerifyPreloadedImages");
        let parsed = match policy {
            "NeverVerify" => VerificationPolicy::NeverVerify,
            "NeverVerifyPreloadedImages" => VerificationPolicy::NeverVerifyPreloadedImages,
            "NeverVerifyAllowlistedImages" => VerificationPolicy::NeverVerifyAllowlistedImages(Allowlist::default()),
            "AlwaysVerify" => VerificationPolicy::AlwaysVerify,
            other => {
                let [a, b, c, d] = POLICIES;
                return Err(format!(
                    "invalid configuration: option {other:?} specified for imagePullCredentialsVerificationPolicy. Valid options are {a:?}, {b:?}, {c:?} or {d:?}"
                ));
            }
        };
        if !allowlist.is_empty() && policy != "NeverVerifyAllowlistedImages" {
            // The kubelet's message, its misspelling included.
            return Err("invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"".into());
        }
        match parsed {
            VerificationPolicy::NeverVerifyAllowlistedImages(_) => {
                Allowlist::new(allowlist).map(VerificationPolicy::NeverVerifyAllowlistedImages).map_err(|e| {
                    format!(
                        "invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: {e}"
                    )
                })
            }
            other => Ok(other),
        }
    }

    /// Whether a pod must prove it may use `name` (an image's repository, normalized, without
    /// tag or digest); `pulled_by_node`: this node pulled it, or began to.
    pub fn requires_verification(&self, name: &str, pulled_by_node: bool) -> bool {
        match self {
            VerificationPolicy::NeverVerify => false,
            VerificationPolicy::NeverVerifyPreloadedImages => pulled_by_node,
            VerificationPolicy::NeverVerifyAllowlistedImages(list) => !list.matches(name),
            VerificationPolicy::AlwaysVerify => true,
        }
    }
}

/// `preloadedImagesVerificationAllowlist`: repositories, whole or by a `/*` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allowlist {
    names: BTreeSet<String>,
    prefixes: Vec<String>,
}

impl Allowlist {
    /// The patterns, checked as the kubelet's `getAllowlistImagePattern` checks them.
    fn new(patterns: &[String]) -> Result<Self, String> {
        let mut list = Allowlist::default();
        for pattern in patterns {
            if pattern.trim() != pattern {
                return Err(format!("leading/trailing spaces are not allowed: {pattern}"));
            }
            let wildcard = pattern.ends_with("/*");
            let trimmed = if wildcard { &pattern[..pattern.len() - 1] } else { pattern.as_str() };
            if trimmed.is_empty() {
                return Err(format!("the supplied pattern is too short: {pattern}"));
            }
            if trimmed.contains('*') {
                return Err(format!(
                    "not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
                ));
            }
            if wildcard {
                if trimmed.len() == 1 {
                    return Err("at least registry hostname is required".into());
                }
                list.prefixes.push(trimmed.to_string());
                continue;
            }
            let parsed = podwright_api::image_ref::parse_image_ref(trimmed)
                .map_err(|e| format!("failed to parse as an image name: {e}"))?;
            if parsed.name() != trimmed {
                return Err(format!("neither tag nor digest is accepted in an image reference: {pattern}"));
            }
            list.names.insert(trimmed.to_string());
        }
        Ok(list)
    }

    /// Whether `name` (normalized, as the 1.36 kubelet compares it) is listed.
    fn matches(&self, name: &str) -> bool {
        self.names.contains(name) || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }
}

/// A pull secret that pulled an image, or that a pod presents: where it is and a hash of the
/// credential it gave for the image (upstream's `ImagePullSecret`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullSecret {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub credential_hash: String,
}

impl PullSecret {
    /// The pull secret at `source`, with a hash of the `credential` it gives for an image
    /// (upstream hashes the whole auth config; podwright's holds a user name and password).
    pub fn new(source: &SecretSource, credential: &Credential) -> Self {
        let auth = serde_json::json!({"username": credential.username, "password": credential.password});
        PullSecret {
            namespace: source.namespace.clone(),
            name: source.name.clone(),
            uid: source.uid.clone(),
            credential_hash: sha256_hex(auth.to_string().as_bytes()),
        }
    }

    fn same_secret(&self, other: &PullSecret) -> bool {
        (&self.namespace, &self.name, &self.uid) == (&other.namespace, &other.name, &other.uid)
    }
}

/// Who may use an image, as its pulls proved it (upstream's `ImagePullCredentials`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullCredentials {
    /// Pulled without credentials or with the node's own: every pod of the node may use it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_pods_accessible: bool,
    /// The pull secrets whose credentials pulled it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes_secrets: Vec<PullSecret>,
}

impl PullCredentials {
    /// What a successful pull proves: `secret` is the pull secret whose credential pulled it;
    /// none when it was pulled anonymously or with the node's credentials.
    pub fn of_pull(secret: Option<PullSecret>) -> Self {
        match secret {
            Some(secret) => PullCredentials { node_pods_accessible: false, kubernetes_secrets: vec![secret] },
            None => PullCredentials { node_pods_accessible: true, kubernetes_secrets: Vec::new() },
        }
    }
}

/// What the node knows of one image (by the runtime's reference to it): the credentials that
/// pulled it, per repository it was asked for (upstream's `ImagePulledRecord`). An entry
/// without credentials is a name the node began to pull without seeing how the pull ended (it
/// restarted meanwhile): every pod must prove access to it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledRecord {
    pub image_ref: String,
    #[serde(default)]
    pub credential_mapping: BTreeMap<String, PullCredentials>,
}

impl PulledRecord {
    /// `credentials` added for repository `name` (upstream's `pulledRecordMergeNewCreds`):
    /// node-wide access absorbs the rest, and a secret replaces its own older entry (a rotated
    /// credential). None when nothing changed, so nothing need be written.
    pub fn merged(&self, name: &str, credentials: &PullCredentials) -> Option<PulledRecord> {
        if !credentials.node_pods_accessible && credentials.kubernetes_secrets.is_empty() {
            return None;
        }
        let mut merged = self.clone();
        let Some(known) = merged.credential_mapping.get_mut(name) else {
            merged.credential_mapping.insert(name.to_string(), credentials.clone());
            return Some(merged);
        };
        if known.node_pods_accessible {
            return None;
        }
        if credentials.node_pods_accessible {
            *known = PullCredentials { node_pods_accessible: true, kubernetes_secrets: Vec::new() };
            return Some(merged);
        }
        let mut changed = false;
        for secret in &credentials.kubernetes_secrets {
            match known.kubernetes_secrets.iter_mut().find(|k| k.same_secret(secret)) {
                Some(k) if k.credential_hash == secret.credential_hash => {}
                Some(k) => {
                    k.credential_hash = secret.credential_hash.clone();
                    changed = true;
                }
                None => {
                    known.kubernetes_secrets.push(secret.clone());
                    changed = true;
                }
            }
        }
        known.kubernetes_secrets.sort();
        changed.then_some(merged)
    }
}

/// Past this many secrets recorded for an image, matches found while deciding are no longer
/// written (upstream's `writeRecordWhileMatchingLimit`: many namespaces coming and going must
/// not grow the record without end).
const REMEMBER_LIMIT: usize = 100;

/// The answer for one pod and one present image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The policy lets any pod use it.
    Exempt,
    /// It was pulled without credentials or with the node's: any pod may use it.
    NodeWide,
    /// One of the pod's pull secrets pulled it (the same credential, or the same secret since
    /// rotated); `remember`: that secret, to be added to the record so that it matches at once
    /// next time.
    PodCredentials { remember: Option<PullSecret> },
    /// The pod must pull it with its own credentials (with pull policy `Never`, it cannot
    /// have it).
    MustPull,
}

/// What the node knows of a present image, asked for by one pod.
#[derive(Debug, Clone, Copy, Default)]
pub struct Known<'a> {
    /// Its record, if this node pulled it under some name.
    pub record: Option<&'a PulledRecord>,
    /// A pull of it under the name asked for was begun and has not ended.
    pub intent: bool,
    /// It was asked for by its ID (or a prefix of it), which the runtime resolves whatever
    /// names the image has.
    pub by_id: bool,
}

impl Known<'_> {
    /// Whether this node pulled the image as `name`. Per name, unlike the kubelet, which counts
    /// a pull under any name: the runtime holds an image under a name only when it was pulled
    /// or loaded under it, so a name the node never pulled was loaded (preloaded), even when
    /// the same content was also pulled under another. Asked for by ID, any pull counts.
    fn pulled_by_node(&self, name: &str) -> bool {
        self.intent || self.record.is_some_and(|r| self.by_id || r.credential_mapping.contains_key(name))
    }
}

/// Whether a pod presenting `pod_secrets` (its pull secrets' credentials for the image) may use
/// the present image asked for as repository `name`, by what the node knows of it, under
/// `policy` (upstream's `MustAttemptImagePull`).
pub fn decide(policy: &VerificationPolicy, name: &str, known: Known<'_>, pod_secrets: &[PullSecret]) -> Verdict {
    if !policy.requires_verification(name, known.pulled_by_node(name)) {
        return Verdict::Exempt;
    }
    let record = known.record;
    let Some(known) = record.and_then(|r| r.credential_mapping.get(name)) else {
        return Verdict::MustPull;
    };
    if known.node_pods_accessible {
        return Verdict::NodeWide;
    }
    let below_limit = known.kubernetes_secrets.len() < REMEMBER_LIMIT;
    for secret in pod_secrets {
        for recorded in &known.kubernetes_secrets {
            let same_credential =
                !recorded.credential_hash.is_empty() && recorded.credential_hash == secret.credential_hash;
            let same_secret = recorded.same_secret(secret);
            if same_credential {
                let remember = (!same_secret && below_limit).then(|| secret.clone());
                return Verdict::PodCredentials { remember };
            }
            // The secret that pulled it, its credential changed since: still the pod's own, as
            // long as the record may grow.
            if same_secret && below_limit {
                return Verdict::PodCredentials { remember: Some(secret.clone()) };
            }
        }
    }
    Verdict::MustPull
}

/// The SHA-256 of `data`, in lower-case hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
