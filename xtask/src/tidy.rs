//! Invariants of the source tree, checked by ordinary tests (`cargo test -p xtask`).
//!
//! * Every Rust file opens with a `//!` comment (or `#![doc = ...]`) that says what it is for.
//! * No `.unwrap()` or `.expect(` in library and program code outside test modules: anything
//!   that comes from outside (backend, files, environment, user input) is handled as an error.
//!   Tests, benches and examples may unwrap.
//! * The release version is said once, `[workspace.package] version` in Cargo.toml; what must
//!   repeat it (the requirements on the workspace's own crates, the image the DaemonSet names)
//!   says the same (docs/releasing.md).
//! * No files of a crate import each other in a circle, no command of the CLI imports another,
//!   no function in `crates/` is over 150 lines (`tidy/structure.rs`, with the CLI's allow-lists).
//! * Each crate's integration tests are one test binary, and every file in its folder is a module
//!   of it (`tidy/test_binaries.rs`).
//! * Every NVML function a query calls has a real GPU's price in `fixtures/costs/`, or says why
//!   not (`tidy/costs.rs`): fake-nvml charges nothing for a function its profile does not name.
//!
//! What the compiler can check is not here but in `[workspace.lints]` of Cargo.toml: docs on
//! public items, no `dbg!` (clippy's `dbg_macro`, denied in CI), each unsafe operation in its
//! own block.

#[cfg(test)]
mod structure;

/// Every `.rs` file under `dir`, its folders walked in turn; `target` and hidden folders (a
/// build's output, `.git`) are passed over.
#[cfg(test)]
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The workspace's crate folders under `root`, relative to it (`crates/<name>`, sorted, and
/// `xtask` last).
#[cfg(test)]
fn crate_folders(root: &std::path::Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is there")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| format!("crates/{}", e.file_name().to_string_lossy()))
        .collect();
    dirs.sort();
    dirs.push("xtask".to_string());
    assert!(dirs.len() >= 10, "found the crates: {dirs:?}");
    dirs
}

#[cfg(test)]
mod test_binaries;

#[cfg(test)]
mod costs;

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::rust_files;

    fn workspace() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn all_rust_files() -> Vec<PathBuf> {
        let mut files = Vec::new();
        rust_files(&workspace().join("crates"), &mut files);
        rust_files(&workspace().join("xtask"), &mut files);
        files.sort();
        assert!(files.len() > 20, "found the sources");
        files
    }

    /// Library and program code: under a `src/` directory, and not a test-only file.
    fn is_product_code(path: &Path) -> bool {
        let text = path.to_string_lossy();
        text.contains("/src/")
            && !text.contains("/tests/")
            && !text.ends_with("/tests.rs")
            && !text.contains("/benches/")
            && !text.contains("/examples/")
    }

    #[test]
    fn every_rust_file_says_what_it_is_for() {
        let bad: Vec<String> = all_rust_files()
            .into_iter()
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let first = text.lines().next().unwrap_or("");
                !(first.starts_with("//!") || first.starts_with("#![doc"))
            })
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            bad.is_empty(),
            "files without a //! opening comment: {bad:#?}"
        );
    }

    #[test]
    fn no_unwrap_or_expect_outside_tests() {
        let unwrap = [".unw", "rap()"].concat();
        let expect = [".exp", "ect("].concat();
        let mut bad = Vec::new();
        for path in all_rust_files().into_iter().filter(|p| is_product_code(p)) {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            // Everything from the first test module on is test code (a file that is test
            // code throughout says so with an inner `#![cfg(test)]`).
            let cut = ["#[cfg(test)]", "#[cfg(all(test", "#![cfg(test)]"]
                .iter()
                .filter_map(|m| text.find(m))
                .min()
                .unwrap_or(text.len());
            let product = &text[..cut];
            for (i, line) in product.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains(&unwrap) || code.contains(&expect) {
                    bad.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "unwrap/expect outside tests:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn the_version_is_said_once_and_what_repeats_it_agrees() {
        let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
        let package = manifest.split("[workspace.package]").nth(1).unwrap();
        let version = package
            .lines()
            .find_map(|l| l.strip_prefix("version = \""))
            .and_then(|v| v.strip_suffix('"'))
            .expect("[workspace.package] has a version");
        let own: Vec<&str> = manifest
            .lines()
            .filter(|l| l.contains("path = \"crates/"))
            .collect();
        assert!(own.len() >= 5, "{own:?}");
        for line in own {
            assert!(
                line.contains(&format!("version = \"{version}\"")),
                "Cargo.toml: {line}: the requirement is not the workspace's version {version}"
            );
        }
        let daemonset =
            std::fs::read_to_string(workspace().join("deploy/kubernetes/daemonset.yaml")).unwrap();
        assert!(
            daemonset.contains(&format!("image: gpuscope:{version}\n")),
            "deploy/kubernetes/daemonset.yaml does not name gpuscope:{version}"
        );
    }
}
