//! Text from outside made safe for a terminal.
//!
//! Device names, process names and command lines, error text from a driver or a fixture, host
//! names and labels from a peer on the network: any of them can hold control characters, and a
//! terminal acts on some of them (`ESC ]0;…BEL` retitles the window, `ESC [2J` clears the
//! screen, C1's CSI `U+009B` does what `ESC [` does); bidirectional controls (`U+202E`) reorder
//! what follows them and line separators break a line. Everything gpuscope writes for people
//! passes such text through [`escape_control`] first, so the bytes shown are inert and one
//! value stays on one line; the JSON documents it prints are written with [`SafeJson`], which
//! writes the same characters as `\uXXXX` escapes.

use std::fmt;

// The escaping itself lives in the bottom crate, whose own error messages (a fixture's) need it
// too; this is where the crates above find it.
pub use gpu_backend::text::{escape_control, is_control, SafeJson};

/// A `Display` of outside text with the characters [`is_control`] names escaped, for use in `format!`:
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
    use std::borrow::Cow;

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
