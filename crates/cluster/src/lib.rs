//! Cluster mode: podwright as a node of a real Kubernetes cluster. The API server is the pod
//! source and the status and event sink; Kubernetes' own control plane schedules, and podwright
//! runs what is bound to it, as the kubelet does.
//!
//! | kubelet (`pkg/kubelet/...`) | here |
//! |---|---|
//! | `certificate/bootstrap` | [`credentials`], [`csr`] |
//! | client-go's certificate manager, `certificate/transport.go` | [`certificates`], [`client`] |
//! | `kubelet_node_status.go`, `nodestatus/setters.go` | [`node_status`] |
//! | `nodelease` (component-helpers' lease controller) | [`lease`] |
//! | `config/apiserver.go`, `status/status_manager.go` | [`pods`] |
//! | `config/file.go`, `pod/mirror_client.go` (static pods) | `podwright_node::static_pods`, [`pods::ClusterMirrors`] |
//! | `lifecycle/predicate.go` (`GeneralPredicates`) | [`admission`] |
//! | `util/manager/watch_based_manager.go`, `runtimeclass` | [`objects`] |
//! | client-go's `reflector.go` back-off | [`watch_backoff`] |
//! | `cmd/kubelet/app/server.go` `makeEventRecorder` | [`events`] |
//! | `server` (the kubelet port), `cmd/kubelet/app/auth.go` | [`kubelet_port`] |
//!
//! [`join`] registers the node; [`Joined::take_stock`] reads what it is to run (before the
//! node's clean-up at start); [`Joined::run`] then runs its pods, and serves its kubelet port,
//! until dropped.

pub mod admission;
pub mod certificates;
pub mod client;
pub mod credentials;
pub mod csr;
pub mod events;
pub mod kubelet_port;
pub mod lease;
pub mod node_status;
pub mod objects;
pub mod pods;
pub mod watch_backoff;

use crate::certificates::{CertificateStore, Renewal};
use crate::client::Connections;
use crate::credentials::CredentialPaths;
use crate::csr::CertificateRequest;
use crate::events::ApiEvents;
use crate::kubelet_port::KubeletPort;
use crate::node_status::{NodeIdentity, Reported};
use crate::objects::ClusterObjects;
use crate::pods::{ApiStatus, ClusterPods, PodNode, PodsContext};
use podwright_containerd::EmbeddedRuntime;
use podwright_node::downward::NodeFacts;
use podwright_node::static_pods::{StaticPodSource, StaticPods};
use podwright_node::{EventSink, Node};
use podwright_runtime::{Clock, Runtime};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How long a heartbeat (lease or node status) may take: min(`nodeStatusUpdateFrequency`,
/// the lease's duration), as the kubelet's heartbeat client.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long pods wait for the node's pod CIDR (the controller-manager gives one within a
/// second of registration when it allocates them).
const POD_CIDR_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Credentials(String),
    #[error("the API server: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Invalid(String),
}

/// What a node of a cluster is given.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub identity: NodeIdentity,
    pub credentials: CredentialPaths,
    /// `rotateCertificates`: the client certificate is renewed before it expires.
    pub rotate_certificates: bool,
}

/// A node registered with its cluster.
pub struct Joined {
    client: kube::Client,
    /// For the lease and the node status: never queued behind pod traffic.
    heartbeat: kube::Client,
    identity: NodeIdentity,
    reported: Reported,
    clock: Clock,
    pods: ClusterPods,
    status: ApiStatus,
    events: Arc<dyn EventSink>,
    /// The static pods, and their path's source (read again as it changes).
    statics: Option<(Arc<StaticPods>, Option<StaticPodSource>)>,
    /// The client certificate's renewal (`rotateCertificates`), and the connections it closes.
    client_renewal: Option<(Renewal, Arc<Connections>)>,
    credentials: CredentialPaths,
}

/// Joins the cluster: credentials (TLS bootstrap when needed), then the Node registered or
/// taken over.
pub async fn join(settings: ClusterSettings, runtime: &dyn Runtime, clock: Clock) -> Result<Joined, ClusterError> {
    let identity = settings.identity;
    let paths = settings.credentials;
    let node_credentials =
        credentials::node_credentials(&paths, &identity.name, clock, settings.rotate_certificates).await?;
    let connections = Arc::new(Connections::default());
    let config = node_credentials.config;
    let client = client::node_client(&config, node_credentials.tls.clone(), connections.clone())?;
    let mut beat = config;
    beat.read_timeout = Some(HEARTBEAT_TIMEOUT);
    beat.connect_timeout = Some(HEARTBEAT_TIMEOUT);
    let heartbeat = client::node_client(&beat, node_credentials.tls, connections.clone())?;
    let client_renewal = node_credentials.identity.map(|current| {
        let store = CertificateStore::client(&paths.pki);
        (Renewal { store, current, request: CertificateRequest::client(&identity.name) }, connections)
    });
    let (_, reported) = register_with_retries(&client, &identity, runtime, clock).await?;
    let (pods, status) = ClusterPods::new();
    let (events, send_events) = ApiEvents::new(client.clone(), &identity.name);
    tokio::spawn(send_events);
    let events: Arc<dyn EventSink> = Arc::new(events);
    Ok(Joined {
        client,
        heartbeat,
        identity,
        reported,
        clock,
        pods,
        status,
        events,
        statics: None,
        client_renewal,
        credentials: paths,
    })
}

