//! Control characters in outside text, made visible. Text from a driver, a fixture or a host's
//! processes can hold characters a terminal acts on; error messages built in this crate escape
//! them with [`escape_control`], and `gpu_devices::text` re-exports it for every crate above.

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for the characters a terminal may act on: C0 controls (U+0000–U+001F), DEL (U+007F)
/// and C1 controls (U+0080–U+009F).
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every control character ([`is_control`]) written as a visible escape: `\x1b` for
/// C0 and DEL, `\u{9b}` for C1. Text with none comes back borrowed, unchanged. Escaping is
/// idempotent: escaped text has no control character left to escape.
///
/// ```
/// use gpu_backend::text::escape_control;
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
        if !is_control(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}
