//! The kubelet's `CredentialProviderConfig` file (`--image-credential-provider-config`) and its
//! plugins' directory (`--image-credential-provider-bin-dir`), read and validated as upstream's
//! `pkg/credentialprovider/plugin/config.go` does, with its messages. Fields podwright does not
//! honour (`tokenAttributes`) are refused by name.

use podwright_api::field_error::{FieldError, dedup_errors};
use podwright_api::go;
use serde::Deserialize;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CONFIG_KIND: &str = "CredentialProviderConfig";
const CONFIG_GROUP: &str = "kubelet.config.k8s.io";
const CONFIG_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];
/// The request/response versions a provider may speak, sorted as upstream lists them.
pub(super) const PLUGIN_API_VERSIONS: [&str; 3] = [
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
];

/// The validated plugins of a `CredentialProviderConfig`, and where their binaries are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    pub(super) bin_dir: PathBuf,
    pub(super) providers: Vec<Provider>,
}

/// One plugin, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Provider {
    /// The binary's name in the bin directory.
    pub name: String,
    /// The images it is asked about (registry globs, as a Docker config's keys).
    pub match_images: Vec<String>,
    /// How long its answers are kept when they say nothing.
    pub default_cache_duration: Duration,
    /// The `apiVersion` of its request and response.
    pub api_version: String,
    pub args: Vec<String>,
    /// Added to podwright's environment, overriding it.
    pub env: Vec<(String, String)>,
}

