use super::*;

const NAME: &str = "reg.io/team/app";

fn secret(namespace: &str, name: &str, uid: &str, hash: &str) -> PullSecret {
    PullSecret { namespace: namespace.into(), name: name.into(), uid: uid.into(), credential_hash: hash.into() }
}

fn record(name: &str, credentials: PullCredentials) -> PulledRecord {
    PulledRecord { image_ref: "sha256:abc".into(), credential_mapping: BTreeMap::from([(name.into(), credentials)]) }
}

fn allowlisted(patterns: &[&str]) -> VerificationPolicy {
    let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
    VerificationPolicy::from_config(Some("NeverVerifyAllowlistedImages"), &patterns).unwrap()
}

fn pulled(record: &PulledRecord) -> Known<'_> {
    Known { record: Some(record), ..Known::default() }
}

#[test]
fn each_policy_decides_for_a_preloaded_image_and_for_one_the_node_pulled() {
    let a = secret("team-a", "pull", "uid-a", "hash-a");
    let by_a = record(NAME, PullCredentials::of_pull(Some(a.clone())));
    let allow = allowlisted(&["reg.io/team/*"]);
    let preloaded = Known::default();
    // (policy, what the node knows, the pod's secrets, verdict)
    let cases: [(&VerificationPolicy, Known, &[PullSecret], Verdict); 10] = [
        // Preloaded: neither a record nor a pull begun.
        (&VerificationPolicy::NeverVerify, preloaded, &[], Verdict::Exempt),
        (&VerificationPolicy::NeverVerifyPreloadedImages, preloaded, &[], Verdict::Exempt),
        (&allow, preloaded, &[], Verdict::Exempt),
        (&VerificationPolicy::AlwaysVerify, preloaded, &[], Verdict::MustPull),
        // Pulled by the node with team A's secret; a pod without it.
        (&VerificationPolicy::NeverVerify, pulled(&by_a), &[], Verdict::Exempt),
        (&VerificationPolicy::NeverVerifyPreloadedImages, pulled(&by_a), &[], Verdict::MustPull),
        (&allow, pulled(&by_a), &[], Verdict::Exempt),
        (&VerificationPolicy::AlwaysVerify, pulled(&by_a), &[], Verdict::MustPull),
        // A pod with team A's secret.
        (
            &VerificationPolicy::NeverVerifyPreloadedImages,
            pulled(&by_a),
            std::slice::from_ref(&a),
            pod_credentials(None),
        ),
        (&VerificationPolicy::AlwaysVerify, pulled(&by_a), std::slice::from_ref(&a), pod_credentials(None)),
    ];
    for (i, (policy, known, secrets, verdict)) in cases.into_iter().enumerate() {
        assert_eq!(decide(policy, NAME, known, secrets), verdict, "case {i}: {policy:?}");
    }
    // A pull begun and not ended: the node's, and no credentials known yet.
    let pulling = Known { intent: true, ..Known::default() };
    assert_eq!(decide(&VerificationPolicy::default(), NAME, pulling, std::slice::from_ref(&a)), Verdict::MustPull);
    // Not on the allowlist: as if always verified.
    assert_eq!(decide(&allowlisted(&["other.io/*"]), NAME, preloaded, &[a]), Verdict::MustPull);
}

#[test]
fn a_name_the_node_never_pulled_is_preloaded_unless_the_image_is_asked_for_by_id() {
    // The node pulled the content as another name; this one was loaded onto the node.
    let other = record("reg.io/other/app", PullCredentials::of_pull(Some(secret("b", "pull", "uid-b", "hash-b"))));
    let policy = VerificationPolicy::default();
    assert_eq!(decide(&policy, NAME, pulled(&other), &[]), Verdict::Exempt);
    // By its ID the runtime finds it whatever its names: the node pulled it.
    let by_id = Known { by_id: true, ..pulled(&other) };
    assert_eq!(decide(&policy, NAME, by_id, &[]), Verdict::MustPull);
}

fn pod_credentials(remember: Option<PullSecret>) -> Verdict {
    Verdict::PodCredentials { remember }
}

