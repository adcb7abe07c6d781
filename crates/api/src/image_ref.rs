//! Container image references, parsed the way Kubernetes parses them
//! (`pkg/util/parsers.ParseImageName` → distribution `ParseNormalizedNamed`),
//! and the image-pull-policy default derived from them.

use std::fmt;

/// Docker Hub's canonical registry name.
pub const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";
/// Tag assumed when a reference has neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// A normalized image reference: `domain/path[:tag][@digest]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (and port), e.g. `docker.io`, `reg:5000`.
    pub domain: String,
    /// Repository path, e.g. `library/busybox`.
    pub path: String,
    /// Explicit tag, if any.
    pub tag: Option<String>,
    /// Explicit digest (`sha256:...`), if any.
    pub digest: Option<String>,
}

impl ImageRef {
    /// `domain/path`, e.g. `docker.io/library/busybox`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// The tag Kubernetes uses for policy decisions: the explicit tag, or
    /// `latest` when there is neither tag nor digest.
    pub fn effective_tag(&self) -> Option<&str> {
        match (&self.tag, &self.digest) {
            (Some(t), _) => Some(t),
            (None, None) => Some(DEFAULT_TAG),
            (None, Some(_)) => None,
        }
    }
}

impl fmt::Display for ImageRef {
    /// The fully qualified reference a runtime pulls
    /// (`docker.io/library/busybox:latest`, `reg/x@sha256:...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        match (&self.tag, &self.digest) {
            (Some(t), Some(d)) => write!(f, ":{t}@{d}"),
            (Some(t), None) => write!(f, ":{t}"),
            (None, Some(d)) => write!(f, "@{d}"),
            (None, None) => write!(f, ":{DEFAULT_TAG}"),
        }
    }
}

/// Why an image reference could not be parsed (distribution's messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    #[error("repository name must have at least one component")]
    NameEmpty,
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    HexIdentifier(String),
    #[error("invalid reference format: repository name ({0}) must be lowercase")]
    Uppercase(String),
    #[error("repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters")]
    NameTooLong,
    #[error("invalid reference format")]
    InvalidFormat,
    #[error("invalid checksum digest format")]
    InvalidDigest,
    #[error("unsupported digest algorithm")]
    UnsupportedDigest,
}

fn is_hex_identifier(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

/// Split the registry domain off, as `splitDockerDomain` does: the first
/// component is a domain only if it contains `.` or `:`, is `localhost`, or
/// has upper-case letters.
fn split_docker_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.find('/') {
        Some(i) => {
            let first = &name[..i];
            if !first.contains(['.', ':']) && first != "localhost" && first.to_lowercase() == first {
                (DEFAULT_DOMAIN.to_string(), name.to_string())
            } else {
                (first.to_string(), name[i + 1..].to_string())
            }
        }
        None => (DEFAULT_DOMAIN.to_string(), name.to_string()),
    };
    if domain == LEGACY_DEFAULT_DOMAIN {
        domain = DEFAULT_DOMAIN.to_string();
    }
    if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        remainder = format!("{OFFICIAL_REPO_PREFIX}{remainder}");
    }
    (domain, remainder)
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn is_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut i = 0;
    let run = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && alnum(b[*i]) {
            *i += 1;
        }
        *i > start
    };
    if !run(&mut i) {
        return false;
    }
    while i < b.len() {
        // separator
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        if !run(&mut i) {
            return false;
        }
    }
    true
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn is_domain_component(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

/// `host[:port]` where host is a dotted name or a bracketed IPv6 address.
fn is_domain(s: &str) -> bool {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return false;
        };
        let ip = &rest[..end];
        if ip.is_empty() || !ip.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
            return false;
        }
        let after = &rest[end + 1..];
        match after.strip_prefix(':') {
            Some(p) => ("", Some(p)),
            None if after.is_empty() => ("", None),
            None => return false,
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if !host.is_empty() && !host.split('.').all(is_domain_component) {
        return false;
    }
    if host.is_empty() && !s.starts_with('[') {
        return false;
    }
    match port {
        Some(p) => !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()),
        None => true,
    }
}

/// `[\w][\w.-]{0,127}`
fn is_tag(s: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if word(c) => {}
        _ => return false,
    }
    s.len() <= 128 && chars.all(|c| word(c) || c == '.' || c == '-')
}

fn validate_digest(d: &str) -> Result<(), ImageRefError> {
    let Some((alg, hex)) = d.split_once(':') else {
        return Err(ImageRefError::InvalidFormat);
    };
    // digest-algorithm := component (separator component)*, component := [A-Za-z][A-Za-z0-9]*
    let alg_ok = !alg.is_empty()
        && alg.split(['+', '.', '-', '_']).all(|c| {
            let mut cs = c.chars();
            matches!(cs.next(), Some(f) if f.is_ascii_alphabetic()) && cs.all(|x| x.is_ascii_alphanumeric())
        });
    if !alg_ok || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ImageRefError::InvalidFormat);
    }
    let want_len = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ImageRefError::UnsupportedDigest),
    };
    if hex.len() != want_len || hex.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ImageRefError::InvalidDigest);
    }
    Ok(())
}

