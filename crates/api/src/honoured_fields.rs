//! Which Pod fields podwright honours, in one table to hold against the Pod type, and the check
//! that refuses a pod using any other (issue 8: no field silently ignored). A field the kubelet
//! acts on but podwright does not is refused before anything starts, one error per field in the
//! API server's format, instead of running the pod without it.
//!
//! The check reads the pod as the user wrote it (after the legacy init-container annotations are
//! converted, before defaulting), so each error names a field the manifest sets. Values the API
//! server would fill in by default (`dnsPolicy: ClusterFirst`, `hostNetwork: false`,
//! `securityContext: {}`, ...) are accepted where podwright behaves as that default does.
//!
//! A field missing from the table is refused too, so a field added by a newer k8s-openapi is
//! refused until someone decides; the tests compare the table with k8s-openapi's field lists.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::field_error::{ErrorKind, FieldError, FieldPath};
use crate::go;
use crate::pod_resources::is_extended_resource;

/// The detail of every refusal.
pub const NOT_SUPPORTED: &str = "not supported by podwright yet";

/// What podwright does with one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Honoured as the kubelet honours it.
    Honoured,
    /// Honoured, and so is each field of the object (or of each object of the list), by the
    /// table of the named type.
    Fields(&'static str),
    /// Accepted and without effect, because it has none on a node; the reason says why.
    Inert(&'static str),
    /// Honoured with these values only; any other value is refused.
    Only(&'static [Allowed]),
    /// A map honoured for these keys only; every other key is refused.
    Keys(&'static [&'static str]),
    /// A resource list honoured for these names, and on a node of a cluster also for extended
    /// resources (`example.com/gpu`): the node admits a pod by them against the allocatable the
    /// cluster advertises, as the kubelet does for a resource no device plugin of its own
    /// manages (nothing is handed to the container). No one advertises them to a local node.
    Resources(&'static [&'static str]),
    /// Honoured, with the fields of the named type, on a node of a cluster only (the API
    /// server provides what it needs); refused elsewhere.
    InCluster(&'static str),
    /// Honoured with these values only, like [`Support::Only`]; any other needs the named
    /// feature of the container runtime, which podwright does not ask for yet (containerd 1.6
    /// lacks it too), and is refused saying so.
    NeedsRuntime(&'static [Allowed], &'static str),
    /// Not honoured: refused whatever its value.
    Refused,
}

/// Where a pod runs, for the fields only a cluster can honour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `run` and the local API of `serve`.
    Local,
    /// A node of a cluster (`serve --kubeconfig`).
    Cluster,
}

/// A value [`Support::Only`] accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// Null, `""`, `[]`, or an object whose fields are all unset: what leaving it out means.
    Unset,
    Bool(bool),
    Str(&'static str),
}

use Allowed::{Bool, Str, Unset};
use Support::{Fields, Honoured, InCluster, Inert, Keys, NeedsRuntime, Only, Refused, Resources};

const UNSET: Support = Only(&[Unset]);
const SCHEDULING: Support = Inert("the scheduler's concern: the pod is already on this node");
const INFORMATIONAL: Support = Inert("informational");

