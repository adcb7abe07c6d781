//! Kubelet image credential provider exec plugins for real (`--image-credential-provider-config`
//! and `--image-credential-provider-bin-dir`): a shell plugin that logs each call and answers
//! with the test registry's credentials lets pods pull its private image without any
//! `imagePullSecrets`; a plugin whose `matchImages` do not match is never run; the answer's
//! `cacheDuration` spares a second run; a wrong password fails the pull without being printed;
//! an invalid config stops `run` and `serve` at once.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::Registry;
use podwright_e2e::*;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const BUSYBOX_ARCHIVE: &str = "busybox-1.36.tar";
const PULLER: &str = "plugin-puller";
const PASSWORD: &str = "pl4gin-s3cret";
const WRONG_PASSWORD: &str = "n0t-the-pl4gin-pw";

/// The plugin: logs its request, then answers `$ANSWER_PASSWORD` for `$ANSWER_REGISTRY`,
/// cached by registry for `$ANSWER_CACHE`.
const PLUGIN: &str = r#"#!/bin/sh
request=$(cat)
echo "$* $request" >> "$PLUGIN_LOG"
printf '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"%s","auth":{"%s":{"username":"%s","password":"%s"}}}\n' \
  "$ANSWER_CACHE" "$ANSWER_REGISTRY" "$ANSWER_USER" "$ANSWER_PASSWORD"
"#;

/// A bin directory with the plugin under two names, and a config, removed on drop.
struct Plugins {
    dir: PathBuf,
}

impl Plugins {
    /// `registry-auth` matches `registry`'s host and answers `password`, cached for `cache`;
    /// `unrelated` matches only `*.example.com`.
    fn new(test: &str, registry: &Registry, password: &str, cache: &str) -> Plugins {
        let dir = std::env::temp_dir().join(format!("podwright-plugins-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).expect("the plugins' directory");
        for name in ["registry-auth", "unrelated"] {
            let path = dir.join("bin").join(name);
            std::fs::write(&path, PLUGIN).expect("the plugin");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("an executable plugin");
        }
        let plugins = Plugins { dir };
        let config = format!(
            r#"apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: registry-auth
  matchImages: ["{host}"]
  defaultCacheDuration: 0s
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials]
  env:
  - {{name: PLUGIN_LOG, value: "{log}"}}
  - {{name: ANSWER_REGISTRY, value: "{host}"}}
  - {{name: ANSWER_USER, value: {PULLER}}}
  - {{name: ANSWER_PASSWORD, value: {password}}}
  - {{name: ANSWER_CACHE, value: {cache}}}
- name: unrelated
  matchImages: ["*.example.com"]
  defaultCacheDuration: 1h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  env:
  - {{name: PLUGIN_LOG, value: "{unrelated_log}"}}
"#,
            host = registry.host,
            log = plugins.log("registry-auth").display(),
            unrelated_log = plugins.log("unrelated").display(),
        );
        std::fs::write(plugins.config(), config).expect("the plugins' config");
        plugins
    }

    fn config(&self) -> PathBuf {
        self.dir.join("config.yaml")
    }

    fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Each run of plugin `name`: its arguments and request.
    fn calls(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.log(name)).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// The two flags, for `run` or `serve`.
    fn flags(&self) -> Vec<String> {
        flags(&self.config(), &self.bin_dir())
    }
}

impl Drop for Plugins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn flags(config: &Path, bin_dir: &Path) -> Vec<String> {
    vec![
        "--image-credential-provider-config".into(),
        config.display().to_string(),
        "--image-credential-provider-bin-dir".into(),
        bin_dir.display().to_string(),
    ]
}

/// One pod per name, each pulling `image` with `imagePullPolicy: Always`, printing `hi`.
fn pods(names: &[&str], image: &str) -> String {
    let pod = |name: &&str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: Always\n    command: [sh, -c, echo hi]\n"
        )
    };
    names.iter().map(pod).collect::<Vec<_>>().join("---\n")
}

/// Asserts that nothing podwright printed (events, statuses, logs) holds a password.
fn assert_no_passwords(o: &Outcome) {
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(!o.stdout.contains(secret) && !o.stderr.contains(secret), "{secret} was printed:\n{}", o.context());
    }
}

