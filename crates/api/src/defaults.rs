//! The defaults the API server applies to a v1 Pod before validation
//! (`pkg/apis/core/v1/defaults.go` and the generated defaulters), plus what
//! the create path fills in (namespace, uid); and what it does to a Secret.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, HTTPGetAction, Lifecycle, LifecycleHandler, ObjectFieldSelector, Pod, PodSecurityContext,
    PodSpec, Probe, ResourceRequirements, Secret, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

use crate::image_ref::default_image_pull_policy;
use crate::pod_resources::{self, is_overcommit_allowed, is_supported_pod_level_resource};
use crate::volume_sources::has_no_source;

/// Default `metadata.namespace`.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Default `spec.terminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Default `spec.schedulerName`.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// Default `terminationMessagePath`.
pub const TERMINATION_MESSAGE_PATH_DEFAULT: &str = "/dev/termination-log";
/// Default file mode of secret, configMap, downwardAPI and projected volumes (0644).
pub const VOLUME_SOURCE_DEFAULT_MODE: i32 = 0o644;
/// Default `serviceAccountToken.expirationSeconds` (one hour).
pub const SERVICE_ACCOUNT_TOKEN_DEFAULT_EXPIRATION: i64 = 3600;

pub use crate::image_ref::{default_image_pull_policy as image_pull_policy_for, image_tag_default};
pub use crate::init_container_annotations::convert_init_container_annotations;

/// Sets an unset or empty string field to `value`.
pub(crate) fn set_if_empty(field: &mut Option<String>, value: &str) {
    if field.as_deref().is_none_or(str::is_empty) {
        *field = Some(value.to_string());
    }
}

fn set_if_zero_i32(field: &mut Option<i32>, value: i32) {
    if field.is_none_or(|v| v == 0) {
        *field = Some(value);
    }
}

/// Defaults shared by containers, init containers and ephemeral containers
/// (the types differ but the fields are the same).
macro_rules! default_container_fields {
    ($c:expr) => {{
        let c = $c;
        if c.image_pull_policy.as_deref().is_none_or(str::is_empty) {
            let image = c.image.as_deref().unwrap_or_default();
            c.image_pull_policy = Some(default_image_pull_policy(image).to_string());
        }
        set_if_empty(&mut c.termination_message_path, TERMINATION_MESSAGE_PATH_DEFAULT);
        set_if_empty(&mut c.termination_message_policy, "File");
        for p in c.ports.iter_mut().flatten() {
            set_if_empty(&mut p.protocol, "TCP");
        }
        for e in c.env.iter_mut().flatten() {
            default_env_var(e);
        }
        for probe in
            [c.liveness_probe.as_mut(), c.readiness_probe.as_mut(), c.startup_probe.as_mut()].into_iter().flatten()
        {
            default_probe(probe);
        }
        if let Some(l) = c.lifecycle.as_mut() {
            default_lifecycle(l);
        }
    }};
}

/// The pod's service account: `default` unless named (the ServiceAccount admission's default).
pub fn service_account(pod: &Pod) -> &str {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.service_account_name.as_deref().or(s.service_account.as_deref()))
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// Apply every default Kubernetes applies to a Pod on create. Idempotent.
pub fn apply_defaults(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    set_if_empty(&mut meta.namespace, DEFAULT_NAMESPACE);
    if meta.uid.as_deref().is_none_or(str::is_empty) {
        meta.uid = Some(uuid::Uuid::new_v4().to_string());
    }
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    default_pod_spec(spec);
}

/// What the API server does to a Secret before validating it: `stringData` merged into
/// `data` (the v1 conversion; a key in both takes the `stringData` value, and `stringData` is
/// never stored) and an empty `type` set to `Opaque` (`SetDefaults_Secret`).
pub fn default_secret(secret: &mut Secret) {
    if let Some(string_data) = secret.string_data.take().filter(|s| !s.is_empty()) {
        let data = secret.data.get_or_insert_default();
        for (key, value) in string_data {
            data.insert(key, ByteString(value.into_bytes()));
        }
    }
    set_if_empty(&mut secret.type_, "Opaque");
}

