//! `dns`: the cluster DNS of `podwright serve` under load. A child process (`dns-server`, this
//! same binary) holds what serve's DNS holds, the local API's store with some Services and the
//! DNS server over it, on the loopback; this process runs many clients at once, each a UDP
//! socket asking one query after another (a Service's A record, its AAAA, which has none, and a
//! missing Service's NXDOMAIN, in turn) for a window: the answered queries per second, the lost
//! ones (the in-flight cap drops them, as a flood should be), and the child's peak RSS and CPU.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::measure::{self, proc_cpu};
use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::dns::upstream::Upstream;
use podwright_server::dns::{DnsServer, DnsSockets};
use podwright_server::resources::Resource;
use podwright_server::{ApiServer, ServerConfig};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

/// How long a client waits for an answer before it counts the query as lost and asks again.
const CLIENT_WAIT: Duration = Duration::from_millis(500);

#[derive(clap::Args)]
pub struct DnsArgs {
    /// Clients asking at once, one query in flight each.
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Seconds of load to measure.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Services in the store.
    #[arg(long, default_value_t = 100)]
    pub services: usize,
}

#[derive(clap::Args)]
pub struct DnsServerArgs {
    /// Services in the store, `svc-0` ... in `default`.
    #[arg(long)]
    pub services: usize,
}

pub struct DnsReport {
    clients: usize,
    services: usize,
    wall: Duration,
    answered: u64,
    lost: u64,
    /// Answers with another code or shape than the query's expected one.
    wrong: u64,
    idle_rss_kib: u64,
    peak_rss_kib: u64,
    cpu: Duration,
}

impl DnsReport {
    fn per_s(&self) -> f64 {
        self.answered as f64 / self.wall.as_secs_f64()
    }

    pub fn print(&self) {
        println!(
            "dns: serve's cluster DNS on the loopback, {} UDP clients at once, {} services, {:.1} s",
            self.clients,
            self.services,
            self.wall.as_secs_f64()
        );
        println!("  {:<36} {:>10}", "figure", "value");
        println!("  {:<36} {:>10.0}", "answered queries per second", self.per_s());
        println!("  {:<36} {:>10}", "answered", self.answered);
        println!("  {:<36} {:>10}", "lost (no answer within 500 ms)", self.lost);
        println!("  {:<36} {:>10}", "wrong answers", self.wrong);
        println!("  {:<36} {:>10}", "server RSS idle (KiB)", self.idle_rss_kib);
        println!("  {:<36} {:>10}", "server peak RSS under load (KiB)", self.peak_rss_kib);
        println!("  {:<36} {:>10.2}", "server CPU (cores)", self.cpu.as_secs_f64() / self.wall.as_secs_f64());
        println!("dns_queries_per_s: {:.0}", self.per_s());
        println!("dns_lost: {}", self.lost);
        println!("dns_wrong: {}", self.wrong);
        println!("dns_rss_idle_kib: {}", self.idle_rss_kib);
        println!("dns_rss_kib: {}", self.peak_rss_kib);
    }
}

