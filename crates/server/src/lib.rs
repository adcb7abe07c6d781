//! podwright-server: the local Kubernetes-compatible API of `podwright serve`, which an
//! unmodified kubectl drives: discovery, pods (with watch, Tables, patches, graceful deletion,
//! logs), events, namespaces, config maps, secrets, services and service accounts (a `default` one per namespace, and
//! the ServiceAccount admission of pods), with the API server's errors;
//! the cluster DNS that resolves those services for the pods; and the node's `/metrics`.

pub mod api;
pub mod discovery;
pub mod dns;
pub mod errors;
pub mod kinds;
pub mod logs;
pub mod metrics;
pub mod mirror;
pub mod node_link;
pub mod objects;
pub mod openapi;
pub mod patching;
pub mod persist;
pub mod pods;
pub mod protobuf;
pub mod request;
pub mod resources;
mod routes;
pub mod secure;
pub mod selectors;
pub mod server;
pub mod service_accounts;
mod sinks;
pub mod static_pods;
pub mod store;
pub mod streaming;
pub mod table;
pub mod usage;
pub mod watch;

pub use server::{ApiServer, ServerConfig};
