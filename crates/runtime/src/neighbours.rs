//! The host's neighbour table (ARP, NDP) and a new sandbox's addresses.
//!
//! A new pod may get an address an earlier pod had, and the host may still hold that pod's link
//! address for it: the kernel keeps a STALE entry for as long as its table is small. CNI's bridge
//! plugin stopped sending a gratuitous ARP in 1.0 (containernetworking/plugins#858; it enables
//! `arp_notify` instead, which does not replace the entry), so until the entry fails, 5 to 10 s
//! after its next use, the host sends the new pod's packets to the old one's address: probes
//! time out and a readiness is late. Forgetting the entry as the sandbox starts makes the host's
//! first packet ask again.

use futures_util::TryStreamExt;
use rtnetlink::packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState};
use std::io;
use std::net::IpAddr;

/// Removes the host's entries for `ips` (all but those an administrator made permanent) and
/// answers how many there were.
pub async fn forget(ips: &[IpAddr]) -> io::Result<usize> {
    let (connection, handle, _) = rtnetlink::new_connection()?;
    let connection = tokio::spawn(connection);
    let result = async {
        // The whole table, of every family: the kernel filters a dump by device, not by address.
        let table: Vec<NeighbourMessage> =
            handle.neighbours().get().execute().try_collect().await.map_err(io::Error::other)?;
        let stale: Vec<NeighbourMessage> = table.into_iter().filter(|m| forgettable(m, ips)).collect();
        let removed = stale.len();
        for entry in stale {
            handle.neighbours().del(entry).execute().await.map_err(io::Error::other)?;
        }
        Ok(removed)
    }
    .await;
    connection.abort();
    result
}

fn forgettable(entry: &NeighbourMessage, ips: &[IpAddr]) -> bool {
    let permanent = matches!(entry.header.state, NeighbourState::Permanent | NeighbourState::Noarp);
    !permanent && destination(entry).is_some_and(|ip| ips.contains(&ip))
}

fn destination(entry: &NeighbourMessage) -> Option<IpAddr> {
    entry.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn entry(ip: Ipv4Addr, state: NeighbourState) -> NeighbourMessage {
        let mut m = NeighbourMessage::default();
        m.header.state = state;
        m.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
        m
    }

    #[test]
    fn only_the_new_addresses_learned_entries_are_forgotten() {
        let pod = Ipv4Addr::new(10, 89, 0, 7);
        let ips = [IpAddr::V4(pod)];
        assert!(forgettable(&entry(pod, NeighbourState::Stale), &ips));
        assert!(forgettable(&entry(pod, NeighbourState::Reachable), &ips));
        assert!(forgettable(&entry(pod, NeighbourState::Failed), &ips));
        assert!(!forgettable(&entry(pod, NeighbourState::Permanent), &ips), "an administrator's");
        assert!(!forgettable(&entry(pod, NeighbourState::Noarp), &ips));
        assert!(!forgettable(&entry(Ipv4Addr::new(10, 89, 0, 8), NeighbourState::Stale), &ips), "another pod's");
        assert!(!forgettable(&NeighbourMessage::default(), &ips), "no destination");
    }
}
