//! podwright's side of the CRI: the sandbox and container configs it asks for, the labels it
//! puts on them, the containers' environment (with the Services' variables), the pods' DNS, host names, hosts files and port
//! mappings, and reading them back as the planner's `Observed`.

pub mod config;
pub mod dns;
pub mod env;
pub mod env_file;
pub mod hosts;
pub mod labels;
pub(crate) mod observe;
pub(crate) mod pod_configs;
pub(crate) mod ports;
pub(crate) mod security;
pub mod service_env;
