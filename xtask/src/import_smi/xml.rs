//! A small element tree read with quick-xml: enough of a DOM to walk `nvidia-smi -q -x` output.
//!
//! Mixed content is kept as one concatenated text per element; comments, processing
//! instructions and the DOCTYPE (inline DTD or not) are skipped. Nothing here panics on input:
//! malformed XML, text outside the root and absurd nesting are errors.

use quick_xml::events::Event;
use quick_xml::Reader;

/// Deeper nesting than this is refused (nvidia-smi XML is about 6 levels deep); it also keeps
/// the recursive drop of the tree well within the stack.
const MAX_DEPTH: usize = 64;

/// One element: its name, attributes, child elements in order, and its own text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    /// Tag name as written.
    pub name: String,
    /// Attributes in document order, values unescaped.
    pub attrs: Vec<(String, String)>,
    /// Child elements in document order.
    pub children: Vec<Element>,
    /// The element's own character data (CDATA and entity references resolved), untrimmed.
    pub text: String,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child named `name`.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The element at a path of child names (`["pci", "pci_bus_id"]`).
    pub fn at(&self, path: &[&str]) -> Option<&Element> {
        let mut e = self;
        for name in path {
            e = e.child(name)?;
        }
        Some(e)
    }

    /// The trimmed text of this element.
    pub fn value(&self) -> &str {
        self.text.trim()
    }

    /// The value of attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a document could not be read as an element tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XmlError {
    /// Not well-formed XML (with the line where the reader stopped).
    Malformed { line: usize, message: String },
    /// Well-formed so far, but the root element is not the one expected.
    WrongRoot { found: String },
    /// Text that is not markup where the root element should start (not an XML document).
    NotXml { line: usize, snippet: String },
    /// No root element at all.
    Empty,
}

impl std::fmt::Display for XmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XmlError::Malformed { line, message } => {
                write!(f, "not well-formed XML (line {line}): {message}")
            }
            XmlError::WrongRoot { found } => write!(f, "the root element is <{found}>"),
            XmlError::NotXml { line, snippet } => {
                write!(
                    f,
                    "not XML: text {snippet:?} outside any element (line {line})"
                )
            }
            XmlError::Empty => write!(f, "no XML element in the file"),
        }
    }
}

