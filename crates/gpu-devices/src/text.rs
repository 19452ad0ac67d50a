//! Text from outside made safe for a terminal.
//!
//! Device names, process names and command lines, error text from a driver or a fixture: any of
//! them can hold control characters, and a terminal acts on some of them (`ESC ]0;…BEL` retitles
//! the window, `ESC [2J` clears the screen). Everything gpuscope writes for people passes such
//! text through [`escape_control`] first, so the bytes shown are inert.

use std::borrow::Cow;
use std::fmt;

/// True for the characters a terminal may act on: C0 controls (U+0000–U+001F), DEL (U+007F)
/// and C1 controls (U+0080–U+009F).
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every control character ([`is_control`]) written as a visible escape: `\x1b` for
/// C0 and DEL, `\u{9b}` for C1. Text with none comes back borrowed, unchanged.
///
/// ```
/// use gpu_devices::text::escape_control;
/// assert_eq!(escape_control("python3 train.py"), "python3 train.py");
/// assert_eq!(escape_control("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
/// assert_eq!(escape_control("line\nbreak\u{9b}"), "line\\x0abreak\\u{9b}");
/// ```
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char) {
    use fmt::Write as _;
    if !is_control(c) {
        out.push(c);
    } else if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// A `Display` of outside text with its control characters escaped, for use in `format!`:
/// `format!("{}", Escaped(&name))`.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_control(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_title_and_clear_screen_are_inert() {
        let hostile = "evil\u{1b}]0;TITLE\u{7}\u{1b}[2J";
        let shown = escape_control(hostile);
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}'));
        assert_eq!(shown, "evil\\x1b]0;TITLE\\x07\\x1b[2J");
    }

    #[test]
    fn plain_and_non_ascii_text_is_unchanged() {
        for s in ["", "NVIDIA H100 80GB HBM3", "日本語 ü —", "tab-free"] {
            assert!(matches!(escape_control(s), Cow::Borrowed(_)), "{s}");
        }
    }

    proptest! {
        #[test]
        fn no_control_character_survives(s in any::<String>()) {
            let shown = escape_control(&s);
            prop_assert!(!shown.chars().any(is_control));
            // Nothing but control characters changes.
            let kept: String = s.chars().filter(|c| !is_control(*c)).collect();
            let shown_plain: String = Escaped(&kept).to_string();
            prop_assert_eq!(shown_plain, kept);
        }
    }
}
