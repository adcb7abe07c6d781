//! The node's heartbeat: a Lease named after the node in `kube-node-lease`, renewed every 10 s
//! (a quarter of its 40 s duration), as the kubelet's lease controller does
//! (`component-helpers/apimachinery/lease/controller.go`): renewal is a PUT of the object last
//! returned, a conflict reads it again, a missing lease (deleted, or never made by a node that
//! existed before) is created again with the Node as its owner, and `acquireTime` is never set.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::api::{Api, ObjectMeta, PostParams};
use podwright_runtime::Clock;
use std::time::Duration;

pub const NAMESPACE: &str = "kube-node-lease";
/// `nodeLeaseDurationSeconds`.
pub const DURATION_SECONDS: i32 = 40;
/// How often it is renewed.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Retries right away after a failed renewal, before waiting for the next interval.
const RETRIES: u32 = 5;

/// The lease a node holds: its name, its owner, its duration, and when it was last renewed.
pub fn new_lease(node: &str, node_uid: &str, now: jiff::Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: node_uid.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// Keeps the node's lease renewed for as long as the node runs. Never gives up: a failure is
/// logged and tried again.
pub async fn keep_renewed(client: kube::Client, node: String, clock: Clock) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client);
    let mut held: Option<Lease> = None;
    loop {
        let mut attempt = 0;
        loop {
            match renew(&leases, &nodes, &node, held.take(), clock).await {
                Ok(lease) => {
                    held = Some(lease);
                    break;
                }
                Err(e) => {
                    attempt += 1;
                    if attempt >= RETRIES {
                        tracing::warn!(%e, "node lease not renewed; trying again in 10 s");
                        break;
                    }
                    tracing::debug!(%e, attempt, "node lease renewal failed");
                }
            }
        }
        clock.sleep_until(clock.now() + RENEW_EVERY).await;
    }
}

/// One renewal: of the lease last returned when there is one, else of the lease read now, else
/// a new one.
async fn renew(
    leases: &Api<Lease>,
    nodes: &Api<Node>,
    node: &str,
    held: Option<Lease>,
    clock: Clock,
) -> Result<Lease, kube::Error> {
    let current = match held {
        Some(l) => Some(l),
        None => leases.get_opt(node).await?,
    };
    let Some(mut lease) = current else {
        // The kubelet never makes a lease without its owner: no Node yet, no lease.
        let uid = nodes.get(node).await?.metadata.uid.unwrap_or_default();
        return leases.create(&PostParams::default(), &new_lease(node, &uid, clock.now())).await;
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some(node.to_string());
    spec.lease_duration_seconds = Some(DURATION_SECONDS);
    spec.renew_time = Some(MicroTime(clock.now()));
    // On a conflict or a lease gone, the next attempt reads it (or makes it) again.
    leases.replace(node, &PostParams::default(), &lease).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_lease_is_owned_by_its_node_and_lasts_40_seconds() {
        let now: jiff::Timestamp = "2026-11-27T01:02:03.456789Z".parse().unwrap();
        let lease = serde_json::to_value(new_lease("n1", "u-1", now)).unwrap();
        assert_eq!(
            lease,
            serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "n1", "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1"}]},
                "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-11-27T01:02:03.456789Z"}
            })
        );
    }
}
