//! [`Node`]: builds the node layer ([`PodWorkers`]) from a runtime and what the mode plugs in;
//! the one place that names every part of it.

use crate::context::NodeContext;
use crate::cri::dns::{ClusterDns, HOST_RESOLV_CONF, ResolvConf};
use crate::cri::pod_configs::PodConfigs;
use crate::downward::{NodeFacts, NodeStorage};
use crate::events::{Deferring, EventLog, EventSink};
use crate::executor::{Executor, remove};
use crate::images::credentials::{CredentialPlugins, DockerConfigPaths, PluginConfig};
use crate::images::gc::{ImageGc, ImageGcPolicy};
use crate::images::queue::{ImagePulls, PullQueue};
use crate::images::verification::VerificationPolicy;
use crate::images::{ImagePuller, PullRecords};
use crate::logs::Output;
use crate::metrics::Metrics;
use crate::objects::{FixedObjects, Objects};
use crate::pleg::{Dispatcher, relist};
use crate::pod_cgroup::PodCgroups;
use crate::pod_workers::PodWorkers;
use crate::sinks::{Discard, StatusSink};
use crate::worker::WorkerDeps;
use podwright_planner::Curve;
use podwright_runtime::{Clock, Runtime};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// A node without cluster DNS: the host's resolver configuration as it is now.
fn host_dns() -> ClusterDns {
    let host = ResolvConf::read(std::path::Path::new(HOST_RESOLV_CONF)).unwrap_or_else(|e| {
        tracing::warn!("{HOST_RESOLV_CONF}: {e}; pods get the runtime's copy of it");
        ResolvConf::default()
    });
    ClusterDns::without_servers(host)
}

/// The node layer's builder: a runtime and a root directory, and optionally the clock (virtual
/// in tests), the event and status sinks, a log follower and the cluster DNS.
///
/// ```ignore
/// let workers = Node::new(runtime, "/var/lib/podwright").events(log).status(terminal).build();
/// ```
pub struct Node {
    runtime: Arc<dyn Runtime>,
    root: PathBuf,
    clock: Option<Clock>,
    events: Option<Arc<dyn EventSink>>,
    status: Option<Arc<dyn StatusSink>>,
    log_sink: Option<UnboundedSender<Output>>,
    cluster_dns: Option<ClusterDns>,
    metrics: Option<Arc<Metrics>>,
    objects: Option<Arc<dyn Objects>>,
    facts: Option<NodeFacts>,
    image_pulls: ImagePulls,
    node_credentials: Option<DockerConfigPaths>,
    credential_plugins: Option<PluginConfig>,
    cgroups: Option<PodCgroups>,
    image_gc: Option<ImageGcPolicy>,
    image_verification: VerificationPolicy,
    restart_curve: Curve,
}

impl Node {
    pub fn new(runtime: Arc<dyn Runtime>, root: impl Into<PathBuf>) -> Self {
        Node {
            runtime,
            root: root.into(),
            clock: None,
            events: None,
            status: None,
            log_sink: None,
            cluster_dns: None,
            metrics: None,
            objects: None,
            facts: None,
            image_pulls: ImagePulls::default(),
            node_credentials: None,
            credential_plugins: None,
            cgroups: None,
            image_gc: None,
            image_verification: VerificationPolicy::default(),
            restart_curve: Curve::default(),
        }
    }

    /// The clock the pod workers read and sleep on; the real one unless given.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Where events go; an [`EventLog`] nobody reads unless given.
    pub fn events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// Where statuses go, besides [`PodWorkers::latest`]; nowhere unless given.
    pub fn status(mut self, sink: Arc<dyn StatusSink>) -> Self {
        self.status = Some(sink);
        self
    }

    /// Announce every container started, so that its output is followed, and hand over what
    /// exec hooks print.
    pub fn follow_logs(mut self, sink: UnboundedSender<Output>) -> Self {
        self.log_sink = Some(sink);
        self
    }

    /// The kubelet's `clusterDNS` and `clusterDomain`: `ClusterFirst` pods resolve through
    /// these servers, searching their namespace's services first. Without it (or without
    /// servers) every pod resolves as the host does, `ClusterFirst` ones with the kubelet's
    /// `MissingClusterDNS` event, and FQDNs are in the default cluster domain.
    pub fn cluster_dns(mut self, dns: ClusterDns) -> Self {
        self.cluster_dns = Some(dns);
        self
    }

    /// Where the node records its metrics, when the mode shares them (with the runtime calls
    /// it makes itself, through [`Metrics::instrument`]); a set of its own unless given. The
    /// node instruments the runtime it is given: give it the runtime as it was.
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Where pods' ConfigMaps and Secrets are looked up; none exist unless given.
    pub fn objects(mut self, objects: Arc<dyn Objects>) -> Self {
        self.objects = Some(objects);
        self
    }