#[test]
fn an_image_pulled_without_a_pod_secret_is_every_pods() {
    let anonymous = record(NAME, PullCredentials::of_pull(None));
    let policy = VerificationPolicy::AlwaysVerify;
    assert_eq!(decide(&policy, NAME, pulled(&anonymous), &[]), Verdict::NodeWide);
    // Under another repository name (the same image pushed twice), nothing is known.
    assert_eq!(decide(&policy, "reg.io/other/app", pulled(&anonymous), &[]), Verdict::MustPull);
    // An entry without credentials (a pull whose end the node did not see) proves nothing.
    let unknown = record(NAME, PullCredentials::default());
    let default = VerificationPolicy::default();
    assert_eq!(decide(&default, NAME, pulled(&unknown), &[]), Verdict::MustPull);
}

#[test]
fn another_namespaces_secret_with_the_same_credential_matches_and_is_remembered() {
    let a = secret("team-a", "pull", "uid-a", "hash-a");
    let by_a = record(NAME, PullCredentials::of_pull(Some(a.clone())));
    let policy = VerificationPolicy::default();
    // Team B holds the same registry credential in a secret of its own.
    let b_same = secret("team-b", "creds", "uid-b", "hash-a");
    assert_eq!(decide(&policy, NAME, pulled(&by_a), std::slice::from_ref(&b_same)), pod_credentials(Some(b_same)));
    // Team B's own credential, or a secret of the same name in another namespace: no.
    let b_other = secret("team-b", "creds", "uid-b", "hash-b");
    let same_name = secret("team-b", "pull", "uid-c", "hash-c");
    assert_eq!(decide(&policy, NAME, pulled(&by_a), &[b_other, same_name]), Verdict::MustPull);
    // Team A's secret updated since (same object, new credential): still team A's.
    let rotated = secret("team-a", "pull", "uid-a", "hash-new");
    assert_eq!(decide(&policy, NAME, pulled(&by_a), std::slice::from_ref(&rotated)), pod_credentials(Some(rotated)));
    // A secret deleted and made again under the same name is another secret.
    let remade = secret("team-a", "pull", "uid-a2", "hash-new");
    assert_eq!(decide(&policy, NAME, pulled(&by_a), &[remade]), Verdict::MustPull);
    // A record whose hash was lost matches no empty hash.
    let hashless = record(NAME, PullCredentials::of_pull(Some(secret("team-a", "pull", "uid-a", ""))));
    let other_hashless = secret("team-b", "x", "uid-x", "");
    assert_eq!(decide(&policy, NAME, pulled(&hashless), &[other_hashless]), Verdict::MustPull);
}

#[test]
fn matches_stop_being_remembered_past_the_limit() {
    let many: Vec<PullSecret> =
        (0..REMEMBER_LIMIT).map(|i| secret(&format!("ns-{i}"), "pull", &format!("uid-{i}"), "hash")).collect();
    let full = record(NAME, PullCredentials { node_pods_accessible: false, kubernetes_secrets: many });
    let policy = VerificationPolicy::default();
    let newcomer = secret("ns-new", "pull", "uid-new", "hash");
    assert_eq!(decide(&policy, NAME, pulled(&full), &[newcomer]), pod_credentials(None));
    // A rotated secret is let in only while it can be remembered.
    let rotated = secret("ns-0", "pull", "uid-0", "hash-new");
    assert_eq!(decide(&policy, NAME, pulled(&full), &[rotated]), Verdict::MustPull);
}

