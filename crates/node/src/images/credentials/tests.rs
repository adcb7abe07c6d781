use super::*;
use k8s_openapi::ByteString;
use std::path::Path;

fn cred(user: &str, password: &str) -> Credential {
    Credential { username: user.into(), password: password.into(), source: None }
}

fn keyring(config: &[(&str, Credential)]) -> Keyring {
    let mut k = Keyring::default();
    k.add(config.iter().map(|(r, c)| (r.to_string(), c.clone())).collect());
    k
}

fn users(creds: &[Credential]) -> Vec<&str> {
    creds.iter().map(|c| c.username.as_str()).collect()
}

#[test]
fn spec_glob_label_rules() {
    let cases = [
        ("*.kubernetes.io", "kubernetes.io", false),
        ("*.kubernetes.io", "abc.kubernetes.io", true),
        ("*.*.kubernetes.io", "abc.kubernetes.io", false),
        ("*.*.kubernetes.io", "abc.def.kubernetes.io", true),
        ("prefix.*.io", "prefix.kubernetes.io", true),
        ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
    ];
    for (glob, target, want) in cases {
        assert_eq!(urls_match(glob, target), want, "{glob} against {target}");
    }
}

#[test]
fn spec_config_json_example() {
    let ring =
        keyring(&[("my-registry.io/images", cred("plain", "p")), ("*.my-registry.io/images", cred("glob", "g"))]);
    for image in ["my-registry.io/images", "my-registry.io/images/my-image", "my-registry.io/images/another-image"] {
        assert_eq!(users(&ring.lookup(image)), ["plain"], "{image}");
    }
    assert_eq!(users(&ring.lookup("sub.my-registry.io/images/my-image")), ["glob"]);
    for image in ["a.sub.my-registry.io/images/my-image", "a.b.sub.my-registry.io/images/my-image"] {
        assert!(ring.lookup(image).is_empty(), "{image}");
    }
}

#[test]
fn spec_every_matching_path_is_tried_most_specific_first() {
    let ring =
        keyring(&[("my-registry.io/images", cred("images", "a")), ("my-registry.io/images/subpath", cred("sub", "b"))]);
    assert_eq!(users(&ring.lookup("my-registry.io/images/subpath/my-image")), ["sub", "images"]);
    assert_eq!(users(&ring.lookup("my-registry.io/images/other")), ["images"]);
}

#[test]
fn upstream_urls_match() {
    let cases = [
        ("*.kubernetes.io", "prefix.kubernetes.io", true),
        ("prefix.*.io", "prefix.kubernetes.io", true),
        ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
        ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
        ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true),
        ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true),
        ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true),
        ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true),
        ("*.kubernetes.io", "kubernetes.io", false),
        ("*.*.kubernetes.io", "prefix.kubernetes.io", false),
        ("*.*.kubernetes.io", "kubernetes.io", false),
        ("kubernetes.io", "kubernetes.com", false),
        ("k*.io", "quay.io", false),
        ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false),
        ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false),
    ];
    for (glob, target, want) in cases {
        assert_eq!(urls_match(glob, target), want, "{glob} against {target}");
    }
}

#[test]
fn upstream_keyring_hits_and_misses() {
    let hits = [
        ("https://hello.kubernetes.io", "hello.kubernetes.io"),
        ("https://*.docker.io", "prefix.docker.io"),
        ("https://prefix.*.io", "prefix.docker.io"),
        ("https://prefix.docker.*", "prefix.docker.io"),
        ("https://*.docker.io/path", "prefix.docker.io/path"),
        ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
        ("https://prefix.docker.*/path", "prefix.docker.io/path"),
        ("https://*.docker.io:8888", "prefix.docker.io:8888"),
        ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
        ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
        ("https://*.docker.io/path:1111", "prefix.docker.io/path:1111"),
        ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
        ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
        ("https://prefix.docker.*/path:1111", "prefix.docker.io/path:1111"),
        ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
        ("*.docker.io:1111", "prefix.docker.io:1111/path"),
    ];
    for (glob, target) in hits {
        let ring = keyring(&[(glob, cred("foo", "bar"))]);
        assert_eq!(ring.lookup(&format!("{target}/foo/bar")), [cred("foo", "bar")], "{glob} for {target}");
    }
    let misses = [
        ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
        ("https://*.docker.com", "prefix.docker.io"),
        ("https://suffix.*.io", "prefix.docker.io"),
        ("https://prefix.docker.c*", "prefix.docker.io"),
        ("https://prefix.*.io/path:1111", "prefix.docker.io/path/subpath:1111"),
        ("suffix.*.io", "prefix.docker.io"),
        ("https://index.docker.io/v1/", "world.mesos.org"),
    ];
    for (glob, target) in misses {
        let ring = keyring(&[(glob, cred("foo", "bar"))]);
        assert!(ring.lookup(&format!("{target}/foo/bar")).is_empty(), "{glob} for {target}");
    }
}

