//! One run of a plugin (upstream's `execPlugin`): `BIN_DIR/NAME ARGS...` with podwright's
//! environment plus the provider's, the `CredentialProviderRequest` on stdin and the
//! `CredentialProviderResponse` read from stdout, within a minute.
//!
//! Errors carry the plugin's stderr (its diagnostics, as upstream's do) but never its stdout,
//! which holds the credentials.

use super::config::Provider;
use crate::images::credentials::{Credential, DockerConfig};
use podwright_api::go;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;

/// Upstream's catch-all limit for one plugin run.
const PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);
const RESPONSE_KIND: &str = "CredentialProviderResponse";

/// What the answer may be cached under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum CacheKeyType {
    Image,
    Registry,
    Global,
}

/// A plugin's answer, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Response {
    /// As given; an unknown one is refused when it is used, as upstream does.
    pub cache_key_type: String,
    /// None: the provider's default.
    pub cache_duration: Option<Duration>,
    pub auth: DockerConfig,
}

impl Response {
    pub fn cache_key_type(&self) -> Option<CacheKeyType> {
        match self.cache_key_type.as_str() {
            "Image" => Some(CacheKeyType::Image),
            "Registry" => Some(CacheKeyType::Registry),
            "Global" => Some(CacheKeyType::Global),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawResponse {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    cache_key_type: String,
    cache_duration: Option<String>,
    #[serde(default)]
    auth: BTreeMap<String, RawAuth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// Only the response's `apiVersion`, read first as upstream does.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
}

/// The request for `image` in the provider's `apiVersion`.
pub(super) fn request(api_version: &str, image: &str) -> Vec<u8> {
    let request = serde_json::json!({"kind": "CredentialProviderRequest", "apiVersion": api_version, "image": image});
    let mut bytes = request.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

/// Decodes a plugin's stdout, which must speak `api_version`. The errors never quote it.
pub(super) fn parse_response(api_version: &str, stdout: &[u8]) -> Result<Response, String> {
    let meta: TypeMeta = serde_json::from_slice(stdout).map_err(|e| {
        let at = format!("line {} column {}", e.line(), e.column());
        format!("error reading GVK from response: malformed JSON at {at}")
    })?;
    if meta.api_version != api_version {
        return Err(format!(
            "apiVersion from credential plugin response did not match expected apiVersion:{api_version}, actual apiVersion:{}",
            meta.api_version
        ));
    }
    // Not wrapped: serde's message may quote the response, credentials and all.
    let undecodable = || "error decoding credential provider plugin response from stdout".to_string();
    let raw: RawResponse = serde_json::from_slice(stdout).map_err(|_| undecodable())?;
    if raw.kind != RESPONSE_KIND || raw.api_version != api_version {
        return Err(undecodable());
    }
    let cache_duration = match raw.cache_duration.as_deref().map(go::parse_duration) {
        None => None,
        Some(Ok(d)) => Some(Duration::try_from(d).unwrap_or_default()),
        Some(Err(_)) => return Err(undecodable()),
    };
    let auth = raw
        .auth
        .into_iter()
        .map(|(pattern, a)| (pattern, Credential { username: a.username, password: a.password, source: None }))
        .collect();
    Ok(Response { cache_key_type: raw.cache_key_type, cache_duration, auth })
}

/// Runs `provider` for `image` and decodes its answer.
pub(super) async fn run(bin_dir: &Path, provider: &Provider, image: &str) -> Result<Response, String> {
    tracing::debug!(plugin = %provider.name, image, "getting image credentials from external exec plugin");
    let failed = |why: &str, stderr: &[u8]| {
        format!(
            "error execing credential provider plugin {} for image {image}: {why}: {}",
            provider.name,
            String::from_utf8_lossy(stderr).trim_end()
        )
    };
    let mut child = tokio::process::Command::new(bin_dir.join(&provider.name))
        .args(&provider.args)
        .envs(provider.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(&e.to_string(), b""))?;
    let request = request(&provider.api_version, image);
    let mut stdin = child.stdin.take();
    let finished = tokio::time::timeout(PLUGIN_TIMEOUT, async move {
        if let Some(stdin) = stdin.as_mut() {
            // A plugin that does not read its request may close stdin early: its answer counts.
            let _ = stdin.write_all(&request).await;
        }
        drop(stdin);
        child.wait_with_output().await
    })
    .await;
    let output = match finished {
        Err(_) => return Err(failed("context deadline exceeded", b"")),
        Ok(Err(e)) => return Err(failed(&e.to_string(), b"")),
        Ok(Ok(output)) => output,
    };
    if !output.status.success() {
        let status = match output.status.code() {
            Some(code) => format!("exit status {code}"),
            None => output.status.to_string(),
        };
        return Err(failed(&status, &output.stderr));
    }
    parse_response(&provider.api_version, &output.stdout)
}
