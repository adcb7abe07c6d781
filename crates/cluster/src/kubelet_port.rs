//! The kubelet port of a cluster node (`pkg/kubelet/server`): podwright-server's
//! [`KubeletServer`] over this node's pod workers, its TokenReviews and SubjectAccessReviews
//! made with the node's own client. The API server reaches it for `kubectl logs`, `exec`,
//! `attach` and `port-forward` at the node's `InternalIP` and `daemonEndpoints` port.

use crate::certificates::CurrentCertificate;
use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use podwright_node::usage::UsageCollector;
use podwright_node::{Metrics, PodUpdate, PodWorkers};
use podwright_runtime::{Clock, Runtime};
use podwright_server::host::PodHost;
use podwright_server::kubelet::{Auth, AuthSettings, KubeletServer, Reviews};
use podwright_server::secure::TlsListener;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the kubelet port is given before the node joins: its listener (bound, with TLS), how it
/// authenticates and authorizes, and the node's metrics it serves.
pub struct KubeletPort {
    pub listener: TlsListener,
    pub auth: AuthSettings,
    pub metrics: Arc<Metrics>,
    /// With `serverTLSBootstrap`: the serving certificate the listener presents, which the
    /// node asks the cluster for and renews.
    pub serving: Option<Arc<CurrentCertificate>>,
}

/// The node's pods as its pod workers hold them: each with its newest status.
struct WorkerPods {
    workers: Arc<PodWorkers>,
    runtime: Arc<dyn Runtime>,
    root: PathBuf,
    clock: Clock,
}

fn json(update: &PodUpdate) -> Option<Arc<Value>> {
    serde_json::to_value(update.pod()).ok().map(Arc::new)
}

impl PodHost for WorkerPods {
    /// The pod of that name; of two (one going, its successor of the same name coming), the
    /// newer one unless it has finished.
    fn pod(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        let named: Vec<PodUpdate> = self
            .workers
            .latest()
            .into_iter()
            .filter(|u| {
                let m = &u.spec.metadata;
                m.namespace.as_deref() == Some(ns) && m.name.as_deref() == Some(name)
            })
            .collect();
        let chosen = named.iter().rev().find(|u| !u.finished).or(named.last())?;
        json(chosen)
    }

    fn pods(&self) -> Vec<Arc<Value>> {
        self.workers.latest().iter().filter_map(json).collect()
    }

    fn runtime(&self) -> &dyn Runtime {
        &*self.runtime
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// The API server's reviews, asked with the node's credentials (`system:node` may create both).
struct ApiReviews(kube::Client);

#[async_trait]
impl Reviews for ApiReviews {
    async fn token_review(&self, review: TokenReview) -> Result<TokenReview, String> {
        let api: Api<TokenReview> = Api::all(self.0.clone());
        api.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())
    }

    async fn access_review(&self, review: SubjectAccessReview) -> Result<SubjectAccessReview, String> {
        let api: Api<SubjectAccessReview> = Api::all(self.0.clone());
        api.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())
    }
}

impl KubeletPort {
    /// Serves the port for node `name` over `workers` until the listener fails.
    pub(crate) async fn serve(
        self,
        name: &str,
        client: kube::Client,
        workers: Arc<PodWorkers>,
        runtime: Arc<dyn Runtime>,
        root: &Path,
        clock: Clock,
    ) {
        let counted = self.metrics.instrument(runtime, clock);
        let usage = Arc::new(UsageCollector::new(counted.clone(), clock, name, root));
        let host = Arc::new(WorkerPods { workers, runtime: counted, root: root.to_path_buf(), clock });
        let auth = Auth::new(name, self.auth, Arc::new(ApiReviews(client)), clock);
        let server = KubeletServer::new(host, usage, self.metrics, auth);
        if let Err(e) = server.serve(self.listener).await {
            tracing::error!(%e, "the kubelet port stopped");
        }
    }
}
