//! The structure of the crates, read from their source text (no build), as ordinary tests:
//!
//! * no two files of a crate import each other, directly or through others, in a circle (a
//!   module and its own descendants do not count: a parent declares its children);
//! * no command of the CLI crate (a module of its `commands/`) imports another command, and no
//!   shared layer of it imports a command: only `cli/`, which defines the parser and dispatches,
//!   names them;
//! * no function in `crates/` is longer than [`LONGEST_FUNCTION`] lines (test code aside).
//!
//! What the CLI crate does today that breaks a rule is listed in an allow-list, which the CLI's
//! restructuring empties: an entry that no longer breaks its rule fails the test until it is
//! taken off, so the lists only shrink.
//!
//! An import is a path through `crate::` or `super::` (a `use`, a path in code, or each name
//! of a `use crate::a::{b, c}` group) that names another file's module; comments and doc links
//! are not imports. A function runs from its `fn` line to the `}` at the same indentation.

#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use regex::Regex;

use super::rust_files;

/// The longest a function may be, in lines from its `fn` line to its closing `}`.
pub const LONGEST_FUNCTION: usize = 150;

/// Where the CLI crate's commands are, below its `src/`: one module each.
pub const COMMANDS_DIR: &str = "commands";

/// The CLI crate's module that defines the parser and dispatches to the commands: the one
/// outside `commands/` that may name them.
pub const DISPATCH: &str = "cli";

/// A module of a crate, as the path of names below the crate root (`["top", "ui"]`); the
/// crate root (`lib.rs`, `main.rs`) is the empty path.
pub type ModPath = Vec<String>;

/// One crate's source files, each by its module path, test modules taken out.
#[derive(Debug, Default)]
pub struct CrateSource {
    /// The files' code, by module.
    pub modules: BTreeMap<ModPath, String>,
    /// The files, by module, for messages.
    pub files: BTreeMap<ModPath, PathBuf>,
}

