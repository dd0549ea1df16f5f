//! How much memory this process may use, to size the block cache by: its cgroup's limit
//! when it has one (a container), else the machine's memory. Linux only; elsewhere
//! unknown, and the cache keeps its floor.

/// The block cache takes this fraction of the memory the process may use: the other roles
/// of `shale serve` (metadata's database cache, the gateway's buffers) and the kernel's
/// page cache need the rest.
const CACHE_SHARE: u64 = 8;

/// The block cache's size where the memory is unknown or small.
pub const MIN_BLOCK_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// The block cache's default never passes this, however much memory there is. Until the
/// cache is full, every block it keeps is memory the process has not used before, which
/// the kernel maps and zeroes on first touch; a full cache reuses what it evicts. On 2
/// cores, 16 partitions caught up at 300-425 MiB/s while a 3 GiB cache filled and at
/// 595-615 with a full 1 GiB one. An operator whose readers share more history sets the
/// size.
pub const MAX_DEFAULT_BLOCK_CACHE_BYTES: u64 = 1024 * 1024 * 1024;

/// Cgroup v1 reports "no limit" as a number near `i64::MAX` rounded to pages.
const UNLIMITED_V1: u64 = 1 << 60;

/// The default block cache: an eighth of `memory`, at least [`MIN_BLOCK_CACHE_BYTES`]
/// and at most [`MAX_DEFAULT_BLOCK_CACHE_BYTES`].
pub(crate) fn block_cache_bytes(memory: Option<u64>) -> u64 {
    memory.map_or(MIN_BLOCK_CACHE_BYTES, |bytes| {
        (bytes / CACHE_SHARE).clamp(MIN_BLOCK_CACHE_BYTES, MAX_DEFAULT_BLOCK_CACHE_BYTES)
    })
}

/// The memory this process may use, read from `/proc` and `/sys/fs/cgroup`.
pub(crate) fn available() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let machine = read("/proc/meminfo").as_deref().and_then(machine_bytes);
    let cgroup = read("/proc/self/cgroup").as_deref().and_then(|groups| cgroup_limit(groups, read));
    match (machine, cgroup) {
        (Some(machine), Some(cgroup)) => Some(machine.min(cgroup)),
        (machine, cgroup) => machine.or(cgroup),
    }
}

/// `MemTotal` from `/proc/meminfo`, in bytes.
fn machine_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of the cgroup `/proc/self/cgroup` names (v2's `0::/path`, or v1's
/// `memory` controller), read through `read`; `None` when there is none.
fn cgroup_limit(self_cgroup: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    for line in self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let path = path.trim_end_matches('/');
        // A hybrid system lists both kinds: the first whose file exists answers.
        if controllers.is_empty() {
            if let Some(limit) = read(&format!("/sys/fs/cgroup{path}/memory.max")) {
                return limit.trim().parse().ok();
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            if let Some(limit) = read(&format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")) {
                return limit.trim().parse().ok().filter(|&limit: &u64| limit < UNLIMITED_V1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    #[test]
    fn the_cache_takes_an_eighth_of_the_memory_between_its_floor_and_its_ceiling() {
        assert_eq!(block_cache_bytes(Some(4 * GIB)), GIB / 2);
        assert_eq!(block_cache_bytes(Some(24 * GIB)), GIB, "a large machine stops at the ceiling");
        assert_eq!(block_cache_bytes(Some(GIB)), MIN_BLOCK_CACHE_BYTES, "a small container keeps the floor");
        assert_eq!(block_cache_bytes(None), MIN_BLOCK_CACHE_BYTES);
    }

    #[test]
    fn the_machine_total_comes_from_meminfo() {
        let meminfo = "MemFree:         1000 kB\nMemTotal:       24576000 kB\n";
        assert_eq!(machine_bytes(meminfo), Some(24_576_000 * 1024));
        assert_eq!(machine_bytes("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn a_cgroup_limit_is_read_from_the_group_the_process_is_in() {
        let files = |path: &str| match path {
            "/sys/fs/cgroup/app.slice/memory.max" => Some("2147483648\n".to_string()),
            "/sys/fs/cgroup/memory.max" => Some("max\n".to_string()),
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes" => Some("1073741824\n".to_string()),
            "/sys/fs/cgroup/memory/memory.limit_in_bytes" => Some("9223372036854771712\n".to_string()),
            _ => None,
        };
        assert_eq!(cgroup_limit("0::/app.slice\n", files), Some(2 * GIB), "v2 with a limit");
        assert_eq!(cgroup_limit("0::/\n", files), None, "v2 at the root: no limit");
        assert_eq!(cgroup_limit("4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n", files), Some(GIB), "v1");
        assert_eq!(cgroup_limit("3:memory:/\n", files), None, "v1 unlimited");
        assert_eq!(cgroup_limit("0::/gone\n", files), None, "unreadable");
        let hybrid = "4:memory:/docker/abc\n0::/gone\n";
        assert_eq!(cgroup_limit(hybrid, files), Some(GIB), "hybrid: the v1 limit, v2 not mounted");
        assert_eq!(cgroup_limit("0::/gone\n3:memory:/docker/abc\n", files), Some(GIB), "either order");
    }
}