/// The child: the store with `services` Services and the DNS server over it on a free loopback
/// port, which it prints; it serves until its standard input closes.
pub async fn serve(args: &DnsServerArgs) -> Result<(), String> {
    let clock = Clock::new();
    let root = std::env::temp_dir().join(format!("podwright-bench-dns-{}", std::process::id()));
    let (api, _feed) =
        ApiServer::new(ServerConfig { node_name: "bench".into(), root, host_ip: None }, clock, FakeRuntime::new(clock));
    for i in 0..args.services {
        let ip = format!("10.96.{}.{}", i / 250, i % 250 + 1);
        let svc = serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{i}"), "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80}]}});
        api.store().create(Resource::Services, svc).map_err(|e| format!("cannot create a service: {e:?}"))?;
    }
    // No host nameservers: nothing in the load is forwarded.
    let upstream = Upstream::from_resolv_conf(&Default::default(), [0; 4].into());
    let dns = DnsServer::new(&api, "cluster.local", upstream);
    let sockets = DnsSockets::bind("127.0.0.1:0".parse().unwrap()).map_err(|e| format!("cannot bind: {e}"))?;
    println!("{}", sockets.local_addr().map_err(|e| e.to_string())?);
    tokio::spawn(dns.serve(sockets));
    // Until the parent closes our standard input (or is gone).
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The child process, with the address it serves on.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(services: usize) -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this benchmark's own path: {e}"))?;
        let mut child = Command::new(exe)
            .args(["dns-server", "--services", &services.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the DNS server: {e}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no standard output of the DNS server")?;
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let addr = line.trim().parse().map_err(|_| format!("the DNS server did not say its address: {line:?}"))?;
        Ok(Server { child, addr })
    }

    fn status_kib(&self, field: &str) -> Result<u64, String> {
        measure::status_kib(&self.child.id().to_string(), field)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// What a client asks, in turn, and the response code it expects.
fn questions(services: usize) -> Vec<(Name, RecordType, ResponseCode)> {
    let name = |s: String| Name::from_str(&s).unwrap();
    let mut out = Vec::new();
    for i in 0..services.max(1) {
        out.push((name(format!("svc-{i}.default.svc.cluster.local.")), RecordType::A, ResponseCode::NoError));
        out.push((name(format!("svc-{i}.default.svc.cluster.local.")), RecordType::AAAA, ResponseCode::NoError));
        out.push((name(format!("nobody-{i}.default.svc.cluster.local.")), RecordType::A, ResponseCode::NXDomain));
    }
    out
}

#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    lost: AtomicU64,
    wrong: AtomicU64,
}

async fn client(
    server: SocketAddr,
    first: usize,
    questions: Arc<Vec<(Name, RecordType, ResponseCode)>>,
    until: Instant,
    counts: Arc<Counts>,
) -> std::io::Result<()> {
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(server).await?;
    let mut buf = vec![0; 4096];
    let mut turn = first;
    while Instant::now() < until {
        let (name, qtype, want) = &questions[turn % questions.len()];
        let id = turn as u16;
        turn += 1;
        let mut query = Message::query();
        query.metadata.id = id;
        query.metadata.recursion_desired = true;
        query.add_query(Query::query(name.clone(), *qtype));
        socket.send(&query.to_vec().map_err(std::io::Error::other)?).await?;
        let deadline = tokio::time::Instant::now() + CLIENT_WAIT;
        loop {
            match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
                Err(_) => {
                    counts.lost.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(n) => {
                    let Ok(answer) = Message::from_vec(&buf[..n?]) else { continue };
                    // A late answer to an earlier query is skipped.
                    if answer.metadata.id != id || answer.metadata.message_type != MessageType::Response {
                        continue;
                    }
                    let good = answer.metadata.response_code == *want
                        && answer.answers.len()
                            == usize::from(*qtype == RecordType::A && *want == ResponseCode::NoError);
                    let count = if good { &counts.answered } else { &counts.wrong };
                    count.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
    Ok(())
}

pub async fn run(args: &DnsArgs) -> Result<DnsReport, String> {
    let server = Server::start(args.services)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss_kib = server.status_kib("VmRSS")?;
    let questions = Arc::new(questions(args.services));
    let counts = Arc::new(Counts::default());
    let pid = server.child.id();
    let cpu0 = proc_cpu(pid)?;
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs(args.seconds);
    let clients: Vec<_> = (0..args.clients)
        .map(|i| tokio::spawn(client(server.addr, i * 7, questions.clone(), until, counts.clone())))
        .collect();
    for c in clients {
        c.await.map_err(|e| format!("a client panicked: {e}"))?.map_err(|e| format!("a client failed: {e}"))?;
    }
    let wall = t0.elapsed();
    let cpu = proc_cpu(pid)?.own.saturating_sub(cpu0.own);
    let peak_rss_kib = server.status_kib("VmHWM")?;
    Ok(DnsReport {
        clients: args.clients,
        services: args.services,
        wall,
        answered: counts.answered.load(Ordering::Relaxed),
        lost: counts.lost.load(Ordering::Relaxed),
        wrong: counts.wrong.load(Ordering::Relaxed),
        idle_rss_kib,
        peak_rss_kib,
        cpu,
    })
}
