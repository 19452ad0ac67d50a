//! Writing to stdout, for every command: stdout that tolerates a closed pipe, and JSON
//! documents whose strings carry no raw C1 or bidirectional control.

use std::io::Write;

/// Writes to stdout; a closed pipe (`gpuscope snapshot | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// `value` as the JSON document a command prints, and a line feed: indented when `pretty`,
/// else on one line (JSON Lines). C1 and bidirectional controls and line separators in its
/// strings are written as `\uXXXX` ([`gpu_devices::text::SafeJson`]), so that the document is
/// as inert in a terminal as the text views and reads back the same.
///
/// # Errors
///
/// serde_json's, for a value that has no JSON form.
pub fn json<T: serde::Serialize + ?Sized>(value: &T, pretty: bool) -> anyhow::Result<String> {
    Ok(gpu_devices::text::SafeJson::to_string(value, pretty)? + "\n")
}
