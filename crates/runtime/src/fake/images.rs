//! Image names and digests for the fake, shaped like containerd's.

use std::borrow::Cow;

/// containerd's (docker's) normalization of an image reference: `busybox` and
/// `docker.io/library/busybox:latest` name the same image. Borrows when already normal.
pub(super) fn normalize(name: &str) -> Cow<'_, str> {
    let first = name.split_once('/').map(|(first, _)| first);
    let has_domain = first.is_some_and(|f| f.contains('.') || f.contains(':') || f == "localhost");
    let mut full: Cow<'_, str> = match first {
        _ if has_domain => match name.strip_prefix("docker.io/") {
            Some(rest) if !rest.contains('/') => Cow::Owned(format!("docker.io/library/{rest}")),
            _ => Cow::Borrowed(name),
        },
        Some(_) => Cow::Owned(format!("docker.io/{name}")),
        None => Cow::Owned(format!("docker.io/library/{name}")),
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') && !last.contains('@') {
        full = Cow::Owned(format!("{full}:latest"));
    }
    full
}

/// `sha256:` and 64 hex digits, stable for a name (FNV-1a, four lanes): good enough to tell
/// images apart in tests, not a real content digest.
pub(super) fn fake_digest(name: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for lane in 0u64..4 {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ lane.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for byte in name.bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let _ = write!(out, "{h:016x}");
    }
    out
}

/// A 64-hex id like containerd's, unique per `seq` (splitmix64 is a bijection, so the first lane
/// alone already differs between any two sequence numbers).
pub(super) fn fake_id(salt: u64, seq: u64) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(64);
    for lane in 0u64..4 {
        let _ = write!(out, "{:016x}", splitmix64(seq ^ salt.rotate_left(17) ^ (lane << 60)));
    }
    out
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_containerd() {
        assert_eq!(normalize("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(normalize("docker.io/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("library/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("localhost/busybox:1.36"), "localhost/busybox:1.36");
        assert!(matches!(normalize("localhost/busybox:1.36"), Cow::Borrowed(_)));
        assert_eq!(normalize("127.0.0.1:5000/app"), "127.0.0.1:5000/app:latest");
        assert_eq!(normalize("quay.io/x/y@sha256:abc"), "quay.io/x/y@sha256:abc");
    }

    #[test]
    fn digests_and_ids() {
        let d = fake_digest("localhost/busybox:1.36");
        assert_eq!(d.len(), 71);
        assert_eq!(d, fake_digest("localhost/busybox:1.36"));
        assert_ne!(d, fake_digest("localhost/pause:3.9"));
        assert_eq!(fake_id(1, 7).len(), 64);
        assert_ne!(fake_id(1, 7), fake_id(1, 8));
        assert_ne!(fake_id(1, 7), fake_id(2, 7));
    }
}