#[test]
fn records_merge_as_the_kubelets_do() {
    let a = secret("team-a", "pull", "uid-a", "hash-a");
    let by_a = record(NAME, PullCredentials::of_pull(Some(a.clone())));
    // The same secret again: nothing to write.
    assert_eq!(by_a.merged(NAME, &PullCredentials::of_pull(Some(a.clone()))), None);
    // Another secret: both, sorted by namespace, name, uid.
    let b = secret("team-0", "pull", "uid-b", "hash-b");
    let both = by_a.merged(NAME, &PullCredentials::of_pull(Some(b.clone()))).unwrap();
    assert_eq!(both.credential_mapping[NAME].kubernetes_secrets, [b.clone(), a.clone()]);
    // A rotated credential replaces the secret's hash.
    let rotated = secret("team-a", "pull", "uid-a", "hash-new");
    let after = both.merged(NAME, &PullCredentials::of_pull(Some(rotated.clone()))).unwrap();
    assert_eq!(after.credential_mapping[NAME].kubernetes_secrets, [b, rotated]);
    // A pull without a pod's secret makes it every pod's, for good.
    let open = after.merged(NAME, &PullCredentials::of_pull(None)).unwrap();
    assert_eq!(open.credential_mapping[NAME], PullCredentials::of_pull(None));
    assert_eq!(open.merged(NAME, &PullCredentials::of_pull(Some(a.clone()))), None);
    // Another repository name of the same image is filed apart.
    let other = by_a.merged("reg.io/mirror/app", &PullCredentials::of_pull(None)).unwrap();
    assert_eq!(other.credential_mapping.len(), 2);
    // Nothing proved, nothing written.
    assert_eq!(by_a.merged(NAME, &PullCredentials::default()), None);
}

#[test]
fn the_policy_and_allowlist_are_read_and_refused_with_the_kubelets_messages() {
    let none: &[String] = &[];
    assert_eq!(VerificationPolicy::from_config(None, none), Ok(VerificationPolicy::NeverVerifyPreloadedImages));
    for (given, policy) in [
        ("NeverVerify", VerificationPolicy::NeverVerify),
        ("AlwaysVerify", VerificationPolicy::AlwaysVerify),
        ("NeverVerifyPreloadedImages", VerificationPolicy::NeverVerifyPreloadedImages),
        ("NeverVerifyAllowlistedImages", VerificationPolicy::NeverVerifyAllowlistedImages(Allowlist::default())),
    ] {
        assert_eq!(VerificationPolicy::from_config(Some(given), none), Ok(policy));
    }
    assert_eq!(
        VerificationPolicy::from_config(Some("Sometimes"), none),
        Err("invalid configuration: option \"Sometimes\" specified for imagePullCredentialsVerificationPolicy. Valid options are \"NeverVerify\", \"NeverVerifyPreloadedImages\", \"NeverVerifyAllowlistedImages\" or \"AlwaysVerify\"".into())
    );
    let list = vec!["docker.io/library/busybox".to_string()];
    assert_eq!(
        VerificationPolicy::from_config(None, &list),
        Err("invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"".into())
    );
    let prefix = "invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: ";
    for (pattern, error) in [
        (" reg.io/a", "leading/trailing spaces are not allowed:  reg.io/a"),
        ("/*", "at least registry hostname is required"),
        ("*", "not a valid wildcard pattern, only patterns ending with '/*' are allowed: *"),
        ("reg.io/*/app", "not a valid wildcard pattern, only patterns ending with '/*' are allowed: reg.io/*/app"),
        ("reg.io/app:1.0", "neither tag nor digest is accepted in an image reference: reg.io/app:1.0"),
        // Names are compared normalized, so a pattern must be written so.
        ("busybox", "neither tag nor digest is accepted in an image reference: busybox"),
    ] {
        let e = VerificationPolicy::from_config(Some("NeverVerifyAllowlistedImages"), &[pattern.to_string()]);
        assert_eq!(e, Err(format!("{prefix}{error}")), "{pattern:?}");
    }
}

#[test]
fn the_allowlist_matches_whole_names_and_path_segment_prefixes() {
    let policy = allowlisted(&["docker.io/library/busybox", "reg.io/team/*"]);
    for (name, listed) in [
        ("docker.io/library/busybox", true),
        ("docker.io/library/busybox2", false),
        ("reg.io/team/app", true),
        ("reg.io/team/sub/app", true),
        ("reg.io/teams/app", false),
        ("reg.io/team", false),
    ] {
        assert_eq!(!policy.requires_verification(name, true), listed, "{name}");
    }
}
