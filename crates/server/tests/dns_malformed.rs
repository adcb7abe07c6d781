//! The cluster DNS takes packets from any pod: thousands of malformed ones, made from valid
//! queries by a seeded generator (cut short, bits flipped, bogus label lengths, compression
//! pointers that loop, huge section counts, garbage), must each get a well-formed response or
//! none, and never a panic; the server then still answers a good query over UDP.

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use podwright_node::cri::dns::ResolvConf;
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::dns::upstream::Upstream;
use podwright_server::dns::{DnsServer, DnsSockets};
use podwright_server::resources::Resource;
use podwright_server::{ApiServer, ServerConfig};
use std::str::FromStr;
use std::sync::Arc;
use tokio::net::UdpSocket;

const PACKETS: usize = 20_000;

/// splitmix64: a small seeded generator, so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn server() -> (ApiServer, Arc<DnsServer>) {
    let clock = Clock::new();
    let (api, _feed) = ApiServer::new(
        ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None },
        clock,
        FakeRuntime::new(clock),
    );
    for (name, ip) in [("web", "10.96.0.10"), ("db", "10.96.0.11")] {
        let obj = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}});
        api.store().create(Resource::Services, obj).unwrap();
    }
    // No host nameservers: forwarded names get SERVFAIL at once.
    let dns = DnsServer::new(&api, "cluster.local", Upstream::from_resolv_conf(&ResolvConf::default(), [0; 4].into()));
    (api, dns)
}

/// Valid queries of every kind the server answers, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let names = [
        ("web.default.svc.cluster.local.", RecordType::A),
        ("web.default.svc.cluster.local.", RecordType::AAAA),
        ("_http._tcp.db.default.svc.cluster.local.", RecordType::SRV),
        ("db.default.svc.cluster.local.", RecordType::SRV),
        ("nobody.default.svc.cluster.local.", RecordType::A),
        ("web.cluster.local.", RecordType::A),
        ("10.0.96.10.in-addr.arpa.", RecordType::PTR),
        ("example.com.", RecordType::A),
        (".", RecordType::NS),
    ];
    let mut out = Vec::new();
    for (i, (name, qtype)) in names.into_iter().enumerate() {
        for edns in [false, true] {
            let mut msg = Message::new(i as u16, MessageType::Query, OpCode::Query);
            msg.metadata.recursion_desired = true;
            msg.add_query(Query::query(Name::from_str(name).unwrap(), qtype));
            if edns {
                msg.set_edns(Edns::new());
            }
            out.push(msg.to_vec().unwrap());
        }
    }
    out
}

/// One mutation of `msg`, or a few in a row.
fn mutate(rng: &mut Rng, mut msg: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(3) {
        let len = msg.len();
        match rng.below(9) {
            // Cut short anywhere, the header too.
            0 => msg.truncate(rng.below(len + 1)),
            // Flip a few bits.
            1 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(len);
                    if let Some(b) = msg.get_mut(at) {
                        *b ^= 1 << rng.below(8);
                    }
                }
            }
            // A bogus label length in the question (63 and over, reserved 0x40/0x80 kinds).
            2 if len > 12 => {
                let at = 12 + rng.below(len - 12);
                msg[at] = [0x3F, 0x40, 0x7F, 0x80, 0xBF, 0xFF, rng.byte()][rng.below(7)];
            }
            // Compression pointers: the name pointing at itself, at each other, at the header,
            // beyond the end.
            3 if len > 16 => {
                let pointers: [&[u8]; 4] = [&[0xC0, 12], &[0xC0, 14, 0xC0, 12], &[0xC0, 0], &[0xFF, 0xFF]];
                let p = pointers[rng.below(4)];
                msg[12..12 + p.len()].copy_from_slice(p);
            }
            // Huge or wrong section counts.
            4 if len >= 12 => {
                let at = 4 + 2 * rng.below(4);
                let count = [0xFFFF, 0, 2, 0x100, rng.next() as u16][rng.below(5)];
                msg[at..at + 2].copy_from_slice(&count.to_be_bytes());
            }
            // Garbage appended, or records that claim more data than there is.
            5 => msg.extend((0..rng.below(64)).map(|_| rng.byte())),
            6 if len >= 12 => {
                msg[11] = msg[11].wrapping_add(1);
                msg.extend_from_slice(&[0, 0, 41, 0xFF, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF]);
            }
            // Another opcode, the QR bit, or random flags.
            7 if len >= 4 => {
                msg[2] = rng.byte();
                msg[3] = rng.byte();
            }
            // Pure garbage of any length.
            _ => msg = (0..rng.below(600)).map(|_| rng.byte()).collect(),
        }
    }
    msg
}