/// Every field of every type podwright reads, by its JSON name, in k8s-openapi's order.
pub const TABLE: &[(&str, &[(&str, Support)])] = &[
    (
        "Pod",
        &[
            ("apiVersion", Honoured),
            ("kind", Honoured),
            ("metadata", Fields("ObjectMeta")),
            ("spec", Fields("PodSpec")),
            ("status", Inert("the API server ignores it on create")),
        ],
    ),
    (
        "ObjectMeta",
        &[
            ("annotations", Honoured),
            ("creationTimestamp", Honoured),
            ("deletionGracePeriodSeconds", INFORMATIONAL),
            ("deletionTimestamp", INFORMATIONAL),
            ("finalizers", INFORMATIONAL),
            // Validation requires a name, so generateName never generates one.
            ("generateName", INFORMATIONAL),
            ("generation", INFORMATIONAL),
            ("labels", Honoured),
            ("managedFields", INFORMATIONAL),
            ("name", Honoured),
            ("namespace", Honoured),
            ("ownerReferences", INFORMATIONAL),
            ("resourceVersion", INFORMATIONAL),
            ("selfLink", INFORMATIONAL),
            ("uid", Honoured),
        ],
    ),
    (
        "PodSpec",
        &[
            ("activeDeadlineSeconds", Honoured),
            ("affinity", SCHEDULING),
            // The token volume it asks for is added by admission, and a projected volume is refused.
            ("automountServiceAccountToken", Inert("service account tokens are mounted by a projected volume")),
            ("containers", Fields("Container")),
            ("dnsConfig", Fields("PodDNSConfig")),
            // `serve` gives ClusterFirst pods its cluster DNS; `run` has none, and like a kubelet
            // without cluster DNS resolves ClusterFirst as Default (the host's resolv.conf), with
            // its MissingClusterDNS event.
            ("dnsPolicy", Honoured),
            // The Services' variables: the API server's in a cluster, the local API's in `serve`,
            // none in `run`.
            ("enableServiceLinks", Honoured),
            ("ephemeralContainers", Inert("validation forbids them on create")),
            // Responders of the Eviction API (alpha in 1.37), which no node acts on for them.
            ("evictionResponders", UNSET),
            ("hostAliases", Fields("HostAlias")),
            ("hostIPC", Honoured),
            ("hostNetwork", Honoured),
            ("hostPID", Honoured),
            ("hostUsers", NeedsRuntime(&[Unset, Bool(true)], "user namespaces")),
            ("hostname", Honoured),
            ("hostnameOverride", Honoured),
            // Secrets of the pod's namespace, merged with the node's config.json at each pull.
            ("imagePullSecrets", Honoured),
            ("initContainers", Fields("Container")),
            ("nodeName", SCHEDULING),
            ("nodeSelector", SCHEDULING),
            ("os", Fields("PodOS")),
            // Set from the pod's RuntimeClass at admission; added to the effective pod
            // resources and the pod-level cgroup.
            ("overhead", Keys(&["cpu", "memory"])),
            ("preemptionPolicy", SCHEDULING),
            ("priority", SCHEDULING),
            ("priorityClassName", SCHEDULING),
            ("readinessGates", Honoured),
            ("resourceClaims", UNSET),
            // Pod-level resources (KEP-2837): the pod cgroup, the QoS class, the effective
            // requests and limits, and the limits of containers without their own.
            ("resources", Fields("ResourceRequirements")),
            ("restartPolicy", Honoured),
            ("runtimeClassName", Honoured),
            ("schedulerName", SCHEDULING),
            // A gated pod is not scheduled, so it would not run at all.
            ("schedulingGates", UNSET),
            ("schedulingGroup", SCHEDULING),
            ("securityContext", Fields("PodSecurityContext")),
            ("serviceAccount", Honoured),
            ("serviceAccountName", Honoured),
            ("setHostnameAsFQDN", Honoured),
            ("shareProcessNamespace", Honoured),
            ("subdomain", Honoured),
            ("terminationGracePeriodSeconds", Honoured),
            ("tolerations", SCHEDULING),
            ("topologySpreadConstraints", SCHEDULING),
            ("volumes", Fields("Volume")),
        ],
    ),
    ("PodDNSConfig", &[("nameservers", Honoured), ("options", Fields("PodDNSConfigOption")), ("searches", Honoured)]),
    ("PodDNSConfigOption", &[("name", Honoured), ("value", Honoured)]),
    ("HostAlias", &[("hostnames", Honoured), ("ip", Honoured)]),
    // The node's admission fails a pod for another OS (`PodOSNotSupported`), as the kubelet's.
    ("PodOS", &[("name", Honoured)]),
    (
        "PodSecurityContext",
        &[
            ("appArmorProfile", UNSET),
            // A supplemental group of every container, and the group owning its emptyDir,
            // configMap, secret, downwardAPI and projected volumes.
            ("fsGroup", Honoured),
            // The kubelet applies it to persistent volumes only (podwright has none): the volumes
            // above are changed whatever it says.
            ("fsGroupChangePolicy", Inert("only persistent volumes, which are refused, heed it")),
            ("runAsGroup", Honoured),
            ("runAsNonRoot", Honoured),
            ("runAsUser", Honoured),
            ("seLinuxChangePolicy", UNSET),
            // Passed to the runtime, as the kubelet does: it labels with them where SELinux is on.
            ("seLinuxOptions", Honoured),
            ("seccompProfile", Fields("SeccompProfile")),
            ("supplementalGroups", Honoured),
            // Strict needs a runtime that reports it supports it; containerd 1.6 does not.
            ("supplementalGroupsPolicy", Only(&[Unset, Str("Merge")])),
            // The kubelet's safe sysctls; any other fails the pod (`SysctlForbidden`).
            ("sysctls", Fields("Sysctl")),
            ("windowsOptions", UNSET),
        ],
    ),
    ("Sysctl", &[("name", Honoured), ("value", Honoured)]),
    (
        "Volume",
        &[
            ("awsElasticBlockStore", Refused),
            ("azureDisk", Refused),
            ("azureFile", Refused),
            ("cephfs", Refused),
            ("cinder", Refused),
            ("configMap", Fields("ConfigMapVolumeSource")),
            ("csi", Refused),
            ("downwardAPI", Fields("DownwardAPIVolumeSource")),
            ("emptyDir", Fields("EmptyDirVolumeSource")),
            ("ephemeral", Refused),
            ("fc", Refused),
            ("flexVolume", Refused),
            ("flocker", Refused),
            ("gcePersistentDisk", Refused),
            ("gitRepo", Refused),
            ("glusterfs", Refused),
            ("hostPath", Fields("HostPathVolumeSource")),
            ("image", Fields("ImageVolumeSource")),
            ("iscsi", Refused),
            ("name", Honoured),
            ("nfs", Refused),
            ("persistentVolumeClaim", Refused),
            ("photonPersistentDisk", Refused),
            ("portworxVolume", Refused),
            ("projected", Fields("ProjectedVolumeSource")),
            ("quobyte", Refused),
            ("rbd", Refused),
            ("scaleIO", Refused),
            ("secret", Fields("SecretVolumeSource")),
            ("storageos", Refused),
            ("vsphereVolume", Refused),
        ],
    ),
    // On the node's disk, or a tmpfs (`Memory`); hugepages are not. A size limit on disk is
    // enforced by eviction, on tmpfs by the tmpfs's size.
    // The directory's mode (EmptyDirVolumeMode, alpha in 1.37) is not set.
    ("EmptyDirVolumeSource", &[("medium", Only(&[Unset, Str("Memory")])), ("mode", UNSET), ("sizeLimit", Honoured)]),
    ("HostPathVolumeSource", &[("path", Honoured), ("type", Honoured)]),
    // Mounted by the runtime (CRI `Mount.image`); a runtime that cannot fails the pod before
    // its sandbox is made.
    ("ImageVolumeSource", &[("pullPolicy", Honoured), ("reference", Honoured)]),
    (
        "ConfigMapVolumeSource",
        &[
            ("defaultMode", Honoured),
            // The files' owner (AtomicWriteVolumeUserFields, alpha in 1.37) is not set.
            ("defaultUser", UNSET),
            ("items", Fields("KeyToPath")),
            ("name", Honoured),
            ("optional", Honoured),
        ],
    ),
    (
        "SecretVolumeSource",
        &[
            ("defaultMode", Honoured),
            ("defaultUser", UNSET),
            ("items", Fields("KeyToPath")),
            ("optional", Honoured),
            ("secretName", Honoured),
        ],
    ),
    ("KeyToPath", &[("key", Honoured), ("mode", Honoured), ("path", Honoured), ("user", UNSET)]),
    (
        "DownwardAPIVolumeSource",
        &[("defaultMode", Honoured), ("defaultUser", UNSET), ("items", Fields("DownwardAPIVolumeFile"))],
    ),
    (
        "DownwardAPIVolumeFile",
        &[
            ("fieldRef", Fields("ObjectFieldSelector")),
            ("mode", Honoured),
            ("path", Honoured),
            ("resourceFieldRef", Fields("ResourceFieldSelector")),
            ("user", UNSET),
        ],
    ),
    (
        "ProjectedVolumeSource",
        &[("defaultMode", Honoured), ("defaultUser", UNSET), ("sources", Fields("VolumeProjection"))],
    ),
    (
        "VolumeProjection",
        &[
            ("clusterTrustBundle", Refused),
            ("configMap", Fields("ConfigMapProjection")),
            ("downwardAPI", Fields("DownwardAPIProjection")),
            // Issued through PodCertificateRequests to a signer; there is none to ask.
            ("podCertificate", Refused),
            ("secret", Fields("SecretProjection")),
            // Issued by the API server (TokenRequest): without one there is no issuer.
            ("serviceAccountToken", InCluster("ServiceAccountTokenProjection")),
        ],
    ),
    (
        "ServiceAccountTokenProjection",
        &[("audience", Honoured), ("expirationSeconds", Honoured), ("path", Honoured), ("user", UNSET)],
    ),
    ("ConfigMapProjection", &[("items", Fields("KeyToPath")), ("name", Honoured), ("optional", Honoured)]),
    ("SecretProjection", &[("items", Fields("KeyToPath")), ("name", Honoured), ("optional", Honoured)]),
    ("DownwardAPIProjection", &[("items", Fields("DownwardAPIVolumeFile"))]),
    (
        "Container",
        &[
            ("args", Honoured),
            ("command", Honoured),
            ("env", Fields("EnvVar")),
            ("envFrom", Fields("EnvFromSource")),
            ("image", Honoured),
            ("imagePullPolicy", Honoured),
            ("lifecycle", Fields("Lifecycle")),
            ("livenessProbe", Fields("Probe")),
            ("name", Honoured),
            ("ports", Fields("ContainerPort")),
            ("readinessProbe", Fields("Probe")),
            ("resizePolicy", Honoured),
            ("resources", Fields("ResourceRequirements")),
            ("restartPolicy", Honoured),
            ("restartPolicyRules", Fields("ContainerRestartRule")),
            ("securityContext", Fields("SecurityContext")),
            ("startupProbe", Fields("Probe")),
            ("stdin", Honoured),
            ("stdinOnce", Honoured),
            ("terminationMessagePath", Honoured),
            ("terminationMessagePolicy", Honoured),
            ("tty", Honoured),
            ("volumeDevices", UNSET),
            ("volumeMounts", Fields("VolumeMount")),
            ("workingDir", Honoured),
        ],
    ),
    // Both actions: `Restart` (the container) and `RestartAllContainers` (every container of
    // the pod, in its sandbox).
    ("ContainerRestartRule", &[("action", Honoured), ("exitCodes", Fields("ContainerRestartRuleOnExitCodes"))]),
    ("ContainerRestartRuleOnExitCodes", &[("operator", Honoured), ("values", Honoured)]),
    ("EnvVar", &[("name", Honoured), ("value", Honoured), ("valueFrom", Fields("EnvVarSource"))]),
    (
        "EnvVarSource",
        &[
            ("configMapKeyRef", Fields("ConfigMapKeySelector")),
            ("fieldRef", Fields("ObjectFieldSelector")),
            ("fileKeyRef", Fields("FileKeySelector")),
            ("resourceFieldRef", Fields("ResourceFieldSelector")),
            ("secretKeyRef", Fields("SecretKeySelector")),
        ],
    ),
    ("ConfigMapKeySelector", &[("key", Honoured), ("name", Honoured), ("optional", Honoured)]),
    // An env file an init container wrote into an emptyDir (cri::env_file in the node).
    ("FileKeySelector", &[("key", Honoured), ("optional", Honoured), ("path", Honoured), ("volumeName", Honoured)]),
    ("SecretKeySelector", &[("key", Honoured), ("name", Honoured), ("optional", Honoured)]),
    ("ResourceFieldSelector", &[("containerName", Honoured), ("divisor", Honoured), ("resource", Honoured)]),
    (
        "EnvFromSource",
        &[
            ("configMapRef", Fields("ConfigMapEnvSource")),
            ("prefix", Honoured),
            ("secretRef", Fields("SecretEnvSource")),
        ],
    ),
    ("ConfigMapEnvSource", &[("name", Honoured), ("optional", Honoured)]),
    ("SecretEnvSource", &[("name", Honoured), ("optional", Honoured)]),
    (
        "ObjectFieldSelector",
        &[
            ("apiVersion", Honoured),
            // Every path validation allows (crate::downward in the node).
            ("fieldPath", Honoured),
        ],
    ),
    (
        "ContainerPort",
        &[
            ("containerPort", Honoured),
            // Through the CNI portmap plugin, for the pod's containers (not its init containers:
            // the kubelet maps those of `containers` only).
            ("hostIP", Honoured),
            ("hostPort", Honoured),
            ("name", Honoured),
            ("protocol", Honoured),
        ],
    ),
    (
        "ResourceRequirements",
        &[
            ("claims", UNSET),
            // A CPU limit is the CFS quota and a memory limit the cgroup's limit; an
            // ephemeral-storage limit is the eviction manager's, for the container and the pod.
            ("limits", Resources(&["cpu", "memory", "ephemeral-storage"])),
            // A CPU request is the cgroup's CPU shares; a memory request counts towards the QoS
            // class and the effective pod requests; an ephemeral-storage request is admitted
            // against the node's allocatable.
            ("requests", Resources(&["cpu", "memory", "ephemeral-storage"])),
        ],
    ),
    (
        "SecurityContext",
        &[
            ("allowPrivilegeEscalation", Honoured),
            ("appArmorProfile", UNSET),
            ("capabilities", Fields("Capabilities")),
            ("privileged", Honoured),
            // Validation allows Unmasked only with `hostUsers: false`, which is refused.
            ("procMount", Honoured),
            ("readOnlyRootFilesystem", Honoured),
            ("runAsGroup", Honoured),
            ("runAsNonRoot", Honoured),
            ("runAsUser", Honoured),
            ("seLinuxOptions", Honoured),
            ("seccompProfile", Fields("SeccompProfile")),
            ("windowsOptions", UNSET),
        ],
    ),
    ("Capabilities", &[("add", Honoured), ("drop", Honoured)]),
    // Localhost profiles are read from `<root>/seccomp`, as the kubelet's `seccompProfileRoot`.
    ("SeccompProfile", &[("localhostProfile", Honoured), ("type", Honoured)]),
    (
        "VolumeMount",
        &[
            // noexec, nodev, nosuid on the bind mount (VolumeBindMountOptions, alpha in 1.37).
            ("bindMountOptions", UNSET),
            ("mountPath", Honoured),
            ("mountPropagation", Honoured),
            ("name", Honoured),
            ("readOnly", Honoured),
            // Recursive where the pod's runtime handler says it can be (CRI `Status`); on
            // containerd 1.6 `IfPossible` is plainly read-only and `Enabled` fails the container.
            ("recursiveReadOnly", Honoured),
            ("subPath", Honoured),
            ("subPathExpr", Honoured),
        ],
    ),
    (
        "Probe",
        &[
            ("exec", Fields("ExecAction")),
            ("failureThreshold", Honoured),
            ("grpc", Fields("GRPCAction")),
            ("httpGet", Fields("HTTPGetAction")),
            ("initialDelaySeconds", Honoured),
            ("periodSeconds", Honoured),
            ("successThreshold", Honoured),
            ("tcpSocket", Fields("TCPSocketAction")),
            ("terminationGracePeriodSeconds", Honoured),
            ("timeoutSeconds", Honoured),
        ],
    ),
    (
        "Lifecycle",
        &[
            ("postStart", Fields("LifecycleHandler")),
            ("preStop", Fields("LifecycleHandler")),
            // ContainerStopSignals, beta in 1.37: the CRI's stop_signal, which containerd 1.6
            // has not.
            ("stopSignal", NeedsRuntime(&[Unset], "stop signals")),
        ],
    ),
    (
        "LifecycleHandler",
        &[
            ("exec", Fields("ExecAction")),
            ("httpGet", Fields("HTTPGetAction")),
            ("sleep", Fields("SleepAction")),
            // The kubelet runs no tcpSocket hook either: the hook fails as "invalid handler".
            ("tcpSocket", Fields("TCPSocketAction")),
        ],
    ),
    ("ExecAction", &[("command", Honoured)]),
    (
        "HTTPGetAction",
        &[
            ("host", Honoured),
            ("httpHeaders", Fields("HTTPHeader")),
            ("path", Honoured),
            ("port", Honoured),
            // HTTP/2 cleartext probes (H2CContainerProbe, alpha in 1.37).
            ("protocol", UNSET),
            ("scheme", Honoured),
        ],
    ),
    ("HTTPHeader", &[("name", Honoured), ("value", Honoured)]),
    ("TCPSocketAction", &[("host", Honoured), ("port", Honoured)]),
    // TLS gRPC probes (GRPCContainerProbeTLS, alpha in 1.37); Plaintext is what an unset mode does.
    ("GRPCAction", &[("mode", Only(&[Unset, Str("Plaintext")])), ("port", Honoured), ("service", Honoured)]),
    ("SleepAction", &[("seconds", Honoured)]),
];

