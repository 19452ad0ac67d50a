//! Basic auth against bcrypt hashes, built to keep answering the right password while others
//! flood the exporter with wrong ones.
//!
//! A bcrypt check costs tens to hundreds of milliseconds by design, so:
//!
//! - **Passed checks are remembered**, as the Prometheus exporter-toolkit does: a keyed hash
//!   (HMAC-SHA-256 under a key drawn at start) of the user and password, the last
//!   [`PASSED_KEPT`] of them, compared in constant time. A scraper that sends the same
//!   credentials at every scrape costs one check in all, and answers at once even while the
//!   checks are busy. Only passed checks are kept, so a flood of wrong passwords cannot push
//!   them out; the password itself is never kept.
//! - **The checks are shared out by client** (an IPv4 address or an IPv6 /64, as for
//!   connections): at most [`Limits::auth_workers`] run at once, off the runtime's threads; a
//!   client has one check running or waiting for a worker at a time, and the workers go to the
//!   waiting clients in turn, first come, first served, each client with at most one request
//!   in the line, so a new client waits for at most one check per client ahead of it, however
//!   many requests each of them sent. And a client whose check failed in the last
//!   [`SUSPECT_FOR`] waits behind every client whose check has not: while a flood of wrong
//!   passwords keeps the workers busy, a correct login from another address waits for one
//!   check to end, not one per flooding client. Beyond [`Limits::auth_per_client`] checks
//!   waiting or running, a client's request is refused without a check ([`Verdict::Busy`]: the
//!   server answers `429` after the second its `Retry-After` gives, so that a client retrying
//!   at once cannot spin it).
//! - **Every check does the same work, whoever the user**: one bcrypt run at each cost the
//!   users' hashes have, against the user's own hash at its cost and a dummy hash (a
//!   well-formed hash no password matches, built without hashing) at every other; an unknown
//!   user runs the dummies at every cost. So the time of a check says nothing about whether a
//!   user exists, or what cost its hash has.
//!
//! [`Limits::auth_workers`]: crate::Limits::auth_workers
//! [`Limits::auth_per_client`]: crate::Limits::auth_per_client

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hyper::header::HeaderValue;
use ring::hmac;
use tokio::sync::{oneshot, Semaphore};

use crate::limits::LOG_TARGET;
use crate::slots::client_of;
use crate::web_config::bcrypt_cost;

/// User/password pairs remembered as passed (their keyed hashes).
pub const PASSED_KEPT: usize = 64;

/// How long a client whose check failed waits behind the others for a worker.
pub const SUSPECT_FOR: Duration = Duration::from_secs(60);

/// Clients remembered as having failed a check (beyond it, those whose mark is older than
/// [`SUSPECT_FOR`] are forgotten, and if none is, a new failure is not marked: the client is
/// then served in turn like any other).
pub const SUSPECTS_KEPT: usize = 4096;

/// What a check of a request's credentials says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A known user with the right password.
    Pass,
    /// No credentials, a malformed header, an unknown user or a wrong password.
    Fail,
    /// The client has too many checks waiting or running already: nothing was checked.
    Busy,
}

/// The users, what a check runs, and the checks in flight.
pub struct Auth {
    /// User name to (cost, hash).
    users: BTreeMap<String, (u32, String)>,
    /// A dummy hash at each cost the users' hashes have.
    dummies: BTreeMap<u32, String>,
    /// The key of the remembered checks' hashes; none if the system could not give a random
    /// key (then nothing is remembered).
    key: Option<hmac::Key>,
    passed: Mutex<VecDeque<hmac::Tag>>,
    workers: Arc<Workers>,
    per_client: usize,
    clients: Arc<Mutex<HashMap<IpAddr, Client>>>,
    /// Clients whose last check failed, and when.
    suspects: Mutex<HashMap<IpAddr, Instant>>,
    /// bcrypt runs so far.
    runs: Arc<AtomicU64>,
}

