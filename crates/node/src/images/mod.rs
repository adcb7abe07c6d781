//! Images, as the kubelet's `pkg/kubelet/images` and `pkg/credentialprovider` handle them: the
//! [`ImagePuller`] (the image manager's `EnsureImageExists`), the node-wide pull queue, image
//! garbage collection, and registry credentials.

pub mod credentials;
pub mod gc;
mod puller;
pub mod queue;

pub(crate) use puller::ImagePuller;
