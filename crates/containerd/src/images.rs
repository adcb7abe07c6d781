//! The image archives: which image each holds, and importing the missing ones with `ctr`.

use crate::{EmbeddedError, EmbeddedResult, EmbeddedRuntime, IMAGE_PREFIX, POLL, SANDBOX_IMAGE};
use podwright_runtime::ImageService;
use podwright_runtime::cri::CriRuntime;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

const CRI_NAMESPACE: &str = "k8s.io";
const CTR_TIMEOUT: Duration = Duration::from_secs(60);
/// CRI learns about imported images from containerd's event stream, a moment after the import.
const IMAGE_VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);

impl EmbeddedRuntime {
    /// Makes sure the sandbox image and the image of each `NAME-TAG.tar` in the image directory
    /// are present for CRI, importing the archives of the missing ones.
    pub(crate) async fn load_images(&self, cri: &CriRuntime) -> EmbeddedResult<Vec<String>> {
        let mut wanted: Vec<(String, Option<PathBuf>)> =
            image_archives(&self.image_dir).into_iter().map(|(archive, image)| (image, Some(archive))).collect();
        if !wanted.iter().any(|(image, _)| image == SANDBOX_IMAGE) {
            wanted.push((SANDBOX_IMAGE.to_string(), None));
        }
        let mut imported = Vec::new();
        for (image, archive) in wanted {
            if self.image_present(cri, &image).await? {
                continue;
            }
            let Some(archive) = archive else {
                return Err(EmbeddedError::ImageMissing {
                    image,
                    endpoint: self.endpoint(),
                    why: format!(
                        "there is no archive for it in {} (run scripts/build-images, or set PODWRIGHT_IMAGE_DIR)",
                        self.image_dir.display()
                    ),
                });
            };
            // The embedded containerd's supervisor: real timeouts for a real process.
            #[allow(clippy::disallowed_methods)]
            let began = Instant::now();
            self.import(&archive, &image).await?;
            self.wait_visible(cri, &image, &archive).await?;
            tracing::info!(
                image,
                archive = %archive.display(),
                elapsed_ms = began.elapsed().as_millis() as u64,
                "imported image"
            );
            imported.push(image);
        }
        Ok(imported)
    }

    async fn image_present(&self, cri: &CriRuntime, image: &str) -> EmbeddedResult<bool> {
        match cri.image_status(image).await {
            Ok(found) => Ok(found.is_some()),
            Err(error) => {
                Err(EmbeddedError::Cri { call: "ImageStatus", endpoint: self.endpoint(), message: error.to_string() })
            }
        }
    }

    /// CRI learns about an import from containerd's event stream, a moment after `ctr` returns.
    async fn wait_visible(&self, cri: &CriRuntime, image: &str, archive: &Path) -> EmbeddedResult<()> {
        // The embedded containerd's supervisor: real timeouts for a real process.
        #[allow(clippy::disallowed_methods)]
        let begin = Instant::now();
        while !self.image_present(cri, image).await? {
            if begin.elapsed() >= IMAGE_VISIBLE_TIMEOUT {
                return Err(EmbeddedError::ImageMissing {
                    image: image.into(),
                    endpoint: self.endpoint(),
                    why: format!(
                        "{} was imported but CRI does not see the image after {IMAGE_VISIBLE_TIMEOUT:?} (is the tag the layout's org.opencontainers.image.ref.name?)",
                        archive.display()
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// `ctr images import` into CRI's namespace: the layout's ref name (the tag) is appended to
    /// the base name, and --digests also records `localhost/NAME@sha256:…` as a repo digest.
    async fn import(&self, archive: &Path, image: &str) -> EmbeddedResult<()> {
        let base = image.rsplit_once(':').map_or(image, |(base, _)| base);
        let mut command = Command::new("ctr");
        command
            .arg("-a")
            .arg(&self.socket)
            .args(["-n", CRI_NAMESPACE, "images", "import", "--base-name", base, "--digests"])
            .arg(archive)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let shown = format!(
            "ctr -a {} -n {CRI_NAMESPACE} images import --base-name {base} --digests {}",
            self.socket.display(),
            archive.display()
        );
        let output = match tokio::time::timeout(CTR_TIMEOUT, command.output()).await {
            Err(_) => {
                return Err(EmbeddedError::Ctr {
                    command: shown,
                    message: format!("no answer within {CTR_TIMEOUT:?}"),
                });
            }
            Ok(Err(error)) => {
                return Err(EmbeddedError::Spawn { program: "ctr".into(), error });
            }
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            return Err(EmbeddedError::Ctr {
                command: shown,
                message: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
            });
        }
        Ok(())
    }
}

/// The image an archive holds, by the `scripts/build-images` convention: `NAME-TAG.tar` is
/// `localhost/NAME:TAG` (the layout's ref name is the tag).
pub fn image_for_archive(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".tar")?;
    let (name, tag) = stem.rsplit_once('-')?;
    (!name.is_empty() && !tag.is_empty()).then(|| format!("{IMAGE_PREFIX}/{name}:{tag}"))
}

/// The archives in `dir` with their images, sorted by file name; a missing directory has none.
fn image_archives(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut archives: Vec<_> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let image = image_for_archive(entry.file_name().to_str()?)?;
            Some((entry.path(), image))
        })
        .collect();
    archives.sort();
    archives
}
