//! The few parts of the DNS wire format (RFC 1035 §4) the cluster DNS needs: reading a query's
//! header and question, and writing an answer with A records, or an error code, for it.

use std::net::Ipv4Addr;

const HEADER_LEN: usize = 12;
/// A name is at most 255 bytes on the wire.
const MAX_NAME_LEN: usize = 255;

pub const TYPE_A: u16 = 1;
pub const TYPE_ANY: u16 = 255;
pub const CLASS_IN: u16 = 1;

const FLAG_QR: u16 = 0x8000;
const FLAG_AA: u16 = 0x0400;
const FLAG_RD: u16 = 0x0100;
const FLAG_RA: u16 = 0x0080;
const OPCODE_MASK: u16 = 0x7800;

/// Response codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
    NotImp = 4,
}

/// Why a message is not a query the cluster DNS can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("shorter than a DNS header")]
    NoHeader,
    #[error("a response, not a query")]
    NotAQuery,
    #[error("{0} questions; exactly one is supported")]
    QuestionCount(u16),
    #[error("the question is cut short")]
    Truncated,
    #[error("the name is longer than 255 bytes")]
    NameTooLong,
    #[error("a compression pointer in the question")]
    Compressed,
}

/// A query's header and its one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// The header's flags as sent (opcode and RD are echoed in the response).
    pub flags: u16,
    /// The question name's labels, in ASCII lower case (DNS names compare case-insensitively).
    pub labels: Vec<String>,
    pub qtype: u16,
    pub qclass: u16,
    /// Where the question ends in the message: the response repeats the bytes before it.
    question_end: usize,
}

impl Query {
    pub fn opcode(&self) -> u16 {
        (self.flags & OPCODE_MASK) >> 11
    }

    /// The name as written, without the root's trailing dot.
    pub fn name(&self) -> String {
        self.labels.join(".")
    }
}

fn u16_at(msg: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

/// Reads the header and the single question of a query. Queries carry no compression in their
/// question, and anything after it (an EDNS OPT record) is ignored: the answers are small.
pub fn parse_query(msg: &[u8]) -> Result<Query, ParseError> {
    let id = u16_at(msg, 0).ok_or(ParseError::NoHeader)?;
    let flags = u16_at(msg, 2).ok_or(ParseError::NoHeader)?;
    let qdcount = u16_at(msg, 4).ok_or(ParseError::NoHeader)?;
    if msg.len() < HEADER_LEN {
        return Err(ParseError::NoHeader);
    }
    if flags & FLAG_QR != 0 {
        return Err(ParseError::NotAQuery);
    }
    if qdcount != 1 {
        return Err(ParseError::QuestionCount(qdcount));
    }
    let mut at = HEADER_LEN;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*msg.get(at).ok_or(ParseError::Truncated)?);
        if len & 0xC0 != 0 {
            return Err(ParseError::Compressed);
        }
        at += 1;
        if len == 0 {
            break;
        }
        let label = msg.get(at..at + len).ok_or(ParseError::Truncated)?;
        labels.push(String::from_utf8_lossy(&label.to_ascii_lowercase()).into_owned());
        at += len;
        if at - HEADER_LEN > MAX_NAME_LEN {
            return Err(ParseError::NameTooLong);
        }
    }
    let qtype = u16_at(msg, at).ok_or(ParseError::Truncated)?;
    let qclass = u16_at(msg, at + 2).ok_or(ParseError::Truncated)?;
    Ok(Query { id, flags, labels, qtype, qclass, question_end: at + 4 })
}

fn header(id: u16, flags: u16, qdcount: u16, ancount: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    for v in [id, flags, qdcount, ancount, 0, 0] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

fn response_flags(request_flags: u16, authoritative: bool, rcode: Rcode) -> u16 {
    let aa = if authoritative { FLAG_AA } else { 0 };
    FLAG_QR | (request_flags & (OPCODE_MASK | FLAG_RD)) | aa | FLAG_RA | rcode as u16
}

/// The response to `query` (read from `msg`): its question, then an A record with `ttl` for
/// each address. `authoritative` for names of the cluster domain, which this server owns.
pub fn response(
    msg: &[u8],
    query: &Query,
    rcode: Rcode,
    authoritative: bool,
    answers: &[Ipv4Addr],
    ttl: u32,
) -> Vec<u8> {
    let ancount = u16::try_from(answers.len()).unwrap_or(u16::MAX);
    let mut out = header(query.id, response_flags(query.flags, authoritative, rcode), 1, ancount);
    out.extend_from_slice(&msg[HEADER_LEN..query.question_end]);
    for ip in answers.iter().take(usize::from(ancount)) {
        // The owner name points back at the question's name (offset 12).
        out.extend_from_slice(&0xC00Cu16.to_be_bytes());
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&ip.octets());
    }
    out
}