impl CrateSource {
    /// Reads every `.rs` file under `src`.
    pub fn read(src: &Path) -> CrateSource {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let mut out = CrateSource::default();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(rel) = path.strip_prefix(src) else {
                continue;
            };
            let m = mod_path(rel);
            out.modules.insert(m.clone(), strip_tests(&text));
            out.files.insert(m, path);
        }
        out
    }

    /// A crate made of these modules' texts (for the checker's own tests).
    pub fn from_texts(texts: &[(&str, &str)]) -> CrateSource {
        let mut out = CrateSource::default();
        for (path, text) in texts {
            let m = mod_path(Path::new(path));
            out.modules.insert(m.clone(), strip_tests(text));
            out.files.insert(m, PathBuf::from(path));
        }
        out
    }

    /// Which modules each module imports (other than itself).
    pub fn imports(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let patterns = Patterns::new();
        self.modules
            .iter()
            .map(|(m, text)| (m.clone(), self.imports_of(m, text, &patterns)))
            .collect()
    }

    /// The groups of modules that import each other in a circle, each sorted, as `a/b` names
    /// joined by `, ` (`lib` for the root).
    pub fn circles(&self) -> BTreeSet<String> {
        let imports = self.imports();
        // Only imports between modules of which neither contains the other.
        let graph: BTreeMap<ModPath, Vec<ModPath>> = imports
            .into_iter()
            .map(|(m, targets)| {
                let unrelated = targets.into_iter().filter(|t| !related(&m, t)).collect();
                (m, unrelated)
            })
            .collect();
        strongly_connected(&graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|mut c| {
                c.sort();
                c.iter().map(name).collect::<Vec<_>>().join(", ")
            })
            .collect()
    }

    /// The CLI's commands: the modules of [`COMMANDS_DIR`] (`commands/top/ui` is `top`'s).
    pub fn commands(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .modules
            .keys()
            .filter(|m| m.len() >= 2 && m[0] == COMMANDS_DIR)
            .map(|m| m[1].clone())
            .collect();
        out.dedup();
        out
    }

    /// The imports of a command from a shared layer (neither a command nor [`DISPATCH`]):
    /// `present/json -> commands/snapshot`.
    pub fn layer_imports_of_commands(&self) -> BTreeSet<String> {
        let is_command = |m: &ModPath| m.first().is_some_and(|f| f == COMMANDS_DIR);
        let may_name = |m: &ModPath| is_command(m) || m.first().is_some_and(|f| f == DISPATCH);
        let mut out = BTreeSet::new();
        for (m, targets) in self.imports() {
            for t in targets.iter().filter(|t| is_command(t) && !may_name(&m)) {
                out.insert(format!("{} -> {}", name(&m), name(t)));
            }
        }
        out
    }

    /// The imports from one command module (or its descendants) to another: `info -> top`.
    pub fn cross_command_imports(&self, commands: &[&str]) -> BTreeSet<String> {
        let command_of = |m: &ModPath| m.iter().find(|p| commands.contains(&p.as_str())).cloned();
        let mut out = BTreeSet::new();
        for (m, targets) in self.imports() {
            for t in targets {
                if let (Some(a), Some(b)) = (command_of(&m), command_of(&t)) {
                    if a != b {
                        out.insert(format!("{} -> {}", name(&m), name(&t)));
                    }
                }
            }
        }
        out
    }

    /// The functions longer than `limit` lines: (file, function, lines).
    pub fn long_functions(&self, limit: usize) -> Vec<(PathBuf, String, usize)> {
        let fn_line = Regex::new(
            r#"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)"#,
        )
        .expect("a valid pattern");
        let mut out = Vec::new();
        for (m, text) in &self.modules {
            let lines: Vec<&str> = text.split('\n').collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(c) = fn_line.captures(line) else {
                    continue;
                };
                if line.trim_end().ends_with(';') {
                    continue;
                }
                let close = format!("{}}}", &c[1]);
                let Some(end) = (i..lines.len()).find(|&j| lines[j] == close) else {
                    continue;
                };
                let len = end - i + 1;
                if len > limit {
                    out.push((self.files[m].clone(), c[8].to_string(), len));
                }
            }
        }
        out
    }

    /// The modules `m` imports, from its code without comments.
    fn imports_of(&self, m: &ModPath, text: &str, p: &Patterns) -> BTreeSet<ModPath> {
        let code = p.comment.replace_all(text, "");
        let mut out = BTreeSet::new();
        let mut add = |parts: Vec<String>| {
            if let Some(t) = self.resolve(&parts) {
                if t != *m {
                    out.insert(t);
                }
            }
        };
        for c in p.crate_path.captures_iter(&code) {
            add(split_path(&c[1]));
        }
        for c in p.group.captures_iter(&code) {
            let Some(whole) = c.get(0) else { continue };
            let base = match &c[1] {
                "crate" => Vec::new(),
                supers => parent(m, supers.matches("super").count()),
            };
            let prefix = split_path(&c[2]);
            let open = whole.end() - 1;
            for item in top_level_items(&code[open..]) {
                let first: String = item
                    .trim_start()
                    .chars()
                    .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
                    .collect();
                if first.is_empty() {
                    continue;
                }
                let mut parts = [base.clone(), prefix.clone()].concat();
                if first != "self" {
                    parts.push(first);
                }
                add(parts);
            }
        }
        for c in p.super_path.captures_iter(&code) {
            let up = c[1].matches("super::").count();
            add([parent(m, up), split_path(&c[2])].concat());
        }
        out
    }

    /// The longest module path that `parts` starts with.
    fn resolve(&self, parts: &[String]) -> Option<ModPath> {
        (0..=parts.len())
            .rev()
            .map(|n| parts[..n].to_vec())
            .find(|p| self.modules.contains_key(p))
    }
}

/// The patterns an import is found by.
struct Patterns {
    comment: Regex,
    crate_path: Regex,
    group: Regex,
    super_path: Regex,
}

impl Patterns {
    fn new() -> Patterns {
        let re = |p: &str| Regex::new(p).expect("a valid pattern");
        Patterns {
            comment: re(r"//[^\n]*"),
            crate_path: re(r"\bcrate::((?:\w+::)*\w+)"),
            group: re(r"\b(crate|(?:super::)*super)::((?:\w+::)*)\{"),
            super_path: re(r"\b((?:super::)+)((?:\w+::)*\w+)"),
        }
    }
}

/// The items of the brace group `text` starts with, split at its top-level commas.
fn top_level_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 1;
    for (i, ch) in text.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    items.push(&text[start..i]);
                    return items;
                }
            }
            ',' if depth == 1 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

fn split_path(path: &str) -> Vec<String> {
    path.split("::")
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// `m` without its last `up` names (the crate root when that is all of them or more).
fn parent(m: &ModPath, up: usize) -> ModPath {
    m[..m.len().saturating_sub(up)].to_vec()
}

/// Whether one module contains the other (or they are the same).
fn related(a: &ModPath, b: &ModPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "lib".to_string()
    } else {
        m.join("/")
    }
}

