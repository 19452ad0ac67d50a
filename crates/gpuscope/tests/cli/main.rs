//! The CLI's integration tests: the built `gpuscope` binary (`CARGO_BIN_EXE_gpuscope`) run as
//! its users run it, one module per command or area. They are one test binary, so cargo
//! compiles and links them once instead of once per file; run one module with
//! `cargo test -p gpuscope --test cli -- smi::` (docs/testing.md).
//!
//! The tests share one process, so none changes what the process shares: a test sets the
//! environment it wants on the command it starts (`support::cli::command`), never with
//! `std::env::set_var`; it writes into a directory or file named for itself; and tests that
//! must not overlap hold a lock (doctor's among themselves; `support::task_limit`'s, whose
//! limits could count each other's tasks). xtask's tidy checks that every file here is a
//! module of this binary.

mod support;

mod bounds;
mod colour;
mod doctor;
mod doctor_driver;
mod error_texts;
mod escape;
mod export_attacks;
mod export_clients;
mod export_metrics;
mod export_web;
mod fixture_input;
mod fleet;
mod gpulink;
mod grammar;
mod info;
mod log;
mod operator_files;
mod out_of_range_values;
mod pods;
mod pods_live;
mod query_plans;
mod real_h100;
mod record;
mod reference_dumps;
mod remote;
mod security_doc;
mod select;
mod shell;
mod smi;
mod smi_h200;
mod snapshot;
mod source_rules;
mod stat;
mod top;
mod top_tmux;
