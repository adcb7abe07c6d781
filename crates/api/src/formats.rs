//! String-format checks from apimachinery `pkg/util/validation/validation.go`
//! (DNS-1123 labels and subdomains, port names, env var names, ...), returning
//! the same explanation strings Kubernetes returns. Each function returns an
//! empty list when the value is valid.

/// Max length of a DNS-1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Max length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_WITH_UNDERSCORE_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character";
const INVALID_IP_MSG: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_ERR_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const RELAXED_ENV_VAR_NAME_ERR_MSG: &str =
    "a valid environment variable name must consist only of printable ASCII characters other than '='";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_ERR_MSG: &str = "a valid HTTP header must consist of alphanumeric characters or '-'";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// `LabelValueMaxLength`.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// `MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `InclusiveRangeError`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `RegexError`: the message, the examples (note Go's double space before
/// "or") and the regex.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(ex);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Matches `[a-z0-9]([<inner>a-z0-9]*[a-z0-9])?` exactly, `inner` the other characters
/// allowed inside.
fn matches_label(value: &str, inner: &[char]) -> bool {
    let (Some(first), Some(last)) = (value.chars().next(), value.chars().last()) else {
        return false;
    };
    is_lower_alnum(first) && is_lower_alnum(last) && value.chars().all(|c| is_lower_alnum(c) || inner.contains(&c))
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` exactly.
fn matches_dns1123_label(value: &str) -> bool {
    matches_label(value, &['-'])
}

fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// Matches `_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?` exactly.
fn matches_dns1123_label_with_underscore(value: &str) -> bool {
    matches_label(value.strip_prefix('_').unwrap_or(value), &['-', '_'])
}

/// `IsDNS1123SubdomainWithUnderscore` (search domains under RelaxedDNSSearchValidation, on by
/// default since 1.33). Its message shows the regex without underscores, as apimachinery's does.
pub fn is_dns1123_subdomain_with_underscore(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !value.split('.').all(matches_dns1123_label_with_underscore) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_WITH_UNDERSCORE_ERR_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// An IP address as 1.33 checks the fields that predate strict IP validation
/// (`IsValidIPForLegacyField` with StrictIPCIDRValidation off): what Go's `ParseIPSloppy`
/// reads, which is `net.ParseIP` with leading zeros allowed in the dotted IPv4 parts.
pub fn is_valid_ip_sloppy(value: &str) -> Vec<String> {
    if parse_ip_sloppy(value).is_some() { Vec::new() } else { vec![INVALID_IP_MSG.to_string()] }
}

fn parse_ip_sloppy(value: &str) -> Option<std::net::IpAddr> {
    if let Ok(ip) = value.parse() {
        return Some(ip);
    }
    // The dotted part ends the address: all of an IPv4 one, the tail of an IPv6 one.
    match value.rsplit_once(':') {
        None => parse_ipv4_sloppy(value).map(Into::into),
        Some((head, dotted)) => format!("{head}:{}", parse_ipv4_sloppy(dotted)?).parse().ok(),
    }
}

/// Four decimal parts of at most 255 each, leading zeros allowed.
fn parse_ipv4_sloppy(value: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = value.split('.').collect();
    let [a, b, c, d] = parts.as_slice() else { return None };
    let octet = |p: &str| -> Option<u8> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = p.trim_start_matches('0');
        if digits.is_empty() { Some(0) } else { digits.parse().ok() }
    };
    Some(std::net::Ipv4Addr::new(octet(a)?, octet(b)?, octet(c)?, octet(d)?))
}

/// `NameIsDNSSubdomain(name, prefix)` (used for pod, secret and config map
/// names). With `prefix` a trailing dash is tolerated, exactly as
/// apimachinery's `maskTrailingDash` does it.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix { is_dns1123_subdomain(&mask_trailing_dash(name)) } else { is_dns1123_subdomain(name) }
}

/// `NameIsDNSLabel(name, prefix)` (namespace names).
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix { is_dns1123_label(&mask_trailing_dash(name)) } else { is_dns1123_label(name) }
}

fn mask_trailing_dash(name: &str) -> String {
    // apimachinery replaces the last two bytes with "a" (sic).
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len().saturating_sub(2);
        if name.is_char_boundary(cut) {
            return format!("{}a", &name[..cut]);
        }
    }
    name.to_string()
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` exactly.
fn matches_qualified_name(value: &str) -> bool {
    let (Some(first), Some(last)) = (value.chars().next(), value.chars().last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `IsQualifiedName` (label keys, annotation keys): a name with an optional DNS subdomain
/// prefix and `/`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    const EXAMPLES: [&str; 3] = ["MyName", "my.name", "123-abc"];
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &EXAMPLES)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
    }
    if !matches_qualified_name(name) {
        errs.push(format!("name part {}", regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &EXAMPLES)));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `IsValidPortNum`: 1..=65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) { Vec::new() } else { vec![inclusive_range_error(1, 65535)] }
}

