//! The server's limits (connections, request heads, password checks) and the target of its log
//! events: what the server, its connection slots (`slots.rs`) and its password checks
//! (`auth.rs`) share, below all three.

use std::time::Duration;

/// The tracing target of the server's events (docs/logging.md): the one it had inside the
/// `gpuscope` CLI, kept so that `GPUSCOPE_LOG=gpuscope::export=debug` and `-v` (which turns on
/// the `gpuscope` targets) still select them.
pub const LOG_TARGET: &str = "gpuscope::export::server";

/// The server's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once from one client: an IPv4 address, or an IPv6 /64.
    pub per_client: usize,
    /// Most connections open at once in all.
    pub total: usize,
    /// The last slots of [`Limits::total`], kept for clients with few connections: when this
    /// many or fewer are free, a client holding [`Limits::reserve_per_client`] or more gets
    /// none. So clients flooding from many addresses, each at its own limit, leave room for a
    /// scraper from another: fewer than `reserve / reserve_per_client` flooding clients cannot
    /// fill the table.
    pub reserve: usize,
    /// Connections a client may hold and still be given a reserved slot (it gets one while it
    /// holds fewer).
    pub reserve_per_client: usize,
    /// Time a client has to finish a TLS handshake, and to send a whole request head from the
    /// start of the connection or the end of the previous answer.
    pub header_timeout: Duration,
    /// Largest request head, bytes (431 beyond it).
    pub max_head: usize,
    /// Most header lines in a request (431 beyond it).
    pub max_headers: usize,
    /// Longest life of a connection: then it is closed after its current answer, and forcibly
    /// [`Limits::header_timeout`] later if that answer is not read.
    pub max_age: Duration,
    /// Most bcrypt checks running at once (each on a blocking thread).
    pub auth_workers: usize,
    /// Most bcrypt checks one client may have waiting or running; its requests beyond are
    /// answered `429` unchecked, after the second its `Retry-After` gives.
    pub auth_per_client: usize,
}

/// How many connections the listening socket `gpuscope export` binds holds before they are
/// accepted (the kernel caps it at `net.core.somaxconn`, 4096 by default since Linux 5.4). A
/// connection request that finds the queue full is dropped and retried by the client a second
/// later, past a scrape's budget; std's `bind` asks for 128, which clients reconnecting as fast
/// as they are refused (issue 32, item 13's flood) fill between two turns of the accept loop.
pub const LISTEN_BACKLOG: i32 = 1024;

/// The limits `gpuscope export` runs with (and `Config::new`'s).
pub const LIMITS: Limits = Limits {
    per_client: 32,
    total: 512,
    reserve: 128,
    reserve_per_client: 4,
    header_timeout: Duration::from_secs(2),
    max_head: 16 * 1024,
    max_headers: 64,
    max_age: Duration::from_secs(300),
    auth_workers: 2,
    auth_per_client: 4,
};
