//! Server-side Tables: `kubectl get` prints the cells the server computes, so the STATUS,
//! READY and RESTARTS of pods are exactly podwright's (kubernetes `pkg/printers/internalversion`).

use crate::resources::Resource;
use crate::store::meta_str;
use axum::http::{HeaderMap, header};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_api::kubectl_status::translate_timestamp_since;
use serde_json::{Value, json};

/// Whether the client asked for a Table (kubectl's `get`).
pub fn wants_table(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("as=Table"))
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn parse(s: Option<&str>) -> Include {
        match s {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

fn col(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// `ServiceAccount.secrets`' documentation, the SECRETS column's description.
const SERVICE_ACCOUNT_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";

pub fn columns(resource: Resource) -> Vec<Value> {
    let name = col("Name", "string", "name", "Name must be unique within a namespace.", 0);
    let age = col(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        0,
    );
    match resource {
        Resource::Pods => vec![
            name,
            col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
            col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
            col(
                "Restarts",
                "string",
                "",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age,
            col(
                "IP",
                "string",
                "",
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                1,
            ),
            col("Node", "string", "", "NodeName is a request to schedule this pod onto a specific node.", 1),
            col(
                "Nominated Node",
                "string",
                "",
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
                1,
            ),
            col(
                "Readiness Gates",
                "string",
                "",
                "If specified, all readiness gates will be evaluated for pod readiness.",
                1,
            ),
        ],
        Resource::Events => vec![
            col(
                "Last Seen",
                "string",
                "",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            col(
                "Type",
                "string",
                "",
                "Type of this event (Normal, Warning), new types could be added in the future.",
                0,
            ),
            col(
                "Reason",
                "string",
                "",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                0,
            ),
            col("Object", "string", "", "The object that this event is about.", 0),
            col("Subobject", "string", "", "The field of the object that this event is about.", 1),
            col("Source", "string", "", "The component reporting this event.", 1),
            col("Message", "string", "", "A human-readable description of the status of this operation.", 0),
            col("First Seen", "string", "", "The time at which the event was first recorded.", 1),
            col("Count", "string", "", "The number of times this event has occurred.", 1),
            col("Name", "string", "name", "Name must be unique within a namespace.", 1),
        ],
        Resource::ConfigMaps => vec![name, col("Data", "string", "", "Data contains the configuration data.", 0), age],
        Resource::Secrets => vec![
            name,
            col("Type", "string", "", "The type of the secret", 0),
            col("Data", "string", "", "The total number of data items.", 0),
            age,
        ],
        Resource::Services => vec![
            name,
            col("Type", "string", "", "The type of the service.", 0),
            col("Cluster-IP", "string", "", "The IP address of the service.", 0),
            col("External-IP", "string", "", "The external IP of the service.", 0),
            col("Port(s)", "string", "", "The ports exposed by the service.", 0),
            age,
            col(
                "Selector",
                "string",
                "",
                "Route service traffic to pods with label keys and values matching this selector.",
                1,
            ),
        ],
        Resource::ServiceAccounts => vec![name, col("Secrets", "string", "", SERVICE_ACCOUNT_SECRETS, 0), age],
        Resource::Namespaces => vec![name, col("Status", "string", "", "The status of the namespace", 0), age],
        Resource::RuntimeClasses => vec![
            name,
            col(
                "Handler",
                "string",
                "",
                "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
                0,
            ),
            age,
        ],
    }
}

fn time_at(obj: &Value, pointer: &str) -> Option<Time> {
    serde_json::from_value(obj.pointer(pointer)?.clone()).ok()
}

fn age(obj: &Value, now: Timestamp) -> String {
    translate_timestamp_since(time_at(obj, "/metadata/creationTimestamp").as_ref(), now)
}

fn s(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".to_string() } else { v }
}

fn count(obj: &Value, pointer: &str) -> usize {
    obj.pointer(pointer).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// The cells of one row.
pub fn cells(resource: Resource, obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = meta_str(obj, "name").unwrap_or_default();
    match resource {
        Resource::Pods => {
            let Ok(pod) = serde_json::from_value::<Pod>(obj.clone()) else {
                return vec![json!(name)];
            };
            let sum = podwright_api::summarize(&pod, now);
            let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref()).filter(|g| !g.is_empty());
            let gates = match gates {
                None => "<none>".to_string(),
                Some(gates) => {
                    let conds = pod.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
                    let ready = gates
                        .iter()
                        .filter(|g| conds.iter().any(|c| c.type_ == g.condition_type && c.status == "True"))
                        .count();
                    format!("{ready}/{}", gates.len())
                }
            };
            vec![
                json!(name),
                json!(sum.ready),
                json!(sum.status),
                json!(sum.restarts),
                json!(sum.age),
                json!(or_none(s(obj, "/status/podIP"))),
                json!(or_none(s(obj, "/spec/nodeName"))),
                json!(or_none(s(obj, "/status/nominatedNodeName"))),
                json!(gates),
            ]
        }
        Resource::Events => {
            let last = time_at(obj, "/lastTimestamp").or_else(|| time_at(obj, "/eventTime"));
            let first = time_at(obj, "/firstTimestamp").or_else(|| time_at(obj, "/eventTime"));
            let object =
                format!("{}/{}", s(obj, "/involvedObject/kind").to_lowercase(), s(obj, "/involvedObject/name"));
            let source = [s(obj, "/source/component"), s(obj, "/source/host")]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                json!(translate_timestamp_since(last.as_ref(), now)),
                json!(s(obj, "/type")),
                json!(s(obj, "/reason")),
                json!(object),
                json!(s(obj, "/involvedObject/fieldPath")),
                json!(source),
                json!(s(obj, "/message").trim()),
                json!(translate_timestamp_since(first.as_ref(), now)),
                json!(obj.get("count").and_then(Value::as_i64).unwrap_or(1)),
                json!(name),
            ]
        }
        Resource::ConfigMaps => {
            vec![json!(name), json!(count(obj, "/data") + count(obj, "/binaryData")), json!(age(obj, now))]
        }
        Resource::Secrets => {
            vec![json!(name), json!(s(obj, "/type")), json!(count(obj, "/data")), json!(age(obj, now))]
        }
        Resource::Services => {
            let ports: Vec<String> = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            let port = p.get("port").and_then(Value::as_i64).unwrap_or_default();
                            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                            match p.get("nodePort").and_then(Value::as_i64) {
                                Some(np) => format!("{port}:{np}/{proto}"),
                                None => format!("{port}/{proto}"),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let selector: Vec<String> = obj
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
                .unwrap_or_default();
            vec![
                json!(name),
                json!(s(obj, "/spec/type")),
                json!(or_none(s(obj, "/spec/clusterIP"))),
                json!("<none>"),
                json!(or_none(ports.join(","))),
                json!(age(obj, now)),
                json!(or_none(selector.join(","))),
            ]
        }
        Resource::ServiceAccounts => {
            let secrets = obj.get("secrets").and_then(Value::as_array).map_or(0, Vec::len);
            vec![json!(name), json!(secrets), json!(age(obj, now))]
        }
        Resource::Namespaces => vec![json!(name), json!(s(obj, "/status/phase")), json!(age(obj, now))],
        Resource::RuntimeClasses => vec![json!(name), json!(s(obj, "/handler")), json!(age(obj, now))],
    }
}

pub fn row(resource: Resource, obj: &Value, now: Timestamp, include: Include) -> Value {
    let mut row = json!({"cells": cells(resource, obj, now)});
    match include {
        Include::None => {}
        Include::Object => row["object"] = obj.clone(),
        Include::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(Value::Null),
            })
        }
    }
    row
}

/// A Table of `objects`; with `with_columns` false (watch events after the first), the
/// column definitions are left out, as the API server does.
pub fn table(
    resource: Resource,
    objects: &[&Value],
    rv: u64,
    now: Timestamp,
    include: Include,
    with_columns: bool,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": if with_columns { columns(resource) } else { vec![] },
        "rows": objects.iter().map(|o| row(resource, o, now, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_row_has_kubectl_columns() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let pod = json!({
            "metadata": {"name": "myapp-pod", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}],
                     "initContainers": [{"name": "i1", "image": "busybox"}, {"name": "i2", "image": "busybox"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}},
                {"name": "i2", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}
        });
        let t = table(Resource::Pods, &[&pod], 7, now, Include::Metadata, true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "myapp-pod");
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells[2], "Init:0/2");
        assert_eq!(cells[3], "0");
        assert_eq!(cells[4], "60s");
        assert_eq!(cells[5], "<none>");
        assert_eq!(cells[6], "n1");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), cells.as_array().unwrap().len());
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn a_service_account_row_counts_its_secrets() {
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let sa = json!({
            "metadata": {"name": "builder", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "secrets": [{"name": "a"}, {"name": "b"}], "imagePullSecrets": [{"name": "reg"}],
        });
        let t = table(Resource::ServiceAccounts, &[&sa], 3, now, Include::Metadata, true);
        let names: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Name", "Secrets", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["builder", 2, "5m"]));
        let bare = json!({"metadata": {"name": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(cells(Resource::ServiceAccounts, &bare, now), [json!("default"), json!(0), json!("5m")]);
    }
}
