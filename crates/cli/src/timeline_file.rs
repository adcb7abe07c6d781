//! `run --timeline FILE`: the file the timelines of a run are written to.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file `--timeline` names, created before any pod starts so that a path that cannot be
/// written fails the run before it begins.
pub struct TimelineFile {
    path: PathBuf,
    file: File,
}

impl TimelineFile {
    pub fn create(path: &Path) -> Result<TimelineFile, String> {
        let file = File::create(path).map_err(|e| format!("cannot write the timeline to {}: {e}", path.display()))?;
        Ok(TimelineFile { path: path.to_path_buf(), file })
    }

    pub fn write(mut self, html: &str) -> Result<(), String> {
        self.file
            .write_all(html.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| format!("cannot write the timeline to {}: {e}", self.path.display()))
    }
}
