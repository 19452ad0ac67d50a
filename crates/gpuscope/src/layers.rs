//! The CLI's layers, checked as an ordinary test over the source text (docs/ARCHITECTURE.md,
//! "The CLI's layers"): each command (a module of `commands/`) imports the shared layers and
//! itself, never another command; no shared layer imports a command. `cli/`, which defines the
//! parser and dispatches to the commands, is the one place that names them.
//!
//! Rationale: what two commands share then has one home below both, where a third finds it,
//! and a command can change without reading every other.

use std::collections::BTreeSet;
use std::path::Path;

/// A file's module path below the crate's root (`commands/top/ui/mod.rs` is
/// `["commands", "top", "ui"]`).
type Module = Vec<String>;

/// One import that breaks the layering: the file, and the module path it names.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Breach {
    file: String,
    names: String,
}

/// The module path of `relative` (a path below `src/`, with `/` between its parts).
fn module_of(relative: &str) -> Module {
    let mut parts: Module = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts
}

/// `text` with comments, string and character literals blanked out (replaced by spaces), so
/// that a path in a comment or a message is not taken for an import.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let end = if b[i..].starts_with(b"//") {
            find(b, i, b"\n").unwrap_or(b.len())
        } else if b[i..].starts_with(b"/*") {
            find(b, i + 2, b"*/").map_or(b.len(), |n| n + 2)
        } else if b[i] == b'"' {
            string_end(b, i + 1, b"\"", true)
        } else if raw_string_at(b, i) {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            let close = [&b"\""[..], &b"#".repeat(hashes)].concat();
            string_end(b, i + 2 + hashes, &close, false)
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // An escape (`'\''`, `'\n'`, `'\u{1b}'`): the quote after the escaped character.
            find(b, i + 3, b"'").map_or(b.len(), |n| n + 1)
        } else if b[i] == b'\'' && b.get(i + 1 + utf8_len(b.get(i + 1))) == Some(&b'\'') {
            i + 2 + utf8_len(b.get(i + 1))
        } else {
            out.push(b[i]);
            i += 1;
            continue;
        };
        let end = end.min(b.len());
        out.extend(b[i..end].iter().map(|&c| if c == b'\n' { c } else { b' ' }));
        i = end;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where `pattern` starts in `b` at or after `from`.
fn find(b: &[u8], from: usize, pattern: &[u8]) -> Option<usize> {
    (from..b.len()).find(|&j| b[j..].starts_with(pattern))
}

/// The end of a string literal whose text starts at `from` and ends with `close`; a backslash
/// escapes the next byte when `escapes`.
fn string_end(b: &[u8], from: usize, close: &[u8], escapes: bool) -> usize {
    let mut j = from;
    while j < b.len() {
        if escapes && b[j] == b'\\' {
            j += 2;
        } else if b[j..].starts_with(close) {
            return j + close.len();
        } else {
            j += 1;
        }
    }
    b.len()
}

/// The length in bytes of the UTF-8 character that starts with `lead`.
fn utf8_len(lead: Option<&u8>) -> usize {
    match lead {
        Some(&c) if c >= 0xF0 => 4,
        Some(&c) if c >= 0xE0 => 3,
        Some(&c) if c >= 0xC0 => 2,
        _ => 1,
    }
}

/// Whether a raw string (`r"..."`, `r#"..."#`) starts at `i`: an `r` that ends no identifier,
/// then `#`s and a quote (a raw identifier, `r#type`, has no quote).
fn raw_string_at(b: &[u8], i: usize) -> bool {
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    b[i] == b'r' && (i == 0 || !is_ident(b[i - 1])) && b.get(i + 1 + hashes) == Some(&b'"')
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The module each `crate::` or `super::` path in `code` names, made absolute, for a file whose
/// module is `file` (inline modules, `mod tests { ... }`, move `super` down with them).
fn named_paths(file: &Module, code: &str) -> Vec<Module> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    // The inline modules open at this point: (name, the brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        if b[i] == b'{' {
            depth += 1;
        } else if b[i] == b'}' {
            if inline.last().is_some_and(|&(_, d)| d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if starts_word && b[i..].starts_with(b"mod ") {
            let skip = |j: usize| {
                j + b[j..]
                    .iter()
                    .take_while(|c| c.is_ascii_whitespace())
                    .count()
            };
            let at = skip(i + 4);
            let name: String = b[at..]
                .iter()
                .take_while(|&&c| is_ident(c))
                .map(|&c| char::from(c))
                .collect();
            if !name.is_empty() && b.get(skip(at + name.len())) == Some(&b'{') {
                inline.push((name, depth + 1));
            }
        } else if starts_word && (b[i..].starts_with(b"crate::") || b[i..].starts_with(b"super::"))
        {
            let mut here: Module = file.clone();
            here.extend(inline.iter().map(|(name, _)| name.clone()));
            let (base, end) = path_base(&here, code, i);
            found.extend(expand(base, code, end));
        }
        i += 1;
    }
    found
}

/// The module a path starting at `at` (`crate::` or `super::super::...`) starts from, and
/// where the rest of the path begins.
fn path_base(here: &Module, code: &str, at: usize) -> (Module, usize) {
    let b = code.as_bytes();
    if b[at..].starts_with(b"crate::") {
        return (Vec::new(), at + "crate::".len());
    }
    let mut base = here.clone();
    let mut i = at;
    while b[i..].starts_with(b"super::") {
        base.pop();
        i += "super::".len();
    }
    (base, i)
}