/// A response to `msg` is a DNS response with its ID and a code the server gives, that fits
/// what a UDP client takes; no response only for what cannot be answered: a message without a
/// whole header, or a response.
fn check(msg: &[u8], out: Option<Vec<u8>>, tcp: bool) -> Result<(), String> {
    let Some(out) = out else {
        let unanswerable = msg.len() < 12 || msg[2] & 0x80 != 0;
        return if unanswerable { Ok(()) } else { Err("no response to a query with a whole header".into()) };
    };
    let response = Message::from_vec(&out).map_err(|e| format!("response unreadable: {e}"))?;
    let meta = &response.metadata;
    if meta.message_type != MessageType::Response || out[..2] != msg[..2] {
        return Err(format!("not a response with the query's ID: {meta:?}"));
    }
    let codes = [
        ResponseCode::NoError,
        ResponseCode::FormErr,
        ResponseCode::ServFail,
        ResponseCode::NXDomain,
        ResponseCode::NotImp,
    ];
    if !codes.contains(&meta.response_code) {
        return Err(format!("response code {}", meta.response_code));
    }
    let limit = Message::from_vec(msg).map(|m| usize::from(m.max_payload())).unwrap_or(512);
    if !tcp && out.len() > limit {
        return Err(format!("{} bytes over UDP to a client that takes {limit}", out.len()));
    }
    Ok(())
}

#[tokio::test]
async fn malformed_packets_get_a_well_formed_response_or_none_and_never_a_panic() {
    let (_api, dns) = server();
    let seeds = seeds();
    let mut rng = Rng(0x5EED_D115);
    let (mut answered, mut dropped) = (0, 0);
    for i in 0..PACKETS {
        let seed = seeds[rng.below(seeds.len())].clone();
        let msg = mutate(&mut rng, seed);
        let tcp = rng.below(2) == 0;
        let out = dns.answer(&msg, tcp).await;
        if out.is_some() {
            answered += 1
        } else {
            dropped += 1
        }
        if let Err(e) = check(&msg, out, tcp) {
            panic!("packet {i} (tcp: {tcp}) {msg:02x?}: {e}");
        }
    }
    // The mutations must reach past the header check often, and not always.
    assert!(answered > PACKETS / 4 && dropped > PACKETS / 20, "{answered} answered, {dropped} dropped");

    // Served over UDP, the same junk leaves the server answering.
    let sockets = DnsSockets::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = sockets.local_addr().unwrap();
    tokio::spawn(dns.serve(sockets));
    let junk = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for _ in 0..2_000 {
        let seed = seeds[rng.below(seeds.len())].clone();
        junk.send_to(&mutate(&mut rng, seed), addr).await.unwrap();
    }
    // From a socket of its own: the junk's answers fill the other's receive buffer.
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut good = seeds[0].clone();
    good[..2].copy_from_slice(&[0xAB, 0xCD]);
    client.send_to(&good, addr).await.unwrap();
    let mut buf = vec![0; 4096];
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let n = client.recv(&mut buf).await.unwrap();
            match Message::from_vec(&buf[..n]) {
                Ok(m) if buf[..2] == good[..2] && m.answers.len() == 1 => return m,
                _ => continue,
            }
        }
    })
    .await
    .expect("no answer to a good query after the junk");
    assert_eq!(answer.answers[0].data.to_string(), "10.96.0.10");
}