/// The answer to a message that cannot be read as a query: FORMERR with its ID and no
/// question, or nothing for a message too short to have an ID, or for a response (answering
/// responses could loop between two servers).
pub fn format_error(msg: &[u8], error: &ParseError) -> Option<Vec<u8>> {
    if matches!(error, ParseError::NoHeader | ParseError::NotAQuery) {
        return None;
    }
    let id = u16_at(msg, 0)?;
    let flags = u16_at(msg, 2)?;
    Some(header(id, response_flags(flags, false, Rcode::FormErr), 0, 0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A query as resolvers send it: ID, RD set, one question, optionally an EDNS OPT record.
    pub(crate) fn query(id: u16, name: &str, qtype: u16, edns: bool) -> Vec<u8> {
        let mut msg = header(id, FLAG_RD, 1, 0);
        if edns {
            msg[11] = 1;
        }
        for label in name.split('.').filter(|l| !l.is_empty()) {
            msg.push(label.len() as u8);
            msg.extend_from_slice(label.as_bytes());
        }
        msg.push(0);
        msg.extend_from_slice(&qtype.to_be_bytes());
        msg.extend_from_slice(&CLASS_IN.to_be_bytes());
        if edns {
            // Root name, type OPT (41), UDP size 1232, no extended flags, no options.
            msg.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
        }
        msg
    }

    #[test]
    fn reads_a_query_in_lower_case_and_ignores_edns() {
        let msg = query(0xBEEF, "MyService.Default.svc.cluster.local.", TYPE_A, true);
        let q = parse_query(&msg).unwrap();
        assert_eq!((q.id, q.qtype, q.qclass, q.opcode()), (0xBEEF, TYPE_A, CLASS_IN, 0));
        assert_eq!(q.name(), "myservice.default.svc.cluster.local");
        let root = parse_query(&query(1, ".", 2, false)).unwrap();
        assert!(root.labels.is_empty());
    }

    #[test]
    fn refuses_what_is_not_one_readable_question() {
        assert_eq!(parse_query(&[0; 5]), Err(ParseError::NoHeader));
        let mut msg = query(7, "a.b", TYPE_A, false);
        msg[2] |= 0x80;
        assert_eq!(parse_query(&msg), Err(ParseError::NotAQuery));
        assert_eq!(format_error(&msg, &ParseError::NotAQuery), None);
        let mut two = query(7, "a.b", TYPE_A, false);
        two[5] = 2;
        assert_eq!(parse_query(&two), Err(ParseError::QuestionCount(2)));
        let full = query(7, "a.b", TYPE_A, false);
        assert_eq!(parse_query(&full[..full.len() - 1]), Err(ParseError::Truncated));
        assert_eq!(parse_query(&full[..14]), Err(ParseError::Truncated));
        let mut pointer = header(7, 0, 1, 0);
        pointer.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        assert_eq!(parse_query(&pointer), Err(ParseError::Compressed));
        let long = query(7, &vec!["a".repeat(63); 5].join("."), TYPE_A, false);
        assert_eq!(parse_query(&long), Err(ParseError::NameTooLong));
        // FORMERR echoes the ID and opcode, asks nothing back.
        let err = format_error(&two, &ParseError::QuestionCount(2)).unwrap();
        assert_eq!(err, [0, 7, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn writes_an_answer_that_repeats_the_question_and_points_at_its_name() {
        let msg = query(0x1234, "mydb.default.svc.cluster.local", TYPE_A, true);
        let q = parse_query(&msg).unwrap();
        let out = response(&msg, &q, Rcode::NoError, true, &[Ipv4Addr::new(10, 96, 0, 11)], 5);
        // ID; QR, RD, AA, RA, NOERROR; one question, one answer, no authority, no additional.
        assert_eq!(out[..12], [0x12, 0x34, 0x85, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
        let question_end = msg.len() - 11;
        assert_eq!(out[12..question_end], msg[12..question_end]);
        let answer = &out[question_end..];
        assert_eq!(answer, [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 96, 0, 11]);

        let out = response(&msg, &q, Rcode::NxDomain, true, &[], 5);
        assert_eq!(out[..12], [0x12, 0x34, 0x85, 0x83, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(out.len(), question_end);
        let out = response(&msg, &q, Rcode::ServFail, false, &[], 5);
        assert_eq!(out[2..4], [0x81, 0x82]);
    }
}
