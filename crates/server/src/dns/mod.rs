//! The cluster DNS of `podwright serve`, the node's small kube-dns: A and SRV records of the
//! Services in the store under the cluster domain and PTR records of their cluster IPs, every
//! other name forwarded to the host's nameservers, over UDP and TCP. Pods with
//! `dnsPolicy: ClusterFirst` are told to ask it. The wire format is hickory-proto's.

mod lookup;
mod message;
pub mod upstream;

use crate::resources::Resource;
use crate::server::ApiServer;
use crate::store::Store;
use hickory_proto::ProtoError;
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, PTR, SRV};
use hickory_proto::rr::{Name, RData, Record};
use lookup::{Lookup, ServiceRecord};
use message::Query;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use upstream::Upstream;

/// The TTL of cluster answers (CoreDNS's default): a service created or deleted is seen
/// within seconds even by a caching resolver.
const TTL: u32 = 5;
/// Queries answered at once; more are dropped (the client asks again), so a flood cannot pile
/// up forwarding tasks.
const MAX_IN_FLIGHT: usize = 256;
/// An idle TCP connection is closed after this long.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// The largest UDP query read (EDNS lets clients send up to 4096 bytes and more).
const MAX_UDP_QUERY: usize = 4096;

/// The listening sockets, UDP and TCP on one address.
pub struct DnsSockets {
    udp: UdpSocket,
    tcp: TcpListener,
}

impl DnsSockets {
    /// Binds UDP and TCP on `addr` with `IP_FREEBIND` (IPV6_FREEBIND for IPv6), so that an
    /// address that does not exist yet can be bound: the pod bridge gets its gateway address
    /// only when the first sandbox is made, and packets for it reach these sockets as soon as
    /// it has it. Must run inside a tokio runtime.
    pub fn bind(addr: SocketAddr) -> std::io::Result<DnsSockets> {
        let socket = |ty: Type, protocol: Protocol| -> std::io::Result<Socket> {
            let s = Socket::new(Domain::for_address(addr), ty, Some(protocol))?;
            if addr.is_ipv4() {
                s.set_freebind_v4(true)?;
            } else {
                s.set_freebind_v6(true)?;
            }
            s.set_nonblocking(true)?;
            Ok(s)
        };
        let udp = socket(Type::DGRAM, Protocol::UDP)?;
        udp.bind(&addr.into())?;
        let tcp = socket(Type::STREAM, Protocol::TCP)?;
        tcp.set_reuse_address(true)?;
        tcp.bind(&addr.into())?;
        tcp.listen(128)?;
        Ok(DnsSockets { udp: UdpSocket::from_std(udp.into())?, tcp: TcpListener::from_std(tcp.into())? })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.udp.local_addr()
    }
}

/// Answers queries from the store's Services and the host's nameservers.
pub struct DnsServer {
    store: Arc<Store>,
    /// The cluster domain's labels, lower case.
    domain: Vec<String>,
    upstream: Upstream,
    in_flight: Arc<Semaphore>,
    /// The Services as the lookup reads them, with the store's revision they were read at:
    /// read again only after a change, not for every query.
    services: Mutex<Option<(u64, Arc<Vec<ServiceRecord>>)>>,
}

impl DnsServer {
    /// Cluster DNS for the Services of `api`, under `domain` (`cluster.local`).
    pub fn new(api: &ApiServer, domain: &str, upstream: Upstream) -> Arc<DnsServer> {
        let domain = domain.split('.').filter(|l| !l.is_empty()).map(str::to_ascii_lowercase).collect();
        Arc::new(DnsServer {
            store: api.store_handle(),
            domain,
            upstream,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            services: Mutex::new(None),
        })
    }

    /// The store's Services, as of now.
    fn services(&self) -> Arc<Vec<ServiceRecord>> {
        let revision = self.store.revision();
        let mut cached = self.services.lock().unwrap_or_else(|e| e.into_inner());
        match &*cached {
            Some((read_at, services)) if *read_at == revision => services.clone(),
            _ => {
                let (objects, read_at) = self.store.list(Resource::Services, None);
                let services = Arc::new(objects.iter().filter_map(|o| ServiceRecord::from_object(o)).collect());
                *cached = Some((read_at, Arc::clone(&services)));
                services
            }
        }
    }

