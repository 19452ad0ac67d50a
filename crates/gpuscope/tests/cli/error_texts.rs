//! Error texts that name what the user gave and where it came from (issue 34): the option or
//! the environment variable, the file, and what is wrong with it in words, with a hint where
//! there is a known next step.

use std::path::PathBuf;
use std::process::Output;

use crate::support::cli;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks that `out` exited with `code` and a stderr that says `says` and never `never`.
fn assert_refusal(out: &Output, code: i32, says: &str, never: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(says), "{err}");
    assert!(!err.contains(never), "{err}");
}

/// A missing fixture said "at `.`: cannot read the file" (a JSON path for a file that is not
/// there); it names the option and the file, and says "no such file".
#[test]
fn a_missing_fixture_names_the_option_the_file_and_no_such_file() {
    let out = cli::run(&["snapshot", "--fixture", "/nonexistent-gpuscope/f.json"]);
    let says = "--fixture /nonexistent-gpuscope/f.json: no such file";
    assert_refusal(&out, 2, says, "at `.`");
}

/// `GPUSCOPE_FIXTURE=/nope` did not name the variable: a user who never typed `--fixture`
/// could not tell where the name came from.
#[test]
fn a_fixture_from_the_environment_names_the_variable() {
    let out = cli::command(&["snapshot"])
        .env("GPUSCOPE_FIXTURE", "/nope")
        .output()
        .expect("gpuscope runs");
    assert_refusal(&out, 2, "GPUSCOPE_FIXTURE=/nope: no such file", "--fixture");
}

/// nvidia-smi's XML given as a fixture is named as such, with the command that imports it.
#[test]
fn nvidia_smi_xml_as_a_fixture_points_at_import_smi() {
    let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/h200-real/nvidia-smi-q-x.idle.xml");
    let out = cli::run(&["info", "--fixture", xml.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nvidia-smi's XML"), "{err}");
    assert!(err.contains("cargo xtask import-smi"), "{err}");
}

/// `--nvml-lib /nonexistent` asked "No NVIDIA driver on this machine?": the library named is
/// not there, which is another matter. Still nothing to show (exit 4, docs/exit-codes.md).
#[test]
fn nvml_lib_that_is_not_there_says_so_naming_the_option_or_variable() {
    let lib = "/nonexistent-gpuscope/libnvidia-ml.so.1";
    let by_option = cli::run(&["snapshot", "--nvml-lib", lib]);
    let by_env = cli::command(&["snapshot"])
        .env("GPUSCOPE_NVML_LIB", lib)
        .output()
        .expect("gpuscope runs");
    for (out, named) in [
        (by_option, format!("--nvml-lib {lib}")),
        (by_env, format!("GPUSCOPE_NVML_LIB={lib}")),
    ] {
        let says = format!("{named}: no library was found at that path");
        assert_refusal(&out, 4, &says, "No NVIDIA driver");
    }
}
