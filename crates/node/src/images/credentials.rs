//! Registry credentials for image pulls, as the kubelet's `pkg/credentialprovider` keeps them:
//! Docker `config.json` / legacy `.dockercfg` files on the node, the pod's `imagePullSecrets` and
//! the answers of credential provider exec plugins ([`CredentialPlugins`]), matched against the image's repository by Kubernetes' rules (glob `*` per host label, port,
//! path prefix, scheme ignored). Every matching credential is returned, most specific first, so
//! the puller can try each in turn.
//!
//! Credentials never reach a `Debug` or `Display` output, and parse errors never quote the input.

mod glob;
mod paths;
mod plugins;

pub use paths::DockerConfigPaths;
pub use plugins::{CredentialPlugins, PluginConfig, PluginConfigError};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// Where Docker Hub's credentials are filed (`https://index.docker.io/v1/` in a config file).
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";
const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
const DOCKERCFG_KEY: &str = ".dockercfg";

/// One user name and password for a registry.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Credential {
    pub username: String,
    pub password: String,
    /// The pull secret it came from; none for the node's own (its files, its plugins).
    pub source: Option<SecretSource>,
}

/// Where a pull secret is (upstream's `SecretCoordinates`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecretSource {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// Why a Docker config could not be read. The messages never include the file's text, which
/// may hold credentials.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("invalid docker config: {0}")]
    Json(String),
    #[error("invalid docker config: the auth field is not valid base64")]
    AuthEncoding,
    #[error("invalid docker config: the auth field is not username:password")]
    AuthFormat,
}

impl From<serde_json::Error> for CredentialsError {
    fn from(e: serde_json::Error) -> Self {
        // serde's messages may quote the offending value: only its kind and place are kept.
        let kind = match e.classify() {
            serde_json::error::Category::Data => "a value of the wrong type",
            serde_json::error::Category::Syntax => "malformed JSON",
            serde_json::error::Category::Eof => "unexpected end of JSON",
            serde_json::error::Category::Io => "unreadable",
        };
        CredentialsError::Json(format!("{kind} at line {} column {}", e.line(), e.column()))
    }
}

/// One registry entry of a Docker config, as written: `auth` (base64 `user:password`) wins
/// over `username`/`password`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Entry {
    username: String,
    password: String,
    auth: String,
}

impl Entry {
    fn credential(self) -> Result<Credential, CredentialsError> {
        if self.auth.is_empty() {
            return Ok(Credential { username: self.username, password: self.password, source: None });
        }
        // As Go: padded input is decoded as padded base64, anything else as unpadded.
        let decoded = if self.auth.trim().ends_with('=') {
            base64::engine::general_purpose::STANDARD.decode(&self.auth)
        } else {
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(&self.auth)
        }
        .map_err(|_| CredentialsError::AuthEncoding)?;
        let decoded = String::from_utf8(decoded).map_err(|_| CredentialsError::AuthFormat)?;
        let (username, password) = decoded.split_once(':').ok_or(CredentialsError::AuthFormat)?;
        Ok(Credential { username: username.to_string(), password: password.to_string(), source: None })
    }
}

/// A Docker config's registries (the legacy `.dockercfg` format, and `config.json`'s `auths`):
/// registry pattern → credential.
pub type DockerConfig = Vec<(String, Credential)>;

fn entries(map: BTreeMap<String, Entry>) -> Result<DockerConfig, CredentialsError> {
    map.into_iter().map(|(registry, entry)| Ok((registry, entry.credential()?))).collect()
}

/// Parses a `config.json` (`{"auths": {...}}`, as in a `kubernetes.io/dockerconfigjson` Secret).
pub fn parse_config_json(bytes: &[u8]) -> Result<DockerConfig, CredentialsError> {
    #[derive(Deserialize)]
    struct ConfigJson {
        #[serde(default)]
        auths: Option<BTreeMap<String, Entry>>,
    }
    let config: ConfigJson = serde_json::from_slice(bytes)?;
    entries(config.auths.unwrap_or_default())
}

/// Parses a legacy `.dockercfg` (the registries at the top level, as in a
/// `kubernetes.io/dockercfg` Secret).
pub fn parse_dockercfg(bytes: &[u8]) -> Result<DockerConfig, CredentialsError> {
    entries(serde_json::from_slice(bytes)?)
}

/// A registry pattern or an image repository without its scheme, split as Go's `url.Parse`
/// splits `https://` + it.
struct Schemeless<'a> {
    host: &'a str,
    path: &'a str,
}

impl<'a> Schemeless<'a> {
    fn parse(s: &'a str) -> Self {
        let s = s.split_once('#').map_or(s, |(before, _)| before);
        let s = s.split_once('?').map_or(s, |(before, _)| before);
        let (authority, path) = s.find('/').map_or((s, ""), |i| s.split_at(i));
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        Schemeless { host, path }
    }

    /// The host's dot-separated labels and the port (empty when none), as Go's
    /// `net.SplitHostPort` finds them.
    fn labels_and_port(&self) -> (Vec<&'a str>, &'a str) {
        let (host, port) = split_host_port(self.host).unwrap_or((self.host, ""));
        (host.split('.').collect(), port)
    }
}

