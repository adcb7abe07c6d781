use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{DeserializeOwned, Visitor};

use super::*;
use crate::manifest::parse_manifests;

/// A deserializer that only records the field list a k8s-openapi type passes to
/// `deserialize_struct`, so the table can be compared with the types themselves.
struct FieldNames<'a>(&'a mut Option<(&'static str, &'static [&'static str])>);

impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some((name, fields));
        Err(serde::de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

fn fields<T: DeserializeOwned>() -> (&'static str, &'static [&'static str]) {
    let mut out = None;
    let _ = T::deserialize(FieldNames(&mut out));
    out.expect("k8s-openapi types deserialize through deserialize_struct")
}

/// Every type the table reads, with its fields as k8s-openapi declares them.
fn k8s_types() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        fields::<core::Pod>(),
        fields::<ObjectMeta>(),
        fields::<core::PodSpec>(),
        fields::<core::PodDNSConfig>(),
        fields::<core::PodDNSConfigOption>(),
        fields::<core::HostAlias>(),
        fields::<core::PodOS>(),
        fields::<core::ServiceAccountTokenProjection>(),
        fields::<core::PodSecurityContext>(),
        fields::<core::Sysctl>(),
        fields::<core::Volume>(),
        fields::<core::EmptyDirVolumeSource>(),
        fields::<core::ConfigMapVolumeSource>(),
        fields::<core::SecretVolumeSource>(),
        fields::<core::KeyToPath>(),
        fields::<core::DownwardAPIVolumeSource>(),
        fields::<core::DownwardAPIVolumeFile>(),
        fields::<core::ProjectedVolumeSource>(),
        fields::<core::VolumeProjection>(),
        fields::<core::ConfigMapProjection>(),
        fields::<core::SecretProjection>(),
        fields::<core::DownwardAPIProjection>(),
        fields::<core::ConfigMapKeySelector>(),
        fields::<core::SecretKeySelector>(),
        fields::<core::FileKeySelector>(),
        fields::<core::ResourceFieldSelector>(),
        fields::<core::EnvFromSource>(),
        fields::<core::ConfigMapEnvSource>(),
        fields::<core::SecretEnvSource>(),
        fields::<core::HostPathVolumeSource>(),
        fields::<core::ImageVolumeSource>(),
        fields::<core::Container>(),
        fields::<core::ContainerRestartRule>(),
        fields::<core::ContainerRestartRuleOnExitCodes>(),
        fields::<core::EnvVar>(),
        fields::<core::EnvVarSource>(),
        fields::<core::ObjectFieldSelector>(),
        fields::<core::ContainerPort>(),
        fields::<core::ResourceRequirements>(),
        fields::<core::SecurityContext>(),
        fields::<core::Capabilities>(),
        fields::<core::SeccompProfile>(),
        fields::<core::VolumeMount>(),
        fields::<core::Probe>(),
        fields::<core::Lifecycle>(),
        fields::<core::LifecycleHandler>(),
        fields::<core::ExecAction>(),
        fields::<core::HTTPGetAction>(),
        fields::<core::HTTPHeader>(),
        fields::<core::TCPSocketAction>(),
        fields::<core::GRPCAction>(),
        fields::<core::SleepAction>(),
    ]
}

#[test]
fn every_field_of_every_type_read_is_in_the_table() {
    let types = k8s_types();
    let mut problems = Vec::new();
    for (name, k8s_fields) in &types {
        let in_table: BTreeSet<&str> = fields_of(name).iter().map(|(f, _)| *f).collect();
        let in_k8s: BTreeSet<&str> = k8s_fields.iter().copied().collect();
        for missing in in_k8s.difference(&in_table) {
            problems.push(format!("{name}.{missing} is not in the table: honour it or refuse it"));
        }
        for gone in in_table.difference(&in_k8s) {
            problems.push(format!("{name}.{gone} is in the table but not a field of {name}"));
        }
    }
    let checked: BTreeSet<&str> = types.iter().map(|(name, _)| *name).collect();
    for (name, fields) in TABLE {
        if !checked.contains(name) {
            problems.push(format!("{name} is in the table but its fields are not compared with k8s-openapi"));
        }
        for (field, support) in *fields {
            if let Support::Fields(target) | Support::InCluster(target) = support
                && !checked.contains(target)
            {
                problems.push(format!("{name}.{field} is read by the fields of {target}, which has no table"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn refusals(yaml: &str) -> Vec<String> {
    refusals_in(yaml, Mode::Local)
}

fn refusals_in(yaml: &str, mode: Mode) -> Vec<String> {
    let pods = parse_manifests("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
    unsupported_fields_in(&pods[0], mode).iter().map(ToString::to_string).collect()
}

#[test]
fn fields_podwright_does_not_honour_are_refused_one_line_each() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostNetwork: true
  runtimeClassName: kata
  os: {name: windows}
  securityContext: {runAsUser: 1000, runAsNonRoot: true, fsGroup: 2000, sysctls: [{name: net.core.somaxconn, value: "1024"}]}
  volumes:
  - {name: cfg, configMap: {name: cfg}}
  - {name: host, nfs: {server: nfs.local, path: /exports}}
  - {name: s, secret: {secretName: s}}
  - {name: huge, emptyDir: {medium: HugePages}}
  containers:
  - name: app
    image: busybox
    envFrom: [{configMapRef: {name: cfg}}]
    env:
    - name: APP
      valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}
    - name: CPU
      valueFrom: {resourceFieldRef: {resource: limits.cpu}}
    ports: [{containerPort: 80, hostPort: 8080}]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 200m, memory: 64Mi, ephemeral-storage: 1Gi, example.com/gpu: 1}
    securityContext: {capabilities: {add: [NET_ADMIN]}, privileged: true, appArmorProfile: {type: RuntimeDefault}}
    volumeDevices: [{name: blk, devicePath: /dev/xvda}]
"#;
    assert_eq!(
        refusals(yaml),
        [
            "spec.containers[0].resources.limits[example.com/gpu]: Unsupported value: \"1\": not supported by podwright yet",
            "spec.containers[0].securityContext.appArmorProfile: Unsupported value: not supported by podwright yet",
            "spec.containers[0].volumeDevices: Unsupported value: not supported by podwright yet",
            "spec.volumes[1].nfs: Unsupported value: not supported by podwright yet",
            "spec.volumes[3].emptyDir.medium: Unsupported value: \"HugePages\": not supported by podwright yet; supported values: \"Memory\"",
        ]
    );
}

/// What `kubectl run -it` asks for: a container with stdin open, closed after the first
/// attach, on a terminal.
#[test]
fn interactive_containers_are_honoured() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: shell, image: busybox, stdin: true, stdinOnce: true, tty: true}
"#;
    assert_eq!(refusals(yaml), Vec::<String>::new());
}

/// A simple pod as `kubectl get pod -o yaml` prints it (the API server's defaults and the
/// scheduler's fields), without the service account token volume admission adds.
const FROM_KUBECTL: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2025-01-01T00:00:00Z"
  generateName: web-7d4b9c-
  labels: {app: web, pod-template-hash: 7d4b9c}
  name: web-7d4b9c-x2x4z
  namespace: default
  ownerReferences:
  - {apiVersion: apps/v1, blockOwnerDeletion: true, controller: true, kind: ReplicaSet, name: web-7d4b9c, uid: 0b5c3a8e-0000-4000-8000-000000000001}
  resourceVersion: "4242"
  uid: 0b5c3a8e-0000-4000-8000-000000000002
spec:
  containers:
  - image: busybox:1.36
    imagePullPolicy: IfNotPresent
    name: web
    ports: [{containerPort: 8080, protocol: TCP}]
    resources: {limits: {memory: 64Mi}, requests: {cpu: 100m, memory: 64Mi}}
    securityContext: {allowPrivilegeEscalation: true, privileged: false, capabilities: {}}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts: [{mountPath: /data, name: data}]
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  hostNetwork: false
  nodeName: node-1
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  serviceAccount: default
  serviceAccountName: default
  terminationGracePeriodSeconds: 30
  tolerations:
  - {effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}
  - {effect: NoExecute, key: node.kubernetes.io/unreachable, operator: Exists, tolerationSeconds: 300}
  volumes:
  - {name: data, emptyDir: {}}
status: {phase: Pending, qosClass: Burstable}
"#;

/// Extended resources are counted by a cluster node's admission against what the cluster
/// advertises; a local node has none to give.
#[test]
fn extended_resources_are_honoured_on_a_node_of_a_cluster_only() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: app
    image: busybox
    resources:
      requests: {cpu: 100m, example.com/gpu: 1}
      limits: {example.com/gpu: 1, hugepages-2Mi: 2Mi}
"#;
    assert_eq!(
        refusals_in(yaml, Mode::Cluster),
        [
            "spec.containers[0].resources.limits[hugepages-2Mi]: Unsupported value: \"2Mi\": not supported by podwright yet"
        ]
    );
    assert_eq!(
        refusals(yaml),
        [
            "spec.containers[0].resources.limits[example.com/gpu]: Unsupported value: \"1\": not supported by podwright yet",
            "spec.containers[0].resources.limits[hugepages-2Mi]: Unsupported value: \"2Mi\": not supported by podwright yet",
            "spec.containers[0].resources.requests[example.com/gpu]: Unsupported value: \"1\": not supported by podwright yet",
        ]
    );
}

#[test]
fn defaults_and_scheduling_fields_are_accepted() {
    assert_eq!(refusals(FROM_KUBECTL), Vec::<String>::new());
    // The token volume admission adds is a projected volume podwright cannot fill.
    let with_token = FROM_KUBECTL.replace(
        "  - {name: data, emptyDir: {}}",
        "  - {name: data, emptyDir: {}}\n  - {name: kube-api-access-x, projected: {sources: [{serviceAccountToken: {path: token}}]}}",
    );
    assert_eq!(
        refusals(&with_token),
        ["spec.volumes[1].projected.sources[0].serviceAccountToken: Unsupported value: not supported by podwright yet"]
    );
    // On a node of a cluster the API server issues the token.
    let pods = parse_manifests("t.yaml", &with_token).unwrap();
    assert!(unsupported_fields_in(&pods[0], Mode::Cluster).is_empty());
}

#[test]
fn values_equal_to_what_leaving_a_field_out_means_are_accepted() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostPID: false
  hostUsers: true
  os: {name: linux}
  imagePullSecrets: []
  securityContext: {runAsNonRoot: false, supplementalGroups: [], sysctls: []}
  initContainers:
  - name: init
    image: busybox
    envFrom: []
    ports: [{containerPort: 53, hostPort: 0, protocol: UDP}]
    volumeMounts: [{name: v, mountPath: /v, mountPropagation: HostToContainer, recursiveReadOnly: Disabled, subPath: x}]
    securityContext: {capabilities: {add: [], drop: []}, procMount: Default, readOnlyRootFilesystem: false}
  containers:
  - name: app
    image: busybox
    env:
    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: IP, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: status.podIP}}}
    resources: {limits: {cpu: 500m}}
    stdin: false
    lifecycle:
      postStart: {exec: {command: ["true"]}}
      preStop: {httpGet: {port: 80, httpHeaders: [{name: X, value: z}]}}
    livenessProbe: {grpc: {port: 9000, service: s}, periodSeconds: 5}
    readinessProbe: {tcpSocket: {port: 80}}
  volumes:
  - {name: v, emptyDir: {medium: ""}}
  - {name: m, emptyDir: {medium: Memory, sizeLimit: 64Mi}}
  - {name: h, hostPath: {path: /var/log, type: Directory}}