/// The fields of `type_name` in [`TABLE`] (none for a type it does not list).
pub fn fields_of(type_name: &str) -> &'static [(&'static str, Support)] {
    TABLE.iter().find(|(name, _)| *name == type_name).map_or(&[], |(_, fields)| fields)
}

/// Every field of `pod` that podwright does not honour on one machine, in field order.
pub fn unsupported_fields(pod: &Pod) -> Vec<FieldError> {
    unsupported_fields_in(pod, Mode::Local)
}

/// Every field of `pod` that podwright does not honour in `mode`, in field order.
pub fn unsupported_fields_in(pod: &Pod, mode: Mode) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match serde_json::to_value(pod) {
        Ok(value) => check_object("Pod", &value, &FieldPath::default(), mode, &mut errs),
        Err(e) => errs.push(FieldError::internal("", e.to_string())),
    }
    errs
}

fn check_object(type_name: &str, value: &Value, path: &FieldPath, mode: Mode, errs: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            let fields = fields_of(type_name);
            for (name, v) in map.iter().filter(|(_, v)| !v.is_null()) {
                let support = fields.iter().find(|(f, _)| f == name).map_or(Refused, |(_, s)| *s);
                check_field(support, v, &path.child(name), mode, errs);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_object(type_name, item, &path.index(i), mode, errs);
            }
        }
        _ => {}
    }
}

