//! What a lock file records of the run holding it: host, process id, verb and since when.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    pub verb: String,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

impl Holder {
    /// This process, about to hold a lock for `verb`.
    pub fn this_process(verb: &str) -> Holder {
        Holder {
            host: host_name(),
            pid: std::process::id(),
            verb: verb.to_string(),
            since: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|elapsed| elapsed.as_secs())
                .unwrap_or(0),
        }
    }

    /// The file's text: one `key=value` per line.
    pub fn to_record(&self) -> String {
        format!(
            "host={}\npid={}\nverb={}\nsince={}\n",
            self.host, self.pid, self.verb, self.since
        )
    }

    /// Reads a record; `None` for anything incomplete (a file being written, or empty).
    pub fn from_record(text: &str) -> Option<Holder> {
        let value = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
        };
        Some(Holder {
            host: value("host")?,
            pid: value("pid")?.parse().ok()?,
            verb: value("verb")?,
            since: value("since")?.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "`trog {}` (process {} on {}, since {})",
            self.verb,
            self.pid,
            self.host,
            utc_timestamp(self.since)
        )
    }
}

/// This machine's name, as `uname -n` says it.
pub fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or fails.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "this machine".to_string();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch, as `date -u` prints it.
pub fn utc_timestamp(seconds: u64) -> String {
    crate::snapshot::utc(i64::try_from(seconds).unwrap_or(i64::MAX))
        .format("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}
