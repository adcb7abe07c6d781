//! The node-wide image pull queue: how many `PullImage` calls may be under way at once on the
//! whole node, as the kubelet's `serializeImagePulls` and `maxParallelImagePulls` say.
//!
//! A pod never has two pulls at once without it: its worker pulls inline, one container after
//! the other. The queue is what keeps different pods' pulls from overlapping.

use std::num::NonZeroUsize;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How the node's image pulls may overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImagePulls {
    /// One pull at a time node-wide, in the order they were asked for (the kubelet's default).
    #[default]
    Serial,
    /// Each pull starts when asked for, with at most `max` under way at once when given.
    Parallel { max: Option<NonZeroUsize> },
}

impl ImagePulls {
    /// From a `KubeletConfiguration`'s `serializeImagePulls` (true unless given) and
    /// `maxParallelImagePulls`, refused as the kubelet's configuration validation refuses them.
    pub fn from_config(serialize: Option<bool>, max_parallel: Option<i64>) -> Result<ImagePulls, String> {
        let serialize = serialize.unwrap_or(true);
        let max = match max_parallel {
            Some(n) if n < 1 => {
                return Err(format!("invalid configuration: maxParallelImagePulls {n} must be a positive number"));
            }
            Some(n) if n > 1 && serialize => {
                return Err("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless \
                            SerializeImagePulls (--serialize-image-pulls) is set to false"
                    .into());
            }
            Some(n) => NonZeroUsize::new(usize::try_from(n).unwrap_or(usize::MAX)),
            None => None,
        };
        Ok(if serialize { ImagePulls::Serial } else { ImagePulls::Parallel { max } })
    }
}

/// The queue itself, shared by every pod worker of the node.
#[derive(Clone, Debug)]
pub(crate) struct PullQueue {
    /// `None`: pulls are not limited.
    slots: Option<Arc<Semaphore>>,
}

impl PullQueue {
    pub(crate) fn new(pulls: ImagePulls) -> PullQueue {
        let slots = match pulls {
            ImagePulls::Serial => Some(1),
            ImagePulls::Parallel { max } => max.map(NonZeroUsize::get),
        };
        PullQueue { slots: slots.map(|n| Arc::new(Semaphore::new(n))) }
    }

    /// Waits for this pull's turn (first come, first served); the pull may run while the
    /// returned permit is held.
    pub(crate) async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        let slots = self.slots.clone()?;
        // The semaphore is never closed.
        slots.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_as_the_kubelet_validates_it() {
        let two = NonZeroUsize::new(2);
        // serializeImagePulls, maxParallelImagePulls, what they make.
        type Row = (Option<bool>, Option<i64>, Result<ImagePulls, &'static str>);
        let table: [Row; 10] = [
            (None, None, Ok(ImagePulls::Serial)),
            (Some(true), None, Ok(ImagePulls::Serial)),
            (Some(true), Some(1), Ok(ImagePulls::Serial)),
            (None, Some(1), Ok(ImagePulls::Serial)),
            (Some(false), None, Ok(ImagePulls::Parallel { max: None })),
            (Some(false), Some(2), Ok(ImagePulls::Parallel { max: two })),
            (Some(false), Some(0), Err("invalid configuration: maxParallelImagePulls 0 must be a positive number")),
            (None, Some(-3), Err("invalid configuration: maxParallelImagePulls -3 must be a positive number")),
            (
                Some(true),
                Some(5),
                Err(
                    "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false",
                ),
            ),
            (
                None,
                Some(2),
                Err(
                    "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false",
                ),
            ),
        ];
        for (serialize, max, expected) in table {
            assert_eq!(
                ImagePulls::from_config(serialize, max),
                expected.map_err(str::to_string),
                "serializeImagePulls {serialize:?}, maxParallelImagePulls {max:?}"
            );
        }
    }
}
