//! The texts of `/proc` (and `/etc/passwd`) that [`super::LiveHost`] reads, parsed: private to
//! the host module, each bounded by its types and tested with any bytes.

/// The fields of a `/proc/<pid>/stat` line that host facts use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The executable name as the kernel keeps it (at most 15 bytes; any bytes, spaces and
    /// parentheses included).
    pub(crate) comm: String,
    /// The state letter (`R`, `S`, `D`, `Z`, ...).
    pub(crate) state: char,
    /// Parent PID; 0 for a process with no parent in this namespace.
    pub(crate) ppid: u32,
    /// CPU time in user mode, clock ticks.
    pub(crate) utime: u64,
    /// CPU time in kernel mode, clock ticks.
    pub(crate) stime: u64,
    /// Start time, clock ticks after boot.
    pub(crate) start_ticks: u64,
    /// Resident set, pages.
    pub(crate) rss_pages: u64,
}

/// Parses a `/proc/<pid>/stat` text. The name (`comm`) may hold spaces and parentheses, so it
/// runs from the first `(` to the *last* `)`; the numbers after it are parsed within their
/// types' bounds. `None` for a text that is not such a line.
pub(crate) fn parse_proc_stat(text: &[u8]) -> Option<ProcStat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let comm = String::from_utf8_lossy(&text[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // Fields after the name, counted from 0: 0 state, 1 ppid, 11 utime, 12 stime,
    // 19 starttime, 21 rss (proc(5) numbers them 3, 4, 14, 15, 22 and 24).
    let mut state_chars = fields.next()?.chars();
    let state = state_chars.next()?;
    if state_chars.next().is_some() {
        return None;
    }
    let ppid = fields.next()?.parse().ok()?;
    let mut nth = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let utime = nth(9)?;
    let stime = nth(0)?;
    let start_ticks = nth(6)?;
    // rss is signed in the kernel's format; a negative count is not a size.
    let rss_pages = nth(1)?;
    Some(ProcStat {
        comm,
        state,
        ppid,
        utime,
        stime,
        start_ticks,
        rss_pages,
    })
}

/// A state letter of `/proc/<pid>/stat` as psutil (and so nvitop and the fixtures) names it.
pub(crate) fn state_name(state: char) -> Option<&'static str> {
    Some(match state {
        'R' => "running",
        'S' => "sleeping",
        'D' => "disk-sleep",
        'T' => "stopped",
        't' => "tracing-stop",
        'Z' => "zombie",
        'X' | 'x' => "dead",
        'K' => "wake-kill",
        'W' => "waking",
        'I' => "idle",
        'P' => "parked",
        _ => return None,
    })
}

/// What host facts use of a `/proc/<pid>/status` text: the one parser of that file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProcStatus {
    /// The real user id: the first number of the `Uid:` line.
    pub(crate) uid: Option<u32>,
    /// The `NSpid:` line (Linux 4.1 and later): the process's PID in each PID namespace it
    /// belongs to, outermost first; empty when the line is absent or not all numbers.
    pub(crate) nspids: Vec<u32>,
}

impl ProcStatus {
    /// Reads a `/proc/<pid>/status` text; a line that is absent or unreadable leaves its field
    /// unknown.
    pub(crate) fn parse(status: &str) -> ProcStatus {
        let line = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
        let uid = line("Uid:")
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse().ok());
        let nspids = line("NSpid:")
            .and_then(|l| {
                l.split_whitespace()
                    .map(|p| p.parse().ok())
                    .collect::<Option<Vec<u32>>>()
            })
            .unwrap_or_default();
        ProcStatus { uid, nspids }
    }

    /// The PID in the innermost PID namespace the process belongs to (its PID inside its
    /// container).
    pub(crate) fn namespace_pid(&self) -> Option<u32> {
        self.nspids.last().copied()
    }

    /// How many PID namespaces deep the process is: 1 on the host.
    pub(crate) fn namespace_depth(&self) -> Option<usize> {
        Some(self.nspids.len()).filter(|&n| n > 0)
    }
}

