//! The query table in docs/fixture-format.md is the one the code declares
//! (`gpu_backend::for_each_query!`): this test fails when they differ. Run it with
//! `UPDATE_DOCS=1` to write the table into the page.

use std::path::PathBuf;

const BEGIN: &str = "<!-- query-table:begin (generated: UPDATE_DOCS=1 cargo test -p gpu-backend --test it -- query_table_doc) -->\n";
const END: &str = "<!-- query-table:end -->";

fn page() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/fixture-format.md")
}

#[test]
fn the_documented_query_table_is_the_declared_one() {
    let path = page();
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find(BEGIN).expect("the page has the begin marker") + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .expect("the page has the end marker");
    let expected = gpu_backend::query::markdown_table();
    if text[start..end] == expected {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{}{}", &text[..start], expected, &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "docs/fixture-format.md's query table differs from the code's; run \
         `UPDATE_DOCS=1 cargo test -p gpu-backend --test it -- query_table_doc`. \
         Expected:\n{expected}"
    );
}
