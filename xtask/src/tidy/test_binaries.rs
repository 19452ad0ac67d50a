//! Each crate's integration tests are one test binary (docs/testing.md, "How the tests are laid
//! out"): cargo makes every `tests/*.rs` and every `tests/<name>/main.rs` a binary of its own,
//! compiled and linked on its own, so a crate has one, `tests/<name>/main.rs` with a module per
//! area (or a single `tests/<name>.rs`). And every `.rs` file in such a folder is a module of
//! its binary: rustc compiles only the files that a `mod` declares, so the tests of a file that
//! none declares would silently never run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The test binaries cargo makes of a `tests` folder: the stems of `tests/*.rs` and the names
/// of the folders that hold a `main.rs`.
fn binaries(tests: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(tests) else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && path.join("main.rs").is_file() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            out.insert(stem.to_string());
        }
    }
    out
}

/// The modules a file's text declares from other files: each one's name and `#[path]`, if any.
/// (Modules written inline, `mod name { ... }`, are not followed.)
fn declared(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path") {
            path = rest.split('"').nth(1).map(str::to_string);
            continue;
        }
        if line.starts_with("#[") || line.starts_with("//") || line.is_empty() {
            continue;
        }
        let rest = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
            .unwrap_or(line);
        if let Some(name) = rest.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            out.push((name.trim().to_string(), path.take()));
        }
        path = None;
    }
    out
}

/// `path` with its `.` and `..` taken out, as far as the path itself tells.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The files of `files` (path and text) that `mod` declarations reach from `main`, the way
/// rustc looks for them: beside a `main.rs` or `mod.rs`, in a folder named after any other
/// file, and a `#[path]` from the declaring file's folder.
fn reached(main: &Path, files: &BTreeMap<PathBuf, String>) -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::from([main.to_path_buf()]);
    let mut todo = vec![main.to_path_buf()];
    while let Some(file) = todo.pop() {
        let Some(text) = files.get(&file) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new(""));
        let owns_folder = matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("main.rs" | "mod.rs" | "lib.rs")
        );
        let below = if owns_folder {
            dir.to_path_buf()
        } else {
            dir.join(file.file_stem().unwrap_or_default())
        };
        for (name, path) in declared(text) {
            let candidates = match path {
                Some(p) => vec![dir.join(p)],
                None => vec![
                    below.join(format!("{name}.rs")),
                    below.join(&name).join("mod.rs"),
                ],
            };
            for c in candidates.iter().map(|c| lexical(c)) {
                if files.contains_key(&c) && seen.insert(c.clone()) {
                    todo.push(c);
                }
            }
        }
    }
    seen
}

/// Every `.rs` file under `dir`, with its text.
fn read_rust_files(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let mut paths = Vec::new();
    super::rust_files(dir, &mut paths);
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        out.insert(lexical(&path), text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> PathBuf {
        lexical(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
    }

    #[test]
    fn each_crate_has_one_test_binary_and_every_file_of_it_is_a_module() {
        let root = workspace();
        let mut problems = Vec::new();
        for krate in crate::tidy::crate_folders(&root) {
            let tests = root.join(&krate).join("tests");
            let all = binaries(&tests);
            if all.len() > 1 {
                problems.push(format!(
                    "{krate} has {} test binaries ({}): one per crate, each file a module of \
                     tests/<name>/main.rs (docs/testing.md)",
                    all.len(),
                    all.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            for binary in &all {
                let main = tests.join(binary).join("main.rs");
                if !main.is_file() {
                    continue;
                }
                let mut files = BTreeMap::new();
                read_rust_files(&tests.join(binary), &mut files);
                let reached = reached(&lexical(&main), &files);
                for file in files.keys().filter(|f| !reached.contains(*f)) {
                    let rel = file.strip_prefix(&root).unwrap_or(file).display();
                    problems.push(format!(
                        "{rel}: no `mod` of {krate}/tests/{binary}/main.rs declares it, so its \
                         tests never build or run"
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn the_reader_follows_mod_declarations_as_rustc_does() {
        let files: BTreeMap<PathBuf, String> = [
            (
                "t/main.rs",
                "//! Doc.\n\nmod support;\npub mod a;\n#[cfg(unix)]\nmod b;\n",
            ),
            (
                "t/support/mod.rs",
                "pub mod cli;\n#[path = \"../../common/x.rs\"]\npub mod x;\n",
            ),
            ("t/support/cli.rs", "fn f() {}\n"),
            ("t/a.rs", "mod inner;\nmod inline {\n    fn g() {}\n}\n"),
            ("t/a/inner.rs", ""),
            (
                "t/b/mod.rs",
                "#[path = \"elsewhere.rs\"]\n#[cfg(test)]\nmod c;\n",
            ),
            ("t/b/elsewhere.rs", ""),
            ("common/x.rs", ""),
            // Declared by nobody; and `inner` is looked for beside a.rs's folder, not here.
            ("t/forgotten.rs", ""),
            ("t/inner.rs", ""),
        ]
        .into_iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
        let reached = reached(Path::new("t/main.rs"), &files);
        let unreached: Vec<_> = files
            .keys()
            .filter(|f| !reached.contains(*f))
            .map(|f| f.display().to_string())
            .collect();
        assert_eq!(unreached, ["t/forgotten.rs", "t/inner.rs"]);
        assert_eq!(
            declared("// mod commented;\nmod a;\npub(crate) mod b;\nmod c {\n}\nuse crate::d;\n"),
            [("a".to_string(), None), ("b".to_string(), None)]
        );
    }
}