/// Parse and normalize an image reference (`busybox` →
/// `docker.io/library/busybox`, tag and digest split off).
pub fn parse_image_ref(image: &str) -> Result<ImageRef, ImageRefError> {
    if image.is_empty() {
        return Err(ImageRefError::NameEmpty);
    }
    if is_hex_identifier(image) {
        return Err(ImageRefError::HexIdentifier(image.to_string()));
    }
    let (domain, remainder) = split_docker_domain(image);
    let remote = match remainder.find(':') {
        Some(i) => &remainder[..i],
        None => remainder.as_str(),
    };
    if remote.to_lowercase() != remote {
        return Err(ImageRefError::Uppercase(remote.to_string()));
    }

    let (before_digest, digest) = match remainder.split_once('@') {
        Some((b, d)) => (b, Some(d)),
        None => (remainder.as_str(), None),
    };
    let (path, tag) = match before_digest.split_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (before_digest, None),
    };
    if !is_domain(&domain) || path.is_empty() || !path.split('/').all(is_path_component) {
        return Err(ImageRefError::InvalidFormat);
    }
    if let Some(t) = tag
        && !is_tag(t)
    {
        return Err(ImageRefError::InvalidFormat);
    }
    if domain.len() + 1 + path.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ImageRefError::NameTooLong);
    }
    if let Some(d) = digest {
        validate_digest(d)?;
    }
    Ok(ImageRef { domain, path: path.to_string(), tag: tag.map(str::to_string), digest: digest.map(str::to_string) })
}

/// The tag `ParseImageName` reports: the explicit tag, `latest` when the
/// reference has neither tag nor digest, and None for digest-only or
/// unparsable references.
pub fn image_tag_default(image: &str) -> Option<String> {
    parse_image_ref(image).ok().and_then(|r| r.effective_tag().map(str::to_string))
}

/// `SetDefaults_Container`'s imagePullPolicy: `Always` when the (possibly
/// implied) tag is `latest`, `IfNotPresent` otherwise (other tag, digest only,
/// or a reference that does not parse).
pub fn default_image_pull_policy(image: &str) -> &'static str {
    match image_tag_default(image).as_deref() {
        Some(DEFAULT_TAG) => "Always",
        _ => "IfNotPresent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn default_pull_policy_by_tag() {
        let digest_ref = format!("busybox@{SHA}");
        let latest_and_digest = format!("busybox:latest@{SHA}");
        let tag_and_digest = format!("busybox:1.36@{SHA}");
        let cases: Vec<(&str, &str)> = vec![
            ("busybox", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("busybox:latest", "Always"),
            ("reg:5000/busybox", "Always"),
            ("reg:5000/busybox:1.0", "IfNotPresent"),
            ("localhost/app", "Always"),
            ("quay.io/org/app:v2", "IfNotPresent"),
            (&digest_ref, "IfNotPresent"),
            (&latest_and_digest, "Always"),
            (&tag_and_digest, "IfNotPresent"),
            // unparsable references: ParseImageName fails, tag is "" → IfNotPresent
            ("Busybox", "IfNotPresent"),
            ("busy box", "IfNotPresent"),
            ("", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_image_pull_policy(image), want, "image {image:?}");
        }
    }

    #[test]
    fn normalization() {
        let cases = [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("library/busybox", "docker.io/library/busybox:latest"),
            ("user/app:v1", "docker.io/user/app:v1"),
            ("index.docker.io/user/app", "docker.io/user/app:latest"),
            ("reg:5000/busybox", "reg:5000/busybox:latest"),
            ("localhost/app:dev", "localhost/app:dev"),
            ("[::1]:5000/app", "[::1]:5000/app:latest"),
            ("gcr.io/a/b/c:1", "gcr.io/a/b/c:1"),
        ];
        for (image, want) in cases {
            let r = parse_image_ref(image).unwrap_or_else(|e| panic!("{image}: {e}"));
            assert_eq!(r.to_string(), want);
        }
        let d = parse_image_ref(&format!("busybox@{SHA}")).expect("digest ref");
        assert_eq!(d.tag, None);
        assert_eq!(d.digest.as_deref(), Some(SHA));
        assert_eq!(d.effective_tag(), None);
        assert_eq!(d.to_string(), format!("docker.io/library/busybox@{SHA}"));
    }

    #[test]
    fn rejects_bad_references() {
        let hex = "a".repeat(64);
        let cases: Vec<(&str, ImageRefError)> = vec![
            ("", ImageRefError::NameEmpty),
            (&hex, ImageRefError::HexIdentifier(hex.clone())),
            ("Busybox", ImageRefError::Uppercase("library/Busybox".into())),
            ("busybox:", ImageRefError::InvalidFormat),
            ("busybox:-x", ImageRefError::InvalidFormat),
            ("a..b", ImageRefError::InvalidFormat),
            ("busybox@sha256:abc", ImageRefError::InvalidFormat),
            ("busybox@md5:0123456789abcdef0123456789abcdef", ImageRefError::UnsupportedDigest),
        ];
        for (image, want) in cases {
            assert_eq!(parse_image_ref(image), Err(want), "image {image:?}");
        }
        assert_eq!(image_tag_default("busybox"), Some("latest".into()));
        assert_eq!(image_tag_default("busybox:1"), Some("1".into()));
        assert_eq!(image_tag_default(&format!("busybox@{SHA}")), None);
    }
}
