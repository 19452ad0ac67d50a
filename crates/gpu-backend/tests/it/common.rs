//! Helpers shared by the integration tests: the scenario fixtures of fixtures/.

#![allow(dead_code)]

use gpu_backend::Fixture;

pub use fixture_mutations::fixtures_dir;

/// Every scenario fixture, by file name, sorted. Fails if there are none: the tests below are
/// only meaningful over real scenarios.
pub fn all_fixtures() -> Vec<(String, Fixture)> {
    fixture_mutations::scenario_paths()
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let f = Fixture::load(&p).unwrap_or_else(|e| panic!("{e}"));
            (name, f)
        })
        .collect()
}

/// [`all_fixtures`], read once for all the proptest cases of a test file.
pub fn fixtures_once() -> &'static [(String, Fixture)] {
    static ALL: std::sync::OnceLock<Vec<(String, Fixture)>> = std::sync::OnceLock::new();
    ALL.get_or_init(all_fixtures)
}

/// One scenario fixture by file stem.
pub fn fixture(stem: &str) -> Fixture {
    let p = fixtures_dir().join(format!("{stem}.json"));
    Fixture::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

/// A directory of its own under the test target's temporary folder (`TAG-PID`, emptied first),
/// removed when dropped.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    /// The directory for `tag`, created empty.
    pub fn new(tag: &str) -> Scratch {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The directory itself.
    pub fn dir(&self) -> &std::path::Path {
        &self.0
    }

    /// `name` inside the directory.
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