fn split_host_port(hostport: &str) -> Option<(&str, &str)> {
    if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return Some((host, after.strip_prefix(':')?));
    }
    let (host, port) = hostport.rsplit_once(':')?;
    (!host.contains(':')).then_some((host, port))
}

/// Whether `glob` (a keyring key) matches `target` (an image repository), both without
/// scheme: the ports equal, as many host labels, each matched by its glob label, and the
/// target's path starts with the glob's (upstream's `URLsMatchStr`).
pub fn urls_match(glob: &str, target: &str) -> bool {
    let (glob, target) = (Schemeless::parse(glob), Schemeless::parse(target));
    let (glob_labels, glob_port) = glob.labels_and_port();
    let (target_labels, target_port) = target.labels_and_port();
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target.path.starts_with(glob.path)
        && glob_labels.iter().zip(&target_labels).all(|(g, t)| glob::matches(g, t))
}

/// Credentials by registry pattern: a pod's secrets or the node's config file (upstream's
/// `BasicDockerKeyring`).
#[derive(Debug, Default, Clone)]
pub struct Keyring {
    creds: BTreeMap<String, Vec<Credential>>,
}

impl Keyring {
    /// Files each registry of `config` under its key: without scheme, and without a `/v1/` or
    /// `/v2/` API prefix, as the Docker client reads them.
    pub fn add(&mut self, config: DockerConfig) {
        for (registry, credential) in config {
            let schemeless =
                registry.strip_prefix("https://").or_else(|| registry.strip_prefix("http://")).unwrap_or(&registry);
            let url = Schemeless::parse(schemeless);
            let path = url.path.strip_prefix("/v1").or_else(|| url.path.strip_prefix("/v2"));
            let path = match path {
                Some(rest) if rest.starts_with('/') => rest,
                _ => url.path,
            };
            let key = if path.is_empty() || path == "/" { url.host.to_string() } else { format!("{}{path}", url.host) };
            self.creds.entry(key).or_default().push(credential);
        }
    }

    /// Every credential whose pattern matches `repository` (`domain/path`, no tag), the most
    /// specific pattern first (keys in reverse order, so `quay.io/coreos` before `quay.io`);
    /// Docker Hub's own entry for a Docker Hub image when no pattern matched.
    pub fn lookup(&self, repository: &str) -> Vec<Credential> {
        let found: Vec<Credential> = self
            .creds
            .iter()
            .rev()
            .filter(|(key, _)| urls_match(key, repository))
            .flat_map(|(_, creds)| creds.iter().cloned())
            .collect();
        if found.is_empty() && is_default_registry(repository) {
            return self.creds.get(DEFAULT_REGISTRY_HOST).cloned().unwrap_or_default();
        }
        found
    }
}

/// Whether `repository` lives on Docker Hub (upstream's `isDefaultRegistryMatch`).
fn is_default_registry(repository: &str) -> bool {
    match repository.split_once('/') {
        _ if repository.is_empty() || repository.starts_with('/') => false,
        None => true,
        Some(("docker.io" | "index.docker.io", _)) => true,
        Some((first, _)) => !first.contains(['.', ':']),
    }
}

/// The keyring of a pod's pull secrets: those of type `kubernetes.io/dockerconfigjson` (with a
/// non-empty `.dockerconfigjson`) or `kubernetes.io/dockercfg` (`.dockercfg`), all in one
/// keyring, each credential knowing its secret; other secrets are ignored (upstream's
/// `MakeDockerKeyring`).
pub fn secrets_keyring(secrets: &[Secret]) -> Result<Keyring, CredentialsError> {
    let mut keyring = Keyring::default();
    for secret in secrets {
        let data = |key: &str| secret.data.as_ref().and_then(|d| d.get(key)).filter(|v| !v.0.is_empty());
        let config = match (secret.type_.as_deref(), data(DOCKER_CONFIG_JSON_KEY), data(DOCKERCFG_KEY)) {
            (Some(DOCKER_CONFIG_JSON_TYPE), Some(json), _) => parse_config_json(&json.0)?,
            (Some(DOCKERCFG_TYPE), _, Some(cfg)) => parse_dockercfg(&cfg.0)?,
            _ => continue,
        };
        let meta = &secret.metadata;
        let source = SecretSource {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        };
        keyring.add(
            config
                .into_iter()
                .map(|(registry, c)| (registry, Credential { source: Some(source.clone()), ..c }))
                .collect(),
        );
    }
    Ok(keyring)
}

/// The credentials to try for `repository`, in order: the pod's secrets', the node's files',
/// then the plugins' (upstream's `UnionDockerKeyring{secrets, UnionDockerKeyring{node,
/// plugins}}`).
pub fn lookup_all(pod: &Keyring, node: &Keyring, plugins: &Keyring, repository: &str) -> Vec<Credential> {
    let mut found = pod.lookup(repository);
    found.extend(node.lookup(repository));
    found.extend(plugins.lookup(repository));
    found
}

#[cfg(test)]
mod tests;
