//! Writing to the terminal, for every command: stdout that tolerates a closed pipe, outside
//! text of several lines with its control characters escaped, and JSON documents whose strings
//! carry no raw C1 or bidirectional control.

use std::io::Write;

/// Writes to stdout; a closed pipe (`gpuscope snapshot | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// `text` with every character [`gpu_devices::text::escape_control`] escapes escaped except
/// its line feeds, for text of several lines that holds outside text: error messages, the
/// explanation of `select`. It cannot tell a line break of the text's own from one inside a
/// host name: outside text is escaped where it is put into such text (line breaks included),
/// and this is the net under that.
pub fn escape_lines(text: &str) -> String {
    text.split('\n')
        .map(gpu_devices::text::escape_control)
        .collect::<Vec<_>>()
        .join("\n")
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

#[cfg(test)]
mod tests {
    use super::escape_lines;

    #[test]
    fn escape_lines_keeps_line_breaks_and_escapes_the_rest() {
        assert_eq!(
            escape_lines("fixture x.json:\n  bad \u{1b}]0;T\u{7}\r"),
            "fixture x.json:\n  bad \\x1b]0;T\\x07\\x0d"
        );
    }
}