fn line_of(text: &str, pos: u64) -> usize {
    let end = usize::try_from(pos).unwrap_or(usize::MAX).min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn snippet(s: &str) -> String {
    let s = s.trim();
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// A parsed document: the root element and the DOCTYPE text, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The root element.
    pub root: Element,
    /// What the `<!DOCTYPE ...>` declaration held (inline DTD included), if there was one.
    pub doctype: Option<String>,
}

/// Parses `text` into its root element, which must be named `root`.
pub fn parse(text: &str, root: &str) -> Result<Document, XmlError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut done: Option<Element> = None;
    let mut doctype: Option<String> = None;
    loop {
        let pos = reader.buffer_position();
        let malformed = |message: String| XmlError::Malformed {
            line: line_of(text, pos),
            message,
        };
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => {
                if done.is_none() && stack.is_empty() {
                    // Before any element, a reader error means this is not XML at all.
                    let upto = usize::try_from(pos).unwrap_or(0);
                    let rest = text.get(upto..).unwrap_or("");
                    return Err(XmlError::NotXml {
                        line: line_of(text, pos),
                        snippet: snippet(rest),
                    });
                }
                return Err(malformed(e.to_string()));
            }
        };
        let (start, empty) = match event {
            Event::Start(s) => (s, false),
            Event::Empty(s) => (s, true),
            Event::End(_) => {
                let Some(element) = stack.pop() else {
                    return Err(malformed("an end tag without a start tag".into()));
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => done = Some(element),
                }
                continue;
            }
            Event::Text(t) => {
                let s = match t.decode() {
                    Ok(s) => s.into_owned(),
                    Err(_) => String::from_utf8_lossy(&t).into_owned(),
                };
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&s),
                    None if s.trim().is_empty() => {}
                    None if done.is_none() => {
                        return Err(XmlError::NotXml {
                            line: line_of(text, pos),
                            snippet: snippet(&s),
                        })
                    }
                    None => {
                        return Err(malformed(format!(
                            "text {:?} after the root element",
                            snippet(&s)
                        )))
                    }
                }
                continue;
            }
            Event::CData(c) => {
                let s = String::from_utf8_lossy(&c).into_owned();
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&s),
                    None => return Err(malformed("CDATA outside the root element".into())),
                }
                continue;
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c),
                    Ok(None) => entity(&name),
                    Err(_) => None,
                };
                let piece = match resolved {
                    Some(c) => c.to_string(),
                    None => format!("&{name};"),
                };
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&piece),
                    None if done.is_none() => {
                        return Err(XmlError::NotXml {
                            line: line_of(text, pos),
                            snippet: snippet(&piece),
                        })
                    }
                    None => return Err(malformed("a reference after the root element".into())),
                }
                continue;
            }
            Event::Eof => break,
            Event::DocType(d) => {
                if doctype.is_none() {
                    doctype = Some(String::from_utf8_lossy(&d).into_owned());
                }
                continue;
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) => continue,
        };
        let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
        if stack.is_empty() {
            if done.is_some() {
                return Err(malformed(format!(
                    "a second root element <{name}> after the first"
                )));
            }
            if name != root {
                return Err(XmlError::WrongRoot { found: name });
            }
        }
        if stack.len() >= MAX_DEPTH {
            return Err(malformed(format!(
                "elements nested more than {MAX_DEPTH} deep"
            )));
        }
        let mut attrs = Vec::new();
        for attr in start.attributes() {
            let attr = attr.map_err(|e| malformed(e.to_string()))?;
            let key = String::from_utf8_lossy(attr.key.as_ref()).into_owned();
            let value = match attr.unescape_value() {
                Ok(v) => v.into_owned(),
                Err(_) => String::from_utf8_lossy(&attr.value).into_owned(),
            };
            attrs.push((key, value));
        }
        let element = Element {
            name,
            attrs,
            children: Vec::new(),
            text: String::new(),
        };
        if !empty {
            stack.push(element);
            continue;
        }
        match stack.last_mut() {
            Some(parent) => parent.children.push(element),
            None => done = Some(element),
        }
    }
    if let Some(open) = stack.last() {
        return Err(XmlError::Malformed {
            line: line_of(text, text.len() as u64),
            message: format!("the file ends inside <{}>", open.name),
        });
    }
    let root = done.ok_or(XmlError::Empty)?;
    Ok(Document { root, doctype })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_elements_attributes_text_and_entities() {
        let doc = r#"<?xml version="1.0" ?>
<!DOCTYPE r [
<!ELEMENT r (a*)>
<!ATTLIST a id CDATA #REQUIRED>
]>
<!-- comment -->
<r><a id="x&amp;y">1 &lt; 2 &#65;<![CDATA[<b>]]></a><e/></r>"#;
        let d = parse(doc, "r").unwrap();
        assert!(d.doctype.unwrap().contains("ATTLIST"));
        let r = d.root;
        assert_eq!(r.children.len(), 2);
        let a = r.child("a").unwrap();
        assert_eq!(a.attr("id"), Some("x&y"));
        assert_eq!(a.value(), "1 < 2 A<b>");
        assert!(r.child("e").is_some());
    }

    #[test]
    fn refuses_what_is_not_the_expected_document() {
        assert!(matches!(
            parse("<x/>", "r"),
            Err(XmlError::WrongRoot { .. })
        ));
        assert!(matches!(parse("", "r"), Err(XmlError::Empty)));
        assert!(matches!(parse("hello", "r"), Err(XmlError::NotXml { .. })));
        assert!(matches!(
            parse("<r><a></r>", "r"),
            Err(XmlError::Malformed { .. })
        ));
        assert!(matches!(
            parse("<r><a>", "r"),
            Err(XmlError::Malformed { .. })
        ));
        assert!(matches!(
            parse("<r/><r/>", "r"),
            Err(XmlError::Malformed { .. })
        ));
        let deep = "<r>".to_string() + &"<a>".repeat(200) + &"</a>".repeat(200) + "</r>";
        assert!(matches!(parse(&deep, "r"), Err(XmlError::Malformed { .. })));
    }
}
