//! docs/security.md's table of value ranges ("Values") is `gpu_fleet::values::RANGES`: each
//! family's row says what the code accepts and why, and the table has no row the code lacks.

use gpu_fleet::values::{PID_SHOWN, RANGES};

/// The rows of the table under `### Values`: (first cell, second cell, third cell).
fn rows() -> Vec<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/security.md");
    let text = std::fs::read_to_string(path).expect("docs/security.md");
    let section = text
        .split("\n### Values\n")
        .nth(1)
        .expect("a Values section")
        .split("\n#")
        .next()
        .unwrap_or_default();
    section
        .lines()
        .skip_while(|l| !l.starts_with("| family |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            assert_eq!(cells.len(), 3, "{l}");
            (cells[0].clone(), cells[1].clone(), cells[2].clone())
        })
        .collect()
}

#[test]
fn the_documented_ranges_are_the_ones_the_fleet_applies() {
    let mut expected: Vec<(String, String, String)> = RANGES
        .iter()
        .map(|r| {
            (
                format!("`{}`", r.family),
                r.shown.to_string(),
                r.why.to_string(),
            )
        })
        .collect();
    let pid = rows()
        .into_iter()
        .find(|(what, _, _)| what.contains("`pid` label"))
        .expect("a row for the pid label");
    assert_eq!(pid.1, PID_SHOWN);
    expected.push(pid);
    assert_eq!(rows(), expected);
}