/// `IsValidPortName`: at most 15 characters of `[-a-z0-9]`, at least one
/// letter, no leading/trailing or doubled hyphens.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.chars().all(|c| is_lower_alnum(c) || c == '-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

fn has_chdir_prefix(value: &str) -> Vec<String> {
    if value == "." {
        vec!["must not be '.'".into()]
    } else if value == ".." {
        vec!["must not be '..'".into()]
    } else if value.starts_with("..") {
        vec!["must not start with '..'".into()]
    } else {
        Vec::new()
    }
}

/// `IsEnvVarName` (strict rule, used before RelaxedEnvironmentVariableValidation).
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let valid = match value.chars().next() {
        Some(first) => {
            (first.is_ascii_alphabetic() || matches!(first, '-' | '.' | '_'))
                && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        }
        None => false,
    };
    if !valid {
        errs.push(regex_error(ENV_VAR_NAME_ERR_MSG, ENV_VAR_NAME_FMT, &["my.env-name", "MY_ENV.NAME", "MyEnvName1"]));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// `IsRelaxedEnvVarName`: any printable ASCII except `=` (the rule in force
/// by default since Kubernetes 1.32).
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push(format!("environment variable name {}", empty_error()));
    }
    if value.chars().any(|c| !c.is_ascii() || c.is_ascii_control() || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_ERR_MSG.to_string());
    }
    errs
}

/// `IsHTTPHeaderName`.
pub fn is_http_header_name(value: &str) -> Vec<String> {
    if !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        Vec::new()
    } else {
        vec![regex_error(HTTP_HEADER_NAME_ERR_MSG, HTTP_HEADER_NAME_FMT, &["X-Header-Name"])]
    }
}

