//! The host's nameservers, which answer every name outside the cluster domain (CoreDNS's
//! `forward . /etc/resolv.conf`).

use super::message::{read_tcp, write_tcp};
use hickory_proto::op::{Header, Message, MessageType, Query};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use podwright_node::cri::dns::ResolvConf;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use tokio::net::{TcpStream, UdpSocket};

/// How long one nameserver has to answer. Resolvers wait 5 s before they ask again, so two
/// unanswering host nameservers still give a pod SERVFAIL before it retries.
const PER_SERVER: Duration = Duration::from_secs(2);
/// Resolvers use at most three nameservers; so does the forwarder.
const MAX_SERVERS: usize = 3;

/// Where queries for other names go.
#[derive(Debug, Clone)]
pub struct Upstream {
    servers: Vec<SocketAddr>,
    timeout: Duration,
}

impl Upstream {
    /// The nameservers of the host's resolv.conf, less `own` (the cluster DNS's address,
    /// which would only ask itself again).
    pub fn from_resolv_conf(conf: &ResolvConf, own: IpAddr) -> Upstream {
        let servers = conf
            .nameservers
            .iter()
            .filter_map(|s| s.parse::<IpAddr>().ok())
            .filter(|ip| *ip != own)
            .take(MAX_SERVERS)
            .map(|ip| SocketAddr::new(ip, 53))
            .collect();
        Upstream { servers, timeout: PER_SERVER }
    }

    /// The first answer to `msg` from the nameservers, asked in turn (over TCP when the
    /// client asked over TCP: an answer too big for UDP is what it came for); `None` when
    /// none answers.
    pub async fn forward(&self, msg: &[u8], tcp: bool) -> Option<Vec<u8>> {
        for server in &self.servers {
            let asked = async { if tcp { ask_tcp(*server, msg).await } else { ask_udp(*server, msg).await } };
            match tokio::time::timeout(self.timeout, asked).await {
                Ok(Ok(answer)) => return Some(answer),
                Ok(Err(e)) => tracing::debug!(%server, error = %e, "cluster DNS: forwarding failed"),
                Err(_) => tracing::debug!(%server, "cluster DNS: forwarding timed out"),
            }
        }
        None
    }
}

fn unspecified(server: SocketAddr) -> SocketAddr {
    let ip = if server.is_ipv4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { IpAddr::V6(Ipv6Addr::UNSPECIFIED) };
    SocketAddr::new(ip, 0)
}

/// A message's header and questions.
fn head(msg: &[u8]) -> Option<(Header, Vec<Query>)> {
    let mut decoder = BinDecoder::new(msg);
    let header = Header::read(&mut decoder).ok()?;
    let questions = Message::read_queries(&mut decoder, usize::from(header.counts.queries)).ok()?;
    Some((header, questions))
}

/// Whether `answer` is a response to `query`: its ID, and its question unless it has none (an
/// error may leave it out). Anything else is a stray or forged packet.
fn answers(query: &[u8], answer: &[u8]) -> bool {
    match (head(query), head(answer)) {
        (Some((q, asked)), Some((a, answered))) => {
            a.id == q.id && a.message_type == MessageType::Response && (answered.is_empty() || answered == asked)
        }
        _ => false,
    }
}

/// Sends the query from a socket of its own and takes the first response to it.
async fn ask_udp(server: SocketAddr, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    let socket = UdpSocket::bind(unspecified(server)).await?;
    socket.connect(server).await?;
    socket.send(msg).await?;
    let mut buf = vec![0; 65_535];
    loop {
        let n = socket.recv(&mut buf).await?;
        if answers(msg, &buf[..n]) {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

/// One query over a TCP connection of its own, each message after its two-byte length.
async fn ask_tcp(server: SocketAddr, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(server).await?;
    write_tcp(&mut stream, msg).await?;
    let buf = read_tcp(&mut stream).await?;
    if !answers(msg, &buf) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a response to the query"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn asks_the_hosts_nameservers_but_not_itself() {
        let conf = ResolvConf::parse(
            "nameserver 10.89.0.1\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver ::1\nnameserver 1.1.1.1\nnameserver 8.8.8.8\n",
        );
        let up = Upstream::from_resolv_conf(&conf, "10.89.0.1".parse().unwrap());
        let want: Vec<SocketAddr> =
            ["10.255.255.53:53", "[::1]:53", "1.1.1.1:53"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(up.servers, want);
    }

    /// A nameserver on the loopback that answers each query with `reply(query)` over UDP.
    async fn fake_nameserver(reply: fn(&[u8]) -> Vec<Vec<u8>>) -> SocketAddr {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0; 512];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                for out in reply(&buf[..n]) {
                    socket.send_to(&out, peer).await.unwrap();
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn forwards_to_the_first_nameserver_that_answers_and_skips_stray_packets() {
        let silent = fake_nameserver(|_| Vec::new()).await;
        let answering = fake_nameserver(|q| {
            let mut stray = q.to_vec();
            stray[0] ^= 0xFF;
            stray[2] |= 0x80;
            let mut answer = q.to_vec();
            answer[2] |= 0x80;
            answer.push(0xAA);
            vec![q.to_vec(), stray, answer]
        })
        .await;
        let up = Upstream { servers: vec![silent, answering], timeout: Duration::from_millis(200) };
        let query = crate::dns::message::tests::query(0x4242, "example.com", 1, false);
        let answer = up.forward(&query, false).await.unwrap();
        assert_eq!(answer.last(), Some(&0xAA));
        assert_eq!(answer[..2], [0x42, 0x42]);

        let nobody = Upstream { servers: vec![silent], timeout: Duration::from_millis(50) };
        assert_eq!(nobody.forward(&query, false).await, None);
        assert_eq!(Upstream { servers: vec![], timeout: PER_SERVER }.forward(&query, false).await, None);
    }

    #[tokio::test]
    async fn forwards_over_tcp_when_asked_over_tcp() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let len = conn.read_u16().await.unwrap();
            let mut q = vec![0; usize::from(len)];
            conn.read_exact(&mut q).await.unwrap();
            q[2] |= 0x80;
            conn.write_all(&u16::try_from(q.len()).unwrap().to_be_bytes()).await.unwrap();
            conn.write_all(&q).await.unwrap();
        });
        let up = Upstream { servers: vec![addr], timeout: PER_SERVER };
        let query = crate::dns::message::tests::query(7, "example.com", 1, false);
        let answer = up.forward(&query, true).await.unwrap();
        assert_eq!(answer.len(), query.len());
        assert_eq!(answer[2] & 0x80, 0x80);
    }
}