    /// The response to one message (`None`: say nothing); `tcp` when it came over TCP.
    pub async fn answer(&self, msg: &[u8], tcp: bool) -> Option<Vec<u8>> {
        let query = match message::parse_query(msg) {
            Ok(q) => q,
            Err(e) => {
                tracing::debug!(error = %e, "cluster DNS: unreadable query");
                return message::format_error(msg, &e);
            }
        };
        let limit = if tcp { message::TCP_LIMIT } else { query.udp_limit() };
        if query.op_code() != OpCode::Query {
            return message::encode(&message::response(&query, ResponseCode::NotImp, false, &[], TTL), limit);
        }
        let services = self.services();
        let qtype = query.question().query_type();
        let found = lookup::lookup(&query.labels, qtype, &self.domain, &services);
        tracing::debug!(name = %query.name(), %qtype, answer = ?found, "cluster DNS");
        let response = match found {
            Lookup::Forward => match self.upstream.forward(msg, tcp).await {
                Some(answer) => return Some(answer),
                None => Ok(message::response(&query, ResponseCode::ServFail, false, &[], TTL)),
            },
            Lookup::NxDomain => Ok(message::response(&query, ResponseCode::NXDomain, true, &[], TTL)),
            Lookup::Records(ips) => {
                let answers: Vec<RData> = ips.into_iter().map(|ip| RData::A(A(ip))).collect();
                Ok(message::response(&query, ResponseCode::NoError, true, &answers, TTL))
            }
            Lookup::Srv { target, ip, ports } => srv_response(&query, &target, ip, ports),
            Lookup::Ptr(target) => dns_name(&target)
                .map(|target| message::response(&query, ResponseCode::NoError, true, &[RData::PTR(PTR(target))], TTL)),
        }
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, "cluster DNS: a service's name is not a DNS name");
            message::response(&query, ResponseCode::ServFail, false, &[], TTL)
        });
        message::encode(&response, limit)
    }

    /// Serves until a socket fails for good.
    pub async fn serve(self: Arc<Self>, sockets: DnsSockets) -> std::io::Result<()> {
        let udp = Arc::new(sockets.udp);
        tokio::select! {
            r = self.clone().serve_udp(udp) => r,
            r = self.serve_tcp(sockets.tcp) => r,
        }
    }

    async fn serve_udp(self: Arc<Self>, socket: Arc<UdpSocket>) -> std::io::Result<()> {
        let mut buf = vec![0; MAX_UDP_QUERY];
        loop {
            let (n, peer) = socket.recv_from(&mut buf).await?;
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else { continue };
            let (server, socket, msg) = (self.clone(), socket.clone(), buf[..n].to_vec());
            tokio::spawn(async move {
                if let Some(out) = server.answer(&msg, false).await {
                    let _ = socket.send_to(&out, peer).await;
                }
                drop(permit);
            });
        }
    }

    async fn serve_tcp(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(r) => r,
                Err(e) => {
                    // Out of file descriptors and the like pass; wait a little, as axum does.
                    tracing::debug!(error = %e, "cluster DNS: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            tokio::spawn(self.clone().serve_connection(stream));
        }
    }

    /// Messages after their two-byte lengths, answered in turn until the client is done.
    async fn serve_connection(self: Arc<Self>, mut stream: TcpStream) {
        loop {
            let Ok(Ok(msg)) = tokio::time::timeout(TCP_IDLE, message::read_tcp(&mut stream)).await else { return };
            let Ok(_permit) = self.in_flight.clone().try_acquire_owned() else { return };
            let Some(out) = self.answer(&msg, true).await else { return };
            if message::write_tcp(&mut stream, &out).await.is_err() {
                return;
            }
        }
    }
}

/// A name from its labels.
fn dns_name(labels: &[String]) -> Result<Name, ProtoError> {
    Name::from_labels(labels.iter().map(String::as_bytes))
}

