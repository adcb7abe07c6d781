//! The tests' image registry: a [`podwright_registry::Registry`] filled with the locally built
//! images, whose images are removed from the suite's containerd when it goes (also when the test
//! panics).

use crate::containerd_socket;
pub use podwright_registry::image_dir;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::Deref;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running registry; see the module documentation. Derefs to the registry itself (`host`,
/// `auth`, `image`, `log`, `manifest_requests`, `dir`).
pub struct Registry(podwright_registry::Registry);

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
        Registry(podwright_registry::Registry::start("podwright-test", auth).unwrap_or_else(|e| panic!("{e}")))
    }

    /// Pushes the locally built image archive `archive` (a file name in [`image_dir`], such as
    /// `busybox-1.36.tar`, whose layout names the image by its tag) as `repo_tag` (`NAME:TAG`).
    /// Returns the image's full reference, `127.0.0.1:PORT/NAME:TAG`.
    pub fn push(&self, archive: &str, repo_tag: &str) -> String {
        let path = image_dir().join(archive);
        assert!(path.is_file(), "{} is missing (run scripts/build-images)", path.display());
        let tag = archive.trim_end_matches(".tar").rsplit('-').next().expect("NAME-TAG.tar");
        self.0.push(&format!("oci-archive:{}:{tag}", path.display()), repo_tag).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Deref for Registry {
    type Target = podwright_registry::Registry;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Its images in the suite's containerd would only pile up: nothing can pull them again.
        remove_images_from(&self.0.host);
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