#[test]
fn scheme_is_ignored_and_api_prefix_dropped() {
    for registry in ["http://reg.io:5000", "https://reg.io:5000/v2/", "reg.io:5000/v1/", "reg.io:5000/"] {
        let ring = keyring(&[(registry, cred("u", "p"))]);
        assert_eq!(users(&ring.lookup("reg.io:5000/team/app")), ["u"], "{registry}");
        assert!(ring.lookup("reg.io/team/app").is_empty(), "{registry}: the port must match");
    }
}

#[test]
fn same_key_keeps_every_credential_in_order() {
    let ring = keyring(&[("https://reg.io", cred("first", "a")), ("reg.io", cred("second", "b"))]);
    assert_eq!(users(&ring.lookup("reg.io/app")), ["first", "second"]);
}

#[test]
fn docker_hub_credentials_for_docker_hub_images_only() {
    let ring = keyring(&[("https://index.docker.io/v1/", cred("hub", "p"))]);
    for repo in ["docker.io/library/busybox", "google/docker-registry", "jenkins", "index.docker.io/google/x"] {
        assert_eq!(users(&ring.lookup(repo)), ["hub"], "{repo}");
    }
    assert!(ring.lookup("world.mesos.org/foo/bar").is_empty());
}

#[test]
fn default_registry_match() {
    let cases = [
        ("foo/bar", true),
        ("docker.io/foo/bar", true),
        ("index.docker.io/foo/bar", true),
        ("foo", true),
        ("", false),
        ("registry.tld/foo/bar", false),
        ("registry:5000/foo/bar", false),
        ("myhostdocker.io/foo/bar", false),
    ];
    for (repo, want) in cases {
        assert_eq!(is_default_registry(repo), want, "{repo:?}");
    }
}

#[test]
fn config_json_forms() {
    // user:pass, padded and unpadded, and username/password fields.
    let json = br#"{"auths": {
        "a.io": {"auth": "dXNlcjpwYXNz"},
        "b.io": {"auth": "dTpwOng=", "email": "x@y"},
        "c.io": {"username": "plain", "password": "pw"},
        "d.io": {"username": "ignored", "password": "ignored", "auth": "dTp2"}
    }, "HttpHeaders": {"X": "y"}}"#;
    let config = parse_config_json(json).unwrap();
    assert_eq!(
        config,
        vec![
            ("a.io".to_string(), cred("user", "pass")),
            ("b.io".to_string(), cred("u", "p:x")),
            ("c.io".to_string(), cred("plain", "pw")),
            ("d.io".to_string(), cred("u", "v")),
        ]
    );
    assert_eq!(parse_config_json(b"{}").unwrap(), vec![]);
    let legacy = parse_dockercfg(br#"{"https://reg.io": {"auth": "dTpw", "email": "e"}}"#).unwrap();
    assert_eq!(legacy, vec![("https://reg.io".to_string(), cred("u", "p"))]);
}

#[test]
fn parse_errors_never_quote_the_input() {
    let bad: [&[u8]; 4] = [
        br#"{"auths": {"r.io": {"auth": "c2VjcmV0"}}}"#,
        br#"{"auths": {"r.io": {"auth": "!!secret!!"}}}"#,
        br#"{"auths": {"r.io": "secret"}}"#,
        br#"{"auths": {"r.io": {"password": ["secret"]}}}"#,
    ];
    for input in bad {
        let e = parse_config_json(input).unwrap_err().to_string();
        assert!(!e.contains("secret") && !e.contains("c2VjcmV0"), "{e}");
    }
    assert!(format!("{:?}", cred("user", "secret")).find("secret").is_none());
}

