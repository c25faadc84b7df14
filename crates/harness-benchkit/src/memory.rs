//! Memory figures of a live process, from /proc/PID/status.

use crate::BenchError;

/// Memory figures of a process, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: the resident set now.
    pub rss: u64,
    /// `VmHWM`: the peak resident set size.
    pub peak: u64,
    /// `RssAnon`: heap, stack and other anonymous pages.
    pub anon: u64,
    /// `RssFile`: pages of the executable, the shared libraries and other mapped files.
    pub file: u64,
}

impl Memory {
    /// Reads the figures of process `pid`.
    pub fn of(pid: u32) -> Result<Self, BenchError> {
        let path = format!("/proc/{pid}/status");
        let status = std::fs::read_to_string(&path).map_err(BenchError::io("read", &path))?;
        Self::parse(&status)
            .ok_or_else(|| BenchError::Unexpected(format!("{path} lacks a memory line")))
    }

    fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| -> Option<u64> {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        };
        Some(Self {
            rss: field("VmRSS")?,
            peak: field("VmHWM")?,
            anon: field("RssAnon")?,
            file: field("RssFile")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read() {
        let status = "Name:\tx\nVmHWM:\t    2316 kB\nVmRSS:\t    2200 kB\nRssAnon:\t     132 kB\n\
                      RssFile:\t    2068 kB\n";
        assert_eq!(
            Memory::parse(status),
            Some(Memory { rss: 2200, peak: 2316, anon: 132, file: 2068 })
        );
        assert_eq!(Memory::parse("VmRSS:\t1 kB\n"), None);
        let own = Memory::of(std::process::id()).unwrap();
        assert!(own.peak >= own.rss && own.rss > 0, "{own:?}");
    }
}
