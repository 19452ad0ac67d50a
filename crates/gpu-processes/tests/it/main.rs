//! gpu-processes' integration tests, one module per area, built as one test binary (cargo
//! compiles and links it once, not once per file). Run one module with
//! `cargo test -p gpu-processes --test it -- over_fixtures::`. xtask's tidy checks that every
//! file here is a module of this binary.

mod fixture_mutations;
mod nvitop_examples;
mod over_fixtures;
mod process_handles;
mod real_h100_utilization;