/// A client's checks waiting or running, and its turn: one at a time.
struct Client {
    turn: Arc<Semaphore>,
    pending: usize,
}

/// One of a client's pending checks; counted until dropped.
struct Ticket {
    clients: Arc<Mutex<HashMap<IpAddr, Client>>>,
    client: IpAddr,
    turn: Arc<Semaphore>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get_mut(&self.client) {
            c.pending = c.pending.saturating_sub(1);
            if c.pending == 0 {
                clients.remove(&self.client);
            }
        }
    }
}

/// The salt of the dummy hashes: any 16 bytes do, as no password has to match.
const DUMMY_SALT: &[u8; 16] = b"gpuscope dummy  ";

/// A well-formed bcrypt hash at `cost` that no password matches (an all-zero digest): verifying
/// against it costs what verifying against a real hash of that cost does, and building it costs
/// nothing (a dummy made by hashing would cost a check of its own at start).
fn dummy_hash(cost: u32) -> String {
    format!(
        "$2b${cost:02}${}{}",
        bcrypt::BASE_64.encode(DUMMY_SALT),
        bcrypt::BASE_64.encode([0u8; 23])
    )
}

impl Auth {
    /// Checks against `users` (name to bcrypt hash), at most `workers` at once and
    /// `per_client` waiting or running per client. A hash whose cost is outside
    /// [`BCRYPT_COSTS`](crate::BCRYPT_COSTS) or that is malformed (`WebConfig::load` refuses
    /// both; a `WebConfig` built by hand may hold them) leaves its user out, logged as an error:
    /// such a user cannot log in.
    pub fn new(users: &BTreeMap<String, String>, workers: usize, per_client: usize) -> Auth {
        let mut kept = BTreeMap::new();
        for (name, hash) in users {
            match bcrypt_cost(hash) {
                Ok(cost) => {
                    kept.insert(name.clone(), (cost, hash.clone()));
                }
                Err(why) => tracing::error!(
                    target: LOG_TARGET,
                    user = %gpu_devices::text::Escaped(name),
                    "basic auth: the user cannot log in: {why}"
                ),
            }
        }
        let dummies = kept
            .values()
            .map(|(cost, _)| (*cost, dummy_hash(*cost)))
            .collect();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &ring::rand::SystemRandom::new()).ok();
        Auth {
            users: kept,
            dummies,
            key,
            passed: Mutex::new(VecDeque::new()),
            workers: Arc::new(Workers::new(workers.max(1))),
            per_client: per_client.max(1),
            clients: Arc::new(Mutex::new(HashMap::new())),
            suspects: Mutex::new(HashMap::new()),
            runs: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Checks the `Authorization` header `value` of a request from `peer`.
    pub async fn check(&self, peer: IpAddr, value: Option<&HeaderValue>) -> Verdict {
        let Some((user, password)) = value.and_then(|v| parse_basic(v.as_bytes())) else {
            return Verdict::Fail;
        };
        let tag = self.tag(&user, &password);
        if self.remembered(tag.as_ref()) {
            return Verdict::Pass;
        }
        let client = client_of(peer);
        let Some(ticket) = self.ticket(client) else {
            return Verdict::Busy;
        };
        let Ok(turn) = ticket.turn.clone().acquire_owned().await else {
            return Verdict::Fail;
        };
        let line = if self.suspect(client) {
            Line::Suspect
        } else {
            Line::Clean
        };
        let Some(worker) = self.workers.acquire(line).await else {
            return Verdict::Fail;
        };
        // The same credentials may have passed while this request waited.
        if self.remembered(tag.as_ref()) {
            return Verdict::Pass;
        }
        let plan = self.plan(&user);
        let runs = self.runs.clone();
        // The permits and the ticket go with the work: a client that hangs up while its check
        // runs does not free a worker that is still busy.
        let ok = tokio::task::spawn_blocking(move || {
            let _held = (ticket, turn, worker);
            verify(&password, &plan, &runs)
        })
        .await
        .unwrap_or(false);
        self.mark(client, ok);
        if ok {
            if let Some(tag) = tag {
                let mut passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
                if passed.len() >= PASSED_KEPT {
                    passed.pop_front();
                }
                passed.push_back(tag);
            }
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }

    /// Whether `client` failed a check within [`SUSPECT_FOR`].
    fn suspect(&self, client: IpAddr) -> bool {
        let suspects = self.suspects.lock().unwrap_or_else(|p| p.into_inner());
        suspects
            .get(&client)
            .is_some_and(|t| t.elapsed() < SUSPECT_FOR)
    }

    /// Marks `client` as having failed a check now, or forgets its mark when it `passed`.
    fn mark(&self, client: IpAddr, passed: bool) {
        let mut suspects = self.suspects.lock().unwrap_or_else(|p| p.into_inner());
        if passed {
            suspects.remove(&client);
            return;
        }
        if suspects.len() >= SUSPECTS_KEPT && !suspects.contains_key(&client) {
            suspects.retain(|_, t| t.elapsed() < SUSPECT_FOR);
            if suspects.len() >= SUSPECTS_KEPT {
                return;
            }
        }
        suspects.insert(client, Instant::now());
    }

    /// The hashes a check of `user` verifies its password against, in order, each with
    /// whether it is the user's own: one at each of the users' costs.
    fn plan(&self, user: &str) -> Vec<(String, bool)> {
        let own = self.users.get(user);
        self.dummies
            .iter()
            .map(|(cost, dummy)| match own {
                Some((c, hash)) if c == cost => (hash.clone(), true),
                _ => (dummy.clone(), false),
            })
            .collect()
    }

    /// The keyed hash of `user` and `password` (the user's length first, so that no two pairs
    /// hash the same bytes).
    fn tag(&self, user: &str, password: &str) -> Option<hmac::Tag> {
        let key = self.key.as_ref()?;
        let mut ctx = hmac::Context::with_key(key);
        ctx.update(&(user.len() as u64).to_le_bytes());
        ctx.update(user.as_bytes());
        ctx.update(password.as_bytes());
        Some(ctx.sign())
    }

    /// Whether `tag` is among the passed ones, in a time that does not depend on which.
    fn remembered(&self, tag: Option<&hmac::Tag>) -> bool {
        let Some(tag) = tag else {
            return false;
        };
        let passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
        passed.iter().fold(false, |found, kept| {
            found | constant_time_eq(kept.as_ref(), tag.as_ref())
        })
    }

    /// A place in `client`'s queue, unless it holds `per_client` already.
    fn ticket(&self, client: IpAddr) -> Option<Ticket> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let c = clients.entry(client).or_insert_with(|| Client {
            turn: Arc::new(Semaphore::new(1)),
            pending: 0,
        });
        if c.pending >= self.per_client {
            tracing::debug!(target: LOG_TARGET, %client, "basic auth: too many checks waiting, 429");
            return None;
        }
        c.pending += 1;
        Some(Ticket {
            clients: self.clients.clone(),
            client,
            turn: c.turn.clone(),
        })
    }

    /// bcrypt runs so far.
    #[cfg(test)]
    fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }
}

