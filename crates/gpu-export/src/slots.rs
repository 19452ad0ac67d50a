//! Who may hold the server's connections: at most [`Limits::per_client`] from one client and
//! [`Limits::total`] in all, with the last [`Limits::reserve`] of them kept for clients that hold
//! fewer than [`Limits::reserve_per_client`], so that a flood from many addresses, each at its
//! own limit, cannot take every slot and a scraper from elsewhere still gets one.
//!
//! A client is an IPv4 address, or an IPv6 /64: one host on an IPv6 network usually has a whole
//! /64 to choose addresses from, so counting single IPv6 addresses would give it millions of
//! limits.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use crate::limits::Limits;

/// The client a peer address belongs to: an IPv4 address (an IPv4 address mapped into IPv6
/// counts as the IPv4 address), or the /64 of an IPv6 address (its last 64 bits zeroed).
pub fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !(u128::from(u64::MAX));
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
    }
}

/// Open connections per client and in all.
#[derive(Debug)]
pub struct Slots {
    per_client: usize,
    total: usize,
    reserve: usize,
    reserve_per_client: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    all: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// One admitted connection; gives its slot back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    client: IpAddr,
}

impl Slots {
    /// The slots of `limits`: `per_client`, `total`, `reserve` and `reserve_per_client`.
    pub fn new(limits: &Limits) -> Slots {
        Slots {
            per_client: limits.per_client,
            total: limits.total,
            reserve: limits.reserve,
            reserve_per_client: limits.reserve_per_client,
            open: Mutex::new(Open::default()),
        }
    }

    /// A slot for a connection from `ip`, if one is free for its client: fewer than
    /// `per_client` open from the client and fewer than `total` in all, and when `reserve` or
    /// fewer slots are free, fewer than `reserve_per_client` open from the client.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let client = client_of(ip);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let free = self.total.saturating_sub(open.all);
        let mine = open.by_client.get(&client).copied().unwrap_or(0);
        if free == 0
            || mine >= self.per_client
            || (free <= self.reserve && mine >= self.reserve_per_client)
        {
            return None;
        }
        *open.by_client.entry(client).or_insert(0) += 1;
        open.all += 1;
        Some(Slot {
            slots: self.clone(),
            client,
        })
    }

    /// Open connections from `ip`'s client, and in all.
    #[cfg(test)]
    pub fn open(&self, ip: IpAddr) -> (usize, usize) {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        (
            open.by_client.get(&client_of(ip)).copied().unwrap_or(0),
            open.all,
        )
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        open.all = open.all.saturating_sub(1);
        if let Some(n) = open.by_client.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::LIMITS;
    use std::net::Ipv4Addr;

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn slots(per_client: usize, total: usize, reserve: usize, few: usize) -> Arc<Slots> {
        Arc::new(Slots::new(&Limits {
            per_client,
            total,
            reserve,
            reserve_per_client: few,
            ..LIMITS
        }))
    }

    #[test]
    fn one_address_cannot_take_the_slots_of_another() {
        let slots = slots(2, 3, 0, 0);
        let a = v4(1);
        let b = v4(2);
        let a1 = slots.admit(a).unwrap();
        let _a2 = slots.admit(a).unwrap();
        assert!(slots.admit(a).is_none(), "a third from a");
        let _b1 = slots.admit(b).unwrap();
        assert!(slots.admit(b).is_none(), "the total is reached");
        drop(a1);
        assert_eq!(slots.open(a), (1, 2));
        assert!(slots.admit(b).is_some());
        // An IPv4-mapped IPv6 address is the same client.
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(slots.open(mapped).0, 1);
    }

    #[test]
    fn item_13_an_ipv6_64_counts_as_one_address() {
        let slots = slots(2, 100, 0, 0);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:fffe".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _a = slots.admit(a).unwrap();
        let _b = slots.admit(b).unwrap();
        assert!(slots.admit("2001:db8:1:2::77".parse().unwrap()).is_none());
        assert_eq!(slots.open(a), (2, 2));
        // The next /64 is another client.
        assert!(slots.admit(other).is_some());
        assert_eq!(
            client_of(a),
            "2001:db8:1:2::".parse::<IpAddr>().unwrap(),
            "the /64"
        );
        assert_eq!(client_of(v4(9)), v4(9));
    }

    #[test]
    fn item_13_the_reserve_is_kept_for_clients_with_few_connections() {
        // 10 slots, the last 4 for clients holding fewer than 2; 8 from one client at most.
        let slots = slots(8, 10, 4, 2);
        let mut held = Vec::new();
        // A flooder takes its fill up to the reserve...
        for _ in 0..6 {
            held.push(slots.admit(v4(1)).unwrap());
        }
        // ... and no more, below its own limit of 8.
        assert!(slots.admit(v4(1)).is_none(), "a 7th from 127.0.0.1");
        assert_eq!(slots.open(v4(1)), (6, 6));
        // Newcomers get 2 each.
        for client in [2, 3] {
            held.push(slots.admit(v4(client)).unwrap());
            held.push(slots.admit(v4(client)).unwrap());
            assert!(slots.admit(v4(client)).is_none(), "a 3rd from {client}");
        }
        assert!(slots.admit(v4(4)).is_none(), "the total is reached");
        // A slot given back is open to a client with few again, not to the flooder.
        held.pop();
        assert!(slots.admit(v4(1)).is_none());
        assert!(slots.admit(v4(4)).is_some());
    }
}
