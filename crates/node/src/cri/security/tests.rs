use super::*;
use podwright_runtime::cri_api::NamespaceMode;

fn pod(spec: &str) -> Pod {
    let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ns, uid: u1}}\nspec:\n{spec}");
    podwright_api::parse_manifests("p.yaml", &yaml).unwrap().remove(0)
}

fn first(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

const ROOT: ImageUser = ImageUser::Uid(0);

#[test]
fn the_containers_settings_win_over_the_pods() {
    let p = pod(r#"
  securityContext: {runAsUser: 1000, runAsGroup: 2000, runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: busybox
    securityContext: {runAsUser: 1001, readOnlyRootFilesystem: true}
"#);
    let sc = effective(&p, first(&p));
    assert_eq!(sc.run_as_user, Some(1001));
    assert_eq!(sc.run_as_group, Some(2000));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
}

#[test]
fn the_runtime_gets_the_users_groups_and_the_images_user_when_the_pod_names_none() {
    let p = pod(r#"
  securityContext: {runAsGroup: 3000, supplementalGroups: [4000, 5000], fsGroup: 6000}
  containers:
  - {name: app, image: busybox}
"#);
    let sc = container_security(&p, first(&p), &ImageUser::Uid(42), Path::new("/r")).unwrap();
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 42 }));
    assert_eq!(sc.run_as_group, Some(Int64Value { value: 3000 }));
    assert_eq!(sc.supplemental_groups, [6000, 4000, 5000]);
    assert!(!sc.no_new_privs && !sc.readonly_rootfs && !sc.privileged);
    assert_eq!(sc.masked_paths.len(), MASKED_PATHS.len());
    assert_eq!(sc.seccomp.unwrap().profile_type, ProfileType::Unconfined as i32);

    let named = container_security(&p, first(&p), &ImageUser::Name("nobody".into()), Path::new("/r")).unwrap();
    assert_eq!((named.run_as_user, named.run_as_username.as_str()), (None, "nobody"));

    let sandbox = sandbox_security(&p);
    assert_eq!(sandbox.run_as_group, Some(Int64Value { value: 3000 }));
    assert_eq!(sandbox.supplemental_groups, [6000, 4000, 5000]);
    assert_eq!(sandbox.seccomp.unwrap().profile_type, ProfileType::RuntimeDefault as i32);
}

#[test]
fn a_pod_uid_is_never_replaced_by_the_images() {
    let p = pod("  securityContext: {runAsUser: 1000}\n  containers:\n  - {name: app, image: busybox}\n");
    let sc = container_security(&p, first(&p), &ROOT, Path::new("/r")).unwrap();
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 1000 }));
    assert_eq!(sandbox_security(&p).run_as_user, Some(Int64Value { value: 1000 }));
}

