//! Failed system calls worded as the kubelet's Go reports them (`os.PathError`: `mkdir /a/b: not
//! a directory`), for the messages of `FailedMount` events.

use std::io;
use std::path::Path;

/// `<op> <path>: <error>`, the error in Go's words: the C library's text with a lower-case first
/// letter and no `(os error N)`, as Go's `syscall.Errno` table has it.
pub fn path_error(op: &str, path: &Path, e: &io::Error) -> String {
    format!("{op} {}: {}", path.display(), errno_text(e))
}

fn errno_text(e: &io::Error) -> String {
    let Some(code) = e.raw_os_error() else { return e.to_string() };
    let full = io::Error::from_raw_os_error(code).to_string();
    let text = full.strip_suffix(&format!(" (os error {code})")).unwrap_or(&full);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_gos() {
        let e = io::Error::from_raw_os_error(libc::ENOTDIR);
        assert_eq!(path_error("mkdir", Path::new("/a/b"), &e), "mkdir /a/b: not a directory");
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(path_error("open", Path::new("/x"), &e), "open /x: no such file or directory");
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(path_error("open", Path::new("/x"), &e), "open /x: permission denied");
    }
}
