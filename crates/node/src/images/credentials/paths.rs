//! Where the node's own registry credentials are read from (upstream's
//! `credentialprovider/config.go`): the first `config.json` that reads and parses, in the
//! kubelet's root directory, the working directory, `$HOME/.docker` and `/.docker`; when there
//! is none, the first legacy `.dockercfg` in the root directory, the working directory, `$HOME`
//! and `/`.

use super::{DockerConfig, Keyring, parse_config_json, parse_dockercfg};
use std::path::{Path, PathBuf};

/// The files searched for node credentials, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerConfigPaths {
    /// `config.json` files, searched first.
    pub config_json: Vec<PathBuf>,
    /// Legacy `.dockercfg` files, searched when no `config.json` was found.
    pub dockercfg: Vec<PathBuf>,
}

impl DockerConfigPaths {
    /// The kubelet's search list with `root` as its root directory, `working_dir` and `home`
    /// (`$HOME`; Go's empty `$HOME` makes relative paths, as here).
    pub fn kubelet(root: &Path, working_dir: &Path, home: &Path) -> Self {
        let dirs = |docker: &str| -> Vec<PathBuf> {
            vec![root.to_path_buf(), working_dir.to_path_buf(), home.join(docker), Path::new("/").join(docker)]
        };
        DockerConfigPaths {
            config_json: dirs(".docker").into_iter().map(|d| d.join("config.json")).collect(),
            dockercfg: dirs("").into_iter().map(|d| d.join(".dockercfg")).collect(),
        }
    }

    /// [`Self::kubelet`] for this process: its working directory and `$HOME`.
    pub fn of_this_process(root: &Path) -> Self {
        let working_dir = std::env::current_dir().unwrap_or_default();
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        Self::kubelet(root, &working_dir, &home)
    }

    /// The node's keyring as the files are now: empty when none is found.
    pub fn read(&self) -> Keyring {
        let found = first(&self.config_json, parse_config_json).or_else(|| first(&self.dockercfg, parse_dockercfg));
        let mut keyring = Keyring::default();
        keyring.add(found.unwrap_or_default());
        keyring
    }
}

fn first(files: &[PathBuf], parse: fn(&[u8]) -> Result<DockerConfig, super::CredentialsError>) -> Option<DockerConfig> {
    files.iter().find_map(|file| {
        let bytes = std::fs::read(file).ok()?;
        parse(&bytes).inspect_err(|e| tracing::debug!(file = %file.display(), "skipping node credentials: {e}")).ok()
    })
}
