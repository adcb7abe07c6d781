//! A real image registry for the tests: Debian's `docker-registry` (the distribution registry,
//! v2 API) on a free loopback port, plain HTTP, with or without htpasswd auth, filled with the
//! locally built images by `skopeo`. containerd 1.6 pulls over plain HTTP from `127.0.0.1:PORT`
//! without any registry configuration (its resolver treats loopback hosts as HTTP-capable), so the
//! suite's containerd reaches it as it is.
//!
//! Each [`Registry`] owns its process, storage and log in a fresh temporary directory; dropping it
//! kills the process (also when the test panics) and removes the images it served from the
//! suite's containerd. The process is also killed when the thread that started it ends (Linux
//! parent-death signal), so a test binary that is itself killed leaves no registry running.

use crate::containerd_socket;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running registry; see the module documentation.
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
    /// A registry anyone may pull from and push to.
    pub fn start() -> Registry {
        Self::launch(None)
    }

    /// A registry that answers only requests with basic auth `user`:`password`.
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Self::launch(Some((user.to_string(), password.to_string())))
    }

    fn launch(auth: Option<(String, String)>) -> Registry {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("podwright-registry-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("the registry's directory");
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
                .output()
                .unwrap_or_else(|e| panic!("cannot run htpasswd (package apache2-utils; run scripts/setup): {e}"));
            assert!(out.status.success(), "htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
            std::fs::write(dir.join("htpasswd"), &out.stdout).expect("the htpasswd file");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: podwright-test\n    path: {}\n",
                dir.join("htpasswd").display()
            ));
        }
        std::fs::write(dir.join("config.yml"), config).expect("the registry's config");
        let log = std::fs::File::create(dir.join("log")).expect("the registry's log");
        let mut command = Command::new("docker-registry");
        command
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log);
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
            .unwrap_or_else(|e| panic!("cannot run docker-registry (package docker-registry; run scripts/setup): {e}"));
        // Owned from here: a panic below still kills it.
        let mut registry = Registry { host: String::new(), auth, dir, child };
        registry.host = registry.wait_for_listener();
        registry
    }

    /// The address from its "listening on 127.0.0.1:PORT" line (it picked a free port itself).
    fn wait_for_listener(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if let Some(rest) = log.split("listening on ").nth(1) {
                let addr: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
                return addr;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited ({status}) before it listened:\n{log}");
            }
            assert!(Instant::now() < deadline, "docker-registry did not listen within 30 s:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Pushes the locally built image archive `archive` (a file name in [`image_dir`], such as
    /// `busybox-1.36.tar`, whose layout names the image by its tag) as `repo_tag` (`NAME:TAG`).
    /// Returns the image's full reference, `127.0.0.1:PORT/NAME:TAG`.
    pub fn push(&self, archive: &str, repo_tag: &str) -> String {
        let path = image_dir().join(archive);
        assert!(path.is_file(), "{} is missing (run scripts/build-images)", path.display());
        let tag = archive.trim_end_matches(".tar").rsplit('-').next().expect("NAME-TAG.tar");
        let image = self.image(repo_tag);
        let mut skopeo = Command::new("skopeo");
        skopeo
            .args(["copy", "--quiet", "--dest-tls-verify=false"])
            .arg(format!("oci-archive:{}:{tag}", path.display()))
            .arg(format!("docker://{image}"));
        if let Some((user, password)) = &self.auth {
            skopeo.arg("--dest-creds").arg(format!("{user}:{password}"));
        }
        let out = skopeo.output().unwrap_or_else(|e| panic!("cannot run skopeo (run scripts/setup): {e}"));
        assert!(out.status.success(), "skopeo copy to {image} failed: {}", String::from_utf8_lossy(&out.stderr));
        image
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
        // Its images in the suite's containerd would only pile up: nothing can pull them again.
        if !self.host.is_empty() {
            remove_images_from(&self.host);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A proxy in front of a [`Registry`] that holds every manifest request (each pull starts with
/// one) for a while before passing it on, and counts how many it held at once: the number of
/// pulls under way together. Pull through [`Self::image`]; push to the registry itself.
pub struct CountingProxy {
    /// `127.0.0.1:PORT` of the proxy.
    pub host: String,
    held: Arc<Mutex<(usize, usize)>>,
    stop: Arc<AtomicBool>,
}

impl CountingProxy {
    /// Listens on a free loopback port and forwards to `registry`, holding each manifest
    /// request `hold` long.
    pub fn start(registry: &Registry, hold: Duration) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port for the proxy");
        let host = listener.local_addr().expect("bound").to_string();
        let upstream = registry.host.clone();
        let held = Arc::new(Mutex::new((0, 0)));
        let stop = Arc::new(AtomicBool::new(false));
        let (held2, stop2) = (held.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (upstream, held) = (upstream.clone(), held2.clone());
                std::thread::spawn(move || forward(client, &upstream, &held, hold));
            }
        });
        CountingProxy { host, held, stop }
    }

    /// `127.0.0.1:PROXYPORT/` + `repo_tag`.
    pub fn image(&self, repo_tag: &str) -> String {
        format!("{}/{repo_tag}", self.host)
    }

    /// The most manifest requests held at one moment so far.
    pub fn max_at_once(&self) -> usize {
        self.held.lock().unwrap().1
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the stop.
        let _ = TcpStream::connect(&self.host);
        remove_images_from(&self.host);
    }
}

/// Removes the images pulled from `host` (`127.0.0.1:PORT`) from the suite's containerd.
fn remove_images_from(host: &str) {
    let sock = containerd_socket();
    let Ok(listed) = Command::new("ctr").arg("-a").arg(&sock).args(["-n", "k8s.io", "images", "ls", "-q"]).output()
    else {
        return;
    };
    let prefix = format!("{host}/");
    let ours: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    if !ours.is_empty() {
        let _ = Command::new("ctr")
            .arg("-a")
            .arg(&sock)
            .args(["-n", "k8s.io", "images", "rm"])
            .args(&ours)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// One client connection: its requests (pulls send no bodies) go upstream one by one, manifest
/// requests after `hold`; the answers come back as they are.
fn forward(client: TcpStream, upstream: &str, held: &Mutex<(usize, usize)>, hold: Duration) {
    let Ok(mut server) = TcpStream::connect(upstream) else { return };
    let (Ok(mut back), Ok(server_read)) = (client.try_clone(), server.try_clone()) else { return };
    std::thread::spawn(move || {
        let mut from = server_read;
        let _ = std::io::copy(&mut from, &mut back);
        let _ = back.shutdown(std::net::Shutdown::Both);
    });
    let mut requests = BufReader::new(client);
    loop {
        let mut head = String::new();
        // A request's head ends with an empty line.
        loop {
            let mut line = String::new();
            match requests.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = server.shutdown(std::net::Shutdown::Both);
                    return;
                }
                Ok(_) => {}
            }
            head.push_str(&line);
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        let manifest = head.lines().next().is_some_and(|l| l.contains("/manifests/"));
        if manifest {
            {
                let mut h = held.lock().unwrap();
                h.0 += 1;
                h.1 = h.1.max(h.0);
            }
            std::thread::sleep(hold);
            held.lock().unwrap().0 -= 1;
        }
        if server.write_all(head.as_bytes()).is_err() {
            return;
        }
    }
}
