//! The plugins run for real: shell scripts that log each call and answer as told.

use super::config::Provider;
use super::exec::{self, parse_response};
use super::*;
use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

const V1: &str = "credentialprovider.kubelet.k8s.io/v1";
const IMAGE: &str = "127.0.0.1:5000/private/app";

/// A bin directory of its own, removed on drop.
struct BinDir(PathBuf);

impl BinDir {
    fn new(test: &str) -> BinDir {
        let dir = std::env::temp_dir().join(format!("pw-plugins-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        BinDir(dir)
    }

    /// A plugin `name` that appends its arguments, `$REGION` and its request to `name.log`,
    /// then prints `answer` when it is JSON, or runs it as shell commands.
    fn plugin(&self, name: &str, answer: &str) {
        let log = self.log_path(name);
        let answer = if answer.starts_with('{') { format!("cat <<'EOF'\n{answer}\nEOF") } else { answer.to_string() };
        let script = format!(
            "#!/bin/sh\nrequest=$(cat)\necho \"args=$* region=$REGION request=$request\" >> {}\n{answer}\n",
            log.display()
        );
        let path = self.0.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.log"))
    }

    /// Each call's line.
    fn calls(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default().lines().map(str::to_string).collect()
    }

    fn plugins(&self, providers: Vec<Provider>) -> CredentialPlugins {
        CredentialPlugins::new(PluginConfig { bin_dir: self.0.clone(), providers }, Clock::new())
    }
}

impl Drop for BinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn provider(name: &str, match_images: &[&str], default_cache: Duration) -> Provider {
    Provider {
        name: name.into(),
        match_images: match_images.iter().map(|m| m.to_string()).collect(),
        default_cache_duration: default_cache,
        api_version: V1.into(),
        args: vec!["get-credentials".into()],
        env: vec![("REGION".into(), "eu-west-1".into())],
    }
}

/// A v1 response giving `password` for `pattern`.
fn answer(key_type: &str, duration: Option<&str>, pattern: &str, password: &str) -> String {
    let mut response = serde_json::json!({
        "kind": "CredentialProviderResponse", "apiVersion": V1, "cacheKeyType": key_type,
        "auth": {pattern: {"username": "puller", "password": password}}
    });
    if let Some(d) = duration {
        response["cacheDuration"] = d.into();
    }
    response.to_string()
}

fn passwords(keyring: &Keyring, image: &str) -> Vec<String> {
    keyring.lookup(image).into_iter().map(|c| c.password).collect()
}

#[tokio::test]
async fn a_matching_plugin_is_asked_with_its_args_env_and_the_request() {
    let bin = BinDir::new("asked");
    bin.plugin("match", &answer("Image", Some("0s"), "127.0.0.1:5000", "from-plugin"));
    bin.plugin("other", &answer("Image", None, "*", "never"));
    let plugins = bin.plugins(vec![
        provider("match", &["127.0.0.*:5000/private"], Duration::ZERO),
        provider("other", &["registry.example", "127.0.0.1:5000/public"], Duration::ZERO),
    ]);
    let keyring = plugins.keyring(IMAGE).await;
    assert_eq!(passwords(&keyring, IMAGE), ["from-plugin"]);
    let request = format!(r#"{{"apiVersion":"{V1}","image":"{IMAGE}","kind":"CredentialProviderRequest"}}"#);
    assert_eq!(bin.calls("match"), [format!("args=get-credentials region=eu-west-1 request={request}")]);
    assert!(bin.calls("other").is_empty(), "a plugin whose matchImages do not match was run");
}

#[tokio::test]
async fn an_answer_is_cached_for_its_duration_or_not_at_all() {
    let bin = BinDir::new("cached");
    bin.plugin("hour", &answer("Registry", Some("1h"), "127.0.0.1:5000", "p"));
    bin.plugin("zero", &answer("Registry", Some("0s"), "127.0.0.1:5000", "p"));
    bin.plugin("default", &answer("Global", None, "127.0.0.1:5000", "p"));
    let plugins = bin.plugins(vec![
        provider("hour", &["127.0.0.1:5000"], Duration::ZERO),
        provider("zero", &["127.0.0.1:5000"], Duration::from_secs(3600)),
        provider("default", &["127.0.0.1:5000"], Duration::from_secs(3600)),
    ]);
    for image in [IMAGE, "127.0.0.1:5000/other/app"] {
        assert_eq!(passwords(&plugins.keyring(image).await, image), ["p", "p", "p"]);
    }
    assert_eq!(bin.calls("hour").len(), 1, "the registry's answer is kept for the other image");
    assert_eq!(bin.calls("zero").len(), 2, "a zero cacheDuration keeps nothing");
    assert_eq!(bin.calls("default").len(), 1, "kept for the provider's defaultCacheDuration");
}

#[tokio::test]
async fn concurrent_lookups_of_an_image_share_one_run() {
    let bin = BinDir::new("shared");
    bin.plugin("p", &answer("Image", Some("0s"), "127.0.0.1:5000", "p"));
    let plugins = bin.plugins(vec![provider("p", &["127.0.0.1:5000"], Duration::ZERO)]);
    let (a, b) = tokio::join!(plugins.keyring(IMAGE), plugins.keyring(IMAGE));
    assert_eq!((passwords(&a, IMAGE), passwords(&b, IMAGE)), (vec!["p".to_string()], vec!["p".to_string()]));
    assert_eq!(bin.calls("p").len(), 1);
    // Over: the next lookup runs it again (nothing is cached).
    plugins.keyring(IMAGE).await;
    assert_eq!(bin.calls("p").len(), 2);
}

#[tokio::test]
async fn a_lookup_given_up_leaves_its_run_to_the_others() {
    let bin = BinDir::new("given-up");
    let json = answer("Image", Some("0s"), "127.0.0.1:5000", "p");
    bin.plugin("slow", &format!("sleep 1\ncat <<'EOF'\n{json}\nEOF"));
    let plugins = bin.plugins(vec![provider("slow", &["127.0.0.1:5000"], Duration::ZERO)]);
    let first = plugins.keyring(IMAGE);
    let second = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        plugins.keyring(IMAGE).await
    };
    // The first lookup is dropped (as when its pod is deleted) while the plugin runs.
    let (given_up, second) = tokio::join!(tokio::time::timeout(Duration::from_millis(400), first), second);
    assert!(given_up.is_err());
    assert_eq!(passwords(&second, IMAGE), ["p"]);
    assert_eq!(bin.calls("slow").len(), 1, "the run went on for the second lookup");
}

#[tokio::test]
async fn a_failing_or_wrong_answer_gives_nothing_and_never_echoes_stdout() {
    let bin = BinDir::new("failing");
    bin.plugin("fails", "echo 'token expired' >&2; echo 'secret-on-stdout'; exit 3");
    bin.plugin("badkey", &answer("Repository", None, "127.0.0.1:5000", "p"));
    let fails = provider("fails", &["127.0.0.1:5000"], Duration::ZERO);
    let error = exec::run(&bin.0, &fails, IMAGE).await.unwrap_err();
    assert_eq!(
        error,
        format!("error execing credential provider plugin fails for image {IMAGE}: exit status 3: token expired")
    );
    let plugins = bin.plugins(vec![fails, provider("badkey", &["127.0.0.1:5000"], Duration::from_secs(60))]);
    assert!(plugins.keyring(IMAGE).await.lookup(IMAGE).is_empty());
    assert_eq!(bin.calls("badkey").len(), 1);
}

#[test]
fn a_response_is_decoded_and_must_speak_the_requests_version() {
    let good = answer("Image", Some("90s"), "*.example.com", "pw");
    let response = parse_response(V1, good.as_bytes()).unwrap();
    assert_eq!(response.cache_key_type(), Some(exec::CacheKeyType::Image));
    assert_eq!(response.cache_duration, Some(Duration::from_secs(90)));
    assert_eq!(response.auth.len(), 1);
    assert_eq!((response.auth[0].0.as_str(), response.auth[0].1.password.as_str()), ("*.example.com", "pw"));
    assert_eq!(parse_response(V1, answer("Global", None, "x", "pw").as_bytes()).unwrap().cache_duration, None);

    let v1beta1 = good.replace(V1, "credentialprovider.kubelet.k8s.io/v1beta1");
    assert_eq!(
        parse_response(V1, v1beta1.as_bytes()).unwrap_err(),
        format!(
            "apiVersion from credential plugin response did not match expected apiVersion:{V1}, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1"
        )
    );
    let undecodable = "error decoding credential provider plugin response from stdout";
    let wrong_kind = good.replace("CredentialProviderResponse", "CredentialProviderRequest");
    let unknown_field = good.replace("\"auth\"", "\"token\":\"pw\",\"auth\"");
    let bad_duration = good.replace("90s", "pw");
    for wrong in [wrong_kind, unknown_field, bad_duration] {
        assert_eq!(parse_response(V1, wrong.as_bytes()).unwrap_err(), undecodable, "{wrong}");
    }
    let broken = parse_response(V1, b"{\"password\": \"pw\"").unwrap_err();
    assert!(broken.starts_with("error reading GVK from response: ") && !broken.contains("pw"), "{broken}");
}
