//! fake-nvml's integration tests, one module per area, built as one test binary (cargo compiles
//! and links it once, not once per file). Run one module with
//! `cargo test -p fake-nvml --test it -- abi::`. xtask's tidy checks that every file here is a
//! module of this binary.
//!
//! The library keeps process-wide state (NVML's initialisation, the served frame) and reads
//! its settings from the environment, so every test that calls it holds [`common::lock`] for
//! its whole run, sets the variables it wants under it, and leaves none set when it lets go.
//! A test that loads the shared library installs a copy in a directory named for itself when
//! it needs state of its own (`event_listener`: the hang variable, read once per loaded copy).

mod common;

mod abi;
mod cdylib;
mod costs;
mod event_listener;
mod nvml_backend;