/// SRV records for `ports` of the service named `target`, with its address `ip` in the
/// additional section, as CoreDNS answers.
fn srv_response(query: &Query, target: &[String], ip: Ipv4Addr, ports: Vec<u16>) -> Result<Message, ProtoError> {
    let target = dns_name(target)?;
    // Equal shares of 100 between the records, as CoreDNS weighs them.
    let weight = u16::try_from(100 / ports.len().max(1)).unwrap_or(100);
    let answers: Vec<RData> =
        ports.into_iter().map(|port| RData::SRV(SRV::new(0, weight, port, target.clone()))).collect();
    let mut out = message::response(query, ResponseCode::NoError, true, &answers, TTL);
    out.add_additional(Record::from_rdata(target, TTL, RData::A(A(ip))));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerConfig;
    use message::tests::query;
    use podwright_node::cri::dns::ResolvConf;
    use podwright_runtime::Clock;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const AAAA: u16 = 28;

    fn server() -> (ApiServer, Arc<DnsServer>) {
        let clock = Clock::new();
        let (api, _feed) = ApiServer::new(
            ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None },
            clock,
            podwright_runtime::FakeRuntime::new(clock),
        );
        // No host nameservers: forwarded names get SERVFAIL at once.
        let dns =
            DnsServer::new(&api, "cluster.local", Upstream::from_resolv_conf(&ResolvConf::default(), [0; 4].into()));
        (api, dns)
    }

    fn create_service(api: &ApiServer, name: &str, ip: &str) {
        let obj = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": [{"port": 80}]}});
        api.store().create(Resource::Services, obj).unwrap();
    }

    fn rcode(out: &[u8]) -> u8 {
        out[3] & 0x0F
    }

    fn answers(out: &[u8]) -> u16 {
        u16::from_be_bytes([out[6], out[7]])
    }

    #[tokio::test]
    async fn a_service_resolves_once_it_is_created() {
        let (api, dns) = server();
        let ask = |name: &str, qtype: u16| {
            let dns = dns.clone();
            let msg = query(9, name, qtype, true);
            async move { dns.answer(&msg, false).await.unwrap() }
        };
        let before = ask("myservice.default.svc.cluster.local", 1).await;
        assert_eq!((rcode(&before), answers(&before)), (3, 0));
        assert_eq!(rcode(&ask("myservice.svc.cluster.local", 1).await), 3);

        create_service(&api, "myservice", "10.96.0.10");
        let after = ask("myservice.default.svc.cluster.local", 1).await;
        assert_eq!((rcode(&after), answers(&after)), (0, 1));
        assert_eq!(after[after.len() - 4..], [10, 96, 0, 10]);
        // What busybox's nslookup asks besides: every answer NOERROR.
        for (name, qtype) in [
            ("myservice.default.svc.cluster.local", AAAA),
            ("myservice.svc.cluster.local", 1),
            ("myservice.svc.cluster.local", AAAA),
            ("myservice.cluster.local", 1),
            ("myservice.cluster.local", AAAA),
        ] {
            let out = ask(name, qtype).await;
            assert_eq!((rcode(&out), answers(&out)), (0, 0), "{name} {qtype}");
        }
    }

    #[tokio::test]
    async fn other_names_get_servfail_when_the_host_nameservers_do_not_answer() {
        let (_api, dns) = server();
        let out = dns.answer(&query(3, "example.com", 1, false), false).await.unwrap();
        assert_eq!((rcode(&out), out[2] & 0x04), (2, 0));
        let mut other_opcode = query(3, "example.com", 1, false);
        other_opcode[2] |= 2 << 3;
        assert_eq!(rcode(&dns.answer(&other_opcode, false).await.unwrap()), 4);
        assert_eq!(dns.answer(&[1, 2, 3], false).await, None);
    }

    #[tokio::test]
    async fn serves_udp_and_tcp_on_one_address() {
        let (api, dns) = server();
        create_service(&api, "mydb", "10.96.0.11");
        let sockets = DnsSockets::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let udp_addr = sockets.local_addr().unwrap();
        let tcp_addr = sockets.tcp.local_addr().unwrap();
        tokio::spawn(dns.serve(sockets));
        let msg = query(11, "mydb.default.svc.cluster.local", 1, false);

        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(&msg, udp_addr).await.unwrap();
        let mut buf = [0; 512];
        let n = client.recv(&mut buf).await.unwrap();
        assert_eq!((buf[..2] == msg[..2], rcode(&buf[..n]), answers(&buf[..n])), (true, 0, 1));

        let mut conn = TcpStream::connect(tcp_addr).await.unwrap();
        for _ in 0..2 {
            conn.write_all(&u16::try_from(msg.len()).unwrap().to_be_bytes()).await.unwrap();
            conn.write_all(&msg).await.unwrap();
            let len = conn.read_u16().await.unwrap();
            let mut out = vec![0; usize::from(len)];
            conn.read_exact(&mut out).await.unwrap();
            assert_eq!(out[..n], buf[..n]);
        }
    }

    #[tokio::test]
    async fn srv_and_ptr_answers_on_the_wire() {
        let (api, dns) = server();
        let obj = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mydb", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.12", "ports": [{"name": "sql", "port": 5432}, {"name": "metrics", "port": 9187}]}});
        api.store().create(Resource::Services, obj).unwrap();
        let ask = |name: &str, qtype: u16| {
            let dns = dns.clone();
            let msg = query(5, name, qtype, false);
            async move { Message::from_vec(&dns.answer(&msg, false).await.unwrap()).unwrap() }
        };
        let srv = ask("_sql._tcp.mydb.default.svc.cluster.local", 33).await;
        assert_eq!(
            (srv.metadata.response_code, srv.answers.len(), srv.additionals.len()),
            (ResponseCode::NoError, 1, 1)
        );
        assert_eq!(srv.answers[0].data.to_string(), "0 100 5432 mydb.default.svc.cluster.local.");
        assert_eq!(srv.additionals[0].data.to_string(), "10.96.0.12");
        let both = ask("mydb.default.svc.cluster.local", 33).await;
        let records: Vec<String> = both.answers.iter().map(|r| r.data.to_string()).collect();
        assert_eq!(records, ["0 50 5432 mydb.default.svc.cluster.local.", "0 50 9187 mydb.default.svc.cluster.local."]);
        assert_eq!(
            ask("_http._tcp.mydb.default.svc.cluster.local", 33).await.metadata.response_code,
            ResponseCode::NXDomain
        );

        let ptr = ask("12.0.96.10.in-addr.arpa", 12).await;
        assert!(ptr.metadata.authoritative);
        assert_eq!(ptr.answers[0].data.to_string(), "mydb.default.svc.cluster.local.");
        assert_eq!(ptr.answers[0].ttl, TTL);
        // Another address is the host's nameservers' to answer (none here).
        assert_eq!(ask("13.0.96.10.in-addr.arpa", 12).await.metadata.response_code, ResponseCode::ServFail);
    }
}
