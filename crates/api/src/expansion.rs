//! Kubernetes' `$(VAR)` expansion (`third_party/forked/golang/expansion/expand.go`): how the
//! kubelet expands a container's `command`, `args`, `env` values and exec probes, and, strictly,
//! its volume mounts' `subPathExpr` (`ExpandContainerVolumeMounts`).

use std::collections::{BTreeMap, BTreeSet};

/// Expands `$(VAR)` references from `env`; `$$` escapes; unknown references stay as written.
pub fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    expand_with(s, |name| env.get(name).map(String::as_str))
}

/// [`expand`] looking in `env` first, then in `fallback` (the kubelet's
/// `MappingFuncFor(tmpEnv, serviceEnv)`: a container's own variables, then the Services').
pub fn expand_over(s: &str, env: &BTreeMap<String, String>, fallback: &BTreeMap<String, String>) -> String {
    expand_with(s, |name| env.get(name).or_else(|| fallback.get(name)).map(String::as_str))
}

/// Kubernetes' `expansion.Expand` with `lookup` as its mapping: `None` leaves the reference as
/// written.
fn expand_with<'a>(s: &str, mut lookup: impl FnMut(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let var = &inner[..end];
                    match lookup(var) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(var);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// [`expand`] for `subPathExpr`: a reference to a variable that is unset or empty is an error
/// (`ExpandContainerVolumeMounts`).
pub fn expand_strict(s: &str, env: &BTreeMap<String, String>) -> Result<String, String> {
    let mut missing = BTreeSet::new();
    let expanded = expand_with(s, |name| match env.get(name).filter(|v| !v.is_empty()) {
        Some(v) => Some(v.as_str()),
        None => {
            missing.insert(name.to_string());
            Some("")
        }
    });
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(format!("missing value for {}", missing.into_iter().collect::<Vec<_>>().join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `expansion` test table (third_party/forked/golang/expansion/expand_test.go).
    #[test]
    fn expands_references_as_upstreams_table_says() {
        let env: BTreeMap<String, String> =
            [("VAR_A", "A"), ("VAR_B", "B"), ("VAR_C", "C"), ("VAR_REF", "$(VAR_A)"), ("VAR_EMPTY", "")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let cases = [
            ("$(VAR_A)", "A"),
            ("$(VAR_A)-$(VAR_A)", "A-A"),
            ("$(VAR_A)-1", "A-1"),
            ("___$(VAR_B)___", "___B___"),
            ("___$(VAR_C)", "___C"),
            ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
            ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
            ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            ("foo\\$(VAR_C)bar", "foo\\Cbar"),
            ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
            ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
            ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
            ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
            ("$(VAR_REF)", "$(VAR_A)"),
            ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
            ("foo$(VAR_EMPTY)bar", "foobar"),
            ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
            ("f00__(VAR_A)__", "f00__(VAR_A)__"),
            ("$?_boo_$!", "$?_boo_$!"),
            ("$VAR_A", "$VAR_A"),
            ("$(VAR_DNE)", "$(VAR_DNE)"),
            ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
            ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
            ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
            ("$$$$$$$(VAR_A)", "$$$A"),
            ("$VAR_A)", "$VAR_A)"),
            ("${VAR_A}", "${VAR_A}"),
            ("$(VAR_B)_______$(A", "B_______$(A"),
            ("$(VAR_C)_______$(", "C_______$("),
            ("$(VAR_A)foobarzab$", "Afoobarzab$"),
            ("foo-\\$(VAR_A", "foo-\\$(VAR_A"),
            ("--$($($($($--", "--$($($($($--"),
            ("$($($($($--foo$(", "$($($($($--foo$("),
            ("foo0--$($($($(", "foo0--$($($($("),
            ("$(foo$$var)", "$(foo$$var)"),
            ("\n", "\n"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, &env), want, "{input:?}");
        }
    }
}
