//! gpu-backend's integration tests, one module per area, built as one test binary (cargo compiles
//! and links it once, not once per file). Run one module with
//! `cargo test -p gpu-backend --test it -- compat::`. The recordings that `compat` loads are
//! data beside this folder, in tests/compat/. xtask's tidy checks that every file here is a
//! module of this binary.

mod common;

mod broken_fixtures;
mod compat;
mod concurrency;
mod containers;
mod files;
mod fixture_files;
mod query_table_doc;
mod replay_loop;
mod round_trip;
