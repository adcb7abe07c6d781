//! `hostPath` volumes: a path of the node given to containers as it is, once it passes the
//! kubelet's check of the volume's `type` (`pkg/volume/hostpath/host_path.go`, `checkType` and
//! `checkTypeInternal` of the 1.29–1.31 kubelets), which creates it for the `…OrCreate` types.
//! Paths are looked at through symbolic links, as Go's `os.Stat` does.

use super::os_error::path_error;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Checks `path` against the volume's `type` (empty: no check), creating it when the type says
/// so. The error is the kubelet's, as its `MountVolume.SetUp failed` event quotes it:
/// `hostPath type check failed: /var/lib/x is not a directory`.
pub fn check(path: &str, kind: &str) -> Result<(), String> {
    let p = Path::new(path);
    let (wanted, matches): (&str, fn(&Path) -> bool) = match kind {
        "" => return Ok(()),
        "DirectoryOrCreate" if !exists(p) => return make_dir(p),
        "DirectoryOrCreate" | "Directory" => ("directory", is_dir),
        "FileOrCreate" if !exists(p) => return make_file(p),
        // Anything but a directory is a file to the kubelet: a socket or a device passes.
        "FileOrCreate" | "File" => ("file", |p| exists(p) && !is_dir(p)),
        "Socket" => ("socket file", |p| file_type(p).is_some_and(|t| t.is_socket())),
        "CharDevice" => ("character device", |p| file_type(p).is_some_and(|t| t.is_char_device())),
        "BlockDevice" => ("block device", |p| file_type(p).is_some_and(|t| t.is_block_device())),
        other => return Err(format!("{other} is an invalid volume type")),
    };
    if matches(p) { Ok(()) } else { Err(format!("hostPath type check failed: {path} is not a {wanted}")) }
}

/// Whatever stops the kubelet from reading a path's type counts as "it does not exist".
fn exists(p: &Path) -> bool {
    fs::metadata(p).is_ok()
}

fn file_type(p: &Path) -> Option<fs::FileType> {
    fs::metadata(p).ok().map(|m| m.file_type())
}

fn is_dir(p: &Path) -> bool {
    file_type(p).is_some_and(|t| t.is_dir())
}

/// Go's `os.MkdirAll(path, 0755)`: the directory and its missing parents (the process's umask
/// applies, as it does to the kubelet's); the error names the directory that could not be made.
fn make_dir(p: &Path) -> Result<(), String> {
    match fs::metadata(p) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return Err(path_error("mkdir", p, &io::Error::from_raw_os_error(libc::ENOTDIR))),
        Err(_) => {}
    }
    if let Some(parent) = p.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        make_dir(parent)?;
    }
    match DirBuilder::new().mode(0o755).create(p) {
        Ok(()) => Ok(()),
        // Made meanwhile, or `x/.`.
        Err(_) if fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) => Ok(()),
        Err(e) => Err(path_error("mkdir", p, &e)),
    }
}

/// Go's `os.OpenFile(path, O_CREATE, 0644)`: an empty file, in a directory that must exist.
fn make_file(p: &Path) -> Result<(), String> {
    match OpenOptions::new().write(true).create(true).truncate(false).mode(0o644).open(p) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(path_error("open", p, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    /// A directory of the test's own, removed at the end.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("pw-hostpath-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
        fn path(&self, name: &str) -> String {
            self.0.join(name).to_str().unwrap().to_string()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode(p: &str) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// With the umask most processes have, the kubelet's modes come out as asked.
    fn umask_022() {
        // SAFETY: umask(2) only changes this process's file-creation mask.
        unsafe { libc::umask(0o022) };
    }

    #[test]
    fn each_type_accepts_its_kind_of_file() {
        let s = Scratch::new("accepts");
        let dir = s.path("dir");
        let file = s.path("file");
        fs::create_dir(&dir).unwrap();
        fs::write(&file, "x").unwrap();
        let socket = s.path("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = s.path("link-to-dir");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        for (path, kind) in [
            (dir.as_str(), "Directory"),
            (dir.as_str(), "DirectoryOrCreate"),
            (link.as_str(), "Directory"),
            (file.as_str(), "File"),
            (file.as_str(), "FileOrCreate"),
            (socket.as_str(), "Socket"),
            ("/dev/null", "CharDevice"),
            // Not a directory: a file, to the kubelet.
            ("/dev/null", "File"),
            (socket.as_str(), "File"),
            ("/no/such/path", ""),
        ] {
            assert_eq!(check(path, kind), Ok(()), "{path} as {kind}");
        }
    }

    #[test]
    fn a_mismatch_is_refused_in_the_kubelets_words() {
        let s = Scratch::new("refuses");
        let dir = s.path("dir");
        let file = s.path("file");
        fs::create_dir(&dir).unwrap();
        fs::write(&file, "x").unwrap();
        let missing = s.path("missing");
        for (path, kind, wanted) in [
            (file.as_str(), "Directory", "directory"),
            (file.as_str(), "DirectoryOrCreate", "directory"),
            (missing.as_str(), "Directory", "directory"),
            (dir.as_str(), "File", "file"),
            (dir.as_str(), "FileOrCreate", "file"),
            (missing.as_str(), "File", "file"),
            (file.as_str(), "Socket", "socket file"),
            (file.as_str(), "CharDevice", "character device"),
            ("/dev/null", "BlockDevice", "block device"),
            (dir.as_str(), "BlockDevice", "block device"),
        ] {
            assert_eq!(
                check(path, kind),
                Err(format!("hostPath type check failed: {path} is not a {wanted}")),
                "{path} as {kind}"
            );
        }
        assert_eq!(check(&dir, "Fifo"), Err("Fifo is an invalid volume type".to_string()));
    }

    #[test]
    fn or_create_types_create_what_is_missing() {
        umask_022();
        let s = Scratch::new("creates");
        let deep = s.path("a/b/c");
        assert_eq!(check(&deep, "DirectoryOrCreate"), Ok(()));
        assert!(fs::metadata(&deep).unwrap().is_dir());
        assert_eq!((mode(&deep), mode(&s.path("a"))), (0o755, 0o755));
        let file = s.path("a/new-file");
        assert_eq!(check(&file, "FileOrCreate"), Ok(()));
        assert!(fs::metadata(&file).unwrap().is_file());
        assert_eq!(mode(&file), 0o644);
        // Created once; again, it is checked and kept.
        fs::write(&file, "kept").unwrap();
        assert_eq!(check(&file, "FileOrCreate"), Ok(()));
        assert_eq!(fs::read_to_string(&file).unwrap(), "kept");
    }

    #[test]
    fn what_cannot_be_created_fails_with_gos_error() {
        let s = Scratch::new("cannot");
        let file = s.path("file");
        fs::write(&file, "x").unwrap();
        // A file cannot be made in a directory that is missing: the kubelet does not make it.
        let orphan = s.path("no-dir/f");
        assert_eq!(check(&orphan, "FileOrCreate"), Err(format!("open {orphan}: no such file or directory")));
        // Go's MkdirAll names the part that is not a directory.
        let under_file = s.path("file/sub");
        assert_eq!(check(&under_file, "DirectoryOrCreate"), Err(format!("mkdir {file}: not a directory")));
    }
}
