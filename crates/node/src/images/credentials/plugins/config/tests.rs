use super::*;

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n";

/// A config with one provider of these lines (each indented under `- `).
fn one_provider(lines: &[&str]) -> String {
    let mut text = format!("{HEADER}providers:\n");
    for (i, line) in lines.iter().enumerate() {
        text.push_str(if i == 0 { "- " } else { "  " });
        text.push_str(line);
        text.push('\n');
    }
    text
}

const NAME: &str = "name: ecr";
const MATCH: &str = "matchImages: ['*.dkr.ecr.*.amazonaws.com', '127.0.0.1:5000/private']";
const DURATION: &str = "defaultCacheDuration: 12h";
const VERSION: &str = "apiVersion: credentialprovider.kubelet.k8s.io/v1";

fn invalid(text: &str) -> String {
    match parse(text) {
        Err(ParseError::Invalid(errors)) => errors,
        other => panic!("not refused by validation: {other:?}\n{text}"),
    }
}

fn decode_error(text: &str) -> String {
    match parse(text) {
        Err(ParseError::Decode(error)) => error,
        other => panic!("not refused by decoding: {other:?}\n{text}"),
    }
}

#[test]
fn a_valid_config_gives_its_providers() {
    let text = one_provider(&[
        NAME,
        MATCH,
        DURATION,
        VERSION,
        "args: [get-credentials, -v]",
        "env: [{name: REGION, value: eu-west-1}]",
    ]);
    let providers = parse(&text).unwrap();
    assert_eq!(
        providers,
        [Provider {
            name: "ecr".into(),
            match_images: vec!["*.dkr.ecr.*.amazonaws.com".into(), "127.0.0.1:5000/private".into()],
            default_cache_duration: Duration::from_secs(12 * 3600),
            api_version: "credentialprovider.kubelet.k8s.io/v1".into(),
            args: vec!["get-credentials".into(), "-v".into()],
            env: vec![("REGION".into(), "eu-west-1".into())],
        }]
    );
    // JSON too, and the older config versions and plugin API versions upstream still takes.
    let json = r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "CredentialProviderConfig",
        "providers": [{"name": "a", "matchImages": ["reg.io"], "defaultCacheDuration": "0s",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1alpha1"}]}"#;
    let providers = parse(json).unwrap();
    assert_eq!(providers[0].default_cache_duration, Duration::ZERO);
    assert_eq!(providers[0].api_version, "credentialprovider.kubelet.k8s.io/v1alpha1");
}

#[test]
fn each_invalid_field_is_refused_with_upstreams_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["name: a/b", MATCH, DURATION, VERSION],
            r#"providers.name: Invalid value: "a/b": provider name cannot contain '/'"#,
        ),
        (
            &["name: a b", MATCH, DURATION, VERSION],
            r#"providers.name: Invalid value: "a b": provider name cannot contain spaces"#,
        ),
        (
            &["name: '.'", MATCH, DURATION, VERSION],
            r#"providers.name: Invalid value: ".": provider name cannot be '.'"#,
        ),
        (
            &["name: '..'", MATCH, DURATION, VERSION],
            r#"providers.name: Invalid value: "..": provider name cannot be '..'"#,
        ),
        (&[NAME, MATCH, DURATION], "providers.apiVersion: Required value"),
        (
            &[NAME, MATCH, DURATION, "apiVersion: credentialprovider.kubelet.k8s.io/v2"],
            r#"providers.apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2": supported values: "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1""#,
        ),
        (
            &[NAME, DURATION, VERSION],
            "providers.matchImages: Required value: at least 1 item in matchImages is required",
        ),
        (
            &[NAME, "matchImages: ['reg.io:http']", DURATION, VERSION],
            r#"providers.matchImages: Invalid value: "reg.io:http": match image is invalid: parse "https://reg.io:http": invalid port ":http" after host"#,
        ),
        (
            &[NAME, "matchImages: ['reg io']", DURATION, VERSION],
            r#"providers.matchImages: Invalid value: "reg io": match image is invalid: parse "https://reg io": invalid character " " in host name"#,
        ),
        (
            &[NAME, "matchImages: [\"reg.io/a\\tb\"]", DURATION, VERSION],
            r#"providers.matchImages: Invalid value: "reg.io/a\tb": match image is invalid: parse "https://reg.io/a\tb": net/url: invalid control character in URL"#,
        ),
        (&[NAME, MATCH, VERSION], "providers.defaultCacheDuration: Required value"),
        (
            &[NAME, MATCH, "defaultCacheDuration: soon", VERSION],
            r#"providers.defaultCacheDuration: Invalid value: "soon": time: invalid duration "soon""#,
        ),
        (
            &[NAME, MATCH, "defaultCacheDuration: -1m", VERSION],
            r#"providers.defaultCacheDuration: Invalid value: "-1m": defaultCacheDuration must be greater than or equal to 0"#,
        ),
        (
            &[NAME, MATCH, DURATION, VERSION, "tokenAttributes: {serviceAccountTokenAudience: aud}"],
            "providers.tokenAttributes: Forbidden: podwright does not give credential provider plugins service account tokens",
        ),
    ];
    for (lines, expected) in cases {
        assert_eq!(invalid(&one_provider(lines)), *expected, "{lines:?}");
    }
    assert_eq!(
        invalid(&format!("{HEADER}providers: []\n")),
        "providers: Required value: at least 1 item in plugins is required"
    );
    let twice = format!(
        "{HEADER}providers:\n- {{{NAME}, {MATCH}, {DURATION}, {VERSION}}}\n- {{{NAME}, {MATCH}, {DURATION}, {VERSION}}}\n"
    );
    assert_eq!(invalid(&twice), r#"providers.name: Duplicate value: "ecr""#);
}

