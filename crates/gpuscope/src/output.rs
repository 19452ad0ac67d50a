//! Writing to the terminal, for every command: stdout that tolerates a closed pipe, and outside
//! text of several lines with its control characters escaped.

use std::io::Write;

/// Writes to stdout; a closed pipe (`gpuscope snapshot | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// `text` with every control character escaped ([`gpu_devices::text::escape_control`]) except
/// its line breaks, for text of several lines that holds outside text: error messages, the
/// explanation of `select`.
pub fn escape_lines(text: &str) -> String {
    text.split('\n')
        .map(gpu_devices::text::escape_control)
        .collect::<Vec<_>>()
        .join("\n")
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
