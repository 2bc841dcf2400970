//! How much memory the host can still give this process, where the operating system says:
//! what the CPU executor checks a KV cache against before allocating it.

/// Bytes available now: Linux's `MemAvailable` (`/proc/meminfo`), bounded by the room left
/// under this process's cgroup v2 limit (`memory.max - memory.current`, what a container
/// is killed past). `None` where neither is known (other systems): the allocation then
/// reports a refusal itself (`try_reserve`), though an overcommitting system may accept
/// more than it can back.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let host = meminfo.as_deref().and_then(mem_available);
    match (host, cgroup_room()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Room under the cgroup v2 memory limit of this process, if it has one.
fn cgroup_room() -> Option<u64> {
    // `0::/path` is the unified (v2) hierarchy's line.
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    // "max" (no limit) does not parse: no bound.
    let max: u64 = read("memory.max")?.trim().parse().ok()?;
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_mem_available() {
        let text = "MemTotal:       24000000 kB\nMemFree:         7000000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(super::mem_available(text), Some(22_000_000 * 1024));
        assert_eq!(super::mem_available("MemTotal: 1 kB\n"), None);
    }

    /// On Linux the figure exists and is plausible: more than nothing, less than 2^60.
    #[cfg(target_os = "linux")]
    #[test]
    fn linux_says_what_is_available() {
        let bytes = super::available().expect("/proc/meminfo");
        assert!(bytes > 0 && bytes < 1 << 60, "{bytes}");
    }
}