#[test]
fn several_errors_are_listed_together() {
    assert_eq!(
        invalid(&one_provider(&["name: a/b", MATCH])),
        "[providers.name: Invalid value: \"a/b\": provider name cannot contain '/', providers.apiVersion: Required value, providers.defaultCacheDuration: Required value]"
    );
}

#[test]
fn the_wrong_kind_or_version_or_an_unknown_field_is_not_decoded() {
    let body = format!("providers:\n- {{{NAME}, {MATCH}, {DURATION}, {VERSION}}}\n");
    assert_eq!(decode_error(&format!("kind: CredentialProviderConfig\n{body}")), "Object 'apiVersion' is missing");
    assert_eq!(decode_error(&format!("apiVersion: kubelet.config.k8s.io/v1\n{body}")), "Object 'Kind' is missing");
    assert_eq!(
        decode_error(&format!("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n{body}")),
        r#"no kind "KubeletConfiguration" is registered for version "kubelet.config.k8s.io/v1""#
    );
    assert_eq!(
        decode_error(&format!("apiVersion: kubelet.config.k8s.io/v2\nkind: CredentialProviderConfig\n{body}")),
        r#"no kind "CredentialProviderConfig" is registered for version "kubelet.config.k8s.io/v2""#
    );
    let unknown = decode_error(&one_provider(&[NAME, MATCH, DURATION, VERSION, "cacheType: Token"]));
    assert!(unknown.contains("unknown field `cacheType`"), "{unknown}");
}

#[test]
fn loading_needs_the_bin_dir_and_an_executable_per_provider() {
    let dir = std::env::temp_dir().join(format!("pw-plugin-config-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(&file, one_provider(&[NAME, MATCH, DURATION, VERSION])).unwrap();

    let missing_dir = dir.join("nowhere");
    assert_eq!(
        PluginConfig::load(&file, &missing_dir).unwrap_err().to_string(),
        format!("plugin binary directory {} did not exist", missing_dir.display())
    );
    let binary = bin.join("ecr");
    let no_binary = format!("plugin binary executable {} did not exist", binary.display());
    assert_eq!(PluginConfig::load(&file, &bin).unwrap_err().to_string(), no_binary);
    std::fs::write(&binary, "#!/bin/sh\n").unwrap();
    assert_eq!(PluginConfig::load(&file, &bin).unwrap_err().to_string(), no_binary, "not executable");
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let loaded = PluginConfig::load(&file, &bin).unwrap();
    assert_eq!(loaded.bin_dir, bin);
    assert_eq!(loaded.providers[0].name, "ecr");

    // The file is named in every error about it.
    std::fs::write(&file, one_provider(&[NAME, MATCH, VERSION])).unwrap();
    assert_eq!(
        PluginConfig::load(&file, &bin).unwrap_err().to_string(),
        format!(
            "failed to validate credential provider config {:?}: providers.defaultCacheDuration: Required value",
            file.display().to_string()
        )
    );
    std::fs::write(&file, "providers: [").unwrap();
    let decode = PluginConfig::load(&file, &bin).unwrap_err().to_string();
    assert!(decode.starts_with(&format!("error decoding config {:?}: ", file.display().to_string())), "{decode}");
    std::fs::remove_dir_all(&dir).unwrap();
}
