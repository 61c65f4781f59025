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

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch (the civil calendar, proleptic
/// Gregorian, as `date -u` prints it).
pub fn utc_timestamp(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let in_day = seconds % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}
