//! gpu-select's integration tests, one module per area, built as one test binary (cargo compiles
//! and links it once, not once per file). Run one module with
//! `cargo test -p gpu-select --test it -- select::`. xtask's tidy checks that every file here
//! is a module of this binary.

mod nvitop_examples;
mod select;
