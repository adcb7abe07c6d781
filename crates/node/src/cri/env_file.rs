//! Env files for `env[].valueFrom.fileKeyRef` (KEP-3721): the strict subset of POSIX shell the
//! kubelet reads (`pkg/kubelet/util/env`), so that a file means what `set -a; . file` would
//! make of it, and nothing in it is run or expanded.
//!
//! One assignment a line, `NAME='value'`: blank lines and lines starting with `#` (after leading
//! blanks) are skipped; the value is single-quoted and kept as written, newlines included; after
//! the closing quote only blanks and a `# comment` may follow. `NAME=` followed by nothing or a
//! blank assigns the empty string, as the shell does. A later assignment of a name wins.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

/// The largest env file read (the KEP's 64 KiB).
pub const MAX_BYTES: u64 = 64 << 10;

/// At most this many symbolic links are followed resolving a path in a volume (as the kernel's
/// `MAXSYMLINKS`-like bound of `securejoin`).
const MAX_SYMLINKS: usize = 255;

/// The value of `key` in the env file at `path`: `Ok(None)` when the file does not assign it.
/// Err: the file cannot be read or is not in the format; the text says where.
pub fn value_of(path: &Path, key: &str) -> Result<Option<String>, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("failed to open environment variable file {path:?}: {e}"))?;
    if meta.len() > MAX_BYTES {
        return Err(format!("environment variable file {path:?} is larger than {MAX_BYTES} bytes"));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("error reading environment variable file {path:?}: {e}"))?;
    Ok(parse(&text)?.into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v))
}

