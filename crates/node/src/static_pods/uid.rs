//! A static pod's UID, as the kubelet derives it when the file gives none
//! (`pkg/kubelet/config/common.go` `applyDefaults`): the hex FNV-128a hash of the decoded pod,
//! then `host:<node>` and `file:<path>`. The same content at the same path on the same node gives
//! the same UID, so a restarted podwright adopts the pod's containers; a change to any of the
//! three gives a new pod. Comments and formatting are not part of the decoded pod.

use k8s_openapi::api::core::v1::Pod;

/// FNV-1a with a 128-bit state (the `hash/fnv` `New128a` of Go).
pub struct Fnv128a(u128);

impl Fnv128a {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;

    pub fn new() -> Self {
        Fnv128a(Self::OFFSET)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// The hash as 32 lower-case hex digits, most significant first (Go's `Sum`).
    pub fn value(&self) -> u128 {
        self.0
    }

    pub fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

impl Default for Fnv128a {
    fn default() -> Self {
        Self::new()
    }
}

/// The UID of a static pod read from `path` on node `node`: `pod` is the pod as decoded from
/// the file, before the name suffix and the defaults are applied. The decoded pod is hashed as
/// its canonical JSON (k8s-openapi writes fields in a fixed order and maps sorted), which plays
/// the part of the kubelet's hash of the Go object.
pub(crate) fn static_pod_uid(pod: &Pod, node: &str, path: &str) -> String {
    let mut h = Fnv128a::new();
    // A Pod always encodes; an empty encoding would still hash deterministically.
    h.write(&serde_json::to_vec(pod).unwrap_or_default());
    h.write(format!("host:{node}").as_bytes());
    h.write(format!("file:{path}").as_bytes());
    h.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv128a_gives_the_reference_values() {
        assert_eq!(Fnv128a::new().hex(), "6c62272e07bb014262b821756295c58d");
        let mut h = Fnv128a::new();
        h.write(b"a");
        assert_eq!(h.hex(), "d228cb696f1a8caf78912b704e4a8964");
    }
}