#[test]
fn capabilities_privilege_and_escalation_reach_the_runtime() {
    let p = pod(r#"
  initContainers:
  - {name: init, image: busybox, securityContext: {privileged: true}}
  containers:
  - name: app
    image: busybox
    securityContext: {allowPrivilegeEscalation: false, capabilities: {add: [NET_ADMIN], drop: [CHOWN]}, procMount: Default}
"#);
    let sc = container_security(&p, first(&p), &ROOT, Path::new("/r")).unwrap();
    let caps = sc.capabilities.unwrap();
    assert_eq!((caps.add_capabilities, caps.drop_capabilities), (vec!["NET_ADMIN".into()], vec!["CHOWN".into()]));
    assert!(sc.no_new_privs);
    assert_eq!(sc.readonly_paths.len(), READONLY_PATHS.len());
    assert!(sandbox_security(&p).privileged, "a privileged init container needs a privileged sandbox");
}

#[test]
fn seccomp_profiles_container_first_then_pod() {
    let p = pod(r#"
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: a, image: busybox}
  - {name: b, image: busybox, securityContext: {seccompProfile: {type: Localhost, localhostProfile: my/profile.json}}}
  - {name: c, image: busybox, securityContext: {seccompProfile: {type: Unconfined}}}
"#);
    let profile = |i: usize| {
        let c = &p.spec.as_ref().unwrap().containers[i];
        container_security(&p, c, &ROOT, Path::new("/r")).unwrap().seccomp.unwrap()
    };
    assert_eq!(profile(0).profile_type, ProfileType::RuntimeDefault as i32);
    assert_eq!(profile(1).profile_type, ProfileType::Localhost as i32);
    assert_eq!(profile(1).localhost_ref, "/r/seccomp/my/profile.json");
    assert_eq!(profile(2).profile_type, ProfileType::Unconfined as i32);
}

#[test]
fn namespaces_of_the_pod() {
    let ns = |spec: &str| namespaces(&pod(&format!("{spec}  containers:\n  - {{name: a, image: busybox}}\n")));
    let own = ns("");
    assert_eq!(
        (own.network, own.pid, own.ipc),
        (NamespaceMode::Pod as i32, NamespaceMode::Container as i32, NamespaceMode::Pod as i32)
    );
    assert_eq!(ns("  shareProcessNamespace: true\n").pid, NamespaceMode::Pod as i32);
    let host = ns("  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n");
    assert_eq!(
        (host.network, host.pid, host.ipc),
        (NamespaceMode::Node as i32, NamespaceMode::Node as i32, NamespaceMode::Node as i32)
    );
}

#[test]
fn run_as_non_root_is_checked_against_the_image_user() {
    let p = pod("  securityContext: {runAsNonRoot: true}\n  containers:\n  - {name: app, image: busybox}\n");
    let c = first(&p);
    assert_eq!(
        verify_run_as_non_root(&p, c, &ROOT).unwrap_err(),
        "container has runAsNonRoot and image will run as root (pod: \"p_ns(u1)\", container: app)"
    );
    assert_eq!(
        verify_run_as_non_root(&p, c, &ImageUser::Name("app".into())).unwrap_err(),
        "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: \"p_ns(u1)\", container: app)"
    );
    assert_eq!(verify_run_as_non_root(&p, c, &ImageUser::Uid(1000)), Ok(()));

    let root_user = pod(
        "  securityContext: {runAsNonRoot: true}\n  containers:\n  - {name: app, image: busybox, securityContext: {runAsUser: 0}}\n",
    );
    assert_eq!(
        verify_run_as_non_root(&root_user, first(&root_user), &ImageUser::Uid(1000)).unwrap_err(),
        "container's runAsUser breaks non-root policy (pod: \"p_ns(u1)\", container: app)"
    );
    let user = pod(
        "  securityContext: {runAsNonRoot: true, runAsUser: 1000}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    assert_eq!(verify_run_as_non_root(&user, first(&user), &ROOT), Ok(()));
    let overridden = pod(
        "  securityContext: {runAsNonRoot: true}\n  containers:\n  - {name: app, image: busybox, securityContext: {runAsNonRoot: false}}\n",
    );
    assert_eq!(verify_run_as_non_root(&overridden, first(&overridden), &ROOT), Ok(()));
}

#[test]
fn the_sandbox_gets_the_pods_sysctls_by_their_dotted_names() {
    let p = pod(r#"
  securityContext:
    sysctls:
    - {name: kernel.shm_rmid_forced, value: "1"}
    - {name: net/ipv4/ip_local_port_range, value: "1024 2048"}
  containers:
  - {name: app, image: busybox}
"#);
    let want = HashMap::from([
        ("kernel.shm_rmid_forced".to_string(), "1".to_string()),
        ("net.ipv4.ip_local_port_range".to_string(), "1024 2048".to_string()),
    ]);
    assert_eq!(sysctls(&p), want);
    assert!(sysctls(&pod("  containers:\n  - {name: app, image: busybox}\n")).is_empty());
}

#[test]
fn selinux_options_go_to_the_runtime_the_containers_over_the_pods() {
    let p = pod(r#"
  securityContext: {seLinuxOptions: {level: s0, user: system_u}}
  containers:
  - name: app
    image: busybox
    securityContext: {seLinuxOptions: {level: "s0:c1,c2", type: container_t}}
  - name: plain
    image: busybox
"#);
    let label = |user: &str, r#type: &str, level: &str| {
        Some(SeLinuxOption { user: user.into(), role: String::new(), r#type: r#type.into(), level: level.into() })
    };
    assert_eq!(sandbox_security(&p).selinux_options, label("system_u", "", "s0"));
    let app = container_security(&p, first(&p), &ROOT, Path::new("/r")).unwrap();
    // The container's own options replace the pod's whole, as `DetermineEffectiveSecurityContext` does.
    assert_eq!(app.selinux_options, label("", "container_t", "s0:c1,c2"));
    let plain = &p.spec.as_ref().unwrap().containers[1];
    assert_eq!(
        container_security(&p, plain, &ROOT, Path::new("/r")).unwrap().selinux_options,
        label("system_u", "", "s0")
    );
}