/// A file's module path below `src`: `top/ui.rs` is `top/ui`, `top/mod.rs` and `top.rs` are
/// `top`, `lib.rs` and `main.rs` the root.
fn mod_path(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| matches!(l.as_str(), "mod" | "lib" | "main"))
    {
        parts.pop();
    }
    parts
}

/// The text without its `#[cfg(test)] mod name { ... }` blocks.
fn strip_tests(text: &str) -> String {
    let start = Regex::new(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{").expect("a valid pattern");
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in start.find_iter(text) {
        if m.start() < at {
            continue;
        }
        out.push_str(&text[at..m.start()]);
        let mut depth = 0usize;
        let mut end = text.len();
        for (i, ch) in text[m.end() - 1..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = m.end() - 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        at = end;
    }
    out.push_str(&text[at.min(text.len())..]);
    out
}

/// The strongly connected components of `graph` (Tarjan's algorithm, without recursion).
fn strongly_connected(graph: &BTreeMap<ModPath, Vec<ModPath>>) -> Vec<Vec<ModPath>> {
    let nodes: Vec<&ModPath> = graph.keys().collect();
    let index_of: HashMap<&ModPath, usize> =
        nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let next: Vec<Vec<usize>> = nodes
        .iter()
        .map(|m| {
            graph[*m]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = nodes.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on_stack, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, how many of its successors were visited)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut seen)) = work.last_mut() {
            if *seen == 0 && index[v] == usize::MAX {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = next[v].get(*seen) {
                *seen += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Circles of files allowed for now: none (the CLI's restructuring removed the last).
    const ALLOWED_CIRCLES: &[(&str, &str)] = &[];

    /// Commands of the CLI allowed to import another for now: none (the CLI's restructuring
    /// moved what they shared into layers below them).
    const ALLOWED_CROSS_COMMAND: &[&str] = &[];

    /// Functions over [`LONGEST_FUNCTION`] lines allowed for now, by file and name: none (the
    /// CLI's restructuring shortened the last).
    const ALLOWED_LONG_FUNCTIONS: &[(&str, &str)] = &[];

    fn workspace() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Every crate of the workspace (`crates/*` and `xtask`), by its directory relative to the
    /// workspace.
    fn crates() -> Vec<(String, CrateSource)> {
        let root = workspace();
        crate::tidy::crate_folders(&root)
            .into_iter()
            .map(|d| {
                let source = CrateSource::read(&root.join(&d).join("src"));
                (d, source)
            })
            .collect()
    }

    /// Fails on what `found` holds beyond `allowed` (a new break of the rule: `fix` says what
    /// to do), and on the entries of `allowed` it no longer holds (fixed: to be taken off
    /// `list`, so that the list only shrinks).
    fn check(
        found: BTreeSet<String>,
        allowed: impl Iterator<Item = String>,
        fix: &str,
        list: &str,
    ) {
        let allowed: BTreeSet<String> = allowed.collect();
        let new: Vec<_> = found.difference(&allowed).collect();
        let fixed: Vec<_> = allowed.difference(&found).collect();
        assert!(new.is_empty(), "{fix}: {new:#?}");
        assert!(fixed.is_empty(), "fixed: take them off {list}: {fixed:#?}");
    }

    #[test]
    fn no_files_import_each_other_in_a_circle() {
        let mut found = BTreeSet::new();
        for (dir, source) in crates() {
            found.extend(source.circles().into_iter().map(|c| format!("{dir}: {c}")));
        }
        check(
            found,
            ALLOWED_CIRCLES.iter().map(|(dir, c)| format!("{dir}: {c}")),
            "files that import each other in a circle (move what they share into a module \
             below them)",
            "ALLOWED_CIRCLES",
        );
    }

    #[test]
    fn no_command_imports_another() {
        let cli = CrateSource::read(&workspace().join("crates/gpuscope/src"));
        let commands = cli.commands();
        assert!(commands.len() >= 9, "found the commands: {commands:?}");
        let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
        check(
            cli.cross_command_imports(&commands),
            ALLOWED_CROSS_COMMAND.iter().map(|s| s.to_string()),
            "a command imports another (put what they share in a layer below the commands)",
            "ALLOWED_CROSS_COMMAND",
        );
    }

    /// The shared layers of the CLI (present/, fleet/, source.rs, ...) stand below the
    /// commands: none imports one.
    #[test]
    fn no_shared_layer_of_the_cli_imports_a_command() {
        let cli = CrateSource::read(&workspace().join("crates/gpuscope/src"));
        let found = cli.layer_imports_of_commands();
        assert!(
            found.is_empty(),
            "a shared layer imports a command (move what it needs below the commands): \
             {found:#?}"
        );
    }

    #[test]
    fn no_function_is_longer_than_150_lines() {
        let root = workspace();
        let mut found = BTreeSet::new();
        let in_crates = crates()
            .into_iter()
            .filter(|(d, _)| d.starts_with("crates/"));
        for (_, source) in in_crates {
            for (file, name, _) in source.long_functions(LONGEST_FUNCTION) {
                let rel = file.strip_prefix(&root).unwrap_or(&file).display();
                found.insert(format!("{rel} {name}"));
            }
        }
        check(
            found,
            ALLOWED_LONG_FUNCTIONS
                .iter()
                .map(|(f, name)| format!("{f} {name}")),
            &format!("functions over {LONGEST_FUNCTION} lines (split them by what they do)"),
            "ALLOWED_LONG_FUNCTIONS",
        );
    }

    /// The reader itself, on small crates: what is an import, a circle, a long function.
    #[test]
    fn the_reader_finds_circles_cross_imports_and_long_functions() {
        let circle = CrateSource::from_texts(&[
            ("lib.rs", "mod a; mod b; mod c; mod d;"),
            (
                "a.rs",
                "use crate::b::Thing;\n// use crate::d; is a comment",
            ),
            ("b.rs", "pub fn f() { super::c::g() }"),
            ("c.rs", "use crate::{a::X, d};"),
            ("d.rs", "#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n"),
        ]);
        assert_eq!(circle.circles(), BTreeSet::from(["a, b, c".to_string()]));
        // A parent and its child import each other freely.
        let nested = CrateSource::from_texts(&[
            ("top/mod.rs", "mod ui; use self::ui::Screen;"),
            (
                "top/ui.rs",
                "use super::Refresh; use crate::snapshot::View;",
            ),
            ("snapshot.rs", "use crate::top::{ui::Screen, Refresh};"),
        ]);
        assert_eq!(
            nested.circles(),
            BTreeSet::from(["snapshot, top/ui".to_string()])
        );
        assert_eq!(
            nested.cross_command_imports(&["snapshot", "top"]),
            BTreeSet::from([
                "snapshot -> top".to_string(),
                "snapshot -> top/ui".to_string(),
                "top/ui -> snapshot".to_string()
            ])
        );
        // The CLI's layers: commands under commands/, the dispatch in cli/, the rest shared.
        let layered = CrateSource::from_texts(&[
            ("commands/mod.rs", "pub mod info; pub mod top;"),
            (
                "commands/info.rs",
                "use crate::present::time::local_datetime;",
            ),
            (
                "commands/top/mod.rs",
                "mod ui; use crate::commands::info::Args;",
            ),
            (
                "commands/top/ui.rs",
                "use super::super::info::x; use super::App;",
            ),
            ("present/mod.rs", "pub mod json; pub mod time;"),
            ("present/time.rs", ""),
            (
                "present/json.rs",
                "use crate::commands::top::Refresh; use super::time;",
            ),
            ("cli/mod.rs", "use crate::commands::{info, top};"),
        ]);
        assert_eq!(layered.commands(), ["info", "top"]);
        assert_eq!(
            layered.cross_command_imports(&["info", "top"]),
            BTreeSet::from([
                "commands/top -> commands/info".to_string(),
                "commands/top/ui -> commands/info".to_string()
            ])
        );
        assert_eq!(
            layered.layer_imports_of_commands(),
            BTreeSet::from(["present/json -> commands/top".to_string()])
        );
        let body = "    let x = 1;\n".repeat(LONGEST_FUNCTION - 2);
        let long = CrateSource::from_texts(&[(
            "lib.rs",
            &format!(
                "pub fn long() {{\n{body}}}\nfn short() {{\n}}\nfn longer() {{\n{body}    x;\n}}\n\
                 #[cfg(test)]\nmod tests {{\n    fn in_a_test() {{\n{body}{body}    }}\n}}\n"
            ),
        )]);
        let found: Vec<(String, usize)> = long
            .long_functions(LONGEST_FUNCTION)
            .into_iter()
            .map(|(_, name, len)| (name, len))
            .collect();
        assert_eq!(found, [("longer".to_string(), LONGEST_FUNCTION + 1)]);
    }
}
