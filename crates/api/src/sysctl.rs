//! Sysctl names as Kubernetes reads them (`k8s.io/component-helpers/node/util/sysctl`): the
//! slash-separated form, and which kernel namespace isolates a sysctl. The API server's
//! validation and the node's admission both need them.

/// The kernel namespace a sysctl belongs to (`utilsysctl.Namespace`); `Display` gives its
/// lower-case name, as the kubelet's messages print it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Net,
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Namespace::Ipc => "ipc",
            Namespace::Net => "net",
        })
    }
}

/// The longest sysctl name (`SysctlMaxLength`).
pub const MAX_LENGTH: usize = 253;

/// The regular expression a name must match (`sysctlContainSlashRegexp`), as messages print it.
pub const NAME_REGEX: &str = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";

/// `IsValidSysctlName`: at most [`MAX_LENGTH`] characters of segments separated by `.` or `/`,
/// each of lower-case letters, digits, `-` and `_`, starting and ending alphanumeric.
pub fn is_valid_name(name: &str) -> bool {
    let segment_ok = |s: &str| {
        let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        let b = s.as_bytes();
        !b.is_empty() && alnum(b[0]) && alnum(b[b.len() - 1]) && b.iter().all(|&c| alnum(c) || c == b'-' || c == b'_')
    };
    name.len() <= MAX_LENGTH && name.split(['.', '/']).all(segment_ok)
}

/// `NormalizeName` (`ConvertSysctlVariableToDotsSeparator`): a name whose first separator is a
/// slash (`net/ipv4/conf/eth0.100/rp_filter`) has its slashes and dots swapped, as `sysctl.d`
/// reads it; any other name is kept.
pub fn normalize_name(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// `NamespacedBy`: the namespace isolating the sysctl named (dot-separated), if it is known to
/// be namespaced.
pub fn namespaced_by(name: &str) -> Option<Namespace> {
    const PREFIXES: &[(&str, Namespace)] = &[
        ("kernel.shm", Namespace::Ipc),
        ("kernel.msg", Namespace::Ipc),
        ("fs.mqueue.", Namespace::Ipc),
        ("net.", Namespace::Net),
    ];
    if name == "kernel.sem" {
        return Some(Namespace::Ipc);
    }
    PREFIXES.iter().find(|(p, _)| name.starts_with(p)).map(|&(_, ns)| ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_segments_separated_by_dots_or_slashes() {
        for good in ["kernel.shm_rmid_forced", "net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/ip_local_port_range", "a"]
        {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in ["", "Kernel.msgmax", "kernel..msgmax", "kernel.msgmax.", "-a.b", "a_.b", "a.b c", &"a".repeat(254)]
        {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_name_starting_with_a_slash_separator_swaps_slashes_and_dots() {
        assert_eq!(normalize_name("net/ipv4/conf/eno2.100/rp_filter"), "net.ipv4.conf.eno2/100.rp_filter");
        assert_eq!(normalize_name("net.ipv4.conf.eno2/100.rp_filter"), "net.ipv4.conf.eno2/100.rp_filter");
        assert_eq!(normalize_name("kernel/msgmax"), "kernel.msgmax");
        assert_eq!(normalize_name("plain"), "plain");
    }

    #[test]
    fn the_kernel_namespaces_of_sysctls() {
        assert_eq!(namespaced_by("kernel.sem"), Some(Namespace::Ipc));
        assert_eq!(namespaced_by("kernel.shm_rmid_forced"), Some(Namespace::Ipc));
        assert_eq!(namespaced_by("kernel.msgmax"), Some(Namespace::Ipc));
        assert_eq!(namespaced_by("fs.mqueue.msg_max"), Some(Namespace::Ipc));
        assert_eq!(namespaced_by("net.ipv4.ip_local_port_range"), Some(Namespace::Net));
        assert_eq!(namespaced_by("kernel.semx"), None);
        assert_eq!(namespaced_by("vm.swappiness"), None);
        assert_eq!(Namespace::Net.to_string(), "net");
    }
}