/// `IsConfigMapKey` (also used for secret keys).
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        errs.push(regex_error(CONFIG_MAP_KEY_ERR_MSG, CONFIG_MAP_KEY_FMT, &["key.name", "KEY_NAME", "key-name"]));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_REGEX_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_REGEX_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn dns1123_label() {
        let long = "a".repeat(64);
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("a", vec![]),
            ("my-name", vec![]),
            ("123-abc", vec![]),
            ("0", vec![]),
            ("", vec![LABEL_REGEX_MSG]),
            ("-a", vec![LABEL_REGEX_MSG]),
            ("a-", vec![LABEL_REGEX_MSG]),
            ("My-Name", vec![LABEL_REGEX_MSG]),
            ("my_name", vec![LABEL_REGEX_MSG]),
            ("a.b", vec!["must not contain dots"]),
            (&long, vec!["must be no more than 63 characters"]),
        ];
        for (v, want) in cases {
            assert_eq!(is_dns1123_label(v), want, "value {v:?}");
        }
        assert!(is_dns1123_label(&"a".repeat(63)).is_empty());
    }

    #[test]
    fn dns1123_subdomain() {
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("example.com", vec![]),
            ("myapp-pod", vec![]),
            ("a.b.c", vec![]),
            ("", vec![SUBDOMAIN_REGEX_MSG]),
            ("a..b", vec![SUBDOMAIN_REGEX_MSG]),
            ("MyApp", vec![SUBDOMAIN_REGEX_MSG]),
            ("a.", vec![SUBDOMAIN_REGEX_MSG]),
        ];
        for (v, want) in cases {
            assert_eq!(is_dns1123_subdomain(v), want, "value {v:?}");
        }
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(200));
        assert_eq!(is_dns1123_subdomain(&long), vec!["must be no more than 253 characters"]);
        // prefix form tolerates a trailing dash
        assert!(name_is_dns_subdomain("my-prefix-", true).is_empty());
        assert!(!name_is_dns_subdomain("my-prefix-", false).is_empty());
    }

    #[test]
    fn dns1123_subdomain_with_underscore() {
        let msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        for ok in ["example.com", "_sip._tcp.example.com", "my_host.example", "a"] {
            assert!(is_dns1123_subdomain_with_underscore(ok).is_empty(), "{ok}");
        }
        for bad in ["", "a_", "__a", "_", "a..b", "A.com", "-a.com"] {
            assert_eq!(is_dns1123_subdomain_with_underscore(bad), [msg], "{bad}");
        }
    }

    #[test]
    fn ip_addresses_as_parse_ip_sloppy_reads_them() {
        for ok in [
            "10.9.8.7",
            "0.0.0.0",
            "010.002.003.004",
            "255.255.255.255",
            "2001:db8::ffff",
            "::1",
            "::",
            "::ffff:1.2.3.4",
            "::ffff:01.2.3.4",
        ] {
            assert!(is_valid_ip_sloppy(ok).is_empty(), "{ok}");
        }
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "1.2.3.-4",
            "a.b.c.d",
            "1.2.3.4 ",
            "fe80::1%eth0",
            "00002001:db8::1",
            "2001:db8::10000",
            "example.com",
        ] {
            assert_eq!(
                is_valid_ip_sloppy(bad),
                ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"],
                "{bad}"
            );
        }
    }

    #[test]
    fn port_numbers_and_names() {
        assert!(is_valid_port_num(1).is_empty());
        assert!(is_valid_port_num(65535).is_empty());
        assert_eq!(is_valid_port_num(0), vec!["must be between 1 and 65535, inclusive"]);
        assert_eq!(is_valid_port_num(65536), vec!["must be between 1 and 65535, inclusive"]);
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("http", vec![]),
            ("http-alt2", vec![]),
            ("123", vec!["must contain at least one letter (a-z)"]),
            (
                "HTTP",
                vec![
                    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                    "must contain at least one letter (a-z)",
                ],
            ),
            ("a--b", vec!["must not contain consecutive hyphens"]),
            ("-ab", vec!["must not begin or end with a hyphen"]),
            ("abcdefghijklmnop", vec!["must be no more than 15 characters"]),
        ];
        for (v, want) in cases {
            assert_eq!(is_valid_port_name(v), want, "value {v:?}");
        }
    }

    #[test]
    fn env_var_names() {
        assert!(is_env_var_name("MY_VAR").is_empty());
        assert!(is_env_var_name("my.env-name").is_empty());
        assert_eq!(
            is_env_var_name("1ABC"),
            vec![
                "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
            ]
        );
        assert_eq!(is_env_var_name(".."), vec!["must not be '..'"]);
        assert!(is_relaxed_env_var_name("1 weird:name!").is_empty());
        assert_eq!(
            is_relaxed_env_var_name("A=B"),
            vec!["a valid environment variable name must consist only of printable ASCII characters other than '='"]
        );
        assert_eq!(
            is_relaxed_env_var_name("tab\there"),
            vec!["a valid environment variable name must consist only of printable ASCII characters other than '='"]
        );
        assert_eq!(is_relaxed_env_var_name(""), vec!["environment variable name must be non-empty"]);
    }

    #[test]
    fn header_names_and_keys() {
        assert!(is_http_header_name("X-Custom").is_empty());
        assert_eq!(
            is_http_header_name("X Custom"),
            vec![
                "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')"
            ]
        );
        assert!(is_config_map_key("key.name").is_empty());
        assert_eq!(is_config_map_key("..x"), vec!["must not start with '..'"]);
    }
}
