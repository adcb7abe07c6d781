//! `api`: the local API of `podwright serve` under load. A child process (`api-server`, this
//! same binary) serves the API over the fake runtime, with the API server's default limits, on
//! the loopback; this process runs 1, 10 and 100 clients at once, each on a keep-alive
//! connection sending one request after another for a window: lists of a namespace of 100
//! ConfigMaps, then ConfigMap creates (into the store on disk, as serve keeps it): requests per
//! second, and any refused with 429. Then it opens many watches and reads the child's RSS
//! before and after: the memory one open watch costs.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::measure;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::limits::Limits;
use podwright_server::resources::Resource;
use podwright_server::{ApiServer, ServerConfig, transport};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The namespace the lists read, and how many ConfigMaps it holds.
const LISTED: &str = "listed";
const LISTED_OBJECTS: usize = 100;

#[derive(clap::Args)]
pub struct ApiArgs {
    /// Seconds of load for each operation and number of clients.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Watches held open at once for the memory figure.
    #[arg(long, default_value_t = 1000)]
    pub watches: usize,
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    List,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::List => "list",
        }
    }
}

struct Run {
    op: Op,
    clients: usize,
    per_s: f64,
    refused: u64,
    failed: u64,
}

pub struct ApiReport {
    runs: Vec<Run>,
    watches: usize,
    rss_before_kib: u64,
    rss_watching_kib: u64,
}

impl ApiReport {
    fn kib_per_watch(&self) -> f64 {
        self.rss_watching_kib.saturating_sub(self.rss_before_kib) as f64 / self.watches.max(1) as f64
    }

    pub fn print(&self) {
        println!("api: the local API over the fake runtime on the loopback, default limits (400 reading, 200 writing)");
        println!("  {:<8} {:>8} {:>14} {:>8} {:>8}", "request", "clients", "requests/s", "429s", "failed");
        for r in &self.runs {
            println!("  {:<8} {:>8} {:>14.0} {:>8} {:>8}", r.op.name(), r.clients, r.per_s, r.refused, r.failed);
        }
        println!(
            "  {} watches open: RSS {} KiB -> {} KiB, {:.1} KiB per watch",
            self.watches,
            self.rss_before_kib,
            self.rss_watching_kib,
            self.kib_per_watch()
        );
        for r in &self.runs {
            println!("api_{}_per_s_{}_clients: {:.0}", r.op.name(), r.clients, r.per_s);
        }
        println!("api_refused: {}", self.runs.iter().map(|r| r.refused).sum::<u64>());
        println!("api_failed: {}", self.runs.iter().map(|r| r.failed).sum::<u64>());
        println!("api_watch_kib: {:.1}", self.kib_per_watch());
    }
}

/// The child: the API with [`LISTED_OBJECTS`] ConfigMaps to list, on a free loopback port,
/// which it prints; it serves until its standard input closes.
pub async fn serve() -> Result<(), String> {
    let clock = Clock::new();
    let root = std::env::temp_dir().join(format!("podwright-bench-api-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    // On disk, as serve keeps it: every write is a transaction.
    let config = ServerConfig { node_name: "bench".into(), root: root.clone(), host_ip: None };
    let (api, _feed) = ApiServer::open(config, clock, FakeRuntime::new(clock)).map_err(|e| e.to_string())?;
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LISTED}});
    api.store().create(Resource::Namespaces, ns).map_err(|e| format!("cannot create a namespace: {e:?}"))?;
    for i in 0..LISTED_OBJECTS {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": LISTED}, "data": {"key": "value"}});
        api.store().create(Resource::ConfigMaps, cm).map_err(|e| format!("cannot create a ConfigMap: {e:?}"))?;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot bind: {e}"))?;
    println!("{}", listener.local_addr().map_err(|e| e.to_string())?);
    let limits = Limits::default();
    tokio::spawn(transport::serve(listener, limits.apply(api.router()), limits));
    let served = tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink())).await;
    let _ = std::fs::remove_dir_all(&root);
    served.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    Ok(())
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start() -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this benchmark's own path: {e}"))?;
        let mut child = Command::new(exe)
            .arg("api-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the API server: {e}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no standard output of the API server")?;
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let addr = line.trim().parse().map_err(|_| format!("the API server did not say its address: {line:?}"))?;
        Ok(Server { child, addr })
    }

    fn rss_kib(&self) -> Result<u64, String> {
        measure::status_kib(&self.child.id().to_string(), "VmRSS")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[derive(Default)]
struct Counts {
    done: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// One client: requests one after another on one keep-alive connection until `until`.
async fn client(addr: SocketAddr, op: Op, id: usize, until: Instant, counts: Arc<Counts>) -> Result<(), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let mut seq = 0;
    while Instant::now() < until {
        let request = hyper::Request::builder().header(HOST, addr.to_string());
        let request = match op {
            Op::Create => {
                seq += 1;
                let body = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{id}-{seq}"}},"data":{{"key":"value"}}}}"#
                );
                request
                    .method("POST")
                    .uri("/api/v1/namespaces/default/configmaps")
                    .header(CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(body)))
            }
            Op::List => request.method("GET").uri(format!("/api/v1/namespaces/{LISTED}/configmaps")).body(Full::default()),
        }
        .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        response.into_body().collect().await.map_err(|e| e.to_string())?;
        let count = match status {
            200 | 201 => &counts.done,
            429 => &counts.refused,
            _ => &counts.failed,
        };
        count.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

async fn load(addr: SocketAddr, op: Op, clients: usize, seconds: u64) -> Result<Run, String> {
    let counts = Arc::new(Counts::default());
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs(seconds);
    let tasks: Vec<_> =
        (0..clients).map(|i| tokio::spawn(client(addr, op, clients * 1000 + i, until, counts.clone()))).collect();
    for t in tasks {
        t.await.map_err(|e| format!("a client panicked: {e}"))??;
    }
    let wall = t0.elapsed();
    Ok(Run {
        op,
        clients,
        per_s: counts.done.load(Ordering::Relaxed) as f64 / wall.as_secs_f64(),
        refused: counts.refused.load(Ordering::Relaxed),
        failed: counts.failed.load(Ordering::Relaxed),
    })
}

/// Opens a watch of pods and returns once its response has begun.
async fn watch(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut conn = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    let request = "GET /api/v1/namespaces/default/pods?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: bench\r\n\r\n";
    conn.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut head = [0; 12];
    conn.read_exact(&mut head).await.map_err(|e| e.to_string())?;
    if &head != b"HTTP/1.1 200" {
        return Err(format!("a watch was answered {:?}", String::from_utf8_lossy(&head)));
    }
    Ok(conn)
}

pub async fn run(args: &ApiArgs) -> Result<ApiReport, String> {
    let server = Server::start()?;
    let mut runs = Vec::new();
    // Lists first, of a namespace the creates do not fill.
    for op in [Op::List, Op::Create] {
        for clients in [1, 10, 100] {
            runs.push(load(server.addr, op, clients, args.seconds).await?);
        }
    }
    // Settled: the load's connections are gone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before_kib = server.rss_kib()?;
    let mut open = Vec::with_capacity(args.watches);
    for _ in 0..args.watches {
        open.push(watch(server.addr).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_watching_kib = server.rss_kib()?;
    drop(open);
    Ok(ApiReport { runs, watches: args.watches, rss_before_kib, rss_watching_kib })
}
