//! The kubelet's pod lifecycle event generator, in our terms: the runtime's container events
//! routed to the worker of the pod they concern ([`Dispatcher`]), and the node-wide relist that
//! catches what events miss.

mod dispatch;
pub(crate) mod relist;

pub(crate) use dispatch::Dispatcher;
