//! `scripts/package`: the Debian package installs with dpkg, gives `/usr/bin/podwright`, a unit
//! systemd accepts, a config `serve` accepts (a conffile), completions and man pages, and is
//! purged without a trace.

use podwright_e2e::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INSTALLED: &[&str] = &[
    "/usr/bin/podwright",
    "/lib/systemd/system/podwright.service",
    "/etc/podwright/config.yaml",
    "/etc/podwright/manifests",
    "/usr/share/bash-completion/completions/podwright",
    "/usr/share/zsh/vendor-completions/_podwright",
    "/usr/share/fish/vendor_completions.d/podwright.fish",
    "/usr/share/man/man1/podwright.1.gz",
    "/usr/share/man/man1/podwright-serve.1.gz",
    "/usr/share/man/man1/podwright-runtime-start.1.gz",
];

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Purges the package however the test ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "podwright"]);
    }
}

#[test]
fn the_package_installs_runs_and_purges_cleanly() {
    let installed_before = run("dpkg-query", &["-W", "-f=${Status}", "podwright"]);
    assert!(
        !String::from_utf8_lossy(&installed_before.stdout).contains("install ok installed"),
        "podwright is installed as a package on this machine: this test installs and purges its own"
    );
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out_dir = std::env::temp_dir().join(format!("podwright-e2e-package-{}", std::process::id()));
    let binary = binary();
    let built = run(
        workspace.join("scripts/package").to_str().unwrap(),
        &["--binary", binary.to_str().unwrap(), "--out-dir", out_dir.to_str().unwrap()],
    );
    assert!(built.status.success(), "{}", text(&built));
    let deb = PathBuf::from(String::from_utf8_lossy(&built.stdout).lines().last().unwrap().trim());
    assert!(deb.starts_with(&out_dir) && deb.extension().is_some_and(|e| e == "deb"), "{}", deb.display());

    let _purge = Installed;
    let install = run("dpkg", &["-i", deb.to_str().unwrap()]);
    assert!(install.status.success(), "{}", text(&install));
    for path in INSTALLED {
        assert!(Path::new(path).exists(), "{path} not installed");
    }
    let version = run("/usr/bin/podwright", &["--version"]);
    assert_eq!(text(&version), text(&run(binary.to_str().unwrap(), &["--version"])));
    let conffiles = run("dpkg-query", &["-W", "-f=${Conffiles}", "podwright"]);
    assert!(text(&conffiles).contains("/etc/podwright/config.yaml"), "{}", text(&conffiles));

    // systemd takes the unit as it is: no warning either (a misspelt setting is only warned of).
    let verify = run("systemd-analyze", &["verify", "--man=no", "/lib/systemd/system/podwright.service"]);
    assert!(verify.status.success() && verify.stderr.is_empty(), "{}", text(&verify));

    // The installed config passes serve's checks: serve goes on to the runtime, which is not
    // there (exit 3); a config it refused would exit 2 before.
    let root = out_dir.join("root");
    let serve = run(
        "/usr/bin/podwright",
        &[
            "serve",
            "--config",
            "/etc/podwright/config.yaml",
            "--port",
            "0",
            "--root-dir",
            root.to_str().unwrap(),
            "--runtime-endpoint",
            "unix:///nonexistent/containerd.sock",
        ],
    );
    assert_eq!(serve.status.code(), Some(3), "{}", text(&serve));
    assert!(text(&serve).contains("cannot reach the container runtime"), "{}", text(&serve));

    let purge = run("dpkg", &["--purge", "podwright"]);
    assert!(purge.status.success(), "{}", text(&purge));
    for path in INSTALLED.iter().chain(&["/etc/podwright"]) {
        assert!(!Path::new(path).exists(), "{path} left after the purge");
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}
