//! Images, as the kubelet's `pkg/kubelet/images` and `pkg/credentialprovider` handle them: the
//! [`ImagePuller`] (the image manager's `EnsureImageExists`), the node-wide pull queue, image
//! garbage collection, registry credentials, and which pods may use an image already present
//! (the records of who pulled it, and the policy).

pub mod credentials;
pub mod gc;
mod pull_records;
mod puller;
pub mod queue;
pub mod verification;

pub(crate) use pull_records::PullRecords;
pub(crate) use puller::ImagePuller;
