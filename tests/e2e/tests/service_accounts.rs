//! ServiceAccounts under `podwright serve`, as the "Add ImagePullSecrets to a service account"
//! task does it with kubectl: a registry credential put on a namespace's `default` account
//! reaches the new pods there, which pull a private image with it; a pod naming an account that
//! does not exist is refused.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::Registry;
use podwright_e2e::serve::Daemon;
use podwright_e2e::{Manifest, pod_name};
use std::time::Duration;

const BUSYBOX_ARCHIVE: &str = "busybox-1.36.tar";

#[test]
fn a_default_service_accounts_pull_secret_reaches_new_pods() {
    const PASSWORD: &str = "sa-s3cret-pw";
    let registry = Registry::start_with_auth("puller", PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/x:1");
    let d = Daemon::start();
    // A namespace made now: the controller's `default` account is there at once.
    let ns = pod_name("sa-team");
    d.ok(&["create", "namespace", &ns]);
    let accounts = d.ok(&["get", "sa", "-n", &ns]);
    let header: Vec<&str> = accounts.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SECRETS", "AGE"], "{accounts}");
    assert!(accounts.lines().any(|l| l.split_whitespace().take(2).eq(["default", "0"])), "{accounts}");

    d.ok(&[
        "create",
        "secret",
        "docker-registry",
        "myregistrykey",
        "-n",
        &ns,
        &format!("--docker-server={}", registry.host),
        "--docker-username=puller",
        &format!("--docker-password={PASSWORD}"),
    ]);
    d.ok(&[
        "patch",
        "serviceaccount",
        "default",
        "-n",
        &ns,
        "-p",
        r#"{"imagePullSecrets": [{"name": "myregistrykey"}]}"#,
    ]);

    let described = d.ok(&["describe", "serviceaccount", "default", "-n", &ns]);
    assert!(
        described.lines().any(|l| l.starts_with("Image pull secrets:") && l.ends_with("myregistrykey")),
        "{described}"
    );

    let name = pod_name("sa-private");
    let manifest = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: Always\n    command: [sleep, \"300\"]\n"
    ));
    d.ok(&["create", "-n", &ns, "-f", manifest.path_str()]);
    let secrets = d.ok(&["get", "pod", &name, "-n", &ns, "-o", "jsonpath={.spec.imagePullSecrets}"]);
    assert_eq!(secrets, r#"[{"name":"myregistrykey"}]"#);
    let account = d.ok(&["get", "pod", &name, "-n", &ns, "-o", "jsonpath={.spec.serviceAccountName}"]);
    assert_eq!(account, "default");
    d.wait_for(&["get", "pod", &name, "-n", &ns, "--no-headers"], Duration::from_secs(60), |o| o.contains("Running"));

    // kubectl 1.32 sends this one as protobuf.
    d.ok(&["create", "serviceaccount", "builder", "-n", &ns]);
    let names = d.ok(&["get", "serviceaccounts", "-n", &ns, "-o", "name"]);
    assert_eq!(names.lines().collect::<Vec<_>>(), ["serviceaccount/builder", "serviceaccount/default"]);

    let refused = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: nosa}}\nspec:\n  serviceAccountName: foo\n  containers:\n  - name: c\n    image: {image}\n"
    ));
    let err = d.fails(&["create", "-n", &ns, "-f", refused.path_str()]);
    assert!(
        err.contains(&format!(
            "Error from server (Forbidden): error when creating \"{}\": pods \"nosa\" is forbidden: error looking up service account {ns}/foo: serviceaccount \"foo\" not found",
            refused.path_str()
        )),
        "{err}"
    );
    d.ok(&["delete", "pod", &name, "-n", &ns, "--grace-period=1"]);
}