/// The paths of a use tree whose prefix is `base` and whose rest starts at `at`: `a::b`,
/// `a::{b, c::{d, e}}`, `a::*`.
fn expand(base: Module, code: &str, at: usize) -> Vec<Module> {
    let b = code.as_bytes();
    let mut path = base;
    let mut i = at;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b.get(i) == Some(&b'{') {
            // A group: each item at depth one is a use tree of its own.
            let mut items = Vec::new();
            let (mut depth, mut start, mut j) = (0usize, i + 1, i);
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push((start, j));
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        items.push((start, j));
                        start = j + 1;
                    }
                    _ => {}
                }
                j += 1;
            }
            let mut out = Vec::new();
            for (s, e) in items {
                let item = &code[s..e];
                if item.trim().is_empty() {
                    continue;
                }
                if item.trim_start().starts_with("self") {
                    out.push(path.clone());
                } else {
                    out.extend(expand(path.clone(), &code[..e], s));
                }
            }
            return out;
        }
        let segment: String = b[i..]
            .iter()
            .take_while(|&&c| is_ident(c))
            .map(|&c| char::from(c))
            .collect();
        if segment.is_empty() {
            return vec![path];
        }
        path.push(segment.clone());
        i += segment.len();
        if b[i..].starts_with(b"::") {
            i += 2;
        } else {
            return vec![path];
        }
    }
}

/// The breaches of the layering in one file (`relative` to `src/`), given the commands.
fn breaches(relative: &str, text: &str, commands: &BTreeSet<String>) -> Vec<Breach> {
    let file = module_of(relative);
    let own = match file.as_slice() {
        [first, command, ..] if first == "commands" => Some(command.clone()),
        _ => None,
    };
    let in_cli = file.first().is_some_and(|m| m == "cli");
    named_paths(&file, &code_only(text))
        .into_iter()
        .filter(|path| match path.as_slice() {
            [first, command, ..] if first == "commands" && commands.contains(command) => match &own
            {
                Some(own) => own != command,
                None => !in_cli,
            },
            // The list of commands itself, `commands/mod.rs`, is named by `cli/` alone.
            [first] if first == "commands" => !in_cli && own.is_none() && file != ["commands"],
            _ => false,
        })
        .map(|path| Breach {
            file: relative.to_string(),
            names: path.join("::"),
        })
        .collect()
}

/// Every `.rs` file below `dir`, as paths relative to `root` with `/` between parts.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let relative = path.strip_prefix(root).expect("below the root");
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
}

/// The commands: the modules of `commands/` (a file `x.rs` or a folder `x/`).
fn commands(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src.join("commands"))
        .expect("src/commands")
        .map(|e| e.expect("a directory entry").path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(name)
        })
        .filter(|name| name != "mod")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds() -> BTreeSet<String> {
        ["info", "snapshot", "top"].map(String::from).into()
    }

    fn check(file: &str, text: &str) -> Vec<String> {
        breaches(file, text, &cmds())
            .into_iter()
            .map(|b| b.names)
            .collect()
    }

    /// The check itself: what it must find, and what it must let through.
    #[test]
    fn a_command_naming_another_or_a_layer_naming_a_command_is_found() {
        // What issue 33 found: info borrowing top's local time and snapshot's views.
        assert_eq!(
            check(
                "commands/info.rs",
                "use crate::commands::top::local_datetime;"
            ),
            ["commands::top::local_datetime"]
        );
        assert_eq!(
            check(
                "commands/info.rs",
                "fn f() { let v = crate::commands::snapshot::table::render_text(x); }"
            ),
            ["commands::snapshot::table::render_text"]
        );
        assert_eq!(
            check(
                "commands/top/ui/panels/devices.rs",
                "use super::super::super::super::info::x;"
            ),
            ["commands::info::x"]
        );
        assert_eq!(
            check(
                "commands/top/mod.rs",
                "use crate::{present, commands::{top::app, info}};"
            ),
            ["commands::info"]
        );
        assert_eq!(
            check("present/json.rs", "use crate::commands::snapshot::Args;"),
            ["commands::snapshot::Args"]
        );
        assert_eq!(check("fleet/mod.rs", "use crate::commands;"), ["commands"]);
        // Allowed: a command's own modules, the shared layers, cli/'s dispatch, tests inside a
        // command's file, and paths in comments and strings.
        for (file, text) in [
            (
                "commands/top/ui/mod.rs",
                "use super::super::app::App; use super::theme::spans;",
            ),
            (
                "commands/top/mod.rs",
                "mod app; use crate::present::value::na; use self::app::App;",
            ),
            (
                "commands/info.rs",
                "#[cfg(test)]\nmod tests { use super::*; use super::Target; }",
            ),
            (
                "commands/info.rs",
                "// crate::commands::top::x\nlet s = \"crate::commands::top\";",
            ),
            ("cli/defs.rs", "use crate::commands::{info, snapshot, top};"),
            ("cli/mod.rs", "use crate::commands;"),
            (
                "present/json.rs",
                "use super::time::rfc3339_ms; use crate::error::UsageError;",
            ),
        ] {
            assert_eq!(check(file, text), Vec::<String>::new(), "{file}: {text}");
        }
    }

    /// No command imports another, and no shared layer imports a command.
    #[test]
    fn no_command_imports_another_and_no_layer_imports_a_command() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let commands = commands(&src);
        assert!(commands.len() >= 9, "{commands:?}");
        let mut files = Vec::new();
        rust_files(&src, &src, &mut files);
        let found: Vec<Breach> = files
            .iter()
            .flat_map(|f| {
                let text = std::fs::read_to_string(src.join(f)).expect("a source file");
                breaches(f, &text, &commands)
            })
            .collect();
        assert!(
            found.is_empty(),
            "imports across the CLI's layers (move what two commands share to a shared layer: \
             present/, fleet/, cli/args.rs, ...): {found:#?}"
        );
    }
}
