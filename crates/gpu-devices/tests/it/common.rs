//! Helpers shared by the integration tests: the scenario fixtures of fixtures/, served by a
//! replay backend on a manual clock; a test run again in a process of its own.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::Command;
use std::sync::Arc;

use gpu_backend::{Fixture, ReplayBackend};
use gpu_devices::Context;

pub use fixture_mutations::fixtures_dir;

/// The stems of every scenario fixture, sorted.
pub fn all_stems() -> Vec<String> {
    fixture_mutations::scenario_paths()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// One scenario fixture by file stem.
pub fn fixture(stem: &str) -> Fixture {
    let p = fixtures_dir().join(format!("{stem}.json"));
    Fixture::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

/// A context on a fixture, with the replay backend kept to move its frame.
pub fn open(stem: &str) -> (Context, Arc<ReplayBackend>) {
    open_fixture(fixture(stem))
}

/// A context on a fixture value.
pub fn open_fixture(f: Fixture) -> (Context, Arc<ReplayBackend>) {
    let backend = Arc::new(ReplayBackend::new(f));
    let ctx = Context::from_backend(backend.clone()).unwrap_or_else(|e| panic!("{e}"));
    (ctx, backend)
}

/// Set, in the child that [`in_own_process`] starts, to the path of the test it runs.
const OWN_PROCESS: &str = "GPU_DEVICES_TEST_IN_OWN_PROCESS";

/// Runs test `name` of module `module` (its `module_path!()`) again in a process of its own:
/// this test binary, asked for that one test, with `env` added to its environment. In that
/// child it returns `true` at once, and the test goes on; in the test's first run it waits for
/// the child and returns `false` when the child ran the test and passed, and fails otherwise
/// (with the child's output).
///
/// For a test that needs the process's environment set from its start: the tests of this
/// binary share one process, where `std::env::set_var` would race with every other test
/// reading the environment, and a setting the library reads once per process would stay.
pub fn in_own_process(module: &str, name: &str, env: &[(&str, &OsStr)]) -> bool {
    // The path the test harness knows the test by: the module's, less the crate's name.
    let path = match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    };
    if std::env::var_os(OWN_PROCESS).is_some_and(|p| p == path.as_str()) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([path.as_str(), "--exact", "--test-threads=1"])
        .env(OWN_PROCESS, &path)
        .envs(env.iter().copied())
        .output()
        .expect("the test binary starts again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{path} in a process of its own: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// In the test `$name` of the calling module: runs it again in a process of its own with the
/// environment `$env` ([`in_own_process`]), and returns from the test unless this is that
/// process, so that what follows runs only there.
macro_rules! own_process {
    ($name:ident, $env:expr) => {
        if !$crate::common::in_own_process(module_path!(), stringify!($name), $env) {
            return;
        }
    };
}
pub(crate) use own_process;
