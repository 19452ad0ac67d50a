//! Outside text made inert. Text from a driver, a fixture, a host's processes or a peer on the
//! network can hold characters a terminal acts on (controls), characters that reorder what is
//! shown around them (bidirectional controls) or that break a line where none was meant; error
//! messages built in this crate escape them with [`escape_control`], `gpu_devices::text`
//! re-exports it for every crate above, and [`SafeJson`] writes them as `\uXXXX` escapes in
//! the JSON documents gpuscope prints.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// True for the characters outside text must not bring raw to a terminal:
///
/// - C0 controls (U+0000–U+001F, line feed and carriage return among them), DEL (U+007F) and
///   C1 controls (U+0080–U+009F, NEL U+0085 and CSI U+009B among them): a terminal acts on
///   them;
/// - the bidirectional controls U+061C (Arabic letter mark), U+200E and U+200F (left-to-right
///   and right-to-left marks), U+202A–U+202E (embeddings and overrides) and U+2066–U+2069
///   (isolates): they reorder the text shown after them, so that `exe.txt` can read `txt.exe`;
/// - the line and paragraph separators U+2028 and U+2029: they break a line.
pub fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every character [`is_control`] names written as a visible escape: `\x1b` for
/// C0 and DEL, `\u{9b}` for the others (C1, bidirectional controls, line separators). Text
/// with none comes back borrowed, unchanged. Escaping is idempotent: escaped text has no such
/// character left to escape. It is not meant to be undone: a backslash in the text is kept as
/// it is, so `\x1b` typed out and an escaped ESC read the same.
///
/// ```
/// use gpu_backend::text::escape_control;
/// assert_eq!(escape_control("python3 train.py"), "python3 train.py");
/// assert_eq!(escape_control("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
/// assert_eq!(escape_control("line\nbreak\u{9b}"), "line\\x0abreak\\u{9b}");
/// assert_eq!(escape_control("invoice\u{202e}fdp.exe"), "invoice\\u{202e}fdp.exe");
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

/// A `serde_json` formatter that writes, besides what JSON itself requires escaped (serde_json
/// escapes the quote, the backslash and C0 controls), every character [`is_control`] names as
/// a `\uXXXX` escape: DEL, C1 controls, bidirectional controls and line separators. The
/// document stays valid JSON and every string reads back the same; only its bytes change, so
/// that `cat`ting it or reading it in a terminal cannot move the cursor, reorder text or
/// break a line. Wraps serde_json's compact or pretty formatter, whose layout it keeps.
///
/// ```
/// use gpu_backend::text::SafeJson;
/// let text = SafeJson::to_string(&"a\u{9b}2J\u{202e}b", false).unwrap();
/// assert_eq!(text, r#""a\u009b2J\u202eb""#);
/// let back: String = serde_json::from_str(&text).unwrap();
/// assert_eq!(back, "a\u{9b}2J\u{202e}b");
/// ```
#[derive(Debug, Clone)]
pub struct SafeJson<F>(pub F);

impl SafeJson<()> {
    /// `value` as JSON text, indented as `serde_json::to_string_pretty` does when `pretty`,
    /// else on one line as `serde_json::to_string`.
    ///
    /// # Errors
    ///
    /// serde_json's, for a value that cannot be written as JSON (a map with keys that are not
    /// strings).
    pub fn to_string<T: serde::Serialize + ?Sized>(
        value: &T,
        pretty: bool,
    ) -> serde_json::Result<String> {
        let mut out = Vec::with_capacity(128);
        SafeJson::to_writer(&mut out, value, pretty)?;
        // The formatter writes only UTF-8: serde_json's text and ASCII escapes.
        String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
    }

    /// Writes `value` as JSON to `writer`, as [`SafeJson::to_string`] lays it out.
    ///
    /// # Errors
    ///
    /// serde_json's, or the writer's.
    pub fn to_writer<W: io::Write, T: serde::Serialize + ?Sized>(
        writer: W,
        value: &T,
        pretty: bool,
    ) -> serde_json::Result<()> {
        if pretty {
            let formatter = SafeJson(serde_json::ser::PrettyFormatter::new());
            value.serialize(&mut serde_json::Serializer::with_formatter(
                writer, formatter,
            ))
        } else {
            let formatter = SafeJson(serde_json::ser::CompactFormatter);
            value.serialize(&mut serde_json::Serializer::with_formatter(
                writer, formatter,
            ))
        }
    }
}