/// Registration, retried as the kubelet retries it (from 100 ms, doubling to 7 s) while the API
/// server is unreachable; a refusal (403, 422) is final.
async fn register_with_retries(
    client: &kube::Client,
    identity: &NodeIdentity,
    runtime: &dyn Runtime,
    clock: Clock,
) -> Result<(k8s_openapi::api::core::v1::Node, Reported), ClusterError> {
    let mut delay = Duration::from_millis(100);
    loop {
        match node_status::register(client, identity, runtime, clock.now()).await {
            Ok(r) => return Ok(r),
            Err(ClusterError::Api(kube::Error::Api(s))) if s.code < 500 && s.code != 429 => {
                return Err(ClusterError::Api(kube::Error::Api(s)));
            }
            Err(e) => {
                tracing::warn!(%e, "node not registered; trying again");
                clock.sleep_until(clock.now() + delay).await;
                delay = (delay * 2).min(Duration::from_secs(7));
            }
        }
    }
}

impl Joined {
    /// What the node is to run, before it starts: the pods bound to it, and its static pods
    /// (`static_pods`, the path read once now; the kubelet too waits for every source before
    /// cleaning up). Returns their UIDs, what the node's clean-up at start keeps. A restart
    /// finds the same static pods in the same files, with the mirrors an earlier run left.
    pub async fn take_stock(&mut self, static_pods: Option<StaticPodSource>) -> Result<BTreeSet<String>, ClusterError> {
        let (mut uids, mirrors) = pods::list_bound(&self.client, &self.identity.name).await?;
        let statics = Arc::new(StaticPods::new(Box::new(self.pods.mirrors(mirrors)), self.clock));
        let mut source = static_pods;
        // Even without a path: mirrors of static pods no longer there are deleted.
        statics.set(source.as_mut().map(StaticPodSource::list).unwrap_or_default(), &*self.events);
        uids.extend(statics.uids());
        self.statics = Some((statics, source));
        Ok(uids)
    }

    /// Runs the node: its heartbeats, the pods bound to it and its static pods on `node` (a
    /// node layer with everything but its pods' source and sinks set), and its kubelet port.
    /// Runs until dropped. `embedded`: the runtime is podwright's own containerd, whose network
    /// podwright writes.
    pub async fn run(
        mut self,
        node: Node,
        runtime: Arc<dyn Runtime>,
        embedded: Option<EmbeddedRuntime>,
        port: KubeletPort,
    ) {
        if self.statics.is_none() {
            // Stock not taken: no static pods.
            let _ = self.take_stock(None).await;
        }
        let Joined {
            client,
            heartbeat,
            identity,
            reported,
            clock,
            pods,
            status,
            events,
            statics,
            client_renewal,
            credentials,
        } = self;
        if let Some((renewal, connections)) = client_renewal {
            let renewed = move || connections.close_all();
            tokio::spawn(renewal.keep_renewed(client.clone(), credentials.bootstrap.clone(), clock, renewed));
        }
        if let Some(current) = port.serving.clone() {
            let ips = identity.ip.iter().filter_map(|ip| ip.parse().ok()).collect();
            let request = CertificateRequest::serving(&identity.name, vec![identity.name.clone()], ips);
            let renewal = Renewal { store: CertificateStore::serving(&credentials.pki), current, request };
            tokio::spawn(renewal.keep_renewed(client.clone(), None, clock, || ()));
        }
        tokio::spawn(lease::keep_renewed(heartbeat.clone(), identity.name.clone(), clock));
        let (node_tx, own_node) = tokio::sync::watch::channel(None);
        let seen = own_node.clone();
        tokio::spawn(node_status::report_status(heartbeat, identity.clone(), runtime.clone(), clock, reported, seen));
        // Pods start once the node's pod CIDR has reached the runtime, so that their addresses
        // come from it (a control plane that gives none: after a short wait, the runtime's own).
        let (cidr_tx, mut cidr) = tokio::sync::watch::channel(None);
        tokio::spawn(node_status::follow_node(
            client.clone(),
            identity.name.clone(),
            runtime.clone(),
            embedded,
            cidr_tx,
            node_tx,
        ));
        if tokio::time::timeout(POD_CIDR_WAIT, cidr.wait_for(Option::is_some)).await.is_err() {
            tracing::warn!("the node has no pod CIDR yet; pods get addresses from the runtime's own network");
        }
        let objects = ClusterObjects::new(client.clone(), clock);
        tokio::spawn(objects.clone().follow_listings());
        let (statics, source) = statics.unwrap_or_else(|| {
            let none = Arc::new(StaticPods::new(Box::new(pods.mirrors(Vec::new())), clock));
            (none, None)
        });
        if let Some(mut source) = source {
            let (statics, events) = (statics.clone(), events.clone());
            tokio::spawn(async move {
                loop {
                    let read = source.next().await;
                    statics.set(read, &*events);
                }
            });
        }
        let workers = Arc::new(
            node.events(events.clone())
                .status(Arc::new(status))
                .objects(objects.clone())
                .facts(NodeFacts::of_this_machine(identity.name.clone(), identity.ip.clone()))
                .build(),
        );
        let serving = port.serve(&identity.name, client.clone(), workers.clone(), runtime, &identity.root, clock);
        let node = PodNode { name: identity.name.clone(), ip: identity.ip.clone() };
        let cx = PodsContext { node, own_node, workers, objects, events, statics, clock };
        tokio::join!(serving, pods.run(client, cx));
    }
}