/// Which line a check waits in for a worker: the clean one is served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// The client has not failed a check lately.
    Clean,
    /// The client failed a check within [`SUSPECT_FOR`].
    Suspect,
}

/// The bcrypt workers: a count of free ones and two lines of waiters, each first come, first
/// served, the clean line before the suspect one. (tokio's semaphore has one line only.)
struct Workers {
    state: Mutex<WorkersState>,
}

struct WorkersState {
    free: usize,
    clean: VecDeque<oneshot::Sender<()>>,
    suspect: VecDeque<oneshot::Sender<()>>,
}

/// A worker held; handed to the next waiter, or freed, when dropped.
struct Worker(Arc<Workers>);

impl Drop for Worker {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A waiter's place in a line. If the wait is given up (the request's future dropped) after a
/// worker was handed over, the worker is handed on.
struct Waiting {
    workers: Arc<Workers>,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.workers.release();
            }
        }
    }
}

impl Workers {
    fn new(n: usize) -> Workers {
        Workers {
            state: Mutex::new(WorkersState {
                free: n,
                clean: VecDeque::new(),
                suspect: VecDeque::new(),
            }),
        }
    }

    /// A worker, at once if one is free and nobody waits, else when one is handed over in
    /// `line`'s turn. None only if the workers are gone.
    async fn acquire(self: &Arc<Self>, line: Line) -> Option<Worker> {
        let rx = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.free > 0 && st.clean.is_empty() && st.suspect.is_empty() {
                st.free -= 1;
                return Some(Worker(self.clone()));
            }
            let (tx, rx) = oneshot::channel();
            match line {
                Line::Clean => st.clean.push_back(tx),
                Line::Suspect => st.suspect.push_back(tx),
            }
            rx
        };
        let mut waiting = Waiting {
            workers: self.clone(),
            rx: Some(rx),
        };
        let handed = match waiting.rx.as_mut() {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        if handed {
            // The worker is this request's now: nothing to hand on when `waiting` drops.
            waiting.rx = None;
            Some(Worker(self.clone()))
        } else {
            None
        }
    }