/// Values in kB of a `/proc/meminfo` text, by key (`MemTotal`, `MemAvailable`, ...), in bytes.
pub(crate) fn parse_meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let rest = meminfo
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))?;
    let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The three load averages of a `/proc/loadavg` text.
pub(crate) fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    let load = [it.next()??, it.next()??, it.next()??];
    load.iter()
        .all(|v| v.is_finite() && *v >= 0.0)
        .then_some(load)
}

/// The busy and total clock ticks of all CPUs, from the `cpu ` line of a `/proc/stat` text
/// (busy: everything but idle and iowait).
pub(crate) fn parse_stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    if values.len() < 4 {
        return None;
    }
    let total = values.iter().try_fold(0u64, |a, v| a.checked_add(*v))?;
    let idle = values[3].checked_add(values.get(4).copied().unwrap_or(0))?;
    Some((total.checked_sub(idle)?, total))
}

/// The boot time (`btime`, seconds since the Unix epoch) of a `/proc/stat` text.
pub(crate) fn parse_boot_time(stat: &str) -> Option<u64> {
    let line = stat.lines().find_map(|l| l.strip_prefix("btime"))?;
    line.trim().parse().ok()
}

/// The arguments of a `/proc/<pid>/cmdline` text: NUL-separated, the last one NUL-terminated.
pub(crate) fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// User names by uid from an `/etc/passwd` text (`name:password:uid:...`); lines that are not
/// such entries are skipped, and of two entries for one uid the first counts (as getpwuid).
pub(crate) fn parse_passwd(text: &str) -> std::collections::HashMap<u32, String> {
    let mut users = std::collections::HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if name.is_empty() || name.starts_with(['#', '+', '-']) {
            continue;
        }
        if let Ok(uid) = uid.parse::<u32>() {
            users.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    users
}

/// The executable name: the kernel's `comm`, or, when that was cut at 15 bytes, the file name
/// of the first argument that it begins (as psutil does).
pub(crate) fn process_name(comm: &str, cmdline: &[String]) -> Option<String> {
    if comm.len() >= 15 {
        if let Some(first) = cmdline.first() {
            let base = first.rsplit('/').next().unwrap_or(first);
            if base.starts_with(comm) {
                return Some(base.to_string());
            }
        }
    }
    Some(comm.to_string()).filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_namespace_pid_is_the_last_on_the_nspid_line() {
        let nspid = |text: &str| ProcStatus::parse(text).namespace_pid();
        assert_eq!(
            nspid("Name:\tpython\nNSpid:\t48213\t7\nNSpgid:\t1\n"),
            Some(7)
        );
        assert_eq!(nspid("NSpid:\t1234\n"), Some(1234));
        assert_eq!(nspid("Name:\tx\n"), None);
        assert_eq!(nspid("NSpid:\tgarbage\n"), None);
        assert_eq!(nspid("NSpid:\n"), None);
    }

    /// Moved from gpuscope doctor's own `NSpid` parser, which this one replaced.
    #[test]
    fn nspid_counts_the_namespaces() {
        let depth = |text: &str| ProcStatus::parse(text).namespace_depth();
        assert_eq!(depth("Name:\tx\nNSpid:\t4242\n"), Some(1));
        assert_eq!(depth("NSpid:\t4242\t7\n"), Some(2));
        assert_eq!(depth("Name:\tx\n"), None);
    }

    #[test]
    fn a_stat_line_with_spaces_and_parens_in_the_name_is_split_at_the_last_paren() {
        let line = b"4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 150 0 0 0 \
            31 7 0 0 20 0 1 0 123456 10000000 321 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0\n";
        let stat = parse_proc_stat(line).expect("parses");
        assert_eq!(
            stat,
            ProcStat {
                comm: "my (odd) name".into(),
                state: 'S',
                ppid: 17,
                utime: 31,
                stime: 7,
                start_ticks: 123_456,
                rss_pages: 321,
            }
        );
        assert_eq!(parse_proc_stat(b"4242 (x) S"), None);
        assert_eq!(parse_proc_stat(b""), None);
        // A negative resident count is not a size.
        assert_eq!(
            parse_proc_stat(b"1 (x) R 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 1 0 5 0 -3"),
            None
        );
        assert_eq!(state_name('D'), Some("disk-sleep"));
        assert_eq!(state_name('?'), None);
    }

    proptest::proptest! {
        /// Whatever the name (any bytes but NUL, parentheses and spaces included) and numbers,
        /// the fields read back are the ones written.
        #[test]
        fn any_stat_line_reads_back(
            comm in proptest::collection::vec(1u8..=255, 0..32),
            state in proptest::sample::select(vec!['R', 'S', 'D', 'Z', 'T', 'I']),
            ppid: u32,
            utime: u64,
            stime: u64,
            start: u64,
            rss: u64,
        ) {
            let mut line = b"77 (".to_vec();
            line.extend_from_slice(&comm);
            line.extend_from_slice(format!(
                ") {state} {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 999 {rss} 5 6\n"
            ).as_bytes());
            let stat = parse_proc_stat(&line).expect("parses");
            proptest::prop_assert_eq!(stat.comm, String::from_utf8_lossy(&comm).into_owned());
            proptest::prop_assert_eq!(
                (stat.state, stat.ppid, stat.utime, stat.stime, stat.start_ticks, stat.rss_pages),
                (state, ppid, utime, stime, start, rss)
            );
        }

        /// Any bytes at all: an answer or `None`, never a panic.
        #[test]
        fn any_bytes_never_panic_the_stat_parser(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse_proc_stat(&bytes);
        }
    }

    #[test]
    fn host_wide_texts_parse() {
        let meminfo = "MemTotal:       16303412 kB\nMemFree:  1 kB\nMemAvailable:   8000000 kB\nSwapTotal: 0 kB\n";
        assert_eq!(
            parse_meminfo_bytes(meminfo, "MemTotal"),
            Some(16_303_412 * 1024)
        );
        assert_eq!(parse_meminfo_bytes(meminfo, "Mem"), None);
        assert_eq!(parse_meminfo_bytes(meminfo, "SwapFree"), None);
        assert_eq!(
            parse_loadavg("0.50 1.25 2.00 1/234 5678\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(parse_loadavg("0.50 nan 2.00"), None);
        assert_eq!(
            parse_stat_cpu_ticks("cpu  10 0 5 100 5 0 0 0 0 0\ncpu0 1 1 1 1\nbtime 1700000000\n"),
            Some((15, 120))
        );
        assert_eq!(
            parse_boot_time("cpu 1 2 3 4\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_cmdline(b"python3\0-c\0\0"), vec!["python3", "-c", ""]);
        assert!(parse_cmdline(b"").is_empty());
        assert_eq!(
            ProcStatus::parse("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n").uid,
            Some(1000)
        );
        assert_eq!(
            process_name("python3.11-confi", &["/usr/bin/python3.11-config-x".into()]).as_deref(),
            Some("python3.11-config-x")
        );
        assert_eq!(process_name("", &[]), None);
        let passwd = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\n# comment\nbad line\n+nis\n\
             nobody:x:65534:65534::/:/usr/sbin/nologin\nshadow:x:0:0::/:/bin/sh\n",
        );
        assert_eq!(passwd.len(), 2);
        assert_eq!(passwd[&0], "root", "the first entry of a uid counts");
        assert_eq!(passwd[&65534], "nobody");
    }

    proptest::proptest! {
        /// Any text: the status fields or unknown ones, never a panic (it was doctor's check of
        /// its own `NSpid` parser).
        #[test]
        fn any_status_text_never_panics(text in ".{0,400}") {
            let _ = ProcStatus::parse(&text);
        }
    }
}
