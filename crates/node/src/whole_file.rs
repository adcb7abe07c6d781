//! Files replaced whole or not at all: the new content goes to a temporary file beside the old
//! one and is renamed over it, so that a crash leaves the old content or the new, never part of
//! either.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// What the new content must survive once `replace` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The process's crash: the page cache keeps it.
    Process,
    /// The machine's crash too: synced to the disk before the rename.
    Machine,
}

/// `path`'s content made `bytes`, its directory made when missing.
pub(crate) fn replace(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    if durability == Durability::Machine {
        file.sync_all()?;
    }
    drop(file);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("pw-whole-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("f.json");
        replace(&path, b"one", Durability::Process).unwrap();
        replace(&path, b"two", Durability::Machine).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