/// Every assignment of the file, in order. Err: the first malformed line.
fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut line = 0;
    while !rest.is_empty() {
        line += 1;
        let (current, next) = rest.split_once('\n').unwrap_or((rest, ""));
        rest = next;
        let current = current.trim_start_matches([' ', '\t']);
        if current.is_empty() || current.starts_with('#') {
            continue;
        }
        let start = line;
        let invalid = || format!("invalid environment variable format at line {start}");
        let (name, after) = current.split_once('=').ok_or_else(invalid)?;
        if name.is_empty() {
            return Err(invalid());
        }
        if name.ends_with([' ', '\t']) {
            return Err(format!("{}: whitespace before '=' is not allowed", invalid()));
        }
        // `NAME=` then nothing or a blank: the shell assigns the empty string.
        if after.is_empty() || after.starts_with([' ', '\t']) {
            out.push((name.to_string(), String::new()));
            continue;
        }
        let Some(quoted) = after.strip_prefix('\'') else {
            return Err(format!("{}: value must be enclosed in single quotes", invalid()));
        };
        // The value runs to the next quote, over as many lines as it takes.
        let (value, tail) = match quoted.split_once('\'') {
            Some((value, tail)) => (value.to_string(), tail),
            None => {
                let mut value = quoted.to_string();
                loop {
                    if rest.is_empty() {
                        return Err(format!("{}: unterminated quoted value", invalid()));
                    }
                    line += 1;
                    let (more, next) = rest.split_once('\n').unwrap_or((rest, ""));
                    rest = next;
                    value.push('\n');
                    match more.split_once('\'') {
                        Some((end, tail)) => {
                            value.push_str(end);
                            break (value, tail);
                        }
                        None => value.push_str(more),
                    }
                }
            }
        };
        let trimmed = tail.trim_start_matches([' ', '\t']);
        let comment = trimmed.len() < tail.len() && trimmed.starts_with('#');
        if !trimmed.is_empty() && !comment {
            return Err(format!(
                "invalid environment variable format at line {line}: unexpected content after closing quote"
            ));
        }
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// `securejoin.SecureJoin`: `unsafe_path` inside `root`, its symbolic links resolved as if
/// `root` were `/`, so that neither a link nor `..` leads out of the volume.
pub fn secure_join(root: &Path, unsafe_path: &str) -> io::Result<PathBuf> {
    let mut pending: VecDeque<String> = unsafe_path.split('/').map(str::to_string).collect();
    let mut inside = PathBuf::new();
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                inside.pop();
                continue;
            }
            _ => {}
        }
        let candidate = inside.join(&part);
        let full = root.join(&candidate);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::other(format!("too many symbolic links resolving {unsafe_path:?}")));
                }
                let target = std::fs::read_link(&full)?;
                let target = target.to_string_lossy();
                if target.starts_with('/') {
                    inside = PathBuf::new();
                }
                for c in target.split('/').rev() {
                    pending.push_front(c.to_string());
                }
            }
            // What does not exist (yet) is taken as written.
            _ => inside = candidate,
        }
    }
    Ok(root.join(inside))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, key: &str) -> Result<Option<String>, String> {
        Ok(parse(text)?.into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v))
    }

    #[test]
    fn quoted_values_are_kept_as_written() {
        let text = "   KEY1='val1'\n\t\tKEY2='  foo $HOME ${X} \\n \"q\" '\n# comment\n\nKEY3='a=b#c' # note\n";
        assert_eq!(value(text, "KEY1").unwrap().as_deref(), Some("val1"));
        assert_eq!(value(text, "KEY2").unwrap().as_deref(), Some("  foo $HOME ${X} \\n \"q\" "));
        assert_eq!(value(text, "KEY3").unwrap().as_deref(), Some("a=b#c"));
        assert_eq!(value(text, "NONE").unwrap(), None);
        assert_eq!(value("K=''\n", "K").unwrap().as_deref(), Some(""));
    }

    #[test]
    fn a_value_may_span_lines_and_a_later_assignment_wins() {
        let text = "K='line one\n\n  line three'\nL='x'\nL='y'\n";
        assert_eq!(value(text, "K").unwrap().as_deref(), Some("line one\n\n  line three"));
        assert_eq!(value(text, "L").unwrap().as_deref(), Some("y"));
    }

    #[test]
    fn an_empty_assignment_is_the_empty_string() {
        assert_eq!(value("K=\n", "K").unwrap().as_deref(), Some(""));
        assert_eq!(value("K= 'v'\n", "K").unwrap().as_deref(), Some(""));
    }

    #[test]
    fn malformed_files_are_refused_with_the_line() {
        let err = |text: &str| parse(text).unwrap_err();
        assert!(err("A='a'\nINVALID_LINE\n").contains("at line 2"));
        assert!(err("='foo'\n").contains("invalid environment variable format at line 1"));
        assert!(err("KEY1 = 'v'\n").contains("whitespace before '=' is not allowed"));
        assert!(err("K=bar\n").contains("value must be enclosed in single quotes"));
        assert!(err("K=\"bar\"\n").contains("value must be enclosed in single quotes"));
        assert!(err("K='foo''bar'\n").contains("unexpected content after closing quote"));
        assert!(err("K='bar'baz\n").contains("unexpected content after closing quote"));
        assert!(err("K='bar\nL='baz'\n").contains("unexpected content after closing quote"));
        assert!(err("K='bar\n").contains("unterminated quoted value"));
    }

    #[test]
    fn a_file_over_64_kib_is_refused() {
        let dir = std::env::temp_dir().join(format!("pw-envfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.env");
        std::fs::write(&big, format!("K='{}'\n", "x".repeat(MAX_BYTES as usize))).unwrap();
        assert!(value_of(&big, "K").unwrap_err().contains("larger than 65536 bytes"));
        let small = dir.join("small.env");
        std::fs::write(&small, "K='v'\n").unwrap();
        assert_eq!(value_of(&small, "K").unwrap().as_deref(), Some("v"));
        assert!(value_of(&dir.join("none.env"), "K").unwrap_err().starts_with("failed to open"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_stays_inside_the_root_through_links_and_backsteps() {
        let root = std::env::temp_dir().join(format!("pw-securejoin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../..", root.join("d/up")).unwrap();
        assert_eq!(secure_join(&root, "a/b.env").unwrap(), root.join("a/b.env"));
        assert_eq!(secure_join(&root, "abs/passwd").unwrap(), root.join("etc/passwd"));
        assert_eq!(secure_join(&root, "d/up/x").unwrap(), root.join("x"));
        assert_eq!(secure_join(&root, "../../x").unwrap(), root.join("x"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
