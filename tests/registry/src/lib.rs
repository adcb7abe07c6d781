//! A real image registry on this machine, for the end-to-end tests and the benchmark: Debian's
//! `docker-registry` (the distribution registry, v2 API) on a free loopback port, plain HTTP,
//! with or without htpasswd auth, filled by `skopeo`. containerd 1.6 pulls over plain HTTP from
//! `127.0.0.1:PORT` without any registry configuration (its resolver treats loopback hosts as
//! HTTP-capable), so any embedded containerd reaches it as it is.
//!
//! Each [`Registry`] owns its process, storage and log in a fresh temporary directory; dropping
//! it kills the process and removes the directory. The process is also killed when the thread
//! that started it ends (Linux parent-death signal), so a killed test or benchmark leaves no
//! registry running. It never inherits its parent's stdout or stderr.
// A real process is waited for in real time.
#![allow(clippy::disallowed_methods)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the registry may take to listen.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A running registry; see the crate documentation.
pub struct Registry {
    /// `127.0.0.1:PORT`, the host part of its image references.
    pub host: String,
    /// Basic-auth user and password when it requires them.
    pub auth: Option<(String, String)>,
    dir: PathBuf,
    child: Child,
}

/// Where scripts/build-images put the image archives (`PODWRIGHT_IMAGE_DIR` overrides it).
pub fn image_dir() -> PathBuf {
    std::env::var_os("PODWRIGHT_IMAGE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/share/podwright/images"))
}

impl Registry {
    /// Starts a registry that answers only requests with basic auth `user`:`password` when
    /// `auth` is given, anyone otherwise. Its directory is named after `purpose`.
    pub fn start(purpose: &str, auth: Option<(String, String)>) -> Result<Registry, String> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("{purpose}-registry-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let io =
            |what: &str, e: std::io::Error| format!("cannot write the registry's {what} in {}: {e}", dir.display());
        std::fs::create_dir_all(dir.join("data")).map_err(|e| io("storage", e))?;
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:0\n",
            dir.join("data").display()
        );
        if let Some((user, password)) = &auth {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run htpasswd (package apache2-utils; run scripts/setup): {e}"))?;
            if !out.status.success() {
                return Err(format!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
            std::fs::write(dir.join("htpasswd"), &out.stdout).map_err(|e| io("htpasswd file", e))?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: podwright-test\n    path: {}\n",
                dir.join("htpasswd").display()
            ));
        }
        std::fs::write(dir.join("config.yml"), config).map_err(|e| io("config", e))?;
        let log = std::fs::File::create(dir.join("log")).map_err(|e| io("log", e))?;
        let log2 = log.try_clone().map_err(|e| io("log", e))?;
        let mut command = Command::new("docker-registry");
        command.arg("serve").arg(dir.join("config.yml")).stdin(Stdio::null()).stdout(log2).stderr(log);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run docker-registry (package docker-registry; run scripts/setup): {e}"))?;
        // Owned from here: an error below still kills it.
        let mut registry = Registry { host: String::new(), auth, dir, child };
        registry.host = registry.wait_for_listener()?;
        Ok(registry)
    }

    /// The address from its "listening on 127.0.0.1:PORT" line (it picked a free port itself).
    fn wait_for_listener(&mut self) -> Result<String, String> {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let log = self.log();
            if let Some(rest) = log.split("listening on ").nth(1) {
                return Ok(rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("docker-registry exited ({status}) before it listened:\n{log}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("docker-registry did not listen within {START_LIMIT:?}:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Copies the image `source` (a skopeo source reference: `oci-archive:PATH:TAG`,
    /// `oci:DIR:TAG`) into the registry as `repo_tag` (`NAME:TAG`). Returns the image's full
    /// reference, `127.0.0.1:PORT/NAME:TAG`.
    pub fn push(&self, source: &str, repo_tag: &str) -> Result<String, String> {
        let image = self.image(repo_tag);
        let mut skopeo = Command::new("skopeo");
        skopeo.args(["copy", "--quiet", "--dest-tls-verify=false"]).arg(source).arg(format!("docker://{image}"));
        if let Some((user, password)) = &self.auth {
            skopeo.arg("--dest-creds").arg(format!("{user}:{password}"));
        }
        let out = skopeo
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run skopeo (package skopeo; run scripts/setup): {e}"))?;
        if !out.status.success() {
            return Err(format!("skopeo copy {source} to {image} failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(image)
    }

    /// `127.0.0.1:PORT/` + `repo_tag`.
    pub fn image(&self, repo_tag: &str) -> String {
        format!("{}/{repo_tag}", self.host)
    }

    /// Everything the registry logged so far (its own lines and its access log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// The access log's request lines (`METHOD PATH`) for repository `repo`'s manifests, as
    /// pulls ask for them (`HEAD` to resolve a tag, `GET` to fetch); pushes excluded.
    pub fn manifest_requests(&self, repo: &str) -> Vec<String> {
        let needle = format!("/v2/{repo}/manifests/");
        self.log()
            .lines()
            // Access log lines: `... "GET /v2/NAME/manifests/TAG HTTP/1.1" 200 ...`.
            .filter_map(|line| line.split('"').nth(1))
            .filter(|request| request.contains(&needle) && !request.starts_with("PUT "))
            .map(|request| request.trim_end_matches(" HTTP/1.1").to_string())
            .collect()
    }

    /// The registry's directory (storage, config, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_listens_and_goes_with_its_directory() {
        let Ok(registry) = Registry::start("podwright-registry-selftest", None) else {
            // Not every build machine has docker-registry; scripts/setup installs it.
            assert!(Command::new("docker-registry").arg("--version").output().is_err());
            return;
        };
        let (host, dir) = (registry.host.clone(), registry.dir().to_path_buf());
        assert!(host.starts_with("127.0.0.1:"), "{host}");
        assert!(std::net::TcpStream::connect(&host).is_ok());
        assert_eq!(registry.image("a/b:1"), format!("{host}/a/b:1"));
        drop(registry);
        assert!(!dir.exists());
        assert!(std::net::TcpStream::connect(&host).is_err());
    }
}
