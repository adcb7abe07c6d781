//! The settings `run` and `serve` take besides their own flags: the KubeletConfiguration-style
//! `--config` file and the credential provider flags, validated; an error names the file or flag
//! and the field.

use crate::RuntimeArgs;
use podwright_api::quantity::Quantity;
use podwright_node::PluginConfig;
use podwright_node::cri::dns::DEFAULT_CLUSTER_DOMAIN;
use podwright_node::log_rotation::LogPolicy;
use podwright_node::static_pods::DEFAULT_CHECK_FREQUENCY;
use podwright_node::{ImageGcPolicy, ImagePulls, VerificationPolicy};
use podwright_server::kubelet::{AuthSettings, Authorization, auth};
use serde::Deserialize;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The part of a `KubeletConfiguration` podwright honours; any other field is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServeConfig {
    kind: Option<String>,
    api_version: Option<String>,
    pub(crate) address: Option<IpAddr>,
    pub(crate) port: Option<u16>,
    container_log_max_size: Option<String>,
    container_log_max_files: Option<u32>,
    /// The DNS servers pods ask; without it podwright serves cluster DNS itself.
    #[serde(rename = "clusterDNS")]
    pub(crate) cluster_dns: Option<Vec<IpAddr>>,
    cluster_domain: Option<String>,
    /// The static pods' directory (or file).
    pub(crate) static_pod_path: Option<PathBuf>,
    /// How often the static-pod path is read again without a change notice (a Go duration).
    file_check_frequency: Option<String>,
    /// One image pull at a time node-wide (true unless given).
    serialize_image_pulls: Option<bool>,
    /// At most this many image pulls at once when they are not serialized.
    max_parallel_image_pulls: Option<i64>,
    /// What the two above make, validated.
    #[serde(skip)]
    pub(crate) image_pulls: ImagePulls,
    /// Image garbage collection starts at this usage of the image filesystem (percent)…
    #[serde(rename = "imageGCHighThresholdPercent")]
    image_gc_high_threshold_percent: Option<i64>,
    /// …and frees down to this one.
    #[serde(rename = "imageGCLowThresholdPercent")]
    image_gc_low_threshold_percent: Option<i64>,
    /// Images first seen more recently are never collected for space (a Go duration).
    #[serde(rename = "imageMinimumGCAge")]
    image_minimum_gc_age: Option<String>,
    /// Images unused for longer are collected whatever the usage (a Go duration, 0 = never).
    #[serde(rename = "imageMaximumGCAge")]
    image_maximum_gc_age: Option<String>,
    /// What the four above make, validated.
    #[serde(skip)]
    pub(crate) image_gc: ImageGcPolicy,
    /// Which images already on the node a pod must pull with its own credentials before using
    /// them (KEP-2535).
    image_pull_credentials_verification_policy: Option<String>,
    /// The images `NeverVerifyAllowlistedImages` lets every pod use.
    preloaded_images_verification_allowlist: Option<Vec<String>>,
    /// What the two above make, validated.
    #[serde(skip)]
    pub(crate) image_verification: VerificationPolicy,
    /// The container restart back-off's cap (KEP-5593, beta since 1.35).
    crash_loop_back_off: Option<CrashLoopBackOff>,
    /// Its `maxContainerRestartPeriod`, validated.
    #[serde(skip)]
    pub(crate) max_container_restart_period: Option<Duration>,
    /// Who may use the kubelet port of a cluster node, and how they prove it.
    authentication: Option<Authentication>,
    /// What the kubelet port lets an authenticated user do.
    authorization: Option<AuthorizationConfig>,
    /// The kubelet port's serving certificate (PEM), with `tlsPrivateKeyFile`.
    pub(crate) tls_cert_file: Option<PathBuf>,
    pub(crate) tls_private_key_file: Option<PathBuf>,
    /// The kubelet port's serving certificate is asked of the cluster (a
    /// `kubernetes.io/kubelet-serving` CSR) and renewed before it expires.
    #[serde(rename = "serverTLSBootstrap")]
    server_tls_bootstrap: Option<bool>,
    /// The node's client certificate is renewed before it expires (the kubelet's default is
    /// `false`; kubeadm writes `true`).
    rotate_certificates: Option<bool>,
}

