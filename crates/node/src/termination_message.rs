//! Termination messages: each container instance gets its own host file mounted at
//! `terminationMessagePath`; after the container exits, the file (or, with
//! `FallbackToLogsOnError`, the end of its log) becomes the terminated state's `message`.

use crate::layout;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// The kubelet's limits: the file is read up to 4096 bytes; the log fallback takes the last
/// 80 lines, at most 2048 bytes.
const MAX_FILE_BYTES: u64 = 4096;
const MAX_LOG_LINES: usize = 80;
const MAX_LOG_BYTES: usize = 2048;

/// Creates the empty, world-writable file a new instance writes its message to.
pub fn prepare(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let open = || std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o666).open(path);
    let file = match open() {
        // A sandbox made before the directory was part of it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            open()?
        }
        opened => opened?,
    };
    // The umask filters the mode given at creation; containers may run as any user.
    file.set_permissions(std::fs::Permissions::from_mode(0o666))
}

fn read_file(path: &Path) -> Option<String> {
    // Most instances leave no message: one stat tells so without opening the file.
    if std::fs::metadata(path).ok()?.len() == 0 {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path).ok()?.take(MAX_FILE_BYTES).read_to_end(&mut buf).ok()?;
    (!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).into_owned())
}

/// The last lines of a CRI log file, their messages only.
fn log_tail(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    // Each CRI line carries a ~40 byte prefix; read enough to find 80 messages of 2 KiB.
    let start = len.saturating_sub(64 * 1024);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    let lines: Vec<&str> = text.lines().skip(usize::from(start > 0)).map(podwright_runtime::cri_log::message).collect();
    let tail = lines[lines.len().saturating_sub(MAX_LOG_LINES)..].join("\n");
    let cut = tail.len().saturating_sub(MAX_LOG_BYTES);
    let tail = tail[tail.char_indices().map(|(i, _)| i).find(|i| *i >= cut).unwrap_or(tail.len())..].to_string();
    (!tail.is_empty()).then_some(tail)
}

/// The message of an exited instance, if it left one.
pub fn read(
    root: &Path,
    uid: &str,
    container: &str,
    restart_count: i32,
    policy: &str,
    exit_code: i32,
) -> Option<String> {
    read_file(&layout::termination_message(root, uid, container, restart_count)).or_else(|| {
        (policy == "FallbackToLogsOnError" && exit_code != 0)
            .then(|| log_tail(&layout::container_log(root, uid, container, restart_count)))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_first_then_log_fallback_on_error_only() {
        let root = std::env::temp_dir().join(format!("pw-tm-{}", std::process::id()));
        let file = layout::termination_message(&root, "u", "c", 0);
        prepare(&file).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o666);
        let log = layout::container_log(&root, "u", "c", 0);
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        std::fs::write(&log, "2024-01-01T00:00:00Z stdout F one\n2024-01-01T00:00:00Z stderr F two\n").unwrap();
        assert_eq!(read(&root, "u", "c", 0, "File", 1), None);
        assert_eq!(read(&root, "u", "c", 0, "FallbackToLogsOnError", 1).as_deref(), Some("one\ntwo"));
        assert_eq!(read(&root, "u", "c", 0, "FallbackToLogsOnError", 0), None);
        std::fs::write(&file, "bye").unwrap();
        assert_eq!(read(&root, "u", "c", 0, "FallbackToLogsOnError", 1).as_deref(), Some("bye"));
        std::fs::remove_dir_all(root).unwrap();
    }
}
