//! podwright-server: the local Kubernetes-compatible API of `podwright serve`, which an
//! unmodified kubectl drives: discovery, pods (with watch, Tables, patches, graceful deletion,
//! logs), events, namespaces, config maps, secrets, services and service accounts (a `default` one per namespace, and
//! the ServiceAccount admission of pods), with the API server's errors;
//! the cluster DNS that resolves those services for the pods; and the node's `/metrics`.

pub mod allocator;
mod api;
mod discovery;
pub mod dns;
mod errors;
pub mod host;
mod kinds;
pub mod kubelet;
pub mod limits;
mod logs;
pub mod metrics;
mod mirror;
mod node_link;
mod objects;
mod openapi;
mod patching;
mod persist;
mod pods;
mod protobuf;
mod request;
pub mod resources;
mod routes;
pub mod secure;
mod selectors;
pub mod server;
mod service_accounts;
mod sinks;
mod static_pods;
mod store;
mod streaming;
mod table;
pub mod transport;
mod usage;
mod watch;

pub use node_link::NodeFeed;
pub use server::{ApiServer, ServerConfig};
