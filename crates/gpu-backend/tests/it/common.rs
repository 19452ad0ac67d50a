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