    /// The node's name, host IP and allocatable resources, for the downward API; this
    /// machine's, named after its host name, unless given.
    pub fn facts(mut self, facts: NodeFacts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// How image pulls may overlap node-wide; one at a time unless given.
    pub fn image_pulls(mut self, pulls: ImagePulls) -> Self {
        self.image_pulls = pulls;
        self
    }

    /// Where the node's registry credentials are searched for; the kubelet's list (the root
    /// directory, this process's working directory, `$HOME/.docker`, `/.docker`, then the
    /// legacy `.dockercfg`) unless given.
    pub fn node_credentials(mut self, paths: DockerConfigPaths) -> Self {
        self.node_credentials = Some(paths);
        self
    }

    /// Ask these credential provider exec plugins for the registry credentials of the images
    /// they match, after the pod's and the node's own (the kubelet's
    /// `--image-credential-provider-config`); none unless given.
    pub fn credential_plugins(mut self, config: PluginConfig) -> Self {
        self.credential_plugins = Some(config);
        self
    }

    /// Make each pod's cgroup under `kubepods` before its sandbox, and remove it with the pod;
    /// pods go straight under the runtime's own cgroup unless given.
    pub fn cgroups(mut self, cgroups: PodCgroups) -> Self {
        self.cgroups = Some(cgroups);
        self
    }

    /// `imagePullCredentialsVerificationPolicy`: which images already on the node a pod must
    /// pull with its own credentials before using them; `NeverVerifyPreloadedImages` unless
    /// given.
    pub fn image_verification(mut self, policy: VerificationPolicy) -> Self {
        self.image_verification = policy;
        self
    }

    /// Remove unused images as the kubelet's image garbage collection does, by `policy`, with
    /// its events on the Node; images are never removed unless given.
    pub fn image_gc(mut self, policy: ImageGcPolicy) -> Self {
        self.image_gc = Some(policy);
        self
    }

    /// Caps the container restart back-off at `max` (KubeletConfiguration
    /// `crashLoopBackOff.maxContainerRestartPeriod`), which is also its first window when below
    /// 10 s; 10 s doubling to 300 s unless given.
    pub fn max_container_restart_period(mut self, max: Duration) -> Self {
        self.restart_curve = Curve::with_max(max);
        self
    }

    /// The kubelet's clean-up at start: stops and removes every pod in the runtime that a
    /// podwright with this root directory made and `known` does not name (deleted while the node
    /// was down), with its files and cgroup, before any pod starts. Other podwrights' pods on
    /// the same runtime are theirs.
    pub async fn remove_orphans(&self, known: &BTreeSet<String>) {
        let (runtime, root) = (self.runtime.as_ref(), self.root.as_path());
        if let Err(e) = remove::remove_managed(runtime, root, self.cgroups.as_ref(), Some(root), known).await {
            tracing::warn!(%e, "could not list the runtime's pods to remove those no longer known");
        }
    }

    /// The pod workers. Starts routing the runtime's events, so it must run inside a tokio
    /// runtime.
    pub fn build(self) -> PodWorkers {
        let clock = self.clock.unwrap_or_default();
        let metrics = self.metrics.unwrap_or_default();
        let runtime = metrics.instrument(self.runtime, clock);
        let dispatcher = Dispatcher::start(runtime.subscribe());
        relist::start(runtime.clone(), clock, Arc::downgrade(&dispatcher));
        let events = self.events.unwrap_or_else(|| Arc::new(EventLog::default()));
        let facts =
            Arc::new(self.facts.unwrap_or_else(|| {
                NodeFacts::of_this_machine(crate::downward::host_name(), crate::downward::host_ip())
            }));
        let gc = self
            .image_gc
            .filter(ImageGcPolicy::enabled)
            .map(|policy| ImageGc::start(runtime.clone(), events.clone(), facts.name.clone(), clock, policy));
        let objects = self.objects.unwrap_or_else(|| Arc::new(FixedObjects::default()));
        let deferred = Arc::new(Deferring::new(events));
        let ctx = NodeContext { runtime, clock, root: self.root.clone(), events: deferred.clone(), metrics };
        let configs = PodConfigs {
            root: self.root.clone(),
            dns: self.cluster_dns.unwrap_or_else(host_dns),
            facts: facts.clone(),
            objects: objects.clone(),
            cgroups: self.cgroups.map(Arc::new),
        };
        let images = ImagePuller {
            ctx: ctx.clone(),
            objects,
            node_credentials: self.node_credentials.unwrap_or_else(|| DockerConfigPaths::of_this_process(&self.root)),
            plugins: self.credential_plugins.map(|c| CredentialPlugins::new(c, clock)),
            queue: PullQueue::new(self.image_pulls),
            gc,
            records: PullRecords::new(&self.root, self.image_verification),
        };
        let executor = Executor {
            ctx: ctx.clone(),
            configs,
            images,
            dispatcher: dispatcher.clone(),
            log_sink: self.log_sink,
            deferred,
            prepared: Default::default(),
        };
        let deps = WorkerDeps {
            ctx,
            executor: Arc::new(executor),
            dispatcher,
            object_changes: Arc::new(watch::Sender::new(0)),
            host_ip: facts.host_ip.clone(),
            restart_curve: self.restart_curve,
            storage: NodeStorage::of(&self.root),
            allocations: Default::default(),
        };
        PodWorkers::new(deps, self.status.unwrap_or_else(|| Arc::new(Discard)))
    }
}