fn secret(name: &str, type_: &str, key: &str, value: &str) -> Secret {
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some([(key.to_string(), ByteString(value.as_bytes().to_vec()))].into()),
        ..Default::default()
    }
}

#[test]
fn secrets_of_both_types_form_one_keyring() {
    let secrets = [
        secret(
            "json",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            r#"{"auths":{"reg.io":{"auth":"YTph"}}}"#,
        ),
        secret("cfg", "kubernetes.io/dockercfg", ".dockercfg", r#"{"reg.io/team":{"auth":"Yjpi"}}"#),
        // Wrong type for its key, and an opaque secret: ignored.
        secret("mismatch", "kubernetes.io/dockercfg", ".dockerconfigjson", r#"{"auths":{"reg.io":{"auth":"Yzpj"}}}"#),
        secret("opaque", "Opaque", ".dockercfg", r#"{"reg.io":{"auth":"ZDpk"}}"#),
        secret("empty", "kubernetes.io/dockerconfigjson", ".dockerconfigjson", ""),
    ];
    let ring = secrets_keyring(&secrets).unwrap();
    assert_eq!(users(&ring.lookup("reg.io/team/app")), ["b", "a"]);
    let broken = [secret("bad", "kubernetes.io/dockerconfigjson", ".dockerconfigjson", "{")];
    assert!(secrets_keyring(&broken).is_err());
}

#[test]
fn pod_secrets_come_before_node_credentials_before_plugins() {
    let pod = keyring(&[("reg.io", cred("pod", "a"))]);
    let node = keyring(&[("reg.io/team", cred("node", "b"))]);
    let plugins = keyring(&[("reg.io/team/app", cred("plugin", "c"))]);
    let none = Keyring::default();
    // Even a later keyring's more specific match comes after every one of an earlier one's.
    assert_eq!(users(&lookup_all(&pod, &node, &plugins, "reg.io/team/app")), ["pod", "node", "plugin"]);
    assert_eq!(users(&lookup_all(&none, &node, &none, "reg.io/team/app")), ["node"]);
    assert_eq!(users(&lookup_all(&none, &none, &plugins, "reg.io/team/app")), ["plugin"]);
}

#[test]
fn node_search_paths_are_the_kubelets() {
    let paths = DockerConfigPaths::kubelet(Path::new("/var/lib/pw"), Path::new("/cwd"), Path::new("/home/u"));
    let json: Vec<_> = paths.config_json.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(
        json,
        ["/var/lib/pw/config.json", "/cwd/config.json", "/home/u/.docker/config.json", "/.docker/config.json"]
    );
    let cfg: Vec<_> = paths.dockercfg.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(cfg, ["/var/lib/pw/.dockercfg", "/cwd/.dockercfg", "/home/u/.dockercfg", "/.dockercfg"]);
}

#[test]
fn node_reads_first_valid_config_json_then_dockercfg() {
    let dir = std::env::temp_dir().join(format!("podwright-creds-{}", std::process::id()));
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let paths = DockerConfigPaths {
        config_json: vec![a.join("config.json"), b.join("config.json")],
        dockercfg: vec![a.join(".dockercfg")],
    };
    assert!(paths.read().lookup("reg.io/x").is_empty());
    std::fs::write(a.join(".dockercfg"), r#"{"reg.io":{"auth":"bGVnYWN5OnA="}}"#).unwrap();
    assert_eq!(users(&paths.read().lookup("reg.io/x")), ["legacy"]);
    // An unparsable file is passed over; only the first valid config.json counts.
    std::fs::write(a.join("config.json"), "not json").unwrap();
    std::fs::write(b.join("config.json"), r#"{"auths":{"*.io":{"auth":"anNvbjpw"}}}"#).unwrap();
    assert_eq!(users(&paths.read().lookup("reg.io/x")), ["json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