fn check_field(support: Support, value: &Value, path: &FieldPath, mode: Mode, errs: &mut Vec<FieldError>) {
    match support {
        Honoured | Inert(_) => {}
        Fields(type_name) => check_object(type_name, value, path, mode, errs),
        InCluster(type_name) if mode == Mode::Cluster => check_object(type_name, value, path, mode, errs),
        InCluster(_) => errs.push(refusal(path.clone(), value, NOT_SUPPORTED.to_string())),
        Only(allowed) if allowed.iter().any(|a| a.admits(value)) => {}
        Only(allowed) => {
            let supported: Vec<String> = allowed
                .iter()
                .filter_map(|a| match a {
                    Str(s) => Some(go::quote(s)),
                    Unset | Bool(_) => None,
                })
                .collect();
            let detail = if supported.is_empty() {
                NOT_SUPPORTED.to_string()
            } else {
                format!("{NOT_SUPPORTED}; supported values: {}", supported.join(", "))
            };
            errs.push(refusal(path.clone(), value, detail));
        }
        Keys(keys) => {
            for (key, v) in value.as_object().into_iter().flatten() {
                if !keys.contains(&key.as_str()) {
                    errs.push(refusal(path.key(key), v, NOT_SUPPORTED.to_string()));
                }
            }
        }
        Resources(names) => {
            for (name, v) in value.as_object().into_iter().flatten() {
                let extended = mode == Mode::Cluster && is_extended_resource(name);
                if !names.contains(&name.as_str()) && !extended {
                    errs.push(refusal(path.key(name), v, NOT_SUPPORTED.to_string()));
                }
            }
        }
        NeedsRuntime(allowed, _) if allowed.iter().any(|a| a.admits(value)) => {}
        NeedsRuntime(_, lacking) => {
            let detail = format!(
                "{NOT_SUPPORTED}: needs {lacking} from the container runtime, which podwright does not ask of it yet"
            );
            errs.push(refusal(path.clone(), value, detail));
        }
        Refused => errs.push(refusal(path.clone(), value, NOT_SUPPORTED.to_string())),
    }
}

/// `Unsupported value`, with the value printed when it is a scalar (an object or a list would
/// make the line unreadable, and the path already names it).
fn refusal(path: FieldPath, value: &Value, detail: String) -> FieldError {
    let shown = match value {
        Value::String(s) => Some(go::quote(s)),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    };
    FieldError::new(path, ErrorKind::NotSupported, shown, detail)
}

impl Allowed {
    fn admits(self, value: &Value) -> bool {
        match self {
            Unset => is_unset(value),
            Bool(b) => value.as_bool() == Some(b),
            Str(s) => value.as_str() == Some(s),
        }
    }
}

fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(is_unset),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests;
