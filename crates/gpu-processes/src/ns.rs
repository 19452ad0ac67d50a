//! The PID of a process inside its own PID namespace, as the kernel tells it.

/// The PID of `pid` in the innermost PID namespace it belongs to, from the `NSpid:` line of
/// `/proc/<pid>/status` (Linux 4.1 and later). `None` where the kernel does not tell or the
/// process cannot be read.
pub fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_nspid(&status)
}

/// The last PID of the `NSpid:` line of a `/proc/<pid>/status` text.
pub fn parse_nspid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_namespace_pid_is_the_last_on_the_line() {
        assert_eq!(
            parse_nspid("Name:\tpython\nNSpid:\t48213\t7\nNSpgid:\t1\n"),
            Some(7)
        );
        assert_eq!(parse_nspid("NSpid:\t1234\n"), Some(1234));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\tgarbage\n"), None);
        assert_eq!(parse_nspid("NSpid:\n"), None);
    }

    #[test]
    fn our_own_pid_is_readable() {
        let me = std::process::id();
        // Outside a container our innermost PID is our PID; inside one it is the container's.
        assert!(innermost_pid(me).is_some());
        assert_eq!(innermost_pid(u32::MAX - 3), None);
    }
}
