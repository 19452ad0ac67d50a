//! gpu-devices' integration tests, one module per area, built as one test binary (cargo
//! compiles and links it once, not once per file). Run one module with
//! `cargo test -p gpu-devices --test it -- cuda_visible::`. xtask's tidy checks that every file
//! here is a module of this binary.
//!
//! The tests share one process. The two that need the process's environment set from its
//! start (`igpu_global`: the shared context, opened once per process from the environment;
//! `libcuda_fake`: a libcuda child that inherits it) run again in a process of their own
//! ([`common::in_own_process`], through `common::own_process!`) rather than call `std::env::set_var` beside running tests.

mod common;

mod cuda_visible;
mod devices;
mod igpu_global;
mod igpu_seed;
mod igpu_units;
mod libcuda_fake;
mod nvitop_examples;
mod properties;
mod query_plan;
