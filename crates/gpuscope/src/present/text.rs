//! Outside text (names, versions, command lines, error text, host names) for a terminal: its
//! control characters escaped, cut to a width, N/A when missing.

use gpu_devices::text::escape_control;

/// Outside text (names, versions, command lines, error text) for a terminal: control
/// characters escaped, and N/A when missing.
pub(crate) fn text(v: Option<&str>) -> String {
    v.map_or_else(|| "N/A".to_string(), |t| escape_control(t).into_owned())
}

/// `s` cut to at most `max` characters, ending in `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
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