"#;
    assert_eq!(refusals(yaml), Vec::<String>::new());
}

#[test]
fn host_names_and_name_resolution_are_honoured() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostname: db-0
  subdomain: db
  setHostnameAsFQDN: true
  hostAliases: [{ip: 10.1.2.3, hostnames: [foo.local, bar.local]}]
  dnsPolicy: None
  dnsConfig:
    nameservers: [1.1.1.1]
    searches: [example.com]
    options: [{name: ndots, value: "2"}, {name: edns0}]
  containers: [{name: app, image: busybox}]
"#;
    assert_eq!(refusals(yaml), Vec::<String>::new());
}

#[test]
fn what_the_runtime_lacks_is_refused_saying_so() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostUsers: false
  volumes: [{name: tools, image: {reference: "registry.local/tools:1"}}, {name: d, emptyDir: {}}]
  # An image volume is honoured: a runtime that cannot mount one fails the pod before it starts.
  containers:
  - name: app
    image: busybox
    lifecycle: {stopSignal: SIGUSR1}
    volumeMounts: [{name: d, mountPath: /d, readOnly: true, recursiveReadOnly: IfPossible}]
"#;
    let lacks = |what: &str| {
        format!(
            "not supported by podwright yet: needs {what} from the container runtime, which podwright does not ask of it yet"
        )
    };
    assert_eq!(
        refusals(yaml),
        [
            format!(
                "spec.containers[0].lifecycle.stopSignal: Unsupported value: \"SIGUSR1\": {}",
                lacks("stop signals")
            ),
            format!("spec.hostUsers: Unsupported value: false: {}", lacks("user namespaces")),
        ]
    );
}

/// Pod-level resources are honoured for cpu and memory; hugepages, which the node does not
/// offer, are refused by name.
#[test]
fn pod_level_resources_are_honoured_for_cpu_and_memory() {
    let yaml = r#"apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resources:
    requests: {cpu: 100m, memory: 64Mi}
    limits: {cpu: 200m, memory: 64Mi, hugepages-2Mi: 2Mi}
  containers: [{name: app, image: busybox}]
"#;
    assert_eq!(
        refusals(yaml),
        ["spec.resources.limits[hugepages-2Mi]: Unsupported value: \"2Mi\": not supported by podwright yet"]
    );
}

/// Ephemeral storage is honoured: requests are admitted against the node, limits enforced by
/// the eviction manager.
#[test]
fn ephemeral_storage_requests_and_limits_are_honoured() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - {name: i, image: busybox, resources: {limits: {ephemeral-storage: 1Gi}}}
  containers:
  - {name: app, image: busybox, resources: {requests: {ephemeral-storage: 64Mi}, limits: {ephemeral-storage: 1Gi}}}
"#;
    assert_eq!(refusals(yaml), Vec::<String>::new());
}
