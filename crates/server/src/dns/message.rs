//! The cluster DNS's messages on hickory-proto's codec: a query read whole (its one question,
//! and its EDNS payload size), the response to it, and the bytes sent back.

use hickory_proto::op::{Header, Message, MessageType, Metadata, OpCode, Query as Question, ResponseCode};
use hickory_proto::rr::{RData, Record};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, DecodeError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest response a client over TCP takes (its length is two bytes).
pub const TCP_LIMIT: usize = u16::MAX as usize;

/// Why a message is not a query the cluster DNS can read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("shorter than a DNS header")]
    NoHeader,
    #[error("a response, not a query")]
    NotAQuery,
    #[error("{0} questions; exactly one is supported")]
    QuestionCount(u16),
    #[error(transparent)]
    Malformed(#[from] DecodeError),
}

/// A query with its one question.
#[derive(Debug, Clone)]
pub struct Query {
    message: Message,
    /// The question name's labels, in ASCII lower case (DNS names compare case-insensitively).
    pub labels: Vec<String>,
}

impl Query {
    pub fn question(&self) -> &Question {
        &self.message.queries[0]
    }

    pub fn op_code(&self) -> OpCode {
        self.message.metadata.op_code
    }

    /// The name as written, without the root's trailing dot.
    pub fn name(&self) -> String {
        self.labels.join(".")
    }

    /// The largest response the client takes over UDP: 512 bytes, or what its EDNS record says.
    pub fn udp_limit(&self) -> usize {
        usize::from(self.message.max_payload())
    }
}

/// Reads a query with exactly one question; everything after it must be well-formed too.
pub fn parse_query(msg: &[u8]) -> Result<Query, ParseError> {
    let header = Header::read(&mut BinDecoder::new(msg)).map_err(|_| ParseError::NoHeader)?;
    if header.message_type != MessageType::Query {
        return Err(ParseError::NotAQuery);
    }
    if header.counts.queries != 1 {
        return Err(ParseError::QuestionCount(header.counts.queries));
    }
    let message = Message::from_vec(msg)?;
    let labels = message.queries[0].name().iter().map(|l| String::from_utf8_lossy(l).to_ascii_lowercase()).collect();
    Ok(Query { message, labels })
}

/// A response to a request with `request`'s header: its ID, opcode and RD echoed.
fn response_to(request: &Metadata, rcode: ResponseCode, authoritative: bool) -> Message {
    let mut out = Message::error_msg(request.id, request.op_code, rcode);
    out.metadata.recursion_desired = request.recursion_desired;
    out.metadata.recursion_available = true;
    out.metadata.authoritative = authoritative;
    out
}

/// The response to `query`: its question, then a record with `ttl` for each of `answers`,
/// all of the question's name. `authoritative` for names of the cluster domain, which this
/// server owns.
pub fn response(query: &Query, rcode: ResponseCode, authoritative: bool, answers: &[RData], ttl: u32) -> Message {
    let mut out = response_to(&query.message.metadata, rcode, authoritative);
    let question = query.question();
    out.add_query(question.clone());
    out.add_answers(answers.iter().map(|data| Record::from_rdata(question.name().clone(), ttl, data.clone())));
    out
}

/// The bytes of `message`; when they are more than `limit`, the header and question alone
/// with TC set, which tells the client to ask again over TCP.
pub fn encode(message: &Message, limit: usize) -> Option<Vec<u8>> {
    let written =
        message.to_vec().and_then(|out| if out.len() <= limit { Ok(out) } else { message.truncate().to_vec() });
    written.inspect_err(|e| tracing::debug!(error = %e, "cluster DNS: cannot write a response")).ok()
}

/// The answer to a message that cannot be read as a query: FORMERR with its ID and no
/// question, or nothing for a message too short to have an ID, or for a response (answering
/// responses could loop between two servers).
pub fn format_error(msg: &[u8], error: &ParseError) -> Option<Vec<u8>> {
    if matches!(error, ParseError::NoHeader | ParseError::NotAQuery) {
        return None;
    }
    let header = Header::read(&mut BinDecoder::new(msg)).ok()?;
    encode(&response_to(&header, ResponseCode::FormErr, false), TCP_LIMIT)
}

/// Reads one message from a TCP stream, where each comes after its two-byte length.
pub async fn read_tcp(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let len = stream.read_u16().await?;
    let mut msg = vec![0; usize::from(len)];
    stream.read_exact(&mut msg).await?;
    Ok(msg)
}

