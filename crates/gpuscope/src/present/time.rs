//! Times and dates for people and documents: RFC 3339 in UTC for the JSON and the tables, the
//! local time of day and date for the viewer's clock and a process's start.

/// `2026-11-22T14:24:58.123Z`. A time past what RFC 3339 can write (year 9999) is written as
/// the last instant it can, rather than failing: the value comes from a clock or a fixture.
pub(crate) fn rfc3339_ms(unix_ms: u64) -> String {
    const MAX_MS: u64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms.min(MAX_MS));
    humantime::format_rfc3339_millis(t).to_string()
}

/// [`rfc3339_ms`]'s text for people: `2026-11-01 10:00:03 UTC` (seconds only).
pub(crate) fn human_utc(rfc3339: &str) -> String {
    let seconds = rfc3339.split('.').next().unwrap_or(rfc3339);
    format!(
        "{} UTC",
        seconds.trim_end_matches('Z').replacen('T', " ", 1)
    )
}

/// Microseconds since the Unix epoch as RFC 3339 UTC with microseconds. The value comes from a
/// backend or a fixture, where it is bounded (the year 10000); any larger one is shown as it is.
pub fn event_time(timestamp_us: u64) -> String {
    std::time::UNIX_EPOCH
        .checked_add(std::time::Duration::from_micros(timestamp_us))
        .filter(|_| timestamp_us <= gpu_backend::fixture::limits::MAX_TIMESTAMP_US)
        .map_or_else(
            || format!("{timestamp_us} us after the Unix epoch"),
            |t| humantime::format_rfc3339_micros(t).to_string(),
        )
}

/// `secs` (Unix time) as a time of day in the local time zone (`TZ`, else /etc/localtime):
/// `HH:MM:SS ZONE`; `None` when the C library cannot convert it.
pub(crate) fn local_clock(secs: u64) -> Option<String> {
    let (tm, zone) = local_tm(secs)?;
    Some(format!(
        "{:02}:{:02}:{:02}{zone}",
        tm.tm_hour, tm.tm_min, tm.tm_sec
    ))
}

/// `secs` (Unix time) as a date and time in the local time zone, as igpu prints a process's
/// creation time: `2020-04-17 03:41:27`; `None` where the C library cannot tell.
pub(crate) fn local_datetime(secs: u64) -> Option<String> {
    let (tm, _) = local_tm(secs)?;
    Some(format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// `secs` (Unix time) in the local time zone as the C locale's date and time (`%c`, which
/// gpustat's header uses): `Fri Nov 27 19:50:35 2026`, the day padded with a space; `None`
/// where the C library cannot tell.
pub(crate) fn local_c_datetime(secs: u64) -> Option<String> {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (tm, _) = local_tm(secs)?;
    Some(format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS.get(usize::try_from(tm.tm_wday).ok()?)?,
        MONTHS.get(usize::try_from(tm.tm_mon).ok()?)?,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        i64::from(tm.tm_year) + 1900
    ))
}

/// The broken-down local time of `secs`, and the zone's name (` IST`, or empty).
fn local_tm(secs: u64) -> Option<(libc::tm, String)> {
    let t = libc::time_t::try_from(secs).ok()?;
    // SAFETY: a zeroed tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `t` and writes `tm`, both valid for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return None;
    }
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: glibc's tm_zone points at a NUL-terminated name that lives as long as the
        // time-zone data (the process).
        let name = unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) };
        format!(
            " {}",
            gpu_devices::text::escape_control(&name.to_string_lossy())
        )
    };
    Some((tm, zone))
}