/// Two pods pull the private image through the plugin alone; `cache` says whether the second
/// pull reuses the first answer.
fn pull_twice_with(test: &str, cache: &str) -> usize {
    let registry = Registry::start_with_auth(PULLER, PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/busybox:1.36");
    let plugins = Plugins::new(test, &registry, PASSWORD, cache);
    let name = pod_name(test);
    let flags = plugins.flags();
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    // One pod's pulls are one after the other, so the second lookup comes after the first answer.
    let manifest = pods(&[&name], &image).replace(
        "  containers:\n",
        &format!("  initContainers:\n  - name: i\n    image: {image}\n    imagePullPolicy: Always\n    command: [sh, -c, echo init]\n  containers:\n"),
    );
    let o = run_manifest(&manifest, &extra);
    o.assert_code(0);
    assert_eq!(phase(&o.pod(&name)), "Succeeded", "{}", o.context());
    for container in ["spec.initContainers{i}", "spec.containers{c}"] {
        assert_eq!(o.events_with_reason(&name, container, "Pulled").len(), 1, "{}", o.context());
    }
    assert_no_passwords(&o);
    let calls = plugins.calls("registry-auth");
    let request = format!(
        r#"get-credentials {{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"{}/private/busybox","kind":"CredentialProviderRequest"}}"#,
        registry.host
    );
    assert!(calls.iter().all(|c| *c == request), "{calls:?}");
    assert!(plugins.calls("unrelated").is_empty(), "the plugin whose matchImages do not match was run");
    calls.len()
}

#[test]
fn a_private_image_is_pulled_with_the_plugins_credentials_kept_for_its_cache_duration() {
    assert_eq!(pull_twice_with("plugin-cached", "5m"), 1, "the second pull did not reuse the answer");
}

#[test]
fn a_zero_cache_duration_runs_the_plugin_for_every_pull() {
    assert_eq!(pull_twice_with("plugin-uncached", "0s"), 2);
}

#[test]
fn a_wrong_password_from_the_plugin_fails_the_pull_without_printing_it() {
    let registry = Registry::start_with_auth(PULLER, PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/busybox:1.36");
    let plugins = Plugins::new("plugin-wrong", &registry, WRONG_PASSWORD, "0s");
    let name = pod_name("plugin-wrong");
    let flags = plugins.flags();
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    let o = interrupt_when(&pods(&[&name], &image), &extra, "ErrImagePull", Duration::from_secs(20));
    let failure = o
        .events_with_reason(&name, "spec.containers{c}", "Failed")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .find(|m| m.starts_with(&format!("Failed to pull image \"{image}\": ")))
        .unwrap_or_else(|| panic!("no pull failure\n{}", o.context()))
        .to_string();
    assert!(failure.contains("401 Unauthorized"), "{failure}");
    assert!(!plugins.calls("registry-auth").is_empty(), "the plugin was not asked");
    assert_no_passwords(&o);
}

#[test]
fn an_invalid_config_stops_run_and_serve_naming_the_file_and_field() {
    let registry = Registry::start();
    let plugins = Plugins::new("plugin-invalid", &registry, PASSWORD, "0s");
    let text = std::fs::read_to_string(plugins.config()).expect("the config");
    std::fs::write(plugins.config(), text.replace("defaultCacheDuration: 1h", "defaultCacheDuration: soon"))
        .expect("the config");
    let expected = format!(
        r#"podwright: failed to validate credential provider config "{}": providers.defaultCacheDuration: Invalid value: "soon": time: invalid duration "soon""#,
        plugins.config().display()
    );
    let flags = plugins.flags();
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    let o = run_manifest(&pods(&[&pod_name("plugin-invalid")], "localhost/busybox:1.36"), &extra);
    o.assert_code(2);
    assert!(o.stderr.contains(&expected), "{}", o.context());

    let root = std::env::temp_dir().join(format!("podwright-plugin-serve-{}", std::process::id()));
    let mut args = vec!["serve", "--root-dir", root.to_str().expect("UTF-8"), "--port", "0"];
    args.extend(&extra);
    let o = podwright(&args);
    o.assert_code(2);
    assert!(o.stderr.contains(&expected), "{}", o.context());

    // Each flag needs the other.
    let o = podwright(&["run", "-f", "-", "--image-credential-provider-config", extra[1]]);
    o.assert_code(2);
    assert!(o.stderr.contains("--image-credential-provider-bin-dir"), "{}", o.context());
}