/// Writes one message to a TCP stream, after its two-byte length.
pub async fn write_tcp(stream: &mut (impl AsyncWrite + Unpin), msg: &[u8]) -> std::io::Result<()> {
    let len = u16::try_from(msg.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    stream.write_all(&[&len.to_be_bytes()[..], msg].concat()).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hickory_proto::op::Edns;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{DNSClass, Name, RecordType};
    use std::net::Ipv4Addr;
    use std::str::FromStr;

    /// A query as resolvers send it: ID, RD set, one question, optionally an EDNS OPT record
    /// (UDP size 1232).
    pub(crate) fn query(id: u16, name: &str, qtype: u16, edns: bool) -> Vec<u8> {
        let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
        msg.metadata.recursion_desired = true;
        msg.add_query(Question::query(Name::from_str(name).unwrap(), RecordType::from(qtype)));
        if edns {
            let mut opt = Edns::new();
            opt.set_max_payload(1232);
            msg.set_edns(opt);
        }
        msg.to_vec().unwrap()
    }

    /// A header with these fields and counts, nothing after it.
    fn header(id: u16, flags: u16, qdcount: u16, ancount: u16) -> Vec<u8> {
        [id, flags, qdcount, ancount, 0, 0].iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    fn a(ip: [u8; 4]) -> RData {
        RData::A(A(Ipv4Addr::from(ip)))
    }

    #[test]
    fn reads_a_query_in_lower_case_with_its_edns_size() {
        let msg = query(0xBEEF, "MyService.Default.svc.cluster.local.", 1, true);
        let q = parse_query(&msg).unwrap();
        let question = q.question();
        assert_eq!(
            (q.message.metadata.id, question.query_type(), question.query_class(), q.op_code()),
            (0xBEEF, RecordType::A, DNSClass::IN, OpCode::Query)
        );
        assert_eq!(q.name(), "myservice.default.svc.cluster.local");
        assert_eq!(q.udp_limit(), 1232);
        let root = parse_query(&query(1, ".", 2, false)).unwrap();
        assert!(root.labels.is_empty());
        assert_eq!(root.udp_limit(), 512);
    }

    #[test]
    fn refuses_what_is_not_one_readable_question() {
        let malformed = |msg: &[u8], want: fn(&DecodeError) -> bool| match parse_query(msg) {
            Err(ParseError::Malformed(e)) => assert!(want(&e), "{e:?}"),
            other => panic!("{other:?}"),
        };
        assert!(matches!(parse_query(&[0; 5]), Err(ParseError::NoHeader)));
        let mut msg = query(7, "a.b", 1, false);
        msg[2] |= 0x80;
        assert!(matches!(parse_query(&msg), Err(ParseError::NotAQuery)));
        assert_eq!(format_error(&msg, &ParseError::NotAQuery), None);
        let mut two = query(7, "a.b", 1, false);
        two[5] = 2;
        assert!(matches!(parse_query(&two), Err(ParseError::QuestionCount(2))));
        let full = query(7, "a.b", 1, false);
        malformed(&full[..full.len() - 1], |e| matches!(e, DecodeError::InsufficientBytes));
        malformed(&full[..14], |e| matches!(e, DecodeError::InsufficientBytes));
        let mut pointer = header(7, 0, 1, 0);
        pointer.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        malformed(&pointer, |e| matches!(e, DecodeError::PointerNotPriorToLabel { .. }));
        let mut long = header(7, 0, 1, 0);
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.extend_from_slice(&[0, 0, 1, 0, 1]);
        malformed(&long, |e| matches!(e, DecodeError::DomainNameTooLong(_)));
        // A record claimed but missing after the question.
        let mut more = query(7, "a.b", 1, false);
        more[7] = 1;
        malformed(&more, |e| matches!(e, DecodeError::InsufficientBytes));
        // FORMERR echoes the ID and opcode, asks nothing back.
        let err = format_error(&two, &ParseError::QuestionCount(2)).unwrap();
        assert_eq!(err, [0, 7, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn writes_an_answer_that_repeats_the_question_and_points_at_its_name() {
        let msg = query(0x1234, "mydb.default.svc.cluster.local", 1, true);
        let q = parse_query(&msg).unwrap();
        let write = |rcode, authoritative, answers: &[RData]| {
            encode(&response(&q, rcode, authoritative, answers, 5), TCP_LIMIT).unwrap()
        };
        let out = write(ResponseCode::NoError, true, &[a([10, 96, 0, 11])]);
        // ID; QR, RD, AA, RA, NOERROR; one question, one answer, no authority, no additional.
        assert_eq!(out[..12], [0x12, 0x34, 0x85, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
        let question_end = msg.len() - 11;
        assert_eq!(out[12..question_end], msg[12..question_end]);
        let answer = &out[question_end..];
        assert_eq!(answer, [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 96, 0, 11]);

        let out = write(ResponseCode::NXDomain, true, &[]);
        assert_eq!(out[..12], [0x12, 0x34, 0x85, 0x83, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(out.len(), question_end);
        let out = write(ResponseCode::ServFail, false, &[]);
        assert_eq!(out[2..4], [0x81, 0x82]);
    }

    #[test]
    fn an_answer_too_long_for_the_client_is_cut_to_its_question_with_tc_set() {
        let q = parse_query(&query(9, "many.default.svc.cluster.local", 1, false)).unwrap();
        let answers: Vec<RData> = (0..40).map(|i| a([10, 96, 0, i])).collect();
        let full = response(&q, ResponseCode::NoError, true, &answers, 5);
        assert!(encode(&full, TCP_LIMIT).unwrap().len() > q.udp_limit());
        let cut = Message::from_vec(&encode(&full, q.udp_limit()).unwrap()).unwrap();
        assert!(cut.metadata.truncation);
        assert_eq!((cut.metadata.id, cut.queries.len(), cut.answers.len()), (9, 1, 0));
    }
}
