//! Plugins' answers kept for as long as they say (upstream's plugin cache): under the image,
//! its registry or for every image, as the answer's `cacheKeyType` asks; for its
//! `cacheDuration`, else the provider's `defaultCacheDuration`; not at all when that is zero.

use super::exec::{CacheKeyType, Response};
use crate::images::credentials::DockerConfig;
use jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Image(String),
    Registry(String),
    Global,
}

/// One provider's cached answers.
#[derive(Debug, Default)]
pub(super) struct ResponseCache {
    entries: HashMap<Key, (Timestamp, DockerConfig)>,
}

/// The registry of `image` as upstream takes it: all before the first `/`, port included.
fn registry(image: &str) -> &str {
    image.split('/').next().unwrap_or_default()
}

impl ResponseCache {
    /// The answer kept for `image` at `now`: the image's own, else its registry's, else the
    /// global one. Drops what has expired.
    pub fn get(&mut self, image: &str, now: Timestamp) -> Option<DockerConfig> {
        self.entries.retain(|_, (expires, _)| now <= *expires);
        [Key::Image(image.to_string()), Key::Registry(registry(image).to_string()), Key::Global]
            .iter()
            .find_map(|key| self.entries.get(key))
            .map(|(_, config)| config.clone())
    }

    /// Keeps `response`, given for `image` at `now`, for its duration or `default`.
    pub fn put(&mut self, key_type: CacheKeyType, image: &str, response: &Response, default: Duration, now: Timestamp) {
        let lifetime = response.cache_duration.unwrap_or(default);
        if lifetime.is_zero() {
            return;
        }
        let key = match key_type {
            CacheKeyType::Image => Key::Image(image.to_string()),
            CacheKeyType::Registry => Key::Registry(registry(image).to_string()),
            CacheKeyType::Global => Key::Global,
        };
        let expires = now.checked_add(lifetime).unwrap_or(Timestamp::MAX);
        self.entries.insert(key, (expires, response.auth.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::credentials::Credential;

    const IMAGE: &str = "registry.example:5000/team/app";

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn response(password: &str, duration: Option<u64>) -> Response {
        let credential = Credential { username: "u".into(), password: password.into(), source: None };
        Response {
            cache_key_type: "Image".into(),
            cache_duration: duration.map(Duration::from_secs),
            auth: vec![("registry.example:5000".into(), credential)],
        }
    }

    fn password(found: Option<DockerConfig>) -> Option<String> {
        found.map(|config| config[0].1.password.clone())
    }

    #[test]
    fn an_answer_is_kept_for_its_duration_then_dropped() {
        let mut cache = ResponseCache::default();
        cache.put(CacheKeyType::Image, IMAGE, &response("p", Some(60)), Duration::from_secs(3600), at(0));
        assert_eq!(password(cache.get(IMAGE, at(60))), Some("p".into()));
        assert_eq!(password(cache.get(IMAGE, at(61))), None);
    }

    #[test]
    fn without_a_duration_the_providers_default_applies_and_zero_keeps_nothing() {
        let mut cache = ResponseCache::default();
        cache.put(CacheKeyType::Image, IMAGE, &response("p", None), Duration::from_secs(10), at(0));
        assert_eq!(password(cache.get(IMAGE, at(10))), Some("p".into()));
        assert_eq!(password(cache.get(IMAGE, at(11))), None);

        cache.put(CacheKeyType::Image, IMAGE, &response("p", None), Duration::ZERO, at(20));
        assert_eq!(password(cache.get(IMAGE, at(20))), None);
        // An explicit zero wins over a default.
        cache.put(CacheKeyType::Image, IMAGE, &response("p", Some(0)), Duration::from_secs(10), at(20));
        assert_eq!(password(cache.get(IMAGE, at(20))), None);
    }

    #[test]
    fn the_key_type_says_which_images_share_an_answer() {
        let other_repo = "registry.example:5000/team/other";
        let other_registry = "elsewhere.example/team/app";
        let hour = Duration::from_secs(3600);

        let mut cache = ResponseCache::default();
        cache.put(CacheKeyType::Image, IMAGE, &response("image", None), hour, at(0));
        assert!(cache.get(IMAGE, at(1)).is_some());
        assert!(cache.get(other_repo, at(1)).is_none());

        let mut cache = ResponseCache::default();
        cache.put(CacheKeyType::Registry, IMAGE, &response("registry", None), hour, at(0));
        assert!(cache.get(other_repo, at(1)).is_some());
        assert!(cache.get(other_registry, at(1)).is_none());

        let mut cache = ResponseCache::default();
        cache.put(CacheKeyType::Global, IMAGE, &response("global", None), hour, at(0));
        assert!(cache.get(other_registry, at(1)).is_some());

        // The image's own answer before its registry's, before the global one.
        cache.put(CacheKeyType::Registry, IMAGE, &response("registry", None), hour, at(0));
        assert_eq!(password(cache.get(IMAGE, at(1))), Some("registry".into()));
        cache.put(CacheKeyType::Image, IMAGE, &response("image", None), hour, at(0));
        assert_eq!(password(cache.get(IMAGE, at(1))), Some("image".into()));
    }
}