/// `crashLoopBackOff` (`CrashLoopBackOffConfig`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CrashLoopBackOff {
    /// A Go duration from 1s to 300s.
    max_container_restart_period: Option<String>,
}

/// The kubelet's bounds on `maxContainerRestartPeriod`.
const RESTART_PERIOD_BOUNDS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// `crashLoopBackOff.maxContainerRestartPeriod`, checked as the kubelet's configuration
/// validation does.
fn max_container_restart_period(given: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(given) = given else { return Ok(None) };
    // Go prints the seconds with `%v`: `0.5`, `301`.
    let invalid = |secs: f64| {
        format!(
            "invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: {secs} seconds) must be set between 1s and 300s"
        )
    };
    let d = podwright_api::go::parse_duration(given).map_err(|_| {
        format!(
            "crashLoopBackOff.maxContainerRestartPeriod: Invalid value: {given:?}: must be a duration such as \"30s\""
        )
    })?;
    let secs = d.as_secs_f64();
    match Duration::try_from(d) {
        Ok(d) if (RESTART_PERIOD_BOUNDS.0..=RESTART_PERIOD_BOUNDS.1).contains(&d) => Ok(Some(d)),
        _ => Err(invalid(secs)),
    }
}

/// `authentication` (`KubeletAuthentication`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Authentication {
    x509: Option<X509Authentication>,
    webhook: Option<WebhookAuthentication>,
    anonymous: Option<AnonymousAuthentication>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct X509Authentication {
    #[serde(rename = "clientCAFile")]
    client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookAuthentication {
    enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    cache_ttl: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnonymousAuthentication {
    enabled: Option<bool>,
}

/// `authorization` (`KubeletAuthorization`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorizationConfig {
    mode: Option<String>,
    webhook: Option<WebhookAuthorization>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    cache_unauthorized_ttl: Option<String>,
}

/// A cache TTL: a Go duration, not negative; `default` when not given or zero (as the
/// kubelet's defaulting treats zero).
fn ttl(field: &str, given: Option<&str>, default: Duration) -> Result<Duration, String> {
    let Some(given) = given else { return Ok(default) };
    let d =
        podwright_api::go::parse_duration(given).ok().and_then(|d| Duration::try_from(d).ok()).ok_or_else(|| {
            format!("{field}: Invalid value: {given:?}: must be a duration that is not negative, such as \"2m\"")
        })?;
    Ok(if d.is_zero() { default } else { d })
}

/// The `--config` file, validated; an error names the file.
pub(crate) fn read_config(path: &Path) -> Result<ServeConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut c: ServeConfig = podwright_api::yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(k) = c.kind.as_deref().filter(|k| *k != "KubeletConfiguration") {
        return Err(format!(
            "{}: kind: Unsupported value: {k:?}: supported values: \"KubeletConfiguration\"",
            path.display()
        ));
    }
    let _ = &c.api_version;
    if c.cluster_dns.as_ref().is_none_or(Vec::is_empty) && c.cluster_domain().is_empty() {
        return Err(format!(
            "{}: clusterDomain: Required value: podwright serves cluster DNS for it unless clusterDNS is given",
            path.display()
        ));
    }
    c.image_pulls = ImagePulls::from_config(c.serialize_image_pulls, c.max_parallel_image_pulls)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if c.server_tls_bootstrap == Some(true) && c.tls_cert_file.is_some() {
        return Err(format!(
            "{}: serverTLSBootstrap: Invalid value: true: the serving certificate is the cluster's, so tlsCertFile and tlsPrivateKeyFile must be left out",
            path.display()
        ));
    }
    if c.tls_cert_file.is_some() != c.tls_private_key_file.is_some() {
        return Err(format!(
            "{}: tlsCertFile and tlsPrivateKeyFile: Required value: give both or neither",
            path.display()
        ));
    }
    c.kubelet_auth().map_err(|e| format!("{}: {e}", path.display()))?;
    c.image_gc = ImageGcPolicy::from_config(
        c.image_gc_high_threshold_percent,
        c.image_gc_low_threshold_percent,
        c.image_minimum_gc_age.as_deref(),
        c.image_maximum_gc_age.as_deref(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    c.image_verification = VerificationPolicy::from_config(
        c.image_pull_credentials_verification_policy.as_deref(),
        c.preloaded_images_verification_allowlist.as_deref().unwrap_or_default(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let period = c.crash_loop_back_off.as_ref().and_then(|b| b.max_container_restart_period.as_deref());
    c.max_container_restart_period =
        max_container_restart_period(period).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(c)
}

impl ServeConfig {
    /// The fields given that only `serve` honours, by their configuration names.
    fn serve_only_fields(&self) -> Vec<&'static str> {
        let given = [
            ("address", self.address.is_some()),
            ("port", self.port.is_some()),
            ("containerLogMaxSize", self.container_log_max_size.is_some()),
            ("containerLogMaxFiles", self.container_log_max_files.is_some()),
            ("clusterDNS", self.cluster_dns.is_some()),
            ("clusterDomain", self.cluster_domain.is_some()),
            ("staticPodPath", self.static_pod_path.is_some()),
            ("fileCheckFrequency", self.file_check_frequency.is_some()),
            ("crashLoopBackOff", self.crash_loop_back_off.is_some()),
            ("imagePullCredentialsVerificationPolicy", self.image_pull_credentials_verification_policy.is_some()),
            ("preloadedImagesVerificationAllowlist", self.preloaded_images_verification_allowlist.is_some()),
        ];
        let mut fields: Vec<&str> = given.into_iter().filter(|(_, set)| *set).map(|(name, _)| name).collect();
        fields.extend(self.cluster_only_fields());
        fields
    }

    /// The fields given that only a node of a cluster honours (its kubelet port's), by their
    /// configuration names.
    pub(crate) fn cluster_only_fields(&self) -> Vec<&'static str> {
        let given = [
            ("authentication", self.authentication.is_some()),
            ("authorization", self.authorization.is_some()),
            ("tlsCertFile", self.tls_cert_file.is_some()),
            ("tlsPrivateKeyFile", self.tls_private_key_file.is_some()),
            ("serverTLSBootstrap", self.server_tls_bootstrap.is_some()),
            ("rotateCertificates", self.rotate_certificates.is_some()),
        ];
        given.into_iter().filter(|(_, set)| *set).map(|(name, _)| name).collect()
    }

    /// `serverTLSBootstrap`.
    pub(crate) fn server_tls_bootstrap(&self) -> bool {
        self.server_tls_bootstrap == Some(true)
    }

    /// `rotateCertificates`.
    pub(crate) fn rotate_certificates(&self) -> bool {
        self.rotate_certificates == Some(true)
    }

    /// `authentication.x509.clientCAFile`: the CA a client certificate must chain to.
    pub(crate) fn client_ca_file(&self) -> Option<&Path> {
        self.authentication.as_ref()?.x509.as_ref()?.client_ca_file.as_deref().filter(|p| !p.as_os_str().is_empty())
    }

    /// The kubelet port's authentication and authorization, with the KubeletConfiguration
    /// v1beta1 defaults: token webhook on (2m), anonymous off, authorization by webhook (5m,
    /// 30s).
    pub(crate) fn kubelet_auth(&self) -> Result<AuthSettings, String> {
        let authn = self.authentication.as_ref();
        let webhook = authn.and_then(|a| a.webhook.as_ref());
        let token_webhook = match webhook.and_then(|w| w.enabled) {
            Some(false) => None,
            _ => Some(ttl(
                "authentication.webhook.cacheTTL",
                webhook.and_then(|w| w.cache_ttl.as_deref()),
                auth::TOKEN_TTL,
            )?),
        };
        let anonymous = authn.and_then(|a| a.anonymous.as_ref()).and_then(|a| a.enabled).unwrap_or(false);
        let authz = self.authorization.as_ref();
        let authorization = match authz.and_then(|a| a.mode.as_deref()) {
            Some("AlwaysAllow") => Authorization::AlwaysAllow,
            None | Some("Webhook") => {
                let webhook = authz.and_then(|a| a.webhook.as_ref());
                Authorization::Webhook {
                    allowed_ttl: ttl(
                        "authorization.webhook.cacheAuthorizedTTL",
                        webhook.and_then(|w| w.cache_authorized_ttl.as_deref()),
                        auth::ALLOWED_TTL,
                    )?,
                    denied_ttl: ttl(
                        "authorization.webhook.cacheUnauthorizedTTL",
                        webhook.and_then(|w| w.cache_unauthorized_ttl.as_deref()),
                        auth::DENIED_TTL,
                    )?,
                }
            }
            Some(other) => {
                return Err(format!(
                    "authorization.mode: Unsupported value: {other:?}: supported values: \"AlwaysAllow\", \"Webhook\""
                ));
            }
        };
        Ok(AuthSettings { token_webhook, anonymous, authorization })
    }

    /// Without a trailing dot; `cluster.local` unless given.
    pub(crate) fn cluster_domain(&self) -> &str {
        self.cluster_domain.as_deref().unwrap_or(DEFAULT_CLUSTER_DOMAIN).trim_end_matches('.')
    }

    /// `fileCheckFrequency` (`20s`, `1m30s`), 20 s unless given.
    pub(crate) fn file_check_frequency(&self) -> Result<Duration, String> {
        let Some(given) = &self.file_check_frequency else { return Ok(DEFAULT_CHECK_FREQUENCY) };
        podwright_api::go::parse_duration(given)
            .ok()
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                format!("fileCheckFrequency: Invalid value: {given:?}: must be a positive duration such as \"20s\"")
            })
    }

    /// `containerLogMaxSize` (a quantity such as `10Mi`) and `containerLogMaxFiles` (at least 2).
    pub(crate) fn log_policy(&self) -> Result<LogPolicy, String> {
        let mut policy = LogPolicy::default();
        if let Some(size) = &self.container_log_max_size {
            let q = Quantity::parse(size).map_err(|e| format!("containerLogMaxSize: Invalid value: {size:?}: {e}"))?;
            policy.max_size = u64::try_from(q.value())
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("containerLogMaxSize: Invalid value: {size:?}: must be greater than 0"))?;
        }
        if let Some(files) = self.container_log_max_files {
            if files < 2 {
                return Err(format!("containerLogMaxFiles: Invalid value: {files}: must be greater than 1"));
            }
            policy.max_files = files as usize;
        }
        Ok(policy)
    }
}

