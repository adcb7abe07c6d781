//! Kubelet image credential provider exec plugins (upstream's `credentialprovider/plugin`):
//! for an image, every configured plugin whose `matchImages` match it is asked (or its cached
//! answer used), and the registries and credentials they answer make one keyring.
//!
//! A plugin that fails or answers badly gives nothing: the error is logged (without the
//! plugin's stdout) and the pull goes on with the other credentials, as upstream's does.

mod cache;
mod config;
mod exec;

pub use config::{PluginConfig, PluginConfigError};

use super::{DockerConfig, Keyring, urls_match};
use cache::ResponseCache;
use config::Provider;
use exec::Response;
use podwright_runtime::Clock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use tokio::sync::watch;

/// One run of a plugin that concurrent lookups of the same image share: its answer, once there.
type Flight = watch::Receiver<Option<Result<Response, String>>>;

/// The configured plugins with their caches, shared by every pull of a node.
pub struct CredentialPlugins {
    bin_dir: PathBuf,
    providers: Vec<PluginProvider>,
    clock: Clock,
}

struct PluginProvider {
    config: Provider,
    cache: Mutex<ResponseCache>,
    /// The runs under way, by image (upstream's singleflight group).
    flights: Mutex<HashMap<String, Flight>>,
}

impl CredentialPlugins {
    /// The plugins of `config`, whose answers expire by `clock`.
    pub fn new(config: PluginConfig, clock: Clock) -> Self {
        let providers = config
            .providers
            .into_iter()
            .map(|config| PluginProvider { config, cache: Mutex::default(), flights: Mutex::default() })
            .collect();
        CredentialPlugins { bin_dir: config.bin_dir, providers, clock }
    }

    /// What the plugins give for `image` (a repository, `host/path` without tag), all in one
    /// keyring, the providers in the config's order (upstream's
    /// `externalCredentialProviderKeyring`).
    pub async fn keyring(&self, image: &str) -> Keyring {
        let mut keyring = Keyring::default();
        for provider in &self.providers {
            keyring.add(provider.provide(&self.bin_dir, image, self.clock).await);
        }
        keyring
    }
}

impl PluginProvider {
    async fn provide(&self, bin_dir: &std::path::Path, image: &str, clock: Clock) -> DockerConfig {
        if !self.config.match_images.iter().any(|pattern| urls_match(pattern, image)) {
            return DockerConfig::default();
        }
        if let Some(cached) = lock(&self.cache).get(image, clock.now()) {
            return cached;
        }
        let mut flight =
            lock(&self.flights).entry(image.to_string()).or_insert_with(|| self.run(bin_dir, image)).clone();
        let answer = match flight.wait_for(Option::is_some).await {
            Ok(answer) => answer.clone().unwrap_or_else(|| Err("credential provider plugin gave no answer".into())),
            Err(_) => Err("credential provider plugin run ended without an answer".into()),
        };
        let provided = match answer {
            Err(e) => {
                tracing::warn!("Failed getting credential from external registry credential provider: {e}");
                DockerConfig::default()
            }
            Ok(response) => match response.cache_key_type() {
                Some(key_type) => {
                    let default = self.config.default_cache_duration;
                    lock(&self.cache).put(key_type, image, &response, default, clock.now());
                    response.auth
                }
                None => {
                    tracing::warn!(
                        "credential provider plugin did not return a valid cacheKeyType: {:?}",
                        response.cache_key_type
                    );
                    DockerConfig::default()
                }
            },
        };
        // Cached first, so that a lookup arriving now finds the answer rather than a new run.
        let mut flights = lock(&self.flights);
        if flights.get(image).is_some_and(|f| f.same_channel(&flight)) {
            flights.remove(image);
        }
        provided
    }

    /// Starts the plugin for `image`, detached as upstream runs plugins: a lookup given up (its
    /// pod deleted) leaves the run to the other lookups sharing it.
    fn run(&self, bin_dir: &std::path::Path, image: &str) -> Flight {
        let (answer, flight) = watch::channel(None);
        let (bin_dir, config, image) = (bin_dir.to_path_buf(), self.config.clone(), image.to_string());
        tokio::spawn(async move {
            let _ = answer.send(Some(exec::run(&bin_dir, &config, &image).await));
        });
        flight
    }
}

/// The lock's data, also after a panic elsewhere (nothing here is left half-changed).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