/// `SetDefaults_Pod` + `SetDefaults_PodSpec` + the per-field defaulters.
pub fn default_pod_spec(spec: &mut PodSpec) {
    // SetDefaults_PodSpec
    set_if_empty(&mut spec.dns_policy, "ClusterFirst");
    set_if_empty(&mut spec.restart_policy, "Always");
    if spec.security_context.is_none() {
        spec.security_context = Some(PodSecurityContext::default());
    }
    if spec.termination_grace_period_seconds.is_none() {
        spec.termination_grace_period_seconds = Some(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    }
    set_if_empty(&mut spec.scheduler_name, DEFAULT_SCHEDULER_NAME);

    // SetDefaults_Pod
    if spec.enable_service_links.is_none() {
        spec.enable_service_links = Some(true);
    }
    let host_network = spec.host_network == Some(true);
    for c in spec.containers.iter_mut() {
        default_requests_from_limits(c.resources.as_mut());
        if host_network {
            default_host_network_ports(c);
        }
        default_container(c);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_requests_from_limits(c.resources.as_mut());
        if host_network {
            default_host_network_ports(c);
        }
        default_container(c);
    }
    // After the containers' requests, which they are computed from.
    default_pod_level_requests(spec);
    default_pod_level_limits(spec);
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        default_container_fields!(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
}

/// Requests that are not given default to the limits (containers and init
/// containers of a Pod only).
fn default_requests_from_limits(resources: Option<&mut ResourceRequirements>) {
    let Some(r) = resources else { return };
    let Some(limits) = &r.limits else { return };
    let requests = r.requests.get_or_insert_with(Default::default);
    for (k, v) in limits {
        requests.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// `defaultPodRequests`: with pod-level limits, each supported resource without a pod-level
/// request gets the containers' aggregate request (an overcommittable one), else the pod-level
/// limit.
fn default_pod_level_requests(spec: &mut PodSpec) {
    let aggregate = pod_resources::aggregate_container_requests(Some(spec));
    let Some(r) = spec.resources.as_mut() else { return };
    let Some(limits) = r.limits.as_ref().filter(|l| !l.is_empty()) else { return };
    let mut requests = r.requests.clone().unwrap_or_default();
    for (name, amount) in aggregate {
        if is_supported_pod_level_resource(&name) && is_overcommit_allowed(&name) {
            requests.entry(name).or_insert_with(|| ApiQuantity(amount.to_string()));
        }
    }
    for (name, limit) in limits {
        if is_supported_pod_level_resource(name) {
            requests.entry(name.clone()).or_insert_with(|| limit.clone());
        }
    }
    if !requests.is_empty() {
        r.requests = Some(requests);
    }
}

/// `defaultPodLimits`: with pod-level requests and no pod-level limits, each overcommittable
/// supported resource that every container limits gets the containers' aggregate limit.
fn default_pod_level_limits(spec: &mut PodSpec) {
    let pod = Some(&*spec);
    if pod_resources::is_pod_level_limits_set(pod) || !pod_resources::is_pod_level_requests_set(pod) {
        return;
    }
    let limits: BTreeMap<String, ApiQuantity> = pod_resources::aggregate_container_limits(pod)
        .into_iter()
        .filter(|(name, _)| {
            is_supported_pod_level_resource(name)
                && is_overcommit_allowed(name)
                && pod_resources::all_containers_limit(spec, name)
        })
        .map(|(name, amount)| (name, ApiQuantity(amount.to_string())))
        .collect();
    if let Some(r) = spec.resources.as_mut().filter(|_| !limits.is_empty()) {
        r.limits.get_or_insert_default().extend(limits);
    }
}

/// With `hostNetwork`, every container port is also a host port.
fn default_host_network_ports(c: &mut Container) {
    for p in c.ports.iter_mut().flatten() {
        if p.host_port.is_none_or(|h| h == 0) {
            p.host_port = Some(p.container_port);
        }
    }
}

/// `SetDefaults_Container` and the defaulters of its nested fields.
pub fn default_container(c: &mut Container) {
    default_container_fields!(c);
}

fn default_env_var(e: &mut EnvVar) {
    if let Some(f) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
        default_field_selector(f);
    }
}

fn default_field_selector(f: &mut ObjectFieldSelector) {
    set_if_empty(&mut f.api_version, "v1");
}

/// `SetDefaults_Probe` plus handler defaults.
pub fn default_probe(p: &mut Probe) {
    set_if_zero_i32(&mut p.timeout_seconds, 1);
    set_if_zero_i32(&mut p.period_seconds, 10);
    set_if_zero_i32(&mut p.success_threshold, 1);
    set_if_zero_i32(&mut p.failure_threshold, 3);
    if p.initial_delay_seconds.is_none() {
        p.initial_delay_seconds = Some(0);
    }
    if let Some(h) = p.http_get.as_mut() {
        default_http_get(h);
    }
    if let Some(g) = p.grpc.as_mut()
        && g.service.is_none()
    {
        g.service = Some(String::new());
    }
}

fn default_http_get(h: &mut HTTPGetAction) {
    set_if_empty(&mut h.path, "/");
    set_if_empty(&mut h.scheme, "HTTP");
}

fn default_lifecycle(l: &mut Lifecycle) {
    for h in [l.post_start.as_mut(), l.pre_stop.as_mut()].into_iter().flatten() {
        default_lifecycle_handler(h);
    }
}

fn default_lifecycle_handler(h: &mut LifecycleHandler) {
    if let Some(g) = h.http_get.as_mut() {
        default_http_get(g);
    }
}

/// `SetDefaults_Volume` and the volume-source defaulters.
pub fn default_volume(v: &mut Volume) {
    if has_no_source(v) {
        v.empty_dir = Some(Default::default());
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(VOLUME_SOURCE_DEFAULT_MODE);
    }
    if let Some(s) = v.config_map.as_mut() {
        s.default_mode.get_or_insert(VOLUME_SOURCE_DEFAULT_MODE);
    }
    // `SetDefaults_ImageVolumeSource`: as a container's image.
    if let Some(i) = v.image.as_mut()
        && i.pull_policy.as_deref().is_none_or(str::is_empty)
    {
        i.pull_policy = Some(default_image_pull_policy(i.reference.as_deref().unwrap_or_default()).to_string());
    }
    if let Some(s) = v.downward_api.as_mut() {
        s.default_mode.get_or_insert(VOLUME_SOURCE_DEFAULT_MODE);
        for item in s.items.iter_mut().flatten() {
            if let Some(f) = item.field_ref.as_mut() {
                default_field_selector(f);
            }
        }
    }
    if let Some(s) = v.projected.as_mut() {
        s.default_mode.get_or_insert(VOLUME_SOURCE_DEFAULT_MODE);
        for src in s.sources.iter_mut().flatten() {
            if let Some(t) = src.service_account_token.as_mut() {
                t.expiration_seconds.get_or_insert(SERVICE_ACCOUNT_TOKEN_DEFAULT_EXPIRATION);
            }
            if let Some(d) = src.downward_api.as_mut() {
                for item in d.items.iter_mut().flatten() {
                    if let Some(f) = item.field_ref.as_mut() {
                        default_field_selector(f);
                    }
                }
            }
        }
    }
    if let Some(h) = v.host_path.as_mut()
        && h.type_.is_none()
    {
        h.type_ = Some(String::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_manifests;
    use k8s_openapi::api::core::v1::ImageVolumeSource;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod(yaml: &str) -> Pod {
        let mut pods = parse_manifests("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
        pods.remove(0)
    }

    fn minimal(containers: &str) -> String {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n{containers}")
    }

    #[test]
    fn pod_level_defaults() {
        let mut p = pod(&minimal("  - {name: a, image: busybox}\n"));
        apply_defaults(&mut p);
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        let uid = p.metadata.uid.clone().expect("uid");
        assert_eq!(uuid::Uuid::parse_str(&uid).map(|u| u.get_version_num()), Ok(4));
        let s = p.spec.as_ref().expect("spec");
        assert_eq!(s.restart_policy.as_deref(), Some("Always"));
        assert_eq!(s.termination_grace_period_seconds, Some(30));
        assert_eq!(s.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(s.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(s.security_context, Some(PodSecurityContext::default()));
        assert_eq!(s.enable_service_links, Some(true));

        // idempotent; explicit values are kept
        let before = p.clone();
        apply_defaults(&mut p);
        assert_eq!(p, before);
        let mut q = pod(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: fixed}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n  enableServiceLinks: false\n  containers: [{name: a, image: b}]\n",
        );
        apply_defaults(&mut q);
        assert_eq!(q.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(q.metadata.uid.as_deref(), Some("fixed"));
        let s = q.spec.as_ref().expect("spec");
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.termination_grace_period_seconds, Some(5));
        assert_eq!(s.enable_service_links, Some(false));

        let mut empty = Pod::default();
        apply_defaults(&mut empty);
        assert!(empty.spec.is_some());
    }

    #[test]
    fn pull_policy_by_tag() {
        let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            ("busybox".to_string(), "Always"),
            ("busybox:1.36".to_string(), "IfNotPresent"),
            ("busybox:latest".to_string(), "Always"),
            ("reg:5000/busybox".to_string(), "Always"),
            (format!("busybox@{sha}"), "IfNotPresent"),
        ];
        for (image, want) in cases {
            for init in [false, true] {
                let mut c = Container { name: "c".into(), image: Some(image.clone()), ..Default::default() };
                let mut spec = PodSpec::default();
                if init {
                    spec.init_containers = Some(vec![c.clone()]);
                } else {
                    spec.containers = vec![c.clone()];
                }
                default_pod_spec(&mut spec);
                c = if init { spec.init_containers.expect("init")[0].clone() } else { spec.containers[0].clone() };
                assert_eq!(c.image_pull_policy.as_deref(), Some(want), "image {image} init {init}");
            }
        }
        // an explicit policy is kept
        let mut c =
            Container { image: Some("busybox".into()), image_pull_policy: Some("Never".into()), ..Default::default() };
        default_container(&mut c);
        assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn an_image_volume_pull_policy_by_tag_as_a_container() {
        for (reference, set, want) in
            [("tools", None, "Always"), ("tools:1", None, "IfNotPresent"), ("tools", Some("Never"), "Never")]
        {
            let mut v = Volume {
                name: "v".into(),
                image: Some(ImageVolumeSource { reference: Some(reference.into()), pull_policy: set.map(Into::into) }),
                ..Default::default()
            };
            default_volume(&mut v);
            assert_eq!(v.image.and_then(|i| i.pull_policy).as_deref(), Some(want), "{reference} {set:?}");
        }
    }

    #[test]
    fn container_defaults() {
        let mut p = pod(&minimal(
            "  - name: a
    image: busybox:1
    ports: [{containerPort: 80}, {containerPort: 53, protocol: UDP}]
    env:
    - name: NAME_N
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    livenessProbe:
      httpGet: {port: 8080}
    readinessProbe:
      grpc: {port: 9000}
      periodSeconds: 3
    startupProbe:
      exec: {command: [\"true\"]}
    lifecycle:
      preStop:
        httpGet: {port: 80, path: /stop}
    resources:
      limits: {cpu: 500m, memory: 1Gi}
      requests: {cpu: 100m}
",
        ));
        apply_defaults(&mut p);
        let c = &p.spec.as_ref().expect("spec").containers[0];
        assert_eq!(c.termination_message_path.as_deref(), Some("/dev/termination-log"));
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        let ports = c.ports.as_ref().expect("ports");
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(ports[1].protocol.as_deref(), Some("UDP"));
        assert_eq!(ports[0].host_port, None);
        let env = &c.env.as_ref().expect("env")[0];
        let fr = env.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).expect("fieldRef");
        assert_eq!(fr.api_version.as_deref(), Some("v1"));

        let lp = c.liveness_probe.as_ref().expect("liveness");
        assert_eq!(
            (
                lp.timeout_seconds,
                lp.period_seconds,
                lp.success_threshold,
                lp.failure_threshold,
                lp.initial_delay_seconds
            ),
            (Some(1), Some(10), Some(1), Some(3), Some(0))
        );
        let hg = lp.http_get.as_ref().expect("httpGet");
        assert_eq!(hg.path.as_deref(), Some("/"));
        assert_eq!(hg.scheme.as_deref(), Some("HTTP"));
        let rp = c.readiness_probe.as_ref().expect("readiness");
        assert_eq!(rp.period_seconds, Some(3));
        assert_eq!(rp.grpc.as_ref().and_then(|g| g.service.as_deref()), Some(""));
        assert_eq!(c.startup_probe.as_ref().and_then(|p| p.failure_threshold), Some(3));
        let stop = c
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|h| h.http_get.as_ref())
            .expect("preStop httpGet");
        assert_eq!(stop.path.as_deref(), Some("/stop"));
        assert_eq!(stop.scheme.as_deref(), Some("HTTP"));

        let r = c.resources.as_ref().expect("resources");
        let req = r.requests.as_ref().expect("requests");
        assert_eq!(req["cpu"], Quantity("100m".into()));
        assert_eq!(req["memory"], Quantity("1Gi".into()));
    }

    #[test]
    fn host_network_ports_and_volumes() {
        let mut p = pod("\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostNetwork: true
  initContainers: [{name: i, image: b, ports: [{containerPort: 9000}]}]
  containers: [{name: a, image: b, ports: [{containerPort: 80}, {containerPort: 81, hostPort: 8081}]}]
  volumes:
  - name: nothing
  - name: s
    secret: {secretName: s}
  - name: c
    configMap: {name: c, defaultMode: 256}
  - name: d
    downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}
  - name: pr
    projected: {sources: [{serviceAccountToken: {path: t}}]}
  - name: h
    hostPath: {path: /tmp}
");
        apply_defaults(&mut p);
        let s = p.spec.as_ref().expect("spec");
        let ports = s.containers[0].ports.as_ref().expect("ports");
        assert_eq!(ports[0].host_port, Some(80));
        assert_eq!(ports[1].host_port, Some(8081));
        let iports = s.init_containers.as_ref().expect("init")[0].ports.as_ref().expect("ports");
        assert_eq!(iports[0].host_port, Some(9000));

        let v = s.volumes.as_ref().expect("volumes");
        assert!(v[0].empty_dir.is_some());
        assert_eq!(v[1].secret.as_ref().and_then(|x| x.default_mode), Some(420));
        assert_eq!(v[2].config_map.as_ref().and_then(|x| x.default_mode), Some(0o400));
        let d = v[3].downward_api.as_ref().expect("downwardAPI");
        assert_eq!(d.default_mode, Some(420));
        assert_eq!(
            d.items.as_ref().expect("items")[0].field_ref.as_ref().and_then(|f| f.api_version.as_deref()),
            Some("v1")
        );
        let pr = v[4].projected.as_ref().expect("projected");
        assert_eq!(
            pr.sources.as_ref().expect("sources")[0].service_account_token.as_ref().and_then(|t| t.expiration_seconds),
            Some(3600)
        );
        assert_eq!(v[5].host_path.as_ref().and_then(|h| h.type_.as_deref()), Some(""));
    }

    /// `defaultPodRequests` and `defaultPodLimits`: what the API server fills in of
    /// `spec.resources` from the pod-level limits and the containers.
    #[test]
    fn pod_level_resources_defaults() {
        let of = |spec: &str| {
            let mut p = pod(&format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n{spec}"));
            apply_defaults(&mut p);
            let r = p.spec.unwrap().resources;
            let show = |m: Option<BTreeMap<String, Quantity>>| {
                m.map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.0)).collect::<Vec<_>>().join(","))
            };
            r.map(|r| (show(r.requests), show(r.limits)))
        };
        let some = |requests: Option<&str>, limits: Option<&str>| {
            Some((requests.map(str::to_string), limits.map(str::to_string)))
        };
        let cases = [
            ("no pod-level resources", "  containers: [{name: a, image: b}]\n", None),
            (
                "requests from the containers' aggregate, else from the limits",
                "  resources: {limits: {cpu: \"1\", memory: 1Gi}}\n  containers:\n  - {name: a, image: b, resources: {requests: {cpu: 100m}}}\n  - {name: c, image: b, resources: {limits: {cpu: \"0.1\"}}}\n",
                some(Some("cpu=200m,memory=1Gi"), Some("cpu=1,memory=1Gi")),
            ),
            (
                "limits from the containers' when every container has one",
                "  resources: {requests: {cpu: 500m}}\n  initContainers: [{name: i, image: b, resources: {limits: {memory: 128Mi}}}]\n  containers: [{name: a, image: b, resources: {limits: {memory: 64Mi}}}]\n",
                some(Some("cpu=500m"), Some("memory=128Mi")),
            ),
            (
                "no limit when a container has none",
                "  resources: {requests: {cpu: 500m}}\n  containers:\n  - {name: a, image: b, resources: {limits: {memory: 64Mi}}}\n  - {name: c, image: b}\n",
                some(Some("cpu=500m"), None),
            ),
            (
                "pod-level limits are left as given",
                "  resources: {requests: {cpu: 500m}, limits: {cpu: \"1\"}}\n  containers: [{name: a, image: b, resources: {limits: {memory: 64Mi}}}]\n",
                some(Some("cpu=500m,memory=64Mi"), Some("cpu=1")),
            ),
        ];
        for (case, spec, want) in cases {
            assert_eq!(of(spec), want, "{case}");
        }
    }
}
