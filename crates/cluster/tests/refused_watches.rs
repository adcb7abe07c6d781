//! A watch the API server refuses is asked again with the reflector's back-off, never at once.
//! The conformance suite found it: a ConfigMap of a pod whose namespace was being deleted was
//! refused by the Node authorizer ("no relationship found") about 1,400 times a second for two
//! minutes, each refusal a warning in the node's log.

use http::{Request, Response};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::client::Body;
use podwright_cluster::objects::ClusterObjects;
use podwright_runtime::Clock;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Requests past this many are never answered, so that a watch asked again at once stops the
/// test rather than spinning it: the runtime goes idle, and virtual time moves on.
const SPIN: usize = 1_000;

/// An API server that refuses every request as the Node authorizer does, and notes when each
/// came.
fn refusing_server(clock: Clock, asked: Arc<Mutex<Vec<Timestamp>>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let asked = asked.clone();
        async move {
            let count = {
                let mut asked = asked.lock().unwrap();
                asked.push(clock.now());
                asked.len()
            };
            if count > SPIN {
                std::future::pending::<()>().await;
            }
            let namespace = req.uri().path().split('/').nth(4).unwrap_or_default().to_string();
            let status = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
                "code": 403,
                "message": format!("configmaps \"kube-root-ca.crt\" is forbidden: User \"system:node:n\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"{namespace}\": no relationship found between node 'n' and this object"),
            });
            let response = Response::builder().status(403).header("content-type", "application/json");
            Ok::<_, tower::BoxError>(response.body(Body::from(serde_json::to_vec(&status)?))?)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn a_refused_read_of_a_pods_config_map_is_asked_again_with_back_off() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let clock = Clock::new();
    let objects = ClusterObjects::new(refusing_server(clock, asked.clone()), clock);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "gc-5776", "uid": "u"},
        "spec": {"containers": [{"name": "c"}],
            "volumes": [{"name": "v", "configMap": {"name": "kube-root-ca.crt"}}]}
    }))
    .unwrap();

    // Waits its bounded time for a first read that never comes.
    let started = clock.now();
    objects.track(&pod).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    objects.release("u");
    assert!(clock.now().duration_since(started) >= SignedDuration::from_secs(70));

    // client-go's reflector: 0.8 s doubling to 30 s, jittered (up to twice as long). Asked
    // again at once, it is the SPIN limit at the start; started over at every relist, a read
    // every 0.8 to 1.6 s, 50 or more.
    let asked = asked.lock().unwrap().clone();
    let gaps: Vec<SignedDuration> = asked.windows(2).map(|w| w[1].duration_since(w[0])).collect();
    assert!((3..10).contains(&asked.len()), "the ConfigMap was asked for {} times in 70 s: {gaps:?}", asked.len());
    // The first retry comes soon: a new pod's first read may be refused only until the Node
    // authorizer's graph has it.
    assert!(gaps[0] <= SignedDuration::from_millis(1_600), "{gaps:?}");
    assert!(gaps.windows(2).all(|g| g[1] > g[0] / 2 * 3 / 2), "the waits do not grow: {gaps:?}");
}