    /// Hands a worker to the first live waiter, clean line first, or frees it.
    fn release(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let next = match st.clean.pop_front() {
                Some(tx) => Some(tx),
                None => st.suspect.pop_front(),
            };
            match next {
                // A waiter that gave up is skipped.
                Some(tx) => {
                    if tx.send(()).is_ok() {
                        return;
                    }
                }
                None => {
                    st.free += 1;
                    return;
                }
            }
        }
    }
}

/// Verifies `password` against every hash of `plan`; whether it matched the user's own.
fn verify(password: &str, plan: &[(String, bool)], runs: &AtomicU64) -> bool {
    let mut ok = false;
    for (hash, own) in plan {
        runs.fetch_add(1, Ordering::Relaxed);
        let matched = bcrypt::verify(password, hash).unwrap_or(false);
        if *own {
            ok = matched;
        } else {
            // Kept from being optimised away: the dummy's work is the point.
            std::hint::black_box(matched);
        }
    }
    ok
}

/// Equality whose time depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Basic base64(user:password)` → (user, password).
pub fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn header(user: &str, password: &str) -> HeaderValue {
        let v = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        HeaderValue::from_str(&v).unwrap()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    fn peer(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    /// alice at cost 4 and bob at cost 5 (the least bcrypt allows, so the tests are quick).
    fn users() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("alice".to_string(), bcrypt::hash("alice-pw", 4).unwrap()),
            ("bob".to_string(), bcrypt::hash("bob-pw", 5).unwrap()),
        ])
    }

    #[test]
    fn basic_credentials_parse() {
        // "alice:open sesame:x"
        let v = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:open sesame:x")
        );
        assert_eq!(
            parse_basic(v.as_bytes()),
            Some(("alice".into(), "open sesame:x".into()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
        assert_eq!(parse_basic(b"Basic"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_header_bytes_parse_without_panicking(bytes in proptest::collection::vec(0u8..=255, 0..200)) {
            let _ = parse_basic(&bytes);
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn dummy_hashes_are_well_formed_and_match_nothing() {
        for cost in [4, 10, 14] {
            let d = dummy_hash(cost);
            assert_eq!(bcrypt_cost(&d), Ok(cost), "{d}");
        }
        assert_eq!(bcrypt::verify("", &dummy_hash(4)).ok(), Some(false));
        assert_eq!(bcrypt::verify("x", &dummy_hash(4)).ok(), Some(false));
    }

    #[test]
    fn the_right_password_passes_and_is_remembered() {
        let rt = runtime();
        let auth = Auth::new(&users(), 2, 4);
        let right = header("bob", "bob-pw");
        assert_eq!(
            rt.block_on(auth.check(peer(1), Some(&right))),
            Verdict::Pass
        );
        assert_eq!(auth.runs(), 2, "one run at each of the two costs");
        // From another address too: no bcrypt run.
        assert_eq!(
            rt.block_on(auth.check(peer(2), Some(&right))),
            Verdict::Pass
        );
        assert_eq!(auth.runs(), 2);
        // Neither a wrong password nor another user's password is remembered as passed.
        for (user, pw) in [("bob", "bob-pw "), ("alice", "bob-pw"), ("bob", "")] {
            let h = header(user, pw);
            assert_eq!(rt.block_on(auth.check(peer(1), Some(&h))), Verdict::Fail);
        }
        assert_eq!(auth.runs(), 8);
        assert_eq!(
            rt.block_on(auth.check(peer(1), Some(&header("alice", "alice-pw")))),
            Verdict::Pass
        );
        // No header, or not basic auth: refused without a run.
        assert_eq!(rt.block_on(auth.check(peer(1), None)), Verdict::Fail);
        let bearer = HeaderValue::from_static("Bearer abc");
        assert_eq!(
            rt.block_on(auth.check(peer(1), Some(&bearer))),
            Verdict::Fail
        );
        assert_eq!(auth.runs(), 10);
    }

    #[test]
    fn item_11_an_unknown_user_goes_through_the_same_checks_as_a_known_one() {
        // Regression: a known user of cost 4 was checked against its own hash alone (1.1 ms),
        // an unknown user against a dummy at the highest cost (228 ms at cost 12): the time
        // told which users exist.
        let auth = Auth::new(&users(), 2, 4);
        let costs = |user: &str| -> Vec<u32> {
            auth.plan(user)
                .iter()
                .map(|(h, _)| bcrypt_cost(h).unwrap())
                .collect()
        };
        assert_eq!(costs("alice"), vec![4, 5]);
        assert_eq!(costs("bob"), vec![4, 5]);
        assert_eq!(costs("mallory"), vec![4, 5]);
        assert_eq!(costs(""), vec![4, 5]);
        // And the runs counted: the same for a wrong password of a known user and for an
        // unknown user.
        let rt = runtime();
        let mut counts = Vec::new();
        for (user, pw) in [("alice", "wrong"), ("mallory", "wrong"), ("bob", "x")] {
            let before = auth.runs();
            let v = rt.block_on(auth.check(peer(1), Some(&header(user, pw))));
            assert_eq!(v, Verdict::Fail);
            counts.push(auth.runs() - before);
        }
        assert_eq!(counts, vec![2, 2, 2]);
    }

    #[test]
    fn hashes_outside_the_cost_range_leave_their_user_out() {
        // Built by hand, past WebConfig::load's checks: the user cannot log in, and nothing
        // runs at cost 31.
        let mut users = users();
        users.insert(
            "eve".into(),
            "$2b$31$abcdefghijklmnopqrstuvABCDEFGHIJKLMNOPQRSTUVWXYZ01234".into(),
        );
        let auth = Auth::new(&users, 2, 4);
        assert_eq!(auth.dummies.keys().copied().collect::<Vec<_>>(), vec![4, 5]);
        assert!(!auth.users.contains_key("eve"));
    }

    #[test]
    fn item_11_a_client_that_has_not_failed_is_served_before_those_that_have() {
        let rt = runtime();
        // One worker; clients 2 and 3 have each failed a check; client 9 has not.
        let auth = Arc::new(Auth::new(&users(), 1, 4));
        let wrong = header("bob", "wrong");
        for c in 1..=3 {
            assert_eq!(
                rt.block_on(auth.check(peer(c), Some(&wrong))),
                Verdict::Fail
            );
        }
        let order = rt.block_on(async {
            // The worker is busy (held here); clients 2 and 3 wait in line, then client 9 comes.
            let busy = auth.workers.acquire(Line::Clean).await.unwrap();
            let done = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for (c, h) in [(2, &wrong), (3, &wrong), (9, &header("bob", "bob-pw"))] {
                let (auth, done, h) = (auth.clone(), done.clone(), h.clone());
                tasks.push(tokio::spawn(async move {
                    let v = auth.check(peer(c), Some(&h)).await;
                    done.lock().unwrap().push((c, v));
                }));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            drop(busy);
            for t in tasks {
                t.await.unwrap();
            }
            let done = done.lock().unwrap().clone();
            done
        });
        assert_eq!(
            order,
            vec![(9, Verdict::Pass), (2, Verdict::Fail), (3, Verdict::Fail)]
        );
        // And a pass clears a client's mark.
        assert!(!auth.suspect(peer(9)));
        assert!(auth.suspect(peer(2)));
        assert_eq!(
            rt.block_on(auth.check(peer(2), Some(&header("alice", "alice-pw")))),
            Verdict::Pass
        );
        assert!(!auth.suspect(peer(2)));
    }

    #[test]
    fn a_worker_handed_to_a_request_that_gave_up_is_handed_on() {
        let rt = runtime();
        let workers = Arc::new(Workers::new(1));
        rt.block_on(async {
            let held = workers.acquire(Line::Clean).await.unwrap();
            // A waiter that gives up before its turn, and one that gives up after the worker
            // was handed to it but before it ran.
            let gone = tokio::spawn({
                let w = workers.clone();
                async move { w.acquire(Line::Suspect).await.map(drop) }
            });
            tokio::time::sleep(Duration::from_millis(5)).await;
            gone.abort();
            let mut late = Box::pin({
                let w = workers.clone();
                async move { w.acquire(Line::Clean).await }
            });
            assert!(futures_poll_once(late.as_mut()).await.is_none());
            drop(held);
            drop(late);
            // The worker came back: a new request gets it at once.
            let again =
                tokio::time::timeout(Duration::from_secs(5), workers.acquire(Line::Suspect)).await;
            assert!(matches!(again, Ok(Some(_))));
        });
        let st = workers.state.lock().unwrap();
        assert_eq!((st.free, st.clean.len(), st.suspect.len()), (1, 0, 0));
    }

    /// Polls `f` once: its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[test]
    fn item_11_a_client_past_its_queue_is_refused_and_another_still_gets_a_turn() {
        let rt = runtime();
        // One worker, two checks waiting or running per client.
        let auth = Arc::new(Auth::new(&users(), 1, 2));
        let outcome = rt.block_on(async {
            // The worker is busy (held here), so the flood's checks wait.
            let busy = auth.workers.acquire(Line::Clean).await.unwrap();
            let wrong = header("bob", "wrong");
            let flood: Vec<_> = (0..2)
                .map(|_| {
                    let auth = auth.clone();
                    let wrong = wrong.clone();
                    tokio::spawn(async move { auth.check(peer(1), Some(&wrong)).await })
                })
                .collect();
            // Let both take their tickets.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let third = auth.check(peer(1), Some(&wrong)).await;
            let other = tokio::spawn({
                let auth = auth.clone();
                async move { auth.check(peer(2), Some(&header("bob", "bob-pw"))).await }
            });
            tokio::time::sleep(Duration::from_millis(5)).await;
            drop(busy);
            let other = other.await.unwrap();
            let mut flooded = Vec::new();
            for f in flood {
                flooded.push(f.await.unwrap());
            }
            (third, other, flooded)
        });
        assert_eq!(outcome.0, Verdict::Busy);
        assert_eq!(outcome.1, Verdict::Pass);
        assert_eq!(outcome.2, vec![Verdict::Fail, Verdict::Fail]);
        // Every ticket was given back.
        assert!(auth.clients.lock().unwrap().is_empty());
    }
}