/// The [`serde_json::ser::Formatter`] methods that [`SafeJson`] hands to the wrapped formatter
/// as they are: those given only the writer, then those also told whether the value is the
/// first of its array or object.
macro_rules! delegate {
    ($($plain:ident),*; first: $($with_first:ident),*) => {
        $(
            fn $plain<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
                self.0.$plain(writer)
            }
        )*
        $(
            fn $with_first<W: ?Sized + io::Write>(
                &mut self,
                writer: &mut W,
                first: bool,
            ) -> io::Result<()> {
                self.0.$with_first(writer, first)
            }
        )*
    };
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeJson<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_control(c) {
                self.0.write_string_fragment(writer, &fragment[start..i])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        self.0.write_string_fragment(writer, &fragment[start..])
    }

    // The layout is the wrapped formatter's: these are the calls serde_json's pretty formatter
    // answers differently from the compact one.
    delegate! {
        begin_array, end_array, end_array_value, begin_object, end_object, end_object_key,
        begin_object_value, end_object_value;
        first: begin_array_value, begin_object_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every character `is_control` names, one of each.
    fn named() -> Vec<char> {
        (0u32..=0x2100)
            .filter_map(char::from_u32)
            .filter(|&c| is_control(c))
            .collect()
    }

    #[test]
    fn bidi_controls_c1_and_line_breaks_are_escaped() {
        for c in [
            '\n', '\r', '\u{85}', '\u{9b}', '\u{2028}', '\u{2029}', '\u{202e}', '\u{2066}',
            '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}', '\u{202a}',
        ] {
            let text = format!("a{c}b");
            let shown = escape_control(&text);
            assert!(!shown.contains(c), "{c:?} survived: {shown:?}");
            assert!(
                shown.starts_with("a\\") && shown.ends_with('b'),
                "{shown:?}"
            );
        }
        assert_eq!(escape_control("x\u{2028}y"), "x\\u{2028}y");
    }

    #[test]
    fn joiners_and_other_format_characters_are_left_as_they_are() {
        // The zero-width joiner shapes emoji and Indic scripts; it reorders nothing.
        for s in ["👩\u{200d}💻", "नमस्ते", "שלום", "مرحبا", "a\u{a0}b"] {
            assert!(matches!(escape_control(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn json_of_every_named_character_is_ascii_escapes_and_reads_back() {
        let all: String = named().into_iter().collect();
        for pretty in [false, true] {
            let text =
                SafeJson::to_string(&serde_json::json!({ all.clone(): [all.clone()] }), pretty)
                    .unwrap();
            assert!(!text.chars().any(|c| is_control(c) && c != '\n'), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back[&all][0], all.as_str());
        }
    }

    #[test]
    fn json_layout_is_serde_jsons() {
        let v = serde_json::json!({"a": [1, {"b": null}], "c": "plain ü", "d": 1.5});
        assert_eq!(
            SafeJson::to_string(&v, false).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        assert_eq!(
            SafeJson::to_string(&v, true).unwrap(),
            serde_json::to_string_pretty(&v).unwrap()
        );
    }

    /// Strings that mix plain text with the characters that matter.
    fn hostile() -> impl Strategy<Value = String> {
        let special = proptest::sample::select(named());
        let piece = prop_oneof![any::<char>(), special, Just('\\'), Just('"')];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #[test]
        fn no_control_bidi_or_line_break_survives_escaping(s in prop_oneof![any::<String>(), hostile()]) {
            let shown = escape_control(&s);
            prop_assert!(!shown.chars().any(is_control), "{:?}", shown);
            // Escaping twice changes nothing more.
            let again = escape_control(&shown).into_owned();
            prop_assert_eq!(again.as_str(), shown.as_ref());
            // Text with nothing to escape comes back as it was.
            if !s.chars().any(is_control) {
                prop_assert!(matches!(escape_control(&s), Cow::Borrowed(_)));
            }
        }

        #[test]
        fn safe_json_has_no_raw_character_to_escape_and_round_trips(s in prop_oneof![any::<String>(), hostile()]) {
            for pretty in [false, true] {
                let value = serde_json::json!({ "k": s, s.clone(): [s] });
                let text = SafeJson::to_string(&value, pretty).unwrap();
                // Pretty JSON's own line breaks are its layout, outside every string.
                let raw = text.chars().filter(|&c| is_control(c) && c != '\n').count();
                prop_assert_eq!(raw, 0, "{}", text);
                prop_assert_eq!(pretty, text.contains('\n'));
                let back: serde_json::Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(&back, &value);
            }
        }
    }
}
