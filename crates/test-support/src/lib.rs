//! Test support, not published, for what both the CLI's integration tests and xtask (its
//! benchmarks and its importer's tests) need, so that each is written once:
//!
//! - [`loopback`]: hostile clients of `gpuscope export` on loopback (a connection from a chosen
//!   127.0.0.N, a kept-alive `GET /metrics`, basic auth, web configs, a wrong-password flood and
//!   a flood of half-open sockets), used by `crates/gpuscope/tests/cli/export_attacks.rs` and
//!   `cargo xtask bench-export-attacks`;
//! - [`smi_xml`]: small readers of `nvidia-smi -q -x`'s text (no XML parser), which share no
//!   code with the importer they check, used by `crates/gpuscope/tests/cli/reference_dumps.rs`
//!   and xtask's `import_smi` tests.

pub mod loopback;
pub mod smi_xml;
