//! `dnsPolicy`, `dnsConfig` and `hostAliases` as the 1.33 API server checks them
//! (`validateDNSPolicy`, `validatePodDNSConfig`, `ValidateHostAliases`), with
//! RelaxedDNSSearchValidation on (beta) and StrictIPCIDRValidation off (alpha).

use k8s_openapi::api::core::v1::{HostAlias, PodSpec};

use super::{Errors, str_or_empty};
use crate::field_error::{FieldError, FieldPath, Raw};
use crate::formats::{is_dns1123_subdomain, is_dns1123_subdomain_with_underscore, is_valid_ip_sloppy};
use crate::go;

const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
/// `MaxDNSNameservers`.
const MAX_DNS_NAMESERVERS: usize = 3;
/// `MaxDNSSearchPaths`.
const MAX_DNS_SEARCH_PATHS: usize = 32;
/// `MaxDNSSearchListChars`, spaces between the domains included.
const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;

pub(super) fn validate_dns_policy(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    match str_or_empty(&spec.dns_policy) {
        p if DNS_POLICIES.contains(&p) => {}
        "" => errs.push(FieldError::required(path.child("dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(path.child("dnsPolicy"), other, &DNS_POLICIES)),
    }
}

/// A list as Go's `%#v` prints a `[]string`.
fn go_string_slice(items: &[String]) -> Raw {
    Raw(format!("[]string{{{}}}", items.iter().map(|s| go::quote(s)).collect::<Vec<_>>().join(", ")))
}

pub(super) fn validate_pod_dns_config(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let path = path.child("dnsConfig");
    let config = spec.dns_config.as_ref();
    if str_or_empty(&spec.dns_policy) == "None" {
        let Some(config) = config else {
            return errs.push(FieldError::required(path, "must provide `dnsConfig` when `dnsPolicy` is None"));
        };
        if config.nameservers.as_ref().is_none_or(Vec::is_empty) {
            return errs.push(FieldError::required(
                path.child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
        }
    }
    let Some(config) = config else { return };
    let nameservers = config.nameservers.as_deref().unwrap_or_default();
    if nameservers.len() > MAX_DNS_NAMESERVERS {
        errs.push(FieldError::invalid(
            path.child("nameservers"),
            go_string_slice(nameservers),
            format!("must not have more than {MAX_DNS_NAMESERVERS} nameservers"),
        ));
    }
    for (i, ns) in nameservers.iter().enumerate() {
        for msg in is_valid_ip_sloppy(ns) {
            errs.push(FieldError::invalid(path.child("nameservers").index(i), ns, msg));
        }
    }
    let searches = config.searches.as_deref().unwrap_or_default();
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        errs.push(FieldError::invalid(
            path.child("searches"),
            go_string_slice(searches),
            format!("must not have more than {MAX_DNS_SEARCH_PATHS} search paths"),
        ));
    }
    if searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        errs.push(FieldError::invalid(
            path.child("searches"),
            go_string_slice(searches),
            format!(
                "must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) in the search list"
            ),
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        // "." alone is allowed, and a trailing dot on any domain.
        if search == "." {
            continue;
        }
        let search = search.strip_suffix('.').unwrap_or(search);
        for msg in is_dns1123_subdomain_with_underscore(search) {
            errs.push(FieldError::invalid(path.child("searches").index(i), search, msg));
        }
    }
    for (i, option) in config.options.iter().flatten().enumerate() {
        if option.name.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(path.child("options").index(i), "must not be empty"));
        }
    }
}

pub(super) fn validate_host_aliases(aliases: &[HostAlias], path: &FieldPath, errs: &mut Errors) {
    for (i, alias) in aliases.iter().enumerate() {
        let path = path.index(i);
        for msg in is_valid_ip_sloppy(&alias.ip) {
            errs.push(FieldError::invalid(path.child("ip"), &alias.ip, msg));
        }
        for (j, hostname) in alias.hostnames.iter().flatten().enumerate() {
            for msg in is_dns1123_subdomain(hostname) {
                errs.push(FieldError::invalid(path.child("hostnames").index(j), hostname, msg));
            }
        }
    }
}