/// `run`'s image settings: how image pulls may overlap and when images are collected, from
/// `--config`; an error names the file and the field.
pub(crate) fn image_settings(config: Option<&Path>) -> Result<(ImagePulls, ImageGcPolicy), String> {
    let Some(path) = config else { return Ok((ImagePulls::default(), ImageGcPolicy::default())) };
    let c = read_config(path)?;
    match c.serve_only_fields().as_slice() {
        [] => Ok((c.image_pulls, c.image_gc)),
        fields => Err(format!(
            "{}: {}: Forbidden: only `podwright serve` honours {}",
            path.display(),
            fields.join(", "),
            if fields.len() == 1 { "it" } else { "them" }
        )),
    }
}

impl RuntimeArgs {
    /// The credential provider plugins given, validated; an error names the file and field.
    pub(crate) fn credential_plugins(&self) -> Result<Option<PluginConfig>, String> {
        let (Some(config), Some(bin_dir)) =
            (&self.image_credential_provider_config, &self.image_credential_provider_bin_dir)
        else {
            return Ok(None);
        };
        PluginConfig::load(config, bin_dir).map(Some).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_fields_podwright_does_not_honour_are_refused() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        std::fs::write(&f, "kind: KubeletConfiguration\nport: 7000\n").unwrap();
        assert_eq!(read_config(&f).unwrap().port, Some(7000));
        std::fs::write(&f, "kind: KubeletConfiguration\nmaxPods: 3\n").unwrap();
        assert!(read_config(&f).unwrap_err().contains("unknown field `maxPods`"));
        std::fs::write(&f, "clusterDNS: [10.96.0.10]\nclusterDomain: k8s.test.\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(
            (c.cluster_dns.as_deref(), c.cluster_domain()),
            (Some(&["10.96.0.10".parse().unwrap()][..]), "k8s.test")
        );
        std::fs::write(&f, "staticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: 1m30s\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(c.static_pod_path.as_deref(), Some(Path::new("/etc/kubernetes/manifests")));
        assert_eq!(c.file_check_frequency(), Ok(Duration::from_secs(90)));
        assert_eq!(ServeConfig::default().file_check_frequency(), Ok(Duration::from_secs(20)));
        std::fs::write(&f, "fileCheckFrequency: 0s\n").unwrap();
        assert!(
            read_config(&f)
                .unwrap()
                .file_check_frequency()
                .unwrap_err()
                .starts_with("fileCheckFrequency: Invalid value: \"0s\"")
        );
        std::fs::write(&f, "clusterDomain: \"\"\n").unwrap();
        assert!(read_config(&f).unwrap_err().contains("clusterDomain: Required value"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_pull_settings_are_read_and_invalid_ones_refused_naming_the_field() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-pulls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        let two = std::num::NonZeroUsize::new(2);
        for (text, pulls) in [
            ("kind: KubeletConfiguration\n", ImagePulls::Serial),
            ("serializeImagePulls: false\n", ImagePulls::Parallel { max: None }),
            ("serializeImagePulls: false\nmaxParallelImagePulls: 2\n", ImagePulls::Parallel { max: two }),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(read_config(&f).unwrap().image_pulls, pulls, "{text}");
        }
        assert_eq!(ServeConfig::default().image_pulls, ImagePulls::Serial);
        for (text, error) in [
            ("maxParallelImagePulls: 2\n", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"),
            (
                "serializeImagePulls: false\nmaxParallelImagePulls: 0\n",
                "maxParallelImagePulls 0 must be a positive number",
            ),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = read_config(&f).unwrap_err();
            assert!(e.starts_with(&format!("{}: invalid configuration: ", f.display())) && e.contains(error), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_gc_settings_are_read_and_invalid_ones_refused_naming_the_file_and_field() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-gc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        assert_eq!(ServeConfig::default().image_gc, ImageGcPolicy::default());
        std::fs::write(&f, "kind: KubeletConfiguration\n").unwrap();
        assert_eq!(read_config(&f).unwrap().image_gc, ImageGcPolicy::default());
        std::fs::write(
            &f,
            "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 30s\nimageMaximumGCAge: 1h\n",
        )
        .unwrap();
        let gc = read_config(&f).unwrap().image_gc;
        assert_eq!((gc.high_threshold_percent, gc.low_threshold_percent), (90, 50));
        assert_eq!((gc.min_age, gc.max_age), (Duration::from_secs(30), Duration::from_secs(3600)));
        std::fs::write(&f, "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n").unwrap();
        assert_eq!(
            read_config(&f).unwrap_err(),
            format!(
                "{}: invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50",
                f.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_image_credentials_verification_policy_is_read_and_refused_with_the_kubelets_messages() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        assert_eq!(ServeConfig::default().image_verification, VerificationPolicy::NeverVerifyPreloadedImages);
        std::fs::write(&f, "kind: KubeletConfiguration\n").unwrap();
        assert_eq!(read_config(&f).unwrap().image_verification, VerificationPolicy::NeverVerifyPreloadedImages);
        std::fs::write(&f, "imagePullCredentialsVerificationPolicy: AlwaysVerify\n").unwrap();
        assert_eq!(read_config(&f).unwrap().image_verification, VerificationPolicy::AlwaysVerify);
        std::fs::write(
            &f,
            "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [docker.io/library/busybox, \"reg.io/team/*\"]\n",
        )
        .unwrap();
        let allowlisted = read_config(&f).unwrap().image_verification;
        assert!(!allowlisted.requires_verification("reg.io/team/app", true));
        assert!(allowlisted.requires_verification("reg.io/other/app", false));
        for (text, error) in [
            (
                "imagePullCredentialsVerificationPolicy: Never\n",
                "invalid configuration: option \"Never\" specified for imagePullCredentialsVerificationPolicy. Valid options are \"NeverVerify\", \"NeverVerifyPreloadedImages\", \"NeverVerifyAllowlistedImages\" or \"AlwaysVerify\"",
            ),
            (
                "preloadedImagesVerificationAllowlist: [docker.io/library/busybox]\n",
                "invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"",
            ),
            (
                "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"reg.io/*/app\"]\n",
                "invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: not a valid wildcard pattern, only patterns ending with '/*' are allowed: reg.io/*/app",
            ),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(read_config(&f).unwrap_err(), format!("{}: {error}", f.display()), "{text}");
        }
        // `run` keeps the kubelet's default.
        std::fs::write(&f, "imagePullCredentialsVerificationPolicy: NeverVerify\n").unwrap();
        assert_eq!(
            image_settings(Some(&f)),
            Err(format!(
                "{}: imagePullCredentialsVerificationPolicy: Forbidden: only `podwright serve` honours it",
                f.display()
            ))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_kubelet_ports_authentication_and_authorization_are_read_with_the_kubelets_defaults() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        assert_eq!(ServeConfig::default().kubelet_auth(), Ok(AuthSettings::default()));
        assert_eq!(
            AuthSettings::default(),
            AuthSettings {
                token_webhook: Some(Duration::from_secs(120)),
                anonymous: false,
                authorization: Authorization::Webhook {
                    allowed_ttl: Duration::from_secs(300),
                    denied_ttl: Duration::from_secs(30)
                },
            }
        );
        // What scripts/control-plane writes.
        std::fs::write(
            &f,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  x509:\n    clientCAFile: /pki/ca.crt\n  webhook:\n    enabled: true\n  anonymous:\n    enabled: false\nauthorization:\n  mode: Webhook\nclusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\n",
        )
        .unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(c.client_ca_file(), Some(Path::new("/pki/ca.crt")));
        assert_eq!(c.kubelet_auth(), Ok(AuthSettings::default()));
        assert_eq!(c.cluster_only_fields(), ["authentication", "authorization"]);
        std::fs::write(
            &f,
            "authentication:\n  webhook:\n    enabled: false\n  anonymous:\n    enabled: true\nauthorization:\n  mode: AlwaysAllow\ntlsCertFile: /a.crt\ntlsPrivateKeyFile: /a.key\n",
        )
        .unwrap();
        let c = read_config(&f).unwrap();
        let auth = c.kubelet_auth().unwrap();
        assert_eq!((auth.token_webhook, auth.anonymous, auth.authorization), (None, true, Authorization::AlwaysAllow));
        assert_eq!(c.tls_cert_file.as_deref(), Some(Path::new("/a.crt")));
        std::fs::write(
            &f,
            "authentication:\n  webhook:\n    cacheTTL: 10s\nauthorization:\n  webhook:\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 0s\n",
        )
        .unwrap();
        let auth = read_config(&f).unwrap().kubelet_auth().unwrap();
        assert_eq!(auth.token_webhook, Some(Duration::from_secs(10)));
        assert_eq!(
            auth.authorization,
            Authorization::Webhook { allowed_ttl: Duration::from_secs(60), denied_ttl: Duration::from_secs(30) }
        );
        for (text, error) in [
            (
                "authorization:\n  mode: Node\n",
                "authorization.mode: Unsupported value: \"Node\": supported values: \"AlwaysAllow\", \"Webhook\"",
            ),
            (
                "authentication:\n  webhook:\n    cacheTTL: -1s\n",
                "authentication.webhook.cacheTTL: Invalid value: \"-1s\"",
            ),
            (
                "serverTLSBootstrap: true\ntlsCertFile: /a.crt\ntlsPrivateKeyFile: /a.key\n",
                "serverTLSBootstrap: Invalid value: true: the serving certificate is the cluster's",
            ),
            ("tlsCertFile: /a.crt\n", "tlsCertFile and tlsPrivateKeyFile: Required value: give both or neither"),
            ("authentication:\n  oidc: {}\n", "unknown field `oidc`"),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = read_config(&f).unwrap_err();
            assert!(e.contains(error), "{text}: {e}");
        }
        std::fs::write(&f, "serverTLSBootstrap: true\nrotateCertificates: true\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(c.cluster_only_fields(), ["serverTLSBootstrap", "rotateCertificates"]);
        assert!(c.server_tls_bootstrap() && c.rotate_certificates());
        std::fs::write(&f, "serverTLSBootstrap: false\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(c.cluster_only_fields(), ["serverTLSBootstrap"]);
        assert!(!c.server_tls_bootstrap() && !c.rotate_certificates());
        // `run` has no kubelet port either.
        std::fs::write(&f, "tlsCertFile: /a.crt\ntlsPrivateKeyFile: /a.key\n").unwrap();
        assert_eq!(
            image_settings(Some(&f)),
            Err(format!(
                "{}: tlsCertFile, tlsPrivateKeyFile: Forbidden: only `podwright serve` honours them",
                f.display()
            ))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_crash_loop_back_off_cap_is_read_between_1s_and_300s() {
        let dir = std::env::temp_dir().join(format!("podwright-crashloop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        let read = |period: &str| {
            std::fs::write(&f, format!("crashLoopBackOff:\n  maxContainerRestartPeriod: {period}\n")).unwrap();
            read_config(&f).map(|c| c.max_container_restart_period)
        };
        assert_eq!(read("\"1s\""), Ok(Some(Duration::from_secs(1))));
        assert_eq!(read("5m"), Ok(Some(Duration::from_secs(300))));
        let out = |got: &str| {
            Err(format!(
                "{}: invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: {got} seconds) must be set between 1s and 300s",
                f.display()
            ))
        };
        assert_eq!(read("500ms"), out("0.5"));
        assert_eq!(read("301s"), out("301"));
        assert!(
            read("soon").unwrap_err().contains("crashLoopBackOff.maxContainerRestartPeriod: Invalid value: \"soon\"")
        );
        std::fs::write(&f, "crashLoopBackOff: {}\n").unwrap();
        assert_eq!(read_config(&f).map(|c| c.max_container_restart_period), Ok(None));
        std::fs::write(&f, "crashLoopBackOff: {maxRestarts: 3}\n").unwrap();
        assert!(read_config(&f).unwrap_err().contains("unknown field `maxRestarts`"));
        // `run` takes only the image settings from a config file.
        std::fs::write(&f, "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n").unwrap();
        assert_eq!(
            image_settings(Some(&f)),
            Err(format!("{}: crashLoopBackOff: Forbidden: only `podwright serve` honours it", f.display()))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_fields_only_serve_honours_are_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("podwright-run-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        let defaults = (ImagePulls::Serial, ImageGcPolicy::default());
        assert_eq!(image_settings(None), Ok(defaults));
        std::fs::write(
            &f,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nserializeImagePulls: false\n",
        )
        .unwrap();
        assert_eq!(image_settings(Some(&f)), Ok((ImagePulls::Parallel { max: None }, ImageGcPolicy::default())));
        std::fs::write(&f, "serializeImagePulls: false\nport: 7000\nstaticPodPath: /etc/kubernetes/manifests\n")
            .unwrap();
        assert_eq!(
            image_settings(Some(&f)),
            Err(format!("{}: port, staticPodPath: Forbidden: only `podwright serve` honours them", f.display()))
        );
        std::fs::write(&f, "maxPods: 80\n").unwrap();
        assert!(image_settings(Some(&f)).unwrap_err().contains("unknown field `maxPods`"));
        // Image garbage collection is the node's, in both modes.
        std::fs::write(&f, "imageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 0s\n")
            .unwrap();
        let (_, gc) = image_settings(Some(&f)).unwrap();
        assert_eq!((gc.high_threshold_percent, gc.low_threshold_percent, gc.min_age), (1, 0, Duration::ZERO));
        std::fs::write(&f, "imageGCHighThresholdPercent: 101\n").unwrap();
        assert_eq!(
            image_settings(Some(&f)),
            Err(format!(
                "{}: invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
                f.display()
            ))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