/// Why the configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginConfigError {
    #[error("plugin binary directory {0} did not exist")]
    NoBinDir(String),
    #[error("unable to read file {path:?}: {error}")]
    Unreadable { path: String, error: String },
    #[error("error decoding config {path:?}: {error}")]
    Decode { path: String, error: String },
    #[error("failed to validate credential provider config {path:?}: {errors}")]
    Invalid { path: String, errors: String },
    #[error("plugin binary executable {0} did not exist")]
    NoBinary(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    kind: Option<String>,
    api_version: Option<String>,
    #[serde(default)]
    providers: Vec<RawProvider>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProvider {
    #[serde(default)]
    name: String,
    #[serde(default)]
    match_images: Vec<String>,
    default_cache_duration: Option<String>,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<RawEnv>,
    /// Only whether it is set counts: podwright refuses it (it gives plugins no tokens).
    token_attributes: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    name: String,
    value: String,
}

impl PluginConfig {
    /// Reads and validates `config` (YAML or JSON) and checks that every plugin's binary is in
    /// `bin_dir`, as the kubelet does at start.
    pub fn load(config: &Path, bin_dir: &Path) -> Result<PluginConfig, PluginConfigError> {
        if !bin_dir.is_dir() {
            return Err(PluginConfigError::NoBinDir(bin_dir.display().to_string()));
        }
        let path = config.display().to_string();
        let text = std::fs::read_to_string(config)
            .map_err(|e| PluginConfigError::Unreadable { path: path.clone(), error: e.to_string() })?;
        let providers = parse(&text).map_err(|error| match error {
            ParseError::Decode(error) => PluginConfigError::Decode { path: path.clone(), error },
            ParseError::Invalid(errors) => PluginConfigError::Invalid { path: path.clone(), errors },
        })?;
        for provider in &providers {
            let binary = bin_dir.join(&provider.name);
            let executable = binary.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            if !executable {
                return Err(PluginConfigError::NoBinary(binary.display().to_string()));
            }
        }
        Ok(PluginConfig { bin_dir: bin_dir.to_path_buf(), providers })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ParseError {
    Decode(String),
    /// Every field error, as Go's aggregate error prints them.
    Invalid(String),
}

fn parse(text: &str) -> Result<Vec<Provider>, ParseError> {
    let raw: RawConfig = podwright_api::yaml::from_str(text).map_err(|e| ParseError::Decode(e.to_string()))?;
    let Some(api_version) = raw.api_version.filter(|v| !v.is_empty()) else {
        return Err(ParseError::Decode("Object 'apiVersion' is missing".into()));
    };
    let Some(kind) = raw.kind.filter(|k| !k.is_empty()) else {
        return Err(ParseError::Decode("Object 'Kind' is missing".into()));
    };
    let known_version =
        api_version.split_once('/').is_some_and(|(g, v)| g == CONFIG_GROUP && CONFIG_VERSIONS.contains(&v));
    if !known_version || kind != CONFIG_KIND {
        return Err(ParseError::Decode(format!("no kind {kind:?} is registered for version {api_version:?}")));
    }
    let mut errors = validate(&raw.providers);
    if !errors.is_empty() {
        errors = dedup_errors(errors);
        let messages = errors.iter().map(ToString::to_string).collect();
        return Err(ParseError::Invalid(go::aggregate(messages)));
    }
    Ok(raw
        .providers
        .into_iter()
        .map(|p| Provider {
            default_cache_duration: p
                .default_cache_duration
                .as_deref()
                .and_then(|d| go::parse_duration(d).ok())
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or_default(),
            name: p.name,
            match_images: p.match_images,
            api_version: p.api_version,
            args: p.args,
            env: p.env.into_iter().map(|e| (e.name, e.value)).collect(),
        })
        .collect())
}

/// Upstream's `validateCredentialProviderConfig`, with `tokenAttributes` refused.
fn validate(providers: &[RawProvider]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if providers.is_empty() {
        errors.push(FieldError::required("providers", "at least 1 item in plugins is required"));
    }
    let mut seen = std::collections::HashSet::new();
    for p in providers {
        let name = p.name.as_str();
        let problems = [
            (name.contains('/'), "provider name cannot contain '/'"),
            (name.contains(' '), "provider name cannot contain spaces"),
            (name == ".", "provider name cannot be '.'"),
            (name == "..", "provider name cannot be '..'"),
        ];
        for (_, detail) in problems.into_iter().filter(|(bad, _)| *bad) {
            errors.push(FieldError::invalid("providers.name", name, detail));
        }
        if !seen.insert(name) {
            errors.push(FieldError::duplicate("providers.name", name));
        }
        if p.api_version.is_empty() {
            errors.push(FieldError::required("providers.apiVersion", ""));
        } else if !PLUGIN_API_VERSIONS.contains(&p.api_version.as_str()) {
            errors.push(FieldError::not_supported("providers.apiVersion", &p.api_version, &PLUGIN_API_VERSIONS));
        }
        if p.match_images.is_empty() {
            errors.push(FieldError::required("providers.matchImages", "at least 1 item in matchImages is required"));
        }
        for image in &p.match_images {
            if let Err(e) = check_schemeless_url(image) {
                errors.push(FieldError::invalid(
                    "providers.matchImages",
                    image,
                    format!("match image is invalid: {e}"),
                ));
            }
        }
        match p.default_cache_duration.as_deref().map(go::parse_duration) {
            None => errors.push(FieldError::required("providers.defaultCacheDuration", "")),
            Some(Err(e)) => errors.push(FieldError::invalid(
                "providers.defaultCacheDuration",
                p.default_cache_duration.as_deref().unwrap_or_default(),
                e,
            )),
            Some(Ok(d)) if d.is_negative() => errors.push(FieldError::invalid(
                "providers.defaultCacheDuration",
                p.default_cache_duration.as_deref().unwrap_or_default(),
                "defaultCacheDuration must be greater than or equal to 0",
            )),
            Some(Ok(_)) => {}
        }
        if p.token_attributes.is_some() {
            errors.push(FieldError::forbidden(
                "providers.tokenAttributes",
                "podwright does not give credential provider plugins service account tokens",
            ));
        }
    }
    errors
}

/// Whether Go's `url.Parse("https://" + s)` accepts `s` (upstream's `ParseSchemelessURL`): no
/// control characters, a host of URL host characters, and a numeric port if any. Err: Go's words.
fn check_schemeless_url(s: &str) -> Result<(), String> {
    let url = format!("https://{s}");
    let fail = |why: String| Err(format!("parse {url:?}: {why}"));
    if s.chars().any(|c| c.is_ascii_control()) {
        return fail("net/url: invalid control character in URL".into());
    }
    let s = s.split_once(['#', '?']).map_or(s, |(before, _)| before);
    let authority = s.split_once('/').map_or(s, |(authority, _)| authority);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (name, port) = match host.rfind(':') {
        Some(i) if !host.starts_with('[') || host[..i].ends_with(']') => (&host[..i], Some(&host[i..])),
        _ => (host, None),
    };
    if let Some(port) = port
        && !port[1..].chars().all(|c| c.is_ascii_digit())
    {
        return fail(format!("invalid port {port:?} after host"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:[]%".contains(c) || !c.is_ascii();
    if let Some(bad) = name.chars().find(|&c| !allowed(c)) {
        return fail(format!("invalid character {:?} in host name", bad.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
